"""The instruction builder the math library's functions write loop IR with, and the exact
arithmetic helpers (error-free transformations) they share.

Everything here needs exact IEEE arithmetic: no contraction of a*b+c into an fma that the code
did not ask for, no reassociation ((t + 1.5*2**23) - 1.5*2**23 rounds t to an integer). The
backends render loop IR that way already (numpy semantics)."""

from __future__ import annotations

import numpy as np

from ..loop_ir import BOOL, INDEX, Inst, Opc
from ..ops import Op

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64 = np.dtype(np.int32), np.dtype(np.int64)

MANTISSA_BITS: dict[np.dtype, int] = {F32: 23, F64: 52}   # stored bits of the significand
EXPONENT_BIAS: dict[np.dtype, int] = {F32: 127, F64: 1023}
INT_OF: dict[np.dtype, np.dtype] = {F32: I32, F64: I64}       # the integer dtype of a float's width (its bits)

Operand = Inst | float | int   # an instruction, or a constant of the other operand's dtype


class Emitter:
    """Appends instructions to a list. Constants are not shared between uses: a constant made
    inside sin's IF block would not be visible after it (renderers share them anyway)."""

    def __init__(self, out: list[Inst]):
        self.out = out

    def emit(self, opc: Opc, dtype: np.dtype | None, srcs: tuple[Inst, ...] = (), arg: object = None) -> Inst:
        inst = Inst(opc, dtype, srcs, arg)
        self.out.append(inst)
        return inst

    def const(self, value: float | int | bool, dtype: np.dtype) -> Inst:
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

    def clamp(self, x: Inst, lo: float, hi: float) -> Inst:
        """x limited to [lo, hi]; NaN stays NaN (MIN / MAX propagate it)."""
        return self.alu(Op.MIN, self.alu(Op.MAX, x, lo), hi)

    def cmp(self, op: Op, a: Operand, b: Operand) -> Inst:
        dtype = a.dtype if isinstance(a, Inst) else b.dtype  # type: ignore[union-attr]
        return self.emit(Opc.ALU, BOOL, (self._operand(a, dtype), self._operand(b, dtype)), op)

    # bools: MUL is and, ADD is or (ops.py)
    def and_(self, a: Inst, b: Inst) -> Inst: return self.emit(Opc.ALU, BOOL, (a, b), Op.MUL)
    def or_(self, a: Inst, b: Inst) -> Inst: return self.emit(Opc.ALU, BOOL, (a, b), Op.ADD)
    def not_(self, a: Inst) -> Inst: return self.emit(Opc.ALU, BOOL, (a,), Op.NOT)
    def is_nan(self, x: Inst) -> Inst: return self.cmp(Op.CMPNE, x, x)

    def where(self, cond: Inst, a: Operand, b: Operand, dtype: np.dtype | None = None) -> Inst:
        """cond ? a : b; `dtype` only where both are constants."""
        if dtype is None:
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
        magic = 1.5 * 2.0 ** MANTISSA_BITS[x.dtype]
        return self.sub(self.add(x, magic), magic)

    def is_integer(self, x: Inst) -> Inst:
        """Whether x is an integer (+-inf are; NaN is not): |x| >= 2**mantissa always is, and
        below, |x| + 2**mantissa - 2**mantissa is |x| rounded to an integer."""
        big = 2.0 ** MANTISSA_BITS[x.dtype]
        a = self.abs(x)
        return self.or_(self.cmp(Op.CMPLE, big, a), self.cmp(Op.CMPEQ, self.sub(self.add(a, big), big), a))

    def pow2(self, n: Inst) -> Inst:
        """2**n in n's float dtype, for an integral n in the normal exponent range, from its
        bit pattern: (n + bias) << mantissa bits."""
        dt = n.dtype
        it = INT_OF[dt]
        biased = self.add(self.cast(n, it), EXPONENT_BIAS[dt])
        return self.bitcast(self.mul(biased, 1 << MANTISSA_BITS[dt]), dt)

    # --- error-free transformations: a result and its exact rounding error -------------------

    def fast_two_sum(self, a: Inst, b: Operand) -> tuple[Inst, Inst]:
        """(s, err), s + err == a + b exactly, s = fl(a + b); needs |a| >= |b| (or a == 0)."""
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))

    def two_sum(self, a: Inst, b: Inst) -> tuple[Inst, Inst]:
        """(s, err), s + err == a + b exactly, for any a, b (Knuth's TwoSum)."""
        s = self.add(a, b)
        bb = self.sub(s, a)
        return s, self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))

    def split(self, a: Inst) -> tuple[Inst, Inst]:
        """(hi, lo), a == hi + lo, each with at most 26 significant bits (Veltkamp), so products
        of halves are exact; |a| < 2**995 (the scaling must not overflow)."""
        c = self.mul(a, float(2 ** 27 + 1))
        hi = self.sub(c, self.sub(c, a))
        return hi, self.sub(a, hi)

    def two_prod(self, a: Inst, b: Inst) -> tuple[Inst, Inst]:
        """(p, err), p + err == a * b exactly, p = fl(a * b), without an fma (Dekker), where
        no partial product under- or overflows."""
        p = self.mul(a, b)
        ah, al = self.split(a)
        bh, bl = self.split(b)
        err = self.add(self.add(self.add(self.sub(self.mul(ah, bh), p), self.mul(ah, bl)), self.mul(al, bh)),
                       self.mul(al, bl))
        return p, err
