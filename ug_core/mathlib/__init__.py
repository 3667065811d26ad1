"""The core's math library: exp, log, tanh, sin, cos and pow as loop IR arithmetic.

A target without accurate transcendental functions (Vulkan: GLSL.std.450's are loosely
specified, and lavapipe's log is 2e5 ulp off near 1, its tanh 1.3 % off at 1e-6, its sin of
1e29 is 1.0, and it has none for float64) gets its loop programs legalized (ug_core.legalize):

    program = mathlib.expand(program, mathlib.targets(float64=..., int64=...))

Every ALU instruction of a listed (op, dtype) is replaced in place by straight-line loop IR
(range reduction, a polynomial, special cases by WHERE), so the renderer only sees + - * /,
comparisons, casts and BITCAST. The algorithms are written once, here, for every backend that
asks for them:

* float32.py: exp, log, tanh, sin, cos (sin and cos reduce their argument in float64);
* float64.py: the same in float64, which take floats apart as int64 bits;
* power.py: pow with numpy's edge cases, float32 / float16 computed in float64;
* division.py: C's fmod, exactly, by long division of the significands;
* atan2.py: atan2 (atan, asin and acos are built on it), for every target (`expand_functions`);
* reduction.py: sin / cos argument reduction; emitter.py: the instruction builder.

Every target, whatever it has, gets numpy's floor_divide and remainder (division.py: from the
exact fmod) and signbit and nextafter (bits.py: from the bits) this way (`expand_exact`).

float16 is computed in float32 (pow: float64) and rounded once, as numpy does. Accuracy:
tests/test_ulp.py (float32) and tests/test_mathlib.py (float64, pow) measure it.
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from ..device import RenderError
from ..loop_ir import Inst, LoopProgram, Opc
from ..ops import Op
from . import atan2, bits, division, float32, float64
from .emitter import F16, F32, F64, Emitter, Operand
from .float32 import EXP_POLY, LN2_HI, LN2_LO, LOG_POLY, TANH_POLY, TANH_TINY
from .float64 import LN2_HI_F64, LN2_LO_F64
from .power import pow_expansion
from .reduction import CODY_WAITE_LIMIT, PIO2, TWO_OVER_PI

__all__ = ["EXACT_OPS", "EXPANDED_OPS", "FMOD_OPS", "POWER_OPS", "NEEDS_FLOAT64", "Emitter", "Operand", "expand", "expand_exact",
           "FUNCTIONS", "expand_functions",
           "targets",
           "EXP_POLY", "LN2_HI", "LN2_LO", "LOG_POLY", "TANH_POLY", "TANH_TINY", "LN2_HI_F64", "LN2_LO_F64",
           "TWO_OVER_PI", "PIO2", "CODY_WAITE_LIMIT"]

EXPANDED_OPS = frozenset({Op.EXP, Op.LOG, Op.TANH, Op.SIN, Op.COS})   # the functions of one argument
POWER_OPS = frozenset({Op.POW})
FMOD_OPS = frozenset({Op.FMOD})   # the target's may be inexact: Vulkan's is x - y trunc(x / y)
NEEDS_FLOAT64 = frozenset({Op.SIN, Op.COS})  # float32 ones reduce their argument in float64
FLOATS = (F32, F16, F64)

_UNARY: dict[np.dtype, dict[Op, Callable[[Emitter, Inst], Inst]]] = {F32: float32.FUNCTIONS, F64: float64.FUNCTIONS}
assert all(set(fns) == EXPANDED_OPS for fns in _UNARY.values())


def targets(float64: bool, int64: bool = True, dtypes: Iterable[np.dtype] = FLOATS) -> frozenset[tuple[Op, np.dtype]]:
    """The (op, dtype) pairs to expand for a target with (or without) float64 and int64, of
    `dtypes`. float64 ones need both (their bits are int64); float32 / float16 sin and cos need
    float64 (without it they stay the target's); float32 / float16 pow is always expanded: in
    float64 where the target has it, else around the target's pow (power.py); fmod is always
    expanded (division.py: exact)."""
    wide = float64 and int64
    pairs = set()
    for dt in map(np.dtype, dtypes):
        if dt == F64 and not wide:
            continue
        ops = EXPANDED_OPS if float64 else EXPANDED_OPS - NEEDS_FLOAT64
        pairs |= {(op, dt) for op in ops | POWER_OPS | FMOD_OPS}
    return frozenset(pairs)


def _check(which: frozenset[tuple[Op, np.dtype]]) -> None:
    for op, dt in which:
        if op not in EXPANDED_OPS | POWER_OPS | FMOD_OPS or dt not in FLOATS:
            raise ValueError(f"ug_core.mathlib cannot expand {op.name} on {dt}")


def _expansion(e: Emitter, op: Op, dt: np.dtype, srcs: tuple[Inst, ...], wide: bool) -> Inst:
    """The instructions computing op on srcs (dtype dt); `wide`: float64 math is available."""
    if op is Op.POW:
        return pow_expansion(e, srcs[0], srcs[1], wide)
    if op is Op.FMOD:
        return division.fmod(e, srcs[0], srcs[1])
    if dt == F16:
        return e.cast(_UNARY[F32][op](e, e.cast(srcs[0], F32)), F16)
    return _UNARY[dt][op](e, srcs[0])


def expand(program: LoopProgram, which: frozenset[tuple[Op, np.dtype]]) -> LoopProgram:
    """A copy of `program` in which every ALU instruction of a pair in `which` is computed by
    this library instead. The instructions are new objects (the input is left as it was);
    the result verifies. float32 / float16 pow is computed in float64 when `which` lists
    float64 pairs (`targets` does for a target with float64 and int64)."""
    if not any(i.opc is Opc.ALU and (i.arg, i.dtype) in which for i in program.instructions):
        return program
    _check(which)
    wide = any(dt == F64 for _, dt in which)
    return _rewrite(program, lambda inst: (inst.arg, inst.dtype) in which,
                    lambda e, inst, srcs: _expansion(e, inst.arg, inst.dtype, srcs, wide))


EXACT_OPS: dict[Op, Callable[..., Inst]] = {
    Op.FLOORDIV: division.floor_divide, Op.MOD: division.remainder,
    Op.SIGNBIT: bits.signbit, Op.NEXTAFTER: bits.nextafter,
}
"""The ops every target gets as other loop IR (ug_core.legalize): exact sequences of simpler
ops, which no renderer spells. Each is fn(emitter, *operands) -> its value."""


def expand_exact(program: LoopProgram, int64: bool) -> LoopProgram:
    """A copy of `program` whose EXACT_OPS are computed by this library (the program itself if
    it has none). float64 signbit / nextafter read the bits as int64: without int64 on the
    target they are a RenderError."""
    def picked(inst: Inst) -> bool:
        if inst.arg not in EXACT_OPS:
            return False
        if inst.srcs[0].dtype == F64 and inst.arg in (Op.SIGNBIT, Op.NEXTAFTER) and not int64:
            raise RenderError(f"{inst.arg.name} on float64 needs int64 on the device "
                              f"(instruction %{inst.id} of {program.name})")
        return True

    if not any(inst.opc is Opc.ALU and picked(inst) for inst in program.instructions):
        return program
    return _rewrite(program, picked, lambda e, inst, srcs: EXACT_OPS[inst.arg](e, *srcs))


FUNCTIONS: dict[Op, Callable[..., Inst]] = {Op.ATAN2: atan2.atan2}
"""The functions every target gets from this library (ug_core.legalize), whatever it has: float
arithmetic only, a few ulp, and vectorizable (libm's atan2 is a scalar call, GLSL.std.450's is
loosely specified); no renderer spells them. Each is fn(emitter, *operands) -> its value."""


def expand_functions(program: LoopProgram) -> LoopProgram:
    """A copy of `program` whose FUNCTIONS are computed by this library (the program itself if
    it has none); float16 ones in float32, rounded once."""
    if not any(inst.opc is Opc.ALU and inst.arg in FUNCTIONS for inst in program.instructions):
        return program
    return _rewrite(program, lambda inst: inst.arg in FUNCTIONS, lambda e, inst, srcs: FUNCTIONS[inst.arg](e, *srcs))


def _rewrite(program: LoopProgram, picked: Callable[[Inst], bool],
             expansion: Callable[[Emitter, Inst, tuple[Inst, ...]], Inst]) -> LoopProgram:
    """A copy of `program` (new instructions) in which each picked ALU instruction is replaced by
    what `expansion` emits for it, given its operands' replacements; it verifies."""
    out: list[Inst] = []
    new: dict[int, Inst] = {}   # id(old instruction) -> its replacement
    e = Emitter(out)
    for inst in program.instructions:
        srcs = tuple(new[id(s)] for s in inst.srcs)
        if inst.opc is Opc.ALU and picked(inst):
            result = expansion(e, inst, srcs)
        else:
            result = e.emit(inst.opc, inst.dtype, srcs, inst.arg)
        new[id(inst)] = result
    for pos, inst in enumerate(out):
        inst.id = pos
    expanded = LoopProgram(program.name, program.target, program.params, program.global_size,
                           program.local_size, out)
    expanded.verify()
    return expanded
