"""ALU ops and casts in SPIR-V with ug_core.ops semantics, where the hardware's differ.

IEEE 754-2019 max/min (NaN-propagating, -0 < +0), floor division and numpy's reciprocal for
ints, unsigned division, comparisons, logical right shifts and zero extension for uints, bools
as logic. exp, log, tanh, sin, cos and pow arrive already expanded by the core's
math library (ug_core.mathlib, at legalization); what is left is the target's own: sqrt,
GLSL's sin / cos of float32 on a device without float64 (whose reduction needs it), and
GLSL's Pow of a positive finite float32 base there (mathlib has done the edge cases).
Functions over a `SpirvEmitter`, returning the id of the result.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ug_core.kit import BOOL_KIND, FLOAT, INT, UINT, Op, RenderError, check_alu_tables

from .emit import BOOL, F16, F32, F64, SpirvEmitter
from .spirv import GLSL, Op as S


def alu(e: SpirvEmitter, op: Op, dt: np.dtype, a: list[int], src_dts: list[np.dtype]) -> int:
    src = src_dts[0] if op is not Op.WHERE else src_dts[1]
    if op is Op.WHERE:
        return e.op(S.Select, e.vt(dt), *a)
    handler = _ALU_BY_KIND[src.kind].get(op)
    if handler is None:
        raise RenderError(f"op {op.name} on {src.name} is not supported")
    return handler(e, src, *a)


def cast(e: SpirvEmitter, x: int, src: np.dtype, dst: np.dtype) -> int:
    if src == dst or (e.vt(src) == e.vt(dst)):
        return x
    t = e.vt(dst)
    b = e.m.t_bool()
    if dst == BOOL:
        if src.kind == "f":
            return e.op(S.FUnordNotEqual, b, x, e.c(0, src))
        return e.op(S.INotEqual, b, x, e.c(0, src))
    if src == BOOL:
        return e.op(S.Select, t, x, e.c(1, dst), e.c(0, dst))
    if src.kind == "f" and dst.kind == "f":
        return e.op(S.FConvert, t, x)
    if src.kind == "f":   # (out-of-range values give undefined ones, as in numpy)
        return e.op(S.ConvertFToU if dst.kind == "u" else S.ConvertFToS, t, x)
    if dst.kind == "f":
        return e.op(S.ConvertUToF if src.kind == "u" else S.ConvertSToF, t, x)
    bits = e.int_bits(dst)
    if e.int_bits(src) == bits:
        return e.op(S.Bitcast, t, x)   # int8 <-> uint8...: the same bits
    if src.kind == "i" and bits == 64:
        # sign-extended by arithmetic: lavapipe (Mesa 22.3) compared OpSConvert'ed int64 values
        # as if zero-extended (int64(int32(-1)) < 0 was false); (u ^ top) - top is the same value
        top = 1 << (e.int_bits(src) - 1)
        wide = e.op(S.UConvert, e.m.t_int(64, False), e.op(S.Bitcast, e.m.t_int(e.int_bits(src), False), x))
        flipped = e.op(S.BitwiseXor, t, e.op(S.Bitcast, t, wide), e.c(top, dst))
        return e.op(S.ISub, t, flipped, e.c(top, dst))
    if src.kind == "i":
        return e.op(S.SConvert, t, x)  # sign-extends (or truncates)
    wide = e.op(S.UConvert, e.m.t_int(bits, False), x)   # zero-extends (OpUConvert's type is unsigned)
    return wide if dst.kind == "u" else e.op(S.Bitcast, t, wide)


def f_max(e: SpirvEmitter, dt: np.dtype, x: int, y: int, less: bool = False) -> int:
    """ops.maximum / ops.minimum: IEEE 754-2019, NaN-propagating, -0 < +0."""
    b = e.m.t_bool()
    t = e.vt(dt)
    first = e.op(S.FOrdLessThan if less else S.FOrdGreaterThan, b, x, y)
    second = e.op(S.FOrdGreaterThan if less else S.FOrdLessThan, b, x, y)
    # neither is larger: equal (the sign of two zeros decides) or a NaN. x + y is NaN for
    # a NaN and the larger zero (+0 unless both are -0); -((-x) + (-y)) the smaller zero
    if less:
        tie = e.op(S.FNegate, t, e.fbin(S.FAdd, dt, e.op(S.FNegate, t, x), e.op(S.FNegate, t, y)))
    else:
        tie = e.fbin(S.FAdd, dt, x, y)
    equal_nonzero = e.op(S.LogicalAnd, b, e.fcmp(S.FOrdEqual, x, y), e.fcmp(S.FOrdNotEqual, x, e.c(0, dt)))
    tie = e.sel(dt, equal_nonzero, x, tie)
    return e.sel(dt, first, x, e.sel(dt, second, y, tie))


def via_f32(e: SpirvEmitter, dt: np.dtype, fn: Callable[[np.dtype, int], int], x: int) -> int:
    """Evaluate a float32 function on a float16 value."""
    wide = e.op(S.FConvert, e.vt(F32), x)
    return e.op(S.FConvert, e.vt(dt), fn(F32, wide))


_NEEDS = " (its float64 functions need int64 on the device too)"


def transcendental(e: SpirvEmitter, which: str, dt: np.dtype, x: int) -> int:
    """sqrt, and sin / cos that the core's math library left to the target (a device without
    float64); every other transcendental should have been expanded by ug_core.mathlib."""
    if which == "sqrt":
        r = e.ext(GLSL.Sqrt, e.vt(dt), x)
        return e.sel(dt, e.fcmp(S.FOrdLessThan, x, e.c(0, dt)), e.c(np.nan, dt), r)
    if which in ("sin", "cos") and not e.caps.float64 and dt in (F16, F32):   # the driver's (any accuracy)
        if dt == F16:
            return via_f32(e, dt, lambda d, v: transcendental(e, which, d, v), x)
        return e.ext(GLSL.Sin if which == "sin" else GLSL.Cos, e.vt(dt), x)
    raise RenderError(f"{which} on {dt} should have been expanded by ug_core.mathlib{_NEEDS}")


def fpow(e: SpirvEmitter, dt: np.dtype, x: int, y: int) -> int:
    """float32 pow on a device without float64 or int64: ug_core.mathlib has handled every edge case
    and asks only for |x|**y of a positive finite x, which GLSL's Pow computes (to its accuracy)."""
    if dt != F32 or (e.caps.float64 and e.caps.int64):
        raise RenderError(f"pow on {dt} should have been expanded by ug_core.mathlib{_NEEDS}")
    return e.ext(GLSL.Pow, e.vt(dt), x, y)


def ipow(e: SpirvEmitter, dt: np.dtype, x: int, y: int) -> int:
    """ops.power on ints and uints: by squaring, wrapping; a negative exponent gives 1 / x**-y
    truncated (1 for x == 1, +-1 for x == -1, else 0)."""
    t = e.vt(dt)
    b = e.m.t_bool()
    unsigned = dt.kind == "u"
    bits = e.int_bits(dt) - (0 if unsigned else 1)   # the exponent's bits (a signed one's top bit is 0 below)
    negative = e.op(S.SLessThan, b, y, e.c(0, dt))
    result, base, n = e.c(1, dt), x, y if unsigned else e.sel(dt, negative, e.c(0, dt), y)
    for i in range(bits):
        bit = e.op(S.INotEqual, b, e.op(S.BitwiseAnd, t, n, e.c(1, dt)), e.c(0, dt))
        result = e.op(S.Select, t, bit, e.op(S.IMul, t, result, base), result)
        if i < bits - 1:
            base = e.op(S.IMul, t, base, base)
            n = e.op(S.ShiftRightLogical, t, n, e.c(1, dt))
    if unsigned:
        return result
    odd = e.op(S.INotEqual, b, e.op(S.BitwiseAnd, t, y, e.c(1, dt)), e.c(0, dt))
    minus_one = e.sel(dt, odd, e.c(-1, dt), e.c(1, dt))
    one_over = e.sel(dt, e.op(S.IEqual, b, x, e.c(-1, dt)), minus_one, e.c(0, dt))
    one_over = e.sel(dt, e.op(S.IEqual, b, x, e.c(1, dt)), e.c(1, dt), one_over)
    return e.sel(dt, negative, one_over, result)


def _f_cmp(opcode: int) -> Callable[..., int]:
    return lambda e, dt, x, y: e.fcmp(opcode, x, y)


def _f_bin(opcode: int) -> Callable[..., int]:
    return lambda e, dt, x, y: e.fbin(opcode, dt, x, y)


def _i_bin(opcode: int) -> Callable[..., int]:
    return lambda e, dt, x, y: e.op(opcode, e.vt(dt), x, y)


def _i_cmp(opcode: int) -> Callable[..., int]:
    return lambda e, dt, x, y: e.op(opcode, e.m.t_bool(), x, y)


def _trans(which: str) -> Callable[..., int]:
    return lambda e, dt, x: transcendental(e, which, dt, x)


def _i_minmax(opcode: int) -> Callable[..., int]:
    """MAX / MIN: x where `opcode` (a comparison) holds, else y."""
    return lambda e, dt, x, y: e.sel(dt, e.op(opcode, e.m.t_bool(), x, y), x, y)


def _i_abs(e: SpirvEmitter, dt: np.dtype, x: int) -> int:
    neg = e.op(S.SLessThan, e.m.t_bool(), x, e.c(0, dt))
    return e.sel(dt, neg, e.op(S.SNegate, e.vt(dt), x), x)


def _i_recip(e: SpirvEmitter, dt: np.dtype, x: int) -> int:
    """ops.ALU[RECIP] on ints (numpy's reciprocal): 1 / x truncated, INT_MIN for 0."""
    zero = e.op(S.IEqual, e.m.t_bool(), x, e.c(0, dt))
    safe = e.sel(dt, zero, e.c(1, dt), x)
    int_min = e.c(-(1 << (8 * dt.itemsize - 1)), dt)
    return e.sel(dt, zero, int_min, e.op(S.SDiv, e.vt(dt), e.c(1, dt), safe))


def _i_div(e: SpirvEmitter, dt: np.dtype, x: int, y: int) -> int:
    """ops.divide on ints: floor division, x // 0 == 0, INT_MIN // -1 == INT_MIN (wrapping);
    OpSDiv by 0, or of INT_MIN by -1, is undefined, so those divisors are replaced first."""
    b = e.m.t_bool()
    t = e.vt(dt)
    zero = e.op(S.IEqual, b, y, e.c(0, dt))
    minus_one = e.op(S.IEqual, b, y, e.c(-1, dt))
    safe = e.sel(dt, e.op(S.LogicalOr, b, zero, minus_one), e.c(1, dt), y)
    q = e.op(S.SDiv, t, x, safe)
    rem = e.op(S.SRem, t, x, safe)
    adjust = e.op(S.LogicalAnd, b, e.op(S.INotEqual, b, rem, e.c(0, dt)),
                  e.op(S.LogicalNotEqual, b, e.op(S.SLessThan, b, rem, e.c(0, dt)), e.op(S.SLessThan, b, safe, e.c(0, dt))))
    q = e.sel(dt, adjust, e.op(S.ISub, t, q, e.c(1, dt)), q)
    q = e.sel(dt, minus_one, e.op(S.SNegate, t, x), q)
    return e.sel(dt, zero, e.c(0, dt), q)


def _shift_left(e: SpirvEmitter, dt: np.dtype, x: int, n: int) -> int:
    """ops.ALU[SHL]: 0 for a count outside [0, bits) (unsigned: a negative one is huge), where
    OpShiftLeftLogical's result is undefined."""
    in_range = e.op(S.ULessThan, e.m.t_bool(), n, e.c(8 * dt.itemsize, dt))
    return e.sel(dt, in_range, e.op(S.ShiftLeftLogical, e.vt(dt), x, n), e.c(0, dt))


def _shift_right(e: SpirvEmitter, dt: np.dtype, x: int, n: int) -> int:
    """ops.ALU[SHR]: arithmetic; a count outside [0, bits) shifts by bits - 1 (the sign)."""
    top = e.c(8 * dt.itemsize - 1, dt)
    count = e.sel(dt, e.op(S.ULessThan, e.m.t_bool(), n, top), n, top)
    return e.op(S.ShiftRightArithmetic, e.vt(dt), x, count)


def _u_div(e: SpirvEmitter, dt: np.dtype, x: int, y: int) -> int:
    """ops.divide on uints: x // 0 == 0 (OpUDiv by 0 is undefined: the divisor is replaced first)."""
    zero = e.op(S.IEqual, e.m.t_bool(), y, e.c(0, dt))
    return e.sel(dt, zero, e.c(0, dt), e.op(S.UDiv, e.vt(dt), x, e.sel(dt, zero, e.c(1, dt), y)))


def _logical_shift_right(e: SpirvEmitter, dt: np.dtype, x: int, n: int) -> int:
    """ops.ALU[SHR] of uints: logical; 0 for a count of bits or more (undefined in SPIR-V)."""
    in_range = e.op(S.ULessThan, e.m.t_bool(), n, e.c(8 * dt.itemsize, dt))
    return e.sel(dt, in_range, e.op(S.ShiftRightLogical, e.vt(dt), x, n), e.c(0, dt))


def _glsl(op: int) -> Callable[..., int]:
    return lambda e, dt, x: e.ext(op, e.vt(dt), x)


def _trunc(e: SpirvEmitter, dt: np.dtype, x: int) -> int:
    """Trunc; of float64, Ceil or Floor by the sign (lavapipe's float64 Trunc loses -0.0)."""
    if dt != F64:
        return e.ext(GLSL.Trunc, e.vt(dt), x)
    return e.sel(dt, e.fcmp(S.FOrdLessThan, x, e.c(0.0, dt)), e.ext(GLSL.Ceil, e.vt(dt), x), e.ext(GLSL.Floor, e.vt(dt), x))


def _round_even(e: SpirvEmitter, dt: np.dtype, x: int) -> int:
    """RoundEven; of float64 from Floor (lavapipe's float64 RoundEven truncates): one more above
    a half, or at a half from an odd floor; a zero keeps x's sign (-0.25 -> -0.0)."""
    if dt != F64:
        return e.ext(GLSL.RoundEven, e.vt(dt), x)
    b = e.m.t_bool()
    floor = e.ext(GLSL.Floor, e.vt(dt), x)
    above = e.fbin(S.FSub, dt, x, floor)   # exact
    half_floor = e.fbin(S.FMul, dt, floor, e.c(0.5, dt))
    odd = e.fcmp(S.FOrdNotEqual, half_floor, e.ext(GLSL.Floor, e.vt(dt), half_floor))
    half = e.c(0.5, dt)
    up = e.op(S.LogicalOr, b, e.fcmp(S.FOrdGreaterThan, above, half),
              e.op(S.LogicalAnd, b, e.fcmp(S.FOrdEqual, above, half), odd))
    out = e.sel(dt, up, e.fbin(S.FAdd, dt, floor, e.c(1.0, dt)), floor)
    negative_zero = e.op(S.LogicalAnd, b, e.fcmp(S.FOrdEqual, out, e.c(0.0, dt)), e.fcmp(S.FOrdLessThan, x, e.c(0.0, dt)))
    return e.sel(dt, negative_zero, e.c(-0.0, dt), out)


def _b_lt(e: SpirvEmitter, dt: np.dtype, x: int, y: int) -> int:
    b = e.m.t_bool()
    return e.op(S.LogicalAnd, b, e.op(S.LogicalNot, b, x), y)


def _b_le(e: SpirvEmitter, dt: np.dtype, x: int, y: int) -> int:
    b = e.m.t_bool()
    return e.op(S.LogicalOr, b, e.op(S.LogicalNot, b, x), y)


def _b_bin(opcode: int) -> Callable[..., int]:
    return lambda e, dt, x, y: e.op(opcode, e.m.t_bool(), x, y)


_FLOAT_OPS: dict[Op, Callable[..., int]] = {
    Op.NEG: lambda e, dt, x: e.op(S.FNegate, e.vt(dt), x),
    Op.RECIP: lambda e, dt, x: e.fbin(S.FDiv, dt, e.c(1.0, dt), x),
    Op.EXP: _trans("exp"), Op.LOG: _trans("log"), Op.SQRT: _trans("sqrt"),
    Op.SIN: _trans("sin"), Op.COS: _trans("cos"), Op.TANH: _trans("tanh"),
    Op.ABS: _glsl(GLSL.FAbs),
    Op.NOT: lambda e, dt, x: e.fcmp(S.FOrdEqual, x, e.c(0.0, dt)),
    Op.ADD: _f_bin(S.FAdd), Op.SUB: _f_bin(S.FSub), Op.MUL: _f_bin(S.FMul), Op.DIV: _f_bin(S.FDiv),
    Op.POW: fpow,
    Op.MAX: f_max,
    Op.MIN: lambda e, dt, x, y: f_max(e, dt, x, y, less=True),
    Op.FLOOR: _glsl(GLSL.Floor), Op.CEIL: _glsl(GLSL.Ceil), Op.TRUNC: _trunc, Op.RINT: _round_even,
    Op.FMOD: _f_bin(S.FRem),   # x - y trunc(x / y), inexact: only where ug_core.mathlib has none (float64 without int64)
    Op.CMPLT: _f_cmp(S.FOrdLessThan), Op.CMPLE: _f_cmp(S.FOrdLessThanEqual),
    Op.CMPEQ: _f_cmp(S.FOrdEqual), Op.CMPNE: _f_cmp(S.FUnordNotEqual),
}
_INT_OPS: dict[Op, Callable[..., int]] = {
    Op.NEG: lambda e, dt, x: e.op(S.SNegate, e.vt(dt), x),
    Op.RECIP: _i_recip,
    Op.ABS: _i_abs,
    Op.NOT: lambda e, dt, x: e.op(S.IEqual, e.m.t_bool(), x, e.c(0, dt)),
    Op.ADD: _i_bin(S.IAdd), Op.SUB: _i_bin(S.ISub), Op.MUL: _i_bin(S.IMul), Op.DIV: _i_div,
    Op.POW: ipow,
    Op.MAX: _i_minmax(S.SGreaterThan), Op.MIN: _i_minmax(S.SLessThan),
    Op.INVERT: lambda e, dt, x: e.op(S.Not, e.vt(dt), x),
    Op.AND: _i_bin(S.BitwiseAnd), Op.OR: _i_bin(S.BitwiseOr), Op.XOR: _i_bin(S.BitwiseXor),
    Op.SHL: _shift_left, Op.SHR: _shift_right,
    Op.CMPLT: _i_cmp(S.SLessThan), Op.CMPLE: _i_cmp(S.SLessThanEqual),
    Op.CMPEQ: _i_cmp(S.IEqual), Op.CMPNE: _i_cmp(S.INotEqual),
}
_BOOL_OPS: dict[Op, Callable[..., int]] = {
    Op.ABS: lambda e, dt, x: x,
    Op.NOT: lambda e, dt, x: e.op(S.LogicalNot, e.m.t_bool(), x),
    Op.ADD: _b_bin(S.LogicalOr), Op.MUL: _b_bin(S.LogicalAnd),
    Op.MAX: _b_bin(S.LogicalOr), Op.MIN: _b_bin(S.LogicalAnd),
    Op.AND: _b_bin(S.LogicalAnd), Op.OR: _b_bin(S.LogicalOr), Op.XOR: _b_bin(S.LogicalNotEqual),
    Op.CMPLT: _b_lt, Op.CMPLE: _b_le,
    Op.CMPEQ: _b_bin(S.LogicalEqual), Op.CMPNE: _b_bin(S.LogicalNotEqual),
}
_UINT_OPS: dict[Op, Callable[..., int]] = {
    **{op: spell for op, spell in _INT_OPS.items() if op is not Op.RECIP},   # (uint RECIP is never built)
    Op.ABS: lambda e, dt, x: x,
    Op.DIV: _u_div,
    Op.MAX: _i_minmax(S.UGreaterThan), Op.MIN: _i_minmax(S.ULessThan),
    Op.SHR: _logical_shift_right,
    Op.CMPLT: _i_cmp(S.ULessThan), Op.CMPLE: _i_cmp(S.ULessThanEqual),
}
_ALU_BY_KIND = {FLOAT: _FLOAT_OPS, INT: _INT_OPS, UINT: _UINT_OPS, BOOL_KIND: _BOOL_OPS}
check_alu_tables({kind: set(table) | {Op.WHERE} for kind, table in _ALU_BY_KIND.items()}, "SPIR-V renderer")
