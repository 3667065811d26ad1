"""numpy's floor_divide and remainder (Op.FLOORDIV, Op.MOD) as loop IR, for every target, and
C's fmod (Op.FMOD), exactly, for the targets whose own is not exact (see `fmod`).

ints: floor division is Op.DIV's meaning already (every renderer spells it, x // 0 == 0), and
the remainder is x - (x // y) * y (wrapping: INT_MIN % -1 == INT_MIN - INT_MIN == 0), 0 where
y == 0.

floats: numpy's npy_divmod, step by step, from the exact C fmod (Op.FMOD) that every target
has: mod = fmod(x, y); div = (x - mod) / y is then very nearly an integer; where mod is
nonzero with a sign other than y's, mod += y and div -= 1; a zero mod takes y's sign; div is
snapped to the nearest integer (floor, plus one above .5), a zero one taking the sign of x / y.
x // 0 is x / 0 (+-inf, or NaN), x % 0 is fmod's NaN. float16 is computed in float32 and
rounded once, as numpy's float16 loops do.
"""

from __future__ import annotations

from typing import Callable

import math

import numpy as np

from ..loop_ir import INDEX, Inst, Opc
from ..ops import Op
from .emitter import EXPONENT_BIAS, F16, F32, INT_OF, MANTISSA_BITS, Emitter


def _in_float32(e: Emitter, x: Inst, y: Inst, fn: Callable[[Emitter, Inst, Inst], Inst]) -> Inst:
    """fn(x, y) of float operands; float16 ones computed in float32 and rounded once."""
    if x.dtype != F16:
        return fn(e, x, y)
    return e.cast(fn(e, e.cast(x, F32), e.cast(y, F32)), F16)


def signed_zero(e: Emitter, x: Inst) -> Inst:
    """0.0 with the sign of x, which is not NaN (C's copysign(0, x)): a zero x itself."""
    return e.where(e.cmp(Op.CMPLT, x, 0.0), -0.0, e.where(e.cmp(Op.CMPLT, 0.0, x), 0.0, x))


def _divmod(e: Emitter, x: Inst, y: Inst) -> tuple[Inst, Inst]:
    """(x // y, x % y) of floats y != 0 (numpy's npy_divmod)."""
    mod = e.alu(Op.FMOD, x, y)
    div = e.div(e.sub(x, mod), y)
    nonzero = e.cmp(Op.CMPNE, mod, 0.0)   # NaN too (C's `if (mod)`); else y is not NaN
    other_sign = e.and_(nonzero, e.cmp(Op.CMPNE, e.cmp(Op.CMPLT, y, 0.0), e.cmp(Op.CMPLT, mod, 0.0)))
    mod = e.where(other_sign, e.add(mod, y), e.where(nonzero, mod, signed_zero(e, y)))
    div = e.where(other_sign, e.sub(div, 1.0), div)
    floor = e.alu(Op.FLOOR, div)
    snapped = e.where(e.cmp(Op.CMPLT, 0.5, e.sub(div, floor)), e.add(floor, 1.0), floor)
    # (a zero div: x and y are numbers, and so is x / y)
    return e.where(e.cmp(Op.CMPNE, div, 0.0), snapped, signed_zero(e, e.div(x, y))), mod


def _float_floor_divide(e: Emitter, x: Inst, y: Inst) -> Inst:
    quotient, _ = _divmod(e, x, y)
    return e.where(e.cmp(Op.CMPEQ, y, 0.0), e.div(x, y), quotient)


def _float_remainder(e: Emitter, x: Inst, y: Inst) -> Inst:
    _, mod = _divmod(e, x, y)   # y == 0: fmod's NaN stays NaN through the corrections
    return mod


def floor_divide(e: Emitter, x: Inst, y: Inst) -> Inst:
    """Op.FLOORDIV of x and y (one dtype)."""
    if x.dtype.kind != "f":
        return e.div(x, y)
    return _in_float32(e, x, y, _float_floor_divide)


def remainder(e: Emitter, x: Inst, y: Inst) -> Inst:
    """Op.MOD of x and y (one dtype)."""
    if x.dtype.kind != "f":
        return e.where(e.cmp(Op.CMPEQ, y, 0), 0, e.sub(x, e.mul(e.div(x, y), y)))
    return _in_float32(e, x, y, _float_remainder)


def _significand(e: Emitter, a: Inst) -> tuple[Inst, Inst]:
    """(integer significand in [2**m, 2**(m + 1)), biased exponent) of a positive finite float a:
    a == significand * 2**(exponent - bias - m). A subnormal is normalized by scaling it by
    2**m first (exactly), which lowers its exponent below 1."""
    dt = a.dtype
    it, m, bias = INT_OF[dt], MANTISSA_BITS[dt], EXPONENT_BIAS[dt]
    subnormal = e.cmp(Op.CMPLT, a, 2.0 ** (1 - bias))
    bits = e.bitcast(e.where(subnormal, e.mul(a, 2.0 ** m), a), it)
    field = e.alu(Op.SHR, bits, m)
    significand = e.alu(Op.OR, e.alu(Op.AND, bits, (1 << m) - 1), 1 << m)
    return significand, e.where(subnormal, e.sub(field, m), field)


def _fmod_exact(e: Emitter, x: Inst, y: Inst) -> Inst:
    """fmod of float32 / float64: the remainder of the significands' long division, one bit a
    step (musl's fmod: r = 2 (r mod my), ex - ey times, from r = mx; both significands have
    m + 1 bits, so r mod my is one subtraction), scaled back by y's exponent, with x's sign.
    fmod(x, 0), fmod(+-inf, y) and NaNs give NaN; |x| < |y| gives x (and zeros, infinities and
    NaNs, whose significands mean nothing, are among these cases)."""
    dt = x.dtype
    it, m, bias = INT_OF[dt], MANTISSA_BITS[dt], EXPONENT_BIAS[dt]
    ax, ay = e.abs(x), e.abs(y)
    mx, ex = _significand(e, ax)
    my, ey = _significand(e, ay)
    acc = e.emit(Opc.DEFINE_ACC, it, (), 0)
    e.emit(Opc.ACC_UPDATE, None, (acc, mx), Op.ADD)
    steps = e.alu(Op.MAX, e.cast(e.sub(ex, ey), INDEX), 0)   # (negative where |x| < |y|)
    loop = e.emit(Opc.RANGE, INDEX, (e.const(0, INDEX), steps), 1)
    r = e.emit(Opc.ACC_READ, it, (acc,))
    reduced = e.where(e.cmp(Op.CMPLE, my, r), e.sub(r, my), r)
    e.emit(Opc.ACC_UPDATE, None, (acc, e.sub(e.add(reduced, reduced), r)), Op.ADD)   # r -> 2 reduced
    e.emit(Opc.ENDRANGE, None, (loop,))
    r = e.emit(Opc.ACC_READ, it, (acc,))
    r = e.where(e.cmp(Op.CMPLE, my, r), e.sub(r, my), r)
    # r * 2**(ey - bias - m), exactly: the result is a float, and the first factor keeps r * 2**k normal
    unit = e.sub(ey, bias + m)
    first = e.alu(Op.MAX, unit, 1 - bias)
    magnitude = e.mul(e.mul(e.cast(r, dt), _pow2(e, first, dt)), _pow2(e, e.sub(unit, first), dt))
    out = e.where(e.cmp(Op.CMPLT, ax, ay), x, e.where(e.cmp(Op.CMPLT, x, 0.0), e.neg(magnitude), magnitude))
    nan = e.or_(e.or_(e.is_nan(x), e.is_nan(y)), e.or_(e.cmp(Op.CMPEQ, ay, 0.0), e.cmp(Op.CMPEQ, ax, math.inf)))
    return e.where(nan, math.nan, out)


def _pow2(e: Emitter, n: Inst, dt: np.dtype) -> Inst:
    """2**n for an integer n (of dt's bits' dtype) in dt's normal exponent range."""
    return e.bitcast(e.alu(Op.SHL, e.add(n, EXPONENT_BIAS[dt]), MANTISSA_BITS[dt]), dt)


def fmod(e: Emitter, x: Inst, y: Inst) -> Inst:
    """Op.FMOD of floats, exact (float16 in float32: exact too)."""
    return _in_float32(e, x, y, _fmod_exact)
