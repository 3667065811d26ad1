"""The per-node bookkeeping of the lazy graph (graph.Node._readers): every live reader is seen,
gone ones do not linger, and a node costs the garbage collector few objects (issue 27: SciPy's
permutation_test builds tens of thousands of nodes, and the collector walked all of them)."""

from __future__ import annotations

import gc
import threading

import numpy as np

import ug_core as ug
from ug_core import tiers


def _tracked_after(build) -> float:
    """GC-tracked objects left per step by `build(steps)` (which keeps its results)."""
    # (no background compile may run meanwhile: gc.get_objects() hands out the tuple another
    # thread is still building, and CPython then fails that thread's resize of it)
    tiers.wait()
    gc.collect()
    before = len(gc.get_objects())
    kept = build(400)
    gc.collect()
    after = len(gc.get_objects())
    del kept
    return (after - before) / 400


def test_readers_live_and_gone():
    x = ug.asarray(np.arange(8.0), device="ref")
    a = x + 1
    node = a._node
    assert node.readers() == [a]          # one reader: the tensor holding it
    b = a * 2
    assert set(map(id, node.readers())) == {id(a), id(b._node)}
    del a
    gc.collect()
    assert node.readers() == [b._node]    # the tensor went, the lazy node still reads it
    c = b + 1
    assert [type(r).__name__ for r in b._node.readers()] == ["Tensor", "Node"]
    np.testing.assert_array_equal(c.numpy(), (np.arange(8.0) + 1) * 2 + 1)


def test_many_readers_none_lost():
    x = ug.asarray(np.arange(4.0), device="ref")
    kept = [x + i for i in range(300)]    # past the pruning sizes (64, 128, 256)
    dropped = [x * i for i in range(300)]
    del dropped
    gc.collect()
    readers = x._node.readers()
    assert {id(k._node) for k in kept} <= {id(r) for r in readers}
    assert len(readers) == 301            # the 300 kept nodes and x itself


def test_readers_added_from_threads_none_lost():
    x = ug.asarray(np.arange(4.0), device="ref")
    node = x._node
    out: list[list[ug.Tensor]] = [[] for _ in range(4)]
    barrier = threading.Barrier(4)

    def work(k: int) -> None:
        barrier.wait()
        for i in range(500):
            out[k].append(x + float(i))
            if i % 3 == 0:
                x * 2.0                   # a reader that goes at once

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    live = {id(r) for r in node.readers()}
    assert all(id(t._node) in live for part in out for t in part)


def test_in_place_write_sees_a_reader_whose_tensor_went():
    x = ug.asarray(np.arange(6.0), device="cpu")
    y = x * 3
    y.numpy()
    z = y + 1            # reads y's old value (lazy)
    del y                # z's node still reads it: the write below must not overwrite it
    gc.collect()
    w = ug.asarray(np.zeros(6), device="cpu")
    x[...] = w           # (x's write, not y's: y's value is y's own buffer)
    np.testing.assert_array_equal(z.numpy(), np.arange(6.0) * 3 + 1)
    a = ug.asarray(np.arange(6.0), device="cpu") + 0
    a.numpy()
    b = a * 2            # lazy reader of a's buffer
    a[...] = 0           # a write to a: b keeps the old value
    np.testing.assert_array_equal(b.numpy(), np.arange(6.0) * 2)
    np.testing.assert_array_equal(a.numpy(), np.zeros(6))


def test_few_tracked_objects_per_node():
    x = ug.asarray(np.arange(100.0), device="ref")
    y = ug.asarray(np.arange(100.0), device="ref")

    def build(steps: int) -> list[ug.Tensor]:
        keep = []
        for _ in range(steps):
            a = x + 1       # a const, its broadcast view, the add
            b = a * y       # the multiply
            keep.append(ug.sum(b))   # the sum (and its reshape)
        return keep

    nodes_per_step = 6
    per_step = _tracked_after(build)
    # per node: the node, its sources' tuple and one weak reference; per step the kept tensor,
    # its reference and a view: 3 * 6 + 3 = 21 (each node's list of readers and the dead
    # intermediate tensors' references made 28)
    assert per_step <= 3 * nodes_per_step + 3 + 0.5, per_step
