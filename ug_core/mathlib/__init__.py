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
* reduction.py: sin / cos argument reduction; emitter.py: the instruction builder.

float16 is computed in float32 (pow: float64) and rounded once, as numpy does. Accuracy:
tests/test_ulp.py (float32) and tests/test_mathlib.py (float64, pow) measure it.
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from ..loop_ir import Inst, LoopProgram, Opc
from ..ops import Op
from . import float32, float64
from .emitter import F16, F32, F64, Emitter, Operand
from .float32 import EXP_POLY, LN2_HI, LN2_LO, LOG_POLY, TANH_POLY, TANH_TINY
from .float64 import LN2_HI_F64, LN2_LO_F64
from .power import pow_expansion
from .reduction import TWO_OVER_PI

__all__ = ["EXPANDED_OPS", "POWER_OPS", "NEEDS_FLOAT64", "Emitter", "Operand", "expand", "targets",
           "EXP_POLY", "LN2_HI", "LN2_LO", "LOG_POLY", "TANH_POLY", "TANH_TINY", "LN2_HI_F64", "LN2_LO_F64",
           "TWO_OVER_PI"]

EXPANDED_OPS = frozenset({Op.EXP, Op.LOG, Op.TANH, Op.SIN, Op.COS})   # the functions of one argument
POWER_OPS = frozenset({Op.POW})
NEEDS_FLOAT64 = frozenset({Op.SIN, Op.COS})  # float32 ones reduce their argument in float64
FLOATS = (F32, F16, F64)

_UNARY: dict[np.dtype, dict[Op, Callable[[Emitter, Inst], Inst]]] = {F32: float32.FUNCTIONS, F64: float64.FUNCTIONS}
assert all(set(fns) == EXPANDED_OPS for fns in _UNARY.values())


def targets(float64: bool, int64: bool = True, dtypes: Iterable[np.dtype] = FLOATS) -> frozenset[tuple[Op, np.dtype]]:
    """The (op, dtype) pairs to expand for a target with (or without) float64 and int64, of
    `dtypes`. float64 ones need both (their bits are int64); float32 / float16 sin and cos need
    float64 (without it they stay the target's); float32 / float16 pow is always expanded: in
    float64 where the target has it, else around the target's pow (power.py)."""
    wide = float64 and int64
    pairs = set()
    for dt in map(np.dtype, dtypes):
        if dt == F64 and not wide:
            continue
        ops = EXPANDED_OPS if float64 else EXPANDED_OPS - NEEDS_FLOAT64
        pairs |= {(op, dt) for op in ops | POWER_OPS}
    return frozenset(pairs)


def _check(which: frozenset[tuple[Op, np.dtype]]) -> None:
    for op, dt in which:
        if op not in EXPANDED_OPS | POWER_OPS or dt not in FLOATS:
            raise ValueError(f"ug_core.mathlib cannot expand {op.name} on {dt}")


def _expansion(e: Emitter, op: Op, dt: np.dtype, srcs: tuple[Inst, ...], wide: bool) -> Inst:
    """The instructions computing op on srcs (dtype dt); `wide`: float64 math is available."""
    if op is Op.POW:
        return pow_expansion(e, srcs[0], srcs[1], wide)
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
    out: list[Inst] = []
    new: dict[int, Inst] = {}   # id(old instruction) -> its replacement
    e = Emitter(out)
    for inst in program.instructions:
        srcs = tuple(new[id(s)] for s in inst.srcs)
        if inst.opc is Opc.ALU and (inst.arg, inst.dtype) in which:
            result = _expansion(e, inst.arg, inst.dtype, srcs, wide)
        else:
            result = e.emit(inst.opc, inst.dtype, srcs, inst.arg)
        new[id(inst)] = result
    for pos, inst in enumerate(out):
        inst.id = pos
    expanded = LoopProgram(program.name, program.target, program.params, program.global_size,
                           program.local_size, out)
    expanded.verify()
    return expanded
