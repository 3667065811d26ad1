"""The `c` device, the backend kit's worked example: loop IR -> C99 (the kit's CStyleRenderer) ->
the system C compiler (`$CC`, else cc, gcc or clang) -> a shared library that the kit's
SharedLibraryRuntime calls on host memory (NumpyAllocator). The kit does the rest."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

from ug_core.kit import (C_HELPERS, C_INT_HELPERS, C_SOFT_HALF, NATIVE_MATH, SUPPORTED, CompileError, Compiler,
                         CStyleRenderer, DeviceInfo, KitDevice, LowerOptions, NumpyAllocator, SharedLibraryRuntime,
                         elf_problem, native_elf_kind)

PRELUDE = ("#include <math.h>\n#include <stdbool.h>\n#include <string.h>\n#define UG_FN static inline\n" + C_HELPERS
           + C_SOFT_HALF + C_INT_HELPERS) + """
UG_FLOAT_HELPERS(f32, float)
UG_FLOAT_HELPERS(f64, double)
UG_BITCAST(f32, float, i32, int) UG_BITCAST(i32, int, f32, float)
UG_BITCAST(f64, double, i64, long long) UG_BITCAST(i64, long long, f64, double)
"""


class CRenderer(CStyleRenderer):   # the kit's defaults are C99's; float16 is its bits, converted in software
    ctypes = {**CStyleRenderer.ctypes, np.dtype(np.float16): "unsigned short"}

    def to_float(self, expr: str) -> str:
        return f"ug_half_to_float({expr})"

    def from_float(self, expr: str, src: np.dtype) -> str:
        return f"ug_double_to_half({expr})"


def find_compiler() -> str:
    for name in ([os.environ["CC"]] if os.environ.get("CC") else []) + ["cc", "gcc", "clang"]:
        if path := shutil.which(name):
            return path
    raise RuntimeError("no C compiler: set $CC or install cc, gcc or clang (apt-get install gcc)")


class CCompiler(Compiler):
    name, suffix = "c", "so"
    flags = ["-O2", "-shared", "-fPIC", "-fno-math-errno", "-ffp-contract=off"]

    def __init__(self) -> None:
        self.cc = find_compiler()
        version = subprocess.run([self.cc, "--version"], capture_output=True, text=True).stdout.splitlines()
        self.version, self.kind = version[0] if version else self.cc, native_elf_kind()

    def identity(self) -> str:   # all but the source that the library depends on: the prelude too
        return " ".join([self.version, *self.flags, hashlib.sha256(PRELUDE.encode()).hexdigest()])

    def compile(self, source: str, name: str) -> bytes:
        with tempfile.TemporaryDirectory(prefix="ug-c-") as tmp:
            src, lib = os.path.join(tmp, "k.c"), os.path.join(tmp, "k.so")
            with open(src, "w") as f:
                f.write(PRELUDE + source + "\n")
            done = subprocess.run([self.cc, *self.flags, "-o", lib, src, "-lm"], capture_output=True, text=True)
            if done.returncode != 0:
                raise CompileError(f"{self.cc} failed on {name}:\n{done.stderr}", source)
            with open(lib, "rb") as f:
                return f.read()

    def validate(self, binary: bytes) -> str | None:
        return elf_problem(binary, self.kind)


def make_device(version: str) -> KitDevice:
    compiler = CCompiler()
    # float sums add blocks of 4 (C compilers keep their order: no vector lanes to help); libm's
    # exp, log, ... are accurate (NATIVE_MATH)
    info = DeviceInfo("c", frozenset(SUPPORTED), LowerOptions(target="cpu", sum_block=4), f"{version}+{compiler.version}",
                      compiler.version, capabilities=frozenset({NATIVE_MATH}))
    return KitDevice(info, CRenderer, compiler, NumpyAllocator(), SharedLibraryRuntime("c"))
