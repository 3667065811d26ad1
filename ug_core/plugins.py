"""The device registry: loads plugins through pluggy and entry points, creates devices lazily.

One bad plugin never takes anything else down: a plugin whose import fails (even through
`sys.exit`), whose `ug_register_devices` hook raises (or `ug_register_commands`, which only the
`ug` command calls), or whose device factory fails or returns something that is not a device,
becomes a "not usable" row in `ug devices` (and a warning), and every other plugin and device
keeps working.

What `ug.devices()` promises: the devices listed passed their cheap probe (`DeviceSpec.probe`:
the driver library loads, the settings are valid) or, for a spec without a probe, were created.
Hardware is initialized on a device's first use; if that fails, using it raises
`DeviceUnavailableError` with the reason, and from then on it is left out of `ug.devices()` and
`ug devices` shows why. `ug.devices(initialize=True)` and `ug devices` initialize every device
to report the truth.
"""

from __future__ import annotations

import os
import threading
import warnings
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Collection, TypeVar

import pluggy

from . import hookspecs
from .device import Device, DeviceSpec
from .env import ConfigError
from .hookspecs import CommandSpec

BUILTIN_PLUGIN = "ref"  # the built-in plugin (ug_core.ref): always loaded, not an entry point

SpecT = TypeVar("SpecT", DeviceSpec, CommandSpec)  # what a plugin's registration hook registers


class DeviceUnavailableError(ValueError):
    """A registered device cannot be used: its probe or its factory failed (the message says why)."""


@dataclass
class DeviceStatus:
    """One row of `ug devices`."""

    name: str
    plugin: str
    version: str
    usable: bool
    reason: str
    detail: str = ""       # the usable device's `description` (e.g. the GPU's name)
    entry_point: str = ""  # the plugin's entry-point name (what UG_PLUGINS takes); "" if registered directly


def _describe(error: BaseException) -> str:
    if isinstance(error, SystemExit):
        return f"SystemExit({error.code!r}): the plugin called sys.exit()"
    return f"{type(error).__name__}: {error}"


class Registry:
    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.specs: dict[str, DeviceSpec] = {}     # device name -> the spec in use (see register)
        self.sources: dict[str, str] = {}          # device name -> the plugin (entry point) that registered it
        self.shadowed: list[tuple[DeviceSpec, str]] = []  # (spec, plugin) that lost a name to another spec
        self.devices: dict[str, Device] = {}
        self.failures: dict[str, str] = {}         # device name -> why it is unusable
        self.probed: set[str] = set()              # device names whose probe passed
        self.broken_plugins: dict[str, str] = {}   # plugin (entry point) name -> what went wrong
        self.skipped_plugins: dict[str, str] = {}  # entry point name -> why it was not loaded
        self.entry_points: dict[str, str] = {}     # installed entry point name -> its distribution
        self._warned: set[str] = set()             # warnings already given (each once per registry)
        self._loaded = False
        self._lock = threading.RLock()
        # counts registrations and removals: whatever holds on to device objects by name (the
        # runtime's kept schedules) compares it to know that a name may now mean another device
        self.generation = 0

    # --- loading -------------------------------------------------------------------------

    def load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            from . import ref

            self.pm.register(ref, name=BUILTIN_PLUGIN)
            self._load_entry_points()
            # each plugin's hook on its own: in one pm.hook call, the first that raised would
            # keep every later one (ref included) from registering
            for name, plugin in self.pm.list_name_plugin():
                self._call_register_hook(plugin, name)

    def _load_entry_points(self) -> None:
        only = _env_list("UG_PLUGINS")
        disabled = _env_list("UG_DISABLE_PLUGINS") or set()
        found = list(metadata.entry_points(group=hookspecs.ENTRY_POINT_GROUP))
        self.entry_points = {ep.name: (ep.dist.name if ep.dist is not None else "?") for ep in found}
        for variable, names in (("UG_PLUGINS", only or set()), ("UG_DISABLE_PLUGINS", disabled)):
            self._warn_unknown_plugins(variable, names)
        for ep in found:
            if only is not None and ep.name not in only:
                self.skipped_plugins[ep.name] = "not loaded: not named in UG_PLUGINS"
                continue
            if ep.name in disabled:
                self.skipped_plugins[ep.name] = "not loaded: disabled by UG_DISABLE_PLUGINS"
                continue
            if self.pm.has_plugin(ep.name):
                continue
            try:
                plugin = ep.load()
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # SystemExit too: a broken plugin must never break `import ug_core`
                self._mark_broken(ep.name, f"failed to load ({ep.value}): {_describe(e)}")
                continue
            try:
                self.pm.register(plugin, name=ep.name)
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # pluggy rejects it (a hook with the wrong arguments...)
                self._mark_broken(ep.name, f"rejected by pluggy ({ep.value}): {_describe(e)}")

    def _warn_unknown_plugins(self, variable: str, names: set[str]) -> None:
        known = set(self.entry_points) | {BUILTIN_PLUGIN}
        unknown = sorted(names - known)
        if not unknown:
            return
        by_distribution = {dist: ep for ep, dist in self.entry_points.items()}
        hints = [f"{n!r} is the distribution whose entry point is {by_distribution[n]!r}"
                 for n in unknown if n in by_distribution]
        self._warn(f"ug: {variable} names unknown plugin(s) {', '.join(map(repr, unknown))}; it takes entry-point "
                   f"names (the 'entry point' column of `ug devices`): "
                   f"{', '.join(sorted(self.entry_points)) or 'none installed'} ({BUILTIN_PLUGIN} is built in)"
                   + (f"; {'; '.join(hints)}" if hints else ""))

    def _call_register_hook(self, plugin: Any, plugin_name: str) -> None:
        """Run one plugin's ug_register_devices; its devices are registered only if it returns
        normally (a hook that raised half-way leaves nothing behind)."""
        for spec in self._collect(plugin, plugin_name, "ug_register_devices", DeviceSpec):
            self.register(spec, source=plugin_name)

    def _collect(self, plugin: Any, plugin_name: str, hook_name: str, spec_type: type[SpecT]) -> list[SpecT]:
        """What one plugin's registration hook (`hook_name`, taking `register(spec_type(...))`)
        registers; nothing, and the plugin marked broken, if the hook raises."""
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        hook = self.pm.subset_hook_caller(hook_name, remove_plugins=others)
        collected: list[SpecT] = []

        def register(spec: SpecT) -> None:
            if not isinstance(spec, spec_type):
                raise TypeError(f"register() takes a {spec_type.__name__}, got {type(spec).__name__}")
            collected.append(spec)

        try:
            hook(register=register)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # SystemExit too
            self._mark_broken(plugin_name, f"its {hook_name} hook raised {_describe(e)}")
            return []
        return collected

    def commands(self, builtin: Collection[str] = ()) -> dict[str, CommandSpec]:
        """The `ug` subcommands the loaded plugins contribute (ug_register_commands), by name.
        Each plugin's hook runs on its own: one that raises is a broken plugin (a warning and a
        row in `ug devices`) and contributes nothing. A name in `builtin` (the `ug` command's
        own) or one that a plugin loaded earlier took is reported and the first one kept."""
        self.load()
        found: dict[str, CommandSpec] = {}
        owners: dict[str, str] = {}   # command name -> the plugin that contributed it
        with self._lock:
            for plugin_name, plugin in self.pm.list_name_plugin():
                for spec in self._collect(plugin, plugin_name, "ug_register_commands", CommandSpec):
                    if spec.name in builtin or spec.name in found:
                        taken_by = "a built-in command" if spec.name in builtin else f"plugin {owners[spec.name]!r}"
                        self._warn(f"ug: plugin {plugin_name!r} contributes the command {spec.name!r}, which "
                                   f"{taken_by} already has; keeping that one")
                        continue
                    found[spec.name] = spec
                    owners[spec.name] = plugin_name
        return found

    def _mark_broken(self, plugin_name: str, message: str) -> None:
        with self._lock:
            self.broken_plugins[plugin_name] = message
            plugin = self.pm.get_plugin(plugin_name)
            if plugin is not None:  # no further hook calls into it
                self.pm.unregister(plugin)
        warnings.warn(f"ug: plugin {plugin_name!r} is broken: {message}", RuntimeWarning, stacklevel=3)

    def register(self, spec: DeviceSpec, *, source: str = "") -> None:
        """Register a device spec (`source`: the plugin registering it). Two plugins registering
        the same device name: the lower priority wins, then the smaller plugin name, whatever the
        order they loaded in; the other is shown in `ug devices` as shadowed. The same plugin
        registering a name again replaces its spec."""
        if not isinstance(spec, DeviceSpec):
            raise TypeError(f"register() takes a ug.DeviceSpec, got {type(spec).__name__}")
        with self._lock:
            current = self.specs.get(spec.name)
            if current is not None and current.plugin != spec.plugin:
                current_source = self.sources.get(spec.name, "")
                winner, loser = sorted([(current, current_source), (spec, source)], key=_rank)
                self._warn(f"ug: device {spec.name!r} is registered by both {current.plugin} (priority "
                           f"{current.priority}) and {spec.plugin} (priority {spec.priority}); using "
                           f"{winner[0].plugin}'s (the lower priority, then plugin name, wins)")
                self.shadowed.append(loser)
                if winner[0] is current:
                    return
            self._install(spec, source)

    def _install(self, spec: DeviceSpec, source: str) -> None:
        self.specs[spec.name] = spec
        self.sources[spec.name] = source
        self.devices.pop(spec.name, None)
        self.failures.pop(spec.name, None)
        self.probed.discard(spec.name)
        self.generation += 1

    def register_plugin(self, plugin: Any, name: str | None = None) -> None:
        """Register a plugin object in-process (tests, notebooks): its devices appear at once.
        If its hook raises, it is reported like a broken entry point (a warning and a row in
        `ug devices`) and registers nothing."""
        self.load()
        with self._lock:
            self.pm.register(plugin, name=name)
            self._call_register_hook(plugin, self.pm.get_name(plugin) or str(name))

    def unregister_device(self, name: str) -> None:
        with self._lock:
            self.specs.pop(name, None)
            self.sources.pop(name, None)
            self.devices.pop(name, None)
            self.failures.pop(name, None)
            self.probed.discard(name)
            self.generation += 1
            # a spec this name shadowed takes its place
            waiting = [r for r in self.shadowed if r[0].name == name]
            if waiting:
                best = min(waiting, key=_rank)
                self.shadowed.remove(best)
                self._install(*best)

    def forget_created(self, name: str) -> None:
        """Forget the device object made for `name` (its spec stays): the next use makes a new
        one. For a forked child, where the parent's object does not work (faults)."""
        with self._lock:
            if self.devices.pop(name, None) is not None:
                self.generation += 1

    # --- devices -------------------------------------------------------------------------

    def get(self, name: str) -> Device:
        """The device, created on its first use; DeviceUnavailableError if it cannot be."""
        device = self.devices.get(name)
        if device is not None:
            return device
        self.load()
        with self._lock:
            if name not in self.specs:
                raise ValueError(f"unknown device {name!r}; available devices: {', '.join(self.usable()) or 'none'}")
            device = self._create(name)
            if device is None:
                raise DeviceUnavailableError(f"device {name!r} is not usable: {self.failures[name]}; "
                                             f"available devices: {', '.join(self.usable()) or 'none'}")
            return device

    def _passes_probe(self, name: str) -> bool:
        """Whether the device is usable as far as is known without creating it (see the module doc)."""
        if name in self.devices:
            return True
        if name in self.failures:  # its probe, or its creation after the probe passed, failed
            return False
        if name in self.probed:
            return True
        spec = self.specs[name]
        if spec.probe is None:  # only creating it tells
            return self._create(name) is not None
        try:
            spec.probe()
        except KeyboardInterrupt:
            raise
        except BaseException as e:
            self._fail(name, e)
            return False
        self.probed.add(name)
        return True

    def _create(self, name: str) -> Device | None:
        """The device, created on first use; None (and the reason in `failures`) if its probe or
        factory fails or the factory returns something that is not a ug.Device."""
        device = self.devices.get(name)
        if device is not None:
            return device
        if name in self.failures:
            return None
        spec = self.specs[name]
        if spec.probe is not None and not self._passes_probe(name):
            return None
        try:
            device = spec.factory()
        except KeyboardInterrupt:
            raise
        except BaseException as e:
            self._fail(name, e)
            return None
        if not isinstance(device, Device):
            self.failures[name] = (f"its factory ({spec.plugin}) returned {type(device).__name__}, "
                                   f"not a ug.Device")
            return None
        device.name = name
        self.devices[name] = device
        return device

    def _fail(self, name: str, error: BaseException) -> None:
        self.failures[name] = _describe(error)
        if isinstance(error, ConfigError):  # the user's setting, not the machine: say so, once
            self._warn(f"ug: device {name!r} is not usable: {error}")

    def usable(self, initialize: bool = False) -> list[str]:
        """Usable device names, preferred first (UG_DEVICE, if set and usable, comes first).
        See the module doc for what "usable" promises; initialize=True creates each device."""
        self.load()
        with self._lock:
            ordered = sorted(self.specs.values(), key=lambda s: (s.priority, s.name))
            if initialize:
                names = [s.name for s in ordered if self._create(s.name) is not None]
            else:
                names = [s.name for s in ordered if self._passes_probe(s.name)]
        preferred = os.environ.get("UG_DEVICE", "").strip()
        if preferred:
            if preferred in names:
                names.remove(preferred)
                names.insert(0, preferred)
            else:
                self._warn_bad_preferred(preferred, names)
        return names

    def preferred(self) -> str | None:
        """The device that `device=None` means: the first usable one that initializes (a device
        that passes its probe and then fails to initialize is skipped, and reported)."""
        while True:
            names = self.usable()
            if not names:
                return None
            with self._lock:
                if self._create(names[0]) is not None:
                    return names[0]
            # it failed: it is in `failures` now, so the next usable() leaves it out

    def _warn_bad_preferred(self, preferred: str, usable: list[str]) -> None:
        if preferred in self.specs:
            why = self.failures.get(preferred, "?")
            self._warn(f"ug: UG_DEVICE={preferred!r} is not usable ({why}); usable devices: {', '.join(usable) or 'none'}")
        else:
            self._warn(f"ug: UG_DEVICE={preferred!r} is not a registered device; it takes a device name (the "
                       f"'device' column of `ug devices`): {', '.join(sorted(self.specs)) or 'none'}")

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            warnings.warn(message, RuntimeWarning, stacklevel=3)

    def status(self, initialize: bool = True) -> list[DeviceStatus]:
        """The rows of `ug devices`: every device (created, unless initialize=False, so that the
        reason a device fails is known), shadowed specs, broken and skipped plugins."""
        usable = set(self.usable(initialize=initialize))
        with self._lock:
            rows = []
            for s in sorted(self.specs.values(), key=lambda s: (s.priority, s.name)):
                ok = s.name in usable
                detail = (getattr(self.devices.get(s.name), "description", "") or "") if ok else ""
                rows.append(DeviceStatus(s.name, s.plugin, s.version, ok, "" if ok else self.failures.get(s.name, "?"),
                                         detail, self.sources.get(s.name, "")))
            for s, source in self.shadowed:
                winner = self.specs.get(s.name)
                by = f"{winner.plugin} (priority {winner.priority})" if winner is not None else "another plugin"
                rows.append(DeviceStatus(s.name, s.plugin, s.version, False,
                                         f"shadowed: device name {s.name!r} is taken by {by}; this one has priority {s.priority}",
                                         entry_point=source))
            for name, err in self.broken_plugins.items():
                rows.append(DeviceStatus("-", self.entry_points.get(name, "?"), "?", False, f"broken plugin: {err}",
                                         entry_point=name))
            for name, why in self.skipped_plugins.items():
                rows.append(DeviceStatus("-", self.entry_points.get(name, "?"), "?", False, why, entry_point=name))
        return rows


def _rank(registration: tuple[DeviceSpec, str]) -> tuple[int, str, str]:
    """Which of two specs for one device name wins (the smaller): priority, then plugin name."""
    spec, source = registration
    return spec.priority, spec.plugin, source


def _env_list(name: str) -> set[str] | None:
    value = os.environ.get(name)
    if value is None:
        return None
    return {v.strip() for v in value.split(",") if v.strip()}


registry = Registry()


UNPICKLE_DEVICE_ENV = "UG_UNPICKLE_DEVICE"
"""Where unpickled tensors go: unset or `same` (the device they were pickled from), `preferred` (the
receiving process's preferred device: what `device=None` means there), or a device name."""


def unpickle_device(device: str) -> str:
    """The device a tensor pickled from `device` lands on in this process ($UG_UNPICKLE_DEVICE,
    read at each unpickle so that a worker's own environment decides): the same name by default, a
    ValueError naming it and the usable devices when this process has no such usable device."""
    setting = os.environ.get(UNPICKLE_DEVICE_ENV, "").strip() or "same"
    if setting == "preferred":
        chosen = registry.preferred()
        if chosen is None:
            raise ValueError(f"cannot unpickle a tensor ({UNPICKLE_DEVICE_ENV}=preferred): this process has no "
                             f"usable device")
        return chosen
    target = device if setting == "same" else setting
    try:
        registry.get(target)
    except ValueError as e:  # (DeviceUnavailableError is one): the same type, saying what failed
        why = (f"it was pickled on device {device!r}" if setting == "same"
               else f"{UNPICKLE_DEVICE_ENV}={setting!r} names it")
        raise type(e)(f"cannot unpickle a tensor of device {target!r} here ({why}): {e}; usable devices here: "
                      f"{', '.join(registry.usable()) or 'none'}. Set {UNPICKLE_DEVICE_ENV}=preferred (or a "
                      f"device name) in the reading process, or pickle t.to(name) or t.numpy()") from e
    return target
