"""float64 exp, log, tanh, sin and cos as loop IR, and the extra-precise log and exp that
float64 pow is built from (power.py).

They take floats apart through their bits as int64 (BITCAST, IDIV / MOD on the int64 index
dtype), so a target needs float64 AND 64-bit integers for them (`targets`). The designs are
the classic ones (fdlibm's, in spirit): a reduction to a small interval with a split constant,
then a polynomial (Taylor series here: the same accuracy as a minimax one, a few terms longer),
special values by WHERE. Measured by tests/test_mathlib.py (max ulp over a sweep of normal,
tiny, subnormal, huge and special arguments): see the bounds there.

sin / cos: Cody-Waite with pi/2 in four parts, the reduced argument kept as r + r_lo: within
1 ulp for |x| < 2**20 * pi/2 (q < 2**20, so q * P1 is exact). Above that, accuracy degrades:
q * P1 is rounded, so the absolute error grows like ulp(x) / 2 (1e-6 at |x| = 1e10), and
from about 2**52 on the result is only some value in [-1, 1]. (The float32 functions reduce
exactly at any size; an exact float64 reduction would need ~1100 bits of 2/pi.)
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Callable

from ..loop_ir import INDEX, Inst
from ..ops import Op
from .emitter import F64, Emitter
from .float32 import log_special
from .reduction import PIO2, sin_or_cos

LN2_HI_F64, LN2_LO_F64 = 6.93147180369123816490e-01, 1.90821492927058770002e-10
"""ln 2 = hi + lo for float64: hi has 32 significant bits, so k * hi is exact for |k| < 2**21."""
LOG2E = 1.4426950408889634
TWO_THIRDS_LO = float(Fraction(2, 3) - Fraction(2 / 3))   # 2/3 = fl(2/3) + this


def _taylor(coeff: Callable[[int], float], first: int, last: int) -> list[float]:
    """[coeff(last), ..., coeff(first)]: Horner's order (highest degree first)."""
    return [coeff(k) for k in range(last, first - 1, -1)]


# --- exp, expm1 -----------------------------------------------------------------------------

# exp(r) = 1 + r + r*r P(r), |r| <= ln2/2: Taylor to r**13 (the first term left out, r**14/14!,
# is 0.04 ulp of the result)
EXPM1_POLY = _taylor(lambda k: 1 / math.factorial(k), 2, 13)


def _reduce_ln2(e: Emitter, x: Inst) -> tuple[Inst, Inst, Inst]:
    """(n, hi, lo): x = n ln 2 + (hi - lo), n integral, |hi - lo| <= ln2/2 (about); x * hi is
    exact, lo = n * LN2_LO_F64 is rounded (for |x| < 2**20)."""
    n = e.round_int(e.mul(x, LOG2E))
    return n, e.sub(x, e.mul(n, LN2_HI_F64)), e.mul(n, LN2_LO_F64)


def exp_f64(e: Emitter, x: Inst, tail: Inst | None = None) -> Inst:
    """exp(x + tail) (tail: a correction much smaller than ulp(x), for pow; absent: 0) =
    2**n exp(r), r = x - n ln 2 (+ tail). About 1 ulp: the last addition 1 + (r + r*r P(r)) and
    the rounding of r dominate."""
    xc = e.clamp(x, -746.0, 710.0)              # beyond: 0 or inf either way; NaN stays
    n, hi, lo = _reduce_ln2(e, xc)
    r = e.sub(hi, lo)
    if tail is not None:
        r = e.add(r, tail)
    y = e.add(e.add(e.mul(e.mul(r, r), e.poly(r, EXPM1_POLY)), r), 1.0)
    # 2**n in two factors, each a normal number for n in [-1076, 1025]: a subnormal result is
    # rounded once, by the last multiply
    n1 = e.round_int(e.mul(n, 0.5))
    y = e.mul(e.mul(y, e.pow2(n1)), e.pow2(e.sub(n, n1)))
    return e.where(e.is_nan(x), x, y)


def expm1_f64(e: Emitter, x: Inst) -> Inst:
    """exp(x) - 1 without cancellation, for x in [-60, 60] (tanh's range; NaN stays NaN):
    2**n (expm1(r) + 1) - 1 = 2**n expm1(r) + (2**n - 1), the second term exact for |n| <= 53
    (beyond, the result is about 2**n or -1). r's rounding error c is put back: expm1(r + c) =
    expm1(r) + c (1 + expm1(r)). About 1 ulp."""
    n, hi, lo = _reduce_ln2(e, x)
    r = e.sub(hi, lo)
    c = e.sub(e.sub(hi, r), lo)
    q = e.add(e.mul(e.mul(r, r), e.poly(r, EXPM1_POLY)), r)
    q = e.add(q, e.add(c, e.mul(c, q)))
    scale = e.pow2(n)
    return e.add(e.mul(scale, q), e.sub(scale, 1.0))


# --- log ------------------------------------------------------------------------------------

# log(1 + f) = 2 atanh(s) = 2s + s R(z), s = f / (2 + f), z = s*s, R(z) = sum 2 z**j / (2j + 1):
# j <= 10 (|s| <= 0.172: the first left out is 2**-60 of the result)
LOG_R_POLY = _taylor(lambda j: 2 / (2 * j + 1), 1, 10)     # R(z) = z P(z)
LOG_R2_POLY = _taylor(lambda j: 2 / (2 * j + 1), 2, 10)     # R(z) - 2z/3 = z*z R2(z), for log_dd


def _decompose(e: Emitter, x: Inst) -> tuple[Inst, Inst]:
    """(k, f) with x = 2**k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)), k an integral float64 and
    f exact, for x > 0 (subnormals too); any other x gives some finite pair. From the bits:
    the float's bits as int64 divided by and modulo 2**52."""
    tiny = e.cmp(Op.CMPLT, x, 2.0 ** -1022)                         # subnormal (or <= 0): scale up
    xs = e.where(tiny, e.mul(x, 2.0 ** 54), x)
    xs = e.where(e.cmp(Op.CMPLT, 0.0, xs), xs, 1.0)                  # <= 0, NaN: any positive value
    xs = e.where(e.cmp(Op.CMPLT, xs, math.inf), xs, 1.0)             # inf: too
    bits = e.bitcast(xs, INDEX)                                      # > 0
    k = e.sub(e.idiv(bits, 1 << 52), e.add(e.mul(e.cast(tiny, INDEX), 54), 1022))
    mant = e.bitcast(e.add(e.mod(bits, 1 << 52), 1022 << 52), F64)   # in [0.5, 1)
    small = e.cmp(Op.CMPLT, mant, math.sqrt(0.5))
    k = e.sub(k, e.cast(small, INDEX))
    f = e.sub(e.where(small, e.add(mant, mant), mant), 1.0)          # exact (Sterbenz)
    return e.cast(k, F64), f


def log_f64(e: Emitter, x: Inst) -> Inst:
    """log(x) = k ln 2 + log(1 + f), log(1 + f) = f - (f*f/2 - s (f*f/2 + R)): the identity
    2s = f - s f puts the big terms first, exact, and the rounding errors in small ones.
    Below 1 ulp."""
    k, f = _decompose(e, x)
    s = e.div(f, e.add(f, 2.0))
    z = e.mul(s, s)
    hfsq = e.mul(e.mul(f, f), 0.5)
    inner = e.add(e.mul(s, e.add(hfsq, e.mul(z, e.poly(z, LOG_R_POLY)))), e.mul(k, LN2_LO_F64))
    r = e.add(e.mul(k, LN2_HI_F64), e.sub(f, e.sub(hfsq, inner)))
    return log_special(e, x, r)


def log_dd(e: Emitter, x: Inst) -> tuple[Inst, Inst]:
    """log(x) as hi + lo, to about 2**-62 relative, for a finite x > 0 (pow's base). The same
    series as log_f64, with its two big terms 2s and 2s**3/3 in double-double: s = f / (2 + f)
    as sh + sl (the division's remainder from an exact product), s**3 from exact products."""
    k, f = _decompose(e, x)
    d = e.add(f, 2.0)
    dl = e.sub(f, e.sub(d, 2.0))                                      # d + dl == 2 + f exactly
    sh = e.div(f, d)
    p, pe = e.two_prod(sh, d)
    sl = e.div(e.sub(e.sub(e.sub(f, p), pe), e.mul(sh, dl)), d)      # f - p: exact (Sterbenz)
    z, ze = e.two_prod(sh, sh)
    s3, s3e = e.two_prod(z, sh)
    s3e = e.add(s3e, e.add(e.mul(ze, sh), e.mul(e.mul(z, sl), 3.0)))    # s**3 = s3 + s3e
    t3, t3e = e.two_prod(s3, e.const(2 / 3, F64))
    t3e = e.add(t3e, e.add(e.mul(s3, TWO_THIRDS_LO), e.mul(s3e, 2 / 3)))
    rest = e.mul(e.mul(e.mul(sh, z), z), e.poly(z, LOG_R2_POLY))    # 2s**5/5 + ...: 2**-12 of it
    h1, e1 = e.fast_two_sum(e.add(sh, sh), t3)
    lo = e.add(e1, e.add(e.add(e.add(sl, sl), t3e), rest))
    h2, e2 = e.two_sum(e.mul(k, LN2_HI_F64), h1)
    return e.fast_two_sum(h2, e.add(e.add(e2, lo), e.mul(k, LN2_LO_F64)))


# --- tanh -----------------------------------------------------------------------------------

TANH_TINY_F64 = 2.0 ** -28   # tanh(x) rounds to x below (relative x*x/3 < 2**-56)


def tanh_f64(e: Emitter, x: Inst) -> Inst:
    """From expm1 of 2|x|: -t / (t + 2), t = expm1(-2|x|), for |x| < 1; 1 - 2 / (t + 2),
    t = expm1(2|x|), above (where the quotient is small, so its errors are too). ~1 ulp."""
    a = e.abs(x)
    big = e.cmp(Op.CMPLE, 1.0, a)
    two_a = e.alu(Op.MIN, e.add(a, a), 60.0)                        # tanh(30) rounds to 1
    t = expm1_f64(e, e.where(big, two_a, e.neg(two_a)))
    out = e.where(big, e.sub(1.0, e.div(2.0, e.add(t, 2.0))), e.div(e.neg(t), e.add(t, 2.0)))
    out = e.where(e.cmp(Op.CMPLT, x, 0.0), e.neg(out), out)
    out = e.where(e.cmp(Op.CMPLT, a, TANH_TINY_F64), x, out)        # -0, subnormals
    return e.where(e.is_nan(x), x, out)


# --- sin / cos ------------------------------------------------------------------------------

SIN_POLY_F64 = _taylor(lambda j: (-1) ** j / math.factorial(2 * j + 1), 1, 9)   # sin r = r + r z P(z)
COS_POLY_F64 = _taylor(lambda j: (-1) ** j / math.factorial(2 * j), 2, 9)       # cos r = 1 - z/2 + z z Q(z)
SIN_TINY_F64 = 2.0 ** -27   # sin(x) rounds to x below (and keeps -0, subnormals)
REDUCE_LIMIT_F64 = 2.0 ** 20


def _reduce_f64(e: Emitter, ax: Inst) -> tuple[Inst, Inst, Inst]:
    """(r, r_lo, q): |x| = q pi/2 + r + r_lo, by Cody-Waite with pi/2 in four parts; the first
    two products are exact and the first subtraction too (Sterbenz), the second's error is
    kept (TwoSum). For |x| < REDUCE_LIMIT_F64 (see the module docstring); q integral."""
    ax = e.where(e.cmp(Op.CMPLT, ax, math.inf), ax, 0.0)            # inf, NaN: any finite value
    v = e.mul(ax, 2 / math.pi)
    q = e.where(e.cmp(Op.CMPLT, v, 2.0 ** 51), e.round_int(v), v)    # larger: an integer
    a = e.sub(ax, e.mul(q, PIO2[0]))
    b, b_err = e.two_sum(a, e.neg(e.mul(q, PIO2[1])))
    w = e.mul(q, PIO2[2])
    r = e.sub(b, w)
    r_lo = e.add(e.sub(e.sub(b, r), w), e.sub(b_err, e.mul(q, PIO2[3])))
    sane = e.cmp(Op.CMPLE, e.abs(r), 1.0)         # false only for huge |x|: a result in [-1, 1]
    return e.where(sane, r, 0.0), e.where(sane, r_lo, 0.0), q


def _sincos_f64(e: Emitter, x: Inst, cos: bool) -> Inst:
    """sin or cos of r + r_lo by Taylor polynomials (|r| <= pi/4), the first-order term of
    r_lo added (sin(r + d) ~ sin r + d cos r, cos(r + d) ~ cos r - d sin r), then the quadrant."""
    ax = e.abs(x)
    r, r_lo, q = _reduce_f64(e, ax)
    z = e.mul(r, r)
    sin_r = e.add(r, e.add(e.mul(e.mul(r, z), e.poly(z, SIN_POLY_F64)), e.mul(r_lo, e.sub(1.0, e.mul(z, 0.5)))))
    hz = e.mul(z, 0.5)
    cos_r = e.sub(1.0, e.sub(hz, e.sub(e.mul(e.mul(z, z), e.poly(z, COS_POLY_F64)), e.mul(r, r_lo))))
    return sin_or_cos(e, x, ax, q, sin_r, cos_r, cos, SIN_TINY_F64)


sin_f64 = functools.partial(_sincos_f64, cos=False)
cos_f64 = functools.partial(_sincos_f64, cos=True)


FUNCTIONS: dict[Op, Callable[[Emitter, Inst], Inst]] = {Op.EXP: exp_f64, Op.LOG: log_f64, Op.TANH: tanh_f64, Op.SIN: sin_f64, Op.COS: cos_f64}
