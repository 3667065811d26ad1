"""A renderer for the C family (C, CUDA C, OpenCL C, Metal...): loop IR -> one C function.

Every value is a `const` local named after its instruction (`v12`), scoped by the C block
that holds it, which is exactly loop IR's visibility rule. A subclass spells what differs
between dialects, in class attributes and methods (the defaults are C99's, which CUDA C shares):

| attribute / method | C99 (the default) | e.g. OpenCL C |
|---|---|---|
| `ctypes`: dtype -> type name (`int_types(...)` builds the integer part) | `INT_CTYPES`: `long long`, `unsigned char`, ... | `long`, `uchar`, ... |
| `unsigned`: the type an int dtype's arithmetic wraps in | `wrap_types(INT_CTYPES)` | `wrap_types(...)` of its table |
| `index_type`: the type of int64 index math (loop counters, ids) | `long long` | `long` |
| `int_suffixes`: literal suffix per int dtype | `LL`, `ULL`, `u` | `L`, `UL`, `u` |
| `float_suffixes` / `math_suffixes`: float literal / math function suffix per dtype | `f` for float32 (`1.5f`, `expf`) | `f` / none (`exp` is overloaded) |
| `nan_literal` / `inf_literal` | `__builtin_nan{f}("")`, `__builtin_inf{f}()` | `(({t})NAN)`, `(({t})INFINITY)` |
| `shared_at_function_scope`: workgroup memory declared at the top of the function | False | True (`__local` only there) |
| `head`, `special`, `shared`, `barrier`, `atomic`, `bitcast`, `to_float` / `from_float` | the cpu target's host head (below) | `__kernel void`, `get_local_id`, ... |

The prelude of helpers is the dialect's to write: `c_helpers(bitcast=...)` (through `memcpy` or,
for a dialect without it, a union), `int_helpers(ctypes)`, `C_SOFT_HALF` (float16 in software,
C99 only); plugins/ug-c (`c`) and plugins/ug-cuda (`cuda`) assemble theirs from them.

Semantics are those of ug_core.ops, the same on every device (see ops.py):
* integers wrap on overflow: add/sub/mul/neg go through the unsigned type (no C UB);
* int DIV is floor division with a // 0 == 0, int RECIP and POW follow ops.py, float max/min
  propagate NaN and order -0 < +0: helpers named `ug_<what>_<type suffix>` (`ug_floordiv_i32`),
  which the dialect's prelude defines (C_HELPERS does for C99 and C++);
* bool is the dialect's 1-byte bool: `bool + bool` is `or`, `bool * bool` is `and`;
* float16 is stored as 2 bytes and computed in float32 (`to_float` / `from_float`), for the
  dialects that offer it;
* index math (thread ids, loop counters, what the lowering computes from them) is int64 that
  never overflows, so it stays plain signed arithmetic the compiler can strength-reduce.

On the cpu target (local size 1, GLOBAL_ID(0) only) the function takes a range of global ids
and loops over it: `head` declares `gid_start` and `gid_end`, and GLOBAL_ID opens the loop. The
default `head` is the kit's host calling convention, `void k(void **args, <index_type> gid_start,
<index_type> gid_end)` with the buffers' addresses in `args`, which kit.SharedLibraryRuntime calls.
"""

from __future__ import annotations

import math
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

from ..loop_ir import ACC_COMBINE, INDEX, Inst, LoopProgram, Opc, Special
from ..ops import BOOL_KIND, FLOAT, INT, UINT, Op, check_exhaustive
from ..opset import SAFE_INT_DIVISION, SAFE_INT_POW, SAFE_SHIFTS
from .renderer import Renderer, RenderError, check_alu_tables

__all__ = ["CStyleRenderer", "C_HELPERS", "C_INT_HELPERS", "C_SOFT_HALF", "INT_CTYPES", "INT_SUFFIXES", "INT_WRAP",
           "INTS", "SUFFIX", "c_helpers", "int_helpers", "int_types", "wrap_types"]

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(bool)
INTS = tuple(map(np.dtype, ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")))
U32, U64 = np.dtype(np.uint32), np.dtype(np.uint64)
SUFFIX: dict[np.dtype, str] = {F16: "f16", F32: "f32", F64: "f64", BOOL: "b",
                               **{dt: f"{dt.kind}{8 * dt.itemsize}" for dt in INTS}}


def int_types(*names: str) -> dict[np.dtype, str]:
    """A dialect's integer type table: its names of int8, int16, int32, int64, uint8, uint16,
    uint32 and uint64, in that order."""
    if len(names) != len(INTS):
        raise ValueError(f"int_types: {len(INTS)} type names (int8 ... uint64), got {len(names)}")
    return dict(zip(INTS, names))


def wrap_types(ctypes: Mapping[np.dtype, str]) -> dict[np.dtype, str]:
    """The type each int dtype's arithmetic wraps in, from a dialect's table: unsigned, and not
    narrower than int (C promotes a narrower one to (signed) int, whose overflow is undefined:
    65535 * 65535)."""
    return {dt: ctypes[U64] if dt.itemsize == 8 else ctypes[U32] for dt in INTS}


# the C types of the integer dtypes (C99's, which CUDA C and C++ share: no <stdint.h> needed)
INT_CTYPES = int_types("signed char", "short", "int", "long long",
                       "unsigned char", "unsigned short", "unsigned int", "unsigned long long")
INT_WRAP = wrap_types(INT_CTYPES)
# C99's literal suffixes (int8/16/32 need none: an int literal converts exactly)
INT_SUFFIXES = {np.dtype(np.int64): "LL", **{dt: "u" for dt in INTS if dt.kind == "u"}, U64: "ULL"}

_CMP = {Op.CMPLT: "<", Op.CMPLE: "<=", Op.CMPEQ: "==", Op.CMPNE: "!="}
check_exhaustive({Op.ADD, Op.MUL, Op.MAX, Op.MIN}, ACC_COMBINE, "C-style renderer (accumulator combine ops)")
_INDEX_OPS = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*"}

# The helpers of ops.py's semantics, for C99, C++, CUDA and OpenCL alike: one definition per
# type, by macro. The dialect's prelude defines UG_FN, their qualifiers (`static inline` in C; CUDA
# adds `__device__`). UG_BITCAST goes through memcpy (which compilers turn into a register move)
# or, for a dialect without memcpy (OpenCL C), through a union.
_BITCASTS = {
    "memcpy": "#define UG_BITCAST(S, T, D, U) UG_FN U ug_bitcast_##S##_##D(T x) { U r; memcpy(&r, &x, sizeof r); return r; }",
    "union": "#define UG_BITCAST(S, T, D, U) UG_FN U ug_bitcast_##S##_##D(T x) { union { T a; U b; } u; u.a = x; return u.b; }",
}


def c_helpers(bitcast: str = "memcpy") -> str:
    """The helper macros (UG_INT_HELPERS, UG_UINT_HELPERS, UG_BITCAST, UG_FLOAT_HELPERS) for a
    dialect's prelude; `bitcast`: "memcpy" or "union" (how UG_BITCAST moves the bits)."""
    if bitcast not in _BITCASTS:
        raise ValueError(f"c_helpers: bitcast must be one of {sorted(_BITCASTS)}, got {bitcast!r}")
    return r"""
#define UG_INT_HELPERS(S, T, U) \
UG_FN T ug_floordiv_##S(T a, T b) { if (b == 0) return 0; if (b == -1) return (T)(0u - (U)a); \
  T q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; } \
UG_FN T ug_irecip_##S(T a) { return a == 0 ? (T)((U)1 << (sizeof(T) * 8 - 1)) : (a == 1 || a == -1) ? a : 0; } \
UG_FN T ug_ipow_##S(T base, T e) { if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0; \
  U r = 1, b = (U)base; while (e) { if (e & 1) r *= b; b *= b; e >>= 1; } return (T)r; }
#define UG_UINT_HELPERS(S, T, U) \
UG_FN T ug_ipow_##S(T base, T e) { U r = 1, b = (U)base; while (e) { if (e & 1) r *= b; b *= b; e >>= 1; } return (T)r; }
""" + _BITCASTS[bitcast] + r"""
#define UG_FLOAT_HELPERS(S, T) \
UG_FN T ug_max_##S(T a, T b) { if (a > b) return a; if (b > a) return b; return (a == b && a != 0) ? a : a + b; } \
UG_FN T ug_min_##S(T a, T b) { if (a < b) return a; if (b < a) return b; return (a == b && a != 0) ? a : -((-a) + (-b)); }
"""


C_HELPERS = c_helpers()


def int_helpers(ctypes: Mapping[np.dtype, str] = INT_CTYPES) -> str:
    """UG_INT_HELPERS / UG_UINT_HELPERS of every integer dtype, in a dialect's type names, for its
    prelude (after c_helpers())."""
    wrap = wrap_types(ctypes)
    return "".join(f"UG_{'U' if dt.kind == 'u' else ''}INT_HELPERS({SUFFIX[dt]}, {ctypes[dt]}, {wrap[dt]})\n"
                   for dt in INTS)


C_INT_HELPERS = int_helpers()

# float16 <-> float32/float64 in software, for C dialects without a half type (C99): a value is
# its 16 bits in an unsigned short. Rounding is to nearest even from the exact double (a float
# converts to double exactly), so float64 -> float16 is correctly rounded, not rounded twice.
C_SOFT_HALF = r"""
UG_FN float ug_half_to_float(unsigned short h) {
  int exp = (h >> 10) & 0x1f, man = h & 0x3ff; float f;
  if (exp == 0x1f) { unsigned int bits = ((unsigned int)(h & 0x8000) << 16) | 0x7f800000u | ((unsigned int)man << 13);
    memcpy(&f, &bits, sizeof f); return f; }
  f = exp ? ldexpf((float)(man | 0x400), exp - 25) : ldexpf((float)man, -24);
  return (h & 0x8000) ? -f : f; }
UG_FN unsigned short ug_double_to_half(double x) {
  unsigned short sign = signbit(x) ? 0x8000 : 0; double a = fabs(x), q; int e;
  if (a != a) return sign | 0x7e00;
  if (a >= 65520.0) return sign | 0x7c00;
  if (a < 6.103515625e-05) return sign | (unsigned short)nearbyint(a * 16777216.0);  /* subnormal: units of 2**-24 */
  q = nearbyint(frexp(a, &e) * 2048.0);  /* 11 significant bits, in [1024, 2048] */
  if (q == 2048.0) { q = 1024.0; e += 1; }
  return sign | (unsigned short)(((e + 14) << 10) + ((int)q - 1024)); }
"""


class CStyleRenderer(Renderer):
    complete = False  # a dialect subclass is checked
    # C_HELPERS' ug_floordiv / ug_irecip / ug_ipow and the shift spellings below guard these (the
    # core guards float -> int conversions: a C cast of NaN or of a value out of range is undefined)
    capabilities = frozenset({SAFE_INT_DIVISION, SAFE_INT_POW, SAFE_SHIFTS})

    # -- the dialect's tables (see the module docstring)
    ctypes: ClassVar[dict[np.dtype, str]] = {F32: "float", F64: "double", BOOL: "bool", **INT_CTYPES}
    unsigned: ClassVar[dict[np.dtype, str]] = INT_WRAP
    index_type: ClassVar[str] = "long long"
    int_suffixes: ClassVar[dict[np.dtype, str]] = INT_SUFFIXES
    float_suffixes: ClassVar[dict[np.dtype, str]] = {F32: "f"}
    math_suffixes: ClassVar[dict[np.dtype, str]] = {F32: "f"}
    nan_literal: ClassVar[str] = '__builtin_nan{f}("")'   # {f}: the math suffix, {t}: the type
    inf_literal: ClassVar[str] = "__builtin_inf{f}()"
    shared_at_function_scope: ClassVar[bool] = False
    prelude: ClassVar[str] = ""
    restrict: ClassVar[str] = "restrict"

    # -- what a dialect spells (overridden by subclasses)
    def head(self, name: str, program: LoopProgram) -> str:
        """The function's first line, up to and including `{`; the buffers are `b0`, `b1`, ...
        (or defined by `op_param`), and on the cpu target `gid_start`, `gid_end`. The default:
        the kit's host calling convention (cpu target), `void name(void **args, <index_type>
        gid_start, <index_type> gid_end)`, the buffers read from `args`; a gpu dialect writes its own."""
        if program.target != "cpu":
            raise NotImplementedError(f"{type(self).__name__}: a gpu dialect spells its own head()")
        params = [f"  {'' if p.is_output else 'const '}{self.ctype(p.dtype)}* b{i} = args[{i}];"
                  for i, p in enumerate(program.params)]
        index = self.index_type
        return "\n".join([f"void {name}(void **args, {index} gid_start, {index} gid_end) {{", *params])

    def special(self, kind: Special, dim: int) -> str:
        raise RenderError(f"{type(self).__name__}: no thread ids (a cpu-target dialect)")

    def shared(self, ctype: str, name: str, n: int) -> str:
        raise RenderError(f"{type(self).__name__}: no workgroup shared memory")

    def barrier(self) -> str:
        raise RenderError(f"{type(self).__name__}: no workgroup barrier")

    def atomic(self, op: Op, address: str, value: str, dtype: np.dtype) -> str:
        """The statement doing `*address = op(*address, value)` atomically (loop_ir ATOMIC: ADD,
        MAX, MIN of 32- or 64-bit ints), for a dialect whose lowering asks for atomics."""
        raise RenderError(f"{type(self).__name__}: no atomics")

    def math(self, op: Op, dtype: np.dtype) -> str:
        """The function computing `op` (a _LIBM op: exp, fabs, floor, fmod...) on float32 or float64."""
        return _LIBM[op] + self.math_suffixes.get(dtype, "")

    def float_literal(self, value: float, dtype: np.dtype) -> str:
        if math.isnan(value) or math.isinf(value):
            special = self.nan_literal if math.isnan(value) else self.inf_literal
            text = special.format(f=self.math_suffixes.get(dtype, ""), t=self.ctype(dtype))
            return text if math.isnan(value) else f"({'-' if value < 0 else ''}{text})"
        return float(value).hex() + self.float_suffixes.get(dtype, "")  # exact

    def bitcast(self, expr: str, src: np.dtype, dst: np.dtype) -> str:
        return f"ug_bitcast_{SUFFIX[src]}_{SUFFIX[dst]}({expr})"

    def to_float(self, expr: str) -> str:   # float16 -> float32
        raise RenderError(f"{type(self).__name__}: no float16")

    def from_float(self, expr: str, src: np.dtype) -> str:   # float32 / float64 -> float16
        raise RenderError(f"{type(self).__name__}: no float16")

    def helper(self, name: str, dtype: np.dtype) -> str:
        return f"ug_{name}_{SUFFIX[dtype]}"

    # -- the walk
    def render(self, program: LoopProgram, name: str) -> str:
        self.program = program
        self.lines: list[str] = []
        self.depth = 1
        self.closers = 0    # braces the cpu target's gid loop left open
        self.index: set[int] = set()   # ids of int64 index-math values
        head = self.head(name, program)
        if self.shared_at_function_scope and program.target == "gpu":   # (OpenCL: __local only there)
            for inst in program.instructions:
                if inst.opc is Opc.DEFINE_LOCAL:
                    self.op_define_local(inst)
        self.walk(program)
        self.lines += ["  " * d + "}" for d in range(self.closers, 0, -1)]
        return "\n".join([head, *self.lines, "}"])

    def ctype(self, dtype: np.dtype) -> str:
        try:
            return self.ctypes[dtype]
        except KeyError:
            raise RenderError(f"{type(self).__name__}: no {dtype.name}") from None

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def define(self, inst: Inst, expr: str) -> None:
        name = f"v{inst.id}"
        self.emit(f"const {self.ctype(inst.dtype)} {name} = {expr};")
        self.names[id(inst)] = name

    def literal(self, value: Any, dtype: np.dtype) -> str:
        if dtype == BOOL:
            return "true" if value else "false"
        if dtype == F16:
            return self.from_float(self.float_literal(float(value), F32), F32)
        if dtype.kind == "f":
            return self.float_literal(float(dtype.type(value)), dtype)
        value, suffix = int(value), self.int_suffixes.get(dtype, "")
        if dtype.kind == "i" and dtype.itemsize >= 4 and value == -2 ** (8 * dtype.itemsize - 1):
            return f"(-{-value - 1}{suffix} - 1{suffix})"   # (the literal 2**63 would not fit)
        return f"{value}{suffix}"

    # -- one method per opcode
    def op_const(self, inst: Inst) -> None:
        self.names[id(inst)] = self.literal(inst.arg, inst.dtype)

    def op_param(self, inst: Inst) -> None:
        self.names[id(inst)] = f"b{inst.arg}"

    def op_special(self, inst: Inst) -> None:
        self.index.add(id(inst))
        kind, dim = inst.arg
        if self.program.target == "cpu":
            assert kind is Special.GLOBAL_ID and dim == 0, inst.arg
            name = f"v{inst.id}"
            self.emit(f"for ({self.index_type} {name} = gid_start; {name} < gid_end; {name}++) {{")
            self.names[id(inst)] = name
            self.depth += 1
            self.closers += 1
            return
        self.define(inst, self.special(kind, dim))

    def op_range(self, inst: Inst) -> None:
        start, end = inst.srcs
        name = f"v{inst.id}"
        self.names[id(inst)] = name
        self.index.add(id(inst))
        step = f"{inst.arg}{self.int_suffixes.get(INDEX, '')}"
        self.emit(f"for ({self.index_type} {name} = {self.v(start)}; {name} < {self.v(end)}; {name} += {step}) {{")
        self.depth += 1

    def op_if(self, inst: Inst) -> None:
        self.emit(f"if ({self.v(inst.srcs[0])}) {{")
        self.depth += 1

    def op_endrange(self, inst: Inst) -> None:
        self.depth -= 1
        self.emit("}")

    op_endif = op_endrange

    def op_load(self, inst: Inst) -> None:
        param, index = inst.srcs
        self.define(inst, f"{self.v(param)}[{self.v(index)}]")

    def op_gated_load(self, inst: Inst) -> None:
        param, index, gate = inst.srcs  # (?: evaluates the load only where the gate holds)
        self.define(inst, f"({self.v(gate)} ? {self.v(param)}[{self.v(index)}] : {self.literal(0, inst.dtype)})")

    def op_store(self, inst: Inst) -> None:
        param, index, value = inst.srcs
        self.emit(f"{self.v(param)}[{self.v(index)}] = {self.v(value)};")

    def op_atomic(self, inst: Inst) -> None:
        param, index, value = inst.srcs
        self.emit(self.atomic(inst.arg, f"&{self.v(param)}[{self.v(index)}]", self.v(value), param.dtype) + ";")

    def op_alu(self, inst: Inst) -> None:
        srcs = [self.v(s) for s in inst.srcs]
        if inst.dtype == INDEX and inst.arg in _INDEX_OPS and all(
                id(s) in self.index or (s.opc is Opc.CONST and s.dtype == INDEX) for s in inst.srcs):
            self.index.add(id(inst))
            self.define(inst, f"({srcs[0]} {_INDEX_OPS[inst.arg]} {srcs[1]})")
            return
        self.define(inst, self.alu(inst.arg, srcs, inst.srcs[0].dtype, inst.dtype))

    def op_idiv(self, inst: Inst) -> None:
        self.index.add(id(inst))
        self.define(inst, f"({self.v(inst.srcs[0])} / {self.v(inst.srcs[1])})")

    def op_mod(self, inst: Inst) -> None:
        self.index.add(id(inst))
        self.define(inst, f"({self.v(inst.srcs[0])} % {self.v(inst.srcs[1])})")

    def op_cast(self, inst: Inst) -> None:
        src = inst.srcs[0]
        self.define(inst, self.cast(self.v(src), src.dtype, inst.dtype))

    def op_bitcast(self, inst: Inst) -> None:
        src = inst.srcs[0]
        self.define(inst, self.bitcast(self.v(src), src.dtype, inst.dtype))

    def op_define_acc(self, inst: Inst) -> None:
        name = f"acc{inst.id}"
        self.names[id(inst)] = name
        self.emit(f"{self.ctype(inst.dtype)} {name} = {self.literal(inst.arg, inst.dtype)};")

    def op_acc_update(self, inst: Inst) -> None:
        acc, value = inst.srcs
        self.emit(f"{self.v(acc)} = {self.alu(inst.arg, [self.v(acc), self.v(value)], acc.dtype, acc.dtype)};")

    def op_acc_read(self, inst: Inst) -> None:
        self.define(inst, self.v(inst.srcs[0]))

    def op_define_local(self, inst: Inst) -> None:
        if id(inst) in self.names:   # declared at the top already (shared_at_function_scope)
            return
        name = f"local{inst.id}"
        self.names[id(inst)] = name
        if self.program.target == "cpu":  # private to the global id: a plain array
            self.emit(f"{self.ctype(inst.dtype)} {name}[{inst.arg}];")
        else:
            self.emit(self.shared(self.ctype(inst.dtype), name, inst.arg))

    def op_local_load(self, inst: Inst) -> None:
        local, index = inst.srcs
        self.define(inst, f"{self.v(local)}[{self.v(index)}]")

    def op_local_store(self, inst: Inst) -> None:
        local, index, value = inst.srcs
        self.emit(f"{self.v(local)}[{self.v(index)}] = {self.v(value)};")

    def op_barrier(self, inst: Inst) -> None:
        self.emit(self.barrier())

    # -- expressions
    def alu(self, op: Op, a: list[str], operand: np.dtype, dtype: np.dtype) -> str:
        """The C expression of `op` on operand expressions `a` (of dtype `operand`) giving `dtype`."""
        if op is Op.WHERE:
            return f"({a[0]} ? {a[1]} : {a[2]})"
        if op is Op.NOT:
            return f"!({self.to_float(a[0]) if operand == F16 else a[0]})"
        if op in _CMP:
            x = [self.to_float(s) for s in a] if operand == F16 else a
            return f"({x[0]} {_CMP[op]} {x[1]})"
        if dtype == F16:
            return self.from_float(_FLOAT[op](self, [self.to_float(s) for s in a], F32), F32)
        return _BY_KIND[dtype.kind][op](self, a, dtype)

    def cast(self, expr: str, src: np.dtype, dst: np.dtype) -> str:
        if src == dst:
            return expr
        if dst == F16:
            if src == BOOL:
                return self.from_float(f"({expr} ? 1.0f : 0.0f)", F32)
            return self.from_float(expr if src in (F32, F64) else f"(double){expr}", src if src in (F32, F64) else F64)
        if src == F16:
            return f"({self.to_float(expr)} != 0.0f)" if dst == BOOL else f"(({self.ctype(dst)}){self.to_float(expr)})"
        if dst == BOOL:
            return f"({expr} != 0)"
        return f"(({self.ctype(dst)}){expr})"


# --- the ALU ops per operand kind, besides WHERE, NOT and the comparisons (`alu`) -------------

Spell = Callable[[CStyleRenderer, list[str], np.dtype], str]   # (renderer, operands, dtype) -> C expression


def _fmt(template: str) -> Spell:
    """An expression from a template: {0}, {1} are the operands, {t} the C type, {u} its unsigned
    twin (ints), {bits} its width and {top} the index of its top bit."""
    return lambda r, a, dt: template.format(*a, t=r.ctype(dt), u=r.unsigned.get(dt, ""), bits=8 * dt.itemsize,
                                            top=8 * dt.itemsize - 1)


def _call(name: str) -> Spell:
    """`name` a helper of C_HELPERS (ug_<name>_<type suffix>), called on the operands."""
    return lambda r, a, dt: f"{r.helper(name, dt)}({', '.join(a)})"


def _libm(op: Op) -> Spell:
    return lambda r, a, dt: f"{r.math(op, dt)}({', '.join(a)})"


_LIBM = {Op.EXP: "exp", Op.LOG: "log", Op.SQRT: "sqrt", Op.SIN: "sin", Op.COS: "cos", Op.TANH: "tanh",
         Op.ABS: "fabs", Op.POW: "pow", Op.FLOOR: "floor", Op.CEIL: "ceil", Op.TRUNC: "trunc", Op.RINT: "rint",
         Op.FMOD: "fmod"}
_FLOAT: dict[Op, Spell] = {
    **{op: _libm(op) for op in _LIBM},
    Op.NEG: _fmt("(-{0})"),
    Op.RECIP: lambda r, a, dt: f"(1.0{r.float_suffixes.get(dt, '')} / {a[0]})",
    Op.ADD: _fmt("({0} + {1})"),
    Op.SUB: _fmt("({0} - {1})"),
    Op.MUL: _fmt("({0} * {1})"),
    Op.DIV: _fmt("({0} / {1})"),
    Op.MAX: _call("max"),
    Op.MIN: _call("min"),
}
_INT: dict[Op, Spell] = {
    # add/sub/mul/neg/abs wrap: computed in the unsigned type (signed overflow is C's UB)
    Op.NEG: _fmt("(({t})(0u - ({u}){0}))"),
    Op.RECIP: _call("irecip"),
    Op.ABS: _fmt("(({t})({0} < 0 ? 0u - ({u}){0} : ({u}){0}))"),
    Op.ADD: _fmt("(({t})(({u}){0} + ({u}){1}))"),
    Op.SUB: _fmt("(({t})(({u}){0} - ({u}){1}))"),
    Op.MUL: _fmt("(({t})(({u}){0} * ({u}){1}))"),
    Op.DIV: _call("floordiv"),
    Op.POW: _call("ipow"),
    Op.MAX: _fmt("({0} > {1} ? {0} : {1})"),
    Op.MIN: _fmt("({0} < {1} ? {0} : {1})"),
    Op.INVERT: _fmt("(~{0})"),
    Op.AND: _fmt("({0} & {1})"),
    Op.OR: _fmt("({0} | {1})"),
    Op.XOR: _fmt("({0} ^ {1})"),
    # a count outside [0, bits) (negative: huge as unsigned) gives 0 for <<, the sign for >>
    # (a shift by bits - 1); C leaves such shifts undefined, so they are never made
    Op.SHL: _fmt("(({u}){1} < {bits}u ? ({t})(({u}){0} << {1}) : 0)"),
    Op.SHR: _fmt("({0} >> (({u}){1} < {bits}u ? {1} : {top}))"),
}
_UINT: dict[Op, Spell] = {
    **{op: spell for op, spell in _INT.items() if op is not Op.RECIP},   # (uint RECIP is never built)
    Op.ABS: _fmt("{0}"),
    Op.DIV: _fmt("({1} == 0 ? ({t})0 : ({t})({0} / {1}))"),
    Op.INVERT: _fmt("(({t})~{0})"),
    Op.SHR: _fmt("(({u}){1} < {bits}u ? ({t})({0} >> {1}) : ({t})0)"),   # logical
}
_BOOL: dict[Op, Spell] = {
    Op.ABS: _fmt("{0}"),
    Op.ADD: _fmt("({0} || {1})"),
    Op.MUL: _fmt("({0} && {1})"),
    Op.MAX: _fmt("({0} || {1})"),
    Op.MIN: _fmt("({0} && {1})"),
    Op.AND: _fmt("({0} && {1})"),
    Op.OR: _fmt("({0} || {1})"),
    Op.XOR: _fmt("({0} != {1})"),
}
_BY_KIND = {FLOAT: _FLOAT, INT: _INT, UINT: _UINT, BOOL_KIND: _BOOL}
_EVERY_KIND = {Op.WHERE, Op.NOT, *_CMP}
check_alu_tables({kind: set(table) | _EVERY_KIND for kind, table in _BY_KIND.items()}, "C-style renderer")
