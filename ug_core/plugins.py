"""The device registry: loads plugins through pluggy and entry points, creates devices lazily."""

from __future__ import annotations

import os
import threading
import warnings
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import pluggy

from . import hookspecs
from .device import Device, DeviceSpec


@dataclass
class DeviceStatus:
    """One row of `ug devices`."""

    name: str
    plugin: str
    version: str
    usable: bool
    reason: str
    detail: str = ""  # the usable device's `description` (e.g. the GPU's name)


class Registry:
    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.specs: dict[str, DeviceSpec] = {}
        self.devices: dict[str, Device] = {}
        self.failures: dict[str, str] = {}         # device name -> why it is unusable
        self.broken_plugins: dict[str, str] = {}   # entry point name -> import error
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

            self.pm.register(ref, name="ref")
            self._load_entry_points()
            self.pm.hook.ug_register_devices(register=self.register)

    def _load_entry_points(self) -> None:
        only = _env_list("UG_PLUGINS")
        disabled = _env_list("UG_DISABLE_PLUGINS")
        for ep in metadata.entry_points(group=hookspecs.ENTRY_POINT_GROUP):
            if (only is not None and ep.name not in only) or (disabled and ep.name in disabled):
                continue
            if self.pm.has_plugin(ep.name):
                continue
            try:
                plugin = ep.load()
                self.pm.register(plugin, name=ep.name)
            except Exception as e:  # a broken plugin must never break `import ug_core`
                msg = f"{type(e).__name__}: {e}"
                self.broken_plugins[ep.name] = msg
                warnings.warn(f"ug: plugin {ep.name!r} ({ep.value}) failed to load: {msg}", RuntimeWarning, stacklevel=2)

    def register(self, spec: DeviceSpec) -> None:
        with self._lock:
            if spec.name in self.specs and self.specs[spec.name].plugin != spec.plugin:
                warnings.warn(f"ug: device {spec.name!r} registered by {spec.plugin} replaces the one from "
                              f"{self.specs[spec.name].plugin}", RuntimeWarning, stacklevel=2)
            self.specs[spec.name] = spec
            self.devices.pop(spec.name, None)
            self.failures.pop(spec.name, None)
            self.generation += 1

    def register_plugin(self, plugin: Any, name: str | None = None) -> None:
        """Register a plugin object in-process (tests, notebooks): its devices appear at once."""
        self.load()
        self.pm.register(plugin, name=name)
        hook = getattr(plugin, "ug_register_devices", None)
        if hook is not None:
            hook(register=self.register)

    def unregister_device(self, name: str) -> None:
        with self._lock:
            self.specs.pop(name, None)
            self.devices.pop(name, None)
            self.failures.pop(name, None)
            self.generation += 1

    # --- devices -------------------------------------------------------------------------

    def get(self, name: str) -> Device:
        device = self.devices.get(name)
        if device is not None:
            return device
        self.load()
        with self._lock:
            if name not in self.specs:
                raise ValueError(f"unknown device {name!r}; available devices: {', '.join(self.usable()) or 'none'}")
            device = self._probe(name)
            if device is None:
                raise ValueError(f"device {name!r} is not usable: {self.failures[name]}; "
                                 f"available devices: {', '.join(self.usable())}")
            return device

    def _probe(self, name: str) -> Device | None:
        """The device, created on first use; None (and the reason in `failures`) if its factory fails."""
        if name in self.devices:
            return self.devices[name]
        if name in self.failures:
            return None
        try:
            device = self.specs[name].factory()
        except Exception as e:
            self.failures[name] = f"{type(e).__name__}: {e}"
            return None
        device.name = name
        self.devices[name] = device
        return device

    def usable(self) -> list[str]:
        """Usable device names, preferred first (UG_DEVICE, if set and usable, comes first)."""
        self.load()
        with self._lock:
            names = [s.name for s in sorted(self.specs.values(), key=lambda s: (s.priority, s.name))
                     if self._probe(s.name) is not None]
        preferred = os.environ.get("UG_DEVICE")
        if preferred in names:
            names.remove(preferred)
            names.insert(0, preferred)
        return names

    def status(self) -> list[DeviceStatus]:
        usable = set(self.usable())
        rows = [DeviceStatus(s.name, s.plugin, s.version, s.name in usable, "" if s.name in usable else self.failures.get(s.name, "?"),
                             getattr(self.devices.get(s.name), "description", "") or "" if s.name in usable else "")
                for s in sorted(self.specs.values(), key=lambda s: (s.priority, s.name))]
        for ep_name, err in self.broken_plugins.items():
            rows.append(DeviceStatus("-", ep_name, "?", False, f"plugin failed to load: {err}"))
        return rows


def _env_list(name: str) -> set[str] | None:
    value = os.environ.get(name)
    if value is None:
        return None
    return {v.strip() for v in value.split(",") if v.strip()}


registry = Registry()
