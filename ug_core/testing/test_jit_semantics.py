"""ug.jit replays compute what the Python function computes, or refuse clearly (issue 11).

Every test compares a jitted function, called several times, with what running the function
eagerly gives: writes to arguments and to tensors of the enclosing scope happen on every call,
captured tensors are read when the call is made, nested jitted functions compose, reading a
traced value to Python raises ug.TracerValueError, and arguments and results are pytrees.
"""
import collections
import gc
import weakref

import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.data import rand

# --------------------------------------------------------------------------- writes
def test_assign_to_argument_applies_on_every_call(device, close):
    def step(w):
        w.assign(w + 1)

    jitted = ug.jit(step)
    w = ug.tensor(np.zeros(3, np.float32), device=device)
    for _ in range(4):
        assert jitted(w) is None
    close(w, np.full(3, 4, np.float32))
    other = ug.tensor(np.full(3, 10, np.float32), device=device)  # another tensor: the same trace
    jitted(other)
    close(other, np.full(3, 11, np.float32))
    close(w, np.full(3, 4, np.float32))
    assert jitted.trace_count == 1


def test_setitem_on_argument_and_result_match_eager(device, close):
    def step(w, x):
        w[1:3] = x * 2
        return w.sum() + x.sum()

    jitted = ug.jit(step)
    start = rand((5,))
    w_eager = ug.tensor(start, device=device)
    w_jit = ug.tensor(start, device=device)
    for _ in range(4):
        x = rand((2,))
        want = step(w_eager, ug.tensor(x, device=device)).numpy()
        got = jitted(w_jit, ug.tensor(x, device=device))
        close(got, want, rtol=1e-5, atol=1e-5)
        close(w_jit, w_eager.numpy())


def test_write_to_argument_keeps_earlier_reads(device, close):
    # a tensor read from the argument before the call keeps its value (value semantics): the
    # replay writes a new buffer, not the one the earlier read still holds
    jitted = ug.jit(lambda w: w.assign(w * 3))
    a = rand((4,))
    w = ug.tensor(a, device=device)
    jitted(w)
    before = ug.tensor(w)   # the same value as w now (a copy)
    lazy = w + 0            # a lazy read of it
    returned = jitted(w)
    assert returned is w    # the function returns its argument: the call's tensor, written
    close(w, a * 9)
    close(before, a * 3)
    close(lazy, a * 3)


def test_write_to_captured_tensor_applies_on_every_call(device, close):
    total = ug.tensor(np.zeros(2, np.float32), device=device)
    calls = ug.tensor(np.zeros((), np.int32), device=device)

    @ug.jit
    def accumulate(x):
        total.assign(total + x.sum(axis=0))
        calls.assign(calls + 1)
        return x * 2

    want = np.zeros(2, np.float32)
    for i in range(4):
        x = rand((3, 2))
        want += x.sum(axis=0)
        close(accumulate(ug.tensor(x, device=device)), x * 2)
        close(total, want, rtol=1e-5, atol=1e-5)
        close(calls, np.array(i + 1, np.int32))
    assert accumulate.trace_count == 1


def test_writes_to_a_tensor_passed_twice(device, close):
    # one tensor in two places is written twice, as when run eagerly
    def step(a, b):
        a.assign(a + 1)
        b.assign(b * 2)

    jitted = ug.jit(step)
    for _ in range(2):
        t_eager = ug.tensor(np.ones(3, np.float32), device=device)
        step(t_eager, t_eager)
        t = ug.tensor(np.ones(3, np.float32), device=device)
        jitted(t, t)
        close(t, t_eager.numpy())
        p, q = ug.tensor(np.ones(3, np.float32), device=device), ug.tensor(np.ones(3, np.float32), device=device)
        jitted(p, q)
        close(p, np.full(3, 2, np.float32))
        close(q, np.full(3, 2, np.float32))


# --------------------------------------------------------------------------- captured tensors
def test_captured_weights_are_read_at_every_call(device, close):
    w0, b0 = rand((4, 3)), rand((3,))
    w = ug.tensor(w0, device=device)
    b = ug.tensor(b0, device=device)
    forward = ug.jit(lambda x: x @ w + b)         # a matmul and its epilogue, or two steps
    project = ug.jit(lambda x: x @ w)             # the single-matmul replay
    scale = ug.jit(lambda x: x * b)               # the single-kernel replay
    want_w, want_b = w0.copy(), b0.copy()
    x0 = rand((2, 4))
    x = ug.tensor(x0, device=device)
    for step in range(5):
        close(forward(x), x0 @ want_w + want_b, rtol=1e-4, atol=1e-5)
        close(project(x), x0 @ want_w, rtol=1e-4, atol=1e-5)
        close(scale(x[:, :3]), x0[:, :3] * want_b, rtol=1e-5, atol=1e-6)
        g = rand((4, 3))
        w.assign(w - 0.1 * ug.tensor(g, device=device))   # an optimizer step
        want_w = want_w - np.float32(0.1) * g
        b.assign(b * 0.5)
        want_b = want_b * np.float32(0.5)
        if step % 2:
            ug.realize(w, b)    # realized (in place: nothing else reads the old weights) or left lazy
    for f in (forward, project, scale):
        assert f.trace_count == 1


def test_captured_weight_updated_while_an_old_view_is_held(device, close):
    # the old value stays readable through a tensor made before the update: the update is then
    # not in place, and the jitted function must read the tensor it captured, not the old buffer
    w0 = rand((3,))
    w = ug.tensor(w0, device=device)
    alias = +w            # two tensors on one value: which one the function reads shows once they differ
    f = ug.jit(lambda x: x + w)
    x = ug.tensor(np.zeros(3, np.float32), device=device)
    close(f(x), w0)
    w.assign(w * 2)
    close(f(x), w0 * 2)
    close(alias, w0)
    old = +w              # another tensor on the same value
    w.assign(w + 1).realize()
    close(f(x), w0 * 2 + 1)
    close(old, w0 * 2)
    close(alias, w0)


def test_captured_lazy_constant_written_later(device, close):
    c = ug.full((3,), 2.0, device=device)          # lazy: compiled into the kernel
    f = ug.jit(lambda x: x * c)
    x = ug.tensor(np.ones(3, np.float32), device=device)
    close(f(x), np.full(3, 2, np.float32))
    close(f(x), np.full(3, 2, np.float32))
    c.assign(ug.full((3,), 5.0, device=device))
    close(f(x), np.full(3, 5, np.float32))
    c[0] = 7.0
    close(f(x), np.array([7, 5, 5], np.float32))


def test_returning_captured_and_argument_tensors(device, close):
    w = ug.tensor(rand((3,)), device=device)
    f = ug.jit(lambda x: (x, w, x * 2))
    for _ in range(3):
        a = rand((3,))
        x = ug.tensor(a, device=device)
        got_x, got_w, doubled = f(x)
        assert got_x is x and got_w is w
        close(doubled, a * 2)


# --------------------------------------------------------------------------- nesting and reads
def test_nested_jit_composes(device, close):
    inner = ug.jit(lambda a: a + 1)
    outer = ug.jit(lambda a: inner(a * 5) * 2)
    close(inner(ug.tensor(np.zeros(3, np.float32), device=device)), np.ones(3, np.float32))
    for v in (1, 2, 3):
        close(outer(ug.tensor(np.full(3, v, np.float32), device=device)), np.full(3, (v * 5 + 1) * 2, np.float32))
    close(inner(ug.tensor(np.full(3, 4, np.float32), device=device)), np.full(3, 5, np.float32))
    assert inner.trace_count == 1 and outer.trace_count == 1


def test_realize_inside_jit_stays_lazy(device, close):
    def f(a):
        b = (a * 2).realize()
        ug.realize(b, a)
        return b + 1

    jitted = ug.jit(f)
    for v in (1, 2, 3):
        close(jitted(ug.tensor(np.full(3, v, np.float32), device=device)), np.full(3, v * 2 + 1, np.float32))


def test_realized_captured_value_may_be_read(device, close):
    # a realized tensor from outside the function has a value: reading it is allowed, and what
    # is read is part of the trace, like any Python value the function computes
    n = ug.tensor(np.int32(3), device=device)
    f = ug.jit(lambda x: x * int(n))
    close(f(ug.tensor(np.ones(2, np.float32), device=device)), np.full(2, 3, np.float32))


# --------------------------------------------------------------------------- pytrees
def test_tensors_in_containers_and_keywords_are_inputs(device, close):
    @ug.jit
    def f(params, x, *, bias, scale=1.0):
        return (x @ params["w"] + params["layers"][0] + bias) * scale

    for i in range(5):
        w, l0, bias, x = rand((4, 2)), rand((2,)), rand((2,)), rand((3, 4))
        params = {"w": ug.tensor(w, device=device), "layers": [ug.tensor(l0, device=device)]}
        got = f(params, ug.tensor(x, device=device), bias=ug.tensor(bias, device=device), scale=2.0)
        close(got, (x @ w + l0 + bias) * 2, rtol=1e-4, atol=1e-5)
    assert len(f.traces) == 1 and f.trace_count == 1
    got = f(params, ug.tensor(x, device=device), bias=ug.tensor(bias, device=device), scale=3.0)
    close(got, (x @ w + l0 + bias) * 3, rtol=1e-4, atol=1e-5)
    assert f.trace_count == 2


def test_new_dict_wrapped_tensors_are_not_retained(device, close):
    f = ug.jit(lambda d: d["a"] * 2 + d["b"])
    buffers = []
    for i in range(50):
        a, b = rand((64,)), rand((64,))
        d = {"a": ug.tensor(a, device=device), "b": ug.tensor(b, device=device)}
        buffers += [weakref.ref(d["a"].node.buffer), weakref.ref(d["b"].node.buffer)]
        out = f(d)
        if i % 10 == 0:
            close(out, a * 2 + b)
        del d, out
    gc.collect()
    assert f.trace_count == 1 and len(f.traces) == 1
    assert sum(ref() is not None for ref in buffers) == 0


def test_outputs_are_pytrees_with_python_values(device, close):
    Pair = collections.namedtuple("Pair", "first second")
    f = ug.jit(lambda x: {"y": [x + 1, (x * 2, 3)], "name": "x", "none": None, "pair": Pair(x.sum(), 1.5)})
    for _ in range(3):
        a = rand((4,))
        got = f(ug.tensor(a, device=device))
        assert set(got) == {"y", "name", "none", "pair"}
        close(got["y"][0], a + 1)
        assert isinstance(got["y"][1], tuple) and got["y"][1][1] == 3
        close(got["y"][1][0], a * 2)
        assert got["name"] == "x" and got["none"] is None
        assert isinstance(got["pair"], Pair) and got["pair"].second == 1.5
        close(got["pair"].first, a.sum(), rtol=1e-5, atol=1e-5)


def test_max_traces_keeps_the_most_recently_used(device, close):
    f = ug.jit(lambda x: x + 1, max_traces=2)
    for n in (1, 2, 3, 2, 3, 2):
        a = rand((n,))
        close(f(ug.tensor(a, device=device)), a + 1)
    assert len(f.traces) == 2 and f.trace_count == 3
    a = rand((1,))                                    # evicted: traced again
    close(f(ug.tensor(a, device=device)), a + 1)
    assert f.trace_count == 4
    with pytest.raises(ValueError):
        ug.jit(lambda x: x, max_traces=0)


def test_retrace_storm_warns_once_naming_the_argument(device, close):
    f = ug.jit(lambda params: params["w"] * 2)
    with pytest.warns(ug.RetraceWarning) as record:
        for n in range(1, 13):
            a = rand((n,))
            close(f({"w": ug.tensor(a, device=device)}), a * 2)
    storms = [w for w in record if issubclass(w.category, ug.RetraceWarning)]
    assert len(storms) == 1
    message = str(storms[0].message)
    assert "params['w']" in message and "(8,)" in message and "(9,)" in message
    g = ug.jit(lambda x, k: x * k)
    x = ug.tensor(np.ones(2, np.float32), device=device)
    with pytest.warns(ug.RetraceWarning, match=r"argument `k` changed from int 7 to int 8"):
        for k in range(12):
            close(g(x, k), np.full(2, k, np.float32))


def test_key_includes_static_values_in_trees(device, close):
    f = ug.jit(lambda cfg: cfg["x"] * cfg["scale"] + len(cfg["names"]))
    for scale in (2.0, 3.0, 2.0):
        for names in (["a"], ["a", "b"]):
            a = rand((3,))
            got = f({"x": ug.tensor(a, device=device), "scale": scale, "names": names})
            close(got, a * np.float32(scale) + len(names), rtol=1e-5, atol=1e-6)
    assert f.trace_count == 4
    h = ug.jit(lambda x, tags: x + len(tags))   # an unhashable non-tensor value: keyed by its repr
    close(h(ug.tensor(np.zeros(2, np.float32), device=device), {1, 2}), np.full(2, 2, np.float32))
    close(h(ug.tensor(np.zeros(2, np.float32), device=device), {1, 2, 3}), np.full(2, 3, np.float32))
