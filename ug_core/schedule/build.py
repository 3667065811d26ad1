"""Building one kernel: the lazy graph under some roots turned into one kernel_ir.Kernel (its
loads, fused elementwise ops, reductions, gathers, scans and scatter stores), or _NeedsBuffer
naming the nodes that must get buffers of their own first."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import BOOL, identity, name as dtype_name
from ..graph import Node
from ..kernel_ir import BufferArg, Expr, ExprBuilder, Kernel, Reduction, Store
from ..ops import ALU, REDUCE, Op
from ..view import View, ViewChain, chain_masked, chain_push, contiguous_strides, indicator, prod
from .items import KernelItem
from .operands import _strip_view


class _NeedsBuffer(Exception):
    """Raised while building a kernel: `nodes` (`node` is the first) must be realized into
    buffers of their own first."""

    def __init__(self, node: Node | list[Node]):
        nodes = node if isinstance(node, list) else [node]
        super().__init__(", ".join(map(repr, nodes)))
        self.node = nodes[0]
        self.nodes = nodes


INDEX = np.dtype(np.int64)
"""A gather's element index (the loop IR's index type)."""

ITEM_OPS = frozenset({Op.MATMUL, Op.CUSTOM, Op.COPY, Op.SORT, Op.FFT, Op.ATTENTION})
"""Ops that are schedule items of their own, never fused into a kernel."""


def _loads_buffer(node: Node, realize: set[Node]) -> bool:
    return node.realized or node in realize


_KEEPS_ZERO = frozenset({Op.VIEW, Op.REDUCE, Op.CAST, Op.BITCAST, Op.ADD, Op.SUB, Op.MUL, Op.MAX, Op.MIN, Op.ABS, Op.WHERE,
                         Op.CMPLT, Op.CMPNE})
"""Ops whose value is 0 (False) where every operand is: read through a masked view chain, their
operands read 0 where a mask rejects the index, and so do they. Any other op (exp, ==, -x of
0.0 is -0.0, ...) read through a mask is wrapped in a select of 0 there (`_KernelBuilder._masked`)."""


@dataclass(frozen=True)
class _Root:
    """One output of a kernel: the node whose value is computed and where it is stored."""

    out: Node                   # the node that gets the buffer
    value: Node                 # the expression computed
    store_view: View | None     # into out's buffer; None = contiguous over the phase shape


class _KernelBuilder:
    """Turns the lazy graph under some roots into one Kernel (raises _NeedsBuffer to ask
    the scheduler for more realized nodes)."""

    def __init__(self, realize: set[Node], outer: tuple[int, ...], axes: tuple[int, ...],
                 inlined: dict[Node, Node] | None = None):
        self.realize = realize
        # writes (full assigns) this kernel stores that another of its stores reads at the same
        # element (see _write_clusters): read as their value, computed here, not from their buffer
        self.inlined = inlined or {}
        self.outer = outer
        self.axes = axes
        self.eb = ExprBuilder()
        self.inputs: list[Node] = []
        self._input_index: dict[Node, int] = {}  # position of each node in `inputs`
        self.reductions: list[Reduction] = []
        self.reduce_ids: dict[Node, int] = {}
        self.memo: dict[tuple[int, ViewChain, bool], Expr] = {}
        self.fused: list[str] = []
        self._fused_seen: set[int] = set()
        # reductions this kernel cannot fuse: read as loads meanwhile, so that one build finds
        # them all (each else costs a rebuild of the schedule); _build then raises _NeedsBuffer
        self.needs: dict[Node, None] = {}  # (a dict: ordered, and `in` is cheap)
        self.scans: list[Node] = []  # the SCAN nodes this kernel stores

    def expr(self, node: Node, chain: ViewChain, inline: bool = False) -> Expr:
        """`node` read through `chain`; `inline` computes it even if it gets a buffer (a root).

        Iterative, with an explicit stack: a fused chain can be far deeper than Python's
        recursion limit. An entry is first expanded (`_operands`: its operands are pushed,
        the leftmost on top) and, once they are all in the memo, built (`_combine`); so inputs,
        reductions and notes come out in the order a left-to-right recursion gives them."""
        memo = self.memo
        key = (id(node), chain, inline)
        done = memo.get(key)
        if done is not None:
            return done
        # entries: (node, chain, inline, memo key, operands: None until expanded, then a list of
        # (operand, its chain, its memo key))
        stack: list[tuple[Node, ViewChain, bool, tuple[int, ViewChain, bool], list[tuple[Node, ViewChain, tuple[int, ViewChain, bool]]] | None]]
        stack = [(node, chain, inline, key, None)]
        make = self.eb.make
        while stack:
            node, chain, inline, key, operands = stack[-1]
            if operands is not None:
                stack.pop()
                args = [memo[k] for _, _, k in operands]
                op = node.op
                # (an ALU op, the common case, inline: this loop is most of the scheduler's time)
                value = make(op, tuple(args), None, node.dtype) if op in ALU else self._combine(node, args, chain)
                if op not in _KEEPS_ZERO and chain_masked(chain):
                    value = self._masked(value, chain)
                memo[key] = value
                continue
            if key in memo:  # reached on another path since it was pushed
                stack.pop()
                continue
            operands = self._operands(node, chain, inline, key)
            if operands is None:  # a leaf: _operands put it in the memo
                stack.pop()
                continue
            stack[-1] = (node, chain, inline, key, operands)
            for src, src_chain, src_key in reversed(operands):
                if src_key not in memo:
                    stack.append((src, src_chain, False, src_key, None))
        return memo[key]

    def _note(self, node: Node, what: str) -> None:
        if id(node) not in self._fused_seen:
            self._fused_seen.add(id(node))
            self.fused.append(what)

    def _operands(self, node: Node, chain: ViewChain, inline: bool,
                  key: tuple[int, ViewChain, bool]) -> list[tuple[Node, ViewChain, tuple[int, ViewChain, bool]]] | None:
        """What `node` read through `chain` needs built first, as (node, chain, memo key); None
        for a leaf (a load, a constant, an already fused reduction), whose Expr goes into the memo."""
        if not inline and node in self.inlined:   # the written value, as its own store computes it
            written = self.inlined[node]
            return [(written, chain, (id(written), chain, False))]
        if (_loads_buffer(node, self.realize) or node in self.needs) and not inline:
            self.memo[key] = self.eb.load(self._input(node), chain, node.dtype)
            return None
        op = node.op
        if op is Op.CONST:
            value = self.eb.const(node.arg, node.dtype)
            zero = self.eb.const(0, node.dtype)
            self.memo[key] = self._masked(value, chain) if value is not zero and chain_masked(chain) else value
            return None
        if op is Op.IOTA:
            self.memo[key] = self.eb.iota(chain, node.dtype)
            return None
        if op is Op.VIEW:
            src, src_chain = node.srcs[0], chain_push(chain, node.arg)
            return [(src, src_chain, (id(src), src_chain, False))]
        if op in (Op.CAST, Op.BITCAST):
            self._note(node, f"{op.name.lower()}:{dtype_name(node.dtype)}")
            src = node.srcs[0]
            return [(src, chain, (id(src), chain, False))]
        if op in ALU:
            self._note(node, ALU[op].symbol)
            return [(src, chain, (id(src), chain, False)) for src in node.srcs]
        if op is Op.GATHER:  # its index is fused (read where the gather is); its source is a buffer (_combine)
            self._note(node, f"gather[{node.arg}]")
            index = node.srcs[1]
            return [(index, chain, (id(index), chain, False))]
        if op is Op.SCAN:  # a scan is stored only by its own kernel (see store); its readers load it
            self.needs[node] = None
            return self._operands(node, chain, inline, key)
        if op is Op.REDUCE:
            if node.arg[1] != self.axes or node.shape != self.outer or len(chain) != 1 or not self._reads_row(chain[0]):
                self.needs[node] = None
                return self._operands(node, chain, inline, key)  # now a load
            k = self.reduce_ids.get(node)
            if k is not None:
                self.memo[key] = self.eb.acc(k, node.dtype)
                return None
            src = node.srcs[0]
            src_chain = (View.contiguous(src.shape),)
            return [(src, src_chain, (id(src), src_chain, False))]
        # items and assigns are always realized, so they were handled above
        raise AssertionError(f"unscheduled node {node!r}")

    def _input(self, node: Node) -> int:
        """The (provisional, -1 - position) argument number of the buffer of input `node`."""
        index = self._input_index.get(node)
        if index is None:
            index = self._input_index[node] = len(self.inputs)
            self.inputs.append(node)
        return -1 - index

    def _combine(self, node: Node, operands: list[Expr], chain: ViewChain) -> Expr:
        """The Expr of an expanded `node` read through `chain` from its operands' Exprs (see `_operands`)."""
        op = node.op
        if op is Op.GATHER:
            return self._gather(node, operands[0], chain)
        if op in (Op.VIEW, Op.ASSIGN):   # (an ASSIGN here is an inlined full write: its value)
            return operands[0]
        if op is Op.CAST:
            return self.eb.cast(operands[0], node.dtype)
        if op is Op.BITCAST:
            return self.eb.bitcast(operands[0], node.dtype)
        if op is Op.REDUCE:
            return self._reduction(node, operands[0])
        return self.eb.make(op, tuple(operands), None, node.dtype)  # (an ALU op: _operands checked)

    def _gather(self, node: Node, index: Expr, chain: ViewChain) -> Expr:
        """A GATHER read through `chain`: its source's buffer (a realized node, maybe through one
        strided view: _must_realize saw to it) read at element `position + index * stride`,
        where `position` is the element the chain reaches with the gathered coordinate at 0 and
        the index is wrapped once if negative and clamped into the axis (never a read outside)."""
        eb = self.eb
        axis = node.arg
        base, v = _strip_view(node.srcs[0])
        assert _loads_buffer(base, self.realize) or base.op is Op.IOTA, f"the source of {node!r} is not a buffer"
        n, stride = v.shape[axis], v.strides[axis]
        at_zero = View(node.shape, tuple(0 if d == axis else s for d, s in enumerate(v.strides)), v.offset)
        position = eb.iota(chain_push(chain, at_zero), INDEX)
        i = index
        if i.dtype.kind == "u":  # no negative index; clamped in its own type (a uint64 may not fit int64)
            if n - 1 < np.iinfo(i.dtype).max:
                i = eb.alu(Op.MIN, (i, eb.const(n - 1, i.dtype)), i.dtype)
            i = eb.cast(i, INDEX)
        else:
            i = eb.cast(i, INDEX)
            wrapped = eb.alu(Op.ADD, (i, eb.const(n, INDEX)), INDEX)
            i = eb.alu(Op.WHERE, (eb.alu(Op.CMPLT, (i, eb.const(0, INDEX)), BOOL), wrapped, i), INDEX)
            i = eb.alu(Op.MAX, (i, eb.const(0, INDEX)), INDEX)
            i = eb.alu(Op.MIN, (i, eb.const(n - 1, INDEX)), INDEX)
        if stride != 1:
            i = eb.alu(Op.MUL, (i, eb.const(stride, INDEX)), INDEX)
        element = eb.alu(Op.ADD, (position, i), INDEX)
        if base.op is Op.IOTA and not _loads_buffer(base, self.realize):   # an index vector: the element is the value
            return eb.cast(element, node.dtype)
        return eb.gather(self._input(base), element, node.dtype)

    def _masked(self, value: Expr, chain: ViewChain) -> Expr:
        """`value` where every mask of `chain` holds, else 0 (False)."""
        valid = self.eb.iota(indicator(chain), BOOL)
        if value.dtype == BOOL and value.op is Op.CONST and value.arg:
            return valid
        return self.eb.alu(Op.WHERE, (valid, value, self.eb.const(0, value.dtype)), value.dtype)

    def _reduction(self, node: Node, body: Expr) -> Expr:
        """The accumulator of a fused reduction whose body has been built."""
        rop, axes = node.arg
        src = node.srcs[0]
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
        if v.offset != 0 or v.mask is not None:
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
        if root.value.op is Op.SCATTER and root.value is root.out:
            return self._scatter_store(root.value, phase, out_index)
        scan = _scan_root(root, self.realize)
        if scan is not None:  # the running value, stored in the scan's order (a reshape of it is the same layout)
            rop, axis = scan.arg
            self._note(scan, f"cum{REDUCE[rop].name}[{axis}]")
            self.scans.append(scan)
            body = self.eb.cast(self.expr(scan.srcs[0], (View.contiguous(phase),)), root.out.dtype)
            return Store(out_index, phase, View.contiguous(phase), body, scan=rop)
        body = self.eb.cast(self.expr(root.value, (View.contiguous(phase),), inline=root.value is root.out), root.out.dtype)
        if root.store_view is None:
            view = View.contiguous(phase)
        else:
            reshaped = root.store_view.reshape(phase)
            if reshaped is None:
                raise _NeedsBuffer(root.value)
            view = reshaped
        return Store(out_index, phase, view, body)


    def _scatter_store(self, node: Node, phase: tuple[int, ...], out_index: int) -> Store:
        """A SCATTER's store: part p (the outer index) runs its positions j in order (phase
        (parts, N / parts), reading values and slots at p * N / parts + j) and combines each
        value into its clamped slot of row p (the kernel's output, rows of n_slots)."""
        eb = self.eb
        rop, n_slots, parts = node.arg
        values, slots = node.srcs
        self._note(node, f"scatter-{REDUCE[rop].name}")
        chain = (View(phase, (phase[1], 1), 0),)   # (p, j) -> position p * chunk + j
        value = self.expr(values, chain)
        slot = self.expr(slots, chain)
        if slot.dtype.kind == "u" and n_slots - 1 < np.iinfo(slot.dtype).max:
            slot = eb.alu(Op.MIN, (slot, eb.const(n_slots - 1, slot.dtype)), slot.dtype)
        slot = eb.cast(slot, INDEX)
        if slot.dtype.kind == "i":
            slot = eb.alu(Op.MIN, (eb.alu(Op.MAX, (slot, eb.const(0, INDEX)), INDEX), eb.const(n_slots - 1, INDEX)), INDEX)
        identity = scatter_identity(rop, node.dtype)
        return Store(out_index, phase, View.contiguous(phase), eb.scatter(rop, slot, value, n_slots, identity))


def scatter_identity(rop: Op, dtype: np.dtype) -> Any:
    """The value a scatter's rows start from: the reduction's identity (-0.0 for a float sum,
    which leaves every sum as it is, -0.0 included)."""
    if rop is Op.SUM and dtype.kind == "f":
        return -0.0
    return dtype.type(identity(REDUCE[rop].name, dtype)).item()


def _scan_root(root: _Root, realize: set[Node]) -> Node | None:
    """The SCAN node whose values a kernel computing `root` stores as they are: the root's
    own value, or a scan (that gets no buffer of its own) the root reshapes."""
    value = root.value
    if value is not root.out:
        return None
    if value.op is Op.VIEW and not value.realized and value.arg.is_contiguous:
        src = value.srcs[0]
        if src.op is Op.SCAN and not _loads_buffer(src, realize) and prod(src.shape) == prod(value.shape):
            return src
    return value if value.op is Op.SCAN and not value.realized else None


def _find_reduce(node: Node, realize: set[Node], inline: bool) -> Node | None:
    """The first reduction reachable from `node` through fusable ops (DFS; a scan is never
    fused into its readers)."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if id(n) in seen or (_loads_buffer(n, realize) and not (inline and n is node)) or n.op is Op.SCAN:
            continue
        seen.add(id(n))
        if n.op is Op.REDUCE:
            return n
        stack.extend(reversed(n.srcs))
    return None


def _plan(root: _Root, realize: set[Node]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(outer, axes, phase shape of the store) for a kernel computing `root`."""
    if root.value.op is Op.SCATTER and root.value is root.out:   # part p runs its positions in order
        parts, n = root.value.arg[2], root.value.srcs[0].shape[0]
        return (parts, 1), (1,), (parts, n // parts)
    scan = _scan_root(root, realize)
    if scan is not None:
        axis = scan.arg[1]
        return tuple(1 if d == axis else s for d, s in enumerate(scan.shape)), (axis,), scan.shape
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


class BuildCache:
    """The kernels built during one create_schedule, by the structure of the graph each fuses
    (see `_structure`): a library that builds one small lazy piece per resample or per batch
    (scipy's permutation_test with batch=1: ~1,000 of them, each a gather and two means) makes a
    graph of thousands of roots whose kernels are all alike, and create_schedule builds every
    root in each of its passes (_settle_buffers, then _build_kernels, again after each buffer
    it adds). A build is a function of that structure alone, so a second root of the same
    structure takes the first one's kernel, and a root whose fused graph no pass changed takes
    its own from the pass before; the nodes are mapped through their positions in the walk."""

    __slots__ = ("entries", "walks", "hits", "misses")

    def __init__(self) -> None:
        # a single root's walk (see _structure) by its node: the key and nodes, and the nodes
        # whose buffers it depends on (the walk changes only where one of them gets one)
        self.walks: dict[int, tuple[tuple[Any, ...], list[Node], list[Node], list[bool]]] = {}
        # key -> (kernel, positions of its input buffers, fused notes, positions of its fused
        # reductions and scans), or (None, positions of the nodes _NeedsBuffer asked for)
        self.entries: dict[tuple[Any, ...], tuple[Kernel | None, tuple[int, ...], tuple[str, ...], tuple[int, ...]]] = {}
        self.hits = 0
        self.misses = 0


_STRUCTURE_LIMIT = 4096
"""The most nodes `_structure` walks before it gives up (the build is not cached): kernels are
bounded (MAX_KERNEL_SIZE), but a first pass, before the buffers are settled, may reach far."""


def _const_key(arg: Any) -> Any:
    """A constant's argument as a key: its type too (1, 1.0 and True are equal keys, but not the
    same code), floats by their bits (-0.0 is not 0.0, and a nan equals itself)."""
    if isinstance(arg, (float, np.floating)):
        return type(arg), float(arg).hex()
    if isinstance(arg, (complex, np.complexfloating)):
        return type(arg), complex(arg).real.hex(), complex(arg).imag.hex()
    return type(arg), arg


def _structure(roots: list[_Root], realize: set[Node]) -> tuple[tuple[Any, ...], list[Node]] | None:
    """(key, nodes): the structure of what a build of `roots` can read, and the nodes it walked,
    in an order two graphs of one structure share (sources first, operands left to right). Per
    node: op, argument, shape, dtype, device, whether it is realized or gets a buffer, and its
    operands by position; the walk stops at a buffer (a load: nothing under it is read), but
    for a root computed inline; a gather's source is taken as the builder takes it (the base
    buffer and the view it is read through, see _strip_view). Per root: its value's position,
    whether it is stored inline, its store view and its output's shape and dtype. None where
    the walk passes _STRUCTURE_LIMIT nodes or a root's value was reached as a load first.
    (Every pass keys every root: this is written for speed.)"""
    position: dict[int, int] = {}
    nodes: list[Node] = []
    parts: list[Any] = []
    gather, const = _GATHER, _CONST
    for root in roots:
        value = root.value
        inline = value is root.out
        if id(value) in position:
            if inline:
                return None   # reached as another root's load: its own store computes it
            parts.append((position[id(value)], inline, root.store_view, root.out.shape, root.out.dtype))
            continue
        # iterative post-order (graphs can be deep); a node's entry is made once its operands have one
        stack: list[tuple[Node, Any, Any]] = [(value, None, None)]
        pushed = {id(value)}
        while stack:
            node, children, stripped = stack[-1]
            if children is None:
                if node.buffer is not None or (node in realize and not (inline and node is value)):
                    stack.pop()
                    position[id(node)] = len(nodes)
                    nodes.append(node)
                    parts.append((node.op, node.sig, node.buffer is not None))
                    continue
                if node.op is gather:
                    stripped = _strip_view(node.srcs[0])
                    children = iter((node.srcs[1], stripped[0]))
                else:
                    children = iter(node.srcs)
                stack[-1] = (node, children, stripped)
            for src in children:
                if id(src) not in pushed and id(src) not in position:
                    pushed.add(id(src))
                    stack.append((src, None, None))
                    break
            else:
                stack.pop()
                if len(nodes) >= _STRUCTURE_LIMIT:
                    return None
                position[id(node)] = len(nodes)
                nodes.append(node)
                op = node.op
                if stripped is not None:
                    srcs: tuple[Any, ...] = (position[id(node.srcs[1])], position[id(stripped[0])], stripped[1])
                else:
                    srcs = tuple([position[id(s)] for s in node.srcs])
                # (a root computed inline: whether it gets a buffer changes nothing its kernel
                # computes, so a trial build before it is given one, buffers._lifted, keys alike)
                parts.append((op, _const_key(node.arg) if op is const else node.arg, node.sig,
                              node.buffer is not None or (node in realize and not (inline and node is value)), srcs))
        parts.append((position[id(value)], inline, root.store_view, root.out.shape, root.out.dtype))
    return tuple(parts), nodes


_GATHER, _CONST = Op.GATHER, Op.CONST


def _walk_of(roots: list[_Root], realize: set[Node], cache: BuildCache) -> tuple[tuple[Any, ...], list[Node]] | None:
    """_structure(roots, realize), for a single root the walk of an earlier pass where none of
    the lazy nodes it reached has got a buffer since (each pass keys every root again)."""
    if len(roots) != 1 or roots[0].out is not roots[0].value:
        return _structure(roots, realize)
    node = roots[0].out
    known = cache.walks.get(id(node))
    if known is not None:
        key, nodes, lazy, flags = known
        if [n in realize for n in lazy] == flags:
            return key, nodes
    walked = _structure(roots, realize)
    if walked is not None:
        lazy = [n for n in walked[1] if n.buffer is None and n is not node]
        cache.walks[id(node)] = (walked[0], walked[1], lazy, [n in realize for n in lazy])
    return walked


def _build(roots: list[_Root], realize: set[Node], note: str = "", inlined: dict[Node, Node] | None = None,
           cache: BuildCache | None = None) -> KernelItem:
    """Build one kernel for roots that share an iteration space (`inlined`: see _KernelBuilder),
    or take it from `cache` (see BuildCache)."""
    if cache is None or inlined:
        return _build_fresh(roots, realize, note, inlined)
    walked = _walk_of(roots, realize, cache)
    if walked is None:
        return _build_fresh(roots, realize, note, inlined)
    key, nodes = walked
    outs = [r.out for r in roots]
    entry = cache.entries.get(key)
    if entry is not None:
        cache.hits += 1
        kernel, inputs, fused, reduces = entry
        if kernel is None:
            raise _NeedsBuffer([nodes[p] for p in inputs])
        return KernelItem(kernel, outs + [nodes[p] for p in inputs], outs, list(fused) + ([note] if note else []),
                          reduces=[nodes[p] for p in reduces])
    cache.misses += 1
    position = {id(n): i for i, n in enumerate(nodes)}
    try:
        item = _build_fresh(roots, realize, "", None)
    except _NeedsBuffer as e:
        if all(id(n) in position for n in e.nodes):
            cache.entries[key] = (None, tuple([position[id(n)] for n in e.nodes]), (), ())
        raise
    inputs_at = [position.get(id(n)) for n in item.buffers[len(outs):]]
    reduces_at = [position.get(id(n)) for n in item.reduces]
    if None not in inputs_at and None not in reduces_at:
        cache.entries[key] = (item.kernel, tuple(inputs_at), tuple(item.fused),   # type: ignore[arg-type]
                              tuple(reduces_at))   # type: ignore[arg-type]
    if note:
        item.fused.append(note)
    return item


def _build_fresh(roots: list[_Root], realize: set[Node], note: str = "", inlined: dict[Node, Node] | None = None
                 ) -> KernelItem:
    """Build one kernel for roots that share an iteration space (`inlined`: see _KernelBuilder)."""
    outer, axes, _ = _plan(roots[0], realize)
    builder = _KernelBuilder(realize, outer, axes, inlined)
    stores = []
    for i, root in enumerate(roots):
        r_outer, r_axes, phase = _plan(root, realize)
        assert (r_outer, r_axes) == (outer, axes)
        stores.append(builder.store(root, phase, i))
    if builder.needs:
        raise _NeedsBuffer(list(builder.needs))
    n_out = len(roots)
    inputs = builder.inputs
    # loads were numbered before the outputs were known; put outputs first
    eb, memo = ExprBuilder(), dict[int, Expr]()
    reductions = tuple(Reduction(r.op, r.shape, _renumber_loads(r.expr, n_out, eb, memo), r.dtype)
                       for r in builder.reductions)
    stores_final = tuple(dataclasses.replace(s, expr=_renumber_loads(s.expr, n_out, eb, memo)) for s in stores)
    args = tuple(BufferArg(r.out.dtype, prod(r.out.shape), True) for r in roots) + tuple(
        BufferArg(n.dtype, prod(n.shape), False) for n in inputs
    )
    kernel = _named(Kernel("", args, outer, axes, reductions, stores_final))
    fused = builder.fused + ([note] if note else [])
    outs = [r.out for r in roots]
    return KernelItem(kernel, outs + inputs, outs, fused, reduces=list(builder.reduce_ids) + builder.scans)


def _renumber_loads(root: Expr, n_out: int, eb: ExprBuilder, memo: dict[int, Expr]) -> Expr:
    """`root` rebuilt in `eb` with input load -1-i (numbered while building) turned into
    argument n_out + i. Iterative (expressions can be deep); `memo` (by id of the old Expr)
    carries shared nodes from one root to the next."""
    stack = [root]
    while stack:
        e = stack[-1]
        if id(e) in memo:
            stack.pop()
            continue
        pending = [s for s in e.srcs if id(s) not in memo]
        if pending:  # operands first (an Expr DAG has no cycles, so this ends)
            stack += pending
            continue
        stack.pop()
        if e.op is Op.LOAD:
            buf, chain, slot = e.arg
            memo[id(e)] = eb.load(n_out + (-1 - buf), chain, e.dtype, slot)
        elif e.op is Op.GATHER:
            memo[id(e)] = eb.gather(n_out + (-1 - e.arg), memo[id(e.srcs[0])], e.dtype)
        else:
            memo[id(e)] = eb.make(e.op, tuple([memo[id(s)] for s in e.srcs]), e.arg, e.dtype)
    return memo[id(root)]


def _kernel_root(node: Node) -> _Root:
    """What the kernel that gives `node` its value computes and where it stores it."""
    if node.op is Op.ASSIGN:
        return _Root(node, node.srcs[1], node.arg)
    return _Root(node, node, None)


def _named(k: Kernel) -> Kernel:
    kind = ("s" if any(s.scan is not None for s in k.stores) else "x" if any(s.scatter is not None for s in k.stores)
            else "r" if k.reductions else "E")
    dims = "_".join(str(d) for d in (k.stores[0].shape if k.stores else k.outer)) or "scalar"
    name = f"{kind}{len(k.reductions) or ''}_{dims}"
    return Kernel(name, k.args, k.outer, k.axes, k.reductions, k.stores)
