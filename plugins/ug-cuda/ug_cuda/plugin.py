"""Registers the `cuda` device. Registering never touches the driver: the factory (called on
first use) loads libcuda, and its error message ("CUDA driver not found (libcuda.so.1)",
"no CUDA GPU ...") is what `ug devices` shows when the device is unusable. When it is usable,
the spec's version and description are filled with the GPU name, compute capability and
driver version, so `ug devices` shows them."""

from __future__ import annotations

import ctypes
import importlib.util
import sys
from typing import Any

import ug_core as ug
from ug_core.env import env_flag, env_int

from . import __version__

# the driver library (as ug_cuda.driver loads it; not imported here: it imports the compiler)
LIBCUDA = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


def _probe() -> None:
    """Cheap (what `ug.devices()` asks): the UG_CUDA_* settings are valid, libcuda loads and
    cuda-bindings is installed. No cuInit, no context: the factory does that on first use."""
    check_settings()
    try:
        ctypes.CDLL(LIBCUDA)
    except OSError as e:
        raise RuntimeError(f"CUDA driver not found ({LIBCUDA}): {e}") from None
    try:
        found = importlib.util.find_spec("cuda.bindings") is not None
    except ImportError:  # no `cuda` package at all
        found = False
    if not found:
        raise RuntimeError("cuda-bindings is not installed (pip install cuda-bindings)")


def check_settings() -> None:
    """Raise ConfigError naming the variable for a bad UG_CUDA_* value."""
    env_int("UG_CUDA_DEVICE", 0, minimum=0)
    env_flag("UG_CUDA_FAST_MATH", False)
    env_flag("UG_CUDA_CUBLAS", True)


def _spec() -> ug.DeviceSpec:
    spec = ug.DeviceSpec(name="cuda", factory=lambda: None, plugin="ug-cuda", version=__version__, priority=5,
                         description="NVIDIA GPU: CUDA C compiled by NVRTC, run through the CUDA driver API",
                         probe=_probe)

    def factory() -> ug.Device:
        from .driver import CudaDevice

        device = CudaDevice()
        spec.version = device.version
        spec.description = device.description
        return device

    spec.factory = factory
    return spec


@ug.hookimpl
def ug_register_devices(register: Any) -> None:
    register(_spec())
