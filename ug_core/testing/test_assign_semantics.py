"""In-place writes (`x.assign(v)`, `x[idx] = v`) follow numpy's rule: every result equals
running the program eagerly in numpy, in order, where what numpy documents as a view (basic
indexing, reshape, .T, ...) shares its base's elements and everything else is a new value.

A value computed before a write keeps the value it had (also when the read was fused away and
is computed again later); two tensors that are copies of one value, written separately, each
keep their own result, and a view and its base see each other's writes. Writes go in place
wherever nothing can observe the old value, and copy at most the region they need otherwise.
The last test replays random programs of creations, arithmetic, views, copies, full and partial
writes, realizations, reads and deletions against numpy.
"""
import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import ug_core as ug
from ug_core.schedule import KernelItem


# --------------------------------------------------------------------- the cases
def test_fused_read_before_write_keeps_old_value(device):
    # the training-step shape: realize a value computed from w together with w's update
    x = ug.tensor([1.0, 2.0], device=device)
    y = x * 10
    z = y + 1
    x[0] = 5.0
    ug.realize(z, x)
    np.testing.assert_array_equal(z.numpy(), [11.0, 21.0])
    np.testing.assert_array_equal(x.numpy(), [5.0, 2.0])
    np.testing.assert_array_equal(y.numpy(), [10.0, 20.0])  # y was fused into z, computed again now


def test_training_step_shape(device):
    w = ug.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=device)
    x = ug.tensor(np.ones((4, 2), np.float32), device=device)
    h = x @ w          # a live intermediate that reads w
    loss = (h * h).sum()
    g = ug.ones((2, 3), device=device)
    w.assign(w - 0.5 * g)
    ug.realize(loss, w)
    w0 = np.arange(6, dtype=np.float32).reshape(2, 3)
    h0 = np.ones((4, 2), np.float32) @ w0
    np.testing.assert_allclose(loss.numpy(), (h0 * h0).sum())
    np.testing.assert_allclose(w.numpy(), w0 - 0.5)
    np.testing.assert_allclose(h.numpy(), h0)


@pytest.mark.parametrize("realized", [True, False])
def test_two_writes_through_tensors_of_one_node(device, realized):
    x = ug.zeros((4,), device=device)
    if realized:
        x.realize()
    y = +x            # a new value (a copy, as numpy's +x)
    x[0] = 1
    y[1] = 2
    ug.realize(x, y)
    np.testing.assert_array_equal(x.numpy(), [1, 0, 0, 0])
    np.testing.assert_array_equal(y.numpy(), [0, 2, 0, 0])


@pytest.mark.parametrize("realized", [True, False])
def test_two_writes_through_a_view_and_its_base(device, realized):
    x = ug.zeros((4,), device=device)
    if realized:
        x.realize()
    y = x[:]          # a view (numpy's rule): both writes land in one array
    x[0] = 1
    y[1] = 2
    ug.realize(x, y)
    np.testing.assert_array_equal(x.numpy(), [1, 2, 0, 0])
    np.testing.assert_array_equal(y.numpy(), [1, 2, 0, 0])


def test_write_into_lazy_tensor_then_read_is_no_cycle(device):
    v = ug.zeros((2,), device=device)
    v[0] = 2.0
    np.testing.assert_array_equal((v * 4).numpy(), [8.0, 0.0])


def test_write_into_lazy_tensor_with_a_live_reader(device):
    v = ug.full((3,), 1.0, device=device)
    w = v * 4          # built before the write: must see ones
    v[0] = 2.0
    u = v + w
    np.testing.assert_array_equal(u.numpy(), [6.0, 5.0, 5.0])
    np.testing.assert_array_equal(w.numpy(), [4.0, 4.0, 4.0])
    np.testing.assert_array_equal(v.numpy(), [2.0, 1.0, 1.0])


# --------------------------------------------------------------------- identity rule
def test_tensor_of_tensor_is_a_new_tensor_with_its_own_value(device):
    x = ug.tensor([1.0, 2.0], device=device)
    y = ug.tensor(x)
    assert y is not x
    y[0] = 7.0
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(y.numpy(), [7.0, 2.0])
    x[1] = -1.0
    np.testing.assert_array_equal(y.numpy(), [7.0, 2.0])


@pytest.mark.parametrize("make", [
    lambda x: +x, lambda x: x.astype(x.dtype), lambda x: x.to(x.device), lambda x: ug.tensor(x),
    lambda x: x.flatten(), lambda x: ug.astype(x, x.dtype), lambda x: ug.asarray(x, copy=True),
    lambda x: ug.reshape(x, x.shape, copy=True),
])
def test_copies_are_new_values(device, make):
    # an op that numpy documents as a copy never returns the tensor it was called on, and
    # writing one never changes the other (only assign returns self)
    x = ug.tensor([1.0, 2.0, 3.0], device=device)
    y = make(x)
    assert y is not x
    y[0] = 9.0
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0, 3.0])
    x[1] = 7.0
    np.testing.assert_array_equal(y.numpy(), [9.0, 2.0, 3.0])
    assert x.assign(x * 2) is x


@pytest.mark.parametrize("make", [
    lambda x: x.reshape(x.shape), lambda x: x[...], lambda x: x[:], lambda x: x.squeeze(),
    lambda x: x.reshape(3, 1)[:, 0], lambda x: ug.expand_dims(x, axis=0)[0], lambda x: x.T,
])
def test_views_alias_their_base(device, make):
    # an op that numpy documents as a view is a new tensor object sharing the base's elements
    x = ug.tensor([1.0, 2.0, 3.0], device=device)
    y = make(x)
    assert y is not x
    y[0] = 9.0
    np.testing.assert_array_equal(x.numpy(), [9.0, 2.0, 3.0])
    x[1] = 7.0
    np.testing.assert_array_equal(y.numpy(), [9.0, 7.0, 3.0])


def test_broadcast_views_are_read_only(device):
    x = ug.tensor([1.0, 2.0, 3.0], device=device)
    for y in (x.broadcast_to((2, 3)), ug.broadcast_arrays(x, ug.ones((2, 1), device=device))[0]):
        with pytest.raises(ValueError, match="read-only"):
            y[0, 0] = 5.0
        with pytest.raises(ValueError, match="read-only"):
            y[0] += 1
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0, 3.0])


# --------------------------------------------------------------------- copies
def _assign_items(sched):
    return [i for i in sched.items if isinstance(i, KernelItem) and "(assign-copy)" in i.fused]


def test_writes_into_realized_tensor_are_in_place(device):
    x = ug.tensor(np.zeros((64, 64), np.float32), device=device)
    buffer = x.node.buffer
    for i in range(5):
        x[i] = float(i)
    x.assign(x * 2)       # reads each element where it writes it: in place too
    assert not _assign_items(ug.schedule(x))
    x.realize()
    assert x.node.buffer is buffer
    expected = np.zeros((64, 64), np.float32)
    expected[:5] = np.arange(5)[:, None]
    np.testing.assert_array_equal(x.numpy(), expected * 2)


def test_k_writes_into_lazy_tensor_make_one_buffer(device):
    x = ug.zeros((32, 32), device=device)
    for i in range(8):
        x[i] = float(i + 1)
    sched = ug.schedule(x)
    assert not _assign_items(sched), str(sched)
    full = [i for i in sched.items if any(o.shape == (32, 32) and o not in i.alias for o in i.outputs)]
    assert len(full) == 1, str(sched)  # one fill of the fresh buffer, every write into it
    expected = np.zeros((32, 32), np.float32)
    expected[:8] = np.arange(1, 9)[:, None]
    np.testing.assert_array_equal(x.numpy(), expected)


def test_write_reading_its_own_buffer_copies_only_the_region(device):
    a = np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)
    p = ug.tensor(a, device=device)
    buffer = p.node.buffer
    p[:, 0] = p[:, 1]
    p[1:, :] = p[:-1, :] * 1.0 + 0.0  # overlapping shift: reads what it overwrites
    sched = ug.schedule(p)
    assert not _assign_items(sched), str(sched)
    p.realize()
    assert p.node.buffer is buffer
    e = a.copy()
    e[:, 0] = e[:, 1]
    e[1:, :] = e[:-1, :].copy()
    np.testing.assert_array_equal(p.numpy(), e)


def test_edge_padding_by_slice_writes_is_in_place(device):
    n = 256
    img = np.random.default_rng(1).random((n, n), dtype=np.float32)
    x = ug.zeros((n + 2, n + 2), device=device)
    x[1:-1, 1:-1] = ug.tensor(img, device=device)
    x[0, :] = x[1, :]
    x[-1, :] = x[-2, :]
    x[:, 0] = x[:, 1]
    x[:, -1] = x[:, -2]
    sched = ug.schedule(x)
    assert not _assign_items(sched), str(sched)
    big = [i for i in sched.items if any(o.shape == (n + 2, n + 2) and o not in i.alias for o in i.outputs)]
    assert len(big) == 1, str(sched)
    np.testing.assert_array_equal(x.numpy(), np.pad(img, 1, mode="edge"))


def test_observed_old_value_is_copied_not_overwritten(device):
    x = ug.tensor([1.0, 2.0, 3.0], device=device)
    keep = x          # the same tensor object
    old = ug.tensor(x)  # another tensor holding x's value (a copy)
    x[0] = 0.0
    x.realize()
    np.testing.assert_array_equal(old.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(keep.numpy(), [0.0, 2.0, 3.0])


# --------------------------------------------------------------------- random programs
SHAPE = (4, 5)


def _region(draw):
    """A basic index into SHAPE and the shape it selects; a second index of that shape."""
    def dim(size):
        n = draw(st.integers(1, size))
        a = draw(st.integers(0, size - n))
        b = draw(st.integers(0, size - n))
        return slice(a, a + n), slice(b, b + n), n

    kind = draw(st.sampled_from(["row", "col", "block", "elem"]))
    if kind == "row":
        i, j = draw(st.integers(0, SHAPE[0] - 1)), draw(st.integers(0, SHAPE[0] - 1))
        return (i,), (j,)
    if kind == "col":
        i, j = draw(st.integers(0, SHAPE[1] - 1)), draw(st.integers(0, SHAPE[1] - 1))
        return (slice(None), i), (slice(None), j)
    if kind == "elem":
        i, j = draw(st.integers(0, SHAPE[0] - 1)), draw(st.integers(0, SHAPE[1] - 1))
        return (i, j), (draw(st.integers(0, SHAPE[0] - 1)), draw(st.integers(0, SHAPE[1] - 1)))
    r0, s0, _ = dim(SHAPE[0])
    r1, s1, _ = dim(SHAPE[1])
    return (r0, r1), (s0, s1)


@given(data=st.data())
def test_random_programs_with_writes_match_eager_numpy(device, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    ts: list = []   # ug tensors
    es: list = []   # their eager values (numpy arrays: copies, or views where ug's are views)

    def add(t, e, view=False):
        ts.append(t)
        es.append(e if view else np.array(e, dtype=np.float32))

    add(ug.tensor(rng.standard_normal(SHAPE).astype(np.float32), device=device), None)
    es[-1] = ts[-1].numpy().copy()
    pick = lambda label: data.draw(st.integers(0, len(ts) - 1), label=label)  # noqa: E731
    for _ in range(data.draw(st.integers(1, 14), label="steps")):
        step = data.draw(st.sampled_from([
            "new", "zeros", "binary", "unary", "alias", "assign", "setitem_scalar", "setitem_other",
            "setitem_self", "realize", "read", "delete", "reduce_assign", "matmul"]), label="step")
        note(step)
        if step == "new":
            a = rng.standard_normal(SHAPE).astype(np.float32)
            add(ug.tensor(a, device=device), a)
        elif step == "zeros":
            add(ug.zeros(SHAPE, device=device), np.zeros(SHAPE))
        elif step == "binary":
            i, j = pick("i"), pick("j")
            op = data.draw(st.sampled_from(["+", "*", "-"]), label="op")
            f = {"+": lambda a, b: a + b, "*": lambda a, b: a * b, "-": lambda a, b: a - b}[op]
            add(f(ts[i], ts[j]), f(es[i], es[j]))
        elif step == "unary":
            i = pick("i")
            add(ts[i].tanh() * 2, np.tanh(es[i]) * 2)
        elif step == "matmul":
            i, j = pick("i"), pick("j")
            add(ts[i] @ ts[j].T @ ts[j] * 0.1, es[i] @ es[j].T @ es[j] * 0.1)
        elif step == "alias":
            i = pick("i")
            how = data.draw(st.sampled_from(["slice", "reshape", "pos", "tensor"]), label="how")
            f = {"slice": lambda x: x[:], "reshape": lambda x: x.reshape(SHAPE), "pos": lambda x: +x,
                 "tensor": lambda x: ug.tensor(x) if isinstance(x, ug.Tensor) else np.array(x)}[how]
            add(f(ts[i]), f(es[i]), view=how in ("slice", "reshape"))   # numpy's rule: those two are views
        elif step == "assign":
            i, j = pick("i"), pick("j")
            ts[i].assign(ts[j] * 0.5 + ts[i])
            es[i][...] = es[j] * 0.5 + es[i]   # a write: a view of es[i] sees it
        elif step == "reduce_assign":
            i = pick("i")
            ts[i].assign(ts[i] - ts[i].sum(axis=1, keepdims=True) / 8)
            es[i][...] = es[i] - es[i].sum(axis=1, keepdims=True) / 8
        elif step in ("setitem_scalar", "setitem_other", "setitem_self"):
            i = pick("i")
            region, other = _region(data.draw)
            note(f"t{i}[{region}] from {other}")
            if step == "setitem_scalar":
                v = float(data.draw(st.integers(-3, 3), label="v"))
                ts[i][region] = v
                es[i][region] = v
            elif step == "setitem_other":
                j = pick("j")
                ts[i][region] = ts[j][region] + 1
                es[i][region] = es[j][region] + 1
            else:
                ts[i][region] = ts[i][other] * 2
                es[i][region] = es[i][other].copy() * 2
        elif step == "realize":
            chosen = data.draw(st.lists(st.integers(0, len(ts) - 1), max_size=3), label="which")
            ug.realize(*[ts[k] for k in chosen])
        elif step == "read":
            i = pick("i")
            np.testing.assert_allclose(ts[i].numpy(), es[i], rtol=1e-5, atol=1e-5, err_msg=f"read t{i}")
        elif step == "delete" and len(ts) > 1:
            i = pick("i")
            del ts[i], es[i]
    which = data.draw(st.sampled_from(["all", "each", "last"]), label="final")
    if which == "all":
        ug.realize(*ts)
    elif which == "last":
        ts[-1].realize()
    for k, (t, e) in enumerate(zip(ts, es)):
        np.testing.assert_allclose(t.numpy(), e, rtol=1e-5, atol=1e-5, err_msg=f"t{k}")
