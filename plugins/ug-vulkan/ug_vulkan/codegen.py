"""Loop IR -> a SPIR-V module (a GLCompute shader), one `op_<opcode>` method per instruction.

* Loop IR values are SSA and a value is only used inside the block that defines it, so they
  map to SPIR-V ids directly (`ids`); loop counters and accumulators are Function variables,
  loaded and stored around their uses (no phis).
* RANGE / IF become structured control flow: a loop header with OpLoopMerge (merge and
  continue blocks of its own), an OpSelectionMerge per IF.
* DEFINE_LOCAL is a Workgroup array; BARRIER an OpControlBarrier (Workgroup scope,
  WorkgroupMemory | AcquireRelease).
* bool buffers without 8-bit storage are 32-bit words, read with shifts and masks and written
  with atomic and/or on the word.

The module's types, constants and layout are the emitter's (emit.py); ALU semantics are
alu.py's. `render` returns the module unassembled: assembling it is the "compiler" step
(`SpirvAssembler`), so a renderer's output is a `Module`, not text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ug_core.kit import (INDEX, SAFE_INT_DIVISION, SAFE_INT_POW, SAFE_SHIFTS, CompileError, Compiler, Inst, LoopProgram,
                         Op, RenderError, Renderer, Special)

from . import alu, settings
from .emit import BOOL, I32, I64, Caps, SpirvEmitter
from .spirv import SC, SCOPE_WORKGROUP, SEMANTICS_ACQ_REL_WORKGROUP, SEMANTICS_RELAXED, BuiltIn, Cap, Module, Op as S
from .spirv_tools import disassemble, validate_spirv

__all__ = ["Caps", "RenderError", "SpirvAssembler", "SpirvRenderer", "spirv_module"]


@dataclass
class _Block:
    opener: Inst
    merge: int
    cont: int = 0
    var: int = 0
    counter: int = 0
    step: int = 0
    header: int = 0


class SpirvRenderer(SpirvEmitter, Renderer):
    """A fresh renderer per program: `render` fills one module."""

    # alu.py's divisions, ipow and shifts guard these (the core guards float -> int conversions:
    # OpConvertFToS of NaN or of a value out of range is undefined)
    capabilities = frozenset({SAFE_INT_DIVISION, SAFE_INT_POW, SAFE_SHIFTS})

    def __init__(self, caps: Caps):
        SpirvEmitter.__init__(self, caps)
        Renderer.__init__(self)
        self.ids: dict[int, int] = {}    # id(inst) -> its SPIR-V id
        self.blocks: list[_Block] = []
        self.local_size: tuple[int, ...] = ()

    def render(self, program: LoopProgram, name: str) -> Module:  # type: ignore[override]
        """The module computing `program`, entry point "main" (one name for every kernel, so
        identical kernels share a pipeline). A Module, not text: see the module docstring."""
        if self.caps.index_bits == 32 and any(p.size > 2**31 - 1 for p in program.params):
            raise RenderError("a buffer exceeds 2**31 elements and the device has no int64 index math")
        self.local_size = program.local_size
        self.begin(program.params)
        self.walk(program)
        assert not self.blocks, "unclosed blocks"
        return self.finish(program.local_size)

    def val(self, ins: Inst) -> int:
        return self.ids[id(ins)]

    def define(self, ins: Inst, rid: int) -> None:
        self.ids[id(ins)] = rid

    # --- values and thread ids
    def op_const(self, ins: Inst) -> None:
        if ins.dtype.kind == "f" and ins.arg == 0:
            self.define(ins, self.opaque_zero(ins.dtype, math.copysign(1.0, ins.arg) < 0))
        else:
            self.define(ins, self.c(ins.arg, ins.dtype))

    def op_param(self, ins: Inst) -> None:
        self.define(ins, self.params[ins.arg][0])

    def op_special(self, ins: Inst) -> None:
        kind, dim = ins.arg
        m = self.m
        it = self.vt(INDEX)
        u32 = m.t_int(32, False)
        v3 = m.t_vec(u32, 3)

        def read(which: int) -> int:
            vec = self.op(S.Load, v3, self.builtin(which))
            comp = self.op(S.CompositeExtract, u32, vec, dim)
            if self.caps.index_bits == 64:
                comp = self.op(S.UConvert, m.t_int(64, False), comp)
            return self.op(S.Bitcast, it, comp)

        if kind is Special.GROUP_ID:
            self.define(ins, read(BuiltIn.WorkgroupId))
        elif kind is Special.LOCAL_ID:
            self.define(ins, read(BuiltIn.LocalInvocationId))
        else:
            group = read(BuiltIn.WorkgroupId)
            size = self.c(self.local_size[dim], INDEX)
            self.define(ins, self.op(S.IAdd, it, self.op(S.IMul, it, group, size), read(BuiltIn.LocalInvocationId)))

    # --- structured control flow
    def op_range(self, ins: Inst) -> None:
        it = self.vt(INDEX)
        start, end = (self.val(s) for s in ins.srcs)
        var = self.fvar(it)
        header, body, cont, merge = (self.m.id() for _ in range(4))
        self.op0(S.Store, var, start)
        self.op0(S.Branch, header)
        self.label(header)
        counter = self.op(S.Load, it, var)
        cond = self.op(S.SLessThan, self.m.t_bool(), counter, end)
        self.op0(S.LoopMerge, merge, cont, 0)
        self.op0(S.BranchConditional, cond, body, merge)
        self.label(body)
        self.blocks.append(_Block(ins, merge, cont, var, counter, ins.arg, header))
        self.define(ins, counter)

    def op_endrange(self, ins: Inst) -> None:
        blk = self.blocks.pop()
        assert blk.opener is ins.srcs[0]
        it = self.vt(INDEX)
        self.op0(S.Branch, blk.cont)
        self.label(blk.cont)
        nxt = self.op(S.IAdd, it, blk.counter, self.c(blk.step, INDEX))
        self.op0(S.Store, blk.var, nxt)
        self.op0(S.Branch, blk.header)
        self.label(blk.merge)

    def op_if(self, ins: Inst) -> None:
        then, merge = self.m.id(), self.m.id()
        self.op0(S.SelectionMerge, merge, 0)
        self.op0(S.BranchConditional, self.val(ins.srcs[0]), then, merge)
        self.label(then)
        self.blocks.append(_Block(ins, merge))

    def op_endif(self, ins: Inst) -> None:
        blk = self.blocks.pop()
        assert blk.opener is ins.srcs[0]
        self.op0(S.Branch, blk.merge)
        self.label(blk.merge)

    # --- buffers
    def _ptr(self, var: int, elem: int, index: int, storage: int = SC.StorageBuffer, member: bool = True) -> int:
        ptr_t = self.m.t_ptr(storage, elem)
        if member:
            return self.op(S.AccessChain, ptr_t, var, self.c(0, I32), index)
        return self.op(S.AccessChain, ptr_t, var, index)

    def _bool_word(self, index: int) -> tuple[int, int]:
        """(word index, bit shift as uint32) of byte `index` in a word-addressed bool buffer."""
        it = self.vt(INDEX)
        u32 = self.m.t_int(32, False)
        word = self.op(S.ShiftRightArithmetic, it, index, self.c(2, INDEX))
        byte = self.op(S.BitwiseAnd, it, index, self.c(3, INDEX))
        byte32 = self.op(S.UConvert, u32, byte) if self.caps.index_bits == 64 else self.op(S.Bitcast, u32, byte)
        shift = self.op(S.ShiftLeftLogical, u32, byte32, self.u32(3))
        return word, shift

    def op_load(self, ins: Inst) -> None:
        self.define(ins, self._load(*self.params[ins.srcs[0].arg], self.val(ins.srcs[1])))

    def _load(self, var: int, dt: np.dtype, index: int) -> int:
        elem, _ = self.st(dt)
        if dt != BOOL:
            return self.op(S.Load, elem, self._ptr(var, elem, index))
        u32 = self.m.t_int(32, False)
        if self.caps.int8_storage:
            byte = self.op(S.Load, elem, self._ptr(var, elem, index))
            wide = self.op(S.UConvert, u32, byte)
        else:
            word_i, shift = self._bool_word(index)
            word = self.op(S.Load, u32, self._ptr(var, u32, word_i))
            wide = self.op(S.BitwiseAnd, u32, self.op(S.ShiftRightLogical, u32, word, shift), self.u32(0xFF))
        return self.op(S.INotEqual, self.m.t_bool(), wide, self.u32(0))

    def op_gated_load(self, ins: Inst) -> None:
        """A Function variable holding 0, overwritten by the load under an if: where the gate is
        false nothing is read (robust buffer access is not relied upon)."""
        var = self.fvar(self.vt(ins.dtype))
        self.op0(S.Store, var, self.c(0, ins.dtype))
        then, merge = self.m.id(), self.m.id()
        self.op0(S.SelectionMerge, merge, 0)
        self.op0(S.BranchConditional, self.val(ins.srcs[2]), then, merge)
        self.label(then)
        self.op0(S.Store, var, self._load(*self.params[ins.srcs[0].arg], self.val(ins.srcs[1])))
        self.op0(S.Branch, merge)
        self.label(merge)
        self.define(ins, self.op(S.Load, self.vt(ins.dtype), var))

    def op_store(self, ins: Inst) -> None:
        var, dt = self.params[ins.srcs[0].arg]
        index, value = self.val(ins.srcs[1]), self.val(ins.srcs[2])
        elem, _ = self.st(dt)
        if dt != BOOL:
            self.op0(S.Store, self._ptr(var, elem, index), value)
            return
        u32 = self.m.t_int(32, False)
        wide = self.op(S.Select, u32, value, self.u32(1), self.u32(0))
        if self.caps.int8_storage:
            self.op0(S.Store, self._ptr(var, elem, index), self.op(S.UConvert, elem, wide))
            return
        word_i, shift = self._bool_word(index)
        ptr = self._ptr(var, u32, word_i)
        keep = self.op(S.Not, u32, self.op(S.ShiftLeftLogical, u32, self.u32(0xFF), shift))
        scope, sem = self.u32(1), self.u32(SEMANTICS_RELAXED)  # Device scope
        self.op(S.AtomicAnd, u32, ptr, scope, sem, keep)
        self.op(S.AtomicOr, u32, ptr, scope, sem, self.op(S.ShiftLeftLogical, u32, wide, shift))

    def op_atomic(self, ins: Inst) -> None:
        var, dt = self.params[ins.srcs[0].arg]
        if dt.itemsize == 8:
            self._need(self.caps.int64_atomics, "64-bit atomics (shaderBufferInt64Atomics)")
            self.m.capability(Cap.Int64Atomics)
        elem, _ = self.st(dt)
        signed = dt.kind == "i"
        opcode = {Op.ADD: S.AtomicIAdd, Op.MAX: S.AtomicSMax if signed else S.AtomicUMax,
                  Op.MIN: S.AtomicSMin if signed else S.AtomicUMin}[ins.arg]
        ptr = self._ptr(var, elem, self.val(ins.srcs[1]))
        self.op(opcode, elem, ptr, self.u32(1), self.u32(SEMANTICS_RELAXED), self.val(ins.srcs[2]))   # Device scope

    # --- accumulators and shared memory
    def op_define_acc(self, ins: Inst) -> None:
        var = self.fvar(self.vt(ins.dtype))
        self.op0(S.Store, var, self.c(ins.arg, ins.dtype))
        self.define(ins, var)

    def op_acc_update(self, ins: Inst) -> None:
        acc, value = ins.srcs
        var = self.val(acc)
        old = self.op(S.Load, self.vt(acc.dtype), var)
        new = alu.alu(self, ins.arg, acc.dtype, [old, self.val(value)], [acc.dtype, acc.dtype])
        self.op0(S.Store, var, new)

    def op_acc_read(self, ins: Inst) -> None:
        self.define(ins, self.op(S.Load, self.vt(ins.dtype), self.val(ins.srcs[0])))

    def _local_elem(self, dt: np.dtype) -> int:
        return self.m.t_int(32, False) if dt == BOOL else self.vt(dt)

    def op_define_local(self, ins: Inst) -> None:
        m = self.m
        arr = m.t_array(self._local_elem(ins.dtype), ins.arg)
        self.define(ins, m.variable(m.t_ptr(SC.Workgroup, arr), SC.Workgroup))

    def op_local_load(self, ins: Inst) -> None:
        elem = self._local_elem(ins.dtype)
        value = self.op(S.Load, elem, self._ptr(self.val(ins.srcs[0]), elem, self.val(ins.srcs[1]), SC.Workgroup, False))
        if ins.dtype == BOOL:
            value = self.op(S.INotEqual, self.m.t_bool(), value, self.u32(0))
        self.define(ins, value)

    def op_local_store(self, ins: Inst) -> None:
        dt = ins.srcs[0].dtype
        elem = self._local_elem(dt)
        value = self.val(ins.srcs[2])
        if dt == BOOL:
            value = self.op(S.Select, elem, value, self.u32(1), self.u32(0))
        self.op0(S.Store, self._ptr(self.val(ins.srcs[0]), elem, self.val(ins.srcs[1]), SC.Workgroup, False), value)

    def op_barrier(self, ins: Inst) -> None:
        wg = self.u32(SCOPE_WORKGROUP)
        self.op0(S.ControlBarrier, wg, wg, self.u32(SEMANTICS_ACQ_REL_WORKGROUP))

    # --- arithmetic
    def op_alu(self, ins: Inst) -> None:
        self.define(ins, alu.alu(self, ins.arg, ins.dtype, [self.val(s) for s in ins.srcs], [s.dtype for s in ins.srcs]))

    def op_idiv(self, ins: Inst) -> None:
        self.define(ins, self.op(S.SDiv, self.vt(INDEX), *(self.val(s) for s in ins.srcs)))

    def op_mod(self, ins: Inst) -> None:
        self.define(ins, self.op(S.SRem, self.vt(INDEX), *(self.val(s) for s in ins.srcs)))

    def op_cast(self, ins: Inst) -> None:
        self.define(ins, alu.cast(self, self.val(ins.srcs[0]), ins.srcs[0].dtype, ins.dtype))

    def op_bitcast(self, ins: Inst) -> None:
        src = ins.srcs[0].dtype
        if not self.caps.int64 and I64 in (src, ins.dtype):
            raise RenderError("a 64-bit bitcast needs int64 (shaderInt64)")
        self.define(ins, self.op(S.Bitcast, self.vt(ins.dtype), self.val(ins.srcs[0])))


def spirv_module(program: LoopProgram, caps: Caps = Caps()) -> bytes:
    """The assembled SPIR-V of `program` (tests, tools)."""
    return SpirvRenderer(caps).render(program, "main").assemble()


class SpirvAssembler(Compiler):
    """The "compiler" of a renderer's Module: its words as bytes, checked by spirv-val when
    UG_VULKAN_VALIDATE asks. Not behind the kit's disk cache: assembling is all a cache hit
    would save (and the cache keys text; this source is a Module)."""

    name, suffix = "vulkan", "spv"
    disk_cache = False

    def __init__(self, validate: bool | None = None):
        self.validate_all = settings.validate() if validate is None else validate
        self.validated = 0

    def identity(self) -> str:
        return "SPIR-V 1.3, vulkan1.1"

    def compile(self, source: Module, name: str) -> bytes:  # type: ignore[override]
        binary = source.assemble()
        if self.validate_all:
            problem = validate_spirv(binary)
            self.validated += 1
            if problem is not None:
                raise CompileError(f"spirv-val rejected the module for {name}:\n{problem}", disassemble(binary))
        return binary
