"""The kit's GPU Fourier transform (ug_core.kit.gpufft) run in the loop IR interpreter: Stockham
passes of radix 4 and 2, Bluestein's algorithm for other lengths, every variant of the spec
(complex, real in, half spectra in and out, the real part), zero-padding and truncation, a batch
on both sides of the axis, every norm, workgroups and grids that do not divide the work; against
numpy.fft in float64. (On a device: the kit's test_fft, on vulkan in CI.)"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from ug_core.specs import FftSpec
from ug_core.kit import gpufft

sys.path.insert(0, os.path.dirname(__file__))
import loop_interp  # noqa: E402

F64 = np.dtype(np.float64)


def gpu_fft(x: np.ndarray, spec: FftSpec, local: int = 8, grid: tuple[int, ...] = (65535,) * 3,
            shared: int = gpufft.SHARED_BYTES) -> np.ndarray:
    """Run the plan's programs on x (outer, n_in, inner); the output as (outer, n_out, inner).
    `shared`: the shared memory a fused plan may take (0: one program per pass)."""
    plan = gpufft.plan(spec, local, grid, shared)
    assert plan.fused == (0 < 2 * plan.m * spec.dtype.itemsize <= shared and local > 1)
    dt = spec.dtype
    out = np.zeros(spec.rows * spec.n_out * (1 if spec.real_out else 2), dt)
    buffers = [np.zeros(plan.scratch_size, dt), np.zeros(plan.scratch_size, dt),
               np.ascontiguousarray(x).reshape(-1).view(dt).copy(), out, gpufft.table(plan)]
    for program in gpufft.programs(plan):
        loop_interp.run(program, buffers)
    shape = (spec.outer, spec.n_out, spec.inner)
    return out.reshape(shape) if spec.real_out else out.view(np.complex64 if dt == np.float32 else np.complex128).reshape(shape)


def numpy_fft(x: np.ndarray, spec: FftSpec) -> np.ndarray:
    n, norm = spec.n, spec.norm
    if spec.onesided and spec.real_out:
        return (np.fft.irfft if spec.inverse else np.fft.hfft)(x, n, axis=1, norm=norm)
    if spec.onesided:
        return (np.fft.ihfft if spec.inverse else np.fft.rfft)(x, n, axis=1, norm=norm)
    y = (np.fft.ifft if spec.inverse else np.fft.fft)(x, n, axis=1, norm=norm)
    return y.real if spec.real_out else y


VARIANTS = {   # (real_in, real_out, onesided)
    "c2c": (False, False, False), "r2c_full": (True, False, False), "r2c": (True, False, True),
    "c2r": (False, True, True), "c2c_real_part": (False, True, False),
}


@pytest.mark.parametrize("shared", [0, gpufft.SHARED_BYTES], ids=["passes", "fused"])
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 16, 32, 5, 6, 12, 17])
def test_gpu_fft_matches_numpy(rng, variant, n, shared):
    real_in, real_out, onesided = VARIANTS[variant]
    outer, inner = 2, 3
    for n_in in sorted({n, max(1, n - 2), n + 3}):
        for inverse, norm in ((False, "backward"), (True, "backward"), (False, "ortho"), (True, "forward")):
            spec = FftSpec(outer, inner, n, n_in, real_in, real_out, onesided, inverse, norm, F64)
            x = rng.standard_normal((outer, n_in, inner))
            if not real_in:
                x = x + 1j * rng.standard_normal((outer, n_in, inner))
            got, want = gpu_fft(x, spec, shared=shared), numpy_fft(x, spec)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * np.abs(want).max(),
                                       err_msg=f"{variant} n={n} n_in={n_in} inverse={inverse} {norm}")


@pytest.mark.parametrize("shared", [0, gpufft.SHARED_BYTES], ids=["passes", "fused"])
@pytest.mark.parametrize("local,grid", [(1, (65535,) * 3), (5, (65535,) * 3), (4, (2, 3, 65535)), (64, (65535,) * 3),
                                        (64, (2, 2, 65535))])
@pytest.mark.parametrize("n", [16, 7, 2])
def test_gpu_fft_workgroups_and_grids(rng, local, grid, n, shared):
    """Workgroups that do not divide the threads or rows, grids split over dimensions (guarded
    tails; a fused workgroup's rows past the end store nothing but reach every barrier)."""
    spec = FftSpec(3, 5, n, n, False, False, False, False, "backward", F64)
    x = rng.standard_normal((3, n, 5)) + 1j * rng.standard_normal((3, n, 5))
    np.testing.assert_allclose(gpu_fft(x, spec, local, grid, shared), np.fft.fft(x, axis=1), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n", [64, 1024, 97, 1000])
def test_gpu_fft_float32_accuracy(rng, n):
    """float32 transforms (twiddles and chirp correctly rounded from float64) within the bound
    docs/fft.md states: ||y - exact||_2 <= 2 eps log2(m) ||exact||_2 per transform."""
    spec = FftSpec(4, 1, n, n, False, False, False, False, "backward", np.dtype(np.float32))
    x = (rng.standard_normal((4, n, 1)) + 1j * rng.standard_normal((4, n, 1))).astype(np.complex64)
    got = gpu_fft(x, spec, local=64, shared=0)
    fused = gpu_fft(x, spec, local=64, shared=1 << 20)
    exact = np.fft.fft(x.astype(np.complex128), axis=1)
    m = gpufft.plan(spec, 64, (65535,) * 3).m
    error = np.linalg.norm(got - exact, axis=1) / np.linalg.norm(exact, axis=1)
    assert error.max() <= 2 * np.finfo(np.float32).eps * np.log2(m), error
    np.testing.assert_array_equal(fused, got)   # (the same arithmetic in the same order)


def test_plans_are_stockham_passes_or_bluestein():
    grid = (65535,) * 3
    spec = FftSpec(1, 1, 32, 32, False, False, False, False, "backward", F64)
    plan = gpufft.plan(spec, 64, grid, shared_bytes=0)
    assert not plan.bluestein and [(p.radix, p.span) for p in plan.passes()] == [(2, 1), (4, 2), (4, 8)]
    assert [(p.src, p.dst) for p in plan.passes()] == [(gpufft.SOURCE, gpufft.SCRATCH0), (gpufft.SCRATCH0, gpufft.SCRATCH1),
                                                       (gpufft.SCRATCH1, gpufft.OUT)]
    one = gpufft.plan(FftSpec(1, 1, 4, 4, False, False, False, True, "backward", F64), 64, grid, 0)
    assert [(p.radix, p.src, p.dst, p.sign) for p in one.passes()] == [(4, gpufft.SOURCE, gpufft.OUT, 1)]
    assert one.scratch_buffers() == 0
    odd = gpufft.plan(FftSpec(1, 1, 100, 100, False, False, False, False, "backward", F64), 64, grid, 0)
    assert odd.bluestein and odd.m == 256   # the least power of two >= 2 * 100 - 1
    passes = odd.passes()
    assert [p.sign for p in passes] == [-1] * 4 + [1] * 4
    assert (passes[0].load, passes[3].store, passes[4].load, passes[-1].store) == \
        (gpufft.SOURCE_LOAD, gpufft.FILTER_STORE, gpufft.SCRATCH_LOAD, gpufft.OUT_STORE)
    assert odd.table_size == 256 + 100 + 256


def test_fused_plans_fit_shared_memory():
    """A row that fits SHARED_BYTES is one program (no scratch): tile_threads threads per row
    (m / 4, at most the workgroup), group_rows rows per workgroup; a longer one is passes."""
    grid = (65535,) * 3
    f32 = np.dtype(np.float32)

    def plan(n: int, rows: int = 100, dtype: np.dtype = f32) -> gpufft.FftPlan:
        return gpufft.plan(FftSpec(rows, 1, n, n, False, False, False, False, "backward", dtype), 256, grid)
    assert (plan(2048).tile_threads, plan(2048).group_rows) == (256, 1)
    assert (plan(64).tile_threads, plan(64).group_rows) == (16, 16)
    assert (plan(64, rows=3).tile_threads, plan(64, rows=3).group_rows) == (16, 3)
    assert (plan(2).tile_threads, plan(2).group_rows) == (1, 100)
    assert not plan(4096).fused and not plan(2048, dtype=F64).fused and plan(1024, dtype=F64).fused
    assert plan(1000).bluestein and plan(1000).m == 2048 and plan(1000).fused   # (2048 complex64: 16 KiB)
    assert plan(1100).m == 4096 and not plan(1100).fused
    assert plan(500).fused and len(gpufft.programs(plan(500))) == 1 and plan(500).scratch_buffers() == 0
