"""Legalization steps 5 and 6 (see ug_core.legalize): guards around the semantics a renderer does
not declare it handles, and the program written in the op-set version the renderer was written for.

Both write loop IR with the math library's Emitter and keep the program's bits: a guarded or
legalized program computes exactly what the lowering's does (tests/test_opset.py runs both in the
loop IR interpreter, tests/loop_interp.py).
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import numpy as np

from . import mathlib
from .device import RenderError
from .loop_ir import INDEX, Inst, LoopProgram, Opc, ParamSpec
from .mathlib.emitter import MANTISSA_BITS, Emitter
from .opset import (ASKED_FOR, CURRENT, GUARDS, SAFE_FLOAT_TO_INT, SAFE_INT_DIVISION, SAFE_INT_POW, SAFE_SHIFTS,
                    OpSet)
from .ops import Op

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_INDEX, _BOOL = np.dtype(np.int64), np.dtype(bool)

# --- rewriting instruction by instruction -----------------------------------------------------

Expansion = Callable[[Emitter, Inst, tuple[Inst, ...]], Inst]


def _rewrite(program: LoopProgram, pick: Callable[[Inst], Expansion | None]) -> LoopProgram:
    """A copy of `program` in which each instruction that `pick` gives an expansion for is
    replaced by what the expansion emits (given the instruction and its operands' replacements);
    `program` itself where pick gives none. The copy verifies."""
    chosen = [pick(inst) for inst in program.instructions]
    if not any(chosen):
        return program
    out: list[Inst] = []
    new: dict[int, Inst] = {}
    e = Emitter(out)
    for inst, expansion in zip(program.instructions, chosen):
        srcs = tuple(new[id(s)] for s in inst.srcs)
        new[id(inst)] = expansion(e, inst, srcs) if expansion else e.emit(inst.opc, inst.dtype, srcs, inst.arg)
    out = without_unused_constants(out)
    for pos, inst in enumerate(out):
        inst.id = pos
    legal = LoopProgram(program.name, program.target, program.params, program.global_size, program.local_size, out)
    legal.verify()
    return legal


def _const(inst: Inst) -> int | float | None:
    return inst.arg if inst.opc is Opc.CONST else None


def _int_min(dt: np.dtype) -> int:
    return int(np.iinfo(dt).min)


# --- 5. guards: the semantics a renderer does not declare ---------------------------------------
#
# Each guard keeps the instruction, on operands made safe, and selects ops.py's value where they
# were not; it writes only ops of op-set version 1 (MUL / ADD as bool and / or), so it fits every
# version. An operand that is a constant the renderer can take as it is needs no guard.

def _guard_div(e: Emitter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    """x // y: 0 where y == 0, -x (wrapping) where y == -1 (INT_MIN // -1 traps in C)."""
    x, y = srcs
    zero = e.cmp(Op.CMPEQ, y, 0)
    if x.dtype.kind == "u":
        return e.where(zero, 0, e.div(x, e.where(zero, 1, y)))
    minus_one = e.cmp(Op.CMPEQ, y, -1)
    q = e.div(x, e.where(e.or_(zero, minus_one), 1, y))
    return e.where(zero, 0, e.where(minus_one, e.neg(x), q))


def _guard_recip(e: Emitter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    """numpy's reciprocal of ints: INT_MIN for 0."""
    (x,) = srcs
    zero = e.cmp(Op.CMPEQ, x, 0)
    return e.where(zero, _int_min(x.dtype), e.alu(Op.RECIP, e.where(zero, 1, x)))


def _guard_pow(e: Emitter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    """ops.power of ints: a negative exponent gives 1 / b**-n truncated (1, +-1 or 0)."""
    b, n = srcs
    negative = e.cmp(Op.CMPLT, n, 0)
    odd = e.cmp(Op.CMPNE, e.sub(n, e.mul(e.div(n, 2), 2)), 0)   # (floor division by a constant 2)
    one_over = e.where(e.cmp(Op.CMPEQ, b, 1), 1,
                       e.where(e.cmp(Op.CMPEQ, b, -1), e.where(odd, -1, 1, b.dtype), 0))
    return e.where(negative, one_over, e.alu(Op.POW, b, e.where(negative, 0, n)))


def _shift_in_range(e: Emitter, n: Inst, bits: int) -> Inst:
    below = e.cmp(Op.CMPLT, n, bits)
    return below if n.dtype.kind == "u" else e.and_(e.cmp(Op.CMPLE, 0, n), below)


def _guard_shift(e: Emitter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    """x << n is 0 and x >> n the sign (0 for uints) for a count n outside [0, bits)."""
    x, n = srcs
    bits = 8 * x.dtype.itemsize
    inside = _shift_in_range(e, n, bits)
    if inst.arg is Op.SHR and x.dtype.kind == "i":   # by bits - 1: the sign
        return e.alu(Op.SHR, x, e.where(inside, n, bits - 1))
    return e.where(inside, e.alu(inst.arg, x, e.where(inside, n, 0)), 0)


def float_to_int_parts(dst: np.dtype) -> tuple[np.dtype, int]:
    """The integer dtype a float becomes first on the way to `dst` (ops.CONVERSIONS: int32, or
    int64 for 64-bit and uint32 results), and its width."""
    wide = _INDEX if dst.itemsize == 8 or (dst.kind == "u" and dst.itemsize == 4) else np.dtype(np.int32)
    return wide, 8 * wide.itemsize


def _guard_float_to_int(e: Emitter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    """ops.CONVERSIONS' float -> int: through an int32 / int64 that NaN and values out of its
    range make its INT_MIN, then the low bits; a uint64 takes [2**63, 2**64) unsigned."""
    (x,) = srcs
    dst = inst.dtype
    if x.dtype == F16:
        x = e.cast(x, F32)   # (exact; float16_in_float32 keeps it)
    wide, bits = float_to_int_parts(dst)
    # |x| < 2**(bits - 1) converts as it is; the others (NaN too) are replaced by -2**(bits - 1),
    # which converts to INT_MIN exactly: one select, which vectorizes
    lowest = -(2.0 ** (bits - 1))
    value = e.cast(e.where(e.cmp(Op.CMPLT, e.abs(x), -lowest), x, lowest), wide)
    if dst == np.dtype(np.uint64):
        top = e.and_(e.cmp(Op.CMPLE, 2.0 ** 63, x), e.cmp(Op.CMPLT, x, 2.0 ** 64))
        return e.where(top, e.cast(e.where(top, x, 2.0 ** 63), dst), e.cast(value, dst))
    return e.cast(value, dst)


def _needs_guard(inst: Inst, capabilities: frozenset[str]) -> Expansion | None:
    opc, op = inst.opc, inst.arg
    if opc is Opc.CAST:
        if SAFE_FLOAT_TO_INT not in capabilities and inst.srcs[0].dtype.kind == "f" and inst.dtype.kind in "iu":
            return _guard_float_to_int
        return None
    if opc is not Opc.ALU or inst.srcs[0].dtype.kind not in "iu":
        return None
    last = _const(inst.srcs[-1])
    if op is Op.DIV and SAFE_INT_DIVISION not in capabilities and last in (None, 0, -1):
        return _guard_div
    if op is Op.RECIP and SAFE_INT_DIVISION not in capabilities:
        return _guard_recip
    if op is Op.POW and SAFE_INT_POW not in capabilities and inst.srcs[1].dtype.kind == "i" and \
            (last is None or last < 0):
        return _guard_pow
    if op in (Op.SHL, Op.SHR) and SAFE_SHIFTS not in capabilities and \
            (last is None or not 0 <= last < 8 * inst.srcs[0].dtype.itemsize):
        return _guard_shift
    return None


def guard(program: LoopProgram, capabilities: Iterable[str]) -> LoopProgram:
    """A copy of `program` in which every integer division, RECIP, POW, shift and float -> int
    conversion whose semantic (ug_core.opset.GUARDS) is not among `capabilities` computes
    ops.py's value on operands the renderer can take as they are (`program` itself where none)."""
    capabilities = frozenset(capabilities)
    if GUARDS <= capabilities:
        return program
    return _rewrite(program, lambda inst: _needs_guard(inst, capabilities))


# --- 6. older op-set versions -------------------------------------------------------------------
#
# Each legalization writes an op that a version lacks with ops of version 1 (index math with DIV
# by positive divisors, which need no guard), exactly: the same bits as the op (tests/test_opset.py
# runs both in the loop IR interpreter).

def _magnitude_rounded(e: Emitter, a: Inst) -> Inst:
    """|x| = a rounded to an integer, ties to even, for a below 2**mantissa: adding and
    subtracting 2**mantissa leaves the integer (the sum's ulp is 1)."""
    big = 2.0 ** _MANTISSA[a.dtype]
    return e.sub(e.add(a, big), big)


def _rounding(op: Op) -> Expansion:
    """FLOOR, CEIL, TRUNC or RINT of a float from |x| rounded: the magnitude rounded down (TRUNC,
    and FLOOR of a positive x), up (CEIL of a positive x, FLOOR of a negative one) or to even
    (RINT), then x's sign put back; zeros, infinities, NaN and |x| >= 2**mantissa are x."""
    def expand(e: Emitter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
        (x,) = srcs
        a = e.abs(x)
        r = _magnitude_rounded(e, a)
        negative = e.cmp(Op.CMPLT, x, 0.0)
        if op is Op.RINT:
            magnitude = r
        elif op is Op.TRUNC:
            magnitude = e.where(e.cmp(Op.CMPLT, a, r), e.sub(r, 1.0), r)
        else:   # away from zero where the sign says (up for FLOOR of a negative x), else toward it
            away = e.cmp(Op.CMPNE, negative, e.const(op is Op.CEIL, _BOOL))
            step = e.where(away, e.where(e.cmp(Op.CMPLT, r, a), 1.0, 0.0, a.dtype),
                           e.where(e.cmp(Op.CMPLT, a, r), -1.0, 0.0, a.dtype))
            magnitude = e.add(r, step)
        signed = e.where(negative, e.neg(magnitude), magnitude)   # (-0.0 for a negative x rounded to 0)
        small = e.and_(e.cmp(Op.CMPLT, a, 2.0 ** _MANTISSA[x.dtype]), e.cmp(Op.CMPNE, x, 0.0))
        return e.where(small, signed, x)
    return expand


def _bit(e: Emitter, x: Inst, k: int) -> Inst:
    """Bit k of x (0 or 1, two's complement): floor(x / 2**k) mod 2, by floor divisions."""
    q = e.div(x, 1 << k) if k else x
    return e.sub(q, e.mul(e.div(q, 2), 2))


def _single_bit(c: int | float | None, bits: int) -> int | None:
    """k where the constant c is 2**k, k < bits - 1; else None."""
    if isinstance(c, int) and c > 0 and c & (c - 1) == 0 and c.bit_length() < bits:
        return c.bit_length() - 1
    return None


def _bitwise(op: Op) -> Expansion:
    """AND, OR, XOR: of bools, MIN, MAX and CMPNE; of ints with a constant of one bit or a low
    mask (the math library's), arithmetic on that bit; else a loop over the bits, lowest first,
    halving both operands by floor division (arithmetic shifts) and adding each result bit times
    its place value (wrapping at the top bit)."""
    def expand(e: Emitter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
        x, y = srcs
        dt = x.dtype
        if dt == _BOOL:
            return e.emit(Opc.ALU, _BOOL, (x, y), {Op.AND: Op.MIN, Op.OR: Op.MAX, Op.XOR: Op.CMPNE}[op])
        assert dt.kind == "i", inst   # (the unsigned ints came with version 2, as these ops)
        bits = 8 * dt.itemsize
        if _const(x) is not None:
            x, y = y, x
        c = _const(y)
        k = _single_bit(c, bits)
        if k is not None:
            bit = _bit(e, x, k)
            if op is Op.AND:
                return e.mul(bit, 1 << k)
            return e.add(x, e.mul(e.sub(1, bit) if op is Op.OR else e.sub(1, e.mul(bit, 2)), 1 << k))
        if op is Op.AND and isinstance(c, int) and c > 0 and c & (c + 1) == 0 and c.bit_length() < bits:
            return e.sub(x, e.mul(e.div(x, c + 1), c + 1))   # the low bits: x mod 2**k
        accs = [e.emit(Opc.DEFINE_ACC, dt, (), v) for v in (0, 0, 0, 1)]   # x, y, result, place value
        for acc, value in zip(accs, (x, y)):
            e.emit(Opc.ACC_UPDATE, None, (acc, value), Op.ADD)
        loop = e.emit(Opc.RANGE, INDEX, (e.const(0, INDEX), e.const(bits, INDEX)), 1)
        a, b, _, place = (e.emit(Opc.ACC_READ, dt, (acc,)) for acc in accs)
        half_a, half_b = e.div(a, 2), e.div(b, 2)
        bit_a, bit_b = e.sub(a, e.mul(half_a, 2)), e.sub(b, e.mul(half_b, 2))
        both = e.mul(bit_a, bit_b)
        bit = {Op.AND: both, Op.OR: e.sub(e.add(bit_a, bit_b), both),
               Op.XOR: e.sub(e.add(bit_a, bit_b), e.mul(both, 2))}[op]
        e.emit(Opc.ACC_UPDATE, None, (accs[2], e.mul(bit, place)), Op.ADD)
        for acc, old, new in ((accs[0], a, half_a), (accs[1], b, half_b), (accs[3], place, place)):
            e.emit(Opc.ACC_UPDATE, None, (acc, e.sub(new, old) if acc is not accs[3] else new), Op.ADD)
        e.emit(Opc.ENDRANGE, None, (loop,))
        return e.emit(Opc.ACC_READ, dt, (accs[2],))
    return expand


def _invert(e: Emitter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    """~x == -x - 1 (wrapping)."""
    return e.sub(e.neg(srcs[0]), 1)


def _power_of_two(e: Emitter, n: Inst, bits: int) -> Inst:
    """2**n (wrapping at the top bit) of an int n in [0, bits), from n's bits."""
    p = e.const(1, n.dtype)
    for k in range((bits - 1).bit_length()):
        p = e.where(e.cmp(Op.CMPEQ, _bit(e, n, k), 1), e.mul(p, 1 << (1 << k)), p)
    return p


def _shift(e: Emitter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    """x << n == x * 2**n (wrapping) and x >> n == floor(x / 2**n), numpy's for other counts: 0,
    or the sign (x >> (bits - 1))."""
    x, n = srcs
    assert x.dtype.kind == "i", inst
    bits = 8 * x.dtype.itemsize
    sign = e.where(e.cmp(Op.CMPLT, x, 0), -1, 0, x.dtype)
    c = _const(n)
    if c is not None:   # (the math library's shifts: constant counts)
        c = int(c)
        if not 0 <= c < bits:
            return sign if inst.arg is Op.SHR else e.const(0, x.dtype)
        if inst.arg is Op.SHL:   # (2**(bits - 1) wraps to INT_MIN)
            return e.mul(x, (1 << c) - (1 << bits) * (c == bits - 1))
        return sign if c == bits - 1 else e.div(x, 1 << c)
    inside = _shift_in_range(e, n, bits)
    if inst.arg is Op.SHL:
        return e.where(inside, e.mul(x, _power_of_two(e, e.where(inside, n, 0), bits)), 0)
    count = e.where(inside, n, bits - 1)
    top = e.cmp(Op.CMPEQ, count, bits - 1)
    return e.where(top, sign, e.div(x, _power_of_two(e, e.where(top, 0, count), bits)))


def _gated_load(params: tuple[ParamSpec, ...], native_f16: bool) -> Expansion:
    """param[index] where the gate holds, else 0: a load at index 0 where it does not (any
    element of the buffer will do: the value is not used), selected; a zero for an empty buffer.
    float16 is selected in float32 (exactly) unless the renderer computes float16 itself."""
    def expand(e: Emitter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
        param, index, gate = srcs
        if params[param.arg].size == 0:
            return e.const(0, inst.dtype)
        value = e.emit(Opc.LOAD, inst.dtype, (param, e.where(gate, index, 0)))
        if inst.dtype == F16 and not native_f16:
            return e.cast(e.where(gate, e.cast(value, F32), 0.0), F16)
        return e.where(gate, value, 0)
    return expand


def _acc_product(e: Emitter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    """acc = acc * v with MIN and MAX, exactly: the product, then acc set to it by a MIN with the
    dtype's lowest value (-inf, INT_MIN, False) and a MAX with the product. A NaN accumulator
    stays NaN, as its products would."""
    acc, value = srcs
    dt = acc.dtype
    product = e.mul(e.emit(Opc.ACC_READ, dt, (acc,)), value)
    lowest = -math.inf if dt.kind == "f" else False if dt == _BOOL else _int_min(dt)
    e.emit(Opc.ACC_UPDATE, None, (acc, e.const(lowest, dt)), Op.MIN)
    return e.emit(Opc.ACC_UPDATE, None, (acc, product), Op.MAX)


_MANTISSA: dict[np.dtype, int] = {**MANTISSA_BITS, F16: 10}

ALU_LEGALIZATIONS: dict[Op, Expansion] = {
    **{op: _rounding(op) for op in (Op.FLOOR, Op.CEIL, Op.TRUNC, Op.RINT)},
    **{op: _bitwise(op) for op in (Op.AND, Op.OR, Op.XOR)},
    Op.INVERT: _invert, Op.SHL: _shift, Op.SHR: _shift,
    # Op.FMOD: the math library's exact fmod (mathlib.division), see to_version
}
OLDER_VERSIONS: dict[str, frozenset[object]] = {
    "alu": frozenset(ALU_LEGALIZATIONS) | {Op.FMOD},
    "opcodes": frozenset({Opc.GATED_LOAD}),
    "acc_combine": frozenset({Op.MUL}),
}
"""What each op a later version added becomes in an earlier one, by kind of op: the ALU ops
(ALU_LEGALIZATIONS, and FMOD by the math library), the opcodes and the accumulators' combine ops
(`to_version`). tests/test_opset.py checks that it covers every version's additions."""


def _outside(inst: Inst, ops: OpSet) -> str | None:
    """What of `inst` op-set `ops` lacks (None: nothing)."""
    if inst.opc not in ops.opcodes:
        return f"opcode {inst.opc.name}"
    if inst.opc is Opc.ALU and inst.arg not in ops.alu:
        return f"ALU op {inst.arg.name}"
    if inst.opc is Opc.ACC_UPDATE and inst.arg not in ops.acc_combine:
        return f"accumulators combining with {inst.arg.name}"
    for dt in (inst.dtype, *(s.dtype for s in inst.srcs)):
        if dt is not None and dt not in ops.dtypes:
            return f"{dt} values"
    return None


def _legalization(inst: Inst, ops: OpSet, gated_load: Expansion) -> Expansion | None:
    if inst.opc is Opc.ALU and inst.arg not in ops.alu:
        return ALU_LEGALIZATIONS.get(inst.arg)
    if inst.opc is Opc.GATED_LOAD and inst.opc not in ops.opcodes:
        return gated_load
    if inst.opc is Opc.ACC_UPDATE and inst.arg not in ops.acc_combine and inst.arg is Op.MUL:
        return _acc_product
    return None


def to_version(program: LoopProgram, ops: OpSet, native_f16: bool = False) -> LoopProgram:
    """`program` in op-set version `ops` (ug_core.opset): every instruction of a later version
    written with this one's (OLDER_VERSIONS); a RenderError naming the first instruction that
    cannot be (an atomic, which a device of an older version must not ask for; a dtype the
    version lacks). `program` itself for the current version."""
    if ops.version == CURRENT:
        return program
    if Op.FMOD not in ops.alu and any(i.opc is Opc.ALU and i.arg is Op.FMOD for i in program.instructions):
        program = mathlib.expand(program, frozenset((Op.FMOD, dt) for dt in (F16, F32, F64)))
    gated_load = _gated_load(program.params, native_f16)
    program = _rewrite(program, lambda inst: _legalization(inst, ops, gated_load))
    for param in program.params:
        if param.dtype not in ops.dtypes:
            raise RenderError(f"{program.name}: a {param.dtype} buffer, which op-set version {ops.version} has no "
                              f"dtype for (the device cannot hold {param.dtype})")
    for inst in program.instructions:
        lacking = _outside(inst, ops)
        if lacking is not None:
            asked = f" (only a device whose {ASKED_FOR[inst.opc]} asks for it gets it)" if inst.opc in ASKED_FOR else ""
            raise RenderError(f"{program.name}: op-set version {ops.version} has no {lacking}{asked}; instruction "
                              f"%{inst.id} {inst.opc.name}")
    return program


def without_unused_constants(instructions: list[Inst]) -> list[Inst]:
    """The instructions but the constants nothing uses (rewrites leave the old operands' behind)."""
    used = {id(s) for inst in instructions for s in inst.srcs}
    return [inst for inst in instructions if inst.opc is not Opc.CONST or id(inst) in used]
