"""The lazy graph: immutable nodes, one constructor per op kind, each with its shape rule.

A Node never changes what it computes. The one thing that changes is `buffer`: once a
node has been realized, the scheduler stores the device buffer holding its value and
drops its sources, so that later graphs built on it just load the buffer.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .ops import ALU, REDUCE, SCANS, Op
from .view import View, chain_push, prod

if TYPE_CHECKING:
    from .device import Buffer


graph_lock = threading.RLock()
"""Held while a tensor's value is read and replaced by a write (Tensor.assign, `x[i] = v`: see
tensor.write_lock) and while a realize schedules, runs and records its results
(execute.realize_nodes). Writes from several threads to one tensor then each build on the one
before (none is lost), and a realize never sees a half-made write nor runs twice at once the same
in-place write. Reentrant: a write may realize (a boolean mask's values), and a custom op's
function may use ug. Uncontended, it costs about 0.1 us, against the several us of a write."""


class _Threads:
    """Which threads have written or realized tensors: once a second one has, writes stop going
    in place (schedule.assign._in_place_assigns). An in-place write is allowed when no reader of the
    old value is registered, but a thread may hold a tensor's node it just read, about to build
    on it, with no reader registered yet: another thread's realize would overwrite it under it
    (seen as lost or doubled `x[i] += 2` on threads' own rows while others read x)."""

    first: int | None = None
    several = False


threads = _Threads()


def note_thread() -> None:
    """Record that this thread writes or realizes tensors (cheap once several have: a test)."""
    if threads.several:
        return
    ident = threading.get_ident()
    if threads.first is None:
        threads.first = ident
    elif ident != threads.first:
        threads.several = True


class _KeptSources:
    """The sources of nodes realized while ug.grad / ug.vjp run a function (depth > 0): a
    realize drops a node's sources, and the gradient walks back through them (autodiff)."""

    depth = 0
    nodes: "dict[Node, tuple[Node, ...]]" = {}


kept_sources = _KeptSources()

detached: "weakref.WeakSet[Node]" = weakref.WeakSet()
"""Nodes no gradient flows back through (stop_gradient's, see `detach`)."""

derivatives: "weakref.WeakKeyDictionary[Node, tuple[tuple[Node, ...], Callable[..., Any]]]" = weakref.WeakKeyDictionary()
"""A composite value's own derivative (autodiff.define_vjp): node -> (its inputs, rule); the
gradient walk takes the rule instead of going through the graph that computes the value (a
numerically careful formula whose unused branches would give NaN gradients)."""

named: "weakref.WeakSet[Node]" = weakref.WeakSet()
"""Identity views that stand for a value under a name of their own (detach's, and ug.grad's
handles on its arguments): a view of one is not merged into a view of what it reads, which
would drop the name from the graph."""


_readers_lock = threading.RLock()
"""Held while a node's `_readers` changes (Node._add_reader_ref). Reentrant: a garbage
collection that an allocation under it starts may run a finalizer that builds ug nodes; the
code after such an allocation checks that nothing came in meanwhile. (Bound as a default
argument where tensors going call it: at interpreter exit module globals are cleared first.)"""


class Node:
    __slots__ = ("op", "srcs", "arg", "shape", "dtype", "device", "sig", "buffer", "_readers", "_creator", "__weakref__")

    # the fields, all set by new_node (see there for what each holds)
    op: Op
    srcs: tuple["Node", ...]
    arg: Any
    shape: tuple[int, ...]
    dtype: np.dtype
    device: str
    sig: tuple[tuple[int, ...], np.dtype, str]
    buffer: "Buffer | None"
    _readers: "weakref.ref[Any] | list[weakref.ref[Any]] | None"
    _creator: int

    def __new__(cls, op: Op, srcs: tuple["Node", ...], arg: Any, shape: tuple[int, ...], dtype: np.dtype, device: str,
                buffer: "Buffer | None" = None) -> "Node":
        # Node(...) as callers outside the graph's constructors write it (tests): new_node
        return new_node(op, srcs, arg, (shape, dtype, device), buffer)

    def add_reader(self, reader: Any) -> None:
        """Register `reader` (a tensor holding this node) for as long as it lives: its reference
        takes itself out of `_readers` when it goes (most tensors are intermediate values that go
        soon, and a dead reference left behind keeps this node's list of readers too, two more
        objects per node for the garbage collector to walk)."""
        ref = _ReaderRef(reader, _reader_gone)
        ref.node = weakref.ref(self)   # (weakly: a strong one would make a cycle through _readers)
        self._add_reader_ref(ref)

    def _drop_reader(self, ref: weakref.ref[Any], _readers_lock: threading.RLock = _readers_lock) -> None:
        """Take `ref` (dead) out of `_readers`. The list is replaced, not changed, so that a
        readers() walk of it meanwhile misses no live reader."""
        with _readers_lock:
            while True:
                readers = self._readers
                if readers is ref:
                    self._readers = None
                    return
                if not isinstance(readers, list) or not any(r is ref for r in readers):
                    return
                if len(readers) == 2:
                    self._readers = readers[1] if readers[0] is ref else readers[0]
                    return
                rest = [r for r in readers if r is not ref]   # (may collect garbage: see _add_reader_ref)
                if self._readers is readers and len(readers) == len(rest) + 1:
                    self._readers = rest
                    return

    def _add_reader_ref(self, ref: weakref.ref[Any]) -> None:
        """Register `ref`'s object as a reader. `_readers` is None (no reader), one weak
        reference (the common case: one node or tensor reads this one), or a list of them
        (see new_node for why not always a list). Its changes are made under `_readers_lock`:
        two threads turning None or one reference into a list at once would each drop the
        other's reader, and a lost reader lets a write go in place over a value that reader
        still needs."""
        with _readers_lock:
            readers = self._readers
            if readers is None:
                self._readers = ref
            elif not isinstance(readers, list):
                if readers() is None:   # a dead reader (a tensor gone): take its place
                    self._readers = ref
                    return
                pair = [readers, ref]   # (may collect garbage, whose finalizers may add readers)
                if self._readers is readers:
                    self._readers = pair
                else:                   # one did: start over from what it left
                    self._add_reader_ref(ref)
            elif readers[-1]() is None:  # (`x = x + 1` loops: the last reader is a tensor gone)
                readers[-1] = ref
            else:
                readers.append(ref)
                n = len(readers)
                if n >= 64 and (n & (n - 1)) == 0:  # prune dead refs now and then
                    self._prune(readers)

    def _prune(self, readers: list[weakref.ref[Any]]) -> None:
        """Replace `readers` (the list in `_readers`, under _readers_lock) by its live entries:
        a new list, so that readers() iterating the old one meanwhile misses no live reader
        (removing from the list it iterates would shift one past it)."""
        while True:
            n = len(readers)
            live = [r for r in readers if r() is not None]  # (may run a finalizer that adds a reader)
            if len(readers) == n:
                self._readers = live
                return

    def readers(self) -> list[Any]:
        """The live nodes and tensors that read this node's value."""
        readers = self._readers  # (read once: another thread may replace it)
        if readers is None:
            return []
        if isinstance(readers, list):
            return [obj for obj in (r() for r in readers) if obj is not None]
        obj = readers()
        return [] if obj is None else [obj]

    @property
    def realized(self) -> bool:
        return self.buffer is not None

    def set_buffer(self, buffer: "Buffer") -> None:
        self.buffer = buffer
        if kept_sources.depth and self.srcs:  # a function is being differentiated: see there
            kept_sources.nodes[self] = self.srcs
        self.srcs = ()

    def __repr__(self) -> str:
        name = self.op.name if self.op not in (Op.REDUCE, Op.SCAN) else f"{self.op.name}_{self.arg[0].name}"
        state = " realized" if self.realized else ""
        return f"<{name} {self.shape} {self.dtype.name} {self.device}{state} #{id(self) & 0xFFFF:04x}>"


def new_node(op: Op, srcs: tuple[Node, ...], arg: Any, sig: tuple[tuple[int, ...], np.dtype, str],
             buffer: "Buffer | None" = None) -> Node:
    """The one constructor of Node (`Node(...)` calls it too); `sig` is the node's (shape,
    dtype, device). It is cheap enough for ug.jit's replays, which make a node per output per
    call: no __init__ call, the signature passed as one tuple (a replay has it already), and no
    reader bookkeeping for a node without sources (a buffer's)."""
    node = _new_object(Node)
    node.op = op
    node.srcs = srcs
    node.arg = arg
    # (shape, dtype, device) as one tuple too: what ug.jit keys a tensor argument by, read on
    # every call (one attribute instead of three and a new tuple)
    node.shape, node.dtype, node.device = node.sig = sig
    # the device buffer holding the value, once realized (see set_buffer)
    node.buffer = buffer
    # who reads this node's value (nodes and tensors); assign uses it to decide
    # whether writing into this node's buffer in place would be seen by an earlier read
    # (weak references: cheap to create, and a WeakSet would compare tensors with their
    # elementwise ==). None until a reader comes, then one reference, a list only from the
    # second live reader on: most nodes have one reader, and each object made here is one
    # more for the garbage collector to walk (SciPy's permutation_test builds tens of
    # thousands of nodes; the collector took a third of its time when each had a list)
    node._readers = None
    # the id of a tensor made together with this node that is not in `_readers` (ug.jit
    # replay outputs, see jit.fast_replay._output_maker: a weak reference costs more than the rest of the
    # output), until it moves on to another node (Tensor._replace_node); 0: none. Its id is
    # all the node knows of it, so assign takes it for a live reader of this node meanwhile.
    node._creator = 0
    if srcs:
        ref = weakref.ref(node)  # one reference object serves every source's list
        for src in srcs:
            src._add_reader_ref(ref)
    return node


class _ReaderRef(weakref.ref):
    """A weak reference to a tensor reading `node` (Node.add_reader), held weakly too."""

    __slots__ = ("node",)
    node: "weakref.ref[Node]"


def _reader_gone(ref: "_ReaderRef", _readers_lock: "threading.RLock" = _readers_lock) -> None:
    """A tensor registered by Node.add_reader went: take its reference out of its node's
    readers (its only reader, the common case, here; every intermediate tensor comes here)."""
    node = ref.node()
    if node is None:
        return
    with _readers_lock:   # (Node._drop_reader's two commonest cases, inline)
        readers = node._readers
        if readers is ref:
            node._readers = None
            return
        if isinstance(readers, list) and len(readers) == 2:
            if readers[0] is ref:
                node._readers = readers[1]
                return
            if readers[1] is ref:
                node._readers = readers[0]
                return
    node._drop_reader(ref)


# object.__new__, bound once: new_node runs once per node
_new_object = object.__new__


def const(value: Any, dtype: np.dtype, device: str, shape: tuple[int, ...] = ()) -> Node:
    node = new_node(Op.CONST, (), dtype.type(value).item(), ((), dtype, device))
    return view(node, View(tuple(shape), (0,) * len(shape), 0)) if shape else node


def iota(shape: tuple[int, ...], dtype: np.dtype, device: str) -> Node:
    """The index vector: the element at flat (row-major) position p is p, as `dtype` (no memory)."""
    return new_node(Op.IOTA, (), None, (tuple(shape), dtype, device))


def detach(src: Node) -> Node:
    """src's value as a node the gradient stops at (ug.stop_gradient): an identity view."""
    node = name(src)
    detached.add(node)
    return node


def name(src: Node) -> Node:
    """src's value under a name of its own (an identity view that views do not merge through):
    uses of it are told apart from other uses of src."""
    node = new_node(Op.VIEW, (src,), View.contiguous(src.shape), src.sig)
    named.add(node)
    return node


def from_buffer(buffer: "Buffer", shape: tuple[int, ...]) -> Node:
    return new_node(Op.BUFFER, (), None, (tuple(shape), buffer.dtype, buffer.device_name), buffer)


def view(src: Node, v: View) -> Node:
    """Read `src` through `v` (which indexes src's contiguous layout)."""
    # a loop, not a recursion: a view of a view merges into one and is tried on the next one
    # down, and a chain of views that did not merge can be long
    while True:
        if v.is_void:  # every index masked out (e.g. a padding region): zeros, read from nothing
            return const(0, src.dtype, src.device, v.shape)
        if v.shape == src.shape and v.is_contiguous:
            return src
        if src.op is not Op.VIEW or src.realized or src in named:
            break
        merged = chain_push((v,), src.arg)
        if len(merged) != 1:
            break
        src, v = src.srcs[0], merged[0]
    return new_node(Op.VIEW, (src,), v, (v.shape, src.dtype, src.device))


def alu(op: Op, srcs: tuple[Node, ...], dtype: np.dtype) -> Node:
    """Elementwise op. Shape rule: all operands already have one shape (the frontend broadcasts)."""
    assert op in ALU and ALU[op].arity == len(srcs), op
    first = srcs[0]
    shape = first.shape
    for src in srcs:
        assert src.shape == shape, [s.shape for s in srcs]
    return new_node(op, srcs, None, (shape, dtype, first.device))


def cast(src: Node, dtype: np.dtype) -> Node:
    if src.dtype == dtype:
        return src
    if src.op is Op.CONST:   # (a complex one cast to a real dtype: its real part, numpy's cast)
        return const(src.arg.real if isinstance(src.arg, complex) and dtype.kind != "c" else src.arg, dtype, src.device)
    return new_node(Op.CAST, (src,), dtype, (src.shape, dtype, src.device))


def bitcast(src: Node, dtype: np.dtype) -> Node:
    """src's bits as `dtype` (ops.Op.BITCAST). Shape rule: src's."""
    assert (src.dtype, dtype) in BITCASTS, (src.dtype, dtype)
    return new_node(Op.BITCAST, (src,), dtype, (src.shape, dtype, src.device))


BITCASTS = {(np.dtype(a), np.dtype(b)) for a, b in ((np.float32, np.int32), (np.int32, np.float32),
                                                    (np.float64, np.int64), (np.int64, np.float64))}


def reduce(src: Node, op: Op, axes: tuple[int, ...], dtype: np.dtype) -> Node:
    """Reduction over `axes`. Shape rule: reduced dims are kept with size 1."""
    assert op in REDUCE
    shape = tuple(1 if d in axes else s for d, s in enumerate(src.shape))
    return new_node(Op.REDUCE, (cast(src, dtype),), (op, tuple(sorted(axes))), (shape, dtype, src.device))


def scan(src: Node, op: Op, axis: int, dtype: np.dtype) -> Node:
    """Inclusive scan (ops.SCANS) of `src` cast to `dtype` along `axis`. Shape rule: src's."""
    assert op in SCANS and 0 <= axis < len(src.shape), (op, axis, src.shape)
    return new_node(Op.SCAN, (cast(src, dtype),), (op, axis), (src.shape, dtype, src.device))


def gather(src: Node, index: Node, axis: int) -> Node:
    """src read at `index` along `axis` (see ops.Op.GATHER). Shape rule: index's; src and index
    have one rank and equal sizes off `axis` (the frontend broadcasts), index is an integer."""
    assert len(src.shape) == len(index.shape) and 0 <= axis < len(src.shape), (src.shape, index.shape, axis)
    assert all(a == b for d, (a, b) in enumerate(zip(src.shape, index.shape)) if d != axis), (src.shape, index.shape)
    assert index.dtype.kind in "iu" and src.shape[axis] > 0, (index.dtype, src.shape)
    return new_node(Op.GATHER, (src, index), axis, (index.shape, src.dtype, src.device))


def scatter(values: Node, slots: Node, op: Op, n_slots: int, parts: int) -> Node:
    """Rows of `values` combined by `op` (SUM, RMAX, RMIN) into `n_slots` slots (ops.Op.SCATTER).
    Shape rule: (parts, n_slots); values and slots are 1-d, of one length, a multiple of parts."""
    assert op in REDUCE and values.shape == slots.shape and len(values.shape) == 1, (op, values.shape, slots.shape)
    assert slots.dtype.kind in "iu" and parts >= 1 and values.shape[0] % parts == 0 and n_slots >= 1
    return new_node(Op.SCATTER, (values, slots), (op, n_slots, parts), ((parts, n_slots), values.dtype, values.device))


def sort(src: Node, spec: Any, dtype: np.dtype) -> Node:
    """The rows of `src` (its last dim; spec.rows of them) sorted by its device (ops.Op.SORT,
    specs.SortSpec). Shape rule: src's with spec.k on the last dim; dtype: src's for values,
    an integer for indices."""
    assert src.shape and src.shape[-1] == spec.n and 0 <= spec.k <= spec.n, (src.shape, spec)
    return new_node(Op.SORT, (src,), spec, (src.shape[:-1] + (spec.k,), dtype, src.device))


def fft(src: Node, spec: Any, axis: int) -> Node:
    """The discrete Fourier transform of `src` along `axis` by its device (ops.Op.FFT,
    specs.FftSpec: src's contiguous layout is (spec.outer, spec.n_in, spec.inner) around the
    axis). Shape rule: src's with spec.n_out on the axis; dtype: spec.dtype for a real output,
    else its complex dtype."""
    from .dtypes import complex_of

    shape = src.shape
    pairs = 2 if spec.packed else 1   # (a packed source: real, its pairs read as complex values)
    assert 0 <= axis < len(shape) and shape[axis] == spec.n_in * pairs, (shape, axis, spec)
    assert prod(shape[:axis]) == spec.outer and prod(shape[axis + 1:]) == spec.inner, (shape, axis, spec)
    assert src.dtype == (spec.dtype if spec.real_in or spec.packed else complex_of(spec.dtype)), (src.dtype, spec)
    dtype = spec.dtype if spec.real_out else complex_of(spec.dtype)
    return new_node(Op.FFT, (src,), spec, (shape[:axis] + (spec.n_out,) + shape[axis + 1:], dtype, src.device))


def attention(srcs: tuple[Node, ...], scale: float, causal: bool) -> Node:
    """softmax(q k^T * scale + mask) v by the device's fused attention (ops.Op.ATTENTION,
    specs.AttentionSpec): srcs (q (..., L, E), k (..., S, E), v (..., S, Ev)[, mask (..., L, S)]),
    one dtype and the same batch dims. Shape rule: (..., L, Ev)."""
    q, k, v = srcs[:3]
    batch = q.shape[:-2]
    assert k.shape[:-2] == v.shape[:-2] == batch and q.shape[-1] == k.shape[-1] and k.shape[-2] == v.shape[-2], srcs
    assert len(srcs) == 3 or srcs[3].shape == batch + (q.shape[-2], k.shape[-2]), srcs
    assert all(s.dtype == q.dtype for s in srcs), srcs
    return new_node(Op.ATTENTION, tuple(srcs), (float(scale), bool(causal)),
                    (batch + (q.shape[-2], v.shape[-1]), q.dtype, q.device))


def matmul(a: Node, b: Node, dtype: np.dtype) -> Node:
    """Shape rule: (..., M, K) @ (..., K, N) -> (..., M, N); batch dims already equal."""
    assert a.shape[:-2] == b.shape[:-2] and a.shape[-1] == b.shape[-2], (a.shape, b.shape)
    shape = a.shape[:-1] + (b.shape[-1],)
    return new_node(Op.MATMUL, (cast(a, dtype), cast(b, dtype)), None, (shape, dtype, a.device))


def custom(fn: Callable[..., Any], srcs: tuple[Node, ...], shape: tuple[int, ...], dtype: np.dtype, device: str) -> Node:
    return new_node(Op.CUSTOM, srcs, fn, (tuple(shape), dtype, device))


def copy(src: Node, device: str) -> Node:
    return new_node(Op.COPY, (src,), None, (src.shape, src.dtype, device))


def assign(target: Node, value: Node, region: View | None) -> Node:
    """Write `value` into `target` (all of it, or `region`, a View over target's layout)."""
    assert value.shape == (region.shape if region is not None else target.shape)
    return new_node(Op.ASSIGN, (target, value), region, target.sig)
