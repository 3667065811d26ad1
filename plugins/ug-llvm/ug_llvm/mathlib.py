"""Vectorizable math functions, emitted as plain LLVM IR.

`llvm.exp.f32` and friends lower to scalar libm calls, which stop the loop vectorizer. These
functions are branch-free (range reduction + polynomial, special cases by `select`), so once
inlined into a kernel's loop they vectorize like any other arithmetic.

float32: exp, log, tanh (single precision, Cephes-style minimax polynomials, ~1 ulp),
sin, cos (evaluated in double after an exact range reduction: Cody-Waite for |x| < 120,
Payne-Hanek with a 192-bit table of 2/pi otherwise, so huge arguments are right too).
float64: exp, log, tanh (fdlibm / Cephes coefficients, a few ulp). float32 pow goes through the
float64 exp and log. float64 sin/cos and pow use libm (scalar).

Each function is `internal` and `alwaysinline`; a module only gets the ones it calls
(`definitions(names)` follows dependencies). exp, log, pow and tanh are here; sin and cos in
llvm_math_sincos; the IR builder they share in llvm_math_builder.

The float32 constants and polynomials of exp, log and tanh, and the bits of 2/pi, are the core's
(ug_core.mathlib, which expands the same algorithms into loop IR for targets without an
accurate math library); these versions stay LLVM IR because they are vectorized as a whole
(fused multiply-adds, vector variants of sin / cos for the loop vectorizer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Callable

from ug_core.kit import mathlib as core_math

from .llvm_math_builder import MathFn
from .llvm_math_sincos import INV_PIO2_GLOBAL, sincos_f32
from .render_ir import FSUF

_EXP_POLY, _LN2_HI, _LN2_LO, _LOG_POLY = core_math.EXP_POLY, core_math.LN2_HI, core_math.LN2_LO, core_math.LOG_POLY
_LN2_HI_F64, _LN2_LO_F64 = core_math.LN2_HI_F64, core_math.LN2_LO_F64
_TANH_POLY, _TANH_TINY = core_math.TANH_POLY, core_math.TANH_TINY

# ---------------------------------------------------------------------------------- exp



@dataclass(frozen=True)
class _ExpForm:
    """What exp differs in between float32 (Cephes expf, the core's constants) and float64."""

    int_ty: str                  # the integer type of the same width
    lo: float                    # x is clamped to [lo, hi]: beyond, the result is 0 or inf anyway
    hi: float
    log2e: float
    ln2: tuple[float, float]     # ln 2 = hi + lo (Cody-Waite)
    poly: list[float]            # exp(r) = 1 + r + r*r P(r)
    bias: int                    # the exponent's bias and the mantissa's bits
    mant: int


_EXP = {
    "float": _ExpForm("i32", -104.0, 89.0, 1.44269504088896341, (_LN2_HI, _LN2_LO), _EXP_POLY, 127, 23),
    # Taylor to r^13 on |r| <= ln2/2: truncation < 0.05 ulp
    "double": _ExpForm("i64", -746.0, 710.0, 1.4426950408889634, (_LN2_HI_F64, _LN2_LO_F64),
                       [1.0 / math.factorial(k) for k in range(13, 1, -1)], 1023, 52),
}


def _exp(ty: str) -> tuple[str, set[str]]:
    """exp(x) = 2**n exp(r), r = x - n ln 2 in [-ln2/2, ln2/2]; NaN stays NaN."""
    form = _EXP[ty]
    f = MathFn(ty)
    x = "%x"
    lo = f.fcmp("olt", x, f.c(form.lo))
    xc = f.select(lo, f.c(form.lo), x)
    hi = f.fcmp("ogt", xc, f.c(form.hi))
    xc = f.select(hi, f.c(form.hi), xc)
    n = f.intrinsic("rint", f.fmul(xc, f.c(form.log2e)))
    r = f.fma(n, f.c(-form.ln2[0]), xc)
    r = f.fma(n, f.c(-form.ln2[1]), r)
    z = f.fmul(r, r)
    p = f.poly(r, form.poly)
    y = f.fadd(f.fma(p, z, r), f.c(1.0))
    y = _scale2(f, y, n, ty, form.int_ty, form.bias, form.mant)
    nan = f.fcmp("uno", x, x)
    return f.define(f"ug_exp_{FSUF[ty]}", f.select(nan, x, y)), f.calls


def _scale2(f: MathFn, y: str, n: str, fty: str, ity: str, bias: int, mant: int) -> str:
    """y * 2^n for integral n (as a float) in a range where n/2 is a normal exponent."""
    ni = f.conv("fptosi", n, fty, ity)
    n1 = f.ibin("ashr", ni, "1", ity)
    n2 = f.ibin("sub", ni, n1, ity)
    s1 = f.conv("bitcast", f.ibin("shl", f.ibin("add", n1, str(bias), ity), str(mant), ity), ity, fty)
    s2 = f.conv("bitcast", f.ibin("shl", f.ibin("add", n2, str(bias), ity), str(mant), ity), ity, fty)
    return f.fmul(f.fmul(y, s1, fty), s2, fty)


# ---------------------------------------------------------------------------------- log


def _log_special(f: MathFn, x: str, y: str) -> str:
    inf = f.c(float("inf"))
    y = f.select(f.fcmp("oeq", x, inf), inf, y)
    y = f.select(f.fcmp("oeq", x, f.c(0.0)), f.c(float("-inf")), y)
    y = f.select(f.fcmp("olt", x, f.c(0.0)), f.c(float("nan")), y)
    return f.select(f.fcmp("uno", x, x), x, y)


# float type -> (its integer type, mantissa bits, exponent bias, log2 of the scale that makes a
# subnormal normal)
_FORMAT = {"float": ("i32", 23, 127, 23), "double": ("i64", 52, 1023, 54)}


def _log_reduce(f: MathFn, x: str) -> tuple[str, str]:
    """(m, k as a float) with x = 2**k (1 + m), 1 + m in [sqrt(1/2), sqrt(2)), both exact: the
    exponent and mantissa from x's bits (a subnormal x scaled to a normal one first)."""
    ty = f.ty
    ity, mant, bias, scale = _FORMAT[ty]
    width = int(ity[1:])
    den = f.fcmp("olt", x, f.c(2.0 ** (1 - bias)))
    xs = f.select(den, f.fmul(x, f.c(2.0 ** scale)), x)
    eadj = f.select(den, str(-scale), "0", ity)
    bits = f.conv("bitcast", xs, ty, ity)
    e = f.ibin("sub", f.ibin("lshr", bits, str(mant), ity), str(bias - 1), ity)
    e = f.ibin("add", e, eadj, ity)
    sign_and_mantissa = (1 << (width - 1)) | ((1 << mant) - 1)
    half = (bias - 1) << mant   # the exponent of [0.5, 1)
    m = f.conv("bitcast", f.ibin("or", f.ibin("and", bits, str(sign_and_mantissa - (1 << width)), ity), str(half), ity),
               ity, ty)
    small = f.fcmp("olt", m, f.c(0.707106781186547524))
    e = f.ibin("sub", e, f.conv("zext", small, "i1", ity), ity)
    m = f.select(small, f.fadd(m, m), m)
    return f.fsub(m, f.c(1.0)), f.conv("sitofp", e, ity, ty)


def _log_f32() -> tuple[str, set[str]]:
    """Cephes logf: log(1 + m) = m - m*m/2 + m**3 P(m)."""
    f = MathFn("float")
    x = "%x"
    m, fe = _log_reduce(f, x)
    z = f.fmul(m, m)
    y = f.fmul(f.fmul(f.poly(m, _LOG_POLY), m), z)
    y = f.fma(fe, f.c(_LN2_LO), y)
    y = f.fma(z, f.c(-0.5), y)
    r = f.fadd(m, y)
    r = f.fma(fe, f.c(_LN2_HI), r)
    return f.define("ug_log_f32", _log_special(f, x, r)), f.calls


def _log_f64() -> tuple[str, set[str]]:
    """fdlibm log: s = m / (2 + m), log(1 + m) = m - (m*m/2 - s (m*m/2 + R(s*s)))."""
    f = MathFn("double")
    x = "%x"
    fm, k = _log_reduce(f, x)
    s = f.fdiv(fm, f.fadd(fm, f.c(2.0)))
    z = f.fmul(s, s)
    w = f.fmul(z, z)
    t1 = f.fmul(w, f.poly(w, [1.531383769920937332e-01, 2.222219843214978396e-01, 3.999999999940941908e-01]))
    t2 = f.fmul(z, f.poly(w, [1.479819860511658591e-01, 1.818357216161805012e-01, 2.857142874366239149e-01,
                              6.666666666666735130e-01]))
    R = f.fadd(t2, t1)
    hfsq = f.fmul(f.fmul(fm, fm), f.c(0.5))
    # k*ln2_hi - ((hfsq - (s*(hfsq+R) + k*ln2_lo)) - f)
    inner = f.fma(k, f.c(_LN2_LO_F64), f.fmul(s, f.fadd(hfsq, R)))
    r = f.fsub(f.fmul(k, f.c(_LN2_HI_F64)), f.fsub(f.fsub(hfsq, inner), fm))
    return f.define("ug_log_f64", _log_special(f, x, r)), f.calls


# ---------------------------------------------------------------------------------- pow


def _pow_f32() -> tuple[str, set[str]]:
    """powf(x, y) = exp(y * log|x|) evaluated in double: log's and exp's errors of a few double
    ulp, scaled by |y log x| < 150, stay far below half a float ulp, so the result is the
    correctly rounded one but for rare double-rounding ties. The special cases follow C99
    (numpy's powf): sign for odd integer y, NaN for x < 0 and non-integer y, and 1 for y = 0,
    x = 1, and |x| = 1 with infinite y."""
    f = MathFn("float")
    x, y = "%x", "%y"
    ax = f.intrinsic("fabs", x)
    l = f.call("ug_log_f64", f.conv("fpext", ax, "float", "double"), ty="double")
    t = f.fmul(f.conv("fpext", y, "float", "double"), l, "double")
    r = f.conv("fptrunc", f.call("ug_exp_f64", t, ty="double"), "double", "float")
    y_int = f.fcmp("oeq", f.intrinsic("floor", y), y)            # true for +-inf (even), false for NaN
    half = f.fmul(y, f.c(0.5))
    y_odd = f.ibin("and", y_int, f.fcmp("une", f.intrinsic("floor", half), half), "i1")
    x_sign = f.icmp("slt", f.conv("bitcast", x, "float", "i32"), "0", "i32")   # -0 and -inf too
    r = f.select(f.ibin("and", y_odd, x_sign, "i1"), f.fneg(r), r)
    x_neg_finite = f.ibin("and", f.fcmp("olt", x, f.c(0.0)), f.fcmp("one", ax, f.c(float("inf"))), "i1")
    bad = f.ibin("and", x_neg_finite, f.ibin("xor", y_int, "true", "i1"), "i1")
    r = f.select(bad, f.c(float("nan")), r)
    unit = f.ibin("and", f.fcmp("oeq", ax, f.c(1.0)), f.fcmp("oeq", f.intrinsic("fabs", y), f.c(float("inf"))), "i1")
    one = f.ibin("or", f.ibin("or", f.fcmp("oeq", x, f.c(1.0)), f.fcmp("oeq", y, f.c(0.0)), "i1"), unit, "i1")
    return f.define("ug_pow_f32", f.select(one, f.c(1.0), r), params=("%x", "%y")), f.calls


# ---------------------------------------------------------------------------------- tanh


def _tanh_rational_f64(f: MathFn, z: str) -> str:
    """z R(z), R = P / Q (Cephes tanh)."""
    P = f.poly(z, [-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3])
    Q = f.poly(z, [1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3])
    return f.fmul(z, f.fdiv(P, Q))


# per type: z R(z) for |x| < 0.625 (tanh x = x + x z R(z), z = x*x), and the |x| below which
# tanh(x) rounds to x
_TANH: dict[str, tuple[Callable[[MathFn, str], str], float]] = {
    "float": (lambda f, z: f.fmul(f.poly(z, _TANH_POLY), z), _TANH_TINY),   # Cephes tanhf, the core's
    "double": (_tanh_rational_f64, 2.0 ** -27),
}


def _tanh(ty: str) -> tuple[str, set[str]]:
    """|x| < 0.625: x + x z R(z); else 1 - 2 / (exp(2|x|) + 1) with x's sign."""
    small_part, tiny = _TANH[ty]
    f = MathFn(ty)
    x = "%x"
    a = f.intrinsic("fabs", x)
    e = f.call(f"ug_exp_{FSUF[ty]}", f.fadd(a, a))
    big = f.fsub(f.c(1.0), f.fdiv(f.c(2.0), f.fadd(e, f.c(1.0))))
    big = f.intrinsic("copysign", big, x)
    small = f.fma(small_part(f, f.fmul(x, x)), x, x)
    small = f.select(f.fcmp("olt", a, f.c(tiny)), x, small)  # rounds to x; keeps -0 (-0 + +0 is +0)
    return f.define(f"ug_tanh_{FSUF[ty]}", f.select(f.fcmp("oge", a, f.c(0.625)), big, small)), f.calls


VECTOR_LANES = (4, 8, 16)
# scalar functions with vector variants (VFABI): calls to them stay calls until the loop
# vectorizer replaces them by the variant of its chosen width
VECTORIZED_CALLS = {"ug_sin_f32", "ug_cos_f32"}


def call_attributes(name: str) -> str:
    """The call-site attribute naming the vector variants of `name` ("" if it has none)."""
    if name not in VECTORIZED_CALLS:
        return ""
    variants = ",".join(f"_ZGV_LLVM_N{n}v_{name}({name}_v{n})" for n in VECTOR_LANES)
    return f'"vector-function-abi-variant"="{variants}"'


def call_attribute_group(name: str) -> int:
    """The number of the attribute group (#N) that a module gives `name`'s call sites."""
    return 100 + sorted(VECTORIZED_CALLS).index(name)


_BUILDERS: dict[str, Callable[[], tuple[str, set[str]]]] = {
    "ug_exp_f32": partial(_exp, "float"), "ug_exp_f64": partial(_exp, "double"),
    "ug_log_f32": _log_f32, "ug_log_f64": _log_f64,
    "ug_tanh_f32": partial(_tanh, "float"), "ug_tanh_f64": partial(_tanh, "double"),
    "ug_pow_f32": _pow_f32,
    "ug_sin_f32": partial(sincos_f32, "sin"), "ug_cos_f32": partial(sincos_f32, "cos"),
    **{f"ug_{w}_f32_v{n}": partial(sincos_f32, w, n) for w in ("sin", "cos") for n in VECTOR_LANES},
}
_CACHE: dict[str, tuple[str, set[str]]] = {}

FUNCTIONS = frozenset(_BUILDERS)

ATTRIBUTES = (
    'attributes #90 = { alwaysinline nounwind willreturn "no-trapping-math"="true" }\n'
    'attributes #91 = { nounwind willreturn memory(none) "no-trapping-math"="true" }\n'
    'attributes #92 = { noinline nounwind willreturn memory(none) "no-trapping-math"="true" }\n'
)


def definitions(names: set[str]) -> str:
    """IR text defining the named functions and everything they call."""
    todo, done = list(names), {}
    while todo:
        name = todo.pop()
        if name in done:
            continue
        if name not in _CACHE:
            _CACHE[name] = _BUILDERS[name]()
        text, calls = _CACHE[name]
        done[name] = text
        todo.extend(calls)
        if name in VECTORIZED_CALLS:
            todo.extend(f"{name}_v{n}" for n in VECTOR_LANES)
    out = "".join(done[n] for n in sorted(done))
    keep = sorted(n for n in done if n.rsplit("_", 1)[-1][:1] == "v" and n.rsplit("_", 1)[-1][1:].isdigit())
    if keep:  # vector variants have no caller until the loop vectorizer runs: keep them alive
        out += (f"@llvm.compiler.used = appending global [{len(keep)} x ptr] ["
                + ", ".join(f"ptr @{n}" for n in keep) + '], section "llvm.metadata"\n')
    if any(n.startswith(("ug_sin", "ug_cos")) for n in done):
        out = INV_PIO2_GLOBAL + out
    return out
