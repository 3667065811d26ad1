"""The scheduler: decide which nodes get a buffer, group everything else into kernels.

Rules (see the kernel_ir docstring for the kernel shape they target):
- every elementwise chain, however long, is fused into the kernel that consumes it;
- a reduction fuses with its elementwise producers and with elementwise consumers of its
  result when they iterate over the same rows: the kernel then computes the reduction once
  per row (an accumulator) and reuses it, e.g. softmax and layernorm are one kernel each;
- a reduction that cannot be fused that way, or that two kernels would need, gets a buffer
  (it is never recomputed per output element, nor once per consuming kernel);
- matmul, custom and cross-device copy are schedule items of their own;
- independent outputs with the same iteration space share one kernel (ug.realize(a, b));
- items come out in topological order; an assign that writes a buffer in place runs after
  every item of the schedule that reads the old value, and a cycle is a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from . import dag
from .device import MatmulSpec
from .dtypes import name as dtype_name
from .graph import Node
from .kernel_ir import BufferArg, Expr, ExprBuilder, Kernel, Reduction, Store
from .ops import ALU, REDUCE, Op
from .view import View, ViewChain, chain_push, contiguous_strides, prod


class ScheduleError(RuntimeError):
    """The graph cannot be scheduled (e.g. a cycle created by in-place writes)."""


# --- schedule items -------------------------------------------------------------------


@dataclass
class KernelItem:
    kernel: Kernel
    buffers: list[Node]          # in the kernel's argument order; outputs first
    outputs: list[Node]
    fused: list[str] = field(default_factory=list)
    alias: dict[Node, Node] = field(default_factory=dict)   # output -> node whose buffer it writes in place
    reduces: list[Node] = field(default_factory=list)       # REDUCE nodes computed inside
    kind: str = "kernel"

    def describe(self) -> str:
        outs = ", ".join(f"{n.shape}" for n in self.outputs)
        red = f", {len(self.kernel.reductions)} reduction(s) over axes {self.kernel.axes}" if self.kernel.reductions else ""
        ops = " ".join(self.fused) if self.fused else "copy"
        return f"kernel {self.kernel.name}: -> {outs}{red}; fuses [{ops}]"


@dataclass
class MatmulItem:
    out: Node
    a: Node
    b: Node
    spec: MatmulSpec
    kind: str = "matmul"

    @property
    def buffers(self) -> list[Node]:
        return [self.out, self.a, self.b]

    @property
    def outputs(self) -> list[Node]:
        return [self.out]

    def describe(self) -> str:
        return f"matmul {self.spec.a_view.shape} @ {self.spec.b_view.shape} -> {self.out.shape} {dtype_name(self.out.dtype)}"


@dataclass
class CustomItem:
    out: Node
    inputs: list[Node]
    fn: Callable[..., Any]
    kind: str = "custom"

    @property
    def buffers(self) -> list[Node]:
        return [self.out, *self.inputs]

    @property
    def outputs(self) -> list[Node]:
        return [self.out]

    def describe(self) -> str:
        name = getattr(self.fn, "__name__", type(self.fn).__name__)
        return f"custom {name}({', '.join(str(n.shape) for n in self.inputs)}) -> {self.out.shape}"


@dataclass
class CopyItem:
    out: Node
    src: Node
    kind: str = "copy"

    @property
    def buffers(self) -> list[Node]:
        return [self.out, self.src]

    @property
    def outputs(self) -> list[Node]:
        return [self.out]

    def describe(self) -> str:
        return f"copy {self.src.shape} {self.src.device} -> {self.out.device}"


Item = KernelItem | MatmulItem | CustomItem | CopyItem


@dataclass
class Schedule:
    items: list[Item]
    targets: list[Node]

    @property
    def kernels(self) -> list[KernelItem]:
        return [i for i in self.items if isinstance(i, KernelItem)]

    def __str__(self) -> str:
        counts: dict[str, int] = {}
        for item in self.items:
            counts[item.kind] = counts.get(item.kind, 0) + 1
        summary = ", ".join(f"{n} {k}" for k, n in counts.items()) or "nothing to do"
        lines = [f"schedule: {summary}"]
        lines += [f"  [{i}] {item.describe()}" for i, item in enumerate(self.items)]
        return "\n".join(lines)


# --- building one kernel ------------------------------------------------------------------


class _NeedsBuffer(Exception):
    """Raised while building a kernel: `node` must be realized into its own buffer first."""

    def __init__(self, node: Node):
        super().__init__(repr(node))
        self.node = node


ITEM_OPS = frozenset({Op.MATMUL, Op.CUSTOM, Op.COPY})
"""Ops that are schedule items of their own, never fused into a kernel."""


def _loads_buffer(node: Node, realize: set[Node]) -> bool:
    return node.realized or node in realize


@dataclass(frozen=True)
class _Root:
    """One output of a kernel: the node whose value is computed and where it is stored."""

    out: Node                   # the node that gets the buffer
    value: Node                 # the expression computed
    store_view: View | None     # into out's buffer; None = contiguous over the phase shape


class _KernelBuilder:
    """Turns the lazy graph under some roots into one Kernel (raises _NeedsBuffer to ask
    the scheduler for more realized nodes)."""

    def __init__(self, realize: set[Node], outer: tuple[int, ...], axes: tuple[int, ...]):
        self.realize = realize
        self.outer = outer
        self.axes = axes
        self.eb = ExprBuilder()
        self.inputs: list[Node] = []
        self.reductions: list[Reduction] = []
        self.reduce_ids: dict[Node, int] = {}
        self.memo: dict[tuple[int, ViewChain, bool], Expr] = {}
        self.fused: list[str] = []
        self._fused_seen: set[int] = set()

    def expr(self, node: Node, chain: ViewChain, inline: bool = False) -> Expr:
        """`node` read through `chain`; `inline` computes it even if it gets a buffer (a root)."""
        key = (id(node), chain, inline)
        cached = self.memo.get(key)
        if cached is None:
            cached = self.memo[key] = self._expr(node, chain, inline)
        return cached

    def _note(self, node: Node, what: str) -> None:
        if id(node) not in self._fused_seen:
            self._fused_seen.add(id(node))
            self.fused.append(what)

    def _expr(self, node: Node, chain: ViewChain, inline: bool) -> Expr:
        if _loads_buffer(node, self.realize) and not inline:
            if node not in self.inputs:
                self.inputs.append(node)
            return self.eb.load(-1 - self.inputs.index(node), chain, node.dtype)
        op = node.op
        if op is Op.CONST:
            return self.eb.const(node.arg, node.dtype)
        if op is Op.VIEW:
            return self.expr(node.srcs[0], chain_push(chain, node.arg))
        if op is Op.CAST:
            self._note(node, f"cast:{dtype_name(node.dtype)}")
            return self.eb.cast(self.expr(node.srcs[0], chain), node.dtype)
        if op in ALU:
            self._note(node, ALU[op].symbol)
            return self.eb.alu(op, tuple(self.expr(s, chain) for s in node.srcs), node.dtype)
        if op is Op.REDUCE:
            return self._reduce(node, chain)
        # items and assigns are always realized, so they were handled above
        raise AssertionError(f"unscheduled node {node!r}")

    def _reduce(self, node: Node, chain: ViewChain) -> Expr:
        rop, axes = node.arg
        if axes != self.axes or node.shape != self.outer or len(chain) != 1 or not self._reads_row(chain[0]):
            raise _NeedsBuffer(node)
        k = self.reduce_ids.get(node)
        if k is None:
            src = node.srcs[0]
            body = self.expr(src, (View.contiguous(src.shape),))
            same = [i for i, r in enumerate(self.reductions) if (r.op, r.shape, r.expr, r.dtype) == (rop, src.shape, body, node.dtype)]
            if same:  # an equal reduction built from other nodes (e.g. x.mean() written twice)
                k = self.reduce_ids[node] = same[0]
            else:
                k = self.reduce_ids[node] = len(self.reductions)
                self.reductions.append(Reduction(rop, src.shape, body, node.dtype))
                self._note(node, f"{REDUCE[rop].name}{list(axes)}")
        return self.eb.acc(k, node.dtype)

    def _reads_row(self, v: View) -> bool:
        """Does `v` map every index of a phase to the current outer index (the row)?"""
        if len(v.shape) != len(self.outer):
            return False
        if prod(v.shape) == 0:
            return True  # nothing is read
        if v.offset != 0:
            return False
        row_strides = contiguous_strides(self.outer)
        for d, (size, stride) in enumerate(zip(v.shape, v.strides)):
            if size == 1:
                continue
            if d in self.axes:
                if stride != 0:
                    return False
            elif size != self.outer[d] or stride != row_strides[d]:
                return False
        return True

    def store(self, root: _Root, phase: tuple[int, ...], out_index: int) -> Store:
        body = self.eb.cast(self.expr(root.value, (View.contiguous(phase),), inline=root.value is root.out), root.out.dtype)
        if root.store_view is None:
            view = View.contiguous(phase)
        else:
            reshaped = root.store_view.reshape(phase)
            if reshaped is None:
                raise _NeedsBuffer(root.value)
            view = reshaped
        return Store(out_index, phase, view, body)


def _find_reduce(node: Node, realize: set[Node], inline: bool) -> Node | None:
    """The first reduction reachable from `node` through fusable ops (DFS)."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if id(n) in seen or (_loads_buffer(n, realize) and not (inline and n is node)):
            continue
        seen.add(id(n))
        if n.op is Op.REDUCE:
            return n
        stack.extend(reversed(n.srcs))
    return None


def _plan(root: _Root, realize: set[Node]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(outer, axes, phase shape of the store) for a kernel computing `root`."""
    value = root.value
    red = _find_reduce(value, realize, inline=value is root.out)
    if red is not None:
        outer, axes = red.shape, red.arg[1]
        full = red.srcs[0].shape
        candidates = []
        if len(value.shape) == len(outer) and all(value.shape[d] == outer[d] for d in range(len(outer)) if d not in axes):
            candidates.append(value.shape)
        candidates += [outer, full]
        for phase in candidates:
            if prod(phase) == prod(value.shape):
                return outer, axes, phase
    return value.shape, (), value.shape


def _build(roots: list[_Root], realize: set[Node], note: str = "") -> KernelItem:
    """Build one kernel for roots that share an iteration space."""
    outer, axes, _ = _plan(roots[0], realize)
    builder = _KernelBuilder(realize, outer, axes)
    stores = []
    for i, root in enumerate(roots):
        r_outer, r_axes, phase = _plan(root, realize)
        assert (r_outer, r_axes) == (outer, axes)
        stores.append(builder.store(root, phase, i))
    n_out = len(roots)
    inputs = builder.inputs

    def renumber(e: Expr, eb: ExprBuilder, memo: dict[int, Expr]) -> Expr:
        done = memo.get(id(e))
        if done is not None:
            return done
        if e.op is Op.LOAD:
            buf, chain = e.arg
            new = eb.load(n_out + (-1 - buf), chain, e.dtype)
        else:
            srcs = tuple(renumber(s, eb, memo) for s in e.srcs)
            new = eb.make(e.op, srcs, e.arg, e.dtype)
        memo[id(e)] = new
        return new

    # loads were numbered before the outputs were known; put outputs first
    eb, memo = ExprBuilder(), {}
    reductions = tuple(Reduction(r.op, r.shape, renumber(r.expr, eb, memo), r.dtype) for r in builder.reductions)
    stores_final = tuple(Store(s.buf, s.shape, s.view, renumber(s.expr, eb, memo)) for s in stores)
    args = tuple(BufferArg(r.out.dtype, prod(r.out.shape), True) for r in roots) + tuple(
        BufferArg(n.dtype, prod(n.shape), False) for n in inputs
    )
    kernel = _named(Kernel("", args, outer, axes, reductions, stores_final))
    fused = builder.fused + ([note] if note else [])
    outs = [r.out for r in roots]
    return KernelItem(kernel, outs + inputs, outs, fused, reduces=list(builder.reduce_ids))


# --- the whole schedule ------------------------------------------------------------------


def walk(targets: Iterable[Node]) -> list[Node]:
    """Nodes reachable from targets (not looking past realized ones), sources before users:
    dag.toposort's order, written out for nodes (every realize walks its graph, twice on the
    first time, and the generic walk's callback and pairs were most of its cost)."""
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


def _strip_view(node: Node) -> tuple[Node, View]:
    """(base, view) such that node == base read through one strided view."""
    if node.op is Op.VIEW and not node.realized and not (node.srcs[0].op is Op.VIEW and not node.srcs[0].realized):
        return node.srcs[0], node.arg
    return node, View.contiguous(node.shape)


def _must_realize(nodes: list[Node], targets: list[Node]) -> set[Node]:
    realize = {t for t in targets if not t.realized}
    for node in nodes:
        if node.realized:
            continue
        if node.op in ITEM_OPS or node.op is Op.ASSIGN:
            realize.add(node)
        if node.op is Op.MATMUL:
            for src in node.srcs:
                base, _ = _strip_view(src)
                if not base.realized:
                    realize.add(base)
        elif node.op in (Op.CUSTOM, Op.COPY):
            realize.update(s for s in node.srcs if not s.realized)
        elif node.op is Op.ASSIGN and not node.srcs[0].realized:
            realize.add(node.srcs[0])
    return realize


def _kernel_root(node: Node) -> _Root:
    """What the kernel that gives `node` its value computes and where it stores it."""
    if node.op is Op.ASSIGN:
        return _Root(node, node.srcs[1], node.arg)
    return _Root(node, node, None)


def _in_place_assigns(nodes: list[Node], targets: list[Node]) -> set[Node]:
    """Assigns that may write straight into their target's buffer: the target is a realized
    buffer and nothing outside this schedule can still read its old value (the scheduler
    orders this schedule's own reads before the write)."""
    in_schedule = {id(n) for n in nodes}
    target_ids = {id(t) for t in targets}
    out = set()
    for node in nodes:
        if node.op is not Op.ASSIGN or node.realized or not node.srcs[0].realized:
            continue
        target, value = node.srcs
        if _reads(value, target):
            continue  # the write kernel would read what it overwrites
        if target._creator:
            continue  # a tensor made with the target (a ug.jit output) may still read it
        safe = True
        for reader in target.readers():
            if reader is node:
                continue
            if isinstance(reader, Node):
                if reader.realized or id(reader) in in_schedule and (reader.op is not Op.ASSIGN or id(reader) in target_ids):
                    continue
            elif getattr(reader, "_node", None) is not target:
                continue  # a tensor that has moved on to a newer value
            safe = False
            break
        if safe:
            out.add(node)
    return out


def _reads(node: Node, target: Node) -> bool:
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n is target:
            return True
        if id(n) in seen or n.realized:
            continue
        seen.add(id(n))
        stack.extend(n.srcs)
    return False


def unrealized(targets: Iterable[Node]) -> list[Node]:
    """The targets a schedule computes: each node once, in order, leaving out realized ones."""
    return list(dict.fromkeys(t for t in targets if not t.realized))


def create_schedule(targets: list[Node]) -> Schedule:
    targets = unrealized(targets)
    nodes = walk(targets)
    realize = _must_realize(nodes, targets)
    position = {id(n): i for i, n in enumerate(nodes)}
    in_place = _in_place_assigns(nodes, targets)
    while True:
        kernel_nodes = sorted((n for n in realize if n.op not in ITEM_OPS), key=lambda n: position[id(n)])
        try:
            items = _build_kernels(kernel_nodes, realize, in_place)
        except _NeedsBuffer as e:
            if e.node in realize:  # would loop forever: a bug in the scheduler, not in the user's graph
                raise ScheduleError(f"scheduler could not place {e.node!r}") from e
            realize.add(e.node)
            continue
        shared = _reductions_in_several_kernels(items)
        if shared:
            realize.update(shared)
            continue
        items += [_item_for(n) for n in sorted((n for n in realize if n.op in ITEM_OPS), key=lambda n: position[id(n)])]
        try:
            return Schedule(_order(items, in_place), targets)
        except ScheduleError:
            if not in_place:
                raise
            in_place = set()  # a read depends on the write: write into fresh buffers instead


def _build_kernels(kernel_nodes: list[Node], realize: set[Node], in_place: set[Node]) -> list[Item]:
    # first each root alone (this is where _NeedsBuffer decisions are made) ...
    singles = {node: _build([_kernel_root(node)], realize) for node in kernel_nodes}
    # ... then merge independent roots with the same iteration space into one kernel
    deps = _dependencies(singles)
    groups: list[list[Node]] = []
    group_of: dict[Node, int] = {}
    for node in kernel_nodes:
        k = singles[node].kernel
        for gi, group in enumerate(groups):
            head = singles[group[0]].kernel
            if (node.op is not Op.ASSIGN and group[0].op is not Op.ASSIGN and group[0].device == node.device
                    and (head.outer, head.axes) == (k.outer, k.axes)
                    and all(m not in deps[node] and node not in deps[m] for m in group)
                    and not _merge_makes_cycle(gi, node, groups, group_of, deps)):
                group.append(node)
                group_of[node] = gi
                break
        else:
            group_of[node] = len(groups)
            groups.append([node])
    items: list[Item] = []
    for group in groups:
        node = group[0]
        if node.op is Op.ASSIGN and node.arg is not None and node not in in_place:
            # a partial write into a fresh buffer: first copy the old value there
            items.append(_build([_Root(node, node.srcs[0], None)], realize, note="(assign-copy)"))
        # a root alone is the kernel built for it above (the same roots and realize set)
        item = singles[node] if len(group) == 1 else _build([_kernel_root(n) for n in group], realize)
        if node in in_place:
            item.alias = {node: node.srcs[0]}
        items.append(item)
    return items


def _merge_makes_cycle(gi: int, node: Node, groups: list[list[Node]], group_of: dict[Node, int],
                       deps: dict[Node, set[Node]]) -> bool:
    """Whether adding `node` to group `gi` would make the kernels depend on each other in a
    circle: a member of one kernel needing another kernel whose member needs the first (e.g.
    x.abs() and y.abs() with y = x.sum() in a kernel that also reads x.abs() for a softmax).
    Members are independent of each other (checked before), but merging groups adds paths
    that the node-level dependencies do not show, so this walks the kernels' graph."""
    def needs(members: list[Node]) -> set[int]:
        return {group_of[d] for m in members for d in deps[m] if d in group_of}

    todo = list(needs(groups[gi] + [node]) - {gi})
    seen = set(todo)
    while todo:
        h = todo.pop()
        after = needs(groups[h])
        if gi in after or any(node in deps[m] for m in groups[h]):
            return True  # kernel h, which the merged kernel needs, needs the merged kernel
        for nxt in after - seen:
            seen.add(nxt)
            todo.append(nxt)
    return False


def _named(k: Kernel) -> Kernel:
    kind = "r" if k.reductions else "E"
    dims = "_".join(str(d) for d in (k.stores[0].shape if k.stores else k.outer)) or "scalar"
    name = f"{kind}{len(k.reductions) or ''}_{dims}"
    return Kernel(name, k.args, k.outer, k.axes, k.reductions, k.stores)


def _dependencies(singles: dict[Node, KernelItem]) -> dict[Node, set[Node]]:
    """For each kernel root, every root it depends on, transitively (through any items)."""
    deps: dict[Node, set[Node]] = {}

    def visit(node: Node, stack: set[int]) -> set[Node]:
        if node in deps:
            return deps[node]
        out: set[Node] = set()
        item = singles.get(node)
        srcs = item.buffers[len(item.outputs):] if item is not None else list(node.srcs)
        for src in srcs:
            if src.realized or id(src) in stack:
                continue
            if src in singles:
                out.add(src)
            out |= visit(src, stack | {id(node)})
        deps[node] = out
        return out

    for node in singles:
        visit(node, set())
    return deps


def _reductions_in_several_kernels(items: list[Item]) -> set[Node]:
    """Fused reductions that more than one kernel would compute: they get a buffer instead."""
    seen: dict[Node, int] = {}
    for i, item in enumerate(items):
        if not isinstance(item, KernelItem):
            continue
        for node in item.reduces:
            seen.setdefault(node, i)
            if seen[node] != i:
                seen[node] = -1
    return {n for n, i in seen.items() if i == -1}


def _item_for(node: Node) -> Item:
    if node.op is Op.MATMUL:
        a, av = _strip_view(node.srcs[0])
        b, bv = _strip_view(node.srcs[1])
        return MatmulItem(node, a, b, MatmulSpec(av, bv, node.shape, node.dtype))
    if node.op is Op.CUSTOM:
        return CustomItem(node, list(node.srcs), node.arg)
    if node.op is Op.COPY:
        return CopyItem(node, node.srcs[0])
    raise AssertionError(node)


def _order(items: list[Item], in_place: set[Node]) -> list[Item]:
    """Topological order (Kahn, stable). An assign writing in place into its target's buffer
    also waits for every other item that reads that buffer."""
    producer: dict[int, int] = {}
    for i, item in enumerate(items):
        for out in item.outputs:
            producer[id(out)] = i   # the last item writing a node (an assign's copy comes first)
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
                for k, other in enumerate(items):
                    if k != i and any(b is target for b in other.buffers[len(other.outputs):]):
                        edges[k].add(i)
    indegree = {i: 0 for i in edges}
    for outs in edges.values():
        for j in outs:
            indegree[j] += 1
    ready = sorted(i for i, d in indegree.items() if d == 0)
    order: list[int] = []
    while ready:
        i = ready.pop(0)
        order.append(i)
        for j in sorted(edges[i]):
            indegree[j] -= 1
            if indegree[j] == 0:
                ready.append(j)
        ready.sort()
    if len(order) != len(items):
        stuck = [items[i].describe() for i in edges if i not in order]
        raise ScheduleError("cycle in the schedule (an in-place write and a read that depend on each other): " + "; ".join(stuck))
    return [items[i] for i in order]
