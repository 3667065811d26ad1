"""The scheduler's device pass: the forms of a lazy graph that a device cannot run as they are,
rewritten for it before anything is scheduled, so that the graph the frontend builds is the
same on every device (the frontend decides by shapes only).

One device limit asks for it today, Device.max_loop_iterations (lavapipe's Vulkan ends any
invocation's loops after 65535 trips in all, silently):
- a scan whose rows are longer is blocked (blocked_scan.blocked: three kernels, each looping
  about sqrt(n) times);
- a scatter whose parts are longer runs in k times as many parts, each part of the graph's
  split into k shorter ones, whose rows are then combined: the same (parts, slots) rows.

The pass leaves the user's nodes alone. It builds a stand-in for every rewritten node and for
every node above one (the same op over the stand-ins of its sources), and the schedule computes
the stand-ins; `Rewrite.replaced` maps each original to its stand-in, whose buffer the original
takes after the run (Schedule.adopt_stand_ins). A device without limits costs one look at the
scans and scatters of the graph.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def _too_long(node: Node, limits: dict[str, int | None]) -> bool:
    """Whether `node` loops past its device's limit: a scan's rows, a scatter's parts (a
    realized one runs nothing)."""
    if node.buffer is not None:
        return False
    if node.op is Op.SCAN:
        limit = _loop_limit(node.device, limits)
        return limit is not None and node.shape[node.arg[1]] > limit
    if node.op is Op.SCATTER:
        limit = _loop_limit(node.device, limits)
        return limit is not None and node.srcs[0].shape[0] // node.arg[2] > limit
    return False


def for_device(targets: list[Node], nodes: list[Node]) -> Rewrite | None:
    """The rewrite of the graph of `targets` (walked: `nodes`, sources first) for its devices'
    limits; None when it needs none (the common case: no node loops past a limit)."""
    limits: dict[str, int | None] = {}
    if not any(_too_long(n, limits) for n in nodes if n.op in (Op.SCAN, Op.SCATTER)):
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
                       f"{[n for n in walk(targets) if _too_long(n, limits)]}")


def _one_pass(nodes: list[Node], limits: dict[str, int | None]) -> dict[Node, Node]:
    stand_in: dict[Node, Node] = {}
    for node in nodes:   # (sources first)
        srcs = tuple(stand_in.get(s, s) for s in node.srcs)
        if _too_long(node, limits):
            stand_in[node] = _shorter(node, srcs, limits)
        elif any(a is not b for a, b in zip(srcs, node.srcs)):
            stand_in[node] = new_node(node.op, srcs, node.arg, node.sig)
    return stand_in


def _shorter(node: Node, srcs: tuple[Node, ...], limits: dict[str, int | None]) -> Node:
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
