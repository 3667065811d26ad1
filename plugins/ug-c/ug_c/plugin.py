"""Entry point of ug-c: registers the `c` device. Registering touches nothing; the probe
(what `ug.devices()` asks) only looks for a C compiler."""

from __future__ import annotations

from typing import Any

import ug_core as ug

from . import __version__

VERSION = __version__   # (`ug devices` shows it; it keys the disk cache)


def _factory() -> ug.Device:
    from .device import make_device

    return make_device(VERSION)


def _probe() -> None:
    from .device import find_compiler

    find_compiler()


@ug.hookimpl
def ug_register_devices(register: Any) -> None:
    register(ug.DeviceSpec(name="c", factory=_factory, plugin="ug-c", version=VERSION, priority=200,
                           description="C through the system compiler (the backend kit's example)", probe=_probe))
