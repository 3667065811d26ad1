"""The `c` device on the backend kit: each part is what makes C differ, nothing else.

Kernels are C functions `void k(void **args, long long gid_start, long long gid_end)` looping
over a range of global ids (the kit's cpu target), compiled into a shared library by the
system C compiler (`$CC`, else cc, gcc or clang on PATH) and called through ctypes. Buffers
are host memory (the kit's NumpyAllocator) pooled by the core; the core caches the libraries on disk.
"""

from __future__ import annotations

import _ctypes
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import weakref
from typing import Any

import numpy as np

from ug_core import diskcache
from ug_core.device import CompileError
from ug_core.dtypes import SUPPORTED
from ug_core.kit import (C_HELPERS, C_SOFT_HALF, NATIVE_MATH, Compiler, CStyleRenderer, DeviceInfo, KitDevice,
                         NumpyAllocator, Runtime)
from ug_core.kit.cstyle import C_INT_HELPERS
from ug_core.loop_ir import LoopProgram
from ug_core.lower import LowerOptions

PRELUDE = ("#include <math.h>\n#include <stdbool.h>\n#include <string.h>\n#define UG_FN static inline\n" + C_HELPERS
           + C_SOFT_HALF + C_INT_HELPERS) + """
UG_FLOAT_HELPERS(f32, float)
UG_FLOAT_HELPERS(f64, double)
UG_BITCAST(f32, float, i32, int) UG_BITCAST(i32, int, f32, float)
UG_BITCAST(f64, double, i64, long long) UG_BITCAST(i64, long long, f64, double)
"""

SUM_BLOCK = 4  # float sums add blocks of 4 (the C compiler keeps their order: no vector lanes to help)


class CRenderer(CStyleRenderer):
    restrict = ""  # an in-place write passes one buffer as input and output
    ctypes = {**CStyleRenderer.ctypes, np.dtype(np.float16): "unsigned short"}  # its bits (C99 has no half)

    def to_float(self, expr: str) -> str:
        return f"ug_half_to_float({expr})"

    def from_float(self, expr: str, src: np.dtype) -> str:
        return f"ug_double_to_half({expr})"

    def head(self, name: str, program: LoopProgram) -> str:
        params = [f"  {'' if p.is_output else 'const '}{self.ctype(p.dtype)}* b{i} = args[{i}];"
                  for i, p in enumerate(program.params)]
        return "\n".join([f"void {name}(void **args, long long gid_start, long long gid_end) {{", *params])


def find_compiler() -> str:
    for name in ([os.environ["CC"]] if os.environ.get("CC") else []) + ["cc", "gcc", "clang"]:
        path = shutil.which(name)
        if path:
            return path
    raise RuntimeError("no C compiler: set $CC or install cc, gcc or clang (apt-get install gcc)")


class CCompiler(Compiler):
    name, suffix = "c", "so"
    flags = ["-O2", "-shared", "-fPIC", "-fno-math-errno", "-ffp-contract=off"]

    def __init__(self) -> None:
        self.cc = find_compiler()
        version = subprocess.run([self.cc, "--version"], capture_output=True, text=True).stdout.splitlines()
        self.version = version[0] if version else self.cc
        with open(sys.executable, "rb") as f:  # what this machine loads: the interpreter's own ELF header
            own = diskcache.elf_kind(f.read(64))
        self.kind = diskcache.ElfKind(own.elf_class, own.data, 3, own.machine)  # ET_DYN: a shared library

    def identity(self) -> str:
        return " ".join([self.version, *self.flags])

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
        return diskcache.elf_problem(binary, self.kind)


class _Entry:
    """A loaded kernel: its function and its argument array type. Its library is closed
    (dlclose) when the last holder (a Program, a launcher) lets it go: with every library kept
    loaded, a process running the test suite ran out of memory mappings (vm.max_map_count, a
    few maps per library) after some 10,000 kernels ("cannot apply additional memory protection
    after relocation: Cannot allocate memory")."""

    __slots__ = ("function", "pointers", "__weakref__")

    def __init__(self, function: Any, pointers: Any):
        self.function, self.pointers = function, pointers


# every kernel's signature: void k(void **args, long long gid_start, long long gid_end). One
# prototype for all: a ctypes.CDLL per library would make a class of its own per library (a
# reference cycle, freed by the garbage collector only)
_KERNEL = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.c_longlong, ctypes.c_longlong)


class CRuntime(Runtime):
    def load(self, binary: bytes, program: LoopProgram, name: str) -> Any:
        with tempfile.NamedTemporaryFile(prefix="ug-c-", suffix=".so") as f:
            f.write(binary)
            f.flush()
            handle = _ctypes.dlopen(f.name, ctypes.RTLD_LOCAL)  # type: ignore[attr-defined]
        try:
            function = _KERNEL(_ctypes.dlsym(handle, name))  # type: ignore[attr-defined]
        except Exception:
            _ctypes.dlclose(handle)  # type: ignore[attr-defined]
            raise
        # (a ctypes array type made per call would be a reference cycle)
        entry = _Entry(function, ctypes.c_void_p * len(program.params))
        weakref.finalize(entry, _ctypes.dlclose, handle)  # type: ignore[attr-defined]
        return entry

    def launch(self, loaded: Any, program: LoopProgram, handles: list[np.ndarray]) -> None:
        loaded.function(loaded.pointers(*[h.ctypes.data for h in handles]), 0, program.global_size[0])


def make_device(version: str) -> KitDevice:
    compiler = CCompiler()
    info = DeviceInfo("c", frozenset(SUPPORTED), LowerOptions(target="cpu", sum_block=SUM_BLOCK), f"{version}+{compiler.version}",
                      compiler.version, capabilities=frozenset({NATIVE_MATH}))  # libm's exp, log, ...
    return KitDevice(info, CRenderer, compiler, NumpyAllocator(), CRuntime())
