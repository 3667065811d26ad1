"""A C backend written for op-set version 1 (the loop IR of 2026-11-23, the backend kit's first
release), kept as the regression test of the op-set contract (ug_core.opset): the core legalizes
everything newer into what this renderer spells and guards what it does not declare.

It is the ug-c of that day (loop IR -> C -> the system C compiler -> ctypes, on the kit's cpu
target), but with a renderer of its own, frozen as version 1 had it: the 21 opcodes of version 1
(no GATED_LOAD, no ATOMIC), the 22 ALU ops on float16/32/64, int32, int64 and bool (no FLOOR, no
bitwise ops, no shifts, no unsigned ints, no product accumulators), and C spelled as a naive
author spells it: `a / b` for int division (a SIGFPE at b == 0 or INT_MIN / -1), `1 / a` for an
int reciprocal, a power loop that ignores negative exponents, plain C casts of floats to ints. It
declares no capability beyond libm's accuracy (NATIVE_MATH), so the core must keep every such
operand away from it. Adapted only where the kit's API moved since: the ALU table is checked
against its version (kit.check_alu_tables) instead of ops.ALU, and a loaded library is closed
when its kernel goes (ug-c's fix of 2026-11-27: the whole kit compiles thousands of kernels).

Loaded as a pytest plugin (`-p c_v1_device`) it registers the device `c_v1`, in-process (not
installed), so the conformance kit runs on it: tests/opset_v1/test_opset_v1_device.py.
"""
from __future__ import annotations

import _ctypes
import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import weakref
from typing import Any

import numpy as np

import ug_core as ug
from ug_core import diskcache
from ug_core.device import CompileError
from ug_core.kit import (C_SOFT_HALF, NATIVE_MATH, Compiler, DeviceInfo, KitDevice, NumpyAllocator, Renderer,
                         RenderError, Runtime)
from ug_core.kit.renderer import check_alu_tables
from ug_core.loop_ir import Inst, LoopProgram, Special
from ug_core.lower import LowerOptions
from ug_core.ops import Op

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(bool)
DTYPES = frozenset({F16, F32, F64, I32, I64, BOOL})
CTYPE = {F16: "unsigned short", F32: "float", F64: "double", I32: "int", I64: "long long", BOOL: "bool"}
UNSIGNED = {I32: "unsigned int", I64: "unsigned long long"}
SUFFIX = {F32: "f32", F64: "f64", I32: "i32", I64: "i64"}

PRELUDE = "#include <math.h>\n#include <stdbool.h>\n#include <string.h>\n#define UG_FN static inline\n" + C_SOFT_HALF + r"""
#define UG_INT(S, T, U) \
UG_FN T ug_floordiv_##S(T a, T b) { T q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; } \
UG_FN T ug_ipow_##S(T base, T e) { U r = 1, b = (U)base; while (e > 0) { if (e & 1) r *= b; b *= b; e >>= 1; } return (T)r; }
#define UG_FLOAT(S, T) \
UG_FN T ug_max_##S(T a, T b) { if (a > b) return a; if (b > a) return b; return (a == b && a != 0) ? a : a + b; } \
UG_FN T ug_min_##S(T a, T b) { if (a < b) return a; if (b < a) return b; return (a == b && a != 0) ? a : -((-a) + (-b)); }
#define UG_BITCAST(S, T, D, U) UG_FN U ug_bitcast_##S##_##D(T x) { U r; memcpy(&r, &x, sizeof r); return r; }
UG_INT(i32, int, unsigned int) UG_INT(i64, long long, unsigned long long)
UG_FLOAT(f32, float) UG_FLOAT(f64, double)
UG_BITCAST(f32, float, i32, int) UG_BITCAST(i32, int, f32, float)
UG_BITCAST(f64, double, i64, long long) UG_BITCAST(i64, long long, f64, double)
"""

_CMP = {Op.CMPLT: "<", Op.CMPLE: "<=", Op.CMPEQ: "==", Op.CMPNE: "!="}
_LIBM = {Op.EXP: "exp", Op.LOG: "log", Op.SQRT: "sqrt", Op.SIN: "sin", Op.COS: "cos", Op.TANH: "tanh",
         Op.ABS: "fabs", Op.POW: "pow"}
_FLOAT = {**{op: fn + "{f}({0})" for op, fn in _LIBM.items() if op is not Op.POW},
          Op.POW: "pow{f}({0}, {1})", Op.NEG: "(-{0})", Op.RECIP: "(1.0{f} / {0})", Op.ADD: "({0} + {1})",
          Op.SUB: "({0} - {1})", Op.MUL: "({0} * {1})", Op.DIV: "({0} / {1})", Op.MAX: "ug_max_{s}({0}, {1})",
          Op.MIN: "ug_min_{s}({0}, {1})"}
_INT = {Op.NEG: "(({t})(0u - ({u}){0}))", Op.RECIP: "(1 / {0})", Op.ABS: "(({t})({0} < 0 ? 0u - ({u}){0} : ({u}){0}))",
        Op.ADD: "(({t})(({u}){0} + ({u}){1}))", Op.SUB: "(({t})(({u}){0} - ({u}){1}))",
        Op.MUL: "(({t})(({u}){0} * ({u}){1}))", Op.DIV: "ug_floordiv_{s}({0}, {1})", Op.POW: "ug_ipow_{s}({0}, {1})",
        Op.MAX: "({0} > {1} ? {0} : {1})", Op.MIN: "({0} < {1} ? {0} : {1})"}
_BOOL = {Op.ABS: "{0}", Op.ADD: "({0} || {1})", Op.MUL: "({0} && {1})", Op.MAX: "({0} || {1})", Op.MIN: "({0} && {1})"}
_EVERY = {Op.WHERE, Op.NOT, *_CMP}
check_alu_tables({"f": set(_FLOAT) | _EVERY, "i": set(_INT) | _EVERY, "b": set(_BOOL) | _EVERY}, "c_v1 renderer",
                 version=1)


class CV1Renderer(Renderer):
    op_set_version = 1   # the op set it was written for: the core hands it nothing newer

    def render(self, program: LoopProgram, name: str) -> str:
        self.program, self.lines, self.depth, self.closers = program, [], 1, 0
        head = [f"void {name}(void **args, long long gid_start, long long gid_end) {{"]
        head += [f"  {'' if p.is_output else 'const '}{CTYPE[p.dtype]}* b{i} = args[{i}];"
                 for i, p in enumerate(program.params)]
        self.walk(program)
        return "\n".join([*head, *self.lines, *["  " * d + "}" for d in range(self.closers, 0, -1)], "}"])

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def define(self, inst: Inst, expr: str) -> None:
        self.emit(f"const {CTYPE[inst.dtype]} v{inst.id} = {expr};")
        self.names[id(inst)] = f"v{inst.id}"

    def literal(self, value: Any, dt: np.dtype) -> str:
        if dt == BOOL:
            return "true" if value else "false"
        if dt.kind == "f":
            value = float(dt.type(value))
            f = "f" if dt != F64 else ""
            text = (f"__builtin_nan{f}(\"\")" if value != value else f"({'-' if value < 0 else ''}__builtin_inf{f}())"
                    if abs(value) == float("inf") else value.hex() + f)
            return f"ug_double_to_half({text})" if dt == F16 else text
        value = int(value)
        return f"({value + 1}{'LL' if dt == I64 else ''} - 1)" if value in (-2**31, -2**63) else f"{value}LL"

    def half(self, expr: str, dt: np.dtype) -> str:
        return f"ug_half_to_float({expr})" if dt == F16 else expr

    def alu(self, op: Op, a: list[str], operand: np.dtype, dt: np.dtype) -> str:
        if op is Op.WHERE:
            return f"({a[0]} ? {a[1]} : {a[2]})"
        if op is Op.NOT or op in _CMP:   # (float16 operands are compared as floats)
            a = [self.half(x, operand) for x in a]
            return f"!({a[0]})" if op is Op.NOT else f"({a[0]} {_CMP[op]} {a[1]})"
        if dt.kind == "f":
            return _FLOAT[op].format(*a, f="f" if dt == F32 else "", s=SUFFIX[dt])
        if dt == BOOL:
            return _BOOL[op].format(*a)
        return _INT[op].format(*a, t=CTYPE[dt], u=UNSIGNED[dt], s=SUFFIX[dt])

    def cast(self, expr: str, src: np.dtype, dst: np.dtype) -> str:
        if dst == F16:
            return f"ug_double_to_half((double)({self.half(expr, src)}))"
        if dst == BOOL:
            return f"({self.half(expr, src)} != 0)"
        return f"(({CTYPE[dst]}){self.half(expr, src)})"

    def op_const(self, inst: Inst) -> None:
        self.names[id(inst)] = self.literal(inst.arg, inst.dtype)

    def op_param(self, inst: Inst) -> None:
        self.names[id(inst)] = f"b{inst.arg}"

    def op_special(self, inst: Inst) -> None:   # the cpu target: a loop over the range of global ids
        if inst.arg != (Special.GLOBAL_ID, 0):
            raise RenderError(f"c_v1 runs the cpu target only (a {inst.arg} id)")
        self.emit(f"for (long long v{inst.id} = gid_start; v{inst.id} < gid_end; v{inst.id}++) {{")
        self.names[id(inst)] = f"v{inst.id}"
        self.depth, self.closers = self.depth + 1, self.closers + 1

    def op_range(self, inst: Inst) -> None:
        start, end = (self.v(s) for s in inst.srcs)
        self.names[id(inst)] = name = f"v{inst.id}"
        self.emit(f"for (long long {name} = {start}; {name} < {end}; {name} += {inst.arg}LL) {{")
        self.depth += 1

    def op_if(self, inst: Inst) -> None:
        self.emit(f"if ({self.v(inst.srcs[0])}) {{")
        self.depth += 1

    def op_endrange(self, inst: Inst) -> None:
        self.depth -= 1
        self.emit("}")

    op_endif = op_endrange

    def op_load(self, inst: Inst) -> None:
        self.define(inst, f"{self.v(inst.srcs[0])}[{self.v(inst.srcs[1])}]")

    op_local_load = op_load

    def op_store(self, inst: Inst) -> None:
        param, index, value = (self.v(s) for s in inst.srcs)
        self.emit(f"{param}[{index}] = {value};")

    op_local_store = op_store

    def op_alu(self, inst: Inst) -> None:
        self.define(inst, self.alu(inst.arg, [self.v(s) for s in inst.srcs], inst.srcs[0].dtype, inst.dtype))

    def op_idiv(self, inst: Inst) -> None:
        self.define(inst, f"({self.v(inst.srcs[0])} / {self.v(inst.srcs[1])})")

    def op_mod(self, inst: Inst) -> None:
        self.define(inst, f"({self.v(inst.srcs[0])} % {self.v(inst.srcs[1])})")

    def op_cast(self, inst: Inst) -> None:
        self.define(inst, self.cast(self.v(inst.srcs[0]), inst.srcs[0].dtype, inst.dtype))

    def op_bitcast(self, inst: Inst) -> None:
        src = inst.srcs[0].dtype
        self.define(inst, f"ug_bitcast_{SUFFIX[src]}_{SUFFIX[inst.dtype]}({self.v(inst.srcs[0])})")

    def op_define_acc(self, inst: Inst) -> None:
        self.names[id(inst)] = f"acc{inst.id}"
        self.emit(f"{CTYPE[inst.dtype]} acc{inst.id} = {self.literal(inst.arg, inst.dtype)};")

    def op_acc_update(self, inst: Inst) -> None:
        acc, value = inst.srcs
        self.emit(f"{self.v(acc)} = {self.alu(inst.arg, [self.v(acc), self.v(value)], acc.dtype, acc.dtype)};")

    def op_acc_read(self, inst: Inst) -> None:
        self.define(inst, self.v(inst.srcs[0]))

    def op_define_local(self, inst: Inst) -> None:   # private to the global id: a plain array
        self.names[id(inst)] = f"local{inst.id}"
        self.emit(f"{CTYPE[inst.dtype]} local{inst.id}[{inst.arg}];")

    def op_barrier(self, inst: Inst) -> None:
        raise RenderError("c_v1 runs the cpu target only (a barrier)")


class CV1Compiler(Compiler):
    name, suffix = "c_v1", "so"
    flags = ["-O2", "-shared", "-fPIC", "-fno-math-errno", "-ffp-contract=off"]

    def __init__(self) -> None:
        found = [shutil.which(n) for n in ([os.environ["CC"]] if os.environ.get("CC") else []) + ["cc", "gcc", "clang"]]
        self.cc = next((p for p in found if p), None)
        if self.cc is None:
            raise RuntimeError("no C compiler: set $CC or install cc, gcc or clang")
        version = subprocess.run([self.cc, "--version"], capture_output=True, text=True).stdout.splitlines()
        self.version = version[0] if version else self.cc
        with open(sys.executable, "rb") as f:   # what this machine loads: the interpreter's own ELF header
            own = diskcache.elf_kind(f.read(64))
        self.kind = diskcache.ElfKind(own.elf_class, own.data, 3, own.machine)   # ET_DYN: a shared library

    def identity(self) -> str:   # (the prelude is part of every binary)
        return " ".join([self.version, *self.flags, hashlib.sha256(PRELUDE.encode()).hexdigest()[:16]])

    def compile(self, source: str, name: str) -> bytes:
        with tempfile.TemporaryDirectory(prefix="ug-c-v1-") as tmp:
            src, lib = os.path.join(tmp, "k.c"), os.path.join(tmp, "k.so")
            with open(src, "w") as f:
                f.write(PRELUDE + source + "\n")
            done = subprocess.run([self.cc, *self.flags, "-o", lib, src, "-lm"], capture_output=True, text=True)
            if done.returncode != 0:
                raise CompileError(f"{self.cc} failed on {name}:\n{done.stderr}", source)
            with open(lib, "rb") as f:
                return f.read()

    def validate(self, binary: bytes) -> str | None:
        return diskcache.elf_problem(binary, self.kind)


class _Entry:
    __slots__ = ("function", "pointers", "__weakref__")

    def __init__(self, function: Any, pointers: Any):
        self.function, self.pointers = function, pointers


_KERNEL = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.c_longlong, ctypes.c_longlong)


class CV1Runtime(Runtime):
    def load(self, binary: bytes, program: LoopProgram, name: str) -> Any:
        with tempfile.NamedTemporaryFile(prefix="ug-c-v1-", suffix=".so") as f:
            f.write(binary)
            f.flush()
            handle = _ctypes.dlopen(f.name, ctypes.RTLD_LOCAL)  # type: ignore[attr-defined]
        entry = _Entry(_KERNEL(_ctypes.dlsym(handle, name)), ctypes.c_void_p * len(program.params))  # type: ignore[attr-defined]
        weakref.finalize(entry, _ctypes.dlclose, handle)  # type: ignore[attr-defined]   # closed with its kernel
        return entry

    def launch(self, loaded: Any, program: LoopProgram, handles: list[np.ndarray]) -> None:
        loaded.function(loaded.pointers(*[h.ctypes.data for h in handles]), 0, program.global_size[0])


def make_device() -> KitDevice:
    compiler = CV1Compiler()
    info = DeviceInfo("c_v1", DTYPES, LowerOptions(target="cpu", sum_block=4), f"1+{compiler.version}",
                      compiler.version, capabilities=frozenset({NATIVE_MATH}))   # libm's exp, log, ...
    return KitDevice(info, CV1Renderer, compiler, NumpyAllocator(), CV1Runtime())


class _Plugin:
    @ug.hookimpl
    def ug_register_devices(self, register: Any) -> None:
        register(ug.DeviceSpec(name="c_v1", factory=make_device, plugin="c-v1-test", version="1", priority=950))


ug.registry.register_plugin(_Plugin(), name="c-v1-test")
