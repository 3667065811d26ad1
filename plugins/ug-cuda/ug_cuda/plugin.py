"""Registers the `cuda` device. Registering never touches the driver: the factory (called on
first use) loads libcuda, and its error message ("CUDA driver not found (libcuda.so.1)",
"no CUDA GPU ...") is what `ug devices` shows when the device is unusable. When it is usable,
the spec's version and description are filled with the GPU name, compute capability and
driver version, so `ug devices` shows them."""

from __future__ import annotations

from typing import Any

import ug_core as ug

from . import __version__


def _spec() -> ug.DeviceSpec:
    spec = ug.DeviceSpec(name="cuda", factory=lambda: None, plugin="ug-cuda", version=__version__, priority=5,
                         description="NVIDIA GPU: CUDA C compiled by NVRTC, run through the CUDA driver API")

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
