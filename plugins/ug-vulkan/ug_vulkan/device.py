"""The Vulkan device on the backend kit: DeviceInfo, SpirvRenderer, SpirvAssembler, the kit's
CachingAllocator around VulkanAllocator, and VulkanRuntime (pipelines, batched dispatch).

What it overrides of KitDevice is Vulkan's own:
* `lower_loop`: the device's limits are read at each call (tests shrink them),
  and a workgroup whose shared memory exceeds maxComputeSharedMemorySize is halved until it fits;
* `matmul`: a tiled shared-memory kernel (matmul.py) instead of the kit's reduction;
* `allocate`: refuses what no descriptor can span (maxStorageBufferRange).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ug_core.kit import (NATIVE_F16, Buffer, CompileError, DeviceInfo, Kernel, KitDevice, LoopProgram, LowerOptions,
                         MatmulSpec, Opc, Program, forked_message, lower)

from . import matmul as mm, settings
from .buffers import VulkanAllocator
from .codegen import SpirvAssembler, SpirvRenderer
from .context import VulkanContext
from .plugin import VERSION
from .runtime import VulkanRuntime
from .spirv_tools import disassemble

# float16 ops are the shader's own (shaderFloat16); exp/log/tanh/sin/cos/pow are the core's math
# library (legalization expands them: GLSL.std.450's are loosely specified, and float32 only)
CAPABILITIES = frozenset({NATIVE_F16})


class VulkanDevice(KitDevice):
    def __init__(self, validate: bool | None = None, disable: set[str] | None = None) -> None:
        """validate: run spirv-val on every module (default: $UG_VULKAN_VALIDATE); disable: features
        to pretend the device lacks (default: $UG_VULKAN_DISABLE), to exercise the fallbacks."""
        disable = settings.disabled() if disable is None else set(disable)
        ctx = self.ctx = VulkanContext(disable)
        self.device_name, self.caps = ctx.device_name, ctx.caps
        # the limits lowering and allocation obey (attributes: tests lower them)
        self.max_invocations, self.max_group_size = ctx.max_invocations, ctx.max_group_size
        self.max_group_count, self.max_shared = ctx.max_group_count, ctx.max_shared
        self.max_storage_range = ctx.max_storage_range
        self.local_size = max(1, min(256, self.max_invocations, self.max_group_size[0]))
        self.tile = 16 if self.max_invocations >= 256 and min(self.max_group_size[:2]) >= 16 else 8
        self.assembler = SpirvAssembler(validate)
        runtime = VulkanRuntime(ctx)
        # one storage-buffer binding per kernel argument (the scheduler keeps kernels under
        # max_kernel_buffers; lavapipe's is 32, and past it a launch crashes)
        info = DeviceInfo("vulkan", ctx.dtypes, self.options(self.local_size), VERSION, ctx.description,
                          ctx.max_kernel_buffers, CAPABILITIES)
        super().__init__(info, functools.partial(SpirvRenderer, ctx.caps), self.assembler,
                         VulkanAllocator(ctx, runtime, staged="mapped" in disable), runtime)
        self.fft_shared_bytes = self.max_shared   # (a transform's rows that fit run as one program)
        if "llvmpipe" in self.device_name:   # its loop limiter ends a loop after 65535 trips, silently
            self.max_loop_iterations = 65535

    def after_fork(self, parent: int) -> bool:
        """A Vulkan device does not survive a fork: the child has none of the driver's threads
        (lavapipe's queue thread: a wait for a fence blocked forever), and Vulkan makes no
        promise about objects used across one. This object refuses from now on (its runtime's
        and allocator's lock is a faults.Refusing) and the registry makes a new one on the next
        use of `vulkan`; tensors made before the fork raise when used."""
        message = forked_message("vulkan", parent, "Vulkan objects do not work across a fork, so its tensors "
                                 "cannot be used in the child; new tensors on 'vulkan' get a new device there")
        runtime = self.runtime
        assert isinstance(runtime, VulkanRuntime) and isinstance(self.raw, VulkanAllocator)
        runtime.refuse(message)
        self.raw.lock = runtime.lock
        return False

    # --- memory
    def allocate(self, nbytes: int) -> Any:
        if nbytes > self.max_storage_range:
            raise MemoryError(f"a buffer of {nbytes} bytes exceeds the Vulkan device's maxStorageBufferRange "
                              f"({self.max_storage_range} bytes) on {self.device_name}")
        return self.memory.allocate(nbytes)   # (out of memory, the kit's pool empties itself and retries)

    # --- compiling
    def options(self, local_size: int) -> LowerOptions:
        return LowerOptions(target="gpu", local_size=local_size, max_global_size=self.max_group_count,
                            atomic_int_bits=(32, 64) if self.caps.int64_atomics else (32,))

    def lower_loop(self, kernel: Kernel) -> LoopProgram:
        """Lowered with the largest workgroup whose shared memory fits maxComputeSharedMemorySize."""
        local = self.local_size
        while True:
            program = lower(kernel, self.options(local))
            shared = sum(i.arg * (4 if i.dtype == np.bool_ else i.dtype.itemsize)
                         for i in program.instructions if i.opc is Opc.DEFINE_LOCAL)
            if shared <= self.max_shared or local == 1:
                return program
            local = max(1, local // 2)

    def render(self, kernel: Kernel) -> str:
        program = self.lower(kernel)
        try:
            module = self.render_program(program)
            return f"{program}\n\n{disassemble(self.assembler.compile(module, kernel.name))}"
        except CompileError as e:
            return f"{program}\n\n<not renderable: {e}>"

    def matmul(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec) -> None:
        if out.size == 0:
            return
        def build() -> Program:
            built = mm.build(spec, self.tile, self.max_group_count)
            return self.compile_program(built, built.name)
        key = ("matmul", spec.a_view, spec.b_view, tuple(spec.out_shape), np.dtype(spec.dtype).str)
        self.run(self.cached(key, build), [out, a, b])
