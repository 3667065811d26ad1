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
    # the pieces' means: MAX_MERGED_ROOTS roots a kernel, every full kernel the same code
    assert len(pieces) >= 300 * 2 // 8
    assert len({id(i.kernel) for i in pieces}) <= 3
    # each reads its own permutation: the kernels are one, their buffers are not
    assert len({tuple(map(id, i.buffers)) for i in pieces}) == len(pieces)


def test_many_small_pieces_match_numpy():
    out, expected = _pieces(250, seed=3)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)
