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

A plugin may also contribute `ug <name>` subcommands (`ug_register_commands`): the `ug`
command collects them when it starts, from every loaded plugin, each plugin's hook on its own
like the devices' (one that raises is a broken plugin in `ug devices` and a warning).

Hooks are called once at load time (`ug_register_commands`: when the `ug` command starts);
the hot path (allocate, compile, run, matmul...) calls methods on the `ug_core.device.Device`
object directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import pluggy

if TYPE_CHECKING:  # annotations only (`import ug_core` need not load argparse)
    import argparse

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


@dataclass(frozen=True)
class CommandSpec:
    """A `ug <name>` subcommand, what a plugin registers through ``ug_register_commands``.

    `run(args)` runs it and returns the exit status (None means 0). ug sets two attributes of
    ``args`` for every command: ``args.argv``, the command line after ``ug <name>`` as given, and
    ``args.from_command_line``, True when ug runs as the ``ug`` program and False when
    ``ug_core.cli.main([...])`` is called from Python (so a command restarts the process, with
    ``os.exec*``, only in the first case).

    With `add_arguments`, ug declares the command's arguments by calling it on the command's
    argparse subparser and passes the parsed ones in ``args``. Without it the command parses
    ``args.argv`` itself (``ug <name> --help`` included).
    """

    name: str
    help: str   # its line in `ug --help`
    run: Callable[[argparse.Namespace], int | None]
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None


@hookspec
def ug_register_commands(register: "Callable[[CommandSpec], None]") -> None:
    """Contribute `ug` subcommands by calling ``register(CommandSpec(...))`` once per command.

    Called when the `ug` command starts, so it must be cheap: import what the command needs in
    its ``run``, not here. If this hook raises, none of the commands it registered are kept and
    the plugin is reported as broken. A name that is built in (``devices``, ``demo``) or that a
    plugin loaded earlier contributed is reported and the first one kept.
    """
