"""A small SPIR-V module builder: words, ids, types, constants, decorations, functions.

Only what the renderer needs. Types and constants are interned (one id per distinct type /
value), sections are kept apart and concatenated in the order the spec requires.
"""

from __future__ import annotations

import struct
from typing import Iterable

import numpy as np

MAGIC = 0x07230203
VERSION_1_3 = 0x00010300
GENERATOR = 0  # unregistered tool

# --- enumerants (SPIR-V 1.3 / unified1) ------------------------------------------------------


class Op:
    Name = 5
    Extension = 10
    ExtInstImport = 11
    ExtInst = 12
    MemoryModel = 14
    EntryPoint = 15
    ExecutionMode = 16
    Capability = 17
    TypeVoid = 19
    TypeBool = 20
    TypeInt = 21
    TypeFloat = 22
    TypeVector = 23
    TypeArray = 28
    TypeRuntimeArray = 29
    TypeStruct = 30
    TypePointer = 32
    TypeFunction = 33
    ConstantTrue = 41
    ConstantFalse = 42
    Constant = 43
    Function = 54
    FunctionEnd = 56
    Variable = 59
    Load = 61
    Store = 62
    AccessChain = 65
    Decorate = 71
    MemberDecorate = 72
    CompositeConstruct = 80
    CompositeExtract = 81
    ConvertFToU = 109
    ConvertFToS = 110
    ConvertSToF = 111
    ConvertUToF = 112
    UConvert = 113
    SConvert = 114
    FConvert = 115
    Bitcast = 124
    SNegate = 126
    FNegate = 127
    IAdd = 128
    FAdd = 129
    ISub = 130
    FSub = 131
    IMul = 132
    FMul = 133
    UDiv = 134
    SDiv = 135
    FDiv = 136
    UMod = 137
    SRem = 138
    SMod = 139
    FRem = 140
    FMod = 141
    IsNan = 156
    IsInf = 157
    LogicalEqual = 164
    LogicalNotEqual = 165
    LogicalOr = 166
    LogicalAnd = 167
    LogicalNot = 168
    Select = 169
    IEqual = 170
    INotEqual = 171
    UGreaterThan = 172
    SGreaterThan = 173
    UGreaterThanEqual = 174
    SGreaterThanEqual = 175
    ULessThan = 176
    SLessThan = 177
    ULessThanEqual = 178
    SLessThanEqual = 179
    FOrdEqual = 180
    FUnordEqual = 181
    FOrdNotEqual = 182
    FUnordNotEqual = 183
    FOrdLessThan = 184
    FUnordLessThan = 185
    FOrdGreaterThan = 186
    FUnordGreaterThan = 187
    FOrdLessThanEqual = 188
    FUnordLessThanEqual = 189
    FOrdGreaterThanEqual = 190
    FUnordGreaterThanEqual = 191
    ShiftRightLogical = 194
    ShiftRightArithmetic = 195
    ShiftLeftLogical = 196
    BitwiseOr = 197
    BitwiseXor = 198
    BitwiseAnd = 199
    Not = 200
    AtomicIAdd = 234
    AtomicSMin = 236
    AtomicUMin = 237
    AtomicSMax = 238
    AtomicUMax = 239
    AtomicAnd = 240
    AtomicOr = 241
    ControlBarrier = 224
    LoopMerge = 246
    SelectionMerge = 247
    Label = 248
    Branch = 249
    BranchConditional = 250
    Return = 253


class Cap:
    Shader = 1
    Float16 = 9
    Float64 = 10
    Int64 = 11
    Int64Atomics = 12
    Int16 = 22
    Int8 = 39
    StorageBuffer16BitAccess = 4433
    StorageBuffer8BitAccess = 4448
    SignedZeroInfNanPreserve = 4466


class SC:  # storage classes
    Input = 1
    Workgroup = 4
    Function = 7
    StorageBuffer = 12


class Dec:
    Block = 2
    ArrayStride = 6
    BuiltIn = 11
    NonWritable = 24
    Binding = 33
    DescriptorSet = 34
    Offset = 35
    NoContraction = 42


class BuiltIn:
    NumWorkgroups = 24
    WorkgroupId = 26
    LocalInvocationId = 27


class GLSL:  # GLSL.std.450 extended instructions
    Trunc = 3
    FAbs = 4
    Floor = 8
    Ceil = 9
    Sin = 13
    Cos = 14
    Tanh = 21
    Pow = 26
    Exp = 27
    Log = 28
    Sqrt = 31
    RoundEven = 2


EXEC_MODEL_GLCOMPUTE = 5
EXEC_MODE_LOCAL_SIZE = 17
EXEC_MODE_SIGNED_ZERO_INF_NAN_PRESERVE = 4461
SCOPE_WORKGROUP = 2
SEMANTICS_ACQ_REL_WORKGROUP = 0x8 | 0x100  # AcquireRelease | WorkgroupMemory
SEMANTICS_RELAXED = 0


def string_words(text: str) -> list[int]:
    data = text.encode() + b"\0"
    data += b"\0" * (-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def inst(opcode: int, operands: Iterable[int]) -> list[int]:
    ops = list(operands)
    return [((len(ops) + 1) << 16) | opcode, *ops]


class Module:
    """One SPIR-V module under construction."""

    def __init__(self) -> None:
        self.bound = 1
        self.capabilities: list[int] = []
        self.extensions: list[str] = []
        self.ext_imports: list[int] = []
        self.entry: list[int] = []
        self.modes: list[int] = []
        self.debug: list[int] = []
        self.annotations: list[int] = []
        self.globals: list[int] = []   # types, constants, global variables (in definition order)
        self.functions: list[int] = []
        self._types: dict[tuple, int] = {}
        self._consts: dict[tuple, int] = {}
        self._glsl: int | None = None

    # -- ids and sections
    def id(self) -> int:
        self.bound += 1
        return self.bound - 1

    def capability(self, cap: int) -> None:
        if cap not in self.capabilities:
            self.capabilities.append(cap)

    def extension(self, name: str) -> None:
        if name not in self.extensions:
            self.extensions.append(name)

    def glsl(self) -> int:
        if self._glsl is None:
            self._glsl = self.id()
            self.ext_imports += inst(Op.ExtInstImport, [self._glsl, *string_words("GLSL.std.450")])
        return self._glsl

    def decorate(self, target: int, decoration: int, *literals: int) -> None:
        self.annotations += inst(Op.Decorate, [target, decoration, *literals])

    def member_decorate(self, struct_id: int, member: int, decoration: int, *literals: int) -> None:
        self.annotations += inst(Op.MemberDecorate, [struct_id, member, decoration, *literals])

    def name(self, target: int, text: str) -> None:
        self.debug += inst(Op.Name, [target, *string_words(text)])

    # -- types (interned)
    def _type(self, key: tuple, opcode: int, operands: list[int]) -> int:
        found = self._types.get(key)
        if found is None:
            found = self._types[key] = self.id()
            self.globals += inst(opcode, [found, *operands])
        return found

    def t_void(self) -> int:
        return self._type(("void",), Op.TypeVoid, [])

    def t_bool(self) -> int:
        return self._type(("bool",), Op.TypeBool, [])

    def t_int(self, width: int, signed: bool = True) -> int:
        return self._type(("int", width, signed), Op.TypeInt, [width, int(signed)])

    def t_float(self, width: int) -> int:
        return self._type(("float", width), Op.TypeFloat, [width])

    def t_vec(self, elem: int, n: int) -> int:
        return self._type(("vec", elem, n), Op.TypeVector, [elem, n])

    def t_ptr(self, storage: int, pointee: int) -> int:
        return self._type(("ptr", storage, pointee), Op.TypePointer, [storage, pointee])

    def t_array(self, elem: int, length: int) -> int:
        return self._type(("array", elem, length), Op.TypeArray, [elem, self.const(self.t_int(32, False), length)])

    def t_func(self, ret: int, *params: int) -> int:
        return self._type(("func", ret, params), Op.TypeFunction, [ret, *params])

    def t_block_runtime_array(self, elem: int, stride: int) -> int:
        """struct { elem data[]; } decorated Block, with ArrayStride `stride` (a storage buffer's type)."""
        key = ("block", elem, stride)
        found = self._types.get(key)
        if found is None:
            arr = self.id()
            self.globals += inst(Op.TypeRuntimeArray, [arr, elem])
            self.decorate(arr, Dec.ArrayStride, stride)
            found = self._types[key] = self.id()
            self.globals += inst(Op.TypeStruct, [found, arr])
            self.decorate(found, Dec.Block)
            self.member_decorate(found, 0, Dec.Offset, 0)
        return found

    # -- constants (interned by type and bit pattern)
    def const(self, type_id: int, value: int | float | bool, kind: str = "i", width: int = 32) -> int:
        """A scalar constant of `type_id`; kind "i"/"u" (ints), "f" (floats), "b" (bools)."""
        if kind == "b":
            key = ("b", type_id, bool(value))
            found = self._consts.get(key)
            if found is None:
                found = self._consts[key] = self.id()
                self.globals += inst(Op.ConstantTrue if value else Op.ConstantFalse, [type_id, found])
            return found
        if kind == "f":
            bits = int(np.array(value, dtype={16: np.float16, 32: np.float32, 64: np.float64}[width])
                       .view({16: np.uint16, 32: np.uint32, 64: np.uint64}[width]))
        else:
            bits = int(value) & ((1 << width) - 1)
        key = (type_id, bits)
        found = self._consts.get(key)
        if found is None:
            found = self._consts[key] = self.id()
            words = [bits & 0xFFFFFFFF] if width <= 32 else [bits & 0xFFFFFFFF, bits >> 32]
            if kind == "i" and width < 32 and bits >> (width - 1):   # a narrow negative one's word is sign-extended
                words = [bits | (0xFFFFFFFF ^ ((1 << width) - 1))]
            self.globals += inst(Op.Constant, [type_id, found, *words])
        return found

    def u32(self, value: int) -> int:
        return self.const(self.t_int(32, False), value)

    # -- global variables
    def variable(self, ptr_type: int, storage: int) -> int:
        var = self.id()
        self.globals += inst(Op.Variable, [ptr_type, var, storage])
        return var

    # -- assembly
    def assemble(self) -> bytes:
        words = [MAGIC, VERSION_1_3, GENERATOR, self.bound, 0]
        for cap in self.capabilities:
            words += inst(Op.Capability, [cap])
        for ext in self.extensions:
            words += inst(Op.Extension, string_words(ext))
        words += self.ext_imports
        words += inst(Op.MemoryModel, [0, 1])  # Logical, GLSL450
        words += self.entry + self.modes + self.debug + self.annotations + self.globals + self.functions
        return struct.pack(f"<{len(words)}I", *words)


def disassemble_header(binary: bytes) -> str:
    """A one-line summary (magic, version, bound, word count) for error messages."""
    magic, version, _gen, bound, _ = struct.unpack("<5I", binary[:20])
    return f"SPIR-V {version >> 16}.{(version >> 8) & 0xFF} magic={magic:#x} bound={bound} words={len(binary) // 4}"
