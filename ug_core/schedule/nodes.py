"""The graph walk a schedule starts from: the nodes a realize computes, sources first."""

from __future__ import annotations

from typing import Iterable

from ..graph import Node


def unrealized(targets: Iterable[Node]) -> list[Node]:
    """The targets a schedule computes: each node once, in order, leaving out realized ones."""
    return list(dict.fromkeys(t for t in targets if not t.realized))


def walk(targets: Iterable[Node]) -> list[Node]:
    """Nodes reachable from targets (not looking past realized ones), sources before users:
    dag.toposort's order, written out for nodes (every realize walks its graph, once: the walk
    that keys it by structure feeds the scheduler too; the generic walk's callback and pairs
    were most of its cost)."""
    order: list[Node] = []
    seen: set[int] = set()
    for root in targets:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(root.srcs if root.buffer is None else ()))]
        while stack:
            node, srcs = stack[-1]
            for src in srcs:
                if id(src) not in seen:
                    seen.add(id(src))
                    stack.append((src, iter(src.srcs if src.buffer is None else ())))
                    break
            else:
                stack.pop()
                order.append(node)
    return order
