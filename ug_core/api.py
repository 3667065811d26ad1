"""Module-level entry points: devices(), realize(), schedule()."""

from __future__ import annotations

from typing import Any

from .plugins import registry
from .runtime import realize_nodes
from .schedule import Schedule, create_schedule
from .tensor import Tensor


def devices() -> list[str]:
    """Usable device names, preferred first (e.g. ["cpu", "vulkan", "ref"])."""
    return registry.usable()


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
    return create_schedule(_nodes(tensors))


def realize(*tensors: Tensor) -> Any:
    """Compute several tensors with one schedule (shared work is done once)."""
    realize_nodes(_nodes(tensors))
    return tensors[0] if len(tensors) == 1 else tensors
