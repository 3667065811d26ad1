"""Entry point of ug-llvm: registers the `cpu` device (device.CPUDevice).

Registering touches nothing. The probe (what `ug.devices()` asks) checks the UG_LLVM_* settings
and that llvmlite's native library loads: no LLVM target, engine or thread pool is made (the
factory does that, on first use). A bad setting makes `cpu` unusable with an error naming it.
"""

from __future__ import annotations

from typing import Any

import ug_core as ug

from . import __version__, settings


def _factory() -> ug.Device:
    from .device import CPUDevice

    return CPUDevice()


def _probe() -> None:
    settings.check()
    try:
        import llvmlite.binding  # noqa: F401  (loads libllvmlite)
    except ImportError as e:
        raise RuntimeError(f"llvmlite is not usable: {e} (pip install llvmlite)") from e


@ug.hookimpl
def ug_register_devices(register: Any) -> None:
    try:
        import llvmlite

        version = f"{__version__}+llvmlite{llvmlite.__version__}"
    except ImportError:  # the probe reports it
        version = __version__
    register(ug.DeviceSpec(name="cpu", factory=_factory, plugin="ug-llvm", version=version, priority=10,
                           description="LLVM JIT (llvmlite MCJIT), vectorized, multithreaded", probe=_probe))
