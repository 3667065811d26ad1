"""The ALU ops of loop IR as LLVM IR, per operand kind (float, int, bool).

Semantics are ug_core.ops's (numpy's): integers wrap; int DIV is floor division with x // 0 == 0
and INT_MIN // -1 == INT_MIN; int RECIP and POW follow ops.py; float MAX / MIN propagate NaN
(llvm.maximum / minimum); bool + is or, bool * is and. Combinations numpy never produces (exp of
an int, bool division) raise RenderError, which the device turns into a CompileError.

exp, log, tanh, float32 sin / cos and float32 pow call the vectorizable functions of
ug_llvm.mathlib; the rest of float math is LLVM's intrinsics (libm where scalar).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ug_core.kit import RenderError
from ug_core.ops import ALU, Op, check_exhaustive

from . import mathlib
from .render_ir import FSUF, fconst

if TYPE_CHECKING:
    from .render import LLVMRenderer

INT_BITS = {"i32": 32, "i64": 64}
FAST = "contract"                      # ordinary float arithmetic

Args = list[str]
OpText = Callable[["LLVMRenderer", str, Args], str]   # (renderer, operand type, operands) -> result


def kind(ty: str) -> str:
    """'f', 'i' or 'b' (i1) for an LLVM scalar type."""
    return "f" if ty in FSUF else ("b" if ty == "i1" else "i")


def const_text(value: object, ty: str) -> str:
    if ty in FSUF:
        return fconst(float(value), ty)  # type: ignore[arg-type]
    if ty == "i1":
        return "true" if value else "false"
    return str(int(value))  # type: ignore[call-overload]


def alu(r: "LLVMRenderer", op: Op, ty: str, args: Args) -> str:
    """`op` on operands of LLVM type `ty` (not WHERE, which the renderer selects itself)."""
    table = _FLOAT_OPS if kind(ty) == "f" else _INT_OPS if kind(ty) == "i" else _BOOL_OPS
    try:
        spell = table[op]
    except KeyError:
        raise RenderError(f"{op.name.lower()} on {ty} (numpy never produces it)") from None
    return spell(r, ty, args)


# --- float ----------------------------------------------------------------------------------

def _fbin(opname: str) -> OpText:
    return lambda r, ty, a: r.value(f"{opname} {FAST} {ty} {a[0]}, {a[1]}")


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
    Op.RECIP: lambda r, ty, a: r.value(f"fdiv {FAST} {ty} {const_text(1.0, ty)}, {a[0]}"),
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


def _int_pow(r: "LLVMRenderer", ty: str, a: Args) -> str:
    r.ipow_types.add(ty)
    return r.call(ty, f"ug_ipow_{ty}", (ty, a[0]), (ty, a[1]))


_INT_OPS: dict[Op, OpText] = {
    Op.NEG: lambda r, ty, a: r.value(f"sub {ty} 0, {a[0]}"),
    Op.RECIP: _int_recip,
    Op.ABS: lambda r, ty, a: r.call(ty, f"llvm.abs.{ty}", (ty, a[0]), ("i1", "false")),
    Op.NOT: lambda r, ty, a: r.value(f"icmp eq {ty} {a[0]}, 0"),
    Op.ADD: _ibin("add"),
    Op.SUB: _ibin("sub"),
    Op.MUL: _ibin("mul"),
    Op.DIV: _int_div,
    Op.POW: _int_pow,
    Op.MAX: lambda r, ty, a: r.intrinsic("smax", ty, a[0], a[1]),
    Op.MIN: lambda r, ty, a: r.intrinsic("smin", ty, a[0], a[1]),
    **_compares("icmp", "slt", "sle", "eq", "ne"),
}


def ipow_definition(ty: str) -> str:
    """`ug_ipow_<ty>`: integer power by squaring (numpy semantics, wrapping); a negative exponent
    gives 1 / b**-e truncated, 0 for b == 0 (ops.power; numpy raises instead)."""
    return f"""define internal {ty} @ug_ipow_{ty}({ty} %b, {ty} %e) #0 {{
entry:
  %neg = icmp slt {ty} %e, 0
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


# --- bool (i1) ------------------------------------------------------------------------------

_BOOL_OPS: dict[Op, OpText] = {
    Op.NEG: lambda r, ty, a: a[0],
    Op.RECIP: lambda r, ty, a: a[0],
    Op.ABS: lambda r, ty, a: a[0],
    Op.NOT: lambda r, ty, a: r.value(f"xor i1 {a[0]}, true"),
    Op.ADD: _ibin("or"),
    Op.SUB: _ibin("xor"),
    Op.MUL: _ibin("and"),
    Op.MAX: _ibin("or"),
    Op.MIN: _ibin("and"),
    **_compares("icmp", "ult", "ule", "eq", "ne"),    # false < true
}

# what each kind leaves out, numpy never produces (WHERE is selected by the renderer itself)
_TRANSCENDENTAL = {Op.EXP, Op.LOG, Op.SQRT, Op.SIN, Op.COS, Op.TANH}
check_exhaustive(set(_FLOAT_OPS) | {Op.WHERE}, ALU, "llvm renderer (float ALU ops)")
check_exhaustive(set(_INT_OPS) | {Op.WHERE} | _TRANSCENDENTAL, ALU, "llvm renderer (int ALU ops)")
check_exhaustive(set(_BOOL_OPS) | {Op.WHERE, Op.DIV, Op.POW} | _TRANSCENDENTAL, ALU, "llvm renderer (bool ALU ops)")
