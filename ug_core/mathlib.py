"""The core's math library: exp, log, tanh, sin and cos as loop IR arithmetic.

A backend whose target has no accurate transcendental functions (Vulkan: GLSL.std.450's are
loosely specified, and lavapipe's log is 2e5 ulp off near 1, its tanh 1.3 % off at 1e-6, its
sin of 1e29 is 1.0) legalizes a loop program before rendering it:

    program = mathlib.expand(program, mathlib.targets(float64=caps.float64))

Every ALU instruction of a listed (op, dtype) is replaced in place by straight-line loop IR
(range reduction, a polynomial, special cases by WHERE), so the renderer only sees + - * /,
comparisons, casts and BITCAST. The algorithms are written once, here, for every backend that
asks for them; float16 is computed in float32 and rounded once, as numpy does.

float32, measured by tests/test_ulp.py over a sweep incl. subnormal, tiny, huge and special
inputs: exp, log, tanh (Cephes' minimax polynomials, float32 arithmetic) within 1.3 ulp; sin and
cos within 1.5 ulp: Cephes' float32 polynomials after an argument reduction in float64 (so they
need a target with float64): Cody-Waite with a three-part pi/2 for |x| < 2**19, and above that
(only where a lane needs it: an IF) an exact reduction with 192 bits of 2/pi, whose eight 24-bit
pieces make exact float64 products with the float32 argument, summed modulo 4 with TwoSum.
Without float64, `targets` leaves sin and cos to the target.

Everything here needs exact IEEE arithmetic: no contraction of a*b+c into an fma that the
code did not ask for, no reassociation ((t + 1.5*2**23) - 1.5*2**23 rounds t to an integer).
The backends render loop IR that way already (numpy semantics).
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import numpy as np

from .loop_ir import BOOL, INDEX, Inst, LoopProgram, Opc
from .ops import Op

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32 = np.dtype(np.int32)

EXPANDED_OPS = frozenset({Op.EXP, Op.LOG, Op.TANH, Op.SIN, Op.COS})
NEEDS_FLOAT64 = frozenset({Op.SIN, Op.COS})  # evaluated in float64 (see the module docstring)


def targets(float64: bool, dtypes: Iterable[np.dtype] = (F32, F16)) -> frozenset[tuple[Op, np.dtype]]:
    """The (op, dtype) pairs this library can expand on a target with (or without) float64."""
    ops = EXPANDED_OPS if float64 else EXPANDED_OPS - NEEDS_FLOAT64
    return frozenset((op, np.dtype(dt)) for op in ops for dt in dtypes)


def expand(program: LoopProgram, which: frozenset[tuple[Op, np.dtype]]) -> LoopProgram:
    """A copy of `program` in which every ALU instruction of a pair in `which` is computed by
    this library instead. The instructions are new objects (the input is left as it was)."""
    if not any(i.opc is Opc.ALU and (i.arg, i.dtype) in which for i in program.instructions):
        return program
    for op, dt in which:
        if op not in EXPANDED_OPS or dt not in (F32, F16):
            raise ValueError(f"ug_core.mathlib cannot expand {op.name} on {dt}")
    out: list[Inst] = []
    new: dict[int, Inst] = {}   # id(old instruction) -> its replacement
    e = _Emitter(out)
    for inst in program.instructions:
        srcs = tuple(new[id(s)] for s in inst.srcs)
        if inst.opc is Opc.ALU and (inst.arg, inst.dtype) in which:
            x = srcs[0]
            if inst.dtype == F16:
                result = e.cast(_FUNCTIONS[inst.arg](e, e.cast(x, F32)), F16)
            else:
                result = _FUNCTIONS[inst.arg](e, x)
        else:
            result = e.emit(inst.opc, inst.dtype, srcs, inst.arg)
        new[id(inst)] = result
    for pos, inst in enumerate(out):
        inst.id = pos
    expanded = LoopProgram(program.name, program.target, program.params, program.global_size,
                           program.local_size, out)
    expanded.verify()
    return expanded


Operand = Inst | float | int   # an instruction, or a constant of the other operand's dtype


class _Emitter:
    """Appends instructions to a list. Constants are not shared between uses: a constant made
    inside sin's IF block would not be visible after it (renderers share them anyway)."""

    def __init__(self, out: list[Inst]):
        self.out = out

    def emit(self, opc: Opc, dtype: np.dtype | None, srcs: tuple[Inst, ...] = (), arg: object = None) -> Inst:
        inst = Inst(opc, dtype, srcs, arg)
        self.out.append(inst)
        return inst

    def const(self, value: float | int, dtype: np.dtype) -> Inst:
        return self.emit(Opc.CONST, dtype, (), dtype.type(value).item())

    def _operand(self, v: Operand, dtype: np.dtype) -> Inst:
        return v if isinstance(v, Inst) else self.const(v, dtype)

    def alu(self, op: Op, *srcs: Operand) -> Inst:
        dtype = next(s.dtype for s in srcs if isinstance(s, Inst))
        args = tuple(self._operand(s, dtype) for s in srcs)
        return self.emit(Opc.ALU, dtype, args, op)

    def add(self, a: Operand, b: Operand) -> Inst: return self.alu(Op.ADD, a, b)
    def sub(self, a: Operand, b: Operand) -> Inst: return self.alu(Op.SUB, a, b)
    def mul(self, a: Operand, b: Operand) -> Inst: return self.alu(Op.MUL, a, b)
    def div(self, a: Operand, b: Operand) -> Inst: return self.alu(Op.DIV, a, b)
    def neg(self, a: Inst) -> Inst: return self.alu(Op.NEG, a)
    def abs(self, a: Inst) -> Inst: return self.alu(Op.ABS, a)

    def cmp(self, op: Op, a: Operand, b: Operand) -> Inst:
        dtype = a.dtype if isinstance(a, Inst) else b.dtype  # type: ignore[union-attr]
        return self.emit(Opc.ALU, BOOL, (self._operand(a, dtype), self._operand(b, dtype)), op)

    def where(self, cond: Inst, a: Operand, b: Operand) -> Inst:
        dtype = a.dtype if isinstance(a, Inst) else b.dtype  # type: ignore[union-attr]
        return self.emit(Opc.ALU, dtype, (cond, self._operand(a, dtype), self._operand(b, dtype)), Op.WHERE)

    def cast(self, x: Inst, dtype: np.dtype) -> Inst:
        return x if x.dtype == dtype else self.emit(Opc.CAST, dtype, (x,))

    def bitcast(self, x: Inst, dtype: np.dtype) -> Inst:
        return self.emit(Opc.BITCAST, dtype, (x,))

    def idiv(self, x: Inst, divisor: int) -> Inst:  # loop IR: non-negative x, positive constant
        return self.emit(Opc.IDIV, INDEX, (x, self.const(divisor, INDEX)))

    def mod(self, x: Inst, divisor: int) -> Inst:
        return self.emit(Opc.MOD, INDEX, (x, self.const(divisor, INDEX)))

    def poly(self, x: Inst, coeffs: list[float]) -> Inst:
        """Horner: coeffs[0] * x**n + ... + coeffs[n]."""
        acc: Inst = self.const(coeffs[0], x.dtype)
        for c in coeffs[1:]:
            acc = self.add(self.mul(acc, x), c)
        return acc

    def round_int(self, x: Inst) -> Inst:
        """x rounded to the nearest integer (ties to even), for |x| below 2**(mantissa bits - 1):
        adding and subtracting 1.5 * 2**mantissa leaves only the integer part."""
        magic = 1.5 * 2.0 ** (23 if x.dtype == F32 else 52)
        return self.sub(self.add(x, magic), magic)


# --- exp ------------------------------------------------------------------------------------

_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4   # ln 2 = hi + lo; n * hi is exact for |n| < 2**15
_EXP_POLY = [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
             5.0000001201e-1]


def _pow2(e: _Emitter, n: Inst) -> Inst:
    """2**n as float32 for an integral float32 n in [-126, 127], from its bit pattern."""
    biased = e.add(e.cast(n, I32), 127)
    return e.bitcast(e.mul(biased, 1 << 23), F32)


def exp_f32(e: _Emitter, x: Inst) -> Inst:
    """exp(x) = 2**n * exp(r), r = x - n ln 2 in [-ln2/2, ln2/2] (Cephes expf, ~1 ulp)."""
    xc = e.alu(Op.MIN, e.alu(Op.MAX, x, -104.0), 89.0)   # beyond: 0 or inf either way; NaN stays
    n = e.round_int(e.mul(xc, 1.44269504088896341))
    r = e.sub(e.sub(xc, e.mul(n, _LN2_HI)), e.mul(n, _LN2_LO))
    p = e.poly(r, _EXP_POLY)
    y = e.add(e.add(e.mul(p, e.mul(r, r)), r), 1.0)
    # 2**n in two factors, each a normal number for n in [-151, 128]: results that are
    # subnormal are rounded once, by the last multiply
    n1 = e.round_int(e.mul(n, 0.5))
    n2 = e.sub(n, n1)
    y = e.mul(e.mul(y, _pow2(e, n1)), _pow2(e, n2))
    return e.where(e.cmp(Op.CMPNE, x, x), x, y)


# --- log ------------------------------------------------------------------------------------

_LOG_POLY = [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
             -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1]


def log_f32(e: _Emitter, x: Inst) -> Inst:
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
    y = e.mul(e.mul(e.poly(m, _LOG_POLY), m), z)
    y = e.add(y, e.mul(fk, _LN2_LO))
    y = e.add(y, e.mul(z, -0.5))
    r = e.add(e.add(m, y), e.mul(fk, _LN2_HI))
    r = e.where(e.cmp(Op.CMPEQ, x, math.inf), x, r)
    r = e.where(e.cmp(Op.CMPEQ, x, 0.0), -math.inf, r)
    r = e.where(e.cmp(Op.CMPLT, x, 0.0), math.nan, r)               # -inf too
    return e.where(e.cmp(Op.CMPNE, x, x), x, r)


# --- tanh -----------------------------------------------------------------------------------

_TANH_TINY = 2.0 ** -12   # tanh(x) rounds to x below (x - x**3/3: relative x*x/3 < 2**-25)
_TANH_POLY = [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1]


def tanh_f32(e: _Emitter, x: Inst) -> Inst:
    """|x| < 0.625: x + x z P(z), z = x*x (Cephes tanhf); else 1 - 2 / (exp(2|x|) + 1)."""
    a = e.abs(x)
    big = e.sub(1.0, e.div(2.0, e.add(exp_f32(e, e.add(a, a)), 1.0)))
    big = e.where(e.cmp(Op.CMPLT, x, 0.0), e.neg(big), big)
    z = e.mul(x, x)
    small = e.add(e.mul(e.mul(e.poly(z, _TANH_POLY), z), x), x)
    small = e.where(e.cmp(Op.CMPLT, a, _TANH_TINY), x, small)      # -0 (-0 + +0 is +0), subnormals
    return e.where(e.cmp(Op.CMPLE, 0.625, a), big, small)           # NaN: small, which is NaN


# --- sin / cos ------------------------------------------------------------------------------

# pi/2 in three parts; n * part is exact in float64 for the first two while n < 2**20
_PIO2 = (1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624871116645580e-21)
_SIN_POLY = [-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1]   # sin r = r + r**3 P(r*r)
_COS_POLY = [2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2]  # 1 - r*r/2 + r**4 Q
_FAST_LIMIT = 2.0 ** 19                # |x| below: Cody-Waite; at or above: exact reduction
_SIN_TINY = 2.0 ** -12                 # sin(x) rounds to x below (and keeps -0, subnormals)


def _two_over_pi_pieces(count: int = 8, bits: int = 24) -> list[float]:
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


_TWO_OVER_PI = _two_over_pi_pieces()


def _mod4(e: _Emitter, v: Inst) -> Inst:
    """v - 4 * round(v / 4), exactly, for any finite float64 v (in [-2, 2])."""
    q = e.mul(v, 0.25)
    k = e.where(e.cmp(Op.CMPLT, e.abs(q), 2.0 ** 51), e.round_int(q), q)   # larger: an integer
    return e.sub(v, e.mul(k, 4.0))


def _reduce_exact(e: _Emitter, ad: Inst) -> tuple[Inst, Inst]:
    """(r, q) with ad * 2/pi = q + r / (pi/2) modulo 4, |r| <= pi/4 (about), q an integral
    float64 in [-2, 2]; for
    a float64 holding a finite float32 ad >= 0. Each product ad * piece is exact, and exact
    modulo 4; their sum is kept as hi + lo (TwoSum), hi reduced modulo 4 after each step."""
    hi: Inst = e.const(0.0, F64)
    lo: Inst = e.const(0.0, F64)
    for piece in _TWO_OVER_PI:
        t = _mod4(e, e.mul(ad, piece))
        s = e.add(hi, t)
        bb = e.sub(s, hi)
        lo = e.add(lo, e.add(e.sub(hi, e.sub(s, bb)), e.sub(t, bb)))
        hi = _mod4(e, s)
    q = e.round_int(hi)
    frac = e.add(e.sub(hi, q), lo)
    return e.mul(frac, math.pi / 2), q


def _sincos_f32(e: _Emitter, x: Inst, cos: bool) -> Inst:
    """sin or cos of a float32: |x| = q pi/2 + r reduced in float64, then sin or cos of r (|r| <=
    pi/4) by float32 polynomials, and the quadrant q mod 4."""
    ax = e.abs(x)
    ad = e.cast(ax, F64)
    fast = e.cmp(Op.CMPLT, ad, _FAST_LIMIT)                         # false for inf and NaN
    af = e.where(fast, ad, 0.0)
    nf = e.round_int(e.mul(af, 2 / math.pi))
    r = e.sub(e.sub(e.sub(af, e.mul(nf, _PIO2[0])), e.mul(nf, _PIO2[1])), e.mul(nf, _PIO2[2]))
    q = nf
    # the exact reduction only where a lane needs it; its results leave the IF through two
    # accumulators (a value defined in a block is visible in that block only)
    slow = e.cmp(Op.CMPLE, _FAST_LIMIT, ad)
    acc_r = e.emit(Opc.DEFINE_ACC, F64, (), 0.0)
    acc_q = e.emit(Opc.DEFINE_ACC, F64, (), 0.0)
    opener = e.emit(Opc.IF, None, (slow,))
    r_big, q_big = _reduce_exact(e, e.where(e.cmp(Op.CMPLT, ad, math.inf), ad, 0.0))
    e.emit(Opc.ACC_UPDATE, None, (acc_r, r_big), Op.ADD)
    e.emit(Opc.ACC_UPDATE, None, (acc_q, q_big), Op.ADD)
    e.emit(Opc.ENDIF, None, (opener,))
    r = e.where(slow, e.emit(Opc.ACC_READ, F64, (acc_r,)), r)
    q = e.where(slow, e.emit(Opc.ACC_READ, F64, (acc_q,)), q)
    # r is exact to ~2**-60 (absolutely); rounded to float32, the polynomials (Cephes sinf and
    # cosf, float32 arithmetic: float64 is slow on most GPUs) add at most ~1.5 ulp
    rf = e.cast(r, F32)
    r2 = e.mul(rf, rf)
    sin_r = e.add(e.mul(e.mul(e.poly(r2, _SIN_POLY), r2), rf), rf)
    cos_r = e.add(e.sub(e.mul(e.mul(e.poly(r2, _COS_POLY), r2), r2), e.mul(r2, 0.5)), 1.0)
    # the quadrant q mod 4 in float64 arithmetic (int64 vector math is slow on many targets)
    quadrant = _mod4(e, e.add(q, 1.0) if cos else q)                # cos(y) = sin(y + pi/2); in [-2, 2]
    quadrant = e.where(e.cmp(Op.CMPLT, quadrant, 0.0), e.add(quadrant, 4.0), quadrant)   # 0, 1, 2, 3
    odd = e.cmp(Op.CMPEQ, e.abs(e.sub(quadrant, 2.0)), 1.0)          # 1 or 3: cos
    v = e.where(odd, cos_r, sin_r)
    out = e.where(e.cmp(Op.CMPLE, 2.0, quadrant), e.neg(v), v)       # 2 or 3: negated
    if not cos:  # odd: sin(x) = sign(x) sin(|x|); and x itself where that is the rounded result
        out = e.where(e.cmp(Op.CMPLT, x, 0.0), e.neg(out), out)
        out = e.where(e.cmp(Op.CMPLT, ax, _SIN_TINY), x, out)
    return e.where(e.cmp(Op.CMPLT, ax, math.inf), out, e.sub(x, x))   # inf, NaN -> NaN


def sin_f32(e: _Emitter, x: Inst) -> Inst:
    return _sincos_f32(e, x, cos=False)


def cos_f32(e: _Emitter, x: Inst) -> Inst:
    return _sincos_f32(e, x, cos=True)


_FUNCTIONS: dict[Op, Callable[[_Emitter, Inst], Inst]] = {
    Op.EXP: exp_f32, Op.LOG: log_f32, Op.TANH: tanh_f32, Op.SIN: sin_f32, Op.COS: cos_f32,
}
assert set(_FUNCTIONS) == EXPANDED_OPS
