"""Registers the `cuda` device. Registering never touches the driver: the probe (what
`ug.devices()` asks) only checks the UG_CUDA_* settings, that libcuda loads and that
cuda-bindings is installed; the factory (called on first use) creates the context, and its
error message ("no CUDA GPU ...") is what `ug devices` shows when the device is unusable. When
it is usable, the spec's version and description are filled with the GPU name, compute
capability and driver version, so `ug devices` shows them."""

from __future__ import annotations

from typing import Any

import ug_core as ug

from . import __version__
from .driver import probe


def _spec() -> ug.DeviceSpec:
    def factory() -> ug.Device:
        from .device import CudaDevice

        device = CudaDevice()
        spec.version = device.version
        spec.description = device.description
        return device

    spec = ug.DeviceSpec(name="cuda", factory=factory, plugin="ug-cuda", version=__version__, priority=5,
                         description="NVIDIA GPU: CUDA C compiled by NVRTC, run through the CUDA driver API",
                         probe=probe)
    return spec


@ug.hookimpl
def ug_register_devices(register: Any) -> None:
    register(_spec())
