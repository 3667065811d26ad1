"""float32 exp, log, tanh, sin and cos as loop IR (float16 is computed with these and rounded
once, as numpy does).

Measured by tests/test_ulp.py over a sweep incl. subnormal, tiny, huge and special inputs: exp,
log, tanh (Cephes' minimax polynomials, float32 arithmetic) within 1.3 ulp; sin and cos within
1.5 ulp: Cephes' float32 polynomials after an argument reduction in float64 (so they need a
target with float64): Cody-Waite with a three-part pi/2 for |x| < 2**19, and above that (only
where a lane needs it: an IF) the exact reduction of reduction.py.

The constants are public: ug-llvm's vectorizable math functions use the same ones."""

from __future__ import annotations

import functools
import math
from typing import Callable

from ..loop_ir import INDEX, Inst, Opc
from ..ops import Op
from .emitter import F32, F64, I32, Emitter
from .reduction import CODY_WAITE_LIMIT, PIO2, reduce_exact, sin_or_cos

# --- exp ------------------------------------------------------------------------------------

LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4   # ln 2 = hi + lo; n * hi is exact for |n| < 2**15
EXP_POLY = [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
            5.0000001201e-1]


def exp_f32(e: Emitter, x: Inst) -> Inst:
    """exp(x) = 2**n * exp(r), r = x - n ln 2 in [-ln2/2, ln2/2] (Cephes expf, ~1 ulp)."""
    xc = e.clamp(x, -104.0, 89.0)                  # beyond: 0 or inf either way; NaN stays
    n = e.round_int(e.mul(xc, 1.44269504088896341))
    r = e.sub(e.sub(xc, e.mul(n, LN2_HI)), e.mul(n, LN2_LO))
    p = e.poly(r, EXP_POLY)
    y = e.add(e.add(e.mul(p, e.mul(r, r)), r), 1.0)
    # 2**n in two factors, each a normal number for n in [-151, 128]: results that are
    # subnormal are rounded once, by the last multiply
    n1 = e.round_int(e.mul(n, 0.5))
    n2 = e.sub(n, n1)
    y = e.mul(e.mul(y, e.pow2(n1)), e.pow2(n2))
    return e.where(e.is_nan(x), x, y)


# --- log ------------------------------------------------------------------------------------

LOG_POLY = [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
            -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1]


def log_special(e: Emitter, x: Inst, r: Inst) -> Inst:
    """log's result `r` for finite x > 0, and numpy's at the others: inf, 0 -> -inf, x < 0
    (-inf too) -> NaN, NaN -> NaN (shared with float64)."""
    r = e.where(e.cmp(Op.CMPEQ, x, math.inf), x, r)
    r = e.where(e.cmp(Op.CMPEQ, x, 0.0), -math.inf, r)
    r = e.where(e.cmp(Op.CMPLT, x, 0.0), math.nan, r)
    return e.where(e.is_nan(x), x, r)


def log_f32(e: Emitter, x: Inst) -> Inst:
    """log(x) = k ln 2 + log(1 + m), x = 2**k (1 + m) with 1 + m in [sqrt(1/2), sqrt(2))
    (Cephes logf, ~1 ulp). The exponent and mantissa come from the bits: the float's bits
    as an int64 index value divided by and modulo 2**23."""
    tiny = e.cmp(Op.CMPLT, x, 1.17549435e-38)                      # subnormal (or <= 0): scale up
    xs = e.where(tiny, e.mul(x, 8388608.0), x)
    xs = e.where(e.cmp(Op.CMPLT, 0.0, xs), xs, 1.0)                  # <= 0, NaN: any positive value
    bits = e.cast(e.bitcast(xs, I32), INDEX)                         # > 0
    k = e.sub(e.idiv(bits, 1 << 23), e.add(e.mul(e.cast(tiny, INDEX), 23), 126))
    mant = e.bitcast(e.cast(e.add(e.mod(bits, 1 << 23), 126 << 23), I32), F32)   # in [0.5, 1)
    small = e.cmp(Op.CMPLT, mant, 0.707106781186547524)
    k = e.sub(k, e.cast(small, INDEX))
    m = e.sub(e.where(small, e.add(mant, mant), mant), 1.0)          # exact
    fk = e.cast(k, F32)
    z = e.mul(m, m)
    y = e.mul(e.mul(e.poly(m, LOG_POLY), m), z)
    y = e.add(y, e.mul(fk, LN2_LO))
    y = e.add(y, e.mul(z, -0.5))
    r = e.add(e.add(m, y), e.mul(fk, LN2_HI))
    return log_special(e, x, r)


# --- tanh -----------------------------------------------------------------------------------

TANH_TINY = 2.0 ** -12   # tanh(x) rounds to x below (x - x**3/3: relative x*x/3 < 2**-25)
TANH_POLY = [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1]


def tanh_f32(e: Emitter, x: Inst) -> Inst:
    """|x| < 0.625: x + x z P(z), z = x*x (Cephes tanhf); else 1 - 2 / (exp(2|x|) + 1)."""
    a = e.abs(x)
    big = e.sub(1.0, e.div(2.0, e.add(exp_f32(e, e.add(a, a)), 1.0)))
    big = e.where(e.cmp(Op.CMPLT, x, 0.0), e.neg(big), big)
    z = e.mul(x, x)
    small = e.add(e.mul(e.mul(e.poly(z, TANH_POLY), z), x), x)
    small = e.where(e.cmp(Op.CMPLT, a, TANH_TINY), x, small)      # -0 (-0 + +0 is +0), subnormals
    return e.where(e.cmp(Op.CMPLE, 0.625, a), big, small)           # NaN: small, which is NaN


# --- sin / cos ------------------------------------------------------------------------------

SIN_POLY = [-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1]   # sin r = r + r**3 P(r*r)
COS_POLY = [2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2]  # 1 - r*r/2 + r**4 Q
SIN_TINY = 2.0 ** -12                 # sin(x) rounds to x below (and keeps -0, subnormals)


def _reduce_f32(e: Emitter, ad: Inst) -> tuple[Inst, Inst]:
    """(r, q) of |x| held in float64: Cody-Waite below CODY_WAITE_LIMIT, else the exact
    reduction, only where a lane needs it; its results leave the IF through two accumulators
    (a value defined in a block is visible in that block only)."""
    fast = e.cmp(Op.CMPLT, ad, CODY_WAITE_LIMIT)                   # false for inf and NaN
    af = e.where(fast, ad, 0.0)
    q = e.round_int(e.mul(af, 2 / math.pi))
    r = e.sub(e.sub(e.sub(af, e.mul(q, PIO2[0])), e.mul(q, PIO2[1])), e.mul(q, PIO2[2]))
    slow = e.not_(fast)
    acc_r = e.emit(Opc.DEFINE_ACC, F64, (), 0.0)
    acc_q = e.emit(Opc.DEFINE_ACC, F64, (), 0.0)
    opener = e.emit(Opc.IF, None, (slow,))
    r_big, q_big = reduce_exact(e, e.where(e.cmp(Op.CMPLT, ad, math.inf), ad, 0.0))
    e.emit(Opc.ACC_UPDATE, None, (acc_r, r_big), Op.ADD)
    e.emit(Opc.ACC_UPDATE, None, (acc_q, q_big), Op.ADD)
    e.emit(Opc.ENDIF, None, (opener,))
    r = e.where(slow, e.emit(Opc.ACC_READ, F64, (acc_r,)), r)
    q = e.where(slow, e.emit(Opc.ACC_READ, F64, (acc_q,)), q)
    return r, q


def _sincos_f32(e: Emitter, x: Inst, cos: bool) -> Inst:
    """sin or cos of a float32: |x| = q pi/2 + r reduced in float64, then sin or cos of r (|r| <=
    pi/4) by float32 polynomials, and the quadrant q mod 4."""
    ax = e.abs(x)
    r, q = _reduce_f32(e, e.cast(ax, F64))
    # r is exact to ~2**-60 (absolutely); rounded to float32, the polynomials (Cephes sinf and
    # cosf, float32 arithmetic: float64 is slow on most GPUs) add at most ~1.5 ulp
    rf = e.cast(r, F32)
    r2 = e.mul(rf, rf)
    sin_r = e.add(e.mul(e.mul(e.poly(r2, SIN_POLY), r2), rf), rf)
    cos_r = e.add(e.sub(e.mul(e.mul(e.poly(r2, COS_POLY), r2), r2), e.mul(r2, 0.5)), 1.0)
    return sin_or_cos(e, x, ax, q, sin_r, cos_r, cos, SIN_TINY)


sin_f32 = functools.partial(_sincos_f32, cos=False)
cos_f32 = functools.partial(_sincos_f32, cos=True)


FUNCTIONS: dict[Op, Callable[[Emitter, Inst], Inst]] = {Op.EXP: exp_f32, Op.LOG: log_f32, Op.TANH: tanh_f32, Op.SIN: sin_f32, Op.COS: cos_f32}
