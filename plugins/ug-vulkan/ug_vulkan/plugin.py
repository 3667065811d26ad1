"""Entry point of the ug-vulkan plugin: registers the `vulkan` device.

Registering touches nothing: the factory (run on first use) loads the Vulkan loader,
creates the instance and picks the physical device; if that fails, `ug devices` shows why.
"""

from __future__ import annotations

from typing import Any

import ug_core as ug

VERSION = "1"


def _factory() -> ug.Device:
    from .device import VulkanDevice  # imports the cffi binding (and libvulkan) only now

    return VulkanDevice()


@ug.hookimpl
def ug_register_devices(register: Any) -> None:
    register(ug.DeviceSpec(name="vulkan", factory=_factory, plugin="ug-vulkan", version=VERSION, priority=30,
                           description="Vulkan compute (SPIR-V emitted from the loop IR)"))
