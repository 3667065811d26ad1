"""Deep graphs: chains far past Python's recursion limit schedule, compile and run on every
device, in kernels of bounded size (schedule.MAX_KERNEL_SIZE), in time linear in the chain.

Before: a chain of 400 elementwise ops raised RecursionError in the scheduler (its kernel
builder recursed once per node), and a 20,000-op chain with a raised recursion limit crashed
the interpreter; a chain realized as one kernel also compiled in time superlinear in its length.
"""

import sys
import time

import numpy as np
import pytest

import ug_core as ug

schedule_module = sys.modules["ug_core.schedule"]  # (ug_core.schedule is the function)


def kernel_sizes(sched):
    """The fused ops of each kernel (KernelItem.fused names each fused node once)."""
    return [len(item.fused) for item in sched.items if item.kind == "kernel"]


def axpb_chain(x, n):
    for _ in range(n):
        x = x * 1.0001 + 0.5
    return x


def test_chain_of_400_ops_realizes(device, close):
    x0 = np.linspace(0, 1, 64, dtype=np.float32)
    y = axpb_chain(ug.tensor(x0, device=device), 200)
    close(y, axpb_chain(x0, 200), rtol=1e-5)


def test_chain_far_past_the_recursion_limit(device, close):
    # 20,000 ops with the default recursion limit (1000): nothing walks the graph recursively
    x0 = np.linspace(0, 1, 256, dtype=np.float32).reshape(16, 16)
    y = axpb_chain(ug.tensor(x0, device=device), 10_000)
    sched = ug.schedule(y)
    assert all(size <= schedule_module.MAX_KERNEL_SIZE for size in kernel_sizes(sched))
    assert len(sched.items) > 1  # cut into kernels of bounded size
    want = axpb_chain(x0.astype(np.float64), 10_000).astype(np.float32)
    close(y, want, rtol=1e-4)


def test_mixed_chain_with_transcendentals(device, close):
    x0 = np.linspace(-1, 1, 64, dtype=np.float32)
    x, want = ug.tensor(x0, device=device), x0.astype(np.float64)
    for _ in range(300):
        x = (x * 1.0001 + 0.5).sin()
        want = np.sin(want * 1.0001 + 0.5)
    close(x, want.astype(np.float32), rtol=1e-4, atol=1e-5)


def test_deep_chain_of_fused_reductions(device, close):
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((8, 16)).astype(np.float32)
    x, want = ug.tensor(x0, device=device), x0.astype(np.float64)
    for _ in range(1_000):
        x = (x * 0.5 + x.max(axis=1, keepdims=True) * 0.25).tanh()
        want = np.tanh(want * 0.5 + want.max(axis=1, keepdims=True) * 0.25)
    close(x, want.astype(np.float32), rtol=1e-4, atol=1e-5)


def test_deep_chain_of_reductions_that_cannot_fuse_is_scheduled_in_linear_time(device, close):
    # every step reduces over both axes, so each reduction needs a buffer of its own; the
    # scheduler used to find them one per rebuild of the whole schedule (cubic: 75 s for 100 steps,
    # and a RecursionError before that)
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((8, 16)).astype(np.float32)

    def chain(steps):
        x, want = ug.tensor(x0, device=device), x0.astype(np.float64)
        for _ in range(steps):
            x = (x - x.mean(axis=0, keepdims=True) + x.sum(axis=1, keepdims=True) * 0.01) * 0.9
            want = (want - want.mean(axis=0, keepdims=True) + want.sum(axis=1, keepdims=True) * 0.01) * 0.9
        return x, want

    x, want = chain(100)
    start = time.perf_counter()
    sched = ug.schedule(x)
    elapsed = time.perf_counter() - start
    assert len(sched.items) >= 200
    assert elapsed < 20, f"scheduling 100 steps took {elapsed:.1f} s"
    close(x, want.astype(np.float32), rtol=1e-4, atol=1e-4)


def test_deep_chain_of_views_that_do_not_merge(device, close):
    x0 = np.arange(128, dtype=np.float32).reshape(8, 16)
    x, want = ug.tensor(x0, device=device), x0
    for i in range(3_000):
        # a transpose read through a reshape is no single strided view: views pile up in a chain
        x = x.reshape(16, 8).T.reshape(8, 16)
        want = want.reshape(16, 8).T.reshape(8, 16)
        if i % 500 == 499:
            x, want = x * 0.5 + 1.0, want * np.float32(0.5) + np.float32(1.0)
    close(x, want)


def test_deep_chain_realizes_again_through_the_structure_cache_and_jit(device, close):
    x0 = np.linspace(0, 1, 64, dtype=np.float32)
    for k in range(2):  # the second graph has the first one's structure: its compiled steps are reused
        close(axpb_chain(ug.tensor(x0 + k, device=device), 3_000), axpb_chain(x0 + k, 3_000), rtol=1e-5)
    f = ug.jit(lambda t: axpb_chain(t, 3_000))
    for k in range(3):
        close(f(ug.tensor(x0 * k, device=device)), axpb_chain(x0 * k, 3_000), rtol=1e-5)


@pytest.mark.slow
def test_chain_of_100k_ops(device, close):
    # 33,334 steps of three ops each, realized at once: under ~30 s per device
    x0 = np.linspace(0, 1, 64, dtype=np.float32)
    x, want = ug.tensor(x0, device=device), x0.astype(np.float64)
    for _ in range(33_334):
        x = (x * 1.0001 + 0.5).sin()
        want = np.sin(want * 1.0001 + 0.5)
    start = time.perf_counter()
    got = x.numpy()
    elapsed = time.perf_counter() - start
    close(got, want.astype(np.float32), rtol=1e-4, atol=1e-5)
    assert elapsed < 60, f"realizing a 100,000-op chain took {elapsed:.1f} s"


def _write_chain(device, steps):
    """`steps` rounds of writes, as numerical code writes them: a scatter_add into an
    accumulator, an integer-array write, a row written from another row (read where it is not
    written: its value gets a buffer of its own) and a whole-tensor update; with numpy's result."""
    rng = np.random.default_rng(steps)
    acc, x = ug.tensor(np.zeros(64, np.float32), device=device), ug.tensor(np.zeros((8, 64), np.float32), device=device)
    e_acc, e_x = np.zeros(64, np.float32), np.zeros((8, 64), np.float32)
    for k in range(steps):
        idx, cols = rng.integers(0, 64, 16), rng.integers(0, 64, 4)
        acc.assign(ug.scatter_add(acc, 0, idx, 1.0))
        np.add.at(e_acc, idx, np.float32(1))
        x[k % 8, cols] = float(k % 5)
        e_x[k % 8, cols] = k % 5
        x[(k + 1) % 8] = x[k % 8] * 0.5
        e_x[(k + 1) % 8] = e_x[k % 8] * np.float32(0.5)
        x.assign(x + 1)
        e_x += 1
    return acc, x, e_acc, e_x


def test_chains_of_writes_compile_a_fixed_set_of_kernels(device, compile_cache):
    # issue 23: 200 `acc.assign(scatter_add(acc, ...))` took ~45 s on cpu (> 250 s for 400), 200
    # `x[idx] = v` 92 s: the scatters, independent of each other (their values and slots do not
    # read acc), were merged into one kernel, new for every chain length, whose LLVM compile
    # grows with the square of its scatter stores. A chain now compiles the kernels of its
    # first steps only, whatever its length (tests/test_deep_graphs.py: the scheduler's work is
    # linear in the chain)
    for steps in (50, 200):
        acc, x, e_acc, e_x = _write_chain(device, steps)
        misses = compile_cache.misses
        ug.realize(acc, x)
        if steps == 200:
            assert compile_cache.misses == misses, "a longer chain compiled kernels the shorter one did not"
        np.testing.assert_array_equal(acc.numpy(), e_acc)
        np.testing.assert_array_equal(x.numpy(), e_x)
