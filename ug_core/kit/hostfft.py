"""Fourier transforms where the data is in host memory (Device.fft, a schedule item as sort is:
the kit's devices whose allocator has host views, ref, and the default of Device, which copies
to the host and back).

pocketfft does the work: SciPy's (C++, vectorized over rows, threads over the batch) where it is
importable, through its binding's `out=` so that the result is written straight into the
device's buffer (scipy.fft's public functions return new arrays, a copy more), else numpy's
(numpy.fft) over the device's threads, each taking a block of the batch.
Both keep single precision (float32 in, complex64 out). The `ref` device, the oracle, computes
in float64 and rounds the result once (`wide`), as its sums do.

A long complex transform of one row (FOUR_STEP_MIN values and more, a length that splits into
two near-square factors: a long rfft's packed half is one) runs as Bailey's four-step
algorithm (`four_step`) over SciPy's pocketfft: pocketfft threads only over a batch, so one
row's transform is one thread's, and one of 8M values works out of memory rather than cache
(214 ms of one core for the 8M-point complex64 transform of a 16M rfft, against 110 ms in all
for the four steps here, whose transforms are cache-sized, split over the device's threads).
"""

from __future__ import annotations

import functools
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

import numpy as np

from ..cache import Cache
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
        self._scratch: np.ndarray | None = None   # four_step's scratch matrix, kept for the next call
        self._scratch_lock = threading.Lock()

    def run(self, src: np.ndarray, out: np.ndarray, spec: FftSpec) -> None:
        """`out` = the transform of `src` (both flat arrays over a buffer's memory)."""
        if spec.rows == 0:
            return
        x, y = shaped(src, out, spec)
        _import_scipy()
        if _pocketfft is not None and self._four_step(x, y, spec):
            return
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

    def _four_step(self, x: np.ndarray, y: np.ndarray, spec: FftSpec) -> bool:
        """A long complex transform (complex in and out, the axis contiguous, no padding or
        cut) of a length that splits well (split_length), row by row by four_step over the
        device's threads; False (nothing done) for any other."""
        if spec.real_in or spec.real_out or spec.inner != 1 or x.shape[1] != spec.n or spec.n < FOUR_STEP_MIN:
            return False
        split = split_length(spec.n)
        if split is None:
            return False
        n1, low = split
        key = (spec.n, n1, low, spec.inverse, spec.scale, y.dtype.str)
        table = _TWIDDLES.get(key)
        if table is None:
            table = _TWIDDLES[key] = _twiddles(spec.n, n1, low, spec.inverse, spec.scale, y.dtype)
        with self._scratch_lock:   # (one scratch matrix, reused by the next call of the same size)
            scratch, self._scratch = self._scratch, None
        rows = n1 * (spec.n // n1 + _PAD)
        if scratch is None or scratch.dtype != y.dtype or scratch.size < rows:
            scratch = np.empty(rows, y.dtype)
        try:
            for o in range(spec.outer):
                four_step(x[o, :, 0], y[o, :, 0], n1, table, scratch, not spec.inverse, self)
        finally:
            with self._scratch_lock:
                self._scratch = scratch
        return True

    def map_blocks(self, fn: Any, count: int) -> None:
        """fn(first, stop) for `count` items cut into one contiguous range per thread."""
        parts = min(self.threads, count)
        bounds = [count * p // parts for p in range(parts + 1)]
        if parts <= 1:
            fn(0, count)
            return
        list(self._executor().map(fn, bounds[:-1], bounds[1:]))

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="ug-fft")
        return self._pool

    def after_fork(self) -> None:
        """In a forked child: the pool's threads are gone, a new pool is made when needed (and
        the scratch's lock is new: a parent's thread may have held it at the fork)."""
        self._pool = None
        self._scratch_lock = threading.Lock()


# --- Bailey's four-step algorithm for one long transform ---------------------------------------

# The shortest transform four_step takes: below it a row's transform works in cache (L2) and
# pocketfft's own is as fast
FOUR_STEP_MIN = 1 << 18
# The size of four_step's blocks (a block of columns in its first pass, of rows in its second):
# a block's transforms stay in cache (L2), and a block's row is 8 to 64 values (up to 512 bytes:
# whole cache lines) of contiguous memory. For the 8M-point complex64 transform of a 16M rfft
# (2048 x 4096): 64 columns of 2048 in the first pass (71 ms of one core; 32: 76, 16: 85, 128:
# 86), 32 rows of 4096 in the second (65 ms; 16 to 128 within the noise of each other).
_BLOCK_BYTES = 1 << 20
# The padding of the scratch matrix's rows (values): its rows are not a power of two apart, so a
# block's column does not map to one cache set
_PAD = 8


def split_length(n: int) -> tuple[int, int] | None:
    """(n1, low) for four_step: n = n1 n2 with n1 the largest divisor of n no more than its square
    root, and low the largest divisor of n1 no more than n1's (the twiddle tables' split); None
    where n does not split into factors within a factor 8 of the square roots (a prime n, or
    twice one: the direct transform is better)."""
    def divisor_below(m: int) -> int:
        root = math.isqrt(m)
        for d in range(root, 0, -1):
            if m % d == 0:
                return d
        return 1   # pragma: no cover - 1 divides every m
    n1 = divisor_below(n)
    if n1 * 8 < math.isqrt(n):
        return None
    low = divisor_below(n1)
    if low * 8 < math.isqrt(n1):
        return None
    return n1, low


# four_step's twiddle tables by (n, n1, low, inverse, scale, dtype): a few lengths repeat in a program
_TWIDDLES: Cache[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = Cache("kit.fft_twiddles", max_entries=4)


def _twiddles(n: int, n1: int, low: int, inverse: bool, scale: float, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """four_step's twiddles w[k1, j2] = scale exp(-+2 pi i j2 k1 / n) (k1 < n1, j2 < n2) as the
    product of two tables (k1 = k_high low + k_low): (low, n2) of exp(-+2 pi i j2 k_low / n)
    (times the scale) and (n1 / low, n2) of exp(-+2 pi i j2 k_high low / n), each computed in
    float64 from the exact exponent (j2 k mod n, in integers) and rounded once: 2 (n1 / low +
    low) n2 values, against n for the whole matrix."""
    n2 = n // n1
    j2 = np.arange(n2, dtype=np.int64)
    sign = 2j * math.pi / n if inverse else -2j * math.pi / n

    def table(k: np.ndarray, factor: float) -> np.ndarray:
        turns = (k[:, None] * j2[None, :]) % n   # (exact: below 2**63 for any n of a buffer)
        return (factor * np.exp(sign * turns)).astype(dtype)
    return table(np.arange(low, dtype=np.int64), scale), table(np.arange(n1 // low, dtype=np.int64) * low, 1.0)


def four_step(x: np.ndarray, y: np.ndarray, n1: int, table: tuple[np.ndarray, np.ndarray], scratch: np.ndarray,
              forward: bool, host: HostFft) -> None:
    """y = the transform of x (1-D, complex, length n = n1 n2; the twiddle table's scale
    included), as Bailey's four steps: with x[n2 j1 + j2] = A[j1, j2] (an n1 x n2 matrix),
    (1) the n2 transforms of length n1 down A's columns, (2) times the twiddles exp(-+2 pi i j2
    k1 / n), (3) the n1 transforms of length n2 along the rows of that, C[k1, k2], and (4)
    y[k1 + n1 k2] = C[k1, k2] (y is C transposed). Two passes over memory, each over the
    device's threads in blocks: the first takes a block of A's columns (a copy of contiguous row
    pieces), transforms and twiddles them in cache and stores them in the scratch matrix
    (padded rows); the second transforms a block of its rows in cache and writes them, transposed,
    into y."""
    n = x.shape[0]
    n2 = n // n1
    a = x.reshape(n1, n2)
    b = scratch[: n1 * (n2 + _PAD)].reshape(n1, n2 + _PAD)[:, :n2]
    c_out = y.reshape(n2, n1)
    low_table, high_table = table
    low = low_table.shape[0]
    def width(length: int) -> int:   # (a block of transforms of `length` values: _BLOCK_BYTES)
        return max(8, min(64, _BLOCK_BYTES // (length * y.itemsize)))

    def columns(first: int, stop: int) -> None:
        step = width(n1)
        block = np.empty((n1, step), y.dtype)
        for c in range(first, stop, step):
            w = min(step, stop - c)
            t = block[:, :w]
            np.copyto(t, a[:, c:c + w])
            _pocketfft.c2c(t, axes=[0], forward=forward, inorm=0, out=t, nthreads=1)
            t3 = t.reshape(n1 // low, low, w)
            np.multiply(t3, low_table[None, :, c:c + w], out=t3)
            np.multiply(t3, high_table[:, None, c:c + w], out=b[:, c:c + w].reshape(n1 // low, low, w))

    def rows(first: int, stop: int) -> None:
        step = width(n2)
        # (padded: the rows its transposed read walks are not a power of two apart)
        block = np.empty((step, n2 + _PAD), y.dtype)[:, :n2]
        for r in range(first, stop, step):
            h = min(step, stop - r)
            t = block[:h]
            _pocketfft.c2c(b[r:r + h], axes=[1], forward=forward, inorm=0, out=t, nthreads=1)
            c_out[:, r:r + h] = t.T

    host.map_blocks(columns, n2)
    host.map_blocks(rows, n1)
