"""Scheduler behaviour: kernel counts, reductions computed once, item kinds and order, assign ordering,
each schedule run on the device and checked (tests/test_schedule.py: what the schedule alone shows)."""

import math

import numpy as np
import pytest

import ug_core as ug
from ug_core.ops import Op
from ug_core.testing.data import RNG, rand


def kinds(sched):
    return [item.kind for item in sched.items]


def n_kernels(sched):
    return kinds(sched).count("kernel")


def n_reductions(sched):
    return sum(len(item.kernel.reductions) for item in sched.items if item.kind == "kernel")


def layernorm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    return xc / ((xc * xc).mean(-1, keepdims=True) + eps).sqrt() * w + b


def test_elementwise_chain_is_one_kernel(device):
    # (up to the scheduler's kernel size bound, schedule.MAX_KERNEL_SIZE: longer chains are cut
    # into kernels of bounded size, see test_deep_graphs.py)
    x = ug.tensor(rand((64, 32)), device=device)
    y = x
    for i in range(12):
        y = (y * 1.01 + 0.5).tanh() if i % 2 else y.exp().sin() - x
    sched = ug.schedule(y)
    assert kinds(sched) == ["kernel"]
    a = x.numpy()
    want = a
    for i in range(12):
        want = np.tanh(want * 1.01 + 0.5) if i % 2 else np.sin(np.exp(want)) - a
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)


def test_broadcasting_and_views_fuse(device):
    a = ug.tensor(rand((8, 1)), device=device)
    b = ug.tensor(rand(16), device=device)
    y = (a + b).T[2:10] * 2
    assert kinds(ug.schedule(y)) == ["kernel"]
    np.testing.assert_allclose(y.numpy(), ((a.numpy() + b.numpy()).T[2:10] * 2), rtol=1e-6)


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_is_one_kernel(device, axis):
    x = ug.tensor(rand((32, 48)) * 30, device=device)
    y = x.softmax(axis)
    sched = ug.schedule(y)
    assert kinds(sched) == ["kernel"]
    assert n_reductions(sched) == 2
    a = x.numpy().astype(np.float64)
    e = np.exp(a - a.max(axis, keepdims=True))
    np.testing.assert_allclose(y.numpy(), e / e.sum(axis, keepdims=True), rtol=1e-5, atol=1e-7)


def test_log_softmax_is_one_kernel(device):
    x = ug.tensor(rand((16, 40)) * 100, device=device)
    y = x.log_softmax()
    assert kinds(ug.schedule(y)) == ["kernel"]
    a = x.numpy().astype(np.float64)
    s = a - a.max(-1, keepdims=True)
    np.testing.assert_allclose(y.numpy(), s - np.log(np.exp(s).sum(-1, keepdims=True)), rtol=1e-5, atol=1e-5)


def test_layernorm_is_one_kernel(device):
    x = ug.tensor(rand((24, 64)), device=device)
    w = ug.tensor(rand(64), device=device)
    b = ug.tensor(rand(64), device=device)
    y = layernorm(x, w, b)
    sched = ug.schedule(y)
    assert kinds(sched) == ["kernel"]
    assert n_reductions(sched) == 2   # mean, then variance; each once per row
    a = x.numpy()
    xc = a - a.mean(-1, keepdims=True)
    want = xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5) * w.numpy() + b.numpy()
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)


def test_attention_is_two_matmuls_and_one_kernel(device):
    q = ug.tensor(rand((4, 32, 16)), device=device)
    k = ug.tensor(rand((4, 32, 16)), device=device)
    v = ug.tensor(rand((4, 32, 16)), device=device)
    out = ((q @ k.permute(0, 2, 1)) / math.sqrt(16)).softmax(-1) @ v
    sched = ug.schedule(out)
    assert kinds(sched) == ["matmul", "kernel", "matmul"]
    qn, kn, vn = q.numpy(), k.numpy(), v.numpy()
    s = qn @ kn.transpose(0, 2, 1) / 4.0
    e = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), (e / e.sum(-1, keepdims=True)) @ vn, rtol=1e-4, atol=1e-5)


def test_reduction_fuses_with_producers_and_consumers(device):
    x = ug.tensor(rand((16, 32)), device=device)
    y = ((x * 2).exp().sum(1) + 1).sqrt()
    assert kinds(ug.schedule(y)) == ["kernel"]
    np.testing.assert_allclose(y.numpy(), np.sqrt(np.exp(x.numpy() * 2).sum(1) + 1), rtol=1e-5)


def test_shared_reduction_is_computed_once(device):
    x = ug.tensor(rand((16, 32)), device=device)
    s = x.sum(1, keepdims=True)
    a = x / s
    b = x * s
    c = s + 1                           # a reduce-level output of the same rows
    sched = ug.schedule(a, b, c)
    assert n_reductions(sched) == 1
    assert n_kernels(sched) == 1        # independent outputs over the same rows share one kernel
    ug.realize(a, b, c)
    xs = x.numpy()
    ss = xs.sum(1, keepdims=True)
    np.testing.assert_allclose(a.numpy(), xs / ss, rtol=1e-5)
    np.testing.assert_allclose(b.numpy(), xs * ss, rtol=1e-5)
    np.testing.assert_allclose(c.numpy(), ss + 1, rtol=1e-5)


def test_reduction_needed_by_two_kernels_gets_a_buffer(device):
    # positive rows: a row of normal values can sum to nearly 0, and x / s then magnifies any
    # summation order's rounding past the tolerance (seen on cuda); this test is about the schedule
    x = ug.tensor(np.abs(rand((16, 32))) + 0.5, device=device)
    s = x.sum(1, keepdims=True)
    a = x / s                    # rows of x
    b = (s * x.T.sum(0)[:, None])  # another iteration space (a different reduction)
    sched = ug.schedule(a, b)
    # s is computed exactly once however the kernels are split
    total_sum_phases = sum(1 for item in sched.items if item.kind == "kernel"
                           for r in item.kernel.reductions if r.op is Op.SUM)
    assert total_sum_phases == 2  # s once, x.T.sum(0) once: never s twice
    xs = x.numpy()
    np.testing.assert_allclose(a.numpy(), xs / xs.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(b.numpy(), xs.sum(1, keepdims=True) * xs.T.sum(0)[:, None], rtol=1e-4)


def test_nested_reductions_over_other_axes(device):
    x = ug.tensor(rand((8, 16)), device=device)
    y = (x - x.mean(1, keepdims=True)).sum(0)   # reduce over 0 of something reduced over 1
    sched = ug.schedule(y)
    assert n_kernels(sched) <= 2
    assert n_reductions(sched) == 2
    xs = x.numpy()
    np.testing.assert_allclose(y.numpy(), (xs - xs.mean(1, keepdims=True)).sum(0), rtol=1e-4, atol=1e-5)


def test_independent_outputs_share_a_kernel_and_dependent_ones_do_not(device):
    x = ug.tensor(rand((8, 8)), device=device)
    a, b = x + 1, x * 2
    assert n_kernels(ug.schedule(a, b)) == 1
    c = x + 1
    d = c * 3
    sched = ug.schedule(c, d)
    assert n_kernels(sched) == 2
    order = [item.outputs[0] for item in sched.items]
    assert order.index(c.node) < order.index(d.node)
    ug.realize(c, d)
    np.testing.assert_allclose(d.numpy(), (x.numpy() + 1) * 3, rtol=1e-6)


def test_matmul_custom_copy_are_items(device):
    a = ug.tensor(rand((8, 4)), device=device)
    w = ug.tensor(rand((3, 4)), device=device)
    y = (a @ w.T).relu()
    assert kinds(ug.schedule(y)) == ["matmul", "kernel"]   # the view w.T goes to matmul as is
    c = ug.custom(lambda out, x: np.multiply(x, 3, out=out), [y], y.shape, np.float32)
    assert kinds(ug.schedule(c)) == ["matmul", "kernel", "custom"]
    np.testing.assert_allclose(c.numpy(), np.maximum(a.numpy() @ w.numpy().T, 0) * 3, rtol=1e-5)


def test_backward_matmuls_read_the_weight_transposed_in_place(device):
    # ug.grad's handle on a parameter is a named identity view: its transpose (g @ w^T in the
    # backward pass) is a view of a view, which the matmul takes as one strided view of the
    # weight's buffer (the gemm packs its panels anyway), not a transposed copy made first
    x0, w0 = rand((6, 5)), rand((5, 4))
    x, w = ug.tensor(x0, device=device), ug.tensor(w0, device=device)
    g = ug.tensor(rand((6, 4)), device=device)
    _, pullback = ug.vjp(lambda x, w: x @ w, x, w)
    gx, gw = pullback(g)
    sched = ug.schedule(gx, gw)
    assert kinds(sched) == ["matmul", "matmul"], str(sched)
    np.testing.assert_allclose(gx.numpy(), g.numpy() @ w0.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw.numpy(), x0.T @ g.numpy(), rtol=1e-5, atol=1e-6)


def _adam_state(device, shape=(6, 5)):
    p0, g0 = rand(shape), rand(shape)
    m0, v0 = rand(shape) * 0.1, np.abs(rand(shape)) * 0.1
    return [ug.tensor(a, device=device) for a in (p0, g0, m0, v0)], (p0, g0, m0, v0)


def test_adam_update_is_one_kernel_written_in_place(device):
    # m, v and p (which reads m's and v's new values) are one kernel of three stores, each
    # written into its own buffer; p's store reads the old m and v (inside m's and v's new
    # values) before their stores overwrite them
    (p, g, m, v), (p0, g0, m0, v0) = _adam_state(device)
    bufs = [t.node.buffer for t in (p, m, v)]
    m.assign(0.9 * m + 0.1 * g)
    v.assign(0.999 * v + 0.001 * g * g)
    p.assign(p - 0.01 * (m / 0.1) / ((v / 0.001).sqrt() + 1e-8))
    sched = ug.schedule(p, m, v)
    assert n_kernels(sched) == 1 and len(sched.kernels[0].outputs) == 3, str(sched)
    ug.realize(p, m, v)
    assert [t.node.buffer for t in (p, m, v)] == bufs
    m1 = 0.9 * m0 + 0.1 * g0
    v1 = 0.999 * v0 + 0.001 * g0 * g0
    np.testing.assert_allclose(m.numpy(), m1, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(v.numpy(), v1, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(p.numpy(), p0 - 0.01 * (m1 / 0.1) / (np.sqrt(v1 / 0.001) + 1e-8), rtol=1e-5, atol=1e-6)


def test_writes_merged_with_their_readers_only_where_safe(device):
    # p reads m's new value one element off: the value there is not the one m's store computes
    (p, g, m, _), (p0, g0, m0, _) = _adam_state(device, (8,))
    m.assign(m * 0.5 + g)
    p.assign(p - ug.roll(m, 1))
    sched = ug.schedule(p, m)
    assert n_kernels(sched) == 2, str(sched)
    ug.realize(p, m)
    m1 = m0 * 0.5 + g0
    np.testing.assert_allclose(m.numpy(), m1, rtol=1e-6)
    np.testing.assert_allclose(p.numpy(), p0 - np.roll(m1, 1), rtol=1e-6)
    # each write reads the other's target: no order of the two stores reads both old values
    (p, g, m, _), (p0, g0, m0, _) = _adam_state(device, (8,))
    m.assign(m + p)
    p.assign(p * 2 + m)
    ug.realize(p, m)
    np.testing.assert_allclose(m.numpy(), m0 + p0, rtol=1e-6)
    np.testing.assert_allclose(p.numpy(), p0 * 2 + m0 + p0, rtol=1e-6)
    # x, elementwise, reads m's new value and p's old one: merged too, its store before p's
    (p, g, m, _), (p0, g0, m0, _) = _adam_state(device, (8,))
    m.assign(m * 0.5 + g)
    x = (m * p).exp()
    p.assign(p - m)
    assert n_kernels(ug.schedule(x, p, m)) == 1
    ug.realize(x, p, m)
    m1 = m0 * 0.5 + g0
    np.testing.assert_allclose(x.numpy(), np.exp(m1 * p0), rtol=1e-5)
    np.testing.assert_allclose(p.numpy(), p0 - m1, rtol=1e-6)
    np.testing.assert_allclose(m.numpy(), m1, rtol=1e-6)
    # x, a reduction, reads them: merged, p's write in place would wait for x, which needs m's
    (p, g, m, _), (p0, g0, m0, _) = _adam_state(device, (8,))
    bufs = [t.node.buffer for t in (p, m)]
    m.assign(m * 0.5 + g)
    x = (m * p).sum()
    p.assign(p - m)
    assert n_kernels(ug.schedule(x, p, m)) == 3
    ug.realize(x, p, m)
    assert [t.node.buffer for t in (p, m)] == bufs
    m1 = m0 * 0.5 + g0
    np.testing.assert_allclose(x.numpy(), (m1 * p0).sum(), rtol=1e-5)
    np.testing.assert_allclose(p.numpy(), p0 - m1, rtol=1e-6)
    np.testing.assert_allclose(m.numpy(), m1, rtol=1e-6)
    # y, another kernel, sits between m's write and p's: nothing merges across it
    (p, g, m, _), (p0, g0, m0, _) = _adam_state(device, (8,))
    m.assign(m * 0.5 + g)
    y = m.sum()
    p.assign(p - m * y)
    assert n_kernels(ug.schedule(p, m, y)) == 4
    ug.realize(p, m, y)
    m1 = m0 * 0.5 + g0
    np.testing.assert_allclose(y.numpy(), m1.sum(), rtol=1e-5)
    np.testing.assert_allclose(p.numpy(), p0 - m1 * m1.sum(), rtol=1e-5)
    np.testing.assert_allclose(m.numpy(), m1, rtol=1e-6)


def test_merged_writes_replay_under_jit(device):
    (p, g, m, _), (p0, g0, m0, _) = _adam_state(device, (7,))

    @ug.jit
    def step(p, m, g):
        m.assign(0.5 * m + g)
        p.assign(p - 0.1 * m)
        return (p * p).sum()

    for _ in range(3):
        loss = step(p, m, g)
        m0 = 0.5 * m0 + g0
        p0 = p0 - 0.1 * m0
        np.testing.assert_allclose(loss.numpy(), (p0 * p0).sum(), rtol=1e-5)
    np.testing.assert_allclose(m.numpy(), m0, rtol=1e-5)
    np.testing.assert_allclose(p.numpy(), p0, rtol=1e-5)


def test_copy_item_between_devices(device):
    others = [d for d in ug.devices() if d != device]
    if not others:
        pytest.skip("only one device")
    x = ug.tensor(rand(5), device=device)
    y = (x + 1).to(others[0]) * 2
    assert "copy" in kinds(ug.schedule(y))
    np.testing.assert_allclose(y.numpy(), (x.numpy() + 1) * 2, rtol=1e-6)


def test_assign_reads_scheduled_before_write(device):
    x = ug.tensor(np.arange(6, dtype=np.float32), device=device)
    before = x.node.buffer
    y = x * 10                 # read of the old value, still lazy
    x[1:3] = 0.0
    ug.realize(y, x)
    np.testing.assert_array_equal(y.numpy(), np.arange(6) * 10)
    np.testing.assert_array_equal(x.numpy(), [0, 0, 0, 3, 4, 5])
    # the write went into x's own buffer: the read was ordered before it
    assert x.node.buffer is before


def test_assign_with_pending_outside_read_does_not_clobber(device):
    x = ug.tensor(np.arange(4, dtype=np.float32), device=device)
    y = x + 1                  # not realized together with the write
    x.assign(ug.zeros((4,), device=device))
    x.realize()
    np.testing.assert_array_equal(x.numpy(), np.zeros(4))
    np.testing.assert_array_equal(y.numpy(), np.arange(4) + 1)


def test_assign_in_place_when_nobody_else_reads(device):
    x = ug.tensor(np.arange(4, dtype=np.float32), device=device)
    before = x.node.buffer
    x[0] = 7
    x.realize()
    assert x.node.buffer is before
    np.testing.assert_array_equal(x.numpy(), [7, 1, 2, 3])


def test_compile_cache_reuses_programs(device):
    from ug_core.runtime import compile_cache

    x = ug.tensor(rand((8, 8)), device=device)
    (x.exp() + 1).realize()
    hits = compile_cache.hits
    y = ug.tensor(rand((8, 8)), device=device)
    (y.exp() + 1).realize()          # same kernel up to buffer identity: a cache hit
    assert compile_cache.hits == hits + 1


def test_long_reduction_over_few_rows_is_split_in_two_stages(device):
    a = RNG.standard_normal(1 << 18).astype(np.float32)
    x = ug.tensor(a, device=device)
    y = (x * 2).sum()
    sched = ug.schedule(y)
    assert n_kernels(sched) == 2
    first = sched.items[0].kernel
    assert first.outer[0] >= 64          # many partial rows: parallel work for every core
    np.testing.assert_allclose(y.item(), (a.astype(np.float64) * 2).sum(), rtol=1e-5, atol=1e-3)
    # short reductions and reductions over many rows stay one kernel
    assert n_kernels(ug.schedule(ug.tensor(a[:1000], device=device).sum())) == 1
    assert n_kernels(ug.schedule(ug.tensor(a.reshape(512, 512), device=device).sum(1))) == 1


def test_merged_outputs_never_depend_on_each_other_in_a_circle(device, close):
    # found by test_random_graphs: the elementwise outputs a = |x| and c = |x.sum()| share an
    # iteration space, and so do the reductions s = x.sum() and softmax(a); merging both pairs
    # would make each kernel need the other (c needs s, softmax(a) needs a)
    x0 = np.array([0.5], np.float32)
    x = ug.tensor(x0, device=device)
    a, s = x.abs(), x.sum(axis=None, keepdims=True)
    others = [x.abs(), x.abs(), x.abs()]
    c, sm = s.abs(), a.softmax(0)
    ug.realize(a, s, *others, c, sm)
    close(c, np.abs(x0.sum(keepdims=True)))
    close(sm, np.ones(1, np.float32))
    for t in [a, *others]:
        close(t, np.abs(x0))
    # a larger one of the same shape: two rows of kernels, each needing the other's
    y0 = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    y = ug.tensor(y0, device=device)
    e1, r1 = y.exp(), y.sum(axis=1, keepdims=True)
    e2 = r1 * 2 + y
    r2 = e1.max(axis=1, keepdims=True)
    ug.realize(e1, r1, e2, r2)
    close(e2, y0.sum(1, keepdims=True) * 2 + y0, rtol=1e-5, atol=1e-5)
    close(r2, np.exp(y0).max(1, keepdims=True))


@pytest.mark.parametrize("limit", [4, 8])
def test_kernels_respect_the_devices_buffer_limit(device, monkeypatch, limit):
    """Merging independent outputs into one kernel, fusing many inputs and the offsets argument
    together never pass Device.max_kernel_buffers (Vulkan: maxPerStageDescriptorStorageBuffers;
    a 40-output merge used to fail to compile there with 81 arguments)."""
    from ug_core.runtime import compile_cache
    monkeypatch.setattr(ug.registry.get(device), "max_kernel_buffers", limit)
    compile_cache.clear()
    xn = [np.full(9, i, np.float32) + np.arange(9, dtype=np.float32) for i in range(24)]
    xs = [ug.tensor(a, device=device) for a in xn]
    outs = [x[1:] * 3.5 for x in xs] + [sum((x[i % 3:i % 3 + 6] for i, x in enumerate(xs)), ug.zeros((6,), device=device))]
    sched = ug.schedule(*outs)
    assert all(len(item.kernel.args) <= limit for item in sched.kernels), [len(i.kernel.args) for i in sched.kernels]
    ug.realize(*outs)
    for a, o in zip(xn, outs):
        np.testing.assert_array_equal(o.numpy(), a[1:] * np.float32(3.5))
    np.testing.assert_allclose(outs[-1].numpy(), sum(a[i % 3:i % 3 + 6] for i, a in enumerate(xn)), rtol=1e-6)


@pytest.mark.parametrize("rows,n", [(1, 1), (1, 5), (2, 16), (4, 64), (3, 2)])
def test_a_scatter_into_a_reduction_is_a_kernel_of_its_own(device, rows, n):
    # `m = x.max(axis=-1); m[idx] = 1`: where the scatter runs as many parts as m has rows, its
    # kernel had the reduction's iteration space and was merged with it, a kernel vulkan cannot
    # lower ("a scatter kernel stores only scatters"); a scatter is a kernel of its own
    a = (np.arange(rows * 4) % 5).reshape(rows, 4).astype(np.float32)
    idx = np.arange(n) % rows
    x = ug.tensor(a, device=device)
    m = x.max(axis=-1)
    m[idx] = 1
    s = ug.scatter_add(x.sum(axis=-1), 0, idx, 2.0)
    t = ug.scatter_add(x.min(axis=-1), 0, idx, 3.0)
    sched = ug.schedule(m, s, t)
    for item in sched.kernels:
        scatters = [st.scatter is not None for st in item.kernel.stores]
        assert all(scatters) or not any(scatters), item.describe()
        assert not (any(scatters) and item.kernel.reductions), item.describe()
    scatter_kernels = [item for item in sched.kernels if item.kernel.stores[0].scatter is not None]
    assert [len(item.kernel.stores) for item in scatter_kernels] == [1, 1, 1], str(sched)
    ug.realize(m, s, t)
    want_m = a.max(axis=-1)
    want_m[idx] = 1
    want_s, want_t = a.sum(axis=-1), a.min(axis=-1)
    np.add.at(want_s, idx, 2.0)
    np.add.at(want_t, idx, 3.0)
    np.testing.assert_array_equal(m.numpy(), want_m)
    np.testing.assert_array_equal(s.numpy(), want_s)
    np.testing.assert_array_equal(t.numpy(), want_t)
