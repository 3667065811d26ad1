"""The `cuda` device on the backend kit: the GPU lowering, CUDARenderer, NVRTC (its binaries
cached on disk by the core), the driver API's memory in the core's pool, and the driver API's
module loading and launches. What stays CUDA's own: matmul (cuBLAS or a tiled kernel),
copies ordered on the device's stream, and memory wrapped from other libraries (interop).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import numpy as np

from ug_core.kit import Buffer, KitDevice, MatmulSpec, Refusing, env_flag, env_int, forked_message

from . import __version__, nvrtc
from .compiler import Config
from .driver import Context
from .memory import Allocation, CudaAllocator
from .render import CUDARenderer
from .runtime import CudaRuntime


class CudaDevice(KitDevice):
    raw: CudaAllocator
    runtime: CudaRuntime
    fft_shared_bytes = 48 * 1024   # (static __shared__ memory a block may declare: a transform's rows that fit run as one program)

    def __init__(self, ordinal: int | None = None, config: Config | None = None, driver: Any = None):
        """GPU `ordinal` (default $UG_CUDA_DEVICE, else 0); `driver`: cuda.bindings.driver, or a
        test's stand-in."""
        self.context = ctx = Context(env_int("UG_CUDA_DEVICE", 0, minimum=0) if ordinal is None else ordinal, driver)
        self.config = config or Config(fast_math=env_flag("UG_CUDA_FAST_MATH", False))
        self.target = nvrtc.target_for(*ctx.cc)   # sm_XY (CUBIN) or compute_XY (PTX, JIT by the driver)
        sm = f"sm_{ctx.cc[0]}{ctx.cc[1]}"
        info = replace(
            self.config.device_info(),
            # part of the compile cache key: the same kernel compiles differently per GPU
            version=f"{__version__} ({ctx.gpu_name}, {sm}, driver {ctx.driver_version})",
            description=(f"{ctx.gpu_name}, compute capability {ctx.cc[0]}.{ctx.cc[1]}, driver CUDA "
                         f"{ctx.driver_version}, NVRTC {'%d.%d' % nvrtc.version()} -> {self.target}"))
        super().__init__(info, functools.partial(CUDARenderer, self.config.render_options()),
                         nvrtc.NVRTCCompiler(self.target, self.config.nvrtc_options()),
                         CudaAllocator(ctx), CudaRuntime(ctx))
        self._blas: Any = None                            # ug_cuda.matmul's cuBLAS handle (False: none)

    def __repr__(self) -> str:
        return f"<CudaDevice {self.description}>"

    def after_fork(self, parent: int) -> bool:
        """CUDA does not survive a fork: the child's driver calls fail, and it cannot initialize
        CUDA again. Every driver call of this object raises a clear error from now on (its
        context's driver module is a faults.Refusing; cuBLAS, which the driver does not reach,
        is dropped), and so does making a new device in the child (driver.FORKED_FROM)."""
        from . import driver
        driver.FORKED_FROM = parent
        self.context.drv = Refusing(forked_message(
            "cuda", parent, "CUDA cannot be used in a forked child, so neither this device nor its tensors work here"))
        self._blas = False
        return False

    def load_source(self, source: str, function: str) -> tuple[Any, Any]:
        """Compile (disk-cached) and load CUDA C of ug-cuda's own; returns (module, function)."""
        return self.compiler.load(source, function, lambda image: self.runtime.load_function(image, function))

    # -- memory: the core's pool, with CUDA's own parts
    def free(self, handle: Allocation) -> None:
        if handle.owner is None:  # foreign memory (interop, zero-copy) is its owner's to free
            self.memory.free(handle)

    def copy_out(self, handle: Allocation, dst: np.ndarray) -> None:
        self.raw.copy_out(handle, dst)  # queued after the work that computes it: no wait first

    def empty_cache(self) -> None:
        """Give every pooled free block back to the driver."""
        self.memory.empty_cache()

    # -- matmul: cuBLAS, else the tiled kernel
    def matmul(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec) -> None:
        from . import matmul

        matmul.run(self, out, a, b, spec)
