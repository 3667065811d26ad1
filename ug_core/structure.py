"""The structure of a lazy graph, as a key: what the scheduler's decisions depend on.

Realizing `x * 2 + y` a second time on new tensors of the same shapes builds a graph that
differs from the first only in which buffers it reads. The scheduler would decide the same
kernels and the compile cache would return the same programs, at a cost far above running
them (a few hundred us of Python for a small graph). `graph_key` names such a graph by its
structure, so the runtime can keep the compiled steps of the first one and run them on the
second one's buffers (see execute.realize_nodes).

What the scheduler reads of a node, and so what the key holds: for a node still to compute,
its op, argument, shape, dtype, device and which nodes it reads (by position in the walk);
for a realized node, only that it is a buffer of some shape, dtype and device. Positions
come from the walk `schedule.walk` makes, which visits two graphs of one structure in the
same order, so position i of one is position i of the other.
"""

from __future__ import annotations

from typing import Hashable

from .graph import Node
from .ops import Op


def graph_key(nodes: list[Node], targets: list[Node], assigns: bool = False) -> tuple[Hashable, ...] | None:
    """The structure of the graph `nodes` (schedule.walk(targets)) computing `targets`, or None
    when the schedule depends on more than the structure: an assign writes in place only when
    no live tensor still reads its target, which the graph does not show. assigns=True keys
    such a graph too, for a caller that checks the in-place writes itself (execute.realize_nodes)."""
    # (one pass of plain loads and one tuple per node: it runs on every realize, over graphs of
    # tens of thousands of nodes for SciPy's resampling loops; `sig` is (shape, dtype, device)
    # as one tuple the node already holds)
    position: dict[int, int] = {}
    parts: list[Hashable] = []
    append = parts.append
    assign, const = Op.ASSIGN, Op.CONST
    i = 0
    for node in nodes:
        position[id(node)] = i
        i += 1
        if node.buffer is not None:
            append(node.sig)
            continue
        op = node.op
        srcs = node.srcs
        n = len(srcs)
        if n == 1:
            reads: tuple[int, ...] = (position[id(srcs[0])],)
        elif n == 2:
            reads = (position[id(srcs[0])], position[id(srcs[1])])
        elif n:
            reads = tuple([position[id(s)] for s in srcs])
        else:
            reads = ()
            if op is const and type(node.arg) is float:
                append((op, node.arg.hex(), node.sig, reads))  # -0.0 is not 0.0, and a nan equals itself
                continue
        if op is assign and not assigns:
            return None
        append((op, node.arg, node.sig, reads))
    append(tuple([position[id(t)] for t in targets]))
    return tuple(parts)
