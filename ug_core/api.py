"""Module-level entry points: devices(), realize() (tensor_io's), schedule()."""

from __future__ import annotations

from .graph import graph_lock
from .plugins import registry
from .schedule import Schedule, create_schedule
from .tensor import Tensor
from .tensor_io import nodes_of, realize

__all__ = ["devices", "realize", "schedule"]


def devices(initialize: bool = False) -> list[str]:
    """Usable device names, preferred first (e.g. ["cpu", "vulkan", "ref"]).

    Cheap: a device is listed when its plugin's probe passed (its driver library loads, its
    settings are valid); its hardware is initialized on first use, and one that then fails to
    initialize raises `ug.DeviceUnavailableError` saying why and drops out of this list.
    initialize=True initializes every device first and lists those that work."""
    return registry.usable(initialize=initialize)


def schedule(*tensors: Tensor) -> Schedule:
    """The schedule that would realize these tensors, without running it."""
    with graph_lock:   # (as a realize: another thread's would change the graph under it)
        return create_schedule(nodes_of(tensors))
