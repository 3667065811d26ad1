"""The Vulkan device: instance / physical device / queue, buffers, pipelines, dispatch.

Work is recorded into one command buffer (a compute->compute memory barrier between
dispatches) and submitted when the host needs a result (copy in/out, synchronize) or the
batch is full. Descriptor sets come from a pool that is reset after each submission.
The command buffer, queue, pools and the Python-side caches are shared, so every entry point
the core calls holds the device's lock (Vulkan requires external synchronization of them;
two threads recording at once crash the driver).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import numpy as np

import ug_core as ug
from ug_core.device import Buffer, CompileError, Device, MatmulSpec, Program
from ug_core.env import ConfigError
from ug_core.kernel_ir import Kernel
from ug_core.loop_ir import LoopProgram, Opc
from ug_core.lower import LowerOptions, lower

from . import matmul as mm, settings
from .codegen import Caps, RenderError, render
from .memory import HOST_VISIBLE, MemoryPlan, choose_memory, size_class

VERSION = "1"
_F = TypeVar("_F", bound=Callable[..., Any])
MAX_BATCH = 256          # dispatches recorded before a submission is forced
POOL_SETS = 512          # descriptor sets per pool
POOL_BINDINGS = 8192     # storage-buffer descriptors per pool
POOL_CACHE_BYTES = 512 << 20  # freed buffers kept for reuse, at most


def _load_vulkan() -> Any:
    try:
        import vulkan as vk  # the cffi binding opens libvulkan.so.1 at import
    except OSError as e:
        raise RuntimeError(f"no Vulkan loader: {e} (install libvulkan1)") from e
    except ImportError as e:
        raise RuntimeError(f"the 'vulkan' Python package is not installed: {e}") from e
    return vk


def spirv_val_path() -> str | None:
    return shutil.which("spirv-val")


def validate_spirv(binary: bytes, target_env: str = "vulkan1.1") -> str | None:
    """spirv-val's complaint about `binary`, or None if it is valid (or spirv-val is missing)."""
    exe = spirv_val_path()
    if exe is None:
        return None
    with tempfile.NamedTemporaryFile(suffix=".spv", delete=False) as f:
        f.write(binary)
        path = f.name
    try:
        r = subprocess.run([exe, "--target-env", target_env, path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    return None if r.returncode == 0 else (r.stdout + r.stderr).strip()


def disassemble(binary: bytes) -> str:
    exe = shutil.which("spirv-dis")
    if exe is None:
        return f"<{len(binary)} bytes of SPIR-V; install spirv-tools for a disassembly>"
    with tempfile.NamedTemporaryFile(suffix=".spv", delete=False) as f:
        f.write(binary)
        path = f.name
    try:
        return subprocess.run([exe, path], capture_output=True, text=True).stdout
    finally:
        os.unlink(path)


@dataclass
class VkBuffer:
    buffer: Any
    memory: Any
    capacity: int
    nbytes: int
    mapped: np.ndarray | None  # uint8 view of the mapped memory (host-visible plans)


@dataclass
class Pipeline:
    pipeline: Any
    layout: Any
    set_layout: Any
    n_bindings: int
    groups: tuple[int, int, int]
    spirv: bytes


def _serialized(method: _F) -> _F:
    """Run `method` holding the device's lock (reentrant: a free() from a buffer's __del__ may
    happen inside another entry point on the same thread)."""
    @functools.wraps(method)
    def locked(self: "VulkanDevice", *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)
    return locked  # type: ignore[return-value]


def _disabled() -> set[str]:
    """UG_VULKAN_DISABLE (see settings.disabled); an unknown name is a ConfigError naming the variable."""
    return settings.disabled()


class VulkanDevice(Device):
    name = "vulkan"
    version = VERSION

    def __init__(self, validate: bool | None = None, disable: set[str] | None = None) -> None:
        """validate: run spirv-val on every module (default: $UG_VULKAN_VALIDATE); disable: features
        to pretend the device lacks (default: $UG_VULKAN_DISABLE), to exercise the fallbacks."""
        self._lock = threading.RLock()
        vk = self.vk = _load_vulkan()
        if validate is None:
            validate = settings.validate()
        self._validate = validate
        self._disable = _disabled() if disable is None else set(disable)
        self.validated = 0
        try:
            api = vk.vkEnumerateInstanceVersion()
        except Exception:
            api = vk.VK_MAKE_VERSION(1, 0, 0)
        self.api = min(api, vk.VK_MAKE_VERSION(1, 2, 0))
        app = vk.VkApplicationInfo(pApplicationName="ug", applicationVersion=1, pEngineName="ug",
                                   engineVersion=1, apiVersion=self.api)
        try:
            self.instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(pApplicationInfo=app), None)
        except vk.VkErrorIncompatibleDriver as e:
            raise RuntimeError("no Vulkan driver (ICD) found (install mesa-vulkan-drivers for lavapipe, "
                               "or a GPU driver; VK_ICD_FILENAMES selects one)") from e
        except vk.VkError as e:
            raise RuntimeError(f"vkCreateInstance failed: {type(e).__name__}") from e
        self.physical = self._pick_physical_device()
        props = vk.vkGetPhysicalDeviceProperties(self.physical)
        self.device_name = props.deviceName
        self.description = f"{props.deviceName} (Vulkan {props.apiVersion >> 22}.{(props.apiVersion >> 12) & 0x3FF})"
        self.device_type = props.deviceType
        lim = props.limits
        self.max_invocations = lim.maxComputeWorkGroupInvocations
        self.max_group_size = tuple(lim.maxComputeWorkGroupSize)
        self.max_group_count = tuple(lim.maxComputeWorkGroupCount)
        self.max_storage_range = lim.maxStorageBufferRange
        self.max_shared = lim.maxComputeSharedMemorySize
        self.min_storage_align = lim.minStorageBufferOffsetAlignment
        # one storage-buffer binding per kernel argument (ug_core.Device.max_kernel_buffers: the
        # scheduler keeps kernels under it; lavapipe's is 32, and past it a launch crashes)
        self.max_kernel_buffers = min(lim.maxPerStageDescriptorStorageBuffers, lim.maxPerStageResources)
        self.caps, enable = self._features(min(props.apiVersion, self.api))
        names = ["float32", "int32", "bool"]
        if self.caps.int64:
            names.append("int64")
        if self.caps.float64:
            names.append("float64")
        if self.caps.float16:
            names.append("float16")
        self.dtypes = frozenset(map(np.dtype, names))
        self.local_size = max(1, min(256, self.max_invocations, self.max_group_size[0]))
        self.tile = 16 if self.max_invocations >= 256 and min(self.max_group_size[:2]) >= 16 else 8
        self._create_device(enable)
        mem = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        self.memory_types = [mem.memoryTypes[i].propertyFlags for i in range(mem.memoryTypeCount)]
        self.plan: MemoryPlan | None = None  # chosen on the first allocation (needs memoryTypeBits)
        self.pool: dict[int, list[VkBuffer]] = {}
        self.pooled_bytes = 0
        self.allocated = 0
        self.staging: VkBuffer | None = None
        self.pipelines: dict[bytes, Pipeline] = {}
        self.matmuls: dict[Any, Pipeline] = {}
        self.set_layouts: dict[int, tuple[Any, Any]] = {}
        self.pipeline_cache = vk.vkCreatePipelineCache(self.device, vk.VkPipelineCacheCreateInfo(), None)
        self.cmd_pool = vk.vkCreateCommandPool(self.device, vk.VkCommandPoolCreateInfo(
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, queueFamilyIndex=self.queue_family), None)
        self.cmd = vk.vkAllocateCommandBuffers(self.device, vk.VkCommandBufferAllocateInfo(
            commandPool=self.cmd_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        self.fence = vk.vkCreateFence(self.device, vk.VkFenceCreateInfo(), None)
        pool_size = vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=POOL_BINDINGS)
        self.desc_pool = vk.vkCreateDescriptorPool(self.device, vk.VkDescriptorPoolCreateInfo(
            maxSets=POOL_SETS, poolSizeCount=1, pPoolSizes=[pool_size]), None)
        self.recording = False
        self.pending = 0

    # --- setup
    def _pick_physical_device(self) -> Any:
        vk = self.vk
        devices = vk.vkEnumeratePhysicalDevices(self.instance)
        if not devices:
            raise RuntimeError("no Vulkan physical device (the loader found a driver but no device)")
        usable = []
        for pd in devices:
            families = vk.vkGetPhysicalDeviceQueueFamilyProperties(pd)
            family = next((i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT), None)
            if family is not None:
                usable.append((pd, family))
        if not usable:
            raise RuntimeError("no Vulkan device with a compute queue")
        choice = settings.device_index()
        if choice is not None:
            if choice >= len(usable):
                raise ConfigError(f"UG_VULKAN_DEVICE={choice} but there are {len(usable)} Vulkan device(s) "
                                  f"with a compute queue (0 to {len(usable) - 1})")
            pd, family = usable[choice]
        else:
            rank = {2: 0, 1: 1, 3: 2, 4: 3}  # discrete, integrated, virtual, cpu
            pd, family = min(usable, key=lambda u: rank.get(vk.vkGetPhysicalDeviceProperties(u[0]).deviceType, 4))
        self.queue_family = family
        return pd

    def _features(self, api: int) -> tuple[Caps, dict[str, Any]]:
        vk = self.vk
        off = self._disable
        base = vk.vkGetPhysicalDeviceFeatures(self.physical)
        f16 = i8 = sb8 = sb16 = False
        preserve: list[int] = []
        if api >= vk.VK_MAKE_VERSION(1, 2, 0):
            f12 = vk.VkPhysicalDeviceVulkan12Features()
            f11 = vk.VkPhysicalDeviceVulkan11Features(pNext=f12)
            vk.vkGetPhysicalDeviceFeatures2(self.physical, vk.VkPhysicalDeviceFeatures2(pNext=f11))
            f16, i8, sb8, sb16 = (bool(f12.shaderFloat16), bool(f12.shaderInt8), bool(f12.storageBuffer8BitAccess),
                                  bool(f11.storageBuffer16BitAccess))
            p12 = vk.VkPhysicalDeviceVulkan12Properties()
            vk.vkGetPhysicalDeviceProperties2(self.physical, vk.VkPhysicalDeviceProperties2(pNext=p12))
            for width, ok in ((16, p12.shaderSignedZeroInfNanPreserveFloat16),
                              (32, p12.shaderSignedZeroInfNanPreserveFloat32),
                              (64, p12.shaderSignedZeroInfNanPreserveFloat64)):
                if ok:
                    preserve.append(width)
        caps = Caps(
            int64=bool(base.shaderInt64) and "int64" not in off,
            float64=bool(base.shaderFloat64) and "float64" not in off,
            float16=f16 and sb16 and "float16" not in off,
            int8_storage=sb8 and "int8storage" not in off,
            int8=i8 and sb8 and "int8storage" not in off,
            preserve_widths=tuple(preserve) if api >= vk.VK_MAKE_VERSION(1, 2, 0) else (),
        )
        enable = {"int64": caps.int64, "float64": caps.float64, "float16": caps.float16,
                  "sb16": caps.float16, "sb8": caps.int8_storage, "int8": caps.int8, "v12": api >= vk.VK_MAKE_VERSION(1, 2, 0)}
        return caps, enable

    def _create_device(self, enable: dict[str, Any]) -> None:
        vk = self.vk
        priorities = [1.0]
        queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=self.queue_family, queueCount=1,
                                                pQueuePriorities=priorities)
        features = vk.VkPhysicalDeviceFeatures(shaderInt64=enable["int64"], shaderFloat64=enable["float64"])
        if enable["v12"]:
            f12 = vk.VkPhysicalDeviceVulkan12Features(shaderFloat16=enable["float16"], shaderInt8=enable["int8"],
                                                      storageBuffer8BitAccess=enable["sb8"])
            f11 = vk.VkPhysicalDeviceVulkan11Features(pNext=f12, storageBuffer16BitAccess=enable["sb16"])
            f2 = vk.VkPhysicalDeviceFeatures2(pNext=f11, features=features)
            info = vk.VkDeviceCreateInfo(pNext=f2, queueCreateInfoCount=1, pQueueCreateInfos=[queue_info])
        else:
            info = vk.VkDeviceCreateInfo(queueCreateInfoCount=1, pQueueCreateInfos=[queue_info],
                                         pEnabledFeatures=features)
        self.device = vk.vkCreateDevice(self.physical, info, None)
        self.queue = vk.vkGetDeviceQueue(self.device, self.queue_family, 0)

    # --- memory
    def _create_buffer(self, size: int, usage: int, host: bool = False) -> VkBuffer:
        vk = self.vk
        buf = vk.vkCreateBuffer(self.device, vk.VkBufferCreateInfo(
            size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        req = vk.vkGetBufferMemoryRequirements(self.device, buf)
        if self.plan is None:
            self.plan = choose_memory(self.memory_types, req.memoryTypeBits, self.device_type)
            if "mapped" in self._disable and self.plan.mapped:  # exercise the discrete-GPU staging path
                self.plan = MemoryPlan(self.plan.device_type, False, self.plan.device_type)
        if host:
            type_index = self.plan.staging_type if self.plan.staging_type is not None else self.plan.device_type
        else:
            type_index = self.plan.device_type
        try:
            memory = vk.vkAllocateMemory(self.device, vk.VkMemoryAllocateInfo(
                allocationSize=req.size, memoryTypeIndex=type_index), None)
        except vk.VkError:
            vk.vkDestroyBuffer(self.device, buf, None)
            self._drain_pool()
            raise MemoryError(f"Vulkan could not allocate {size} bytes on {self.device_name}")
        vk.vkBindBufferMemory(self.device, buf, memory, 0)
        mapped = None
        if self.memory_types[type_index] & HOST_VISIBLE and (host or self.plan.mapped):
            ptr = vk.vkMapMemory(self.device, memory, 0, size, 0)
            mapped = np.frombuffer(ptr, dtype=np.uint8, count=size)
        return VkBuffer(buf, memory, size, size, mapped)

    def _destroy(self, b: VkBuffer) -> None:
        vk = self.vk
        if b.mapped is not None:
            vk.vkUnmapMemory(self.device, b.memory)
        vk.vkDestroyBuffer(self.device, b.buffer, None)
        vk.vkFreeMemory(self.device, b.memory, None)

    def _drain_pool(self) -> None:
        self.synchronize()
        for bufs in self.pool.values():
            for b in bufs:
                self._destroy(b)
        self.pool.clear()
        self.pooled_bytes = 0

    @_serialized
    def allocate(self, nbytes: int) -> VkBuffer:
        nbytes = max(4, -(-nbytes // 4) * 4)
        if nbytes > self.max_storage_range:
            raise MemoryError(f"a buffer of {nbytes} bytes exceeds the Vulkan device's maxStorageBufferRange "
                              f"({self.max_storage_range} bytes) on {self.device_name}")
        cap = size_class(nbytes, self.max_storage_range)
        free = self.pool.get(cap)
        if free:
            b = free.pop()
            self.pooled_bytes -= cap
        else:
            vk = self.vk
            usage = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                     | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
            b = self._create_buffer(cap, usage)
        b.nbytes = nbytes
        self.allocated += nbytes
        return b

    @_serialized
    def free(self, handle: VkBuffer) -> None:
        self.allocated -= handle.nbytes
        if self.pooled_bytes + handle.capacity > POOL_CACHE_BYTES:
            self.synchronize()
            self._destroy(handle)
            return
        self.pool.setdefault(handle.capacity, []).append(handle)
        self.pooled_bytes += handle.capacity

    def memory_usage(self) -> int:
        return self.allocated

    def pool_bytes(self) -> int:
        """Bytes of freed VkBuffers kept for reuse (ug.memory_stats)."""
        return self.pooled_bytes

    def _staging(self, nbytes: int) -> VkBuffer:
        if self.staging is None or self.staging.capacity < nbytes:
            if self.staging is not None:
                self._destroy(self.staging)
            vk = self.vk
            self.staging = self._create_buffer(max(nbytes, 1 << 20), vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                                               | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT, host=True)
        return self.staging

    def _copy(self, src: VkBuffer, dst: VkBuffer, nbytes: int) -> None:
        vk = self.vk
        self._begin()
        vk.vkCmdCopyBuffer(self.cmd, src.buffer, dst.buffer, 1, [vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=nbytes)])
        self.pending += 1
        self.synchronize()

    @_serialized
    def copy_in(self, handle: VkBuffer, src: np.ndarray) -> None:
        self.synchronize()
        data = src.view(np.uint8).reshape(-1)
        if handle.mapped is not None:
            handle.mapped[: data.size] = data
            return
        stage = self._staging(data.size)
        stage.mapped[: data.size] = data  # type: ignore[index]
        self._copy(stage, handle, -(-data.size // 4) * 4)

    @_serialized
    def copy_out(self, handle: VkBuffer, dst: np.ndarray) -> None:
        self.synchronize()
        out = dst.view(np.uint8).reshape(-1)
        if handle.mapped is not None:
            out[...] = handle.mapped[: out.size]
            return
        stage = self._staging(out.size)
        self._copy(handle, stage, -(-out.size // 4) * 4)
        out[...] = stage.mapped[: out.size]  # type: ignore[index]

    # --- compilation
    def lower(self, kernel: Kernel) -> LoopProgram:
        local = self.local_size
        while True:
            program = lower(kernel, LowerOptions(target="gpu", local_size=local,
                                                 max_global_size=self.max_group_count))
            shared = sum(i.arg * (4 if i.dtype == np.bool_ else i.dtype.itemsize)
                         for i in program.instructions if i.opc is Opc.DEFINE_LOCAL)
            if shared <= self.max_shared or local == 1:
                return program
            local = max(1, local // 2)

    def render(self, kernel: Kernel) -> str:
        program = self.lower(kernel)
        try:
            return f"{program}\n\n{disassemble(render(program, self.caps))}"
        except RenderError as e:
            return f"{program}\n\n<not renderable: {e}>"

    @_serialized
    def compile(self, kernel: Kernel) -> Program:
        program = self.lower(kernel)
        return self._compile_program(program, kernel.name)

    def _compile_program(self, program: LoopProgram, name: str) -> Program:
        if program.is_empty:
            return Program(name, None, str(program), program.global_size, program.local_size)
        try:
            binary = render(program, self.caps)
        except RenderError as e:
            raise CompileError(f"vulkan cannot compile {name}: {e}", str(program)) from e
        if self._validate:
            problem = validate_spirv(binary)
            self.validated += 1
            if problem is not None:
                raise CompileError(f"spirv-val rejected the module for {name}:\n{problem}",
                                   f"{program}\n\n{disassemble(binary)}")
        if len(program.params) > self.max_kernel_buffers:
            raise CompileError(f"{name}: {len(program.params)} buffer arguments exceed the device's "
                               f"maxPerStageDescriptorStorageBuffers ({self.max_kernel_buffers})", str(program))
        groups = tuple(program.global_size) + (1,) * (3 - len(program.global_size))
        for g, limit in zip(groups, self.max_group_count):
            if g > limit:
                raise CompileError(f"{name}: {groups} workgroups exceed maxComputeWorkGroupCount "
                                   f"{self.max_group_count}", str(program))
        pipe = self._pipeline(binary, len(program.params), groups, name, str(program))
        return Program(name, pipe, str(program), program.global_size, program.local_size)

    def _set_layout(self, n: int) -> tuple[Any, Any]:
        found = self.set_layouts.get(n)
        if found is None:
            vk = self.vk
            bindings = [vk.VkDescriptorSetLayoutBinding(
                binding=i, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=1,
                stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT) for i in range(n)]
            set_layout = vk.vkCreateDescriptorSetLayout(self.device, vk.VkDescriptorSetLayoutCreateInfo(
                bindingCount=n, pBindings=bindings), None)
            layout = vk.vkCreatePipelineLayout(self.device, vk.VkPipelineLayoutCreateInfo(
                setLayoutCount=1, pSetLayouts=[set_layout]), None)
            found = self.set_layouts[n] = (set_layout, layout)
        return found

    def _pipeline(self, binary: bytes, n: int, groups: tuple[int, ...], name: str, source: str) -> Pipeline:
        key = hashlib.sha256(binary).digest()
        found = self.pipelines.get(key)
        if found is not None:
            return Pipeline(found.pipeline, found.layout, found.set_layout, n, groups, binary)  # type: ignore[arg-type]
        vk = self.vk
        set_layout, layout = self._set_layout(n)
        try:
            module = vk.vkCreateShaderModule(self.device, vk.VkShaderModuleCreateInfo(
                codeSize=len(binary), pCode=binary), None)
            # the nested create-infos and their strings stay in variables until the call returns
            entry_name = "main"
            stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=module,
                                                       pName=entry_name)
            info = vk.VkComputePipelineCreateInfo(stage=stage, layout=layout)
            pipeline = vk.vkCreateComputePipelines(self.device, self.pipeline_cache, 1, [info], None)[0]
            vk.vkDestroyShaderModule(self.device, module, None)
        except vk.VkError as e:
            raise CompileError(f"vulkan failed to build the pipeline for {name}: {type(e).__name__}",
                               f"{source}\n\n{disassemble(binary)}") from e
        pipe = Pipeline(pipeline, layout, set_layout, n, groups, binary)  # type: ignore[arg-type]
        self.pipelines[key] = pipe
        return pipe

    # --- execution
    def _begin(self) -> None:
        if not self.recording:
            vk = self.vk
            vk.vkBeginCommandBuffer(self.cmd, vk.VkCommandBufferBeginInfo(
                flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
            self.recording = True

    def _dispatch(self, pipe: Pipeline, handles: list[VkBuffer]) -> None:
        vk = self.vk
        if self.pending >= MAX_BATCH:
            self.synchronize()
        try:
            dset = vk.vkAllocateDescriptorSets(self.device, vk.VkDescriptorSetAllocateInfo(
                descriptorPool=self.desc_pool, descriptorSetCount=1, pSetLayouts=[pipe.set_layout]))[0]
        except vk.VkError:
            self.synchronize()
            dset = vk.vkAllocateDescriptorSets(self.device, vk.VkDescriptorSetAllocateInfo(
                descriptorPool=self.desc_pool, descriptorSetCount=1, pSetLayouts=[pipe.set_layout]))[0]
        infos = [vk.VkDescriptorBufferInfo(buffer=h.buffer, offset=0, range=h.capacity) for h in handles]
        writes = [vk.VkWriteDescriptorSet(dstSet=dset, dstBinding=i, descriptorCount=1,
                                          descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          pBufferInfo=[info]) for i, info in enumerate(infos)]
        vk.vkUpdateDescriptorSets(self.device, len(writes), writes, 0, None)
        self._begin()
        if self.pending:
            barrier = vk.VkMemoryBarrier(srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                                         dstAccessMask=vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
            vk.vkCmdPipelineBarrier(self.cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                                    vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, [barrier], 0, None, 0, None)
        vk.vkCmdBindPipeline(self.cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe.pipeline)
        vk.vkCmdBindDescriptorSets(self.cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe.layout, 0, 1, [dset], 0, None)
        vk.vkCmdDispatch(self.cmd, *pipe.groups)
        self.pending += 1

    @_serialized
    def synchronize(self) -> None:
        if not self.recording:
            return
        vk = self.vk
        if self.pending:
            barrier = vk.VkMemoryBarrier(srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                                         dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT)
            vk.vkCmdPipelineBarrier(self.cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                                    vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1, [barrier], 0, None, 0, None)
        vk.vkEndCommandBuffer(self.cmd)
        cmds = [self.cmd]
        submit = vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=cmds)
        vk.vkQueueSubmit(self.queue, 1, [submit], self.fence)
        vk.vkWaitForFences(self.device, 1, [self.fence], vk.VK_TRUE, 2**64 - 1)
        vk.vkResetFences(self.device, 1, [self.fence])
        vk.vkResetCommandBuffer(self.cmd, 0)
        vk.vkResetDescriptorPool(self.device, self.desc_pool, 0)
        self.recording = False
        self.pending = 0

    @_serialized
    def run(self, program: Program, buffers: list[Buffer]) -> None:
        if program.handle is None:
            return
        self._dispatch(program.handle, [b.handle for b in buffers])

    @_serialized
    def matmul(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec) -> None:
        if out.size == 0:
            return
        key = (spec.a_view, spec.b_view, tuple(spec.out_shape), np.dtype(spec.dtype).str)
        pipe = self.matmuls.get(key)
        if pipe is None:
            program = mm.build(spec, self.tile, self.max_group_count)
            compiled = self._compile_program(program, program.name)
            pipe = self.matmuls[key] = compiled.handle
        if pipe is not None:
            self._dispatch(pipe, [out.handle, a.handle, b.handle])


def create() -> VulkanDevice:
    return VulkanDevice()


__all__ = ["VulkanDevice", "create", "validate_spirv", "ug"]
