"""The loop IR op set, by version: what the core may hand a renderer written for each version.

A backend's renderer declares the version it was written for (`ug_core.kit.Renderer.op_set_version`)
and the semantics it guards itself (`Renderer.capabilities`, see the capability names below). Before
rendering, the core's legalization (ug_core.legalize) rewrites every program into that version:
each op the version lacks becomes ops it has (FLOOR from adds and compares, bitwise ops from
arithmetic, a gated load from a clamped load and a select...), and each semantic the renderer did not
declare is guarded (no integer division by zero reaches it, no shift past the width, no float -> int
conversion of NaN or of a value out of range). So a backend keeps working, unchanged, while the core
grows: this table is the contract. The rules (CONTRIBUTING.md, "The op set and its versions"):

* a version, once released, never changes: a new opcode, ALU op, operand kind, accumulator combine op
  or dtype a renderer must spell is a new version (`VERSIONS`, `CURRENT`);
* every op a version adds ships with its legalization into the versions before it
  (ug_core.legalize.OLDER_VERSIONS: tests/test_opset.py fails otherwise), but an opcode only a device's
  own `LowerOptions` asks for (`ASKED_FOR`), which a device of an older version cannot ask for;
* ops the core expands on every version (numpy's floor_divide and remainder, signbit, nextafter,
  atan2: ug_core.mathlib; the complex ops: the complex split) belong to no version: no renderer spells
  them.

What is internal, and may change between releases without a version: the lowering's choices (which
programs it writes for a kernel), kernel IR, the scheduler, the math library's algorithms.

| version | date | adds |
|---|---|---|
| 1 | 2026-11-23 | the kit's first release: 21 opcodes; ALU NEG RECIP EXP LOG SQRT SIN COS TANH ABS NOT ADD SUB MUL DIV POW MAX MIN CMPLT CMPLE CMPEQ CMPNE WHERE on float16/32/64, int32, int64, bool; accumulators ADD MAX MIN |
| 2 | 2026-11-23 | the Array API: GATED_LOAD; FLOOR CEIL TRUNC RINT FMOD INVERT AND OR XOR SHL SHR; int8, int16 and the unsigned ints (a kind of their own); MUL accumulators (products) |
| 3 | 2026-11-26 | ATOMIC (only where `LowerOptions.atomic_int_bits` asks for it) |
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .loop_ir import Opc
from .ops import Op, kind

# --- the semantics a renderer may declare it guards itself (Renderer.capabilities) -------------

SAFE_INT_DIVISION = "safe_int_division"
"""Integer DIV and RECIP mean ug_core.ops' at every operand: x // 0 == 0, INT_MIN // -1 == INT_MIN,
1 // 0 == INT_MIN. Without it the core never hands the renderer a zero divisor, a division of INT_MIN by
-1 or a RECIP of 0 (C traps on them: SIGFPE)."""
SAFE_INT_POW = "safe_int_pow"
"""Integer POW with a negative exponent means ops.power's (1, +-1 or 0). Without it the core computes
those cases itself and hands the renderer exponents >= 0 only."""
SAFE_SHIFTS = "safe_shifts"
"""SHL / SHR of a count outside [0, bits) mean numpy's (0, or the sign). Without it the core hands the
renderer counts in [0, bits) only (C leaves the others undefined)."""
SAFE_FLOAT_TO_INT = "safe_float_to_int"
"""CAST of a float to an integer dtype means ug_core.ops' (CONVERSIONS) for NaN, +-inf and values out of
range. Without it the core hands the renderer only conversions whose value fits (C leaves the others
undefined)."""
GUARDS = frozenset({SAFE_INT_DIVISION, SAFE_INT_POW, SAFE_SHIFTS, SAFE_FLOAT_TO_INT})


# --- the versions ---------------------------------------------------------------------------------

_F16, _F32, _F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_I32, _I64, _BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(bool)


@dataclass(frozen=True)
class OpSet:
    """What a renderer written for one version of the op set may be handed."""

    version: int
    date: str                          # the day the core first handed renderers these ops
    opcodes: frozenset[Opc]            # loop IR instructions
    alu: frozenset[Op]                 # ALU ops, on the operand kinds ug_core.ops.KINDS defines them
    dtypes: frozenset[np.dtype]        # the dtypes of values and buffers (complex ones never: see `allows`)
    acc_combine: frozenset[Op]         # what an ACC_UPDATE combines with

    @property
    def kinds(self) -> frozenset[str]:
        """The operand kinds (numpy's dtype.kind) of this version's dtypes."""
        return frozenset(kind(dt) for dt in self.dtypes)

    def allows(self, dtype: np.dtype) -> bool:
        """Whether a device of this version may hold `dtype`: one of its dtypes, or a complex dtype
        (the core splits complex values into pairs of float32 / float64 before rendering)."""
        dtype = np.dtype(dtype)
        return dtype in self.dtypes or dtype.kind == "c"


_V1 = OpSet(
    1, "2026-11-23",
    frozenset({Opc.CONST, Opc.PARAM, Opc.SPECIAL, Opc.RANGE, Opc.ENDRANGE, Opc.IF, Opc.ENDIF, Opc.LOAD, Opc.STORE,
               Opc.ALU, Opc.IDIV, Opc.MOD, Opc.CAST, Opc.BITCAST, Opc.DEFINE_ACC, Opc.ACC_UPDATE, Opc.ACC_READ,
               Opc.DEFINE_LOCAL, Opc.LOCAL_LOAD, Opc.LOCAL_STORE, Opc.BARRIER}),
    frozenset({Op.NEG, Op.RECIP, Op.EXP, Op.LOG, Op.SQRT, Op.SIN, Op.COS, Op.TANH, Op.ABS, Op.NOT, Op.ADD, Op.SUB,
               Op.MUL, Op.DIV, Op.POW, Op.MAX, Op.MIN, Op.CMPLT, Op.CMPLE, Op.CMPEQ, Op.CMPNE, Op.WHERE}),
    frozenset({_F16, _F32, _F64, _I32, _I64, _BOOL}),
    frozenset({Op.ADD, Op.MAX, Op.MIN}))
_V2 = OpSet(
    2, "2026-11-23",
    _V1.opcodes | {Opc.GATED_LOAD},
    _V1.alu | {Op.FLOOR, Op.CEIL, Op.TRUNC, Op.RINT, Op.FMOD, Op.INVERT, Op.AND, Op.OR, Op.XOR, Op.SHL, Op.SHR},
    _V1.dtypes | set(map(np.dtype, ("int8", "int16", "uint8", "uint16", "uint32", "uint64"))),
    _V1.acc_combine | {Op.MUL})
_V3 = OpSet(3, "2026-11-26", _V2.opcodes | {Opc.ATOMIC}, _V2.alu, _V2.dtypes, _V2.acc_combine)

VERSIONS: dict[int, OpSet] = {s.version: s for s in (_V1, _V2, _V3)}
CURRENT = max(VERSIONS)
"""The newest version: what the core's lowering writes."""
DEFAULT = 3
"""The version of a renderer that declares none: the current one when versions began (2026-11-28).
It stays 3 when the op set grows, so a backend that never declared keeps getting what it was
written for."""

ASKED_FOR: dict[Opc, str] = {Opc.ATOMIC: "LowerOptions.atomic_int_bits"}
"""Opcodes the lowering writes only for a device whose LowerOptions field asks for them (so the
older versions need no legalization of them: a device of such a version must not ask)."""


def op_set(version: int) -> OpSet:
    """The op set of `version`; a ValueError naming the known ones for any other."""
    try:
        return VERSIONS[version]
    except (KeyError, TypeError):
        raise ValueError(f"unknown op-set version {version!r}: this core knows versions "
                         f"{', '.join(map(str, sorted(VERSIONS)))} (a backend newer than its ug-core?)") from None
