"""Module-level entry points: devices(), realize(), schedule()."""

from __future__ import annotations

from typing import Any

from .graph import graph_lock
from .graph import note_thread
from .plugins import registry
from .runtime import realize_nodes
from .schedule import Schedule, create_schedule
from .tensor import Tensor, TensorView, tracing


def devices(initialize: bool = False) -> list[str]:
    """Usable device names, preferred first (e.g. ["cpu", "vulkan", "ref"]).

    Cheap: a device is listed when its plugin's probe passed (its driver library loads, its
    settings are valid); its hardware is initialized on first use, and one that then fails to
    initialize raises `ug.DeviceUnavailableError` saying why and drops out of this list.
    initialize=True initializes every device first and lists those that work."""
    return registry.usable(initialize=initialize)


def _nodes(tensors: tuple[Any, ...]) -> list[Any]:
    nodes = []
    for t in tensors:
        if isinstance(t, (list, tuple)):
            nodes += _nodes(tuple(t))
        elif isinstance(t, Tensor):
            nodes.append(t.node)
        else:
            raise TypeError(f"expected tensors, got {type(t).__name__}")
    return nodes


def schedule(*tensors: Tensor) -> Schedule:
    """The schedule that would realize these tensors, without running it."""
    with graph_lock:   # (as a realize: another thread's would change the graph under it)
        return create_schedule(_nodes(tensors))


def realize(*tensors: Tensor) -> Any:
    """Compute several tensors with one schedule (shared work is done once).

    While ug.jit traces a function (on this thread) it does nothing: the tensors stay lazy and
    the trace computes them (see ug_core.jit)."""
    nodes = _nodes(tensors)
    if not tracing():
        note_thread()
        realize_nodes(nodes)
        _keep_views(tensors)
    return tensors[0] if len(tensors) == 1 else tensors


def _keep_views(tensors: tuple[Any, ...]) -> None:
    """Views keep the value just computed for them (TensorView.realize: done already, so cheap)."""
    for t in tensors:
        if isinstance(t, (list, tuple)):
            _keep_views(tuple(t))
        elif isinstance(t, TensorView):
            t.realize()
