"""atan2 (Op.ATAN2) on float32 and float64 as loop IR, with C99's (numpy's) special cases:
every quadrant, signed zeros (atan2(+-0, -0) == +-pi), infinities (atan2(+-inf, -inf) ==
+-3pi/4), NaN. atan(x) is atan2(x, 1) and asin / acos are built on it (the Array API frontend).

The angle of (|x|, |y|) comes from n = min(|x|, |y|) and m = max(|x|, |y|): theta = atan(n / m)
in [0, pi/4], then pi/2 - theta where |y| > |x|, pi - that where x's sign bit is set, and y's
sign. atan(n / m) = B + atan(u) with the argument u computed from n and m directly (one
division; the subtraction exact by Sterbenz; n and m scaled by 1/16 above 1, exactly, so that
nothing overflows), as in fdlibm's atan:

    n / m < 7/16:          B = 0,          u = n / m
    7/16 <= n / m < 11/16: B = atan(1/2),  u = (2n - m) / (2m + n)   (|u| < 0.14)
    11/16 <= n / m:        B = pi/4,       u = (n - m) / (n + m)      (|u| < 0.19)

and atan(u) = u + u z P(z), z = u*u, P a minimax polynomial on |u| <= 7/16 fitted for this
file (Remez, relative error of atan: 2**-29.6 with 5 float32 coefficients, 2**-57.7 with 11
float64 ones). The result is C + s B + s atan(u), C in {0, pi/2, pi}, s = +-1, with C + s B
as hi + lo (exact TwoSum of split constants) and the small terms summed first, so the last
addition rounds once: measured by tests/test_transcendental.py, within 1.5 ulp in float32 and
float64 (float16 is computed in float32 and rounded once).

Special operands take the same path: inf / inf is taken as 1 / 1 and 0 / 0 as 0 / 1, so C,
s and the sign of y give every special case (a sign bit is v < 0 or 1 / v < 0); a NaN gives
x + y. Only float arithmetic and comparisons, no bits: any target with the dtype can have it.
"""

from __future__ import annotations

import math

import numpy as np

from ..loop_ir import Inst
from ..ops import Op
from .emitter import F16, F32, F64, Emitter

# atan(u) = u + u z P(z) on |u| <= 7/16 (Horner's order: highest degree first)
ATAN_POLY: dict[np.dtype, list[float]] = {
    F32: [-0.05819103207849947, 0.10490807777618023, -0.1422958189178797, 0.19997737992761375,
          -0.33333303441322926],
    F64: [-0.016265592496139708, 0.03651034717888933, -0.049759168759178456, 0.05833324430488888,
          -0.06661034188100833, 0.07691872246822412, -0.09090886875934866, 0.11111110395076937,
          -0.14285714272261785, 0.19999999999873674, -0.3333333333333292],
}
# the angles as float64 hi + lo (double-double: lo is hi's rounding error)
PI = (3.141592653589793, 1.2246467991473532e-16)
PI_2 = (1.5707963267948966, 6.123233995736766e-17)
PI_4 = (0.7853981633974483, 3.061616997868383e-17)
ATAN_HALF = (0.4636476090008061, 2.2698777452961687e-17)   # atan(1/2)


def _split(angle: tuple[float, float], dtype: np.dtype) -> tuple[float, float]:
    """A double-double angle as hi + lo in `dtype` (float32: hi rounded, lo its error)."""
    hi = float(dtype.type(angle[0]))
    return hi, float(dtype.type((angle[0] - hi) + angle[1]))


def _pick(e: Emitter, conds: list[Inst], values: tuple[float, ...], dtype: np.dtype) -> Inst:
    """values[i] for the first true conds[i], else 0 (a chain of WHEREs)."""
    out: Inst = e.const(0.0, dtype)
    for cond, value in reversed(list(zip(conds, values))):
        out = e.where(cond, value, out)
    return out


def _sign_bit(e: Emitter, v: Inst) -> Inst:
    """Whether v < 0 or v is -0 (1 / -0 == -inf); False for NaN."""
    return e.or_(e.cmp(Op.CMPLT, v, 0.0), e.cmp(Op.CMPLT, e.div(1.0, v), 0.0))


def atan2(e: Emitter, y: Inst, x: Inst) -> Inst:
    """atan2(y, x) for y, x of one float dtype; float16 in float32, rounded once."""
    if x.dtype == F16:
        return e.cast(_atan2(e, e.cast(y, F32), e.cast(x, F32)), F16)
    return _atan2(e, y, x)


def _atan2(e: Emitter, y: Inst, x: Inst) -> Inst:
    """atan2(y, x) for float32 or float64 y, x (the module docstring)."""
    dt = x.dtype
    ax, ay = e.abs(x), e.abs(y)
    both_inf = e.and_(e.cmp(Op.CMPEQ, ax, math.inf), e.cmp(Op.CMPEQ, ay, math.inf))
    n = e.where(both_inf, 1.0, e.alu(Op.MIN, ax, ay))                # inf / inf: the angle of (1, 1)
    m = e.where(both_inf, 1.0, e.alu(Op.MAX, ax, ay))
    m = e.where(e.cmp(Op.CMPEQ, m, 0.0), 1.0, m)                     # 0 / 0: the angle of (1, 0)
    # 16n, 7m, 2m + n must neither overflow nor lose bits below the normal range (7m/16
    # would): above 1, n and m are scaled by 1/16, exactly (n >= 7m/16 where it is used)
    scale = e.where(e.cmp(Op.CMPLT, 1.0, m), 1 / 16, 1.0, dt)
    ns, ms = e.mul(n, scale), e.mul(m, scale)
    n16 = e.mul(ns, 16.0)
    mid = e.cmp(Op.CMPLE, e.mul(ms, 7.0), n16)                         # 7/16 <= n/m
    high = e.cmp(Op.CMPLE, e.mul(ms, 11.0), n16)                       # 11/16 <= n/m
    num = e.where(high, e.sub(ns, ms), e.where(mid, e.sub(e.add(ns, ns), ms), n))
    den = e.where(high, e.add(ns, ms), e.where(mid, e.add(e.add(ms, ms), ns), m))
    u = e.div(num, den)
    z = e.mul(u, u)
    # theta = B + atan(u); the angle is C + s theta
    steep = e.cmp(Op.CMPLT, ax, ay)
    x_neg = _sign_bit(e, x)
    s = e.where(e.cmp(Op.CMPNE, steep, x_neg), -1.0, 1.0, dt)
    c, (c_hi, c_lo) = [steep, x_neg], zip(*(_split(v, dt) for v in (PI_2, PI)))       # else 0
    b, (b_hi, b_lo) = [high, mid], zip(*(_split(v, dt) for v in (PI_4, ATAN_HALF)))   # else 0
    k_hi, k_err = e.fast_two_sum(_pick(e, c, c_hi, dt), e.mul(s, _pick(e, b, b_hi, dt)))   # |C| >= |B|, or C == 0
    k_lo = e.add(e.add(k_err, _pick(e, c, c_lo, dt)), e.mul(s, _pick(e, b, b_lo, dt)))
    su = e.mul(s, u)
    tail = e.mul(e.mul(su, z), e.poly(z, ATAN_POLY[dt]))
    angle = e.add(k_hi, e.add(e.add(k_lo, tail), su))                 # >= 0 (+0 for y = +-0, x >= +0)
    angle = e.where(_sign_bit(e, y), e.neg(angle), angle)
    return e.where(e.or_(e.is_nan(x), e.is_nan(y)), e.add(x, y), angle)
