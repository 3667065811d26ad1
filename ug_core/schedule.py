"""The scheduler: decide which nodes get a buffer, group everything else into kernels.

Rules (see the kernel_ir docstring for the kernel shape they target):
- every elementwise chain is fused into the kernel that consumes it, up to a bound on a
  kernel's size (MAX_KERNEL_SIZE): a longer one gets intermediates realized, so that it runs
  as kernels of bounded size (a chain of 100,000 ops too);
- a reduction fuses with its elementwise producers and with elementwise consumers of its
  result when they iterate over the same rows: the kernel then computes the reduction once
  per row (an accumulator) and reuses it, e.g. softmax and layernorm are one kernel each;
- a reduction that cannot be fused that way, or that two kernels would need, gets a buffer
  (it is never recomputed per output element, nor once per consuming kernel);
- a scan (Op.SCAN) is a kernel of its own (a scan store, see kernel_ir) that fuses its
  elementwise producers and the reductions over its rows; its readers load its buffer, but a
  target that only reshapes it is stored by the scan's kernel itself;
- matmul, custom and cross-device copy are schedule items of their own;
- independent outputs with the same iteration space share one kernel (ug.realize(a, b)) when
  they are as deep in the graph of kernels (see _depths); a write and a scatter are kernels of
  their own, except that a full elementwise write shares its kernel with the elementwise roots
  that read its new value where they compute it (an optimizer's m, v and p updates: one kernel,
  see _write_clusters);
- items come out in topological order; an assign that writes a buffer in place runs after
  every item of the schedule that reads the old value, and a cycle is a clear error.
"""

from __future__ import annotations

import dataclasses
import heapq
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from .device import AttentionSpec, FftSpec, MatmulSpec, SortSpec, is_writable
from .dtypes import BOOL, identity, name as dtype_name
from . import dag, graph
from .graph import Node
from .kernel_ir import BufferArg, Expr, ExprBuilder, Kernel, Reduction, Store, toposort
from .kernel_params import parametrize_offsets
from .ops import ALU, REDUCE, Op
from .plugins import registry
from .view import View, ViewChain, chain_masked, chain_push, contiguous_strides, indicator, prod


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
    reduces: list[Node] = field(default_factory=list)       # REDUCE (and SCAN) nodes computed inside
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
class _OneSourceItem:
    """An item that makes `out` from the buffer of one node `src`."""
    out: Node
    src: Node

    @property
    def buffers(self) -> list[Node]:
        return [self.out, self.src]

    @property
    def outputs(self) -> list[Node]:
        return [self.out]


@dataclass
class CopyItem(_OneSourceItem):
    kind: str = "copy"

    def describe(self) -> str:
        return f"copy {self.src.shape} {self.src.device} -> {self.out.device}"


@dataclass
class SortItem(_OneSourceItem):
    spec: SortSpec
    kind: str = "sort"

    def describe(self) -> str:
        s = self.spec
        what = "argsort" if s.indices else "sort"
        top = f", first {s.k}" if s.k < s.n else ""
        return f"{what} {s.rows} rows of {s.n}{top}{' descending' if s.descending else ''}"


@dataclass
class FftItem(_OneSourceItem):
    spec: FftSpec
    kind: str = "fft"

    def describe(self) -> str:
        s = self.spec
        what = ("irfft" if s.inverse else "hfft") if s.real_out and s.onesided else \
            ("ihfft" if s.inverse else "rfft") if s.onesided else ("ifft" if s.inverse else "fft")
        resized = f" from {s.n_in}" if s.n_in != s.n_used else ""
        return f"{what} {s.rows} rows of {s.n}{resized} {dtype_name(s.dtype)} ({s.norm})"


@dataclass
class AttentionItem:
    """A device's fused attention (Device.attention): out from q, k, v (and an additive mask),
    read through the views in `spec`."""
    out: Node
    inputs: list[Node]    # q, k, v[, mask]: the buffers the spec's views read
    spec: AttentionSpec
    kind: str = "attention"

    @property
    def buffers(self) -> list[Node]:
        return [self.out, *self.inputs]

    @property
    def outputs(self) -> list[Node]:
        return [self.out]

    def describe(self) -> str:
        s = self.spec
        mask = ", mask" if s.mask_view is not None else ""
        return (f"attention q {s.q_view.shape} k {s.k_view.shape} v {s.v_view.shape}{mask}"
                f"{', causal' if s.causal else ''} -> {self.out.shape} {dtype_name(self.out.dtype)}")


Item = KernelItem | MatmulItem | CustomItem | CopyItem | SortItem | FftItem | AttentionItem


@dataclass
class Schedule:
    items: list[Item]
    targets: list[Node]
    # lazy nodes whose new buffer an in-place assign took over and overwrote: they are left
    # lazy (a later read computes them again) rather than given a buffer holding another value
    clobbered: set[Node] = field(default_factory=set)

    @property
    def kernels(self) -> list[KernelItem]:
        return [i for i in self.items if isinstance(i, KernelItem)]

    def __str__(self) -> str:
        counts: dict[str, int] = {}
        for item in self.items:
            counts[item.kind] = counts.get(item.kind, 0) + 1
        summary = ", ".join(f"{n} {k}{'' if n == 1 else 's'}" for k, n in counts.items()) or "nothing to do"
        lines = [f"schedule: {summary}"]
        lines += [f"  [{i}] {item.describe()}" for i, item in enumerate(self.items)]
        return "\n".join(lines)


# --- building one kernel ------------------------------------------------------------------


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


def _build(roots: list[_Root], realize: set[Node], note: str = "", inlined: dict[Node, Node] | None = None) -> KernelItem:
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
    """(base, view) such that node == base read through one strided view that a matmul takes:
    no mask, no negative stride (else the view is a kernel's, and the matmul reads its result).
    Lazy views of lazy views are merged down to the first node that is not one (e.g. the
    transpose of ug.grad's named identity view of a parameter, `g @ W^T` in a backward pass:
    the weight's own buffer, read transposed, not a transposed copy) when they make one view."""
    if node.op is not Op.VIEW or node.realized:
        return node, View.contiguous(node.shape)
    chain: ViewChain = (node.arg,)
    base = node.srcs[0]
    while base.op is Op.VIEW and not base.realized:
        chain = chain_push(chain, base.arg)
        if len(chain) != 1:
            return node, View.contiguous(node.shape)
        base = base.srcs[0]
    v = chain[0]
    if v.mask is None and min(v.strides, default=0) >= 0:
        return base, v
    return node, View.contiguous(node.shape)


def _matmul_operand(node: Node) -> tuple[Node, View]:
    """(base, view) of a matmul operand: as _strip_view, and also for a strided view of an
    unrealized view (a chain that did not merge, e.g. the transpose of a flattened window view)
    when the inner view has at most as many elements as the operand: the inner view is realized
    and the matmul reads it through the outer view. Then two products that read one value through
    different layouts (conv's im2col columns, and their transpose in the weight's gradient) share
    one buffer, and each copy kernel reads through the shorter chain."""
    base, view = _strip_view(node)
    if base is not node:  # the chain makes one view of a non-view: read that directly
        return base, view
    if (node.op is Op.VIEW and not node.realized and node.srcs[0].op is Op.VIEW and not node.srcs[0].realized
            and node.arg.mask is None and min(node.arg.strides, default=0) >= 0
            and prod(node.srcs[0].shape) <= prod(node.shape)):
        return node.srcs[0], node.arg
    return base, view


def _split_operand(node: Node) -> tuple[Node, View, int] | None:
    """A matmul operand read in place as a split operand (MatmulSpec.a_split / b_split): where
    it is a reshape of a strided view of a value whose rows (dim -2) flatten dims that no single
    stride walks, such as conv's im2col matrix (channel, tap row, tap column) x positions over
    the image: (the value, the view with the row dims kept apart, how many there are). None where
    that does not fit (the caller then reads the operand as _matmul_operand does)."""
    if node.op is not Op.VIEW or node.realized or len(node.shape) < 2:
        return None
    outer: View = node.arg
    if outer.mask is not None or outer.offset or outer.strides != contiguous_strides(outer.shape):
        return None
    inner = node.srcs[0]
    if inner.op is not Op.VIEW or inner.realized:
        return None
    chain: ViewChain = (inner.arg,)
    base = inner.srcs[0]
    while base.op is Op.VIEW and not base.realized:   # merge the views below while they make one
        pushed = chain_push(chain, base.arg)
        if len(pushed) != 1:
            break
        chain, base = pushed, base.srcs[0]
    v = chain[0]
    if v.mask is not None or min(v.strides, default=0) < 0:
        return None
    # the inner view's dims (size-1 ones dropped), grouped by the outer dim each flattens into
    dims = [(n, st) for n, st in zip(v.shape, v.strides) if n != 1]
    groups: list[list[tuple[int, int]]] = []
    k = 0
    for size in outer.shape:
        group, got = [], 1
        while got < size and k < len(dims):
            group.append(dims[k])
            got *= dims[k][0]
            k += 1
        if got != size:
            return None
        groups.append(group)
    if k != len(dims):
        return None
    shape: list[int] = []
    strides: list[int] = []
    split = 1
    for d, (size, group) in enumerate(zip(outer.shape, groups)):
        merges = all(st == st2 * n2 for (_, st), (n2, st2) in zip(group, group[1:]))
        if merges:
            shape.append(size)
            strides.append(group[-1][1] if group else 0)
        elif d == len(outer.shape) - 2 and len(group) <= 4:
            shape.extend(n for n, _ in group)
            strides.extend(st for _, st in group)
            split = len(group)
        else:
            return None
    if split == 1:
        return None
    return base, View(tuple(shape), tuple(strides), v.offset), split


def _matmul_operands(node: Node) -> tuple[tuple[Node, View, int], tuple[Node, View, int]]:
    """A matmul's or its operands' (base, view, split): split operands (_split_operand) where the
    device reads them, else (_matmul_operand, 1)."""
    out = []
    splits = registry.get(node.device).reads_split_operands()
    for src in node.srcs:
        split = _split_operand(src) if splits else None
        if split is None:
            base, view = _matmul_operand(src)
            split = (base, view, 1)
        out.append(split)
    return out[0], out[1]


def _must_realize(nodes: list[Node], targets: list[Node]) -> set[Node]:
    realize = {t for t in targets if not t.realized}
    for node in nodes:
        if node.realized:
            continue
        if node.op in ITEM_OPS or node.op is Op.ASSIGN:
            realize.add(node)
        if node.op is Op.MATMUL:   # (read through their views, as the items take them)
            for base, _, _ in _matmul_operands(node):
                if not base.realized:
                    realize.add(base)
        elif node.op is Op.ATTENTION:
            for src in node.srcs:
                base, _ = _matmul_operand(src)
                if not base.realized:
                    realize.add(base)
        elif node.op is Op.GATHER:  # read at computed elements: its source is a buffer (an index
            base, _ = _strip_view(node.srcs[0])   # vector's element is its index: no buffer)
            if not base.realized and base.op is not Op.IOTA:
                realize.add(base)
        elif node.op is Op.SCATTER:  # a kernel of its own (a scatter store), which fuses its sources
            realize.add(node)
        elif node.op in (Op.CUSTOM, Op.COPY, Op.SORT, Op.FFT):
            realize.update(s for s in node.srcs if not s.realized)
        elif node.op is Op.ASSIGN and not node.srcs[0].realized:
            realize.add(node.srcs[0])
    _bound_kernel_size(nodes, realize)
    return realize


# --- bounding kernel size -------------------------------------------------------------------


MAX_KERNEL_SIZE = 512
"""The most one kernel may fuse, in units of `_node_size` (an elementwise op or a load is one, a
view of a computed value 8, a transcendental 16). A bigger fused graph gets intermediates
realized into buffers (`_bound_kernel_size`), so each kernel's code, compile time and
per-kernel walks stay bounded however long the user's chain is. Measured compile times (one
kernel, fresh caches): cpu, a chain of `x * c + d` costs 250-380 us per op up to 800 ops, then
560 us at 1,600 and 900 us at 3,200 (LLVM turns superlinear), plus ~50 ms per kernel; vulkan
(lavapipe) such a chain costs ~150 us per op at any length, but `sin` about 50 ms each, 70 ms each
at 50 of them, 270 ms each at 200 (superlinear again); a view that does not merge with the next
one (a transpose read through a reshape) makes every load under it unravel its index once more:
8-11 ms each on cpu up to 128 of them, 18 ms each at 256, ~4.5 ms each on vulkan. Hence 512, at
most 32 transcendentals and 64 views of computed values a kernel. Ordinary kernels (softmax,
layernorm, gelu, an attention block's epilogues) are far smaller."""

_HEAVY_OPS = frozenset({Op.EXP, Op.LOG, Op.SIN, Op.COS, Op.TANH, Op.POW})
"""Ops that backends expand into many instructions (mathlib's exp/log/tanh, GLSL's sin/cos, pow)."""


def _node_size(node: Node) -> int:
    """What `node` adds to the size of a kernel that fuses it (see MAX_KERNEL_SIZE): a constant
    or a view of a leaf (a constant or buffer broadcast, say) nothing (the constant folds into
    the code, the view is part of the load), a view of a computed value 8 (where it does not
    merge with the views above it, every load under it unravels its index once more), a
    transcendental 16, anything else 1."""
    op = node.op
    if op is Op.VIEW:
        return 8 if node.srcs[0].srcs else 0
    if op is Op.CONST:
        return 0
    return 16 if op in _HEAVY_OPS else 1


def _max_arguments(device_name: str) -> int:
    """The most buffers (outputs and inputs) a kernel the scheduler builds may take on the
    device: its `max_kernel_buffers` (see Device) less one for the offsets argument that
    kernel_params may add (sys.maxsize: no limit)."""
    limit = getattr(registry.get(device_name), "max_kernel_buffers", None)
    return sys.maxsize if limit is None else max(2, limit - 1)


def _max_inputs(device_name: str) -> int:
    """The most input buffers a kernel of one output may read (see _max_arguments)."""
    return _max_arguments(device_name) - 1


def _bound_kernel_size(nodes: list[Node], realize: set[Node], limit: int = MAX_KERNEL_SIZE) -> None:
    """Add nodes to `realize` so that no kernel fuses a graph bigger than `limit` (in units of
    `_node_size`; a node with a buffer counts as one load) or reads more input buffers than
    its device takes (Device.max_kernel_buffers).

    One pass over `nodes` (sources before users) keeps, per node, upper bounds on the size of
    the graph a kernel computing it fuses (its own size plus its operands' bounds) and on the
    buffers it reads (its operands' bounds added up). They are exact where operands share
    nothing (chains, trees); where one passes its limit, a walk counts the node's fused graph
    exactly (stopping past the limits), and if that is too big too, the node's biggest operands
    get buffers until it fits. Linear in the graph, but for operands that share nodes near a
    limit (a walk of up to `limit` nodes each)."""
    bound: dict[int, tuple[int, int]] = {}  # id(node) -> (size, inputs) bounds of its fused graph, as its readers see it
    input_limits: dict[str, int] = {}  # per device: _max_inputs
    for node in nodes:
        if node.buffer is not None or node.op in ITEM_OPS:
            bound[id(node)] = _A_LOAD
            continue
        size, inputs = _node_size(node), 0
        for src in node.srcs:
            src_size, src_inputs = bound[id(src)]
            size += src_size
            inputs += src_inputs
        input_limit = input_limits.get(node.device)
        if input_limit is None:
            input_limit = input_limits[node.device] = _max_inputs(node.device)
        if size > limit or inputs > input_limit:
            size, inputs = _fused_size(node, realize, limit, input_limit)
            if size > limit or inputs > input_limit:
                size, inputs = _cut_operands(node, realize, bound, limit, input_limit)
        bound[id(node)] = _A_LOAD if node in realize else (size, inputs)


_A_LOAD = (1, 1)
"""A node with a buffer, as a fused graph reading it sees it: (size, input buffers)."""


def _fused_size(node: Node, realize: set[Node], limit: int, input_limit: int) -> tuple[int, int]:
    """(size, input buffers) of the graph a kernel computing `node` fuses: `node`, the lazy
    nodes it reaches through lazy nodes, and the buffers (loads) where that stops, each once;
    the walk stops as soon as either passes its limit."""
    seen = {id(node)}
    stack = [node]
    size, inputs = _node_size(node), 0
    while stack:
        for src in stack.pop().srcs:
            if id(src) in seen:
                continue
            seen.add(id(src))
            if src.buffer is not None or src in realize:
                size += 1
                inputs += 1
            else:
                size += _node_size(src)
                stack.append(src)
            if size > limit or inputs > input_limit:
                return size, inputs
    return size, inputs


def _cut_operands(node: Node, realize: set[Node], bound: dict[int, tuple[int, int]], limit: int,
                  input_limit: int) -> tuple[int, int]:
    """Give `node`'s biggest operands buffers until its fused graph fits; its (size, inputs)
    then. Of a view of a lazy node, the viewed node gets the buffer (a broadcast view would
    store every repeated element), unless that is a view too (a chain of views that do not
    merge, as long as the limit: then the view itself)."""
    size, inputs = limit + 1, 0
    for src in sorted(node.srcs, key=lambda s: bound[id(s)], reverse=True):
        if src.buffer is not None or src in realize or not src.srcs:
            continue  # a load or a constant already
        cut = src
        if (src.op is Op.VIEW and src.srcs[0].op is not Op.VIEW and src.srcs[0].srcs
                and src.srcs[0].buffer is None and src.srcs[0] not in realize):
            cut = src.srcs[0]
        realize.add(cut)
        bound[id(cut)] = _A_LOAD
        size, inputs = _fused_size(node, realize, limit, input_limit)
        if size <= limit and inputs <= input_limit:
            break
    return size, inputs


def _settle_buffers(nodes: list[Node], realize: set[Node]) -> None:
    """Add to `realize` the nodes that building the kernels will ask buffers for (_NeedsBuffer),
    in one pass: each kernel root is built alone, sources first, and a node a build asks for
    becomes a root, built next, before the root that asked is built again. Those new buffers
    are more inputs for the kernels that read them, so the kernel size bound is applied again
    (`_bound_kernel_size`), and the roots that adds are built in turn.

    create_schedule runs this after the first _NeedsBuffer. Its own loop adds one node and
    rebuilds every kernel, which for a chain of n reductions that cannot fuse with their
    readers takes n rounds, each building the whole chain: cubic, a minute for 100 of them.
    The kernels built here are thrown away (create_schedule builds them again, once, and checks
    what this missed)."""
    position = {id(n): i for i, n in enumerate(nodes)}
    built: set[Node] = set()
    while True:
        todo = sorted((n for n in realize if n.op not in ITEM_OPS and n.buffer is None and n not in built),
                      key=lambda n: position[id(n)], reverse=True)  # popped from the end: sources first
        if not todo:
            return
        while todo:
            node = todo[-1]
            try:
                _build([_kernel_root(node)], realize)
            except _NeedsBuffer as e:
                new = [n for n in e.nodes if n not in realize]
                if not new:
                    return  # create_schedule's loop reports it
                realize.update(new)
                todo.extend(sorted(new, key=lambda n: position[id(n)], reverse=True))
                continue
            built.add(todo.pop())
        _bound_kernel_size(nodes, realize)


def _kernel_root(node: Node) -> _Root:
    """What the kernel that gives `node` its value computes and where it stores it."""
    if node.op is Op.ASSIGN:
        return _Root(node, node.srcs[1], node.arg)
    return _Root(node, node, None)


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


def unrealized(targets: Iterable[Node]) -> list[Node]:
    """The targets a schedule computes: each node once, in order, leaving out realized ones."""
    return list(dict.fromkeys(t for t in targets if not t.realized))


def create_schedule(targets: list[Node]) -> Schedule:
    targets = unrealized(targets)
    nodes = walk(targets)
    realize = _must_realize(nodes, targets)
    position = {id(n): i for i, n in enumerate(nodes)}
    in_place = _in_place_assigns(nodes, targets, realize)
    merge_writes = True
    while True:
        kernel_nodes = sorted((n for n in realize if n.op not in ITEM_OPS), key=lambda n: position[id(n)])
        try:
            items = _build_kernels(kernel_nodes, realize, in_place, merge_writes)
        except _NeedsBuffer as e:
            if e.node in realize:  # would loop forever: a bug in the scheduler, not in the user's graph
                raise ScheduleError(f"scheduler could not place {e.node!r}") from e
            realize.update(e.nodes)
            _settle_buffers(nodes, realize)  # the other nodes builds will ask for, in one pass
            continue
        misaligned = _misaligned_in_place(items, in_place)
        # a value with a buffer of its own already cannot be given one: misaligned, its kernel
        # reads the target itself (`x[::-1] = x`, also where x is an earlier write of this
        # schedule, in `realize` and sharing the target's buffer): that write gets a fresh buffer
        not_in_place = {a for a in misaligned if _loads_buffer(a.srcs[1], realize)}
        in_place -= not_in_place
        shared = _reductions_in_several_kernels(items) | ({a.srcs[1] for a in misaligned - not_in_place} - realize)
        if shared or not_in_place:
            realize.update(shared)
            continue
        items += [_item_for(n) for n in sorted((n for n in realize if n.op in ITEM_OPS), key=lambda n: position[id(n)])]
        try:
            ordered = _order(items, in_place)
        except ScheduleError:
            if merge_writes and any(isinstance(i, KernelItem) and i.alias and len(i.outputs) > 1 for i in items):
                # a write merged with its readers (_write_clusters) that must also wait for a
                # reader of its target which needs the merged kernel: kernels of their own
                merge_writes = False
                continue
            if not in_place:
                raise
            in_place = set()  # a read depends on the write: write into fresh buffers instead
            continue
        clobbered = {n.srcs[0] for n in in_place if not n.srcs[0].realized}
        for item in ordered:  # last: the decisions above read the offsets in the kernels' views
            if isinstance(item, KernelItem):
                item.kernel, holder = parametrize_offsets(item.kernel, item.outputs[0].device)
                if holder is not None:
                    item.buffers.append(holder)
        return Schedule(ordered, targets, clobbered)


_ALONE = frozenset({Op.ASSIGN, Op.SCATTER})
"""Roots whose kernel is never merged with others: a write (its store may alias its target) and
a scatter. A scatter's kernel runs a part's positions in order, not the outer index's rows: with
a reduction of the same (parts, 1) iteration space it made a kernel the gpu lowering rejects
(vulkan: `m = x.max(-1); m[idx] = 1`), and scatters merged with each other gain no parallelism
(one part is one thread or workgroup either way) while LLVM's time for a kernel grows with the
square of its scatter stores (cpu: 8 stores 0.5 s, 32 stores 6 s); alone, the scatters of a
chain (`acc.assign(scatter_add(acc, ...))` k times) are one compiled kernel run k times."""


MAX_MERGED_ROOTS = 8
"""The most independent roots one kernel computes together. A merged kernel is new code for each
number of roots, so without a bound every length of a chain of independent small writes (their
scalar values, say) would compile a kernel of its own; past 8 the launches saved are few."""


def _build_kernels(kernel_nodes: list[Node], realize: set[Node], in_place: set[Node], merge_writes: bool = True
                   ) -> list[Item]:
    # first each root alone (this is where _NeedsBuffer decisions are made) ...
    singles = {node: _build([_kernel_root(node)], realize) for node in kernel_nodes}
    depth, reach = _depths(singles)
    # ... then merge writes with the roots that read their new values (_write_clusters): each
    # cluster is one kernel, and counts as one root in the depths below ...
    clusters = _write_clusters(kernel_nodes, singles, realize, in_place, depth, reach) if merge_writes else {}
    if clusters:
        depth, _ = _depths(singles, clusters)
    in_cluster = {m: r for r, members in clusters.items() for m in members}
    # ... then merge independent roots with the same iteration space into one kernel: roots of
    # one depth (see _depths) are independent, and kernels that each hold roots of one depth
    # never need each other in a circle, so this is one pass, linear in the roots
    groups: list[list[Node]] = []
    group_inputs: list[set[int]] = []  # ids of the nodes each group's kernel reads
    joining: dict[tuple[str, tuple[int, ...], tuple[int, ...], int], int] = {}  # the group a key's roots join
    for node in kernel_nodes:
        if node in in_cluster:   # a cluster is a kernel of its own, placed where its last root is
            if in_cluster[node] is node:
                groups.append(clusters[node])
                group_inputs.append(set())
            continue
        k = singles[node].kernel
        inputs = {id(n) for n in singles[node].buffers[1:]}
        # a write is a kernel of its own (its store may alias its target), and so is a scatter
        # (see _ALONE): no group to look for
        key = (node.device, k.outer, k.axes, depth[node])
        gi = joining.get(key) if node.op not in _ALONE else None
        if gi is not None and len(groups[gi]) < MAX_MERGED_ROOTS and (
                len(groups[gi]) + 1 + len(group_inputs[gi]) + len(inputs - group_inputs[gi]) <= _max_arguments(node.device)):
            groups[gi].append(node)
            group_inputs[gi] |= inputs
            continue
        if node.op not in _ALONE:  # (a full group: the key's later roots join this new one)
            joining[key] = len(groups)
        groups.append([node])
        group_inputs.append(inputs)
    items: list[Item] = []
    for group in groups:
        node = group[0]
        if node.op is Op.ASSIGN and node.arg is not None and node not in in_place:
            # a partial write into a fresh buffer: first copy the old value there
            items.append(_build([_Root(node, node.srcs[0], None)], realize, note="(assign-copy)"))
        # a root alone is the kernel built for it above (the same roots and realize set)
        if len(group) == 1:
            item = singles[node]
        else:
            inlined = {n: n.srcs[1] for n in group if n.op is Op.ASSIGN} if node in in_cluster else None
            item = _build([_kernel_root(n) for n in group], realize, inlined=inlined)
        item.alias = {n: n.srcs[0] for n in group if n in in_place}
        items.append(item)
    return items


def _elementwise_root(node: Node, item: KernelItem) -> bool:
    """Whether `item`, `node`'s kernel alone, computes it element by element over its own index
    space (no reduction, scan or scatter), storing all of it (not a partial write)."""
    k = item.kernel
    return (not k.reductions and not k.axes and (node.op is not Op.ASSIGN or node.arg is None)
            and all(st.scan is None and st.scatter is None for st in k.stores))


def _reads_only_at(exprs: Iterable[Expr], bufs: set[int], view: View) -> bool:
    """Whether `exprs` read the arguments `bufs` only through `view` (no other chain, no gather)."""
    for e in dag.toposort(list(exprs), lambda e: e.srcs):
        if e.op is Op.LOAD and e.arg[0] in bufs and tuple(e.arg[1]) != (view,):
            return False
        if e.op is Op.GATHER and e.arg in bufs:
            return False
    return True


def _write_clusters(kernel_nodes: list[Node], singles: dict[Node, KernelItem], realize: set[Node], in_place: set[Node],
                    depth: dict[Node, int], reach: dict[int, int]) -> dict[Node, list[Node]]:
    """Writes merged into one kernel with the roots that read their new values: Adam's
    `m.assign(b1 * m + (1 - b1) * g)`, `v.assign(...)` and `p.assign(p - lr * m / (v.sqrt() + eps))`
    are one kernel of three stores, whose p reads m's and v's new values as the kernel computes
    them for their own stores (in registers), not from their buffers after two more kernels.

    Independent roots are merged by depth (_build_kernels); these depend on each other, so a
    root R joins the cluster of a write D (a full assign) it reads when both are elementwise
    kernels of one device and index space (_elementwise_root) and R reads D only at the
    element it computes (so the value is the one D's store computes there), and when the
    merged cluster
    - reads members only that way, and only members that are writes (a plain root's buffer
      would be read in the kernel that writes it);
    - holds no write into another member;
    - has no path from one member to another through a node outside it (that node's kernel
      would need the cluster's and be needed by it);
    - can order its stores so that a write in place comes after every store that reads its
      target: at each element the kernel runs its stores in order, so they all read the old
      value (_misaligned_in_place checks the kernel built);
    - stays within MAX_MERGED_ROOTS roots, MAX_KERNEL_SIZE and the device's buffer limit.

    Returns each cluster of two or more roots by its last root in `kernel_nodes` (sources
    first), its members in store order."""
    position = {id(n): i for i, n in enumerate(kernel_nodes)}
    eligible: dict[Node, bool] = {}
    sizes: dict[Node, int] = {}
    in_cluster: dict[Node, Node] = {}
    clusters: dict[Node, list[Node]] = {}

    def inputs(n: Node) -> list[Node]:
        item = singles[n]
        return item.buffers[len(item.outputs):]

    def is_eligible(n: Node) -> bool:
        known = eligible.get(n)
        if known is None:
            known = eligible[n] = _elementwise_root(n, singles[n])
        return known

    def size(n: Node) -> int:
        known = sizes.get(n)
        if known is None:
            value = _kernel_root(n).value
            known = sizes[n] = 1 if value is not n and _loads_buffer(value, realize) else \
                _fused_size(value, realize, MAX_KERNEL_SIZE, sys.maxsize)[0]
        return known

    def store_order(members: list[Node]) -> list[Node] | None:
        reads: dict[Node, set[int]] = {}   # the buffers each member's store reads, inlined writes' included
        for m in members:   # (sources first: a member's inlined writes come before it)
            reads[m] = {id(b) for b in inputs(m)}.union(*(reads[b] for b in inputs(m) if b in reads))
        after: dict[Node, list[Node]] = {m: [] for m in members}   # m -> the stores that must follow it
        for w in members:
            if w in in_place:
                for m in members:
                    if m is not w and id(w.srcs[0]) in reads[m]:
                        after[m].append(w)
        indegree = {m: 0 for m in members}
        for followers in after.values():
            for w in followers:
                indegree[w] += 1
        ready = [m for m in members if not indegree[m]]
        order: list[Node] = []
        while ready:
            m = ready.pop(0)
            order.append(m)
            for w in after[m]:
                indegree[w] -= 1
                if not indegree[w]:
                    ready.append(w)
        return order if len(order) == len(members) else None

    def mergeable(members: list[Node]) -> list[Node] | None:
        if len(members) > MAX_MERGED_ROOTS:
            return None
        mset = set(members)
        outer = singles[members[0]].kernel.outer
        identity = View.contiguous(outer)
        reads: set[int] = set()
        for m in members:
            if m.op is Op.ASSIGN and m.srcs[0] in mset:
                return None
            item = singles[m]
            for j, b in enumerate(item.buffers[len(item.outputs):], start=len(item.outputs)):
                if b in mset:
                    if b.op is not Op.ASSIGN or not _reads_only_at((st.expr for st in item.kernel.stores), {j}, identity):
                        return None
                else:
                    reads.add(id(b))
        if sum(size(m) for m in members) > MAX_KERNEL_SIZE or len(members) + len(reads) > _max_arguments(members[0].device):
            return None
        # a path between members through a node outside: a walk from what they need, down to
        # the depth of the shallowest member (a node that needs a member reaches deeper)
        lowest = min(depth[m] for m in members)
        stack = [s for m in members for s in _needs(m, singles) if s not in mset]
        seen: set[int] = set()
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            if n in mset:
                return None
            if reach.get(id(n), 0) > lowest:
                stack.extend(_needs(n, singles))
        return store_order(members)

    for r in kernel_nodes:
        if not is_eligible(r):
            continue
        item = singles[r]
        for d in inputs(r):
            if (d.op is not Op.ASSIGN or d not in singles or d.device != r.device or not is_eligible(d)
                    or singles[d].kernel.outer != item.kernel.outer):
                continue
            cr, cd = in_cluster.get(r, r), in_cluster.get(d, d)
            if cr is cd:
                continue
            members = sorted(clusters.get(cd, [cd]) + clusters.get(cr, [cr]), key=lambda n: position[id(n)])
            ordered = mergeable(members)
            if ordered is None:
                continue
            clusters.pop(cd, None)
            clusters[cr] = ordered
            for m in ordered:
                in_cluster[m] = cr
    return clusters


def _named(k: Kernel) -> Kernel:
    kind = ("s" if any(s.scan is not None for s in k.stores) else "x" if any(s.scatter is not None for s in k.stores)
            else "r" if k.reductions else "E")
    dims = "_".join(str(d) for d in (k.stores[0].shape if k.stores else k.outer)) or "scalar"
    name = f"{kind}{len(k.reductions) or ''}_{dims}"
    return Kernel(name, k.args, k.outer, k.axes, k.reductions, k.stores)


def _needs(node: Node, singles: dict[Node, KernelItem]) -> list[Node]:
    """The unrealized nodes whose values `node` needs first: a kernel root's inputs (see
    `singles`), another node's sources."""
    item = singles.get(node)
    srcs = item.buffers[len(item.outputs):] if item is not None else list(node.srcs)
    if node.op is Op.ASSIGN:
        srcs = [node.srcs[0], *srcs]  # the write needs its target's buffer (to copy, or to write into)
    return [s for s in srcs if not s.realized]


def _depths(singles: dict[Node, KernelItem], clusters: dict[Node, list[Node]] | None = None
            ) -> tuple[dict[Node, int], dict[int, int]]:
    """For each kernel root, its depth: 0 for a root that needs no other root, else one more
    than the deepest root it needs (through any items, e.g. a root reading a matmul of a root).
    A root needs only shallower roots, so roots of one depth are independent of each other, and
    kernels that merge roots of one depth each need kernels of smaller depths only: never each
    other in a circle. With `clusters` (see _write_clusters: roots merged into one kernel, by
    their last root), a cluster counts as one root that needs what its members need, and its
    members get its depth.

    One iterative walk (graphs can be deep), each node once: `reach` holds, per node, one more
    than the deepest root it is or needs (0: none); it is returned too (by id)."""
    reach: dict[int, int] = {}
    depth: dict[Node, int] = {}
    unit = {m: r for r, members in (clusters or {}).items() for m in members}

    def needs(node: Node) -> list[Node]:
        members = clusters.get(node) if clusters else None
        if members is None:
            srcs = _needs(node, singles)
        else:
            srcs = [s for m in members for s in _needs(m, singles)]
        return [u for u in (unit.get(s, s) for s in srcs) if u is not node] if unit else srcs

    for root in singles:
        root = unit.get(root, root)
        if id(root) in reach:
            continue
        path = {id(root)}
        stack = [(root, iter(needs(root)))]
        while stack:
            node, srcs = stack[-1]
            for src in srcs:
                if id(src) not in reach and id(src) not in path:
                    path.add(id(src))
                    stack.append((src, iter(needs(src))))
                    break
            else:
                stack.pop()
                path.discard(id(node))
                d = max((reach.get(id(s), 0) for s in needs(node)), default=0)
                if node in singles:
                    depth[node] = d
                    d += 1
                reach[id(node)] = d
    for m, r in unit.items():
        depth[m] = depth[r]
    return depth, reach


def _reductions_in_several_kernels(items: list[Item]) -> set[Node]:
    """Fused reductions (and scans) that more than one kernel would compute: they get a buffer instead."""
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
        (a, av, a_split), (b, bv, b_split) = _matmul_operands(node)
        return MatmulItem(node, a, b, MatmulSpec(av, bv, node.shape, node.dtype, a_split, b_split))
    if node.op is Op.CUSTOM:
        return CustomItem(node, list(node.srcs), node.arg)
    if node.op is Op.COPY:
        return CopyItem(node, node.srcs[0])
    if node.op is Op.SORT:
        return SortItem(node, node.srcs[0], node.arg)
    if node.op is Op.FFT:
        return FftItem(node, node.srcs[0], node.arg)
    if node.op is Op.ATTENTION:
        # (the operands as _must_realize realized them: the same rule as a matmul's)
        bases, views = zip(*(_matmul_operand(s) for s in node.srcs))
        mask = views[3] if len(views) > 3 else None
        spec = AttentionSpec(views[0], views[1], views[2], mask, node.shape, node.dtype, *node.arg)
        return AttentionItem(node, list(bases), spec)
    raise AssertionError(node)


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
