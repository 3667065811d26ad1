"""ALU ops and casts in SPIR-V with ug_core.ops semantics, where the hardware's differ.

IEEE 754-2019 max/min (NaN-propagating, -0 < +0), floor division and numpy's reciprocal for
ints, bools as logic. exp, log, tanh, sin, cos and pow arrive already expanded by the core's
math library (ug_core.mathlib, at legalization); what is left is the target's own: sqrt,
GLSL's sin / cos of float32 on a device without float64 (whose reduction needs it), and
GLSL's Pow of a positive finite float32 base there (mathlib has done the edge cases).
Functions over a `SpirvEmitter`, returning the id of the result.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ug_core.kit import RenderError
from ug_core.ops import ALU, Op, check_exhaustive

from .emit import BOOL, F16, F32, I32, SpirvEmitter
from .spirv import GLSL, Op as S


def alu(e: SpirvEmitter, op: Op, dt: np.dtype, a: list[int], src_dts: list[np.dtype]) -> int:
    src = src_dts[0] if op is not Op.WHERE else src_dts[1]
    if op is Op.WHERE:
        return e.op(S.Select, e.vt(dt), *a)
    kind = "b" if src == BOOL else ("f" if src.kind == "f" else "i")
    handler = _ALU_BY_KIND[kind].get(op)
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
    if src.kind == "f":
        return e.op(S.ConvertFToS, t, x)
    if dst.kind == "f":
        return e.op(S.ConvertSToF, t, x)
    return e.op(S.SConvert, t, x)


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
    """ops.power on ints: by squaring, wrapping; a negative exponent gives 1 / x**-y
    truncated (1 for x == 1, +-1 for x == -1, else 0)."""
    t = e.vt(dt)
    b = e.m.t_bool()
    bits = 32 if (dt == I32 or not e.caps.int64) else 64
    negative = e.op(S.SLessThan, b, y, e.c(0, dt))
    result, base, n = e.c(1, dt), x, e.sel(dt, negative, e.c(0, dt), y)
    for i in range(bits - 1):
        bit = e.op(S.INotEqual, b, e.op(S.BitwiseAnd, t, n, e.c(1, dt)), e.c(0, dt))
        result = e.op(S.Select, t, bit, e.op(S.IMul, t, result, base), result)
        if i < bits - 2:
            base = e.op(S.IMul, t, base, base)
            n = e.op(S.ShiftRightArithmetic, t, n, e.c(1, dt))
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


def _i_minmax(less: bool) -> Callable[..., int]:
    def f(e: SpirvEmitter, dt: np.dtype, x: int, y: int) -> int:
        pick = e.op(S.SLessThan if less else S.SGreaterThan, e.m.t_bool(), x, y)
        return e.sel(dt, pick, x, y)
    return f


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
    Op.ABS: lambda e, dt, x: e.ext(GLSL.FAbs, e.vt(dt), x),
    Op.NOT: lambda e, dt, x: e.fcmp(S.FOrdEqual, x, e.c(0.0, dt)),
    Op.ADD: _f_bin(S.FAdd), Op.SUB: _f_bin(S.FSub), Op.MUL: _f_bin(S.FMul), Op.DIV: _f_bin(S.FDiv),
    Op.POW: fpow,
    Op.MAX: f_max,
    Op.MIN: lambda e, dt, x, y: f_max(e, dt, x, y, less=True),
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
    Op.MAX: _i_minmax(False), Op.MIN: _i_minmax(True),
    Op.CMPLT: _i_cmp(S.SLessThan), Op.CMPLE: _i_cmp(S.SLessThanEqual),
    Op.CMPEQ: _i_cmp(S.IEqual), Op.CMPNE: _i_cmp(S.INotEqual),
}
_BOOL_OPS: dict[Op, Callable[..., int]] = {
    Op.ABS: lambda e, dt, x: x,
    Op.NOT: lambda e, dt, x: e.op(S.LogicalNot, e.m.t_bool(), x),
    Op.ADD: _b_bin(S.LogicalOr), Op.MUL: _b_bin(S.LogicalAnd),
    Op.MAX: _b_bin(S.LogicalOr), Op.MIN: _b_bin(S.LogicalAnd),
    Op.CMPLT: _b_lt, Op.CMPLE: _b_le,
    Op.CMPEQ: _b_bin(S.LogicalEqual), Op.CMPNE: _b_bin(S.LogicalNotEqual),
}
# ints: transcendental ops are cast to float by the graph (numpy's rule); bools: numpy rejects
# NEG/SUB/DIV/POW/RECIP/transcendentals on bool (they are promoted or refused before a kernel exists)
_NOT_FOR_INT = {Op.EXP, Op.LOG, Op.SQRT, Op.SIN, Op.COS, Op.TANH}
_NOT_FOR_BOOL = {Op.NEG, Op.RECIP, Op.SUB, Op.DIV, Op.POW} | _NOT_FOR_INT
check_exhaustive(set(_FLOAT_OPS) | {Op.WHERE}, ALU, "SPIR-V renderer (float ops)")
check_exhaustive(set(_INT_OPS) | {Op.WHERE} | _NOT_FOR_INT, ALU, "SPIR-V renderer (int ops)")
check_exhaustive(set(_BOOL_OPS) | {Op.WHERE} | _NOT_FOR_BOOL, ALU, "SPIR-V renderer (bool ops)")
_ALU_BY_KIND = {"f": _FLOAT_OPS, "i": _INT_OPS, "b": _BOOL_OPS}
