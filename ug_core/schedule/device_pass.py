"""The scheduler's device pass: the forms of a lazy graph that a device cannot run as they are,
rewritten for it before anything is scheduled, so that the graph the frontend builds is the
same on every device (the frontend decides by shapes only).

A device's limit asks for it, Device.max_loop_iterations (lavapipe's Vulkan ends any
invocation's loops after 65535 trips in all, silently):
- a scan whose rows are longer is blocked (blocked_scan.blocked: three kernels, each looping
  about sqrt(n) times);
- a scatter whose parts are longer runs in k times as many parts, each part of the graph's
  split into k shorter ones, whose rows are then combined: the same (parts, slots) rows.

The pass leaves the user's nodes alone. It builds a stand-in for every rewritten node and for
every node above one (the same op over the stand-ins of its sources), and the schedule computes
the stand-ins; `Rewrite.replaced` maps each original to its stand-in, whose buffer the original
takes after the run (Schedule.adopt_stand_ins). A graph without the ops the pass rewrites costs
one look at each node's op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .. import graph
from ..blocked_scan import blocked
from ..dtypes import BOOL
from ..graph import Node, new_node
from ..ops import Op
from ..plugins import registry
from ..view import View
from .build import scatter_identity
from .nodes import walk

MAX_PASSES = 4
"""A stand-in may need the pass itself (a scan of more than 2**32 values blocks into blocks
longer than lavapipe's limit): the pass runs again on what it built, this many times at most."""


@dataclass
class Rewrite:
    targets: list[Node]               # what the schedule computes in the targets' place
    replaced: dict[Node, Node]        # an original node -> its stand-in


def _loop_limit(device: str, limits: dict[str, int | None]) -> int | None:
    if device not in limits:
        limits[device] = registry.get(device).max_loop_iterations
    return limits[device]


Decompose = Callable[[Node, tuple[Node, ...]], Node]
"""Builds the graph that computes a node (first argument) from its sources' stand-ins."""
_decompositions: dict[Op, tuple[Callable[[Node], bool], Decompose]] = {}


def register_decomposition(op: Op, needed: Callable[[Node], bool], build: Decompose) -> None:
    """Where `needed(node)` (e.g. its device has no kernel for it), the device pass builds a
    node of `op` as `build(node, srcs)`, a graph of other ops. A module above the scheduler
    registers it (nn.attention: a fused attention on a device without one)."""
    _decompositions[op] = (needed, build)


def _rewritten_ops() -> frozenset[Op]:
    return frozenset({Op.SCAN, Op.SCATTER, *_decompositions})


def _needs_pass(node: Node, limits: dict[str, int | None]) -> bool:
    """Whether `node` needs the pass: a scan's rows or a scatter's parts loop past its device's
    limit, or it has a decomposition its device needs (a realized node runs nothing)."""
    if node.buffer is not None:
        return False
    if node.op is Op.SCAN:
        limit = _loop_limit(node.device, limits)
        return limit is not None and node.shape[node.arg[1]] > limit
    if node.op is Op.SCATTER:
        limit = _loop_limit(node.device, limits)
        return limit is not None and node.srcs[0].shape[0] // node.arg[2] > limit
    rule = _decompositions.get(node.op)
    return rule is not None and rule[0](node)


def for_device(targets: list[Node], nodes: list[Node]) -> Rewrite | None:
    """The rewrite of the graph of `targets` (walked: `nodes`, sources first) for its devices'
    limits; None when it needs none (the common case: no node loops past a limit)."""
    limits: dict[str, int | None] = {}
    ops = _rewritten_ops()
    if not any(_needs_pass(n, limits) for n in nodes if n.op in ops):
        return None
    replaced = _one_pass(nodes, limits)
    targets = [replaced.get(t, t) for t in targets]
    for _ in range(MAX_PASSES - 1):
        again = _one_pass(walk(targets), limits)   # (its keys are stand-ins built before)
        if not again:
            return Rewrite(targets, replaced)
        replaced = {orig: again.get(new, new) for orig, new in replaced.items()}
        targets = [again.get(t, t) for t in targets]
    raise RuntimeError(f"device pass: a node still loops past its device's limit after {MAX_PASSES} passes: "
                       f"{[n for n in walk(targets) if _needs_pass(n, limits)]}")


def _one_pass(nodes: list[Node], limits: dict[str, int | None]) -> dict[Node, Node]:
    stand_in: dict[Node, Node] = {}
    for node in nodes:   # (sources first)
        srcs = tuple(stand_in.get(s, s) for s in node.srcs)
        if _needs_pass(node, limits):
            stand_in[node] = _rewritten(node, srcs, limits)
        elif any(a is not b for a, b in zip(srcs, node.srcs)):
            stand_in[node] = new_node(node.op, srcs, node.arg, node.sig)
    return stand_in


def _rewritten(node: Node, srcs: tuple[Node, ...], limits: dict[str, int | None]) -> Node:
    if node.op in _decompositions:
        return _decompositions[node.op][1](node, srcs)
    limit = _loop_limit(node.device, limits)
    assert limit is not None
    if node.op is Op.SCAN:
        op, axis = node.arg
        return blocked(srcs[0], op, axis, node.dtype)
    return _split_parts(node, srcs[0], srcs[1], limit)


def _split_parts(node: Node, values: Node, slots: Node, limit: int) -> Node:
    """A SCATTER's (parts, n_slots) rows from k times as many parts of at most `limit`
    values each: part p of the graph's is parts p*k .. p*k + k-1 here (each padded at its
    end with the identity written to slot 0, which changes nothing), their rows combined."""
    rop, n_slots, parts = node.arg
    length = values.shape[0] // parts
    k = -(-length // limit)
    sub = -(-length // k)
    padded = View.contiguous((parts * length,)).reshape((parts, length))
    assert padded is not None
    padded = padded.pad(((0, 0), (0, k * sub - length)))
    flat = View.contiguous((parts, k * sub)).reshape((parts * k * sub,))
    assert flat is not None

    def split(src: Node, fill: Node | None) -> Node:
        rows = graph.view(src, padded)
        if fill is not None:
            rows = graph.alu(Op.WHERE, (inside, rows, fill), src.dtype)
        return graph.view(rows, flat)

    inside = graph.view(graph.const(True, BOOL, node.device, (parts * length,)), padded)
    fill = graph.const(scatter_identity(rop, values.dtype), values.dtype, node.device, (parts, k * sub))
    rows = graph.scatter(split(values, fill), split(slots, None), rop, n_slots, parts * k)
    grouped = graph.view(rows, View.contiguous(rows.shape).reshape((parts, k, n_slots))
                         or View.contiguous((parts, k, n_slots)))
    combined = graph.reduce(grouped, rop, (1,), node.dtype)   # (parts, 1, n_slots)
    return graph.view(combined, View.contiguous(combined.shape).reshape((parts, n_slots))
                      or View.contiguous((parts, n_slots)))
