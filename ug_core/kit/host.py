"""Running native code on the host: shared libraries of cpu-target kernels, loaded with dlopen and
called through ctypes, and the ELF header this machine loads (for a Compiler's `validate`).

The calling convention is the one CStyleRenderer's default `head` writes for the cpu target:
`void name(void **args, long long gid_start, long long gid_end)`, `args` the buffers' addresses in
argument order, the function running the global ids in [gid_start, gid_end). A backend compiling
such functions into shared libraries (a C compiler, as plugins/ug-c does, or any language with a
C ABI) needs no runtime of its own: `SharedLibraryRuntime` over host memory (`NumpyAllocator`).
"""

from __future__ import annotations

import _ctypes
import ctypes
import sys
import tempfile
import weakref
from typing import Any

import numpy as np

from ..diskcache import ElfKind, elf_kind
from ..loop_ir import LoopProgram
from .device import Runtime

ET_REL, ET_DYN = 1, 3   # ELF types: an object file, a shared library


def native_elf_kind(e_type: int = ET_DYN) -> ElfKind:
    """The ELF header of a file of type `e_type` this machine loads (the interpreter's own class,
    byte order and machine), for Compiler.validate: diskcache.elf_problem(binary, native_elf_kind())."""
    with open(sys.executable, "rb") as f:
        own = elf_kind(f.read(64))
    return ElfKind(own.elf_class, own.data, e_type, own.machine)


class _Entry:
    """A loaded kernel: its function and its argument array type. Its library is closed
    (dlclose) when the last holder (a Program, a launcher) lets it go: with every library kept
    loaded, a process running the test suite ran out of memory mappings (vm.max_map_count, a
    few maps per library) after some 10,000 kernels ("cannot apply additional memory protection
    after relocation: Cannot allocate memory")."""

    __slots__ = ("function", "pointers", "__weakref__")

    def __init__(self, function: Any, pointers: Any):
        self.function, self.pointers = function, pointers


# every kernel's signature. One prototype for all: a ctypes.CDLL per library would make a class
# of its own per library (a reference cycle, freed by the garbage collector only)
_KERNEL = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.c_longlong, ctypes.c_longlong)


class SharedLibraryRuntime(Runtime):
    """The kit's Runtime for shared libraries of host kernels (the module docstring's calling
    convention), on host memory whose handles are numpy arrays (NumpyAllocator). `backend`: the
    library files' prefix (`ug-<backend>-`, as /proc/self/maps shows them)."""

    def __init__(self, backend: str):
        self.prefix = f"ug-{backend}-"

    def load(self, binary: bytes, program: LoopProgram, name: str) -> Any:
        with tempfile.NamedTemporaryFile(prefix=self.prefix, suffix=".so") as f:
            f.write(binary)
            f.flush()
            handle = _ctypes.dlopen(f.name, ctypes.RTLD_LOCAL)
        try:
            function = _KERNEL(_ctypes.dlsym(handle, name))
        except Exception:
            _ctypes.dlclose(handle)
            raise
        # (a ctypes array type made per call would be a reference cycle)
        entry = _Entry(function, ctypes.c_void_p * len(program.params))
        weakref.finalize(entry, _ctypes.dlclose, handle)
        return entry

    def launch(self, loaded: Any, program: LoopProgram, handles: list[np.ndarray]) -> None:
        loaded.function(loaded.pointers(*[h.ctypes.data for h in handles]), 0, program.global_size[0])
