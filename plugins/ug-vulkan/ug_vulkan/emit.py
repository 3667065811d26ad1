"""The SPIR-V emitter under the renderer: what the shader may use (`Caps`), the type and constant
tables, instruction words, and the module around the function body.

* Buffer argument i is a StorageBuffer `struct { T data[]; }` at set 0, binding i.
* Mutable state (loop counters, accumulators) lives in Function-storage variables, declared in
  the entry block (`fvar`); values every use needs (`opaque_zero`) go in a prologue there too.
* Index math is int64 when the device has shaderInt64, else int32 (sizes are checked).
* bool buffers are 1 byte per element with 8-bit storage, else 32-bit words.
* Unsigned dtypes are unsigned SPIR-V ints (OpUDiv, OpUConvert, OpConvertFToU want them); int8 /
  uint8 need shaderInt8 and 8-bit storage, int16 / uint16 shaderInt16 and 16-bit storage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ug_core.kit import ParamSpec, RenderError

from .spirv import (BuiltIn, Cap, Dec, EXEC_MODE_LOCAL_SIZE, EXEC_MODE_SIGNED_ZERO_INF_NAN_PRESERVE,
                    EXEC_MODEL_GLCOMPUTE, SC, Module, Op as S, inst, string_words)

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(bool)


@dataclass(frozen=True)
class Caps:
    """What the device can do, as far as the shader is concerned."""

    int64: bool = True              # shaderInt64: int64 values and int64 index math
    float64: bool = True            # shaderFloat64
    float16: bool = True            # shaderFloat16 + storageBuffer16BitAccess
    int8_storage: bool = True       # storageBuffer8BitAccess: bool buffers as bytes
    int8: bool = True               # shaderInt8 (only declared alongside 8-bit storage)
    int16: bool = True              # shaderInt16 + storageBuffer16BitAccess
    preserve_widths: tuple[int, ...] = ()  # float widths with SignedZeroInfNanPreserve
    int64_atomics: bool = False     # shaderBufferInt64Atomics: atomic add/max/min of 64-bit ints in buffers

    @property
    def index_bits(self) -> int:
        return 64 if self.int64 else 32

    @property
    def dtypes(self) -> frozenset[np.dtype]:
        """The dtypes a shader can hold: those it lacks a feature for are not claimed (the frontend
        refuses them, naming them)."""
        # complex64 / complex128 are pairs of float32 / float64 to a shader (the core's
        # legalization splits them): claimed wherever their parts are
        names = ["float32", "int32", "uint32", "bool", "complex64"]
        for have, more in ((self.int64, ("int64", "uint64")), (self.float64, ("float64", "complex128")),
                           (self.float16, ("float16",)), (self.int8, ("int8", "uint8")),
                           (self.int16, ("int16", "uint16"))):
            if have:
                names += more
        return frozenset(map(np.dtype, names))


# the Caps field and the capability an int type of this width needs (64: see `vt`)
_INT_CAPS = {8: ("int8", Cap.Int8), 16: ("int16", Cap.Int16), 64: ("int64", Cap.Int64)}

_EXACT = frozenset({S.FAdd, S.FSub, S.FMul, S.FDiv, S.FNegate})


class SpirvEmitter:
    """One module with one compute function "main": ids, types, constants and instruction words."""

    def __init__(self, caps: Caps):
        self.caps = caps
        self.m = Module()
        self.body: list[int] = []
        self.fvars: list[list[int]] = []   # Function-storage OpVariables (entry block)
        self.prologue: list[int] = []      # entry-block instructions every use is dominated by
        self.interface: list[int] = []
        self.builtins: dict[int, int] = {}
        self.params: dict[int, tuple[int, np.dtype]] = {}  # param index -> (variable, dtype)
        self.zeros: dict[tuple[str, bool], int] = {}
        self.main = 0

    # --- instruction words
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

    def fbin(self, opcode: int, dt: np.dtype, x: int, y: int) -> int:
        return self.op(opcode, self.vt(dt), x, y)

    def fcmp(self, opcode: int, x: int, y: int) -> int:
        return self.op(opcode, self.m.t_bool(), x, y)

    def sel(self, dt: np.dtype, cond: int, x: int, y: int) -> int:
        return self.op(S.Select, self.vt(dt), cond, x, y)

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
            if width in _INT_CAPS:
                ok, cap = _INT_CAPS[width]
                self._need(getattr(self.caps, ok), dt.name)
                m.capability(cap)
            return m.t_int(width, dt.kind == "i")
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
        if dt.itemsize == 2:
            m.capability(Cap.StorageBuffer16BitAccess)
            m.extension("SPV_KHR_16bit_storage")
        elif dt.itemsize == 1:
            m.capability(Cap.StorageBuffer8BitAccess)
            m.extension("SPV_KHR_8bit_storage")
        return self.vt(dt), dt.itemsize

    # --- constants
    def c(self, value: Any, dt: np.dtype) -> int:
        """A constant of dtype `dt` (value in numpy semantics)."""
        t = self.vt(dt)
        if dt == BOOL:
            return self.m.const(t, bool(value), "b")
        if dt.kind == "f":
            return self.m.const(t, float(value), "f", dt.itemsize * 8)
        return self.m.const(t, int(value), "u" if dt.kind == "u" else "i", self.int_bits(dt))

    def int_bits(self, dt: np.dtype) -> int:
        """The width of an int dtype's values (int64's are 32 bits on a device without int64: index math)."""
        return 32 if (dt.itemsize == 8 and not self.caps.int64) else dt.itemsize * 8

    def u32(self, value: int) -> int:
        return self.m.u32(value)

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

    # --- variables
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

    # --- the module around the body
    def begin(self, params: tuple[ParamSpec, ...]) -> None:
        """Declare the shader and its buffers (before the body is emitted)."""
        m = self.m
        m.capability(Cap.Shader)
        self.void = m.t_void()
        self.fn_type = m.t_func(self.void)
        self.main = m.id()
        self.entry_label = m.id()
        for i, spec in enumerate(params):
            elem, stride = self.st(spec.dtype)
            block = m.t_block_runtime_array(elem, stride)
            var = m.variable(m.t_ptr(SC.StorageBuffer, block), SC.StorageBuffer)
            m.decorate(var, Dec.DescriptorSet, 0)
            m.decorate(var, Dec.Binding, i)
            if not spec.is_output:
                m.decorate(var, Dec.NonWritable)
            m.name(var, f"b{i}")
            self.params[i] = (var, spec.dtype)

    def finish(self, local_size: tuple[int, ...]) -> Module:
        """The module: the function (entry block: variables, prologue, then the body), its entry
        point and execution modes."""
        m, main = self.m, self.main
        self.op0(S.Return)
        fn = inst(S.Function, [self.void, main, 0, self.fn_type]) + inst(S.Label, [self.entry_label])
        for var in self.fvars:
            fn += var
        fn += self.prologue
        m.functions += fn + self.body + inst(S.FunctionEnd, [])
        m.entry += inst(S.EntryPoint, [EXEC_MODEL_GLCOMPUTE, main, *string_words("main"), *self.interface])
        local = tuple(local_size) + (1,) * (3 - len(local_size))
        m.modes += inst(S.ExecutionMode, [main, EXEC_MODE_LOCAL_SIZE, *local])
        if self.caps.preserve_widths:
            m.extension("SPV_KHR_float_controls")
            m.capability(Cap.SignedZeroInfNanPreserve)
            used = {16: Cap.Float16 in m.capabilities, 32: True, 64: Cap.Float64 in m.capabilities}
            for width in self.caps.preserve_widths:
                if used.get(width):
                    m.modes += inst(S.ExecutionMode, [main, EXEC_MODE_SIGNED_ZERO_INF_NAN_PRESERVE, width])
        m.name(main, "main")
        return m
