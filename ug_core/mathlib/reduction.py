"""Argument reduction for sin and cos: x = q pi/2 + r, |r| <= pi/4 (about), shared by the
float32 and float64 functions.

* Cody-Waite: r = x - q P1 - q P2 - q P3 with pi/2 = P1 + P2 + P3 + P4 split so that q * P1 and
  q * P2 are exact in float64 for q < 2**20 (each part has 33 significant bits).
* exact (float32 arguments of any size): 2/pi in 24-bit pieces, so a float32 (24 bits) times
  a piece is exact in float64; the products are summed modulo 4.
"""

from __future__ import annotations

import math

from ..loop_ir import Inst
from ..ops import Op
from .emitter import F64, Emitter

# pi/2 in four parts; n * part is exact in float64 for the first three while n < 2**20
PIO2 = (1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624871116645580e-21,
        8.47842766036889956997e-32)
CODY_WAITE_LIMIT = 2.0 ** 19        # |x| below: q < 2**19, the products above are exact


def two_over_pi_pieces(count: int = 8, bits: int = 24) -> list[float]:
    """2/pi as `count` floats of `bits` bits each: piece i is (bits i*24+1 .. i*24+24 of 2/pi)
    * 2**-(24 (i+1)), so a float32 (24 bits) times a piece is exact in float64."""

    def arctan_inv(x: int, one: int) -> int:
        s, t, n, sign = 0, one // x, 1, 1
        while t:
            s += sign * (t // n)
            t //= x * x
            n += 2
            sign = -sign
        return s

    prec = count * bits + 64
    one = 1 << prec
    pi = 4 * (4 * arctan_inv(5, one) - arctan_inv(239, one))       # pi * 2**prec (Machin)
    frac = (2 << (2 * prec)) // pi >> (prec - count * bits)         # floor(2/pi * 2**(count*bits))
    mask = (1 << bits) - 1
    return [math.ldexp((frac >> (bits * (count - 1 - i))) & mask, -bits * (i + 1)) for i in range(count)]


TWO_OVER_PI = two_over_pi_pieces()


def mod4(e: Emitter, v: Inst) -> Inst:
    """v - 4 * round(v / 4), exactly, for any finite float64 v (in [-2, 2])."""
    q = e.mul(v, 0.25)
    k = e.where(e.cmp(Op.CMPLT, e.abs(q), 2.0 ** 51), e.round_int(q), q)   # larger: an integer
    return e.sub(v, e.mul(k, 4.0))


def reduce_exact(e: Emitter, ad: Inst) -> tuple[Inst, Inst]:
    """(r, q) with ad * 2/pi = q + r / (pi/2) modulo 4, |r| <= pi/4 (about), q an integral
    float64 in [-2, 2]; for a float64 holding a finite float32 ad >= 0. Each product ad * piece
    is exact, and exact modulo 4; their sum is kept as hi + lo (TwoSum), hi reduced modulo 4
    after each step."""
    hi: Inst = e.const(0.0, F64)
    lo: Inst = e.const(0.0, F64)
    for piece in TWO_OVER_PI:
        s, err = e.two_sum(hi, mod4(e, e.mul(ad, piece)))
        lo = e.add(lo, err)
        hi = mod4(e, s)
    q = e.round_int(hi)
    frac = e.add(e.sub(hi, q), lo)
    return e.mul(frac, math.pi / 2), q


def by_quadrant(e: Emitter, q: Inst, sin_r: Inst, cos_r: Inst, cos: bool) -> Inst:
    """sin (or cos) of q pi/2 + r from sin r and cos r, q an integral float64 (any size: the
    quadrant is q mod 4 in float64 arithmetic, as int64 vector math is slow on many targets)."""
    quadrant = mod4(e, e.add(q, 1.0) if cos else q)                 # cos(y) = sin(y + pi/2); in [-2, 2]
    quadrant = e.where(e.cmp(Op.CMPLT, quadrant, 0.0), e.add(quadrant, 4.0), quadrant)   # 0, 1, 2, 3
    odd = e.cmp(Op.CMPEQ, e.abs(e.sub(quadrant, 2.0)), 1.0)          # 1 or 3: cos
    v = e.where(odd, cos_r, sin_r)
    return e.where(e.cmp(Op.CMPLE, 2.0, quadrant), e.neg(v), v)      # 2 or 3: negated


def sin_or_cos(e: Emitter, x: Inst, ax: Inst, q: Inst, sin_r: Inst, cos_r: Inst, cos: bool, tiny: float) -> Inst:
    """sin x or cos x (ax = |x|) from sin r and cos r of the reduced argument in quadrant q. sin is
    odd, and x itself where that is the rounded result (-0, subnormals: |x| < tiny); inf and NaN
    give NaN."""
    out = by_quadrant(e, q, sin_r, cos_r, cos)
    if not cos:
        out = e.where(e.cmp(Op.CMPLT, x, 0.0), e.neg(out), out)
        out = e.where(e.cmp(Op.CMPLT, ax, tiny), x, out)
    return e.where(e.cmp(Op.CMPLT, ax, math.inf), out, e.sub(x, x))
