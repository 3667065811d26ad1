"""The scheduler's device pass (schedule.device_pass): the lazy graph is the same on every
device, and a device's loop limit is met by rewriting scans and scatters at schedule time.

The ref device runs any loop; these tests give it a limit (Device.max_loop_iterations, which
lavapipe's Vulkan has: 65535) to see the rewrite on a device every machine has."""

import numpy as np
import pytest

import ug_core as ug
from ug_core.ops import Op
from ug_core.schedule import walk
from ug_core.schedule.device_pass import for_device
from ug_core.structure import graph_key


@pytest.fixture
def limit(monkeypatch):
    def set_limit(n):
        monkeypatch.setattr(ug.registry.get("ref"), "max_loop_iterations", n)
    return set_limit


def _graph(t):
    nodes = walk([t._node])
    return graph_key(nodes, [t._node])


def _cumsum_graph(a):
    return _graph(ug.cumulative_sum(ug.tensor(a, device="ref"), axis=1))


def test_the_frontend_graph_does_not_depend_on_the_limit(limit):
    a = np.ones((17, 700), np.float32)
    idx = np.arange(5000) % 7
    before = (_cumsum_graph(a), _graph(ug.scatter_add(ug.zeros((7,), device="ref"), 0, idx, np.ones(5000, np.float32))))
    limit(50)
    after = (_cumsum_graph(a), _graph(ug.scatter_add(ug.zeros((7,), device="ref"), 0, idx, np.ones(5000, np.float32))))
    assert before == after


def test_no_rewrite_without_a_limit():
    t = ug.cumulative_sum(ug.tensor(np.ones((3, 5000), np.float32), device="ref"), axis=1)
    assert for_device([t._node], walk([t._node])) is None
    assert ug.schedule(t).replaced == {}


def test_a_scan_longer_than_the_limit_is_blocked(limit):
    limit(1000)
    a = np.random.default_rng(0).random((17, 5000)).astype(np.float32)
    t = ug.cumulative_sum(ug.tensor(a, device="ref"), axis=1)
    sched = ug.schedule(t)
    assert len(sched.kernels) == 3 and t._node in sched.replaced
    np.testing.assert_allclose(t.numpy(), np.cumsum(a.astype(np.float64), axis=1), rtol=1e-5)
    assert t._node.realized   # the user's node took its stand-in's buffer


def test_stand_ins_built_again_until_short_enough(limit):
    limit(10)   # blocks of ~sqrt(n) are longer than 10 too: the pass runs on its own result
    a = np.random.default_rng(1).random((2, 5000)).astype(np.float32)
    t = ug.cumulative_prod(ug.tensor(1 + a / 5000, device="ref"), axis=1)
    got = t.numpy()
    for node in walk(ug.schedule(ug.cumulative_prod(ug.tensor(1 + a / 5000, device="ref"), axis=1)).targets):
        if node.op is Op.SCAN:
            assert node.shape[node.arg[1]] <= 10
    np.testing.assert_allclose(got, np.cumprod(1 + a.astype(np.float64) / 5000, axis=1), rtol=1e-5)


@pytest.mark.parametrize("reduce", ["sum", "amax", "amin", "prod"])
def test_a_scatter_with_longer_parts_runs_in_more_of_them(limit, reduce):
    limit(50)
    rng = np.random.default_rng(2)
    n, slots = 5000, 7   # 64 parts of 79 values: 2 parts of 40 each here
    idx = rng.integers(0, slots, n)
    src = (rng.random(n) + 0.5).astype(np.float32) if reduce != "prod" else (1 + rng.random(n) / n).astype(np.float32)
    x = ug.ones((slots,), device="ref")
    t = ug.scatter_reduce(x, 0, ug.tensor(idx, device="ref"), ug.tensor(src, device="ref"), reduce)
    want = np.ones(slots, np.float64)
    {"sum": np.add, "amax": np.maximum, "amin": np.minimum, "prod": np.multiply}[reduce].at(want, idx, src)
    assert ug.schedule(t).replaced
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-5)


def test_bincount_and_last_write_wins_under_a_limit(limit):
    limit(30)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 5, 3000)
    np.testing.assert_array_equal(ug.bincount(ug.tensor(idx, device="ref")).numpy(), np.bincount(idx))
    x = ug.zeros((5,), device="ref")
    vals = np.arange(3000, dtype=np.float32)
    x[ug.tensor(idx, device="ref")] = ug.tensor(vals, device="ref")
    want = np.zeros(5, np.float32)
    want[idx] = vals
    np.testing.assert_array_equal(x.numpy(), want)


def test_an_intermediate_and_an_in_place_write_under_a_limit(limit):
    limit(100)
    a = np.random.default_rng(4).random((3, 400)).astype(np.float32)
    x = ug.tensor(a, device="ref")
    y = ug.cumulative_sum(x, axis=1)
    z = y * 2
    ug.realize(z)
    np.testing.assert_allclose(z.numpy(), 2 * np.cumsum(a, axis=1), rtol=1e-5)
    np.testing.assert_allclose(y.numpy(), np.cumsum(a, axis=1), rtol=1e-5)
    x[...] = ug.cumulative_sum(x, axis=1)
    np.testing.assert_allclose(x.numpy(), np.cumsum(a, axis=1), rtol=1e-5)


def test_same_structure_again_and_under_jit(limit):
    limit(100)
    f = ug.jit(lambda x: ug.cumulative_sum(x, axis=1) * 2)
    for seed in range(3):   # (a rewritten graph is not replayed as another graph's inputs)
        a = np.random.default_rng(seed).random((3, 400)).astype(np.float32)
        np.testing.assert_allclose(ug.cumulative_sum(ug.tensor(a, device="ref"), axis=1).numpy(),
                                   np.cumsum(a, axis=1), rtol=1e-5)
        np.testing.assert_allclose(f(ug.tensor(a, device="ref")).numpy(), 2 * np.cumsum(a, axis=1), rtol=1e-5)


def _attention(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def test_attention_is_one_node_everywhere_and_decomposed_where_not_fused():
    from ug_core.nn import scaled_dot_product_attention
    hits = ug.cache_stats()["runtime.schedules"]["hits"]
    for seed in range(3):   # a rewritten graph replays too (its stand-ins: scratch slots)
        q, k, v = np.random.default_rng(seed).random((3, 2, 8, 4)).astype(np.float32)
        o = scaled_dot_product_attention(*(ug.tensor(a, device="ref") for a in (q, k, v)))
        assert o._node.op is Op.ATTENTION
        if seed == 0:
            sched = ug.schedule(o)
            assert sched.replaced and not any(i.kind == "attention" for i in sched.items)
        np.testing.assert_allclose(o.numpy(), _attention(q, k, v), rtol=1e-5, atol=1e-6)
    assert ug.cache_stats()["runtime.schedules"]["hits"] >= hits + 2
