"""Loading and launching: a CUBIN or PTX image -> a module's function (cuModuleLoadData), and
cuLaunchKernel with the program's grid and block on the device's stream. The kit's `Runtime`."""

from __future__ import annotations

import ctypes
import functools
from typing import Any

from ug_core.kit import LoopProgram, Runtime

from .driver import Context, CudaError
from .memory import Allocation


class LoadedKernel:
    """A loaded kernel: module + function + launch geometry. (The kit keeps the variant without
    __restrict__ for launches that pass one buffer twice: another LoadedKernel.)"""

    __slots__ = ("function", "module", "grid", "block", "name")

    def __init__(self, function: Any, module: Any, grid: tuple[int, int, int], block: tuple[int, int, int], name: str):
        self.function, self.module, self.grid, self.block, self.name = function, module, grid, block, name


@functools.lru_cache(maxsize=None)
def ctypes_array(ctype: type, n: int) -> type:
    """The ctypes type `ctype * n`, made once: such a type is a reference cycle (the type and its
    dict), so one made per launch would leave garbage for the cyclic gc after every launch."""
    return ctype * n


def _pad3(t: tuple[int, ...]) -> tuple[int, int, int]:
    t = tuple(t) + (1,) * (3 - len(t))
    return (int(t[0]), int(t[1]), int(t[2]))


class CudaRuntime(Runtime):
    def __init__(self, context: Context):
        self.context = context

    def load(self, binary: bytes, program: LoopProgram, name: str) -> LoadedKernel:
        module, function = self.load_function(binary, name)
        return LoadedKernel(function, module, _pad3(program.global_size), _pad3(program.local_size), name)

    def load_function(self, image: bytes, name: str) -> tuple[Any, Any]:
        """(module, function `name`) of a CUBIN or PTX image."""
        ctx = self.context
        ctx.current()
        kind = "cubin" if image.startswith(b"\x7fELF") else "ptx"
        err, module = ctx.drv.cuModuleLoadData(image if kind == "cubin" else image.rstrip(b"\0") + b"\0")
        if int(err) != 0:
            raise CudaError(f"the CUDA driver ({ctx.driver_version}) could not load the {kind} of {name}: {ctx.error(err)}")
        return module, ctx.check(ctx.drv.cuModuleGetFunction(module, name.encode()), "cuModuleGetFunction")

    def launch(self, loaded: LoadedKernel, program: LoopProgram, handles: list[Allocation]) -> None:
        ptrs = [h.ptr for h in handles]
        values = ctypes_array(ctypes.c_uint64, len(ptrs))(*ptrs)
        base = ctypes.addressof(values)
        params = ctypes_array(ctypes.c_void_p, len(ptrs))(*[base + 8 * i for i in range(len(ptrs))])
        self.call(loaded.function, loaded.grid, loaded.block, params)  # copies the argument values before returning

    def call(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int], args: ctypes.Array | None,
             shared: int = 0) -> None:
        """cuLaunchKernel with `args` a ctypes array of void* (each pointing at one argument's value)."""
        ctx = self.context
        ctx.current()
        ctx.check(ctx.drv.cuLaunchKernel(function, *grid, *block, shared, ctx.stream,
                                         ctypes.addressof(args) if args is not None else 0, 0), "cuLaunchKernel")

    def synchronize(self) -> None:
        self.context.synchronize()
