"""Depth-first topological order of a DAG (iterative: graphs can be deeper than Python's recursion limit)."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")


def toposort(roots: Iterable[T], sources: Callable[[T], Sequence[T]]) -> list[T]:
    """Every node reachable from `roots`, each once, sources before their users."""
    order: list[T] = []
    seen: set[int] = set()
    for root in roots:
        stack: list[tuple[T, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((s, False) for s in reversed(sources(node)) if id(s) not in seen)
    return order
