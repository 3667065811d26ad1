"""The Vulkan objects every part shares: instance, physical device (limits and features),
logical device and compute queue. Creating one is what makes the `vulkan` device usable; any
failure is a RuntimeError naming what is missing (`ug devices` shows it)."""

from __future__ import annotations

import os
from typing import Any

from ug_core.kit import ConfigError

from . import settings
from .emit import Caps


def _load_vulkan() -> Any:
    try:
        import vulkan as vk  # the cffi binding opens libvulkan.so.1 at import
    except OSError as e:
        raise RuntimeError(f"no Vulkan loader: {e} (install libvulkan1)") from e
    except ImportError as e:
        raise RuntimeError(f"the 'vulkan' Python package is not installed: {e}") from e
    return vk




class VulkanContext:
    """The instance, the chosen physical device and a logical device with one compute queue.

    disable: features to pretend the device lacks (settings.disabled)."""

    def __init__(self, disable: set[str]) -> None:
        vk = self.vk = _load_vulkan()
        self.disable = disable
        self.pid = os.getpid()   # (a forked child makes its own context: faults, VulkanDevice.after_fork)
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
        # one storage-buffer binding per kernel argument (ug_core.Device.max_kernel_buffers: the
        # scheduler keeps kernels under it; lavapipe's is 32, and past it a launch crashes)
        self.max_kernel_buffers = min(lim.maxPerStageDescriptorStorageBuffers, lim.maxPerStageResources)
        self.caps, enable = self._features(min(props.apiVersion, self.api))
        self.dtypes = self.caps.dtypes
        self._create_device(enable)
        mem = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        self.memory_types = [mem.memoryTypes[i].propertyFlags for i in range(mem.memoryTypeCount)]

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
        off = self.disable
        base = vk.vkGetPhysicalDeviceFeatures(self.physical)
        f16 = i8 = sb8 = sb16 = atomics64 = False
        preserve: list[int] = []
        if api >= vk.VK_MAKE_VERSION(1, 2, 0):
            f12 = vk.VkPhysicalDeviceVulkan12Features()
            f11 = vk.VkPhysicalDeviceVulkan11Features(pNext=f12)
            vk.vkGetPhysicalDeviceFeatures2(self.physical, vk.VkPhysicalDeviceFeatures2(pNext=f11))
            f16, i8, sb8, sb16 = (bool(f12.shaderFloat16), bool(f12.shaderInt8), bool(f12.storageBuffer8BitAccess),
                                  bool(f11.storageBuffer16BitAccess))
            atomics64 = bool(f12.shaderBufferInt64Atomics)
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
            int16=bool(base.shaderInt16) and sb16 and "int16" not in off,
            preserve_widths=tuple(preserve) if api >= vk.VK_MAKE_VERSION(1, 2, 0) else (),
            int64_atomics=atomics64 and bool(base.shaderInt64) and "int64" not in off and "atomics64" not in off,
        )
        enable = {"int64": caps.int64, "float64": caps.float64, "float16": caps.float16, "int16": caps.int16,
                  "sb16": caps.float16 or caps.int16, "sb8": caps.int8_storage, "int8": caps.int8,
                  "v12": api >= vk.VK_MAKE_VERSION(1, 2, 0), "atomics64": caps.int64_atomics}
        return caps, enable

    def _create_device(self, enable: dict[str, Any]) -> None:
        vk = self.vk
        priorities = [1.0]
        queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=self.queue_family, queueCount=1,
                                                pQueuePriorities=priorities)
        features = vk.VkPhysicalDeviceFeatures(shaderInt64=enable["int64"], shaderFloat64=enable["float64"],
                                               shaderInt16=enable["int16"])
        if enable["v12"]:
            f12 = vk.VkPhysicalDeviceVulkan12Features(shaderFloat16=enable["float16"], shaderInt8=enable["int8"],
                                                      storageBuffer8BitAccess=enable["sb8"],
                                                      shaderBufferInt64Atomics=enable["atomics64"])
            f11 = vk.VkPhysicalDeviceVulkan11Features(pNext=f12, storageBuffer16BitAccess=enable["sb16"])
            f2 = vk.VkPhysicalDeviceFeatures2(pNext=f11, features=features)
            info = vk.VkDeviceCreateInfo(pNext=f2, queueCreateInfoCount=1, pQueueCreateInfos=[queue_info])
        else:
            info = vk.VkDeviceCreateInfo(queueCreateInfoCount=1, pQueueCreateInfos=[queue_info],
                                         pEnabledFeatures=features)
        self.device = vk.vkCreateDevice(self.physical, info, None)
        self.queue = vk.vkGetDeviceQueue(self.device, self.queue_family, 0)
