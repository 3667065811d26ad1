"""pow (Op.POW) on floats with numpy's (C99's) meaning at every edge case, as loop IR.

The magnitude |x|**y is computed for a positive finite |x| only; the rest is WHERE:
pow(x, +-0) == pow(1, y) == pow(-1, +-inf) == 1 (NaN or not); else a NaN gives NaN; |x| == 0 or
inf gives 0 or inf by the sign of y; a negative x (-0 and -inf too) and an odd integer y negate
the result; a finite x < 0 and a non-integer y give NaN. (Integers here: |y| >= 2**mantissa
always; odd ones only below 2**(mantissa + 1).)

How the magnitude is computed:
* float64: exp(y log x) with log x as hi + lo (float64.log_dd, ~2**-62 relative) and y * log x
  as an exact product plus a correction that exp takes: a few ulp, where plain exp(y * log x)
  loses |y log x| * 2**-53 relatively (up to ~700 ulp near over- and underflow).
* float32 and float16 on a target with float64 (and int64): in float64, exp(y log x) with
  float64.exp_f64 / log_f64, rounded once to the dtype: correctly rounded but in rare halfway
  cases (its error is below 2**-44 relative).
* float32 without them: the target's own pow (Op.POW of the safe operands), with the edge cases
  above; float16 in float32.
"""

from __future__ import annotations

import math
from typing import Callable

from ..loop_ir import Inst
from ..ops import Op
from .emitter import F32, F64, MANTISSA_BITS, Emitter
from .float64 import exp_f64, log_dd, log_f64

Magnitude = Callable[[Emitter, Inst, Inst], Inst]   # (e, |x| > 0 finite, y) -> |x|**y


def magnitude_f64(e: Emitter, ax: Inst, y: Inst) -> Inst:
    """|x|**y in float64 to a few ulp: y * (hi + lo) = p + pe (TwoProduct) and exp(p + pe).
    y is clamped to +-2**900 (|y log x| >= 2**900 * 2**-53 for every x != 1 stays beyond
    over- and underflow) so the exact product cannot overflow; pe only where p is in exp's
    range (elsewhere the result is 0 or inf anyway)."""
    lh, ll = log_dd(e, ax)
    ys = e.clamp(y, -2.0 ** 900, 2.0 ** 900)
    p, pe = e.two_prod(ys, lh)
    pe = e.add(pe, e.mul(ys, ll))
    pe = e.where(e.cmp(Op.CMPLT, e.abs(p), 1000.0), pe, 0.0)
    return exp_f64(e, p, pe)


def magnitude_simple_f64(e: Emitter, ax: Inst, y: Inst) -> Inst:
    """|x|**y = exp(y log x) in float64: enough for a float32 or float16 result."""
    return exp_f64(e, e.mul(y, log_f64(e, ax)))


def magnitude_target(e: Emitter, ax: Inst, y: Inst) -> Inst:
    """The target's own pow, which is then only asked about a positive finite base."""
    return e.alu(Op.POW, ax, y)


def is_odd(e: Emitter, y: Inst) -> Inst:
    """Whether y is an odd integer: an integer whose half is not one, below 2**(mantissa + 1)
    (above, every float is even)."""
    limit = 2.0 ** (MANTISSA_BITS[y.dtype] + 1)
    odd = e.and_(e.is_integer(y), e.not_(e.is_integer(e.mul(y, 0.5))))
    return e.and_(odd, e.cmp(Op.CMPLT, e.abs(y), limit))


def pow_(e: Emitter, x: Inst, y: Inst, magnitude: Magnitude) -> Inst:
    """x**y with numpy's edge cases (the module docstring); `magnitude` computes |x|**y."""
    ax = e.abs(x)
    finite = e.and_(e.cmp(Op.CMPLT, 0.0, ax), e.cmp(Op.CMPLT, ax, math.inf))
    mag = magnitude(e, e.where(finite, ax, 1.0), y)
    y_pos = e.cmp(Op.CMPLT, 0.0, y)
    mag = e.where(e.cmp(Op.CMPEQ, ax, 0.0), e.where(y_pos, 0.0, math.inf, mag.dtype), mag)
    mag = e.where(e.cmp(Op.CMPEQ, ax, math.inf), e.where(y_pos, math.inf, 0.0, mag.dtype), mag)
    x_neg = e.cmp(Op.CMPLT, x, 0.0)
    negative = e.or_(x_neg, e.cmp(Op.CMPLT, e.div(1.0, x), 0.0))      # -0 too: 1 / -0 == -inf
    out = e.where(e.and_(negative, is_odd(e, y)), e.neg(mag), mag)
    bad = e.and_(e.and_(x_neg, e.cmp(Op.CMPLT, ax, math.inf)), e.not_(e.is_integer(y)))
    out = e.where(e.or_(bad, e.or_(e.is_nan(x), e.is_nan(y))), math.nan, out)
    unit_inf = e.and_(e.cmp(Op.CMPEQ, ax, 1.0), e.cmp(Op.CMPEQ, e.abs(y), math.inf))
    trivial = e.or_(e.or_(e.cmp(Op.CMPEQ, y, 0.0), e.cmp(Op.CMPEQ, x, 1.0)), unit_inf)
    return e.where(trivial, 1.0, out)


def pow_expansion(e: Emitter, x: Inst, y: Inst, float64: bool) -> Inst:
    """x**y for x, y of one float dtype; `float64`: the target has float64 and int64 (float32
    and float16 are then computed in float64 and rounded once)."""
    dt = x.dtype
    if dt == F64:
        return pow_(e, x, y, magnitude_f64)
    if float64:
        return e.cast(pow_(e, e.cast(x, F64), e.cast(y, F64), magnitude_simple_f64), dt)
    return e.cast(pow_(e, e.cast(x, F32), e.cast(y, F32), magnitude_target), dt)
