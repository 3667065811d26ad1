"""The scheduler on graphs of many thousands of small nodes: scipy's permutation_test(batch=1)
builds one small lazy piece per resample (a gather of the data by a permutation, two means, a
difference) and joins ~1,000 of them, so one realize schedules a graph of ~20,000 nodes. The
time must grow about linearly with the graph (compared by a ratio of two sizes, not by an
absolute time: the machine may be loaded), the pieces' kernels, all alike, are built once
(schedule.build.BuildCache) and the values are numpy's."""

import time

import numpy as np

import ug_core as ug
from ug_core.schedule import KernelItem

DEVICE = "ref"


def _pieces(n_pieces: int, seed: int = 0) -> tuple[ug.Tensor, np.ndarray]:
    """scipy's null distribution of the difference of means of two samples (60 and 150 values),
    one resample per piece, on ug (lazy) and on numpy."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=60), rng.normal(loc=0.3, size=150)
    data_np = np.concatenate([a, b])
    data = ug.asarray(data_np, device=DEVICE)
    pieces, expected = [], []
    for _ in range(n_pieces):
        perm = rng.permutation(210)[None, :]
        batch = ug.take_along_axis(ug.broadcast_to(data, (1, 210)), ug.asarray(perm, device=DEVICE), axis=-1)
        pieces.append(ug.mean(batch[..., :60], axis=-1) - ug.mean(batch[..., 60:], axis=-1))
        resampled = data_np[perm]
        expected.append(resampled[..., :60].mean(axis=-1) - resampled[..., 60:].mean(axis=-1))
    return ug.concat(pieces, axis=0), np.concatenate(expected)


def _schedule_seconds(out: ug.Tensor) -> float:
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        ug.schedule(out)
        best = min(best, time.perf_counter() - t0)
    return best


def test_many_small_pieces_schedule_in_linear_time():
    small, _ = _pieces(200)
    big, _ = _pieces(800)
    t_small, t_big = _schedule_seconds(small), _schedule_seconds(big)
    # 4x the graph: linear is 4x the time; quadratic passes (a walk or build of the whole graph
    # per root) would be 16x and more. The margin is for a loaded machine.
    assert t_big / t_small < 9.0, (t_small, t_big)


def test_alike_pieces_share_one_kernel():
    out, _ = _pieces(300)
    items = [i for i in ug.schedule(out).items if isinstance(i, KernelItem)]
    pieces = [i for i in items if i.kernel.reductions]
    # each piece's difference of means is one root (its two sums fuse into its kernel, see
    # buffers._lifted): MAX_MERGED_ROOTS roots a kernel, every full kernel the same code
    assert len(pieces) == -(-300 // 8)
    assert all(o.shape == (1,) for i in pieces for o in i.outputs)
    # the joins of 16 and of their results read the differences: no kernel more
    assert len(items) <= len(pieces) + 300 // 16 + 4, [i.kernel.name for i in items]
    assert len({id(i.kernel) for i in pieces}) <= 3
    # each reads its own permutation: the kernels are one, their buffers are not
    assert len({tuple(map(id, i.buffers)) for i in pieces}) == len(pieces)


def test_many_small_pieces_match_numpy():
    out, expected = _pieces(250, seed=3)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_a_reduction_read_by_a_small_chain_fuses_into_the_chain():
    # the join cannot fuse a reduction (its kernel is over the joined elements): the buffer goes
    # to the end of the chain of elementwise ops of the reduction's size that reads it, whose
    # kernel computes the reduction, and the join reads that
    rng = np.random.default_rng(5)
    xs = [rng.normal(size=(3, 7)) for _ in range(3)]
    parts = [(ug.asarray(x, device=DEVICE).sum(axis=1) * 2.0 + 1.0).reshape(3, 1) for x in xs]
    out = ug.concat(parts, axis=1)
    items = [i for i in ug.schedule(out).items if isinstance(i, KernelItem)]
    reducing = [i for i in items if i.kernel.reductions]
    assert all(o.op is not ug.graph.Op.REDUCE for i in reducing for o in i.outputs), [i.outputs for i in reducing]
    np.testing.assert_allclose(out.numpy(), np.stack([x.sum(axis=1) * 2 + 1 for x in xs], axis=1), rtol=1e-12)


def test_a_reduction_a_tensor_holds_keeps_its_buffer():
    # a reduction's chain stops at a node something else reads too (here the sum's kept-dims
    # drop, a tensor the caller keeps): that node gets the buffer, so a later read of the
    # tensor finds its value rather than computing the sum again
    rng = np.random.default_rng(6)
    xs = [rng.normal(size=(3, 7)) for _ in range(3)]
    sums = [ug.asarray(x, device=DEVICE).sum(axis=1) for x in xs]
    out = ug.concat([(s * 2.0).reshape(3, 1) for s in sums], axis=1)
    items = [i for i in ug.schedule(out).items if isinstance(i, KernelItem)]
    outputs = {id(o) for i in items for o in i.outputs}
    assert all(id(s.node) in outputs for s in sums)
    np.testing.assert_allclose(out.numpy(), np.stack([x.sum(axis=1) * 2 for x in xs], axis=1), rtol=1e-12)
