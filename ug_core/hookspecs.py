"""The hook specifications a ug plugin implements.

A plugin is any module or object with functions marked `@hookimpl`, exposed through an
entry point in the group ``ug`` of its distribution's pyproject.toml::

    [project.entry-points.ug]
    mybackend = "ug_mybackend.plugin"

ug loads every such entry point when the device registry is first used
(`UG_PLUGINS=a,b` loads only those; `UG_DISABLE_PLUGINS=a,b` skips those: both take the
entry-point names, `mybackend` above). A plugin that fails to import (even through
`sys.exit`) or whose hook raises is reported by `ug devices` and a warning, never by
crashing `import ug_core` or keeping other plugins from registering: ug calls each
plugin's hook on its own. The built-in `ref` device registers through this same hook.

Hooks are called once at load time; the hot path (allocate, compile, run, matmul...) calls
methods on the `ug_core.device.Device` object directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import pluggy

if TYPE_CHECKING:
    from .device import DeviceSpec

PROJECT = "ug"
ENTRY_POINT_GROUP = "ug"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def ug_register_devices(register: "Callable[[DeviceSpec], None]") -> None:
    """Register this plugin's devices by calling ``register(DeviceSpec(...))`` once per device.

    Registering must be cheap and must not touch hardware. A cheap availability check (the
    driver library loads, the settings are valid) belongs in ``DeviceSpec.probe``, which
    ``ug.devices()`` calls; creating the device (a context, a queue) belongs in
    ``DeviceSpec.factory``, which ug calls on first use. Their exception messages become the
    "why not usable" reason in ``ug devices``. If this hook raises, none of the specs it
    registered are kept and the plugin is reported as broken.
    """
