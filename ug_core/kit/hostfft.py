"""Fourier transforms where the data is in host memory (Device.fft, a schedule item as sort is:
the kit's devices whose allocator has host views, ref, and the default of Device, which copies
to the host and back).

pocketfft does the work: SciPy's (C++, vectorized over rows, threads over the batch) where it is
importable, through its binding's `out=` so that the result is written straight into the
device's buffer (scipy.fft's public functions return new arrays, a copy more), else numpy's
(numpy.fft) over the device's threads, each taking a block of the batch.
Both keep single precision (float32 in, complex64 out). The `ref` device, the oracle, computes
in float64 and rounds the result once (`wide`), as its sums do.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

import numpy as np

from ..device import register_host_fallback
from ..specs import FftSpec
from ..dtypes import complex_of

# scipy.fft and SciPy's binding of pocketfft, imported on the first transform (scipy.fft takes
# some 0.2 s to import, and the kit is imported whenever a backend's settings are read); None
# where not importable
_UNSET: Any = object()
_scipy_fft: Any = _UNSET
_pocketfft: Any = _UNSET


def _import_scipy() -> None:
    global _scipy_fft, _pocketfft
    if _scipy_fft is _UNSET:
        try:   # (an optional dependency: numpy's pocketfft is the fallback)
            import scipy.fft as scipy_fft  # type: ignore[import-untyped]
        except ImportError:   # pragma: no cover - scipy is installed with the test extras
            scipy_fft = None
        _scipy_fft = scipy_fft
    if _pocketfft is _UNSET:
        try:   # SciPy's binding of pocketfft itself, which writes into a given array (`out=`)
            from scipy.fft._pocketfft import pypocketfft  # type: ignore[import-untyped]
        except ImportError:   # pragma: no cover - a SciPy without it: scipy.fft's results are copied
            pypocketfft = None
        _pocketfft = pypocketfft


def shaped(src: np.ndarray, out: np.ndarray, spec: FftSpec) -> tuple[np.ndarray, np.ndarray]:
    """The source as (outer, n_in, inner) and the output as (outer, n_out, inner) arrays of
    the spec's real or complex dtype, sharing the memory of the flat arrays given (of any dtype:
    a buffer's bytes)."""
    def view(flat: np.ndarray, real: bool, extent: int) -> np.ndarray:
        dt = spec.dtype if real else complex_of(spec.dtype)
        count = spec.outer * extent * spec.inner
        return flat.reshape(-1).view(np.uint8)[: count * dt.itemsize].view(dt).reshape(spec.outer, extent, spec.inner)
    return view(src, spec.real_in, spec.n_in), view(out, spec.real_out, spec.n_out)


def transform(lib: ModuleType, x: np.ndarray, spec: FftSpec, **options: Any) -> np.ndarray:
    """The spec's transform of the (outer, n_in, inner) array x along axis 1 by `lib`
    (numpy.fft or scipy.fft, which share these names and meanings)."""
    n, norm = spec.n, spec.norm
    if spec.onesided and spec.real_out:   # a Hermitian half in, real out (hfft is the forward sign)
        fn = lib.irfft if spec.inverse else lib.hfft
    elif spec.onesided:                   # real in, a half out (ihfft is the inverse sign)
        fn = lib.ihfft if spec.inverse else lib.rfft
    else:
        fn = lib.ifft if spec.inverse else lib.fft
    result = fn(x, n=n, axis=1, norm=norm, **options)
    return result.real if spec.real_out and not spec.onesided else result


def run_numpy(src: np.ndarray, out: np.ndarray, spec: FftSpec, wide: bool = False) -> None:
    """`out` (flat) = the transform of `src` (flat) by numpy's pocketfft; `wide`: computed in
    float64 and rounded once (the oracle's accuracy)."""
    if spec.rows == 0:
        return
    x, y = shaped(src, out, spec)
    if wide and spec.dtype != np.float64:
        x = x.astype(np.float64 if spec.real_in else np.complex128)
    y[...] = transform(np.fft, x, spec)


register_host_fallback("fft", functools.partial(run_numpy, wide=True))   # Device.fft's default (ug_core.device cannot import the kit, built on it)


class HostFft:
    """The transforms of one device, over its threads."""

    def __init__(self, threads: int):
        self.threads = max(1, threads)
        self._pool: ThreadPoolExecutor | None = None

    def run(self, src: np.ndarray, out: np.ndarray, spec: FftSpec) -> None:
        """`out` = the transform of `src` (both flat arrays over a buffer's memory)."""
        if spec.rows == 0:
            return
        x, y = shaped(src, out, spec)
        _import_scipy()
        if _pocketfft is not None and self._in_place(x, y, spec):
            return
        if _scipy_fft is not None:
            y[...] = transform(_scipy_fft, x, spec, workers=self.threads)
            return
        # numpy's, a block of the batch per thread, along the longer of the batch's two axes
        axis = 0 if spec.outer >= spec.inner else 2
        blocks = min(self.threads, x.shape[axis])
        if blocks <= 1:
            y[...] = transform(np.fft, x, spec)
            return
        bounds = [x.shape[axis] * b // blocks for b in range(blocks + 1)]
        cuts = [(slice(lo, hi),) if axis == 0 else (slice(None), slice(None), slice(lo, hi))
                for lo, hi in zip(bounds, bounds[1:])]

        def one(cut: tuple[slice, ...]) -> None:
            y[cut] = transform(np.fft, x[cut], spec)
        list(self._executor().map(one, cuts))

    def _in_place(self, x: np.ndarray, y: np.ndarray, spec: FftSpec) -> bool:
        """The transform by SciPy's pocketfft binding, written straight into y (scipy.fft's
        functions return a new array, which costs a copy of the result). False (nothing done)
        where the binding refuses the call (a SciPy whose private API changed)."""
        used = spec.n_used
        if x.shape[1] > used:       # (cut: a view)
            x = x[:, :used]
        elif x.shape[1] < used:     # (padded: a copy, as scipy.fft makes one)
            padded = np.zeros((spec.outer, used, spec.inner), x.dtype)
            padded[:, : x.shape[1]] = x
            x = padded
        inorm = 1 if spec.norm == "ortho" else 0 if spec.scale == 1.0 else 2
        forward = not spec.inverse
        try:
            if spec.onesided and spec.real_out:
                _pocketfft.c2r(x, axes=[1], lastsize=spec.n, forward=forward, inorm=inorm, out=y,
                               nthreads=self.threads)
            elif spec.onesided:
                _pocketfft.r2c(x, axes=[1], forward=forward, inorm=inorm, out=y, nthreads=self.threads)
            elif spec.real_out:     # (the real part of a complex transform: a gradient's)
                y[...] = _pocketfft.c2c(x, axes=[1], forward=forward, inorm=inorm, nthreads=self.threads).real
            else:                   # (a real x: pocketfft's real transform, every output)
                _pocketfft.c2c(x, axes=[1], forward=forward, inorm=inorm, out=y, nthreads=self.threads)
        except (TypeError, ValueError, AttributeError):   # pragma: no cover - another SciPy's binding
            return False
        return True

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="ug-fft")
        return self._pool

    def after_fork(self) -> None:
        """In a forked child: the pool's threads are gone, a new pool is made when needed."""
        self._pool = None
