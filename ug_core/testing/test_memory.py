"""ug.memory_stats, and buffers freed by reference counting alone.

ug keeps no reference cycles around what a realize used, so an intermediate buffer goes as soon
as nothing reads it, without the cyclic garbage collector: these tests run with gc.disable().
Before: the scheduler's closures referred to themselves (and a compiled schedule held a bound
method of itself), so 20 chained 2048x2048 matmuls kept every product alive until gc.collect().
"""

import gc
import sys

import numpy as np
import pytest

import ug_core as ug
from ug_core.graph import Node

runtime = sys.modules["ug_core.runtime"]
KEYS = {"live_bytes", "peak_bytes", "allocations", "live_buffers", "pool_bytes"}


@pytest.fixture
def gc_disabled():
    """No cyclic GC during the test: counts change only by what the test does (and its buffers
    must be freed by reference counting alone)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def stats(device):
    return ug.memory_stats(device)


def test_memory_stats_count_live_buffers(device, gc_disabled):
    before = stats(device)
    assert set(before) == KEYS and all(isinstance(v, int) for v in before.values())
    a = ug.tensor(np.ones(1000, np.float32), device=device)
    b = ug.tensor(np.ones(250, np.float64 if device == "ref" else np.int32), device=device)
    during = stats(device)
    assert during["live_bytes"] - before["live_bytes"] == 4000 + b.numpy().nbytes
    assert during["live_buffers"] - before["live_buffers"] == 2
    assert during["allocations"] - before["allocations"] == 2
    assert during["peak_bytes"] >= during["live_bytes"]
    del a, b
    after = stats(device)
    assert after["live_bytes"] == before["live_bytes"]
    assert after["live_buffers"] == before["live_buffers"]
    assert after["allocations"] == during["allocations"]


def test_peak_and_its_reset(device, gc_disabled):
    x = ug.tensor(np.ones(4096, np.float32), device=device)
    ug.reset_peak_memory_stats(device)
    base = stats(device)
    assert base["peak_bytes"] == base["live_bytes"]
    y = (x + 1).numpy()  # one new 16 KiB buffer, still held by the lazy tensor's node... dropped here
    del y
    big = ug.tensor(np.ones(1 << 16, np.float32), device=device)
    del big
    now = stats(device)
    assert now["peak_bytes"] >= base["live_bytes"] + (1 << 18)
    assert now["live_bytes"] < now["peak_bytes"]
    ug.reset_peak_memory_stats(device)
    assert stats(device)["peak_bytes"] == stats(device)["live_bytes"]
    ug.reset_peak_memory_stats()  # every device
    del x


def test_memory_stats_of_every_device(device):
    ug.tensor(np.ones(3, np.float32), device=device)
    every = ug.memory_stats()
    assert device in every and set(every[device]) == KEYS
    with pytest.raises(ValueError):
        ug.memory_stats("no-such-device")
    with pytest.raises(TypeError):
        ug.memory_stats(3)


def test_pool_bytes_is_what_the_device_keeps_for_reuse(device):
    a = ug.tensor(np.ones(1 << 14, np.float32), device=device)
    del a
    pooled = stats(device)["pool_bytes"]
    assert pooled >= 0
    if device in ("cpu", "vulkan", "cuda"):  # devices that pool freed allocations
        assert pooled >= 1 << 16


def test_jit_fast_path_outputs_are_counted(device, gc_disabled):
    f = ug.jit(lambda t: t * 2 + 1)
    x = ug.tensor(np.ones(64, np.float32), device=device)
    f(x), f(x)
    before = stats(device)
    outs = [f(x) for _ in range(10)]
    during = stats(device)
    new = during["live_buffers"] - before["live_buffers"]
    assert new in (9, 10)  # (the first call may reuse the output the replay kept from the last one)
    assert during["live_bytes"] - before["live_bytes"] == new * 64 * 4
    assert during["allocations"] - before["allocations"] == new
    assert during["peak_bytes"] >= during["live_bytes"]
    del outs
    assert stats(device)["live_bytes"] <= before["live_bytes"] + 64 * 4  # the replay may keep one to reuse


@pytest.mark.parametrize("lazily", [False, True], ids=["realized-each-step", "realized-at-the-end"])
def test_chained_matmuls_free_their_products_without_the_gc(device, gc_disabled, lazily):
    n = 128
    rng = np.random.default_rng(0)
    w = ug.tensor((rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32), device=device)
    y = ug.tensor(rng.standard_normal((n, n)).astype(np.float32), device=device)
    want = y.numpy().astype(np.float64)
    ug.reset_peak_memory_stats(device)
    base = stats(device)
    for _ in range(20):
        y = y @ w
        want = want @ w.numpy().astype(np.float64)
        if not lazily:
            y.realize()
            # the new product and the one it was made from, no more
            assert stats(device)["live_buffers"] <= base["live_buffers"] + 1
    y.realize()
    after = stats(device)
    assert after["live_buffers"] <= base["live_buffers"]  # only y (in place of the first y)
    assert after["live_bytes"] <= base["live_bytes"]
    # realized each step: the new product and the one it was made from; lazily: the same, as a
    # product goes after the last matmul that reads it (before: all 20 until the end)
    assert after["peak_bytes"] <= base["live_bytes"] + (1 if not lazily else 2) * n * n * 4
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-3, atol=1e-3)


def test_intermediates_someone_reads_are_kept(device, gc_disabled):
    """An intermediate goes after its last use only when nothing outside the realized graph reads
    it: a tensor held on it keeps its buffer; a lazy value outside reading it still computes right."""
    n = 32
    rng = np.random.default_rng(3)
    an = rng.standard_normal((n, n)).astype(np.float32)
    a, w = ug.tensor(an, device=device), ug.tensor(np.eye(n, dtype=np.float32) * 0.5, device=device)
    for trial in range(2):  # the second realize replays the kept schedule
        held = a @ w            # held by a tensor: keeps its buffer
        mid = held @ w          # held by a lazy value outside the graph realized below
        outside = mid + 1.0
        y = (mid @ w) @ w
        y.realize()
        assert held._node.realized
        np.testing.assert_allclose(y.numpy(), an / 16, rtol=1e-6)
        np.testing.assert_allclose(outside.numpy(), an / 4 + 1, rtol=1e-6)
        np.testing.assert_allclose(held.numpy(), an / 2, rtol=1e-6)


def test_realizing_kernels_frees_intermediates_without_the_gc(device, gc_disabled):
    # k-means-like: every step realizes kernels and a matmul; nothing of a step may outlive it
    rng = np.random.default_rng(1)
    points = ug.tensor(rng.standard_normal((64, 8)).astype(np.float32), device=device)
    centers = ug.tensor(rng.standard_normal((4, 8)).astype(np.float32), device=device)
    for step in range(12):
        dist = (points * points).sum(axis=1, keepdims=True) - 2 * (points @ centers.T) \
            + (centers * centers).sum(axis=1).reshape(1, 4)
        weights = (-dist).softmax(axis=1)
        centers = (weights.T @ points) / weights.sum(axis=0).reshape(4, 1)
        runtime.compile_cache.schedules.clear()  # schedule every step (as a graph that changes would)
        centers.realize()
        if step == 1:
            base = stats(device)  # after two steps: compile caches and scalar buffers are filled
    after = stats(device)
    assert after["live_buffers"] <= base["live_buffers"]
    assert after["live_bytes"] <= base["live_bytes"]


def test_a_realize_leaves_no_reference_cycles(device, gc_disabled):
    x = ug.tensor(np.linspace(0, 1, 96, dtype=np.float32).reshape(8, 12), device=device)

    def graph():
        h = (x * 1.5).relu() * 0.5 + x
        return (h - h.max(axis=1, keepdims=True)).exp().sum(axis=1) + h.mean()

    graph().numpy()  # compiles the kernels
    runtime.compile_cache.schedules.clear()  # so that the next realize schedules again
    gc.collect()
    graph().numpy()  # schedules, runs, frees
    assert gc.collect() == 0


def test_no_reference_cycle_holds_a_buffer_or_a_node(device, gc_disabled):
    x = ug.tensor(np.linspace(0, 1, 96, dtype=np.float32).reshape(8, 12), device=device)
    w = ug.tensor(np.ones((12, 12), np.float32), device=device)
    for _ in range(2):
        runtime.compile_cache.schedules.clear()
        h = (x @ w).relu() * 0.5 + x
        ((h - h.max(axis=1, keepdims=True)).exp().sum(axis=1) + h.mean()).numpy()
        del h
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        held = sorted({type(o).__name__ for o in gc.garbage if isinstance(o, (ug.Buffer, ug.Tensor, Node))})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert held == []


@pytest.mark.parametrize("body", ["one-kernel", "one-matmul", "several-steps", "retraced"])
def test_a_dropped_jit_function_is_freed_without_the_gc(device, gc_disabled, body):
    """ug.jit's closures and its generated single-kernel replay form no reference cycle: a jitted
    function that goes out of scope takes its traces (and the buffers they keep) with it."""
    import weakref
    x = ug.tensor(np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8), device=device)
    fns = {
        "one-kernel": lambda a, b: a * 2.5 + b,
        "one-matmul": lambda a, b: a @ b,
        "several-steps": lambda a, b: ((a @ b).relu() - a.sum()) * 0.5,
        "retraced": lambda a, b: (a + b[:a.shape[0]]).exp(),
    }
    jitted = ug.jit(fns[body])
    for i in range(3):
        a = x[: 8 - i] if body == "retraced" else x
        jitted(a, x).numpy()
    assert jitted.trace_count == (3 if body == "retraced" else 1)
    gone = weakref.ref(jitted)
    before = stats(device)["live_buffers"]
    del jitted
    assert gone() is None
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        cyclic = sorted({type(o).__name__ for o in gc.garbage if isinstance(o, (ug.Buffer, ug.Tensor, Node))}
                        | {o.__qualname__ for o in gc.garbage if callable(o) and hasattr(o, "__qualname__")})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert cyclic == [], ", ".join(cyclic)
    assert stats(device)["live_buffers"] <= before


def test_an_intermediate_a_lazy_tensor_reads_is_kept_across_an_in_place_write(device):
    """A realize that writes t0 in place computes t1's matmul products on the way (fusing t1
    itself into the write); t1 stays lazy and reads them later, after t0's old value is gone.
    Found by the random-program test: letting such a product go after its last use in the write
    made t1 recompute from the overwritten t0."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5)).astype(np.float32)
    t0 = ug.tensor(a, device=device)
    t1 = t0 @ t0.T @ t0 * 0.1
    t0.assign(t1 * 0.5 + t0)
    e1 = (a @ a.T @ a * 0.1).astype(np.float32)
    np.testing.assert_allclose(t0.numpy(), e1 * 0.5 + a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t1.numpy(), e1, rtol=1e-5, atol=1e-6)
