"""In-place writes: which assigns may write straight into their target's buffer (nothing alive
reads its old value afterwards), and which of those kernels would read the target other than
element by element while writing it (they then write through a buffer of their own)."""

from __future__ import annotations

from typing import Iterable

from .. import dag, graph
from ..device import is_writable
from ..graph import Node
from ..kernel_ir import Expr, toposort
from ..ops import Op
from ..view import View
from .items import Item, KernelItem


def _in_place_assigns(nodes: list[Node], targets: list[Node], realize: set[Node]) -> set[Node]:
    """Assigns that may write straight into their target's buffer instead of a new one.

    ug has value semantics: a tensor read before a write keeps the value it had (see
    Tensor.assign). Writing in place is therefore allowed only when nothing can observe the
    target's old value after this schedule (`_observed_after`); inside the schedule, `_order`
    runs every item that reads the old value before the write. At most one assign per target
    writes in place (two tensors of one node written separately each keep their own result:
    the other copies). A target computed by this schedule (a lazy tensor written before it was
    ever realized) lends its new buffer to the assign and stays lazy itself, see
    `Schedule.clobbered`, so k writes into a lazy tensor make one buffer, not k+1."""
    if graph.threads.several:   # (see graph.threads: a reader another thread is building is not seen)
        return set()
    target_ids = {id(t) for t in targets}
    # targets of assigns in this schedule: their buffers may be overwritten, so a reader that
    # "gets a buffer" by being one of them may still be left reading an older buffer
    assigned = {id(n.srcs[0]) for n in nodes if n.op is Op.ASSIGN and not n.realized}
    claimed: set[int] = set()
    memo: dict[int, bool] = {}
    out = set()
    for node in nodes:  # sources before users: the earliest write to a target claims it
        if node.op is not Op.ASSIGN or node.realized:
            continue
        target = node.srcs[0]
        if id(target) in claimed or id(target) in target_ids:
            continue
        if target.realized and (getattr(target.buffer, "shared", False) or not is_writable(target.buffer)):
            # a buffer other nodes read too (e.g. a cached scalar parameter), or read-only memory
            # ug was lent (asarray of a read-only numpy array): the write goes into a new buffer
            continue
        if _observed_after(target, node, realize, assigned, memo):
            continue
        claimed.add(id(target))
        out.add(node)
    return out


def _observed_after(target: Node, writer: Node, realize: set[Node], assigned: set[int], memo: dict[int, bool]) -> bool:
    """Whether anything alive may read `target`'s value after this schedule ran: a tensor
    holding it, or holding a lazy node that reads it (directly or through other lazy nodes).
    A reader that this schedule realizes (computed before the write, then holding its own
    buffer) ends the path, unless it is itself the target of an assign here.

    `memo` keeps the answer per node across the assigns of one schedule (a chain of k writes
    would otherwise walk the chain k times). Iterative: graphs can be deep."""
    def onward(node: Node) -> list[Node]:
        return [r for r in node.readers() if isinstance(r, Node)
                and not r.realized and (r not in realize or id(r) in assigned)]

    if _held(target):
        return True
    # (the write itself reads the target, but its result is the new value, not an observer)
    stack = [iter([r for r in onward(target) if r is not writer])]
    path: list[Node] = []  # path[k] is the node whose readers stack[k + 1] walks
    while stack:
        reader = next(stack[-1], None)
        if reader is None:
            stack.pop()
            if path:
                memo[id(path.pop())] = False
            continue
        known = memo.get(id(reader))
        if known is None and _held(reader):
            known = memo[id(reader)] = True
        if known:
            for node in path:
                memo[id(node)] = True
            return True
        if known is None:
            path.append(reader)
            stack.append(iter(onward(reader)))
    return False


def _held(node: Node) -> bool:
    """Whether a live tensor holds `node` as its value (a tensor that has moved on to a newer
    value no longer does), or may: a ug.jit output is known by its id only (Node._creator)."""
    if node._creator:
        return True
    return any(not isinstance(r, Node) and r._holds(node) for r in node.readers())


def _misaligned_in_place(items: list[Item], in_place: set[Node]) -> set[Node]:
    """The in-place assigns whose kernel reads the target other than element by element (e.g.
    `p[:, 0] = p[:, 1]`, `p[::-1] = p`, or a reduction over it): writing while reading would
    let an element read what another already overwrote. Such a value gets a buffer of its
    own first (the size of the written region), then the write copies it in place; a value
    that is a buffer already (the target itself, realized or the result of an earlier write
    of this schedule into the same buffer) is written into a fresh buffer instead."""
    out: set[Node] = set()
    for item in items:
        if not isinstance(item, KernelItem) or not item.alias:
            continue
        kernel = item.kernel
        for node, target in item.alias.items():
            if node not in in_place:
                continue
            reads = {i for i, b in enumerate(item.buffers) if b is target and i >= len(item.outputs)}
            if not reads:
                continue
            index = item.outputs.index(node)
            store = kernel.stores[index]
            aligned = not any(_loads_from(r.expr, reads) for r in kernel.reductions)
            aligned = aligned and _reads_only_at([store.expr], reads, store.view)
            for j, other in enumerate(kernel.stores):
                # another store may read the target only where this one writes, and before it
                # (a write merged with its readers, see _write_clusters): the old value
                if other is not store and _loads_from(other.expr, reads) and (
                        j > index or other.shape != store.shape or not _reads_only_at([other.expr], reads, store.view)):
                    aligned = False
            if not aligned:
                out.add(node)
    return out


def _loads_from(expr: Expr, bufs: set[int]) -> bool:
    return any((e.op is Op.LOAD and e.arg[0] in bufs) or (e.op is Op.GATHER and e.arg in bufs) for e in toposort(expr))


def _reads_only_at(exprs: Iterable[Expr], bufs: set[int], view: View) -> bool:
    """Whether `exprs` read the arguments `bufs` only through `view` (no other chain, no gather)."""
    for e in dag.toposort(list(exprs), lambda e: e.srcs):
        if e.op is Op.LOAD and e.arg[0] in bufs and tuple(e.arg[1]) != (view,):
            return False
        if e.op is Op.GATHER and e.arg in bufs:
            return False
    return True
