"""float64 exp/log/sin/cos/tanh in software: GLSL.std.450 has them for 16/32-bit floats only.

Functions over a `SpirvEmitter`, returning the id of the result: argument reduction with
split constants, then series long enough for float64 (test_float64_software_math holds them
to rtol 1e-12 of numpy on [-30, 30] and at 0, -0, subnormals, overflow, inf and NaN).
"""

from __future__ import annotations

import math

import numpy as np

from .emit import F64, I32, SpirvEmitter
from .spirv import GLSL, Op as S


def poly(e: SpirvEmitter, dt: np.dtype, x: int, coeffs: list[float]) -> int:
    """coeffs[0] + x * (coeffs[1] + x * (...)) (Horner)."""
    acc = e.c(coeffs[-1], dt)
    for k in reversed(coeffs[:-1]):
        acc = e.fbin(S.FAdd, dt, e.fbin(S.FMul, dt, acc, x), e.c(k, dt))
    return acc


def _pow2i(e: SpirvEmitter, k: int) -> int:
    """2**k as float64 for an int32 k in the normal range, built from its bit pattern."""
    m = e.m
    i32, u32 = m.t_int(32), m.t_int(32, False)
    hi = e.op(S.ShiftLeftLogical, i32, e.op(S.IAdd, i32, k, e.c(1023, I32)), e.c(20, I32))
    vec = e.op(S.CompositeConstruct, m.t_vec(u32, 2), e.u32(0), e.op(S.Bitcast, u32, hi))
    return e.op(S.Bitcast, e.vt(F64), vec)


def exp64(e: SpirvEmitter, x: int) -> int:
    d = F64
    xc = e.sel(d, e.fcmp(S.FOrdGreaterThan, x, e.c(710.0, d)), e.c(710.0, d), x)
    xc = e.sel(d, e.fcmp(S.FOrdLessThan, xc, e.c(-746.0, d)), e.c(-746.0, d), xc)
    k = e.ext(GLSL.RoundEven, e.vt(d), e.fbin(S.FMul, d, xc, e.c(1 / math.log(2), d)))
    r = e.fbin(S.FSub, d, xc, e.fbin(S.FMul, d, k, e.c(6.93147180369123816490e-01, d)))
    r = e.fbin(S.FSub, d, r, e.fbin(S.FMul, d, k, e.c(1.90821492927058770002e-10, d)))
    p = poly(e, d, r, [1.0 / math.factorial(i) for i in range(15)])
    ki = e.op(S.ConvertFToS, e.vt(I32), k)
    k1 = e.op(S.ShiftRightArithmetic, e.vt(I32), ki, e.c(1, I32))
    k2 = e.op(S.ISub, e.vt(I32), ki, k1)
    return e.fbin(S.FMul, d, e.fbin(S.FMul, d, p, _pow2i(e, k1)), _pow2i(e, k2))


def log64(e: SpirvEmitter, x: int) -> int:
    d = F64
    m = e.m
    b = m.t_bool()
    i32, u32 = m.t_int(32), m.t_int(32, False)
    tiny = e.fcmp(S.FOrdLessThan, x, e.c(2.2250738585072014e-308, d))
    xs = e.sel(d, tiny, e.fbin(S.FMul, d, x, e.c(2.0 ** 54, d)), x)
    bias = e.sel(I32, tiny, e.c(-54 - 1023, I32), e.c(-1023, I32))
    vec = e.op(S.Bitcast, m.t_vec(u32, 2), xs)
    hi = e.op(S.CompositeExtract, u32, vec, 1)
    lo = e.op(S.CompositeExtract, u32, vec, 0)
    ebits = e.op(S.BitwiseAnd, u32, e.op(S.ShiftRightLogical, u32, hi, e.u32(20)), e.u32(0x7FF))
    ex = e.op(S.IAdd, i32, e.op(S.Bitcast, i32, ebits), bias)
    mhi = e.op(S.BitwiseOr, u32, e.op(S.BitwiseAnd, u32, hi, e.u32(0x000FFFFF)), e.u32(0x3FF00000))
    mant = e.op(S.Bitcast, e.vt(d), e.op(S.CompositeConstruct, m.t_vec(u32, 2), lo, mhi))
    big = e.fcmp(S.FOrdGreaterThan, mant, e.c(math.sqrt(2.0), d))
    mant = e.sel(d, big, e.fbin(S.FMul, d, mant, e.c(0.5, d)), mant)
    ex = e.op(S.Select, i32, big, e.op(S.IAdd, i32, ex, e.c(1, I32)), ex)
    s = e.fbin(S.FDiv, d, e.fbin(S.FSub, d, mant, e.c(1.0, d)), e.fbin(S.FAdd, d, mant, e.c(1.0, d)))
    s2 = e.fbin(S.FMul, d, s, s)
    series = poly(e, d, s2, [1.0 / (2 * k + 1) for k in range(13)])
    logm = e.fbin(S.FMul, d, e.fbin(S.FMul, d, s, e.c(2.0, d)), series)
    ef = e.op(S.ConvertSToF, e.vt(d), ex)
    out = e.fbin(S.FAdd, d, e.fbin(S.FMul, d, ef, e.c(6.93147180369123816490e-01, d)),
                    e.fbin(S.FAdd, d, e.fbin(S.FMul, d, ef, e.c(1.90821492927058770002e-10, d)), logm))
    out = e.sel(d, e.fcmp(S.FOrdEqual, x, e.c(0.0, d)), e.c(-np.inf, d), out)
    out = e.sel(d, e.fcmp(S.FOrdLessThan, x, e.c(0.0, d)), e.c(np.nan, d), out)
    special = e.op(S.LogicalOr, b, e.op(S.IsInf, b, x), e.op(S.IsNan, b, x))
    return e.sel(d, e.op(S.LogicalAnd, b, special, e.fcmp(S.FUnordGreaterThan, x, e.c(0.0, d))), x, out)


def _sincos64(e: SpirvEmitter, x: int, want_cos: bool) -> int:
    d = F64
    i32 = e.vt(I32)
    b = e.m.t_bool()
    k = e.ext(GLSL.RoundEven, e.vt(d), e.fbin(S.FMul, d, x, e.c(2 / math.pi, d)))
    r = e.fbin(S.FSub, d, x, e.fbin(S.FMul, d, k, e.c(1.57079632673412561417e+00, d)))
    r = e.fbin(S.FSub, d, r, e.fbin(S.FMul, d, k, e.c(6.07710050630396597660e-11, d)))
    r = e.fbin(S.FSub, d, r, e.fbin(S.FMul, d, k, e.c(2.02226624871116645580e-21, d)))
    r2 = e.fbin(S.FMul, d, r, r)
    sin_r = e.fbin(S.FMul, d, r, poly(e, d, r2, [(-1) ** j / math.factorial(2 * j + 1) for j in range(11)]))
    cos_r = poly(e, d, r2, [(-1) ** j / math.factorial(2 * j) for j in range(11)])
    n = e.op(S.BitwiseAnd, i32, e.op(S.ConvertFToS, i32, k), e.c(3, I32))
    if want_cos:
        n = e.op(S.BitwiseAnd, i32, e.op(S.IAdd, i32, n, e.c(1, I32)), e.c(3, I32))
    neg_sin = e.op(S.FNegate, e.vt(d), sin_r)
    neg_cos = e.op(S.FNegate, e.vt(d), cos_r)
    # sin(x + n*pi/2): n=0 sin, 1 cos, 2 -sin, 3 -cos
    odd = e.op(S.IEqual, b, e.op(S.BitwiseAnd, i32, n, e.c(1, I32)), e.c(1, I32))
    upper = e.op(S.IEqual, b, e.op(S.BitwiseAnd, i32, n, e.c(2, I32)), e.c(2, I32))
    pos = e.sel(d, odd, cos_r, sin_r)
    neg = e.sel(d, odd, neg_cos, neg_sin)
    out = e.sel(d, upper, neg, pos)
    bad = e.op(S.LogicalOr, b, e.op(S.IsInf, b, x), e.op(S.IsNan, b, x))
    return e.sel(d, bad, e.c(np.nan, d), out)


def sin64(e: SpirvEmitter, x: int) -> int:
    return _sincos64(e, x, False)


def cos64(e: SpirvEmitter, x: int) -> int:
    return _sincos64(e, x, True)


def tanh64(e: SpirvEmitter, x: int) -> int:
    d = F64
    a = e.ext(GLSL.FAbs, e.vt(d), x)
    y = e.fbin(S.FMul, d, a, e.c(-2.0, d))
    small = e.fbin(S.FMul, d, y, poly(e, d, y, [1.0 / math.factorial(i + 1) for i in range(18)]))
    em = e.sel(d, e.fcmp(S.FOrdLessThan, a, e.c(0.25, d)), small,
                  e.fbin(S.FSub, d, exp64(e, y), e.c(1.0, d)))
    t = e.fbin(S.FDiv, d, e.op(S.FNegate, e.vt(d), em), e.fbin(S.FAdd, d, e.c(2.0, d), em))
    t = e.sel(d, e.fcmp(S.FOrdGreaterThan, a, e.c(40.0, d)), e.c(1.0, d), t)
    return e.sel(d, e.fcmp(S.FOrdLessThan, x, e.c(0.0, d)), e.op(S.FNegate, e.vt(d), t), t)


MATH64 = {"exp": exp64, "log": log64, "sin": sin64, "cos": cos64, "tanh": tanh64}
"""The software function of each transcendental (sqrt is GLSL's: exact at every width)."""
