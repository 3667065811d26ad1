"""The UG_VULKAN_* settings, read through ug_core.env so that a bad value is an error naming the
variable, and the plugin's probe. Kept apart from device.py (which imports the code generator
and the `vulkan` binding) so that the probe is cheap."""

from __future__ import annotations

import ctypes
import importlib.util
import os

from ug_core.kit import env_flag, env_int, env_set

# what UG_VULKAN_DISABLE may name
DISABLE_CHOICES = ("int64", "float64", "float16", "int16", "int8storage", "mapped", "atomics64")


def disabled() -> set[str]:
    """UG_VULKAN_DISABLE=int64,float64,float16,int16,int8storage,mapped,atomics64: pretend the device lacks these
    (tests; `mapped` forces device buffers + a staging buffer, as on a discrete GPU)."""
    return env_set("UG_VULKAN_DISABLE", DISABLE_CHOICES)


def validate() -> bool:
    """UG_VULKAN_VALIDATE=1: run spirv-val on every module compiled."""
    return env_flag("UG_VULKAN_VALIDATE", False)


def device_index() -> int | None:
    """UG_VULKAN_DEVICE=i: the physical device to use (None: the default choice)."""
    if not os.environ.get("UG_VULKAN_DEVICE", "").strip():
        return None
    return env_int("UG_VULKAN_DEVICE", 0, minimum=0)


def check_settings() -> None:
    """Raise ConfigError naming the variable for a bad UG_VULKAN_* value (the plugin's probe)."""
    disabled()
    validate()
    device_index()



# the loader's names, as the `vulkan` binding tries them (vulkan/_vulkan.py)
_LOADER_NAMES = ("libvulkan.so.1", "vulkan-1.dll", "libvulkan.dylib")


def probe() -> None:
    """What `ug.devices()` asks, cheaply (no instance, and not the binding's import, which costs
    50 ms): the settings are valid, the `vulkan` binding is installed, the Vulkan loader loads."""
    check_settings()
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
