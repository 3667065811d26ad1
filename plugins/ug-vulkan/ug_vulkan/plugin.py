"""Entry point of the ug-vulkan plugin: registers the `vulkan` device, touching nothing.

The probe (what `ug.devices()` asks) checks the UG_VULKAN_* settings, that the `vulkan` binding
is installed and that the Vulkan loader (libvulkan) loads: no instance is created. The factory
(run on first use) creates the instance and picks the physical device; if that fails, using the
device raises the reason and `ug devices` shows it.
"""

from __future__ import annotations

import ctypes
import importlib.util
from typing import Any

import ug_core as ug

from . import settings

VERSION = "1"


def _factory() -> ug.Device:
    from .device import VulkanDevice  # imports the cffi binding (and libvulkan) only now

    return VulkanDevice()


# the loader's names, as the `vulkan` binding tries them (vulkan/_vulkan.py)
_LOADER_NAMES = ("libvulkan.so.1", "vulkan-1.dll", "libvulkan.dylib")


def _probe() -> None:
    """Cheap (what `ug.devices()` asks; no instance, and not the binding's import, which costs
    50 ms): the settings are valid, the `vulkan` binding is installed, the Vulkan loader loads."""
    settings.check_settings()
    if importlib.util.find_spec("vulkan") is None:
        raise RuntimeError("the 'vulkan' Python package is not installed (pip install vulkan)")
    errors = []
    for name in _LOADER_NAMES:
        try:
            ctypes.CDLL(name)
            return
        except OSError as e:
            errors.append(str(e))
    raise RuntimeError(f"no Vulkan loader ({'; '.join(errors)}) (install libvulkan1)")


@ug.hookimpl
def ug_register_devices(register: Any) -> None:
    register(ug.DeviceSpec(name="vulkan", factory=_factory, plugin="ug-vulkan", version=VERSION, priority=30,
                           description="Vulkan compute (SPIR-V emitted from the loop IR)", probe=_probe))
