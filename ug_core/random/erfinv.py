"""erfinv for ug.random.normal, and the logarithm and square root it is built from: + - *
only, comparisons, selections and bit casts (never the device's log, division or sqrt), so that
the same key gives the same bits on every device (see the package's doc)."""

from __future__ import annotations

import numpy as np

from .. import graph
from ..mathlib import LN2_HI, LN2_LO, LOG_POLY
from ..tensor import Tensor
from ..tensor_arith import where
from .threefry import F32, F64, I32, I64, _c

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
