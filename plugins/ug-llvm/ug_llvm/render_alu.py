"""The ALU ops of loop IR as LLVM IR, per operand kind (float, int, bool).

Semantics are ug_core.ops's (numpy's): integers wrap; int DIV is floor division with x // 0 == 0
and INT_MIN // -1 == INT_MIN; int RECIP and POW follow ops.py; unsigned ints (the same LLVM types:
signedness is in the instructions) divide, compare, shift right and extend as unsigned; float MAX / MIN propagate NaN
(llvm.maximum / minimum); bool + is or, bool * is and; shifts by counts outside [0, bits) follow
numpy (a select, or a clamped count). The core's legalization has refused the combinations
ug_core.ops does not define (exp of an int, bool division) and expanded floor_divide, remainder,
signbit and nextafter.

exp, log, tanh, float32 sin / cos and float32 pow call the vectorizable functions of
ug_llvm.mathlib; the rest of float math is LLVM's intrinsics (libm where scalar).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ug_core.kit import BOOL_KIND, FLOAT, INT, UINT, Op, RenderError, check_alu_tables

from . import mathlib
from .render_ir import FSUF, fconst

if TYPE_CHECKING:
    from .render import LLVMRenderer

INT_BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}

Args = list[str]
OpText = Callable[["LLVMRenderer", str, Args], str]   # (renderer, operand type, operands) -> result


def const_text(value: object, ty: str) -> str:
    if ty in FSUF:
        return fconst(float(value), ty)  # type: ignore[arg-type]
    if ty == "i1":
        return "true" if value else "false"
    return str(int(value))  # type: ignore[call-overload]


def alu(r: "LLVMRenderer", op: Op, operand_kind: str, ty: str, args: Args) -> str:
    """`op` on operands of LLVM type `ty` and dtype kind `operand_kind` (ug_core.ops.FLOAT, INT,
    UINT, BOOL_KIND); not WHERE, which the renderer selects itself."""
    try:
        spell = _BY_KIND[operand_kind][op]
    except KeyError:
        raise RenderError(f"{op.name.lower()} on {ty} (numpy never produces it)") from None
    return spell(r, ty, args)


# --- float ----------------------------------------------------------------------------------

def _fbin(opname: str) -> OpText:
    return lambda r, ty, a: r.value(f"{opname} {ty} {a[0]}, {a[1]}")  # (no fast-math flags: no fma contraction, see ops.py)


def _compares(instruction: str, lt: str, le: str, eq: str, ne: str) -> dict[Op, OpText]:
    """CMPLT, CMPLE, CMPEQ, CMPNE as `instruction` (fcmp / icmp) with these predicates."""
    def spell(pred: str) -> OpText:
        return lambda r, ty, a: r.value(f"{instruction} {pred} {ty} {a[0]}, {a[1]}")
    return {Op.CMPLT: spell(lt), Op.CMPLE: spell(le), Op.CMPEQ: spell(eq), Op.CMPNE: spell(ne)}


def _fmath(name: str) -> OpText:
    """exp/log/tanh (and sin/cos in float32): the vectorizable mathlib versions."""
    def emit(r: "LLVMRenderer", ty: str, a: Args) -> str:
        fn = f"ug_{name}_{FSUF[ty]}"
        if fn not in mathlib.FUNCTIONS:
            return r.intrinsic(name, ty, a[0])  # libm (scalar)
        r.math.add(fn)
        attrs = mathlib.call_attributes(fn)
        if not attrs:
            return r.call(ty, fn, (ty, a[0]))
        r.call_attrs[fn] = attrs  # a call the loop vectorizer maps to the vector variant (VFABI)
        return r.value(f"call {ty} @{fn}({ty} {a[0]}) #{mathlib.call_attribute_group(fn)}")
    return emit


def _fpow(r: "LLVMRenderer", ty: str, a: Args) -> str:
    """float32 (and float16, computed in float32): mathlib's vectorizable pow; float64: libm."""
    if ty == "float":
        r.math.add("ug_pow_f32")
        return r.call(ty, "ug_pow_f32", (ty, a[0]), (ty, a[1]))
    return r.intrinsic("pow", ty, a[0], a[1])


_FLOAT_OPS: dict[Op, OpText] = {
    Op.NEG: lambda r, ty, a: r.value(f"fneg {ty} {a[0]}"),
    Op.RECIP: lambda r, ty, a: r.value(f"fdiv {ty} {const_text(1.0, ty)}, {a[0]}"),
    Op.EXP: _fmath("exp"),
    Op.LOG: _fmath("log"),
    Op.SQRT: lambda r, ty, a: r.intrinsic("sqrt", ty, a[0]),
    Op.SIN: _fmath("sin"),
    Op.COS: _fmath("cos"),
    Op.TANH: _fmath("tanh"),
    Op.ABS: lambda r, ty, a: r.intrinsic("fabs", ty, a[0]),
    Op.NOT: lambda r, ty, a: r.value(f"fcmp oeq {ty} {a[0]}, {const_text(0.0, ty)}"),
    Op.ADD: _fbin("fadd"),
    Op.SUB: _fbin("fsub"),
    Op.MUL: _fbin("fmul"),
    Op.DIV: _fbin("fdiv"),
    Op.POW: _fpow,
    Op.MAX: lambda r, ty, a: r.intrinsic("maximum", ty, a[0], a[1]),
    Op.MIN: lambda r, ty, a: r.intrinsic("minimum", ty, a[0], a[1]),
    Op.FLOOR: lambda r, ty, a: r.intrinsic("floor", ty, a[0]),
    Op.CEIL: lambda r, ty, a: r.intrinsic("ceil", ty, a[0]),
    Op.TRUNC: lambda r, ty, a: r.intrinsic("trunc", ty, a[0]),
    Op.RINT: lambda r, ty, a: r.intrinsic("rint", ty, a[0]),   # the default rounding: ties to even
    Op.FMOD: lambda r, ty, a: r.value(f"frem {ty} {a[0]}, {a[1]}"),   # C's fmod (exact)
    **_compares("fcmp", "olt", "ole", "oeq", "une"),   # ordered: false for NaN, but != is true
}


# --- int ------------------------------------------------------------------------------------

def _ibin(opname: str) -> OpText:
    return lambda r, ty, a: r.value(f"{opname} {ty} {a[0]}, {a[1]}")


def _int_recip(r: "LLVMRenderer", ty: str, a: Args) -> str:
    """ops.ALU[RECIP] on ints (numpy's reciprocal): 1 / x truncated for |x| == 1, INT_MIN for 0, else 0."""
    x = a[0]
    one = r.value(f"icmp eq {ty} {x}, 1")
    mone = r.value(f"icmp eq {ty} {x}, -1")
    zero = r.value(f"icmp eq {ty} {x}, 0")
    v = r.value(f"select i1 {zero}, {ty} {-(1 << (INT_BITS[ty] - 1))}, {ty} 0")
    v = r.value(f"select i1 {mone}, {ty} -1, {ty} {v}")
    return r.value(f"select i1 {one}, {ty} 1, {ty} {v}")


def _int_div(r: "LLVMRenderer", ty: str, a: Args) -> str:
    """ops.divide on ints: floor division, x // 0 == 0, INT_MIN // -1 == INT_MIN (wrapping).
    The divisor is made safe first: sdiv by 0 or INT_MIN by -1 is undefined in LLVM."""
    x, y = a
    zero = r.value(f"icmp eq {ty} {y}, 0")
    minus_one = r.value(f"icmp eq {ty} {y}, -1")
    unsafe = r.value(f"or i1 {zero}, {minus_one}")
    d = r.value(f"select i1 {unsafe}, {ty} 1, {ty} {y}")
    q = r.value(f"sdiv {ty} {x}, {d}")
    rem = r.value(f"srem {ty} {x}, {d}")
    inexact = r.value(f"icmp ne {ty} {rem}, 0")
    signs = r.value(f"xor i1 {r.value(f'icmp slt {ty} {rem}, 0')}, {r.value(f'icmp slt {ty} {d}, 0')}")
    down = r.value(f"and i1 {inexact}, {signs}")
    q = r.value(f"sub {ty} {q}, {r.value(f'zext i1 {down} to {ty}')}")
    q = r.value(f"select i1 {minus_one}, {ty} {r.value(f'sub {ty} 0, {x}')}, {ty} {q}")
    return r.value(f"select i1 {zero}, {ty} 0, {ty} {q}")


def _shift_left(r: "LLVMRenderer", ty: str, a: Args) -> str:
    """ops.ALU[SHL]: 0 for a count outside [0, bits) (unsigned: a negative one is huge), where
    LLVM's shl is poison (which select leaves unpicked)."""
    in_range = r.value(f"icmp ult {ty} {a[1]}, {INT_BITS[ty]}")
    return r.value(f"select i1 {in_range}, {ty} {r.value(f'shl {ty} {a[0]}, {a[1]}')}, {ty} 0")


def _shift_right(r: "LLVMRenderer", ty: str, a: Args) -> str:
    """ops.ALU[SHR]: arithmetic; a count outside [0, bits) shifts by bits - 1 (the sign)."""
    return r.value(f"ashr {ty} {a[0]}, {r.intrinsic('umin', ty, a[1], str(INT_BITS[ty] - 1))}")


def _pow(unsigned: bool) -> OpText:
    def emit(r: "LLVMRenderer", ty: str, a: Args) -> str:
        r.ipow_types.add((ty, unsigned))
        return r.call(ty, ipow_name(ty, unsigned), (ty, a[0]), (ty, a[1]))
    return emit


_INT_OPS: dict[Op, OpText] = {
    Op.NEG: lambda r, ty, a: r.value(f"sub {ty} 0, {a[0]}"),
    Op.RECIP: _int_recip,
    Op.ABS: lambda r, ty, a: r.call(ty, f"llvm.abs.{ty}", (ty, a[0]), ("i1", "false")),
    Op.NOT: lambda r, ty, a: r.value(f"icmp eq {ty} {a[0]}, 0"),
    Op.ADD: _ibin("add"),
    Op.SUB: _ibin("sub"),
    Op.MUL: _ibin("mul"),
    Op.DIV: _int_div,
    Op.POW: _pow(unsigned=False),
    Op.MAX: lambda r, ty, a: r.intrinsic("smax", ty, a[0], a[1]),
    Op.MIN: lambda r, ty, a: r.intrinsic("smin", ty, a[0], a[1]),
    Op.INVERT: lambda r, ty, a: r.value(f"xor {ty} {a[0]}, -1"),
    Op.AND: _ibin("and"),
    Op.OR: _ibin("or"),
    Op.XOR: _ibin("xor"),
    Op.SHL: _shift_left,
    Op.SHR: _shift_right,
    **_compares("icmp", "slt", "sle", "eq", "ne"),
}


def ipow_name(ty: str, unsigned: bool) -> str:
    return f"ug_{'u' if unsigned else 'i'}pow_{ty}"


def ipow_definition(ty: str, unsigned: bool) -> str:
    """`ug_ipow_<ty>`: integer power by squaring (numpy semantics, wrapping); a negative exponent
    gives 1 / b**-e truncated, 0 for b == 0 (ops.power; numpy raises instead). `ug_upow_<ty>`:
    the same of unsigned ints (no exponent is negative: `icmp ult e, 0` is false)."""
    return f"""define internal {ty} @{ipow_name(ty, unsigned)}({ty} %b, {ty} %e) #0 {{
entry:
  %neg = icmp {'ult' if unsigned else 'slt'} {ty} %e, 0
  br i1 %neg, label %negative, label %loop
loop:
  %r = phi {ty} [ 1, %entry ], [ %r2, %body ]
  %bb = phi {ty} [ %b, %entry ], [ %bb2, %body ]
  %ee = phi {ty} [ %e, %entry ], [ %ee2, %body ]
  %done = icmp eq {ty} %ee, 0
  br i1 %done, label %exit, label %body
body:
  %bit = and {ty} %ee, 1
  %odd = icmp ne {ty} %bit, 0
  %m = mul {ty} %r, %bb
  %r2 = select i1 %odd, {ty} %m, {ty} %r
  %bb2 = mul {ty} %bb, %bb
  %ee2 = lshr {ty} %ee, 1
  br label %loop
exit:
  ret {ty} %r
negative:
  %isone = icmp eq {ty} %b, 1
  %ismone = icmp eq {ty} %b, -1
  %eodd = trunc {ty} %e to i1
  %mv = select i1 %eodd, {ty} -1, {ty} 1
  %v1 = select i1 %ismone, {ty} %mv, {ty} 0
  %v = select i1 %isone, {ty} 1, {ty} %v1
  ret {ty} %v
}}
; {INT_BITS[ty]}-bit
"""


# --- uint: the int ops but where the sign matters ---------------------------------------------

def _uint_div(r: "LLVMRenderer", ty: str, a: Args) -> str:
    """ops.divide on unsigned ints: x // 0 == 0 (udiv by 0 is undefined: the divisor is made safe)."""
    zero = r.value(f"icmp eq {ty} {a[1]}, 0")
    q = r.value(f"udiv {ty} {a[0]}, {r.value(f'select i1 {zero}, {ty} 1, {ty} {a[1]}')}")
    return r.value(f"select i1 {zero}, {ty} 0, {ty} {q}")


def _logical_shift_right(r: "LLVMRenderer", ty: str, a: Args) -> str:
    """ops.ALU[SHR] of unsigned ints: logical; 0 for a count of bits or more (poison in LLVM)."""
    in_range = r.value(f"icmp ult {ty} {a[1]}, {INT_BITS[ty]}")
    return r.value(f"select i1 {in_range}, {ty} {r.value(f'lshr {ty} {a[0]}, {a[1]}')}, {ty} 0")


_UINT_OPS: dict[Op, OpText] = {
    **{op: spell for op, spell in _INT_OPS.items() if op is not Op.RECIP},   # (uint RECIP is never built)
    Op.ABS: lambda r, ty, a: a[0],
    Op.DIV: _uint_div,
    Op.POW: _pow(unsigned=True),
    Op.MAX: lambda r, ty, a: r.intrinsic("umax", ty, a[0], a[1]),
    Op.MIN: lambda r, ty, a: r.intrinsic("umin", ty, a[0], a[1]),
    Op.SHR: _logical_shift_right,
    **_compares("icmp", "ult", "ule", "eq", "ne"),
}


# --- bool (i1) ------------------------------------------------------------------------------

_BOOL_OPS: dict[Op, OpText] = {
    Op.ABS: lambda r, ty, a: a[0],
    Op.NOT: lambda r, ty, a: r.value(f"xor i1 {a[0]}, true"),
    Op.ADD: _ibin("or"),
    Op.MUL: _ibin("and"),
    Op.MAX: _ibin("or"),
    Op.MIN: _ibin("and"),
    Op.AND: _ibin("and"),
    Op.OR: _ibin("or"),
    Op.XOR: _ibin("xor"),
    **_compares("icmp", "ult", "ule", "eq", "ne"),    # false < true
}

_BY_KIND = {FLOAT: _FLOAT_OPS, INT: _INT_OPS, UINT: _UINT_OPS, BOOL_KIND: _BOOL_OPS}
# each kind's tables, and WHERE, which the renderer selects itself
check_alu_tables({kind: set(table) | {Op.WHERE} for kind, table in _BY_KIND.items()}, "llvm renderer")
