"""Ordering the items: topological, stable, with in-place writes after every reader of the
value they overwrite (a cycle is a ScheduleError)."""

from __future__ import annotations

import heapq

from ..graph import Node
from .items import Item, ScheduleError


def _order(items: list[Item], in_place: set[Node]) -> list[Item]:
    """Topological order (Kahn, stable). An assign writing in place into its target's buffer
    also waits for every other item that reads that buffer."""
    producer: dict[int, int] = {}
    readers: dict[int, list[int]] = {}  # node -> the items that read its buffer
    for i, item in enumerate(items):
        for out in item.outputs:
            producer[id(out)] = i   # the last item writing a node (an assign's copy comes first)
        for src in item.buffers[len(item.outputs):]:
            readers.setdefault(id(src), []).append(i)
    edges: dict[int, set[int]] = {i: set() for i in range(len(items))}
    for i, item in enumerate(items):
        for src in item.buffers[len(item.outputs):]:
            j = producer.get(id(src))
            if j is not None and j != i:
                edges[j].add(i)
        for out in item.outputs:
            j = producer[id(out)]
            if j != i:
                edges[i].add(j)  # copy before partial write
            if out in in_place:
                target = out.srcs[0]
                j = producer.get(id(target))
                if j is not None and j != i:
                    edges[j].add(i)  # a target computed here is written into once it exists
                for k in readers.get(id(target), ()):
                    if k != i:
                        edges[k].add(i)
    indegree = {i: 0 for i in edges}
    for outs in edges.values():
        for j in outs:
            indegree[j] += 1
    ready = [i for i, d in indegree.items() if d == 0]  # a heap: the lowest ready index first
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in edges[i]:
            indegree[j] -= 1
            if indegree[j] == 0:
                heapq.heappush(ready, j)
    if len(order) != len(items):
        done = set(order)
        stuck = [items[i].describe() for i in edges if i not in done]
        raise ScheduleError("cycle in the schedule (an in-place write and a read that depend on each other): " + "; ".join(stuck))
    return [items[i] for i in order]
