"""Entry point of the ug-vulkan plugin: registers the `vulkan` device, touching nothing.

The probe (settings.probe, what `ug.devices()` asks) checks the UG_VULKAN_* settings, that the
`vulkan` binding is installed and that the Vulkan loader (libvulkan) loads. The factory
(run on first use) creates the instance and picks the physical device; if that fails, using the
device raises the reason and `ug devices` shows it.
"""

from __future__ import annotations

from typing import Any

import ug_core as ug

from . import __version__, settings

VERSION = __version__   # (`ug devices` shows it; it keys the disk cache)


def _factory() -> ug.Device:
    from .device import VulkanDevice  # imports the cffi binding (and libvulkan) only now

    return VulkanDevice()


@ug.hookimpl
def ug_register_devices(register: Any) -> None:
    register(ug.DeviceSpec(name="vulkan", factory=_factory, plugin="ug-vulkan", version=VERSION, priority=30,
                           description="Vulkan compute (SPIR-V emitted from the loop IR)", probe=settings.probe))
