"""`ug.random`: counter-based random numbers, computed inside the kernels that use them.

JAX's functional design: a key is a uint32 tensor of shape (2,) (`key(seed)`), every function
takes a key and returns the same numbers for the same key, and new keys come from `split` and
`fold_in`. The numbers are a pure function of (key, position), so they are lazy graph nodes like
any other: `uniform(k, (1024,)) * 2 + 1` is one kernel, and under `ug.jit` a key is an argument
(a jitted function called with another key gives other numbers, without a retrace).

The generator is Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as
1, 2, 3", SC 2011; the Random123 known-answer vectors are in the tests), built from uint32 ADD
(wrapping), XOR, SHL, SHR and OR, with JAX's "partitionable" counter scheme (JAX's default since
0.5): element i of `bits(key, shape)` is the two output words of Threefry(key, counter = i as
(high, low) 32-bit words) xored (uint64: high word, low word). `key`, `split`, `fold_in`, `bits`,
`uniform`, `randint`, `bernoulli`, `permutation` and `choice` give JAX's numbers bit for bit
(jax 0.10's numbers are frozen in ug_core/testing/test_random.py); `uniform` with bounds other
than [0, 1) differs from JAX on cpu in the last bit where XLA contracts u * (maxval - minval) +
minval into an fma. `normal` and
`truncated_normal` use JAX's method (sqrt(2) erfinv(u), u uniform in (-1, 1), Giles' erfinv) with
ug's own logarithm, so they agree with JAX's to a few ulp, not bit for bit.

Reproducibility: the same key gives the same bits on every device (cpu, vulkan, cuda, c, ref).
The integers are exact by construction; floats are made from them by an int -> float conversion of
a value below 2**mantissa (exact) times a power of two (exact). `normal` uses nothing but + - *
(correctly rounded on every device; the core never contracts a * b + c into an fma), comparisons,
selections and bit casts: its logarithm (exponent/mantissa split by bit cast, Cephes' polynomial
for float32, an atanh series for float64), its reciprocal and its square root (Newton iterations
from a bit-cast start) are ug's own, never the device's log, division or sqrt (which Vulkan allows
to be a few ulp off), and no intermediate is subnormal (which some GPUs flush to zero).
"""

from __future__ import annotations

import math
import numbers
import operator
from typing import Any

import numpy as np

from . import dtypes, graph, scalars
from .array_api.elementwise import clip
from .array_api.indexing import take
from .array_api.manipulation import stack
from .array_api.searching import searchsorted
from .array_api.sorting import argsort
from .mathlib import LN2_HI, LN2_LO, LOG_POLY
from .shapes import shape_arg
from .tensor import Tensor, resolve_device, tensor
from .tensor_arith import where

__all__ = ["key", "split", "fold_in", "bits", "uniform", "normal", "truncated_normal", "randint", "bernoulli",
           "gumbel", "permutation", "choice"]

U32, U64 = np.dtype(np.uint32), np.dtype(np.uint64)
I32, I64 = np.dtype(np.int32), np.dtype(np.int64)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_UINTS: dict[int, np.dtype] = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: U32, 64: U64}


# --- arguments ---------------------------------------------------------------------------------

def _check_key(k: Any, fn: str) -> Tensor:
    """The key as a uint32 tensor of shape (2,); anything else is a TypeError / ValueError naming it."""
    if not isinstance(k, Tensor):
        raise TypeError(f"ug.random.{fn}: key must be a ug tensor made by ug.random.key (uint32, shape (2,)), "
                        f"got {type(k).__name__}")
    if k.dtype != U32:
        raise TypeError(f"ug.random.{fn}: key must be uint32 (from ug.random.key), got dtype {k.dtype}")
    if k.shape != (2,):
        raise ValueError(f"ug.random.{fn}: key must have shape (2,), got shape {k.shape} "
                         f"(split(key, n) gives n keys: pass them one at a time, key[i])")
    return k


def _float_dtype(dtype: Any, fn: str) -> np.dtype:
    dt = dtypes.to_dtype(dtype)
    if dt not in (F16, F32, F64):
        raise TypeError(f"ug.random.{fn}: dtype must be float16, float32 or float64, got {dt}")
    return dt


def _shape(shape: Any) -> tuple[int, ...]:
    return () if shape is None else shape_arg(shape)


def _c(value: Any, dtype: np.dtype, device: str) -> Tensor:
    """A constant folded into the kernel's code (the generator's own constants: few, fixed)."""
    return Tensor(graph.const(value, dtype, device))


def _real(value: Any, name: str, fn: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"ug.random.{fn}: {name} must be a real number, got {value!r}")
    return float(value)


# --- Threefry-2x32 -----------------------------------------------------------------------------

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA


def threefry2x32(k0: Tensor, k1: Tensor, x0: Tensor, x1: Tensor) -> tuple[Tensor, Tensor]:
    """Threefry-2x32, 20 rounds, of the counters (x0, x1) under the key words (k0, k1): uint32
    tensors that broadcast together. Random123's and JAX's `threefry2x32_p`."""
    dev = x0.device

    def rotl(x: Tensor, r: int) -> Tensor:
        return (x << _c(r, U32, dev)) | (x >> _c(32 - r, U32, dev))

    ks = (k0, k1, k0 ^ k1 ^ _c(_PARITY, U32, dev))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = rotl(x1, r) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + (ks[(i + 2) % 3] + _c(i + 1, U32, dev))
    return x0, x1


def _words(k: Tensor) -> tuple[Tensor, Tensor]:
    return k[0], k[1]


def _counters(shape: tuple[int, ...], device: str) -> tuple[Tensor, Tensor]:
    """Each element's flat (row-major) position as (high, low) uint32 words (JAX's iota_2x32_shape)."""
    n = math.prod(shape)
    if n <= 2**32:
        return _c(0, U32, device), Tensor(graph.iota(shape, U32, device))
    if n > 2**63:
        raise ValueError(f"ug.random: {n} random values (shape {shape}) is more than 2**63")
    i = Tensor(graph.iota(shape, I64, device))
    return (i >> _c(32, I64, device)).astype(U32), (i & _c(0xFFFFFFFF, I64, device)).astype(U32)


def _bits(k: Tensor, shape: tuple[int, ...], width: int) -> Tensor:
    hi, lo = _counters(shape, k.device)
    k0, k1 = _words(k)
    b0, b1 = threefry2x32(k0, k1, hi, lo)
    if width == 64:
        return (b0.astype(U64) << _c(32, U64, k.device)) | b1.astype(U64)
    out = b0 ^ b1
    if out.shape != shape:   # (a 0-d key word broadcast against a 0-d counter: shape ())
        out = out.reshape(shape)
    return out if width == 32 else out.astype(_UINTS[width])


# --- keys ----------------------------------------------------------------------------------------

def key(seed: int, device: str | None = None) -> Tensor:
    """A key (uint32, shape (2,)) from an integer seed: its high and low 32-bit words, as JAX's
    `random.PRNGKey(seed)` (seed in [-2**63, 2**64); a negative one taken mod 2**64, as JAX with
    64-bit ints)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"ug.random.key: seed must be an int, got {seed!r} ({type(seed).__name__})")
    s = int(seed)
    if not -2**63 <= s < 2**64:
        raise ValueError(f"ug.random.key: seed {s} is outside [-2**63, 2**64)")
    s %= 2**64
    return tensor(np.array([s >> 32, s & 0xFFFFFFFF], U32), device=resolve_device(device))


def split(key: Tensor, num: int | tuple[int, ...] = 2) -> Tensor:
    """`num` new keys from `key`, shape (num, 2) (or (*num, 2) for a shape): JAX's `random.split`,
    key i being Threefry(key, i)."""
    k = _check_key(key, "split")
    shape = _shape(num)
    k0, k1 = _words(k)
    hi, lo = _counters(shape, k.device)
    b0, b1 = threefry2x32(k0, k1, hi, lo)
    return stack([b0.reshape(shape) if b0.shape != shape else b0, b1.reshape(shape) if b1.shape != shape else b1],
                 axis=len(shape))


def fold_in(key: Tensor, data: int | Tensor) -> Tensor:
    """A new key from `key` and an integer (a step number, a layer index...), as JAX's
    `random.fold_in`: Threefry(key, (0, data as uint32)). `data`: a Python int in
    [-2**31, 2**32) or a 0-d integer tensor (cast to uint32, wrapping)."""
    k = _check_key(key, "fold_in")
    if isinstance(data, Tensor):
        if data.shape != () or data.dtype.kind not in "iu":
            raise TypeError(f"ug.random.fold_in: data must be an int or a 0-d integer tensor, "
                            f"got a {data.dtype} tensor of shape {data.shape}")
        d = data.to(k.device).astype(U32) if data.device != k.device else data.astype(U32)
    else:
        if isinstance(data, (bool, np.bool_)) or not isinstance(data, (int, np.integer)):
            raise TypeError(f"ug.random.fold_in: data must be an int, got {data!r}")
        if not -2**31 <= int(data) < 2**32:
            raise ValueError(f"ug.random.fold_in: data {int(data)} is outside [-2**31, 2**32)")
        # a kernel argument, not code: fold_in(key, step) for each step reuses one compiled kernel
        d = Tensor(scalars.scalar(int(data) % 2**32, U32, k.device))
    k0, k1 = _words(k)
    b0, b1 = threefry2x32(k0, k1, _c(0, U32, k.device), d)
    return stack([b0, b1])


# --- bits, uniform -------------------------------------------------------------------------------

def bits(key: Tensor, shape: Any = (), dtype: Any = U32) -> Tensor:
    """Random bits of an unsigned dtype (uint8, uint16, uint32, uint64), as JAX's `random.bits`."""
    k = _check_key(key, "bits")
    dt = dtypes.to_dtype(dtype)
    if dt.kind != "u":
        raise TypeError(f"ug.random.bits: dtype must be an unsigned int dtype, got {dt}")
    return _bits(k, _shape(shape), dt.itemsize * 8)


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


# --- normal: erfinv from + - * only --------------------------------------------------------------

_SQRTH_BITS = 0x3504F3   # float32 mantissa bits of sqrt(2): above, the mantissa is halved
_SQRTH_BITS64 = 0x6A09E667F3BCD


def _log_f32(y: Tensor) -> Tensor:
    """log(y) for float32 y > 0, normal or not: Cephes' logf (the polynomial of the core's math
    library, ug_core.mathlib), the exponent and mantissa taken apart by bit cast, + - * only."""
    dev = y.device
    small = y < _c(np.finfo(F32).tiny, F32, dev)
    y = where(small, y * _c(2.0**24, F32, dev), y)   # subnormals scaled up first (never computed with)
    b = Tensor(graph.bitcast(y._node, I32))
    mant = b & _c(0x7FFFFF, I32, dev)
    big = mant > _c(_SQRTH_BITS, I32, dev)
    # the mantissa in [sqrt(1/2), sqrt(2)): exponent bits of 1.0, or of 0.5 above sqrt(2)
    m = Tensor(graph.bitcast((mant | where(big, _c(0x3F000000, I32, dev), _c(0x3F800000, I32, dev)))._node, F32))
    e = ((b >> _c(23, I32, dev)) - _c(127, I32, dev) + big.astype(I32)
         - where(small, _c(24, I32, dev), _c(0, I32, dev))).astype(F32)
    f = m - _c(1.0, F32, dev)   # exact (Sterbenz)
    z = f * f
    p = _c(LOG_POLY[0], F32, dev)
    for coef in LOG_POLY[1:]:
        p = p * f + _c(coef, F32, dev)
    r = f * z * p + e * _c(LN2_LO, F32, dev) - z * _c(0.5, F32, dev)
    r = f + r + e * _c(LN2_HI, F32, dev)
    return where(y == _c(0.0, F32, dev), _c(-np.inf, F32, dev), where(y == _c(np.inf, F32, dev), y, r))


_LN2_HI64, _LN2_LO64 = 6.93147180369123816490e-01, 1.90821492927058770002e-10   # fdlibm's split


def _recip_near_1(d: Tensor, iterations: int) -> Tensor:
    """1 / d for d in [0.85, 1.21] by Newton's iteration r <- r (2 - d r) from r = 1 (+ - * only)."""
    two = _c(2.0, d.dtype, d.device)
    r = _c(1.0, d.dtype, d.device)
    for _ in range(iterations):
        r = r * (two - d * r)
    return r


def _log_f64(y: Tensor) -> Tensor:
    """log(y) for float64 y > 0: exponent and mantissa m in [sqrt(1/2), sqrt(2)) by bit cast,
    log(m) = 2 atanh(s), s = (m - 1) / (m + 1), the quotient by Newton's reciprocal and the atanh
    series to s**21 (|s| < 0.172: the next term is below 2**-56 of the sum); + - * only."""
    dev = y.device
    small = y < _c(np.finfo(F64).tiny, F64, dev)
    y = where(small, y * _c(2.0**54, F64, dev), y)
    b = Tensor(graph.bitcast(y._node, I64))
    mant = b & _c((1 << 52) - 1, I64, dev)
    big = mant > _c(_SQRTH_BITS64, I64, dev)
    m = Tensor(graph.bitcast((mant | where(big, _c(0x3FE << 52, I64, dev), _c(0x3FF << 52, I64, dev)))._node, F64))
    e = ((b >> _c(52, I64, dev)) - _c(1023, I64, dev) + big.astype(I64)
         - where(small, _c(54, I64, dev), _c(0, I64, dev))).astype(F64)
    f = m - _c(1.0, F64, dev)
    half_d = f * _c(0.5, F64, dev) + _c(1.0, F64, dev)          # (m + 1) / 2 in [0.85, 1.21], exact
    s = f * _recip_near_1(half_d, 6) * _c(0.5, F64, dev)        # 6 steps: error 0.21**64
    s2 = s * s
    p = _c(1.0 / 21, F64, dev)
    for n in range(19, 0, -2):
        p = p * s2 + _c(1.0 / n, F64, dev)
    r = e * _c(_LN2_LO64, F64, dev) + _c(2.0, F64, dev) * s * p
    r = r + e * _c(_LN2_HI64, F64, dev)
    return where(y == _c(0.0, F64, dev), _c(-np.inf, F64, dev), where(y == _c(np.inf, F64, dev), y, r))


def _log(y: Tensor) -> Tensor:
    return _log_f64(y) if y.dtype == F64 else _log_f32(y)


def _sqrt(w: Tensor, iterations: int) -> Tensor:
    """sqrt(w) for w >= 1, finite: Newton's iteration for 1/sqrt(w) from the bit-cast estimate
    (+ - * only), then w * that."""
    dev, dt = w.device, w.dtype
    if dt == F64:
        guess = _c(0x5FE6EB50C7B537A9, I64, dev) - (Tensor(graph.bitcast(w._node, I64)) >> _c(1, I64, dev))
    else:
        guess = _c(0x5F3759DF, I32, dev) - (Tensor(graph.bitcast(w._node, I32)) >> _c(1, I32, dev))
    y = Tensor(graph.bitcast(guess._node, dt))
    half_w = w * _c(0.5, dt, dev)
    for _ in range(iterations):
        y = y * (_c(1.5, dt, dev) - half_w * y * y)
    return w * y


_GILES32 = ((2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
             -0.00417768164, 0.246640727, 1.50140941),
            (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
             0.00943887047, 1.00167406, 2.83297682))
_GILES64 = ((-3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
             1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
             6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
             2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
             1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
             4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
             0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
             0.24015818242558961693, 1.6536545626831027356),
            (2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
             1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
             2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
             6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
             0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
             -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
             3.0838856104922207635),
            (-2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
             -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
             2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
             -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
             7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
             1.0103004648645343977, 4.8499064014085844221))
"""Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011): erfinv(x) = x p(w),
w = -log(1 - x**2), a polynomial per range of w (XLA's erf_inv uses the same)."""


def _poly(w: Tensor, coefs: tuple[float, ...]) -> Tensor:
    p = _c(coefs[0], w.dtype, w.device)
    for coef in coefs[1:]:
        p = p * w + _c(coef, w.dtype, w.device)
    return p


def erfinv(x: Tensor) -> Tensor:
    """erfinv(x) for float32 / float64 x in [-1, 1] (±inf at ±1), from + - * only (Giles)."""
    dt, dev = x.dtype, x.device
    one = _c(1.0, dt, dev)
    w = -_log((one - x) * (one + x))   # (more accurate than 1 - x*x near ±1)
    finite = where(w < _c(1e300 if dt == F64 else 1e30, dt, dev), w, one)   # (the sqrt below never sees inf)
    if dt == F32:
        central = _poly(w - _c(2.5, dt, dev), _GILES32[0])
        tail = _poly(_sqrt(where(w < _c(5.0, dt, dev), _c(5.0, dt, dev), finite), 3) - _c(3.0, dt, dev), _GILES32[1])
        p = where(w < _c(5.0, dt, dev), central, tail)
    else:
        central = _poly(w - _c(3.125, dt, dev), _GILES64[0])
        root = _sqrt(where(w < _c(6.25, dt, dev), _c(6.25, dt, dev), finite), 5)
        middle = _poly(root - _c(3.25, dt, dev), _GILES64[1])
        tail = _poly(root - _c(5.0, dt, dev), _GILES64[2])
        p = where(w < _c(6.25, dt, dev), central, where(w < _c(16.0, dt, dev), middle, tail))
    return where(x.abs() == one, x * _c(np.inf, dt, dev), p * x)


def _standard_normal(k: Tensor, shape: tuple[int, ...], dt: np.dtype) -> Tensor:
    work = F32 if dt == F16 else dt
    lo = float(np.nextafter(np.asarray(-1.0, work), np.asarray(0.0, work)))
    u = uniform(k, shape, work, lo, 1.0)   # (-1, 1), as JAX's normal
    z = _c(math.sqrt(2.0), work, k.device) * erfinv(u)
    return z.astype(dt) if dt != work else z


def normal(key: Tensor, shape: Any = (), dtype: Any = F32, loc: Any = 0.0, scale: Any = 1.0) -> Tensor:
    """Normal floats: loc + scale * sqrt(2) erfinv(u), u uniform in (-1, 1) (JAX's method;
    float16 is computed in float32 and rounded once). Bit-identical on every device: see the
    module's doc. loc / scale: numbers or tensors (differentiable) that broadcast to `shape`."""
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


# --- permutations --------------------------------------------------------------------------------

def _shuffled(k: Tensor, x: Tensor) -> Tensor:
    """x (1-d) in a random order: JAX's _shuffle, sorting by random 32-bit keys (stable), as many
    rounds as make ties between 32-bit keys unlikely (one round up to 1625 elements)."""
    n = x.shape[0]
    rounds = int(np.ceil(3 * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        k, sub = split(k)
        x = take(x, argsort(_bits(sub, (n,), 32), stable=True), axis=0)
    return x


def permutation(key: Tensor, x: int | Tensor, axis: int = 0) -> Tensor:
    """A random permutation of range(x) (an int: int64 values), or x's slices along `axis` in a
    random order (JAX's `random.permutation`, one order for the whole axis)."""
    k = _check_key(key, "permutation")
    if isinstance(x, Tensor):
        if x.ndim == 0:
            raise ValueError("ug.random.permutation: x must be an int or a tensor of at least 1 dimension, "
                             "got a 0-d tensor")
        ax = operator.index(axis)
        if not -x.ndim <= ax < x.ndim:
            raise ValueError(f"ug.random.permutation: axis {axis} is out of range for shape {x.shape}")
        ax %= x.ndim
        order = _shuffled(k, Tensor(graph.iota((x.shape[ax],), I64, k.device)))
        return take(x, order, axis=ax)
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"ug.random.permutation: x must be an int or a tensor, got {x!r}")
    if int(x) < 0:
        raise ValueError(f"ug.random.permutation: x must be >= 0, got {x}")
    return _shuffled(k, Tensor(graph.iota((int(x),), I64, k.device)))


def choice(key: Tensor, a: int | Tensor, shape: Any = (), replace: bool = True, p: Tensor | None = None,
           axis: int = 0) -> Tensor:
    """Random elements of range(a) (an int) or slices of a along `axis`, as JAX's `random.choice`:
    with replacement, uniform (randint) or by the probabilities p (a cumulative sum searched with
    uniform numbers); without, the first of a permutation, or with p the `draws` largest of
    gumbel + log(p) (the Gumbel top-k trick: a sample without replacement by weights)."""
    k = _check_key(key, "choice")
    shp = _shape(shape)
    if isinstance(a, Tensor):
        if a.ndim == 0:
            raise ValueError("ug.random.choice: a must be an int or a tensor of at least 1 dimension")
        ax = operator.index(axis)
        if not -a.ndim <= ax < a.ndim:
            raise ValueError(f"ug.random.choice: axis {axis} is out of range for shape {a.shape}")
        ax %= a.ndim
        n = a.shape[ax]
    else:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"ug.random.choice: a must be an int or a tensor, got {a!r}")
        n, ax = int(a), 0
    draws = math.prod(shp)
    if n <= 0 and draws > 0:
        raise ValueError(f"ug.random.choice: cannot take a sample from an empty set (a = {a!r})")
    if not replace and draws > n:
        raise ValueError(f"ug.random.choice: cannot take {draws} samples from {n} without replacement")
    if p is not None:
        if not isinstance(p, Tensor) or p.shape != (n,) or p.dtype.kind != "f":
            raise ValueError(f"ug.random.choice: p must be a float tensor of shape ({n},), got "
                             f"{getattr(p, 'dtype', type(p).__name__)} {getattr(p, 'shape', '')}")
        if not replace:
            g = -gumbel(k, (n,), p.dtype) - p.log()
            index = argsort(g, stable=True)[:draws].reshape(shp)
            return index if not isinstance(a, Tensor) else \
                take(a, index.reshape(-1), axis=ax).reshape(a.shape[:ax] + shp + a.shape[ax + 1:])
        cumulative = p.cumsum()
        r = cumulative[-1] * (1.0 - uniform(k, shp, p.dtype))
        index = searchsorted(cumulative, r).astype(I64)
    elif replace:
        index = randint(k, shp, 0, n, I64) if n > 0 else Tensor(graph.const(0, I64, k.device, shp))
    else:
        index = permutation(k, n)[:draws].reshape(shp)
    if not isinstance(a, Tensor):
        return index
    return take(a, index.reshape(-1), axis=ax).reshape(a.shape[:ax] + shp + a.shape[ax + 1:])


from .array_api import aliasing as _aliasing  # noqa: E402
_aliasing.apply(globals(), __all__)   # numpy's aliasing rule: every result is a value of its own
