"""Loop IR -> SPIR-V binary (a GLCompute shader), one instruction at a time.

* Buffer argument i is a StorageBuffer `struct { T data[]; }` at set 0, binding i.
* Loop IR values are SSA and a value is only used inside the block that defines it, so
  they map to SPIR-V ids directly; the mutable state (loop counters, accumulators) lives in
  Function-storage variables, loaded and stored around its uses (no phis).
* RANGE / IF become structured control flow: a loop header with OpLoopMerge (merge and
  continue blocks of its own), an OpSelectionMerge per IF.
* DEFINE_LOCAL is a Workgroup array; BARRIER an OpControlBarrier (Workgroup scope,
  WorkgroupMemory | AcquireRelease).
* Index math is int64 when the device has shaderInt64, else int32 (sizes are checked).
* bool buffers are 1 byte per element: 8-bit storage when the device has it, else 32-bit
  words read with shifts and masks and written with atomic and/or on the word.
* ug_core.ops semantics where the hardware differs: IEEE 754-2019 max/min (NaN-propagating,
  -0 < +0), C-style pow edge cases, floor division for ints; float32/float16 exp/log/tanh (and
  sin/cos with float64) from the core's math library (ug_core.mathlib), float64
  exp/log/sin/cos/tanh/pow in software (GLSL.std.450 has them for 16/32-bit only), float16
  transcendentals evaluated in float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ug_core import mathlib
from ug_core.loop_ir import INDEX, Inst, LoopProgram, Opc, Special
from ug_core.ops import ALU, Op, check_exhaustive

from .spirv import (BuiltIn, Cap, Dec, EXEC_MODE_LOCAL_SIZE, EXEC_MODE_SIGNED_ZERO_INF_NAN_PRESERVE,
                    EXEC_MODEL_GLCOMPUTE, GLSL, SC, SCOPE_WORKGROUP, SEMANTICS_ACQ_REL_WORKGROUP,
                    SEMANTICS_RELAXED, Module, Op as S, inst, string_words)

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(bool)


class RenderError(Exception):
    """The program uses something this device cannot do."""


@dataclass(frozen=True)
class Caps:
    """What the device can do, as far as the shader is concerned."""

    int64: bool = True              # shaderInt64: int64 values and int64 index math
    float64: bool = True            # shaderFloat64
    float16: bool = True            # shaderFloat16 + storageBuffer16BitAccess
    int8_storage: bool = True       # storageBuffer8BitAccess: bool buffers as bytes
    int8: bool = True               # shaderInt8 (only declared alongside 8-bit storage)
    preserve_widths: tuple[int, ...] = ()  # float widths with SignedZeroInfNanPreserve

    @property
    def index_bits(self) -> int:
        return 64 if self.int64 else 32


_EXACT = frozenset({S.FAdd, S.FSub, S.FMul, S.FDiv, S.FNegate})


@dataclass
class _Block:
    opener: Inst
    merge: int
    cont: int = 0
    var: int = 0
    counter: int = 0
    step: int = 0
    header: int = 0


def render(program: LoopProgram, caps: Caps = Caps()) -> bytes:
    """The SPIR-V module (bytes) computing `program`; entry point "main". float32 and float16
    exp/log/tanh (and sin/cos where the device has float64) are the core's math library
    (ug_core.mathlib), not GLSL.std.450's loosely specified functions."""
    program = mathlib.expand(program, mathlib.targets(float64=caps.float64))
    return _Renderer(program, caps).run()


class _Renderer:
    def __init__(self, program: LoopProgram, caps: Caps):
        self.p = program
        self.caps = caps
        self.m = Module()
        self.body: list[int] = []
        self.fvars: list[int] = []      # Function-storage OpVariables (entry block)
        self.values: dict[int, int] = {}  # id(inst) -> spirv id
        self.blocks: list[_Block] = []
        self.interface: list[int] = []
        self.builtins: dict[int, int] = {}
        self.params: dict[int, tuple[int, np.dtype]] = {}  # param index -> (variable, dtype)
        self.locals: dict[int, int] = {}
        self.prologue: list[int] = []   # entry-block instructions every use is dominated by
        self.zeros: dict[tuple, int] = {}
        if caps.index_bits == 32:
            limit = 2**31 - 1
            if any(p.size > limit for p in program.params):
                raise RenderError("a buffer exceeds 2**31 elements and the device has no int64 index math")

    # --- emission helpers
    def op(self, opcode: int, rtype: int, *operands: int) -> int:
        rid = self.m.id()
        self.body += inst(opcode, [rtype, rid, *operands])
        if opcode in _EXACT:  # keep x*0, x-x, fma contraction... IEEE (inf/nan), as numpy does
            self.m.decorate(rid, Dec.NoContraction)
        return rid

    def op0(self, opcode: int, *operands: int) -> None:
        self.body += inst(opcode, operands)

    def ext(self, glsl_op: int, rtype: int, *args: int) -> int:
        return self.op(S.ExtInst, rtype, self.m.glsl(), glsl_op, *args)

    def label(self, lid: int) -> None:
        self.op0(S.Label, lid)

    # --- types
    def vt(self, dt: np.dtype) -> int:
        """SPIR-V value type of a dtype."""
        m = self.m
        if dt == BOOL:
            return m.t_bool()
        if dt.kind == "f":
            width = dt.itemsize * 8
            if width == 64:
                self._need(self.caps.float64, "float64")
                m.capability(Cap.Float64)
            elif width == 16:
                self._need(self.caps.float16, "float16")
                m.capability(Cap.Float16)
            return m.t_float(width)
        if dt.kind in "iu":
            width = dt.itemsize * 8
            if width == 64 and not self.caps.int64:
                return m.t_int(32)  # int64 only ever appears as index math then (the dtype is not offered)
            if width == 64:
                m.capability(Cap.Int64)
            return m.t_int(width)
        raise RenderError(f"dtype {dt} is not supported by the Vulkan backend")

    def _need(self, ok: bool, what: str) -> None:
        if not ok:
            raise RenderError(f"the device does not support {what}")

    def st(self, dt: np.dtype) -> tuple[int, int]:
        """(storage element type, stride) of a buffer of dtype `dt`."""
        m = self.m
        if dt == BOOL:
            if self.caps.int8_storage:
                m.capability(Cap.StorageBuffer8BitAccess)
                m.extension("SPV_KHR_8bit_storage")
                if self.caps.int8:
                    m.capability(Cap.Int8)
                return m.t_int(8, False), 1
            return m.t_int(32, False), 4
        if dt == F16:
            m.capability(Cap.StorageBuffer16BitAccess)
            m.extension("SPV_KHR_16bit_storage")
        return self.vt(dt), dt.itemsize

    def c(self, value: Any, dt: np.dtype) -> int:
        """A constant of dtype `dt` (value in numpy semantics)."""
        t = self.vt(dt)
        if dt == BOOL:
            return self.m.const(t, bool(value), "b")
        if dt.kind == "f":
            return self.m.const(t, float(value), "f", dt.itemsize * 8)
        width = 32 if (dt == I64 and not self.caps.int64) else dt.itemsize * 8
        return self.m.const(t, int(value), "i", width)

    def u32(self, value: int) -> int:
        return self.m.u32(value)

    # --- module skeleton
    def run(self) -> bytes:
        m = self.m
        m.capability(Cap.Shader)
        void = m.t_void()
        fn_type = m.t_func(void)
        main = m.id()
        entry = m.id()
        for i, spec in enumerate(self.p.params):
            elem, stride = self.st(spec.dtype)
            block = m.t_block_runtime_array(elem, stride)
            var = m.variable(m.t_ptr(SC.StorageBuffer, block), SC.StorageBuffer)
            m.decorate(var, Dec.DescriptorSet, 0)
            m.decorate(var, Dec.Binding, i)
            if not spec.is_output:
                m.decorate(var, Dec.NonWritable)
            m.name(var, f"b{i}")
            self.params[i] = (var, spec.dtype)
        for ins in self.p.instructions:
            self.emit_inst(ins)
        assert not self.blocks, "unclosed blocks"
        self.op0(S.Return)
        # function: OpFunction, entry label, variables, body
        fn = inst(S.Function, [void, main, 0, fn_type]) + inst(S.Label, [entry])
        for var in self.fvars:
            fn += var
        fn += self.prologue
        m.functions += fn + self.body + inst(S.FunctionEnd, [])
        m.entry += inst(S.EntryPoint, [EXEC_MODEL_GLCOMPUTE, main, *string_words("main"), *self.interface])
        local = tuple(self.p.local_size) + (1,) * (3 - len(self.p.local_size))
        m.modes += inst(S.ExecutionMode, [main, EXEC_MODE_LOCAL_SIZE, *local])
        if self.caps.preserve_widths:
            m.extension("SPV_KHR_float_controls")
            m.capability(Cap.SignedZeroInfNanPreserve)
            used = {16: Cap.Float16 in m.capabilities, 32: True, 64: Cap.Float64 in m.capabilities}
            for width in self.caps.preserve_widths:
                if used.get(width):
                    m.modes += inst(S.ExecutionMode, [main, EXEC_MODE_SIGNED_ZERO_INF_NAN_PRESERVE, width])
        m.name(main, "main")
        return m.assemble()

    def fvar(self, type_id: int) -> int:
        var = self.m.id()
        self.fvars.append(inst(S.Variable, [self.m.t_ptr(SC.Function, type_id), var, SC.Function]))
        return var

    def builtin(self, which: int) -> int:
        var = self.builtins.get(which)
        if var is None:
            m = self.m
            v3 = m.t_vec(m.t_int(32, False), 3)
            var = self.builtins[which] = m.variable(m.t_ptr(SC.Input, v3), SC.Input)
            m.decorate(var, Dec.BuiltIn, which)
            self.interface.append(var)
        return var

    # --- instructions
    def emit_inst(self, ins: Inst) -> None:
        result = _INST[ins.opc](self, ins)
        if result is not None:
            self.values[id(ins)] = result

    def v(self, ins: Inst) -> int:
        return self.values[id(ins)]

    def _const(self, ins: Inst) -> int:
        if ins.dtype.kind == "f" and ins.arg == 0:
            return self.opaque_zero(ins.dtype, math.copysign(1.0, ins.arg) < 0)
        return self.c(ins.arg, ins.dtype)

    def opaque_zero(self, dt: np.dtype, negative: bool) -> int:
        """A float zero the driver cannot see as a constant: some drivers (lavapipe) fold x * 0.0
        to 0.0 even for inf / nan x. Built once, in the entry block, from NumWorkgroups.x & 2**31
        (always 0 here, unknown to the compiler)."""
        key = (dt.str, negative)
        found = self.zeros.get(key)
        if found is None:
            saved, self.body = self.body, self.prologue
            m = self.m
            u32 = m.t_int(32, False)
            vec = self.op(S.Load, m.t_vec(u32, 3), self.builtin(BuiltIn.NumWorkgroups))
            bits = self.op(S.BitwiseAnd, u32, self.op(S.CompositeExtract, u32, vec, 0), self.u32(0x80000000))
            zero = self.op(S.Bitcast, self.vt(F32), bits)
            if dt != F32:
                zero = self.op(S.FConvert, self.vt(dt), zero)
            if negative:
                zero = self.op(S.FNegate, self.vt(dt), zero)
            self.body, self.prologue = saved, self.body
            found = self.zeros[key] = zero
        return found

    def _param(self, ins: Inst) -> int:
        return self.params[ins.arg][0]

    def _special(self, ins: Inst) -> int:
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
            return read(BuiltIn.WorkgroupId)
        if kind is Special.LOCAL_ID:
            return read(BuiltIn.LocalInvocationId)
        group = read(BuiltIn.WorkgroupId)
        size = self.c(self.p.local_size[dim], INDEX)
        return self.op(S.IAdd, it, self.op(S.IMul, it, group, size), read(BuiltIn.LocalInvocationId))

    def _range(self, ins: Inst) -> int:
        it = self.vt(INDEX)
        start, end = (self.v(s) for s in ins.srcs)
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
        return counter

    def _endrange(self, ins: Inst) -> None:
        blk = self.blocks.pop()
        assert blk.opener is ins.srcs[0]
        it = self.vt(INDEX)
        self.op0(S.Branch, blk.cont)
        self.label(blk.cont)
        nxt = self.op(S.IAdd, it, blk.counter, self.c(blk.step, INDEX))
        self.op0(S.Store, blk.var, nxt)
        self.op0(S.Branch, blk.header)
        self.label(blk.merge)

    def _if(self, ins: Inst) -> None:
        then, merge = self.m.id(), self.m.id()
        self.op0(S.SelectionMerge, merge, 0)
        self.op0(S.BranchConditional, self.v(ins.srcs[0]), then, merge)
        self.label(then)
        self.blocks.append(_Block(ins, merge))

    def _endif(self, ins: Inst) -> None:
        blk = self.blocks.pop()
        assert blk.opener is ins.srcs[0]
        self.op0(S.Branch, blk.merge)
        self.label(blk.merge)

    # buffers
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

    def _load(self, ins: Inst) -> int:
        var, dt = self.params[ins.srcs[0].arg]
        index = self.v(ins.srcs[1])
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

    def _store(self, ins: Inst) -> None:
        var, dt = self.params[ins.srcs[0].arg]
        index, value = self.v(ins.srcs[1]), self.v(ins.srcs[2])
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

    # accumulators and shared memory
    def _define_acc(self, ins: Inst) -> int:
        var = self.fvar(self.vt(ins.dtype))
        self.op0(S.Store, var, self.c(ins.arg, ins.dtype))
        return var

    def _acc_update(self, ins: Inst) -> None:
        acc, value = ins.srcs
        var = self.v(acc)
        old = self.op(S.Load, self.vt(acc.dtype), var)
        new = self.alu(ins.arg, acc.dtype, [old, self.v(value)], [acc.dtype, acc.dtype])
        self.op0(S.Store, var, new)

    def _acc_read(self, ins: Inst) -> int:
        return self.op(S.Load, self.vt(ins.dtype), self.v(ins.srcs[0]))

    def _local_elem(self, dt: np.dtype) -> int:
        return self.m.t_int(32, False) if dt == BOOL else self.vt(dt)

    def _define_local(self, ins: Inst) -> int:
        m = self.m
        arr = m.t_array(self._local_elem(ins.dtype), ins.arg)
        var = m.variable(m.t_ptr(SC.Workgroup, arr), SC.Workgroup)
        return var

    def _local_load(self, ins: Inst) -> int:
        elem = self._local_elem(ins.dtype)
        value = self.op(S.Load, elem, self._ptr(self.v(ins.srcs[0]), elem, self.v(ins.srcs[1]), SC.Workgroup, False))
        if ins.dtype == BOOL:
            value = self.op(S.INotEqual, self.m.t_bool(), value, self.u32(0))
        return value

    def _local_store(self, ins: Inst) -> None:
        dt = ins.srcs[0].dtype
        elem = self._local_elem(dt)
        value = self.v(ins.srcs[2])
        if dt == BOOL:
            value = self.op(S.Select, elem, value, self.u32(1), self.u32(0))
        self.op0(S.Store, self._ptr(self.v(ins.srcs[0]), elem, self.v(ins.srcs[1]), SC.Workgroup, False), value)

    def _barrier(self, ins: Inst) -> None:
        wg = self.u32(SCOPE_WORKGROUP)
        self.op0(S.ControlBarrier, wg, wg, self.u32(SEMANTICS_ACQ_REL_WORKGROUP))

    # math
    def _alu(self, ins: Inst) -> int:
        return self.alu(ins.arg, ins.dtype, [self.v(s) for s in ins.srcs], [s.dtype for s in ins.srcs])

    def _idiv(self, ins: Inst) -> int:
        return self.op(S.SDiv, self.vt(INDEX), *(self.v(s) for s in ins.srcs))

    def _mod(self, ins: Inst) -> int:
        return self.op(S.SRem, self.vt(INDEX), *(self.v(s) for s in ins.srcs))

    def _cast(self, ins: Inst) -> int:
        return self.cast(self.v(ins.srcs[0]), ins.srcs[0].dtype, ins.dtype)

    def _bitcast(self, ins: Inst) -> int:
        src = ins.srcs[0].dtype
        if not self.caps.int64 and I64 in (src, ins.dtype):
            raise RenderError("a 64-bit bitcast needs int64 (shaderInt64)")
        return self.op(S.Bitcast, self.vt(ins.dtype), self.v(ins.srcs[0]))

    def cast(self, x: int, src: np.dtype, dst: np.dtype) -> int:
        if src == dst or (self.vt(src) == self.vt(dst)):
            return x
        t = self.vt(dst)
        b = self.m.t_bool()
        if dst == BOOL:
            if src.kind == "f":
                return self.op(S.FUnordNotEqual, b, x, self.c(0, src))
            return self.op(S.INotEqual, b, x, self.c(0, src))
        if src == BOOL:
            return self.op(S.Select, t, x, self.c(1, dst), self.c(0, dst))
        if src.kind == "f" and dst.kind == "f":
            return self.op(S.FConvert, t, x)
        if src.kind == "f":
            return self.op(S.ConvertFToS, t, x)
        if dst.kind == "f":
            return self.op(S.ConvertSToF, t, x)
        return self.op(S.SConvert, t, x)

    # --- elementwise ops, numpy semantics
    def alu(self, op: Op, dt: np.dtype, a: list[int], src_dts: list[np.dtype]) -> int:
        src = src_dts[0] if op is not Op.WHERE else src_dts[1]
        if op is Op.WHERE:
            return self.op(S.Select, self.vt(dt), *a)
        kind = "b" if src == BOOL else ("f" if src.kind == "f" else "i")
        handler = _ALU_BY_KIND[kind].get(op)
        if handler is None:
            raise RenderError(f"op {op.name} on {src.name} is not supported")
        return handler(self, src, *a)

    # float helpers
    def fbin(self, opcode: int, dt: np.dtype, x: int, y: int) -> int:
        return self.op(opcode, self.vt(dt), x, y)

    def fcmp(self, opcode: int, x: int, y: int) -> int:
        return self.op(opcode, self.m.t_bool(), x, y)

    def sel(self, dt: np.dtype, cond: int, x: int, y: int) -> int:
        return self.op(S.Select, self.vt(dt), cond, x, y)

    def f_max(self, dt: np.dtype, x: int, y: int, less: bool = False) -> int:
        """ops.maximum / ops.minimum: IEEE 754-2019, NaN-propagating, -0 < +0."""
        b = self.m.t_bool()
        t = self.vt(dt)
        first = self.op(S.FOrdLessThan if less else S.FOrdGreaterThan, b, x, y)
        second = self.op(S.FOrdGreaterThan if less else S.FOrdLessThan, b, x, y)
        # neither is larger: equal (the sign of two zeros decides) or a NaN. x + y is NaN for
        # a NaN and the larger zero (+0 unless both are -0); -((-x) + (-y)) the smaller zero
        if less:
            tie = self.op(S.FNegate, t, self.fbin(S.FAdd, dt, self.op(S.FNegate, t, x), self.op(S.FNegate, t, y)))
        else:
            tie = self.fbin(S.FAdd, dt, x, y)
        equal_nonzero = self.op(S.LogicalAnd, b, self.fcmp(S.FOrdEqual, x, y), self.fcmp(S.FOrdNotEqual, x, self.c(0, dt)))
        tie = self.sel(dt, equal_nonzero, x, tie)
        return self.sel(dt, first, x, self.sel(dt, second, y, tie))

    def poly(self, dt: np.dtype, x: int, coeffs: list[float]) -> int:
        """coeffs[0] + x * (coeffs[1] + x * (...)) (Horner)."""
        acc = self.c(coeffs[-1], dt)
        for k in reversed(coeffs[:-1]):
            acc = self.fbin(S.FAdd, dt, self.fbin(S.FMul, dt, acc, x), self.c(k, dt))
        return acc

    def via_f32(self, dt: np.dtype, fn: Callable[[np.dtype, int], int], x: int) -> int:
        """Evaluate a float32 function on a float16 value."""
        wide = self.op(S.FConvert, self.vt(F32), x)
        return self.op(S.FConvert, self.vt(dt), fn(F32, wide))

    def transcendental(self, which: str, dt: np.dtype, x: int) -> int:
        """float16 / float32 exp, log and tanh never get here: render() has expanded them with
        ug_core.mathlib (and sin / cos too, where the device has float64)."""
        if dt == F16:
            return self.via_f32(dt, lambda d, v: self.transcendental(which, d, v), x)
        if dt == F64 and which != "sqrt":
            return getattr(self, f"{which}64")(x)
        if which == "sqrt":
            r = self.ext(GLSL.Sqrt, self.vt(dt), x)
            return self.sel(dt, self.fcmp(S.FOrdLessThan, x, self.c(0, dt)), self.c(np.nan, dt), r)
        if which in ("sin", "cos"):  # a device without float64: the driver's (any accuracy)
            return self.ext(GLSL.Sin if which == "sin" else GLSL.Cos, self.vt(dt), x)
        raise RenderError(f"{which} on {dt} should have been expanded by ug_core.mathlib")

    # float64 software math (GLSL.std.450 only has 16/32-bit exp/log/sin/cos/tanh/pow)
    def _pow2i(self, k: int) -> int:
        """2**k as float64 for an int32 k in the normal range, built from its bit pattern."""
        m = self.m
        i32, u32 = m.t_int(32), m.t_int(32, False)
        hi = self.op(S.ShiftLeftLogical, i32, self.op(S.IAdd, i32, k, self.c(1023, I32)), self.c(20, I32))
        vec = self.op(80, m.t_vec(u32, 2), self.u32(0), self.op(S.Bitcast, u32, hi))  # OpCompositeConstruct
        return self.op(S.Bitcast, self.vt(F64), vec)

    def exp64(self, x: int) -> int:
        d = F64
        xc = self.sel(d, self.fcmp(S.FOrdGreaterThan, x, self.c(710.0, d)), self.c(710.0, d), x)
        xc = self.sel(d, self.fcmp(S.FOrdLessThan, xc, self.c(-746.0, d)), self.c(-746.0, d), xc)
        k = self.ext(GLSL.RoundEven, self.vt(d), self.fbin(S.FMul, d, xc, self.c(1 / math.log(2), d)))
        r = self.fbin(S.FSub, d, xc, self.fbin(S.FMul, d, k, self.c(6.93147180369123816490e-01, d)))
        r = self.fbin(S.FSub, d, r, self.fbin(S.FMul, d, k, self.c(1.90821492927058770002e-10, d)))
        p = self.poly(d, r, [1.0 / math.factorial(i) for i in range(15)])
        ki = self.op(S.ConvertFToS, self.vt(I32), k)
        k1 = self.op(S.ShiftRightArithmetic, self.vt(I32), ki, self.c(1, I32))
        k2 = self.op(S.ISub, self.vt(I32), ki, k1)
        return self.fbin(S.FMul, d, self.fbin(S.FMul, d, p, self._pow2i(k1)), self._pow2i(k2))

    def log64(self, x: int) -> int:
        d = F64
        m = self.m
        b = m.t_bool()
        i32, u32 = m.t_int(32), m.t_int(32, False)
        tiny = self.fcmp(S.FOrdLessThan, x, self.c(2.2250738585072014e-308, d))
        xs = self.sel(d, tiny, self.fbin(S.FMul, d, x, self.c(2.0 ** 54, d)), x)
        bias = self.sel(I32, tiny, self.c(-54 - 1023, I32), self.c(-1023, I32))
        vec = self.op(S.Bitcast, m.t_vec(u32, 2), xs)
        hi = self.op(S.CompositeExtract, u32, vec, 1)
        lo = self.op(S.CompositeExtract, u32, vec, 0)
        ebits = self.op(S.BitwiseAnd, u32, self.op(S.ShiftRightLogical, u32, hi, self.u32(20)), self.u32(0x7FF))
        e = self.op(S.IAdd, i32, self.op(S.Bitcast, i32, ebits), bias)
        mhi = self.op(S.BitwiseOr, u32, self.op(S.BitwiseAnd, u32, hi, self.u32(0x000FFFFF)), self.u32(0x3FF00000))
        mant = self.op(S.Bitcast, self.vt(d), self.op(80, m.t_vec(u32, 2), lo, mhi))
        big = self.fcmp(S.FOrdGreaterThan, mant, self.c(math.sqrt(2.0), d))
        mant = self.sel(d, big, self.fbin(S.FMul, d, mant, self.c(0.5, d)), mant)
        e = self.op(S.Select, i32, big, self.op(S.IAdd, i32, e, self.c(1, I32)), e)
        s = self.fbin(S.FDiv, d, self.fbin(S.FSub, d, mant, self.c(1.0, d)), self.fbin(S.FAdd, d, mant, self.c(1.0, d)))
        s2 = self.fbin(S.FMul, d, s, s)
        series = self.poly(d, s2, [1.0 / (2 * k + 1) for k in range(13)])
        logm = self.fbin(S.FMul, d, self.fbin(S.FMul, d, s, self.c(2.0, d)), series)
        ef = self.op(S.ConvertSToF, self.vt(d), e)
        out = self.fbin(S.FAdd, d, self.fbin(S.FMul, d, ef, self.c(6.93147180369123816490e-01, d)),
                        self.fbin(S.FAdd, d, self.fbin(S.FMul, d, ef, self.c(1.90821492927058770002e-10, d)), logm))
        out = self.sel(d, self.fcmp(S.FOrdEqual, x, self.c(0.0, d)), self.c(-np.inf, d), out)
        out = self.sel(d, self.fcmp(S.FOrdLessThan, x, self.c(0.0, d)), self.c(np.nan, d), out)
        special = self.op(S.LogicalOr, b, self.op(S.IsInf, b, x), self.op(S.IsNan, b, x))
        return self.sel(d, self.op(S.LogicalAnd, b, special, self.fcmp(S.FUnordGreaterThan, x, self.c(0.0, d))), x, out)

    def _sincos64(self, x: int, want_cos: bool) -> int:
        d = F64
        i32 = self.vt(I32)
        b = self.m.t_bool()
        k = self.ext(GLSL.RoundEven, self.vt(d), self.fbin(S.FMul, d, x, self.c(2 / math.pi, d)))
        r = self.fbin(S.FSub, d, x, self.fbin(S.FMul, d, k, self.c(1.57079632673412561417e+00, d)))
        r = self.fbin(S.FSub, d, r, self.fbin(S.FMul, d, k, self.c(6.07710050630396597660e-11, d)))
        r = self.fbin(S.FSub, d, r, self.fbin(S.FMul, d, k, self.c(2.02226624871116645580e-21, d)))
        r2 = self.fbin(S.FMul, d, r, r)
        sin_r = self.fbin(S.FMul, d, r, self.poly(d, r2, [(-1) ** j / math.factorial(2 * j + 1) for j in range(11)]))
        cos_r = self.poly(d, r2, [(-1) ** j / math.factorial(2 * j) for j in range(11)])
        n = self.op(S.BitwiseAnd, i32, self.op(S.ConvertFToS, i32, k), self.c(3, I32))
        if want_cos:
            n = self.op(S.BitwiseAnd, i32, self.op(S.IAdd, i32, n, self.c(1, I32)), self.c(3, I32))
        neg_sin = self.op(S.FNegate, self.vt(d), sin_r)
        neg_cos = self.op(S.FNegate, self.vt(d), cos_r)
        # sin(x + n*pi/2): n=0 sin, 1 cos, 2 -sin, 3 -cos
        odd = self.op(S.IEqual, b, self.op(S.BitwiseAnd, i32, n, self.c(1, I32)), self.c(1, I32))
        upper = self.op(S.IEqual, b, self.op(S.BitwiseAnd, i32, n, self.c(2, I32)), self.c(2, I32))
        pos = self.sel(d, odd, cos_r, sin_r)
        neg = self.sel(d, odd, neg_cos, neg_sin)
        out = self.sel(d, upper, neg, pos)
        bad = self.op(S.LogicalOr, b, self.op(S.IsInf, b, x), self.op(S.IsNan, b, x))
        return self.sel(d, bad, self.c(np.nan, d), out)

    def sin64(self, x: int) -> int:
        return self._sincos64(x, False)

    def cos64(self, x: int) -> int:
        return self._sincos64(x, True)

    def tanh64(self, x: int) -> int:
        d = F64
        a = self.ext(GLSL.FAbs, self.vt(d), x)
        y = self.fbin(S.FMul, d, a, self.c(-2.0, d))
        small = self.fbin(S.FMul, d, y, self.poly(d, y, [1.0 / math.factorial(i + 1) for i in range(18)]))
        em = self.sel(d, self.fcmp(S.FOrdLessThan, a, self.c(0.25, d)), small,
                      self.fbin(S.FSub, d, self.exp64(y), self.c(1.0, d)))
        t = self.fbin(S.FDiv, d, self.op(S.FNegate, self.vt(d), em), self.fbin(S.FAdd, d, self.c(2.0, d), em))
        t = self.sel(d, self.fcmp(S.FOrdGreaterThan, a, self.c(40.0, d)), self.c(1.0, d), t)
        return self.sel(d, self.fcmp(S.FOrdLessThan, x, self.c(0.0, d)), self.op(S.FNegate, self.vt(d), t), t)

    def fpow(self, dt: np.dtype, x: int, y: int) -> int:
        if dt == F16:
            wide = [self.op(S.FConvert, self.vt(F32), v) for v in (x, y)]
            return self.op(S.FConvert, self.vt(dt), self.fpow(F32, *wide))
        b = self.m.t_bool()
        t = self.vt(dt)
        ax = self.ext(GLSL.FAbs, t, x)
        if dt == F64:
            mag = self.exp64(self.fbin(S.FMul, dt, y, self.log64(ax)))
        elif self.caps.float64:
            # in float64, as the cpu's powf: GLSL's Pow is exp2(y log2 x) in float32 (many ulp
            # for large |y log x|, and lavapipe's is wrong for subnormal x)
            wide = [self.op(S.FConvert, self.vt(F64), v) for v in (ax, y)]
            mag = self.op(S.FConvert, t, self.exp64(self.fbin(S.FMul, F64, wide[1], self.log64(wide[0]))))
        else:
            mag = self.ext(GLSL.Pow, t, ax, y)
        zero = self.c(0.0, dt)
        ax_zero = self.fcmp(S.FOrdEqual, ax, zero)
        ax_inf = self.op(S.IsInf, b, ax)
        y_pos = self.fcmp(S.FOrdGreaterThan, y, zero)
        # |x| == 0: y > 0 -> 0, y < 0 -> inf;  |x| == inf: y > 0 -> inf, y < 0 -> 0
        mag = self.sel(dt, ax_zero, self.sel(dt, y_pos, zero, self.c(np.inf, dt)), mag)
        mag = self.sel(dt, ax_inf, self.sel(dt, y_pos, self.c(np.inf, dt), zero), mag)
        # a negative x (-0 and -inf too: 1/x < 0) and an odd integer y: the sign of x; a finite
        # x < 0 and a non-integer y: NaN
        fl = self.ext(GLSL.Floor, t, y)
        is_int = self.fcmp(S.FOrdEqual, fl, y)
        half = self.ext(GLSL.Floor, t, self.fbin(S.FMul, dt, y, self.c(0.5, dt)))
        odd = self.fcmp(S.FOrdNotEqual, self.fbin(S.FMul, dt, half, self.c(2.0, dt)), y)
        odd = self.op(S.LogicalAnd, b, odd, self.fcmp(S.FOrdLessThan, self.ext(GLSL.FAbs, t, y), self.c(2.0 ** 53, dt)))
        odd = self.op(S.LogicalAnd, b, odd, is_int)
        x_neg = self.fcmp(S.FOrdLessThan, x, zero)
        x_sign = self.op(S.LogicalOr, b, x_neg, self.fcmp(S.FOrdLessThan, self.fbin(S.FDiv, dt, self.c(1.0, dt), x), zero))
        out = self.sel(dt, self.op(S.LogicalAnd, b, x_sign, odd), self.op(S.FNegate, t, mag), mag)
        bad = self.op(S.LogicalAnd, b, self.op(S.LogicalAnd, b, x_neg, self.op(S.LogicalNot, b, ax_inf)),
                      self.op(S.LogicalNot, b, is_int))
        out = self.sel(dt, bad, self.c(np.nan, dt), out)
        out = self.sel(dt, self.op(S.LogicalOr, b, self.op(S.IsNan, b, x), self.op(S.IsNan, b, y)), self.c(np.nan, dt), out)
        one = self.c(1.0, dt)
        # pow(x, 0) == pow(1, y) == pow(-1, +-inf) == 1, NaN or not
        unit_inf = self.op(S.LogicalAnd, b, self.fcmp(S.FOrdEqual, ax, one), self.op(S.IsInf, b, y))
        trivial = self.op(S.LogicalOr, b, self.op(S.LogicalOr, b, self.fcmp(S.FOrdEqual, y, zero),
                                                  self.fcmp(S.FOrdEqual, x, one)), unit_inf)
        return self.sel(dt, trivial, one, out)

    def ipow(self, dt: np.dtype, x: int, y: int) -> int:
        """ops.power on ints: by squaring, wrapping; a negative exponent gives 1 / x**-y
        truncated (1 for x == 1, +-1 for x == -1, else 0)."""
        t = self.vt(dt)
        b = self.m.t_bool()
        bits = 32 if (dt == I32 or not self.caps.int64) else 64
        negative = self.op(S.SLessThan, b, y, self.c(0, dt))
        result, base, e = self.c(1, dt), x, self.sel(dt, negative, self.c(0, dt), y)
        for i in range(bits - 1):
            bit = self.op(S.INotEqual, b, self.op(S.BitwiseAnd, t, e, self.c(1, dt)), self.c(0, dt))
            result = self.op(S.Select, t, bit, self.op(S.IMul, t, result, base), result)
            if i < bits - 2:
                base = self.op(S.IMul, t, base, base)
                e = self.op(S.ShiftRightArithmetic, t, e, self.c(1, dt))
        odd = self.op(S.INotEqual, b, self.op(S.BitwiseAnd, t, y, self.c(1, dt)), self.c(0, dt))
        minus_one = self.sel(dt, odd, self.c(-1, dt), self.c(1, dt))
        one_over = self.sel(dt, self.op(S.IEqual, b, x, self.c(-1, dt)), minus_one, self.c(0, dt))
        one_over = self.sel(dt, self.op(S.IEqual, b, x, self.c(1, dt)), self.c(1, dt), one_over)
        return self.sel(dt, negative, one_over, result)


def _f_cmp(opcode: int) -> Callable[..., int]:
    return lambda r, dt, x, y: r.fcmp(opcode, x, y)


def _f_bin(opcode: int) -> Callable[..., int]:
    return lambda r, dt, x, y: r.fbin(opcode, dt, x, y)


def _i_bin(opcode: int) -> Callable[..., int]:
    return lambda r, dt, x, y: r.op(opcode, r.vt(dt), x, y)


def _i_cmp(opcode: int) -> Callable[..., int]:
    return lambda r, dt, x, y: r.op(opcode, r.m.t_bool(), x, y)


def _trans(which: str) -> Callable[..., int]:
    return lambda r, dt, x: r.transcendental(which, dt, x)


def _i_minmax(less: bool) -> Callable[..., int]:
    def f(r: _Renderer, dt: np.dtype, x: int, y: int) -> int:
        pick = r.op(S.SLessThan if less else S.SGreaterThan, r.m.t_bool(), x, y)
        return r.sel(dt, pick, x, y)
    return f


def _i_abs(r: _Renderer, dt: np.dtype, x: int) -> int:
    neg = r.op(S.SLessThan, r.m.t_bool(), x, r.c(0, dt))
    return r.sel(dt, neg, r.op(S.SNegate, r.vt(dt), x), x)


def _i_recip(r: _Renderer, dt: np.dtype, x: int) -> int:
    """ops.ALU[RECIP] on ints (numpy's reciprocal): 1 / x truncated, INT_MIN for 0."""
    zero = r.op(S.IEqual, r.m.t_bool(), x, r.c(0, dt))
    safe = r.sel(dt, zero, r.c(1, dt), x)
    int_min = r.c(-(1 << (8 * dt.itemsize - 1)), dt)
    return r.sel(dt, zero, int_min, r.op(S.SDiv, r.vt(dt), r.c(1, dt), safe))


def _i_div(r: _Renderer, dt: np.dtype, x: int, y: int) -> int:
    """ops.divide on ints: floor division, x // 0 == 0, INT_MIN // -1 == INT_MIN (wrapping);
    OpSDiv by 0, or of INT_MIN by -1, is undefined, so those divisors are replaced first."""
    b = r.m.t_bool()
    t = r.vt(dt)
    zero = r.op(S.IEqual, b, y, r.c(0, dt))
    minus_one = r.op(S.IEqual, b, y, r.c(-1, dt))
    safe = r.sel(dt, r.op(S.LogicalOr, b, zero, minus_one), r.c(1, dt), y)
    q = r.op(S.SDiv, t, x, safe)
    rem = r.op(S.SRem, t, x, safe)
    adjust = r.op(S.LogicalAnd, b, r.op(S.INotEqual, b, rem, r.c(0, dt)),
                  r.op(S.LogicalNotEqual, b, r.op(S.SLessThan, b, rem, r.c(0, dt)), r.op(S.SLessThan, b, safe, r.c(0, dt))))
    q = r.sel(dt, adjust, r.op(S.ISub, t, q, r.c(1, dt)), q)
    q = r.sel(dt, minus_one, r.op(S.SNegate, t, x), q)
    return r.sel(dt, zero, r.c(0, dt), q)


def _b_lt(r: _Renderer, dt: np.dtype, x: int, y: int) -> int:
    b = r.m.t_bool()
    return r.op(S.LogicalAnd, b, r.op(S.LogicalNot, b, x), y)


def _b_le(r: _Renderer, dt: np.dtype, x: int, y: int) -> int:
    b = r.m.t_bool()
    return r.op(S.LogicalOr, b, r.op(S.LogicalNot, b, x), y)


def _b_bin(opcode: int) -> Callable[..., int]:
    return lambda r, dt, x, y: r.op(opcode, r.m.t_bool(), x, y)


_FLOAT_OPS: dict[Op, Callable[..., int]] = {
    Op.NEG: lambda r, dt, x: r.op(S.FNegate, r.vt(dt), x),
    Op.RECIP: lambda r, dt, x: r.fbin(S.FDiv, dt, r.c(1.0, dt), x),
    Op.EXP: _trans("exp"), Op.LOG: _trans("log"), Op.SQRT: _trans("sqrt"),
    Op.SIN: _trans("sin"), Op.COS: _trans("cos"), Op.TANH: _trans("tanh"),
    Op.ABS: lambda r, dt, x: r.ext(GLSL.FAbs, r.vt(dt), x),
    Op.NOT: lambda r, dt, x: r.fcmp(S.FOrdEqual, x, r.c(0.0, dt)),
    Op.ADD: _f_bin(S.FAdd), Op.SUB: _f_bin(S.FSub), Op.MUL: _f_bin(S.FMul), Op.DIV: _f_bin(S.FDiv),
    Op.POW: lambda r, dt, x, y: r.fpow(dt, x, y),
    Op.MAX: lambda r, dt, x, y: r.f_max(dt, x, y),
    Op.MIN: lambda r, dt, x, y: r.f_max(dt, x, y, less=True),
    Op.CMPLT: _f_cmp(S.FOrdLessThan), Op.CMPLE: _f_cmp(S.FOrdLessThanEqual),
    Op.CMPEQ: _f_cmp(S.FOrdEqual), Op.CMPNE: _f_cmp(S.FUnordNotEqual),
}
_INT_OPS: dict[Op, Callable[..., int]] = {
    Op.NEG: lambda r, dt, x: r.op(S.SNegate, r.vt(dt), x),
    Op.RECIP: _i_recip,
    Op.ABS: _i_abs,
    Op.NOT: lambda r, dt, x: r.op(S.IEqual, r.m.t_bool(), x, r.c(0, dt)),
    Op.ADD: _i_bin(S.IAdd), Op.SUB: _i_bin(S.ISub), Op.MUL: _i_bin(S.IMul), Op.DIV: _i_div,
    Op.POW: lambda r, dt, x, y: r.ipow(dt, x, y),
    Op.MAX: _i_minmax(False), Op.MIN: _i_minmax(True),
    Op.CMPLT: _i_cmp(S.SLessThan), Op.CMPLE: _i_cmp(S.SLessThanEqual),
    Op.CMPEQ: _i_cmp(S.IEqual), Op.CMPNE: _i_cmp(S.INotEqual),
}
_BOOL_OPS: dict[Op, Callable[..., int]] = {
    Op.ABS: lambda r, dt, x: x,
    Op.NOT: lambda r, dt, x: r.op(S.LogicalNot, r.m.t_bool(), x),
    Op.ADD: _b_bin(S.LogicalOr), Op.MUL: _b_bin(S.LogicalAnd),
    Op.MAX: _b_bin(S.LogicalOr), Op.MIN: _b_bin(S.LogicalAnd),
    Op.CMPLT: _b_lt, Op.CMPLE: _b_le,
    Op.CMPEQ: _b_bin(S.LogicalEqual), Op.CMPNE: _b_bin(S.LogicalNotEqual),
}
# ints: transcendental ops are cast to float by the graph (numpy's rule); bools: numpy rejects
# NEG/SUB/DIV/POW/RECIP/transcendentals on bool (they are promoted or refused before a kernel exists)
_NOT_FOR_INT = {Op.EXP, Op.LOG, Op.SQRT, Op.SIN, Op.COS, Op.TANH}
_NOT_FOR_BOOL = {Op.NEG, Op.RECIP, Op.SUB, Op.DIV, Op.POW} | _NOT_FOR_INT
check_exhaustive(set(_FLOAT_OPS) | {Op.WHERE}, ALU, "SPIR-V renderer (float ops)")
check_exhaustive(set(_INT_OPS) | {Op.WHERE} | _NOT_FOR_INT, ALU, "SPIR-V renderer (int ops)")
check_exhaustive(set(_BOOL_OPS) | {Op.WHERE} | _NOT_FOR_BOOL, ALU, "SPIR-V renderer (bool ops)")
_ALU_BY_KIND = {"f": _FLOAT_OPS, "i": _INT_OPS, "b": _BOOL_OPS}

_INST: dict[Opc, Callable[[_Renderer, Inst], int | None]] = {
    Opc.CONST: _Renderer._const,
    Opc.PARAM: _Renderer._param,
    Opc.SPECIAL: _Renderer._special,
    Opc.RANGE: _Renderer._range,
    Opc.ENDRANGE: _Renderer._endrange,
    Opc.IF: _Renderer._if,
    Opc.ENDIF: _Renderer._endif,
    Opc.LOAD: _Renderer._load,
    Opc.STORE: _Renderer._store,
    Opc.ALU: _Renderer._alu,
    Opc.IDIV: _Renderer._idiv,
    Opc.MOD: _Renderer._mod,
    Opc.CAST: _Renderer._cast,
    Opc.BITCAST: _Renderer._bitcast,
    Opc.DEFINE_ACC: _Renderer._define_acc,
    Opc.ACC_UPDATE: _Renderer._acc_update,
    Opc.ACC_READ: _Renderer._acc_read,
    Opc.DEFINE_LOCAL: _Renderer._define_local,
    Opc.LOCAL_LOAD: _Renderer._local_load,
    Opc.LOCAL_STORE: _Renderer._local_store,
    Opc.BARRIER: _Renderer._barrier,
}
check_exhaustive(_INST, Opc, "SPIR-V renderer (loop IR opcodes)")  # type: ignore[arg-type]
