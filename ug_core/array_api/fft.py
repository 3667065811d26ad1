"""The Array API `fft` extension (exposed as `ug_core.fft`): fft, ifft, fftn, ifftn, rfft, irfft,
rfftn, irfftn, hfft, ihfft, fftfreq, rfftfreq, fftshift, ifftshift, with numpy's meanings.

A transform along one axis is a schedule item of its own (ops.Op.FFT, device.FftSpec; as sort
is): the device's Fourier transform of the source's buffer, read in place through its layout
(outer, n, inner) around the axis, so any axis is transformed without a transposed copy, and
`n` pads or cuts the source as the item reads it. The work around it fuses as any work does: a
window multiply before is the kernel that makes the item's source, `abs(...) ** 2` after is
the kernel that reads its result. Host-memory devices (cpu, c) run pocketfft (SciPy's where
importable, else numpy's) over their threads (a long row as Bailey's four steps: kit.hostfft),
ref numpy's in float64; gpu targets (vulkan,
cuda) run Stockham radix-4/2 passes and Bluestein's algorithm for other lengths, generated as
loop IR (ug_core.kit.gpufft). fftn and friends are one item per axis.

dtypes (numpy 2's rule): float32 (and float16) transforms compute in single precision, giving
complex64 (or float32 for the real outputs of irfft / hfft), float64 ones complex128; an
integer or bool input is float64 (as numpy's). fft / ifft / hfft take real inputs as numpy
does (a real input is read as its complex value, without a conversion pass); rfft / ihfft
refuse complex ones (TypeError, as numpy). fftfreq / rfftfreq are lazy index arithmetic (no
memory until used), fftshift / ifftshift rolls: fused views.

Derivatives: a transform's VJP is the transform the other way (fft_vjp, at the end here: ops.py's
rule for Op.FFT), so ug.grad goes through every function here.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from .. import dtypes, graph
from ..custom import define_vjp
from ..specs import FFT_NORMS, FftSpec
from ..plugins import registry
from ..shapes import normalize_axis
from ..tensor import Tensor, checked_tensor, full, resolve_device, zeros
from ..tensor_arith import combine, parts, where
from ..view import prod
from ._common import check_tensor
from .manipulation import concat, flip, roll

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def fft(x: Tensor, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Tensor:
    """The one-dimensional discrete Fourier transform along `axis`, of length n (the input cut
    or zero-padded to it; None: the axis's length): out[k] = sum_j x[j] exp(-2 pi i j k / n),
    scaled as `norm` says (backward: 1; ortho: 1 / sqrt(n); forward: 1 / n)."""
    return _one(x, n, axis, norm, "fft", inverse=False)


def ifft(x: Tensor, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Tensor:
    """The inverse of fft: out[k] = sum_j x[j] exp(+2 pi i j k / n), scaled by 1 / n (norm
    "backward"), 1 / sqrt(n) ("ortho") or 1 ("forward")."""
    return _one(x, n, axis, norm, "ifft", inverse=True)


def rfft(x: Tensor, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Tensor:
    """fft of a real input, its first n // 2 + 1 values (the rest are their conjugates)."""
    return _one(x, n, axis, norm, "rfft", inverse=False, onesided_out=True)


def ihfft(x: Tensor, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Tensor:
    """ifft of a real input, its first n // 2 + 1 values (the inverse of hfft)."""
    return _one(x, n, axis, norm, "ihfft", inverse=True, onesided_out=True)


def irfft(x: Tensor, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Tensor:
    """The inverse of rfft: the real signal of length n (None: 2 (m - 1) for an axis of m)
    whose spectrum's first n // 2 + 1 values are x's first n // 2 + 1 (x cut or zero-padded
    to them; the imaginary parts of the first and, for an even n, the last are ignored)."""
    return _one(x, n, axis, norm, "irfft", inverse=True, onesided_in=True)


def hfft(x: Tensor, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Tensor:
    """The (forward) transform of a signal with Hermitian symmetry given by its first half x:
    a real output of length n (None: 2 (m - 1))."""
    return _one(x, n, axis, norm, "hfft", inverse=False, onesided_in=True)


def fftn(x: Tensor, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str = "backward") -> Tensor:
    """fft along each of `axes` (None: the last len(s) axes, or all), of lengths `s` (None: the
    axes' own; an entry -1: that axis's own)."""
    return _many(x, s, axes, norm, "fftn", inverse=False)


def ifftn(x: Tensor, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str = "backward") -> Tensor:
    """ifft along each of `axes`, as fftn."""
    return _many(x, s, axes, norm, "ifftn", inverse=True)


def rfftn(x: Tensor, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str = "backward") -> Tensor:
    """rfft along the last of `axes`, then fft along the others (a real input)."""
    x = check_tensor(x, "rfftn")
    sizes, axes_ = _sizes_axes(x, s, axes, "rfftn", half_last=False)
    if not axes_:
        raise ValueError(f"rfftn: needs at least one axis to transform; x has shape {x.shape}")
    out = _one(x, sizes[-1], axes_[-1], norm, "rfftn", inverse=False, onesided_out=True)
    for n, a in zip(reversed(sizes[:-1]), reversed(axes_[:-1])):
        out = _one(out, n, a, norm, "rfftn", inverse=False)
    return out


def irfftn(x: Tensor, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str = "backward") -> Tensor:
    """ifft along all of `axes` but the last, then irfft along the last (of length s[-1]; None:
    2 (m - 1))."""
    x = check_tensor(x, "irfftn")
    sizes, axes_ = _sizes_axes(x, s, axes, "irfftn", half_last=True)
    if not axes_:
        raise ValueError(f"irfftn: needs at least one axis to transform; x has shape {x.shape}")
    out = x
    for n, a in zip(reversed(sizes[:-1]), reversed(axes_[:-1])):
        out = _one(out, n, a, norm, "irfftn", inverse=True)
    return _one(out, sizes[-1], axes_[-1], norm, "irfftn", inverse=True, onesided_in=True)


def fftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: str | None = None) -> Tensor:
    """The sample frequencies of fft's bins for a signal of n samples spaced d apart:
    [0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d n), of `dtype` (a real float; None: ug's
    default, float32). Lazy index arithmetic in float64 (where the device has it), rounded once."""
    n = _count(n, "fftfreq")
    k = _index(n, device)
    return _frequencies(where(k < (n + 1) // 2, k, k - n), n, d, dtype, k.device, "fftfreq")


def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: str | None = None) -> Tensor:
    """The sample frequencies of rfft's bins: [0, 1, ..., n // 2] / (d n)."""
    n = _count(n, "rfftfreq")
    k = _index(n // 2 + 1, device)
    return _frequencies(k, n, d, dtype, k.device, "rfftfreq")


def fftshift(x: Tensor, /, *, axes: int | Sequence[int] | None = None) -> Tensor:
    """x with the zero-frequency bin moved to the middle of each of `axes` (None: all): a roll
    by n // 2 (a fused view)."""
    x = check_tensor(x, "fftshift")
    axes_ = _shift_axes(x, axes, "fftshift")
    return roll(x, tuple(x.shape[a] // 2 for a in axes_), axis=axes_) if axes_ else x


def ifftshift(x: Tensor, /, *, axes: int | Sequence[int] | None = None) -> Tensor:
    """The inverse of fftshift: a roll by -(n // 2) along each of `axes` (None: all)."""
    x = check_tensor(x, "ifftshift")
    axes_ = _shift_axes(x, axes, "ifftshift")
    return roll(x, tuple(-(x.shape[a] // 2) for a in axes_), axis=axes_) if axes_ else x


# --- one axis ---------------------------------------------------------------------------------


def _one(x: Tensor, n: int | None, axis: int, norm: str | None, fn: str, inverse: bool,
         onesided_out: bool = False, onesided_in: bool = False) -> Tensor:
    """The transform of x along one axis: fft / ifft (complex out), rfft / ihfft (a half out of
    a real input), irfft / hfft (a real out of a Hermitian half)."""
    x = check_tensor(x, fn)
    norm = _norm(norm, fn)
    if x.ndim == 0:
        raise ValueError(f"{fn}: x must have at least one dimension, got a 0-d tensor")
    axis = normalize_axis(axis, x.ndim)
    m = x.shape[axis]
    if n is None:
        n = 2 * (m - 1) if onesided_in else m
        if n < 1:
            raise ValueError(f"{fn}: an axis of length {m} has no transform (n would be {n}: give n)")
    n = _count(n, fn, "n")
    source, real_in = _as_input(x, fn, real=onesided_out, complex_=onesided_in)
    part = _part(source.dtype)
    spec_n_in = max(m, 1)
    spec = FftSpec(prod(x.shape[:axis]), prod(x.shape[axis + 1:]), n, spec_n_in, real_in, onesided_in,
                   onesided_out or onesided_in, inverse, norm, part)
    shape = x.shape[:axis] + (spec.n_out,) + x.shape[axis + 1:]
    out_dtype = part if spec.real_out else dtypes.complex_of(part)
    if out_dtype not in registry.get(x.device).dtypes:
        raise TypeError(f"{fn}: device {x.device!r} has no {out_dtype.name}, the dtype of the transform of {x.dtype.name}")
    if spec.rows == 0 or m == 0:   # nothing to transform, or only zeros (an empty axis padded)
        return full(shape, 0, out_dtype, x.device)
    if _packs(spec):
        return _packed_rfft(source, spec, axis)
    return Tensor(graph.fft(source.node, spec, axis))


# A long rfft (contiguous along its axis, an even length) is a complex transform of half the
# length, of the signal's even and odd samples as the real and imaginary parts (its buffer read
# as complex pairs: no copy), finished by one fused elementwise kernel: half the work of a full
# complex transform, and on the host pocketfft's complex transform of n / 2 took 60 % of the
# time of its real transform of n (a 16M float32 rfft).
PACKED_RFFT_MIN = 1 << 14


def _packs(spec: FftSpec) -> bool:
    return (spec.real_in and spec.onesided and not spec.real_out and not spec.inverse and spec.inner == 1
            and spec.n == spec.n_in and spec.n % 2 == 0 and spec.n >= PACKED_RFFT_MIN)


def _packed_rfft(x: Tensor, spec: FftSpec, axis: int) -> Tensor:
    """rfft of the real x (n samples along the last-like axis) from Z, the complex transform of
    the n / 2 pairs z[j] = x[2j] + i x[2j+1]: with E[k] = (Z[k] + conj(Z[h-k])) / 2 and
    O[k] = (Z[k] - conj(Z[h-k])) / 2i (the transforms of the even and odd samples; indices mod
    h = n / 2), X[k] = E[k] + exp(-2 pi i k / n) O[k] for k = 0 ... h. Its derivative is rfft's
    (the packing is an implementation detail)."""
    h = spec.n // 2
    half = replace(spec, n=h, n_in=h, real_in=False, onesided=False, norm="backward", packed=True)
    z = Tensor(graph.fft(x.node, half, axis))
    first = z[(slice(None),) * axis + (slice(0, 1),)]
    a, b = parts(concat([z, first], axis=axis))                 # Z[k mod h], k = 0 ... h
    c, d = parts(concat([first, flip(z, axis=axis)], axis=axis))   # Z[(h - k) mod h]
    k = _index(h + 1, x.device).reshape((h + 1,) + (1,) * (x.ndim - axis - 1))
    wide = _F64 if spec.dtype == _F64 else _F32
    angle = k.astype(wide) * (-2 * math.pi / spec.n)
    cos, sin = angle.cos(), angle.sin()                        # exp(-2 pi i k / n)
    # in real arithmetic (the complex operators' care for infinities is not needed: a transform
    # of a non-finite signal is NaN everywhere): E = (Z + conj(Zm)) / 2, O = (Z - conj(Zm)) / 2i
    even_re, even_im = (a + c) * 0.5, (b - d) * 0.5
    odd_re, odd_im = (b + d) * 0.5, (c - a) * 0.5
    re = even_re + cos * odd_re - sin * odd_im
    im = even_im + cos * odd_im + sin * odd_re
    if spec.scale != 1.0:
        re, im = re * spec.scale, im * spec.scale
    out = combine(re, im)
    return define_vjp(out, [x], lambda g, out, x: (fft_vjp(g, x, spec),))


def _as_input(x: Tensor, fn: str, real: bool = False, complex_: bool = False) -> tuple[Tensor, bool]:
    """(the tensor the transform reads, whether it is real): a float of float32 or float64
    (float16 computes in float32; ints and bools in float64, as numpy); with `real` (rfft,
    ihfft) a complex input is a TypeError; with `complex_` (irfft, hfft) a real input is made
    complex (its imaginary parts 0)."""
    dt = x.dtype
    if dt.kind == "c":
        if real:
            raise TypeError(f"{fn}: x must be real-valued, got {dt.name} (take .real, or use fft)")
        return x, False
    if dt.kind != "f":
        dt = _F64
    elif dt.itemsize < 4:
        dt = _F32
    if dt not in registry.get(x.device).dtypes:
        raise TypeError(f"{fn}: device {x.device!r} has no {dt.name}, which a transform of {x.dtype.name} needs")
    real_x = x.astype(dt) if dt != x.dtype else x
    if complex_:
        return combine(real_x, full(x.shape, 0, dt, x.device)), False
    return real_x, True


def _part(dt: np.dtype) -> np.dtype:
    return dtypes.part_dtype(dt) if dt.kind == "c" else dt


def _norm(norm: str | None, fn: str) -> str:
    if norm is None:   # (numpy's default)
        return "backward"
    if norm not in FFT_NORMS:
        raise ValueError(f"{fn}: norm must be one of {', '.join(map(repr, FFT_NORMS))}, got {norm!r}")
    return norm


def _count(n: Any, fn: str, what: str = "n") -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{fn}: {what} must be an int, got {n!r}")
    if n < 1:
        raise ValueError(f"{fn}: {what} must be at least 1, got {n}")
    return int(n)


# --- several axes -----------------------------------------------------------------------------


def _many(x: Tensor, s: Sequence[int] | None, axes: Sequence[int] | None, norm: str | None, fn: str,
          inverse: bool) -> Tensor:
    x = check_tensor(x, fn)
    sizes, axes_ = _sizes_axes(x, s, axes, fn, half_last=False)
    if not axes_:   # nothing to transform: x as the transform's dtype
        _norm(norm, fn)
        source, _ = _as_input(x, fn)
        return source.astype(dtypes.complex_of(_part(source.dtype)))
    out = x
    for n, a in zip(reversed(sizes), reversed(axes_)):   # (the last axis first, as numpy)
        out = _one(out, n, a, norm, fn, inverse)
    return out


def _sizes_axes(x: Tensor, s: Sequence[int] | None, axes: Sequence[int] | None, fn: str,
                half_last: bool) -> tuple[list[int], list[int]]:
    """The transform's lengths and axes: axes None: the last len(s) axes (all without s); s
    None: each axis's length (the last one's 2 (m - 1) for irfftn); an entry -1 of s: that
    axis's length."""
    if axes is None:
        count = x.ndim if s is None else len(_sequence(s, fn, "s"))
        if count > x.ndim:
            raise ValueError(f"{fn}: s has {count} entries for a tensor of {x.ndim} dimensions")
        axes_ = list(range(x.ndim - count, x.ndim))
    else:
        axes_ = [normalize_axis(int(a), x.ndim) for a in _sequence(axes, fn, "axes")]
    if s is None:
        sizes = [x.shape[a] for a in axes_]
        if half_last and axes_:
            sizes[-1] = 2 * (sizes[-1] - 1)
            if sizes[-1] < 1:
                raise ValueError(f"{fn}: an axis of length {x.shape[axes_[-1]]} has no transform (give s)")
    else:
        given = list(_sequence(s, fn, "s"))
        if len(given) != len(axes_):
            raise ValueError(f"{fn}: s ({len(given)} entries) and axes ({len(axes_)}) must have the same length")
        sizes = []
        for i, (size, a) in enumerate(zip(given, axes_)):
            if isinstance(size, (int, np.integer)) and not isinstance(size, bool) and size == -1:
                size = 2 * (x.shape[a] - 1) if half_last and i == len(axes_) - 1 else x.shape[a]
            sizes.append(_count(size, fn, "s"))
    return sizes, axes_


def _sequence(value: Any, fn: str, what: str) -> tuple[Any, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (value,)
    try:
        return tuple(value)
    except TypeError:
        raise TypeError(f"{fn}: {what} must be a sequence of ints, got {value!r}") from None


def _shift_axes(x: Tensor, axes: int | Sequence[int] | None, fn: str) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(x.ndim))
    return tuple(normalize_axis(int(a), x.ndim) for a in _sequence(axes, fn, "axes"))


# --- frequencies ------------------------------------------------------------------------------


def _index(count: int, device: str | None) -> Tensor:
    dev = resolve_device(device)
    return Tensor(graph.iota((count,), np.dtype(np.int64), dev))


def _frequencies(k: Tensor, n: int, d: float, dtype: Any, device: str, fn: str) -> Tensor:
    """k / (d n), computed as numpy does (k times 1 / (n d), in float64 where the device has
    it) and rounded once to `dtype`."""
    if isinstance(d, bool) or not isinstance(d, (int, float, np.integer, np.floating)):
        raise TypeError(f"{fn}: d must be a real number, got {d!r}")
    dt = _F32 if dtype is None else dtypes.to_dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"{fn}: dtype must be a real floating-point dtype, got {dt.name}")
    wide = _F64 if _F64 in registry.get(device).dtypes else dt
    with np.errstate(divide="ignore"):
        step = 1.0 / (n * float(d)) if d else math.copysign(math.inf, float(d))
    return (k.astype(wide) * step).astype(dt)


# --- the derivative (ops.Op.FFT's rule calls it, as autodiff.fft_vjp) ---------------------------

_INT64 = np.dtype(np.int64)


def fft_vjp(g: Tensor, x: Tensor, spec: Any) -> Tensor:
    """A discrete Fourier transform (ops.Op.FFT) is linear: y = s W x (W the DFT matrix of one
    sign, s the norm's scale), so x's cotangent is s W^H g, the transform of g with the other
    sign and the same scale (the other direction with the other norm), its length cut or padded
    back to x's along the axis. A real input's cotangent is the real part of that. A half
    spectrum (rfft: x real, y its first n // 2 + 1 values) is W's top rows: g padded with zeros
    to n, transformed back, the real part: irfft of g with its inner bins halved (irfft counts
    each of them twice, as a bin and its mirror). A real output from a Hermitian half (irfft) is
    the transpose: rfft of g, the inner bins doubled."""
    axis = _fft_axis(g.shape, spec.outer, spec.n_out, spec.inner)
    n, half = spec.n, spec.n // 2 + 1
    norm = {"backward": "forward", "forward": "backward"}.get(spec.norm, spec.norm)

    def bins(weight_inner: float) -> Tensor:
        """1 at bin 0 (and n / 2 for an even n), `weight_inner` at the others, along the axis."""
        k = checked_tensor(graph.iota((half,), _INT64, g.device))
        ends = (k == 0) | (k * 2 == n)
        w = where(ends, 1.0, weight_inner).astype(spec.dtype)
        return w.reshape((half,) + (1,) * (g.ndim - axis - 1))

    back = replace(spec, inverse=not spec.inverse, norm=norm)
    if spec.onesided and not spec.real_out:      # rfft / ihfft: an irfft / hfft of g, inner bins halved
        source = g * bins(0.5)
        back = replace(back, real_in=False, real_out=True, n_in=half)
    elif spec.onesided:                          # irfft / hfft: an rfft / ihfft of g, inner bins doubled
        source = g
        back = replace(back, real_in=True, real_out=False, n_in=n)
    else:                                        # complex (or real) in, complex (or real) out: the other way
        source = g
        back = replace(back, real_in=spec.real_out, real_out=spec.real_in, n_in=n)
    out = checked_tensor(graph.fft(source.node, back, axis))
    if spec.onesided and spec.real_out:
        out = out * bins(2.0)
    have = out.shape[axis]
    if spec.n_in < have:
        out = out[(slice(None),) * axis + (slice(0, spec.n_in),)]
    elif spec.n_in > have:   # (the source's elements past n got no gradient: zeros)
        tail = out.shape[:axis] + (spec.n_in - have,) + out.shape[axis + 1:]
        out = concat([out, zeros(tail, out.dtype, out.device)], axis=axis)
    return out.reshape(x.shape)


def _fft_axis(shape: tuple[int, ...], outer: int, extent: int, inner: int) -> int:
    """An axis of `shape` whose extent is `extent`, with `outer` elements before it and `inner`
    after (any such axis: they lay the values out alike)."""
    for axis, size in enumerate(shape):
        if size == extent and prod(shape[:axis]) == outer and prod(shape[axis + 1:]) == inner:
            return axis
    raise AssertionError((shape, outer, extent, inner))
