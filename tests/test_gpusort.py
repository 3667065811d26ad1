"""The kit's GPU sort (ug_core.kit.gpusort) run in the loop IR interpreter: every dtype kind,
NaN, descending, top-k rows, pads, tiles smaller than a row (global steps and local merges),
grids split over dimensions; against numpy's stable argsort. (On a device: the kit's
test_sorting, on vulkan in CI.)"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from ug_core.specs import SortSpec
from ug_core.kit import gpusort

sys.path.insert(0, os.path.dirname(__file__))
import loop_interp  # noqa: E402


def gpu_sort(x: np.ndarray, k: int, descending: bool, indices: bool, local: int, grid: tuple[int, ...]) -> np.ndarray:
    rows, n = x.shape
    spec = SortSpec(rows, n, k, descending, True, indices)
    out_dtype = np.dtype(np.int64) if indices else x.dtype
    plan = gpusort.plan(spec, x.dtype, out_dtype, local, grid)
    programs = gpusort.programs(plan)
    buffers = [np.zeros(rows * plan.m, plan.key_dtype), np.zeros(rows * plan.m, np.int32), x.reshape(-1).copy(),
               np.zeros(rows * k, out_dtype), None]
    for which, step in gpusort.launches(plan):
        buffers[4] = np.array(step, np.int32)
        loop_interp.run(programs[which], buffers)
    return buffers[3].reshape(rows, k)


def stable_argsort(x: np.ndarray, descending: bool) -> np.ndarray:
    if not descending:
        return np.argsort(x, axis=-1, kind="stable")
    flipped = np.argsort(x[..., ::-1], axis=-1, kind="stable")
    return x.shape[-1] - 1 - flipped[..., ::-1]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.bool_], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (2, 8), (1, 37), (4, 100), (3, 300)])
@pytest.mark.parametrize("local,grid", [(8, (65535, 65535, 65535)), (4, (2, 3, 65535)), (1, (65535, 65535, 65535))])
def test_gpu_sort_matches_a_stable_argsort(rng, dtype, shape, local, grid):
    x = rng.integers(-3, 3, shape).astype(dtype)   # many ties
    if np.dtype(dtype).kind == "f":
        x.flat[::7] = np.nan
    for descending in (False, True):
        want = stable_argsort(x, descending)
        np.testing.assert_array_equal(gpu_sort(x, shape[1], descending, True, local, grid), want)
        np.testing.assert_array_equal(gpu_sort(x, shape[1], descending, False, local, grid),
                                      np.take_along_axis(x, want, -1))
        k = max(1, shape[1] // 3)
        np.testing.assert_array_equal(gpu_sort(x, k, descending, True, local, grid), want[:, :k])


def test_launches_are_tiles_steps_merges_and_the_output():
    plan = gpusort.plan(SortSpec(1, 100, 100, False, True, True), np.dtype(np.float32), np.dtype(np.int64), 32,
                        (65535, 65535, 65535))
    assert (plan.m, plan.tile) == (128, 32)
    assert gpusort.launches(plan) == [(gpusort.TILES, (0, 0)),
                                      (gpusort.GLOBAL_STEP, (5, 6)), (gpusort.LOCAL_MERGE, (0, 6)),
                                      (gpusort.GLOBAL_STEP, (6, 7)), (gpusort.GLOBAL_STEP, (5, 7)),
                                      (gpusort.LOCAL_MERGE, (0, 7)), (gpusort.OUTPUT, (0, 0))]
