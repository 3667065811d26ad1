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
