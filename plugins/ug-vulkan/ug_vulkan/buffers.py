"""Device memory: the kit Allocator of the Vulkan device (one VkBuffer + VkDeviceMemory per
allocation; the kit's CachingAllocator pools them) and host copies.

Where the memory plan maps device buffers (unified memory: integrated GPUs, lavapipe), the
host reads and writes them directly; otherwise (discrete GPUs) through one staging buffer
and a transfer on the queue (memory.choose_memory). Every entry point holds the runtime's
lock and first waits for recorded work: a kernel still queued may read or write the buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ug_core.kit import Allocator

from .context import VulkanContext
from .memory import HOST_VISIBLE, MemoryPlan, choose_memory
from .runtime import VulkanRuntime, serialized


@dataclass
class VkBuffer:
    buffer: Any
    memory: Any
    size: int
    mapped: np.ndarray | None  # uint8 view of the mapped memory (host-visible plans)
    ctx: VulkanContext         # whose VkDevice it is (a launch refuses another's: runtime.foreign_buffer)


class VulkanAllocator(Allocator):
    def __init__(self, ctx: VulkanContext, runtime: VulkanRuntime, staged: bool = False) -> None:
        """staged: copy through a staging buffer even where device memory could be mapped (as on
        a discrete GPU; UG_VULKAN_DISABLE=mapped, for tests)."""
        self.ctx = ctx
        self.runtime = runtime
        self.lock = runtime.lock
        self.staged = staged
        self.plan: MemoryPlan | None = None  # chosen on the first allocation (needs memoryTypeBits)
        self.staging: VkBuffer | None = None

    def _create(self, size: int, usage: int, host: bool = False) -> VkBuffer:
        vk, device = self.ctx.vk, self.ctx.device
        buf = vk.vkCreateBuffer(device, vk.VkBufferCreateInfo(size=size, usage=usage,
                                                              sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        req = vk.vkGetBufferMemoryRequirements(device, buf)
        if self.plan is None:
            self.plan = choose_memory(self.ctx.memory_types, req.memoryTypeBits, self.ctx.device_type)
            if self.staged and self.plan.mapped:
                self.plan = MemoryPlan(self.plan.device_type, False, self.plan.device_type)
        if host:
            type_index = self.plan.staging_type if self.plan.staging_type is not None else self.plan.device_type
        else:
            type_index = self.plan.device_type
        try:
            memory = vk.vkAllocateMemory(device, vk.VkMemoryAllocateInfo(
                allocationSize=req.size, memoryTypeIndex=type_index), None)
        except vk.VkError:
            vk.vkDestroyBuffer(device, buf, None)
            raise MemoryError(f"Vulkan could not allocate {size} bytes on {self.ctx.device_name}") from None
        vk.vkBindBufferMemory(device, buf, memory, 0)
        mapped = None
        if self.ctx.memory_types[type_index] & HOST_VISIBLE and (host or self.plan.mapped):
            ptr = vk.vkMapMemory(device, memory, 0, size, 0)
            mapped = np.frombuffer(ptr, dtype=np.uint8, count=size)
        return VkBuffer(buf, memory, size, mapped, self.ctx)

    def _destroy(self, b: VkBuffer) -> None:
        vk, device = self.ctx.vk, self.ctx.device
        if b.mapped is not None:
            vk.vkUnmapMemory(device, b.memory)
        vk.vkDestroyBuffer(device, b.buffer, None)
        vk.vkFreeMemory(device, b.memory, None)

    @serialized
    def alloc(self, nbytes: int) -> VkBuffer:
        # a size class may round past maxStorageBufferRange, which no descriptor may span; every
        # request the device lets through (VulkanDevice.allocate) fits in the range
        vk = self.ctx.vk
        usage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        return self._create(min(nbytes, self.ctx.max_storage_range), usage)

    @serialized
    def free(self, handle: VkBuffer) -> None:
        self.runtime.synchronize()
        self._destroy(handle)

    def _staging(self, nbytes: int) -> VkBuffer:
        if self.staging is None or self.staging.size < nbytes:
            if self.staging is not None:
                self._destroy(self.staging)
            vk = self.ctx.vk
            self.staging = self._create(max(-(-nbytes // 4) * 4, 1 << 20), vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                                        | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT, host=True)
        return self.staging

    @serialized
    def copy_in(self, handle: VkBuffer, src: np.ndarray) -> None:
        self.runtime.synchronize()
        data = src.view(np.uint8).reshape(-1)
        if handle.mapped is not None:
            handle.mapped[: data.size] = data
            return
        stage = self._staging(data.size)
        stage.mapped[: data.size] = data  # type: ignore[index]
        self.runtime.copy(stage.buffer, handle.buffer, -(-data.size // 4) * 4)

    @serialized
    def copy_out(self, handle: VkBuffer, dst: np.ndarray) -> None:
        self.runtime.synchronize()
        out = dst.view(np.uint8).reshape(-1)
        if handle.mapped is not None:
            out[...] = handle.mapped[: out.size]
            return
        stage = self._staging(out.size)
        self.runtime.copy(handle.buffer, stage.buffer, -(-out.size // 4) * 4)
        out[...] = stage.mapped[: out.size]  # type: ignore[index]
