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

0. First of all, every complex value (complex64, complex128) is split into a pair of real
   values of its part dtype (`split_complex`): a complex buffer is addressed as its part dtype,
   the real part of element i at 2 i and the imaginary part at 2 i + 1 (numpy's layout), and
   loads, stores, constants, selects, casts, equality tests, sum accumulators and local memory
   of complex values become two of each. REAL / IMAG / COMPLEX, which connect the two worlds,
   disappear. So no renderer sees a complex dtype: every device computes complex numbers
   without a line of its own (the frontend expands complex arithmetic into real ops, see
   ug_core.array_api._complex). Any other complex instruction is a RenderError naming it.

5. Guards (`guard`, after step 3): each semantic of ug_core.opset.GUARDS that the renderer does not
   declare it handles (Renderer.capabilities) is made safe around the instruction: no integer
   division by zero (or of INT_MIN by -1), RECIP of 0, POW with a negative exponent, shift past
   the width or float -> int conversion of NaN / inf / an out-of-range value reaches the renderer;
   the core computes ops.py's value for those operands itself.
6. Last, the program is written in the op-set version the renderer declares (`to_version`,
   ug_core.opset): every opcode, ALU op and accumulator op that version lacks becomes ops it
   has (`OLDER_VERSIONS`), and anything else outside it is a RenderError.

A legalized program is a new program (the lowering's is left as it was) and verifies.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from . import mathlib
from .device import RenderError
from .legalize_opset import OLDER_VERSIONS, guard, to_version, without_unused_constants
from .loop_ir import CLOSES, OPENS, Inst, LoopProgram, Opc, ParamSpec
from .opset import ASKED_FOR, CURRENT, GUARDS, VERSIONS, op_set
from .ops import ALU, COMPLEX_KIND, Op, check_exhaustive, defined, defined_on

COMPLEX_OPS = frozenset({Op.REAL, Op.IMAG, Op.COMPLEX})

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)

NATIVE_F16 = "native_f16"
"""Capability: the renderer computes float16 ALU ops itself, rounding each result once."""
NATIVE_MATH = "native_math"
"""Capability: the target's exp/log/tanh/sin/cos are accurate to a few ulp (libm, CUDA's)."""
CAPABILITIES = frozenset({NATIVE_F16, NATIVE_MATH}) | GUARDS
"""Every capability a device (DeviceInfo.capabilities) or its renderer (Renderer.capabilities) may
claim: the two above, and the semantics it guards itself (ug_core.opset.GUARDS)."""

ALWAYS_EXPANDED = frozenset(mathlib.EXACT_OPS) | frozenset(mathlib.FUNCTIONS) | COMPLEX_OPS
"""The ALU ops no renderer spells, whatever its version: the core expands them on every device."""


def legalize(program: LoopProgram, capabilities: Iterable[str], dtypes: Iterable[np.dtype],
             version: int = CURRENT) -> LoopProgram:
    """`program` as the renderer of a device with these capabilities and dtypes, written for
    op-set `version` (ug_core.opset), gets it."""
    capabilities = frozenset(capabilities)
    unknown = capabilities - CAPABILITIES
    if unknown:
        raise ValueError(f"unknown capabilities {sorted(unknown)} (known: {sorted(CAPABILITIES)})")
    ops = op_set(version)
    check_defined(program)
    program = split_complex(program)
    have = {np.dtype(d) for d in dtypes}
    program = mathlib.expand_exact(program, int64=np.dtype(np.int64) in have)
    program = mathlib.expand_functions(program)
    program = guard(program, capabilities)
    if NATIVE_F16 not in capabilities:
        program = float16_in_float32(program)
    if NATIVE_MATH not in capabilities:
        program = mathlib.expand(program, mathlib.targets(float64=F64 in have, int64=np.dtype(np.int64) in have))
    return to_version(program, ops, native_f16=NATIVE_F16 in capabilities)


def rendered(operand_kind: str, version: int = CURRENT) -> frozenset[Op]:
    """The ALU ops a renderer written for op-set `version` spells on operands of this dtype kind
    (one of ops.OPERAND_KINDS): those ug_core.ops defines on it that the version has (none on a
    kind it lacks: complex values, which split_complex leaves none of, and, before version 2,
    unsigned ints). The ops every program has expanded (ALWAYS_EXPANDED) are in no version."""
    ops = op_set(version)
    if operand_kind not in ops.kinds:
        return frozenset()
    return defined_on(operand_kind) & ops.alu


def check_defined(program: LoopProgram) -> None:
    for inst in program.instructions:
        if inst.opc is Opc.ALU:
            operand = inst.srcs[1].dtype if inst.arg is Op.WHERE else inst.srcs[0].dtype
            if not defined(inst.arg, operand):
                raise RenderError(f"{inst.arg.name} on {operand} is not defined (ug_core.ops); "
                                    f"instruction %{inst.id} of {program.name}")


# --- complex values as pairs of real ones -------------------------------------------------------

_PART: dict[np.dtype, np.dtype] = {np.dtype(np.complex64): F32, np.dtype(np.complex128): F64}
_INDEX, _BOOL = np.dtype(np.int64), np.dtype(bool)
Value = Inst | tuple[Inst, Inst]   # a new real instruction, or the (re, im) pair of a complex value


class _Splitter:
    """Copies instructions, each complex value as a (re, im) pair of real instructions."""

    def __init__(self) -> None:
        self.out: list[Inst] = []
        self.new: dict[int, Value] = {}

    def emit(self, opc: Opc, dtype: np.dtype | None, srcs: tuple[Inst, ...] = (), arg: object = None) -> Inst:
        inst = Inst(opc, dtype, srcs, arg)
        self.out.append(inst)
        return inst

    def real(self, old: Inst) -> Inst:
        value = self.new[id(old)]
        assert isinstance(value, Inst), old
        return value

    def pair(self, old: Inst) -> tuple[Inst, Inst]:
        value = self.new[id(old)]
        assert isinstance(value, tuple), old
        return value

    def index(self, i: Inst, part: int) -> Inst:
        """The element index of part 0 (re) or 1 (im) of complex element i: 2 i + part."""
        twice = self.emit(Opc.ALU, _INDEX, (i, self.emit(Opc.CONST, _INDEX, (), 2)), Op.MUL)
        return twice if part == 0 else self.emit(Opc.ALU, _INDEX, (twice, self.emit(Opc.CONST, _INDEX, (), 1)), Op.ADD)

    def cast(self, x: Inst, dtype: np.dtype) -> Inst:
        return x if x.dtype == dtype else self.emit(Opc.CAST, dtype, (x,))


def _is_complex(dt: np.dtype | None) -> bool:
    return dt is not None and dt.kind == "c"


def _refuse(inst: Inst, why: str = "") -> RenderError:
    return RenderError(f"{inst.opc.name}{'.' + inst.arg.name if inst.opc is Opc.ALU else ''} of complex values "
                       f"has no real expansion in the core's legalization{why} (instruction %{inst.id})")


def _split(sp: _Splitter, inst: Inst) -> Value:
    """The new instruction(s) for `inst`, which makes or reads a complex value."""
    opc = inst.opc
    if opc is Opc.PARAM:
        return sp.emit(Opc.PARAM, _PART[inst.dtype], (), inst.arg)
    if opc is Opc.CONST:
        number = complex(inst.arg)
        part = _PART[inst.dtype]
        return sp.emit(Opc.CONST, part, (), number.real), sp.emit(Opc.CONST, part, (), number.imag)
    if opc in (Opc.LOAD, Opc.GATED_LOAD):
        param, i = sp.real(inst.srcs[0]), sp.real(inst.srcs[1])
        gate = tuple(sp.real(g) for g in inst.srcs[2:])
        re, im = (sp.emit(opc, param.dtype, (param, sp.index(i, k), *gate)) for k in (0, 1))
        return re, im
    if opc is Opc.STORE:
        param, i = sp.real(inst.srcs[0]), sp.real(inst.srcs[1])
        for k, value in enumerate(sp.pair(inst.srcs[2])):
            sp.emit(Opc.STORE, None, (param, sp.index(i, k), value))
        return sp.out[-1]
    if opc is Opc.CAST:
        (x,) = inst.srcs
        if _is_complex(x.dtype):
            re, im = sp.pair(x)
            if _is_complex(inst.dtype):   # complex64 <-> complex128: each part
                return sp.cast(re, _PART[inst.dtype]), sp.cast(im, _PART[inst.dtype])
            if inst.dtype == _BOOL:   # truth: either part nonzero (numpy's)
                zero = sp.emit(Opc.CONST, re.dtype, (), 0.0)
                nonzero = tuple(sp.emit(Opc.ALU, _BOOL, (p, zero), Op.CMPNE) for p in (re, im))
                return sp.emit(Opc.ALU, _BOOL, nonzero, Op.OR)
            return sp.cast(re, inst.dtype)   # to another real dtype: the real part (numpy's cast)
        part = _PART[inst.dtype]   # a real value: the imaginary part is 0
        return sp.cast(sp.real(x), part), sp.emit(Opc.CONST, part, (), 0.0)
    if opc is Opc.ALU:
        return _split_alu(sp, inst)
    if opc is Opc.DEFINE_ACC:
        init = complex(inst.arg)
        part = _PART[inst.dtype]
        return sp.emit(Opc.DEFINE_ACC, part, (), init.real), sp.emit(Opc.DEFINE_ACC, part, (), init.imag)
    if opc is Opc.ACC_UPDATE:
        if inst.arg is not Op.ADD:
            raise _refuse(inst, f" (an accumulator combining with {inst.arg.name}: only sums of complex values are "
                                f"componentwise)")
        for acc, value in zip(sp.pair(inst.srcs[0]), sp.pair(inst.srcs[1])):
            sp.emit(Opc.ACC_UPDATE, None, (acc, value), Op.ADD)
        return sp.out[-1]
    if opc is Opc.ACC_READ:
        re, im = sp.pair(inst.srcs[0])
        return sp.emit(Opc.ACC_READ, re.dtype, (re,)), sp.emit(Opc.ACC_READ, im.dtype, (im,))
    if opc is Opc.DEFINE_LOCAL:   # two arrays: the real parts and the imaginary parts
        part = _PART[inst.dtype]
        return sp.emit(Opc.DEFINE_LOCAL, part, (), inst.arg), sp.emit(Opc.DEFINE_LOCAL, part, (), inst.arg)
    if opc is Opc.LOCAL_LOAD:
        i = sp.real(inst.srcs[1])
        re, im = (sp.emit(Opc.LOCAL_LOAD, local.dtype, (local, i)) for local in sp.pair(inst.srcs[0]))
        return re, im
    if opc is Opc.LOCAL_STORE:
        i = sp.real(inst.srcs[1])
        for local, value in zip(sp.pair(inst.srcs[0]), sp.pair(inst.srcs[2])):
            sp.emit(Opc.LOCAL_STORE, None, (local, i, value))
        return sp.out[-1]
    raise _refuse(inst)


def _split_alu(sp: _Splitter, inst: Inst) -> Value:
    op = inst.arg
    if op is Op.REAL:
        return sp.pair(inst.srcs[0])[0]
    if op is Op.IMAG:
        return sp.pair(inst.srcs[0])[1]
    if op is Op.COMPLEX:
        return sp.real(inst.srcs[0]), sp.real(inst.srcs[1])
    if op is Op.WHERE:
        cond = sp.real(inst.srcs[0])
        a, b = sp.pair(inst.srcs[1]), sp.pair(inst.srcs[2])
        return tuple(sp.emit(Opc.ALU, x.dtype, (cond, x, y), Op.WHERE) for x, y in zip(a, b))  # type: ignore[return-value]
    if op is Op.ADD:
        a, b = sp.pair(inst.srcs[0]), sp.pair(inst.srcs[1])
        return tuple(sp.emit(Opc.ALU, x.dtype, (x, y), Op.ADD) for x, y in zip(a, b))  # type: ignore[return-value]
    if op in (Op.CMPEQ, Op.CMPNE):   # equal: both parts equal; not equal: either part differs
        a, b = sp.pair(inst.srcs[0]), sp.pair(inst.srcs[1])
        re, im = (sp.emit(Opc.ALU, _BOOL, (x, y), op) for x, y in zip(a, b))
        return sp.emit(Opc.ALU, _BOOL, (re, im), Op.AND if op is Op.CMPEQ else Op.OR)
    raise _refuse(inst)


def split_complex(program: LoopProgram) -> LoopProgram:
    """A copy of `program` in which every complex value is a pair of real values (see rule 0 of
    the module doc); `program` itself where it has none."""
    if not any(_is_complex(p.dtype) for p in program.params) and \
            not any(_is_complex(inst.dtype) for inst in program.instructions):
        return program
    sp = _Splitter()
    for inst in program.instructions:
        complex_srcs = any(_is_complex(s.dtype) for s in inst.srcs)
        if _is_complex(inst.dtype) or complex_srcs:
            sp.new[id(inst)] = _split(sp, inst)
        else:
            sp.new[id(inst)] = sp.emit(inst.opc, inst.dtype, tuple(sp.real(s) for s in inst.srcs), inst.arg)
    out = without_unused_constants(sp.out)
    for pos, inst in enumerate(out):
        inst.id = pos
    params = tuple(ParamSpec(_PART[p.dtype], p.is_output, 2 * p.size) if _is_complex(p.dtype) else p
                   for p in program.params)
    legal = LoopProgram(program.name, program.target, params, program.global_size, program.local_size, out)
    legal.verify()
    return legal


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
    out = without_unused_constants(r.out)
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


def _check_older_versions() -> None:
    """Every op a version added has a legalization into the earlier ones (or is asked for), and
    every ALU op is in the current version or expanded on every device."""
    current = VERSIONS[CURRENT]
    for version, ops in VERSIONS.items():
        added = {"alu": current.alu - ops.alu, "opcodes": current.opcodes - ops.opcodes - set(ASKED_FOR),
                 "acc_combine": current.acc_combine - ops.acc_combine}
        for what, missing in added.items():
            missing = missing - OLDER_VERSIONS[what]
            if missing:
                raise NotImplementedError(f"ug_core.legalize has no legalization into op-set version {version} of "
                                          f"the {what} {sorted(getattr(m, 'name', str(m)) for m in missing)}")
    check_exhaustive(current.alu | ALWAYS_EXPANDED, ALU, "the op set (ug_core.opset) and the core's expansions")


_check_older_versions()
