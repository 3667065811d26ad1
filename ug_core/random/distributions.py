"""ug.random's distributions made from the generator's bits: uniform, normal and
truncated_normal (through erfinv), randint, bernoulli and gumbel."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from .. import dtypes, graph
from ..array_api import aliasing as _aliasing
from ..array_api.elementwise import clip
from ..tensor import Tensor
from ..tensor_arith import where
from .erfinv import _log, erfinv
from .threefry import (F16, F32, F64, I32, I64, U32, U64, _UINTS, _bits, _c, _check_key, _counters, _shape, _words,
                       split, threefry2x32)

__all__ = ["uniform", "normal", "truncated_normal", "randint", "bernoulli", "gumbel"]

# --- arguments ---------------------------------------------------------------------------------

def _float_dtype(dtype: Any, fn: str) -> np.dtype:
    dt = dtypes.to_dtype(dtype)
    if dt not in (F16, F32, F64):
        raise TypeError(f"ug.random.{fn}: dtype must be float16, float32 or float64, got {dt}")
    return dt


def _real(value: Any, name: str, fn: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"ug.random.{fn}: {name} must be a real number, got {value!r}")
    return float(value)


# --- uniform -------------------------------------------------------------------------------------

_MANT = {F16: 10, F32: 23, F64: 52}


def _unit(k: Tensor, shape: tuple[int, ...], dt: np.dtype) -> Tensor:
    """Uniform floats in [0, 1) on the grid of 2**-mantissa: the top mantissa bits of random bits,
    as an integer (exact in `dt`) times 2**-mantissa (exact). Bit for bit JAX's
    bitcast(bits >> (width - mantissa) | bits(1.0)) - 1."""
    nmant = _MANT[dt]
    if dt == F64:
        hi, lo = _counters(shape, k.device)
        b0, b1 = threefry2x32(*_words(k), hi, lo)
        # (b0 << 32 | b1) >> 12 in int64, which holds it: b0 << 20 | b1 >> 12
        m = (b0.astype(I64) << _c(20, I64, k.device)) | (b1 >> _c(12, U32, k.device)).astype(I64)
        if m.shape != shape:
            m = m.reshape(shape)
    else:
        width = 32 if dt == F32 else 16
        m = _bits(k, shape, width) >> _c(width - nmant, _UINTS[width], k.device)
    return m.astype(dt) * _c(2.0 ** -nmant, dt, k.device)


def _bound(value: Any, name: str, dt: np.dtype, fn: str, device: str) -> Tensor | float:
    if isinstance(value, Tensor):
        if value.dtype.kind not in "iuf":
            raise TypeError(f"ug.random.{fn}: {name} must be real, got a {value.dtype} tensor")
        return value.astype(dt) if value.dtype != dt else value
    return float(np.asarray(_real(value, name, fn), dt))   # (as JAX: the bound in the dtype first)


def uniform(key: Tensor, shape: Any = (), dtype: Any = F32, minval: Any = 0.0, maxval: Any = 1.0) -> Tensor:
    """Uniform floats in [minval, maxval), as JAX's `random.uniform`: u in [0, 1) from the
    mantissa bits, then max(minval, u * (maxval - minval) + minval). minval / maxval: numbers or
    tensors that broadcast to `shape`."""
    k = _check_key(key, "uniform")
    dt = _float_dtype(dtype, "uniform")
    shp = _shape(shape)
    lo = _bound(minval, "minval", dt, "uniform", k.device)
    hi = _bound(maxval, "maxval", dt, "uniform", k.device)
    if not isinstance(lo, Tensor) and not isinstance(hi, Tensor) and not lo <= hi:
        raise ValueError(f"ug.random.uniform: minval {minval!r} must not exceed maxval {maxval!r}")
    u = _unit(k, shp, dt)
    if isinstance(lo, float) and isinstance(hi, float) and lo == 0.0 and hi == 1.0:
        return u
    if isinstance(lo, float) and isinstance(hi, float):
        span = float(np.asarray(hi, dt) - np.asarray(lo, dt))   # (rounded in dt, as JAX's)
        out = u * span + lo
    else:
        out = u * (hi - lo) + lo
    out = out.astype(dt) if out.dtype != dt else out
    result = where(out < lo, lo, out)   # JAX's max(minval, ...): the rounding may fall below
    if result.shape != shp:
        raise ValueError(f"ug.random.uniform: minval / maxval of shapes {getattr(lo, 'shape', ())}, "
                         f"{getattr(hi, 'shape', ())} do not broadcast to shape {shp}")
    return result


def _standard_normal(k: Tensor, shape: tuple[int, ...], dt: np.dtype) -> Tensor:
    work = F32 if dt == F16 else dt
    lo = float(np.nextafter(np.asarray(-1.0, work), np.asarray(0.0, work)))
    u = uniform(k, shape, work, lo, 1.0)   # (-1, 1), as JAX's normal
    z = _c(math.sqrt(2.0), work, k.device) * erfinv(u)
    return z.astype(dt) if dt != work else z


def normal(key: Tensor, shape: Any = (), dtype: Any = F32, loc: Any = 0.0, scale: Any = 1.0) -> Tensor:
    """Normal floats: loc + scale * sqrt(2) erfinv(u), u uniform in (-1, 1) (JAX's method;
    float16 is computed in float32 and rounded once). Bit-identical on every device: see the
    package's doc. loc / scale: numbers or tensors (differentiable) that broadcast to `shape`."""
    k = _check_key(key, "normal")
    dt = _float_dtype(dtype, "normal")
    shp = _shape(shape)
    z = _standard_normal(k, shp, dt)
    if not isinstance(scale, Tensor):
        s = _real(scale, "scale", "normal")
        if not s >= 0:
            raise ValueError(f"ug.random.normal: scale must be >= 0, got {scale!r}")
    if not isinstance(loc, Tensor):
        _real(loc, "loc", "normal")
    if isinstance(scale, Tensor) or scale != 1.0:
        z = z * scale
    if isinstance(loc, Tensor) or loc != 0.0:
        z = z + loc
    if z.shape != shp:
        raise ValueError(f"ug.random.normal: loc / scale do not broadcast to shape {shp}")
    return z


def truncated_normal(key: Tensor, lower: float, upper: float, shape: Any = (), dtype: Any = F32) -> Tensor:
    """Standard normal floats conditioned on [lower, upper] (JAX's `random.truncated_normal`:
    sqrt(2) erfinv(u), u uniform between erf(lower / sqrt(2)) and erf(upper / sqrt(2)), clipped
    inside the open interval). lower / upper: numbers (±inf allowed), lower < upper."""
    k = _check_key(key, "truncated_normal")
    dt = _float_dtype(dtype, "truncated_normal")
    lo, hi = _real(lower, "lower", "truncated_normal"), _real(upper, "upper", "truncated_normal")
    if not lo < hi:
        raise ValueError(f"ug.random.truncated_normal: lower {lower!r} must be less than upper {upper!r}")
    work = F32 if dt == F16 else dt
    a = float(np.asarray(math.erf(lo / math.sqrt(2.0)), work))
    b = float(np.asarray(math.erf(hi / math.sqrt(2.0)), work))
    u = uniform(k, _shape(shape), work, a, b)
    z = _c(math.sqrt(2.0), work, k.device) * erfinv(u)
    floor = float(np.nextafter(np.asarray(lo, work), np.asarray(np.inf, work)))
    ceil = float(np.nextafter(np.asarray(hi, work), np.asarray(-np.inf, work)))
    z = where(z < floor, floor, where(z > ceil, ceil, z))
    return z.astype(dt) if dt != work else z


# --- integers ------------------------------------------------------------------------------------

def randint(key: Tensor, shape: Any, minval: Any, maxval: Any, dtype: Any = I64) -> Tensor:
    """Integers uniform in [minval, maxval), as JAX's `random.randint`: two words of random bits
    from two subkeys, combined modulo the span. minval / maxval: Python ints the dtype can reach
    (maxval up to its max + 1; minval < maxval), or integer tensors that broadcast to `shape`
    (JAX's rule there: bounds are clipped into the dtype's range, and where maxval <= minval the
    result is minval)."""
    k = _check_key(key, "randint")
    dt = dtypes.to_dtype(dtype)
    if dt.kind not in "iu":
        raise TypeError(f"ug.random.randint: dtype must be an integer dtype, got {dt}")
    shp = _shape(shape)
    if isinstance(minval, Tensor) or isinstance(maxval, Tensor):
        return _randint_tensor_bounds(k, shp, minval, maxval, dt)
    for name, v in (("minval", minval), ("maxval", maxval)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"ug.random.randint: {name} must be an int or an integer tensor, got {v!r}")
    lo_v, hi_v = int(minval), int(maxval)
    info = np.iinfo(dt)
    if not lo_v < hi_v:
        raise ValueError(f"ug.random.randint: minval {lo_v} must be less than maxval {hi_v}")
    if lo_v < int(info.min) or hi_v > int(info.max) + 1:
        raise ValueError(f"ug.random.randint: [{lo_v}, {hi_v}) is outside the range of {dt} "
                         f"([{info.min}, {int(info.max) + 1}))")
    if dt.itemsize < 4:   # (JAX: 8- and 16-bit integers are drawn as int32, then cast)
        return _randint(k, shp, lo_v, hi_v, 32, I32).astype(dt)
    return _randint(k, shp, lo_v, hi_v, dt.itemsize * 8, dt)


def _randint_tensor_bounds(k: Tensor, shp: tuple[int, ...], minval: Any, maxval: Any, dt: np.dtype) -> Tensor:
    """randint with per-element bounds, JAX's arithmetic: the span maxval - minval as an
    unsigned word (1 where maxval <= minval), offset = (hi % span * (2**(nbits/2) % span)**2 %
    span + lo % span) % span in unsigned nbits-bit arithmetic, minval + offset."""
    info = np.iinfo(dt)
    bounds = []
    for name, v in (("minval", minval), ("maxval", maxval)):
        if isinstance(v, Tensor):
            if v.dtype.kind not in "iu":
                raise TypeError(f"ug.random.randint: {name} must be an int or an integer tensor, got a {v.dtype} tensor")
            # clipped into dt's range in int64 (JAX clips before converting); uint64 bounds above
            # int64's max are out of scope of the clip and taken modulo 2**64 by astype
            wide = v.astype(I64) if v.dtype != U64 else v
            if dt != U64 and v.dtype != dt:
                wide = clip(wide, max(int(info.min), int(np.iinfo(wide.dtype).min)),
                            min(int(info.max), int(np.iinfo(wide.dtype).max)))
            bounds.append(wide.astype(dt))
        elif isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"ug.random.randint: {name} must be an int or an integer tensor, got {v!r}")
        else:
            bounds.append(Tensor(graph.const(min(max(int(v), int(info.min)), int(info.max)), dt, k.device, ())))
    lo, hi = bounds
    try:
        np.broadcast_shapes(lo.shape, hi.shape, shp)
    except ValueError:
        raise ValueError(f"ug.random.randint: minval / maxval of shapes {lo.shape}, {hi.shape} do not "
                         f"broadcast to shape {shp}") from None
    if np.broadcast_shapes(lo.shape, hi.shape, shp) != shp:
        raise ValueError(f"ug.random.randint: minval / maxval of shapes {lo.shape}, {hi.shape} do not "
                         f"broadcast to shape {shp}")
    nbits = max(32, dt.itemsize * 8)
    work = dt if dt.itemsize >= 4 else I32
    unsigned = _UINTS[nbits]
    lo_w, hi_w = lo.astype(work), hi.astype(work)
    k1, k2 = split(k)
    higher, lower = _bits(k1, shp, nbits), _bits(k2, shp, nbits)
    span = where(hi_w <= lo_w, _c(1, unsigned, k.device), (hi_w - lo_w).astype(unsigned))
    half = _c(2 ** (nbits // 2), unsigned, k.device)
    multiplier = half % span
    multiplier = multiplier * multiplier % span
    offset = (higher % span * multiplier + lower % span) % span
    out = lo_w + offset.astype(work)
    out = out.astype(dt) if out.dtype != dt else out
    return out.reshape(shp) if out.shape != shp else out


def _randint(k: Tensor, shp: tuple[int, ...], lo_v: int, hi_v: int, nbits: int, dt: np.dtype) -> Tensor:
    k1, k2 = split(k)
    higher, lower = _bits(k1, shp, nbits), _bits(k2, shp, nbits)
    span = hi_v - lo_v
    if span == 2**nbits:   # the whole range (JAX: the span wraps to 0 and the low word is the offset)
        offset = lower
    else:
        # JAX's: 2**nbits mod span as (2**(nbits/2) mod span)**2 in nbits-bit arithmetic, which
        # wraps to 0 for a span above 2**(nbits/2): then only the low word counts
        multiplier = (2 ** (nbits // 2) % span) ** 2 % 2**nbits % span
        offset = (higher % span * multiplier + lower % span) % span if multiplier else lower % span
    out = offset.astype(dt)   # (wrapping where offset >= 2**(nbits-1); adding minval wraps back)
    return out + lo_v if lo_v else out


def bernoulli(key: Tensor, p: Any = 0.5, shape: Any = None) -> Tensor:
    """Booleans, True with probability p (a number in [0, 1] or a float tensor), as JAX's
    `random.bernoulli`: uniform(key, shape, p's dtype) < p. shape: p's by default."""
    k = _check_key(key, "bernoulli")
    if isinstance(p, Tensor):
        if p.dtype.kind != "f":
            raise TypeError(f"ug.random.bernoulli: p must be a float tensor, got dtype {p.dtype}")
        shp = p.shape if shape is None else _shape(shape)
        return uniform(k, shp, p.dtype) < p
    pv = _real(p, "p", "bernoulli")
    if not 0.0 <= pv <= 1.0:
        raise ValueError(f"ug.random.bernoulli: p must be in [0, 1], got {p!r}")
    return uniform(k, _shape(shape), F32) < float(np.float32(pv))


def gumbel(key: Tensor, shape: Any = (), dtype: Any = F32) -> Tensor:
    """Standard Gumbel samples, as JAX's `random.gumbel`: -log(-log(u)) for u uniform in
    [tiny, 1) (tiny: the dtype's smallest normal number, so no log of 0)."""
    k = _check_key(key, "gumbel")
    dt = _float_dtype(dtype, "gumbel")
    u = uniform(k, _shape(shape), dt, minval=float(np.finfo(dt).tiny), maxval=1.0)
    return -_log(-_log(u))


_aliasing.apply(globals(), __all__)   # numpy's aliasing rule: every result is a value of its own
