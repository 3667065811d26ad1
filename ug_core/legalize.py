"""Legalization: the loop program a device's renderer really gets.

`ug_core.lower` writes loop IR in numpy's terms: any ALU op on any dtype. Before a kit device
renders a program (`KitDevice.lower`), this pass rewrites it into what every renderer can spell
as a plain table, so the rules below live here once instead of in each backend:

1. Every (op, dtype kind) pair is one `ug_core.ops` defines (`ops.defined`); anything else, such
   as a NEG of bools, which the frontend never builds, is a RenderError (a CompileError naming
   the program), the same on every device.
2. float16 arithmetic is done in float32 and rounded once per op, numpy's rule, unless the
   device claims NATIVE_F16 (its renderer computes float16 ops with that same rounding).
   Afterwards float16 appears only in loads, stores, local memory and casts to and from
   float32 (and from float64: correctly rounded, which float64 -> float32 -> float16 is not).
3. numpy's floor_divide and remainder, signbit and nextafter (`mathlib.EXACT_OPS`) are
   expanded by the core's math library on every device, before float16 is widened (float16's
   nextafter steps are float16's; the others compute float16 in float32 themselves), and so
   is atan2 (`mathlib.FUNCTIONS`: float arithmetic, as accurate as libm's and vectorizable).
   What is left for a renderer to spell, per operand kind, is `rendered(kind)`.
4. exp, log, tanh, sin, cos and pow are expanded by the core's math library (`ug_core.mathlib`)
   unless the device claims NATIVE_MATH (its own functions meet the ulp bounds tests/test_ulp
   checks). float16 and float32 sin and cos need float64 for their argument reduction (without
   it they stay the target's), and float64 functions need int64 for their bit manipulation
   (without it they stay the target's, which for most GPUs means a RenderError naming them).

A legalized program is a new program (the lowering's is left as it was) and verifies.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from . import mathlib
from .device import RenderError
from .loop_ir import CLOSES, OPENS, Inst, LoopProgram, Opc
from .ops import COMPLEX_KIND, Op, check_exhaustive, defined, defined_on

COMPLEX_OPS = frozenset({Op.REAL, Op.IMAG, Op.COMPLEX})

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)

NATIVE_F16 = "native_f16"
"""Capability: the renderer computes float16 ALU ops itself, rounding each result once."""
NATIVE_MATH = "native_math"
"""Capability: the target's exp/log/tanh/sin/cos are accurate to a few ulp (libm, CUDA's)."""
CAPABILITIES = frozenset({NATIVE_F16, NATIVE_MATH})


def legalize(program: LoopProgram, capabilities: Iterable[str], dtypes: Iterable[np.dtype]) -> LoopProgram:
    """`program` as the renderer of a device with these capabilities and dtypes gets it."""
    capabilities = frozenset(capabilities)
    unknown = capabilities - CAPABILITIES
    if unknown:
        raise ValueError(f"unknown capabilities {sorted(unknown)} (known: {sorted(CAPABILITIES)})")
    check_defined(program)
    have = {np.dtype(d) for d in dtypes}
    program = mathlib.expand_exact(program, int64=np.dtype(np.int64) in have)
    program = mathlib.expand_functions(program)
    if NATIVE_F16 not in capabilities:
        program = float16_in_float32(program)
    if NATIVE_MATH not in capabilities:
        program = mathlib.expand(program, mathlib.targets(float64=F64 in have, int64=np.dtype(np.int64) in have))
    return program


def rendered(operand_kind: str) -> frozenset[Op]:
    """The ALU ops a renderer spells on operands of this dtype kind (one of ops.OPERAND_KINDS):
    those ug_core.ops defines on it, but the ones every program has expanded; none on complex
    operands, and no REAL / IMAG / COMPLEX (split_complex leaves no complex value)."""
    if operand_kind == COMPLEX_KIND:
        return frozenset()
    return defined_on(operand_kind) - set(mathlib.EXACT_OPS) - set(mathlib.FUNCTIONS) - COMPLEX_OPS


def check_defined(program: LoopProgram) -> None:
    for inst in program.instructions:
        if inst.opc is Opc.ALU:
            operand = inst.srcs[1].dtype if inst.arg is Op.WHERE else inst.srcs[0].dtype
            if not defined(inst.arg, operand):
                raise RenderError(f"{inst.arg.name} on {operand} is not defined (ug_core.ops); "
                                    f"instruction %{inst.id} of {program.name}")


# --- float16 in float32 ---------------------------------------------------------------------


class _Rewriter:
    """Copies instructions into a new list, keeping each value's float32 copy (a CAST made at
    its first use) visible only in the block where it was made."""

    def __init__(self) -> None:
        self.out: list[Inst] = []
        self.new: dict[int, Inst] = {}            # id(old instruction) -> its replacement
        self.wide: list[dict[int, Inst]] = [{}]   # per open block: id(f16 value) -> float32 copy

    def emit(self, opc: Opc, dtype: np.dtype | None, srcs: tuple[Inst, ...] = (), arg: object = None) -> Inst:
        inst = Inst(opc, dtype, srcs, arg)
        self.out.append(inst)
        return inst

    def widened(self, x: Inst) -> Inst:
        """x (a new instruction) as float32 if it is float16."""
        if x.dtype != F16:
            return x
        for block in reversed(self.wide):
            if id(x) in block:
                return block[id(x)]
        if x.opc is Opc.CONST:
            copy = self.emit(Opc.CONST, F32, (), x.arg)   # every float16 is a float32
        else:
            copy = self.emit(Opc.CAST, F32, (x,))
        self.wide[-1][id(x)] = copy
        return copy

    def narrowed(self, x: Inst, dtype: np.dtype) -> Inst:
        return self.emit(Opc.CAST, F16, (x,)) if dtype == F16 and x.dtype != F16 else x


def float16_in_float32(program: LoopProgram) -> LoopProgram:
    """A copy of `program` whose float16 ALU ops, casts and accumulators compute in float32."""
    if not any(inst.dtype == F16 for inst in program.instructions):
        return program
    r = _Rewriter()
    for inst in program.instructions:
        srcs = tuple(r.new[id(s)] for s in inst.srcs)
        r.new[id(inst)] = _REWRITE[inst.opc](r, inst, srcs) if _touches_f16(inst) else r.emit(inst.opc, inst.dtype, srcs, inst.arg)
        if inst.opc in OPENS:
            r.wide.append({})
        elif inst.opc in CLOSES:
            r.wide.pop()
    out = _without_unused_constants(r.out)
    for pos, inst in enumerate(out):
        inst.id = pos
    legal = LoopProgram(program.name, program.target, program.params, program.global_size, program.local_size, out)
    legal.verify()
    return legal


def _touches_f16(inst: Inst) -> bool:
    return inst.dtype == F16 or any(s.dtype == F16 for s in inst.srcs)


def _alu(r: _Rewriter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    value = r.emit(Opc.ALU, F32 if inst.dtype == F16 else inst.dtype, tuple(r.widened(s) for s in srcs), inst.arg)
    return r.narrowed(value, inst.dtype)


def _cast(r: _Rewriter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    (x,) = srcs
    if inst.dtype == x.dtype:
        return x
    if inst.dtype == F16:   # from float32 or float64: the renderer's (correctly rounded) cast
        source = x if x.dtype in (F32, F64) else r.emit(Opc.CAST, F32, (x,))   # ints, bool: exact enough
        return r.emit(Opc.CAST, F16, (source,))
    wide = r.widened(x)      # from float16: every float16 is a float32
    return wide if inst.dtype == F32 else r.emit(Opc.CAST, inst.dtype, (wide,))


def _define_acc(r: _Rewriter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    return r.emit(Opc.DEFINE_ACC, F32, (), inst.arg)


def _acc_update(r: _Rewriter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    acc, value = srcs
    return r.emit(Opc.ACC_UPDATE, None, (acc, r.widened(value)) if acc.dtype == F32 else srcs, inst.arg)


def _acc_read(r: _Rewriter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    return r.narrowed(r.emit(Opc.ACC_READ, srcs[0].dtype, srcs), inst.dtype)


def _copy(r: _Rewriter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    """Memory and constants keep their float16 (2 bytes in memory)."""
    return r.emit(inst.opc, inst.dtype, srcs, inst.arg)


def _no_float16(r: _Rewriter, inst: Inst, srcs: tuple[Inst, ...]) -> Inst:
    raise RenderError(f"{inst.opc.name} on float16 (there is no 16-bit integer to bitcast to)")


_REWRITE = {
    Opc.CONST: _copy, Opc.PARAM: _copy, Opc.LOAD: _copy, Opc.GATED_LOAD: _copy, Opc.STORE: _copy,
    Opc.DEFINE_LOCAL: _copy, Opc.LOCAL_LOAD: _copy, Opc.LOCAL_STORE: _copy,
    Opc.ALU: _alu, Opc.CAST: _cast, Opc.BITCAST: _no_float16,
    Opc.DEFINE_ACC: _define_acc, Opc.ACC_UPDATE: _acc_update, Opc.ACC_READ: _acc_read,
    # never float16: index math, control flow
    Opc.SPECIAL: _copy, Opc.RANGE: _copy, Opc.ENDRANGE: _copy, Opc.IF: _copy, Opc.ENDIF: _copy,
    Opc.IDIV: _copy, Opc.MOD: _copy, Opc.BARRIER: _copy, Opc.ATOMIC: _copy,   # (atomics: ints only)
}
check_exhaustive(_REWRITE, Opc, "legalize (float16 rules)")  # type: ignore[arg-type]


def _without_unused_constants(instructions: list[Inst]) -> list[Inst]:
    used = {id(s) for inst in instructions for s in inst.srcs}
    return [inst for inst in instructions if inst.opc is not Opc.CONST or id(inst) in used]
