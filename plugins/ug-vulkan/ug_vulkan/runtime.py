"""Pipelines and dispatch: the kit Runtime of the Vulkan device, with its launch batching.

Work is recorded into one command buffer (a compute->compute memory barrier between
dispatches) and submitted when the host needs a result (copy in/out, synchronize) or the
batch is full. Descriptor sets come from a pool that is reset after each submission.
The command buffer, queue, pools and caches are shared, so every entry point holds `lock`
(Vulkan requires external synchronization of them; two threads recording at once crash the
driver). It is reentrant: a buffer's __del__ may free memory inside another entry point.
Every entry point is also a critical section for Ctrl-C (ug_core.faults.defer_interrupts):
a KeyboardInterrupt between vkQueueSubmit and the fence's reset, or between a recorded
dispatch and the count of pending ones, left a state where a later wait returned before the
work had run (wrong results, then a crash).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from ug_core.kit import CompileError, DeviceUnavailableError, LoopProgram, Refusing, Runtime, defer_interrupts

from .context import VulkanContext
from .spirv_tools import disassemble

_F = TypeVar("_F", bound=Callable[..., Any])
MAX_BATCH = 256          # dispatches recorded before a submission is forced
POOL_SETS = 512          # descriptor sets per pool
POOL_BINDINGS = 8192     # storage-buffer descriptors per pool


@dataclass
class Pipeline:
    pipeline: Any
    layout: Any
    set_layout: Any
    groups: tuple[int, int, int]


def serialized(method: _F) -> _F:
    """Run `method` holding the runtime's lock, as a critical section for Ctrl-C (the interrupt
    first: one that comes while waiting for the lock is held too, never raised between taking
    the lock and entering the section). After a fork, `lock` is a faults.Refusing."""
    @functools.wraps(method)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with defer_interrupts, self.lock:
            return method(self, *args, **kwargs)
    return locked  # type: ignore[return-value]


class VulkanRuntime(Runtime):
    def __init__(self, ctx: VulkanContext) -> None:
        self.ctx = ctx
        self.lock = threading.RLock()
        vk, device = ctx.vk, ctx.device
        self.pipelines: dict[bytes, Pipeline] = {}
        self.set_layouts: dict[int, tuple[Any, Any]] = {}
        self.pipeline_cache = vk.vkCreatePipelineCache(device, vk.VkPipelineCacheCreateInfo(), None)
        self.cmd_pool = vk.vkCreateCommandPool(device, vk.VkCommandPoolCreateInfo(
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, queueFamilyIndex=ctx.queue_family), None)
        self.cmd = vk.vkAllocateCommandBuffers(device, vk.VkCommandBufferAllocateInfo(
            commandPool=self.cmd_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        self.fence = vk.vkCreateFence(device, vk.VkFenceCreateInfo(), None)
        pool_size = vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=POOL_BINDINGS)
        self.desc_pool = vk.vkCreateDescriptorPool(device, vk.VkDescriptorPoolCreateInfo(
            maxSets=POOL_SETS, poolSizeCount=1, pPoolSizes=[pool_size]), None)
        self.recording = False
        self.pending = 0

    # --- loading: SPIR-V -> pipeline (one per distinct module; the grid is the program's)
    @serialized
    def load(self, binary: bytes, program: LoopProgram, name: str) -> Pipeline:
        ctx = self.ctx
        n = len(program.params)
        if n > ctx.max_kernel_buffers:
            raise CompileError(f"{name}: {n} buffer arguments exceed the device's "
                               f"maxPerStageDescriptorStorageBuffers ({ctx.max_kernel_buffers})", str(program))
        groups = tuple(program.global_size) + (1,) * (3 - len(program.global_size))
        for g, limit in zip(groups, ctx.max_group_count):
            if g > limit:
                raise CompileError(f"{name}: {groups} workgroups exceed maxComputeWorkGroupCount "
                                   f"{ctx.max_group_count}", str(program))
        key = hashlib.sha256(binary).digest()
        found = self.pipelines.get(key)
        if found is None:
            found = self.pipelines[key] = self._pipeline(binary, n, name, str(program))
        return Pipeline(found.pipeline, found.layout, found.set_layout, groups)  # type: ignore[arg-type]

    def _set_layout(self, n: int) -> tuple[Any, Any]:
        found = self.set_layouts.get(n)
        if found is None:
            vk, device = self.ctx.vk, self.ctx.device
            bindings = [vk.VkDescriptorSetLayoutBinding(
                binding=i, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=1,
                stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT) for i in range(n)]
            set_layout = vk.vkCreateDescriptorSetLayout(device, vk.VkDescriptorSetLayoutCreateInfo(
                bindingCount=n, pBindings=bindings), None)
            layout = vk.vkCreatePipelineLayout(device, vk.VkPipelineLayoutCreateInfo(
                setLayoutCount=1, pSetLayouts=[set_layout]), None)
            found = self.set_layouts[n] = (set_layout, layout)
        return found

    def _pipeline(self, binary: bytes, n: int, name: str, source: str) -> Pipeline:
        vk, device = self.ctx.vk, self.ctx.device
        set_layout, layout = self._set_layout(n)
        try:
            module = vk.vkCreateShaderModule(device, vk.VkShaderModuleCreateInfo(codeSize=len(binary), pCode=binary), None)
            # the nested create-infos and their strings stay in variables until the call returns
            entry_name = "main"
            stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=module,
                                                       pName=entry_name)
            info = vk.VkComputePipelineCreateInfo(stage=stage, layout=layout)
            pipeline = vk.vkCreateComputePipelines(device, self.pipeline_cache, 1, [info], None)[0]
            vk.vkDestroyShaderModule(device, module, None)
        except vk.VkError as e:
            raise CompileError(f"vulkan failed to build the pipeline for {name}: {type(e).__name__}",
                               f"{source}\n\n{disassemble(binary)}") from e
        return Pipeline(pipeline, layout, set_layout, (1, 1, 1))

    def refuse(self, message: str) -> None:
        """Make every later entry point raise DeviceUnavailableError(message) (after a fork:
        the VkDevice, its queue thread and its fences are the parent's)."""
        self.lock = Refusing(message)  # type: ignore[assignment]

    # --- execution
    def _begin(self) -> None:
        if not self.recording:
            vk = self.ctx.vk
            vk.vkBeginCommandBuffer(self.cmd, vk.VkCommandBufferBeginInfo(
                flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
            self.recording = True

    def _descriptor_set(self, pipe: Pipeline) -> Any:
        vk = self.ctx.vk
        info = vk.VkDescriptorSetAllocateInfo(descriptorPool=self.desc_pool, descriptorSetCount=1,
                                              pSetLayouts=[pipe.set_layout])
        try:
            return vk.vkAllocateDescriptorSets(self.ctx.device, info)[0]
        except vk.VkError:  # the pool is full: submit, which resets it
            self.synchronize()
            return vk.vkAllocateDescriptorSets(self.ctx.device, info)[0]

    @serialized
    def launch(self, loaded: Pipeline, program: LoopProgram | None, handles: list[Any]) -> None:
        """Record a dispatch of `loaded` on buffers (VkBuffer handles) in argument order (the
        pipeline holds its grid: `program` is not needed)."""
        vk, ctx = self.ctx.vk, self.ctx
        # (a buffer of another VkDevice: a tensor made before a fork, whose device was the parent's)
        infos = [vk.VkDescriptorBufferInfo(buffer=h.buffer, offset=0, range=h.size) for h in handles if h.ctx is ctx]
        if len(infos) != len(handles):
            raise foreign_buffer(ctx, next(h for h in handles if h.ctx is not ctx))
        if self.pending >= MAX_BATCH:
            self.synchronize()
        dset = self._descriptor_set(loaded)
        writes = [vk.VkWriteDescriptorSet(dstSet=dset, dstBinding=i, descriptorCount=1,
                                          descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          pBufferInfo=[info]) for i, info in enumerate(infos)]
        vk.vkUpdateDescriptorSets(self.ctx.device, len(writes), writes, 0, None)
        self._begin()
        if self.pending:
            barrier = vk.VkMemoryBarrier(srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                                         dstAccessMask=vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
            vk.vkCmdPipelineBarrier(self.cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                                    vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, [barrier], 0, None, 0, None)
        vk.vkCmdBindPipeline(self.cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, loaded.pipeline)
        vk.vkCmdBindDescriptorSets(self.cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, loaded.layout, 0, 1, [dset], 0, None)
        vk.vkCmdDispatch(self.cmd, *loaded.groups)
        self.pending += 1

    @serialized
    def copy(self, src: Any, dst: Any, nbytes: int) -> None:
        """Copy the first `nbytes` of buffer `src` to `dst` (VkBuffers), and wait for it."""
        vk = self.ctx.vk
        self._begin()
        vk.vkCmdCopyBuffer(self.cmd, src, dst, 1, [vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=nbytes)])
        self.pending += 1
        self.synchronize()

    @serialized
    def synchronize(self) -> None:
        if not self.recording:
            return
        vk, device = self.ctx.vk, self.ctx.device
        if self.pending:
            barrier = vk.VkMemoryBarrier(srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                                         dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT)
            vk.vkCmdPipelineBarrier(self.cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                                    vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1, [barrier], 0, None, 0, None)
        vk.vkEndCommandBuffer(self.cmd)
        cmds = [self.cmd]
        submit = vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=cmds)
        vk.vkQueueSubmit(self.ctx.queue, 1, [submit], self.fence)
        vk.vkWaitForFences(device, 1, [self.fence], vk.VK_TRUE, 2**64 - 1)
        vk.vkResetFences(device, 1, [self.fence])
        vk.vkResetCommandBuffer(self.cmd, 0)
        vk.vkResetDescriptorPool(device, self.desc_pool, 0)
        self.recording = False
        self.pending = 0


def foreign_buffer(ctx: VulkanContext, handle: Any) -> DeviceUnavailableError:
    """The error for a buffer of another vulkan device object than the one it is used on."""
    return DeviceUnavailableError(
        f"a vulkan buffer ({handle.size} bytes) of another vulkan device object (process "
        f"{getattr(handle.ctx, 'pid', '?')}) was passed to the vulkan device of process {ctx.pid}: a tensor made "
        f"before os.fork() cannot be used in the child (make it again there, or use multiprocessing's 'spawn' "
        f"start method)")
