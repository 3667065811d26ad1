"""Deep graphs: chains far past Python's recursion limit schedule in kernels of bounded size
(schedule.MAX_KERNEL_SIZE) and are freed without crashing; nothing here runs on a device (the
kit's ug_core/testing/test_deep_graphs.py compiles and runs them on each device)."""

import numpy as np

import ug_core as ug
from ug_core.schedule import MAX_KERNEL_SIZE
from ug_core.testing.test_deep_graphs import axpb_chain, kernel_sizes

DEVICE = "ref"


def test_long_chain_is_cut_into_bounded_kernels_that_compile_once():
    x = ug.tensor(np.ones(32, np.float32), device=DEVICE)
    sched = ug.schedule(axpb_chain(x, 5_000))
    sizes = kernel_sizes(sched)
    assert max(sizes) <= MAX_KERNEL_SIZE
    assert len(sizes) <= 2 * 10_000 // MAX_KERNEL_SIZE + 2  # not cut needlessly small
    # a regular chain is cut regularly: its kernels are one program, compiled once
    assert len({item.kernel.key() for item in sched.items}) <= 3


def test_freeing_a_deep_unrealized_chain_does_not_crash():
    # each node holds its sources: freeing the last one frees the chain, one deallocation inside
    # the other (CPython's trashcan keeps that off the C stack)
    x = ug.tensor(np.ones(4, np.float32), device=DEVICE)
    for _ in range(100_000):
        x = -x
    del x
    y = ug.tensor(np.ones(4, np.float32), device=DEVICE)
    for _ in range(20_000):
        y = y.reshape(2, 2).T.reshape(4)
    del y


def test_chains_of_writes_are_scheduled_in_linear_work(monkeypatch):
    # issue 23: chains of writes (scatter_add into an accumulator, integer-array and basic
    # writes, whole updates) took time superlinear in the chain. Measured here without a clock:
    # the kernels the scheduler builds and its peak memory grow as the chain (a chain 4x as
    # long: 4x plus a constant). Before, the scheduler kept every kernel's transitive
    # dependencies (peak 1.9 MB for 25 steps, 12.8 MB for 100) and compared each kernel with
    # every earlier one to merge them.
    import tracemalloc

    from ug_core.schedule import buffers, build as build_module, fuse
    from ug_core.testing.test_deep_graphs import _write_chain, schedule_module

    builds = 0
    build = build_module._build

    def counted(*args, **kwargs):
        nonlocal builds
        builds += 1
        return build(*args, **kwargs)

    for module in (buffers, fuse):   # the passes that build kernels
        monkeypatch.setattr(module, "_build", counted)
    work = {}
    for steps in (25, 100):
        acc, x, _, _ = _write_chain(DEVICE, steps)
        builds = 0
        tracemalloc.start()
        try:
            schedule_module.create_schedule([acc.node, x.node])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        work[steps] = (builds, peak)
    (builds_25, peak_25), (builds_100, peak_100) = work[25], work[100]
    assert builds_100 <= 4 * builds_25 + 16, work
    assert peak_100 < 5 * peak_25, work
