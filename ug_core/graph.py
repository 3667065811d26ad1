"""The lazy graph: immutable nodes, one constructor per op kind, each with its shape rule.

A Node never changes what it computes. The one thing that changes is `buffer`: once a
node has been realized, the scheduler stores the device buffer holding its value and
drops its sources, so that later graphs built on it just load the buffer.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .ops import ALU, REDUCE, Op
from .view import View, chain_push

if TYPE_CHECKING:
    from .device import Buffer


class Node:
    __slots__ = ("op", "srcs", "arg", "shape", "dtype", "device", "sig", "buffer", "_readers", "_creator", "__weakref__")

    def __init__(self, op: Op, srcs: tuple["Node", ...], arg: Any, shape: tuple[int, ...], dtype: np.dtype, device: str):
        self.op = op
        self.srcs = srcs
        self.arg = arg
        self.shape = shape
        self.dtype = dtype
        self.device = device
        # (shape, dtype, device) as one tuple: what ug.jit keys a tensor argument by, read on
        # every call (one attribute instead of three and a new tuple)
        self.sig = (shape, dtype, device)
        self.buffer: Buffer | None = None
        # who reads this node's value (nodes and tensors); assign uses it to decide
        # whether writing into this node's buffer in place would be seen by an earlier read
        # (weak references in a list: cheap to create, and a WeakSet would compare tensors
        # with their elementwise ==)
        self._readers: list[weakref.ref[Any]] = []
        # the id of a tensor made together with this node that is not in `_readers` (ug.jit
        # replay outputs, see Tensor._maker: a weak reference costs more than the rest of the
        # output), until it moves on to another node (Tensor._replace_node); 0: none. Its id is
        # all the node knows of it, so assign takes it for a live reader of this node meanwhile.
        self._creator = 0
        if srcs:
            ref = weakref.ref(self)  # one reference object serves every source's list
            for src in srcs:
                src._add_reader_ref(ref)

    def add_reader(self, reader: Any) -> None:
        self._add_reader_ref(weakref.ref(reader))

    def _add_reader_ref(self, ref: weakref.ref[Any]) -> None:
        readers = self._readers
        readers.append(ref)
        n = len(readers)
        if n >= 64 and (n & (n - 1)) == 0:  # prune dead refs now and then
            readers[:] = [r for r in readers if r() is not None]

    def readers(self) -> list[Any]:
        """The live nodes and tensors that read this node's value."""
        return [obj for obj in (r() for r in self._readers) if obj is not None]

    @property
    def realized(self) -> bool:
        return self.buffer is not None

    def set_buffer(self, buffer: "Buffer") -> None:
        self.buffer = buffer
        self.srcs = ()

    def __repr__(self) -> str:
        name = self.op.name if self.op is not Op.REDUCE else f"REDUCE_{self.arg[0].name}"
        state = " realized" if self.realized else ""
        return f"<{name} {self.shape} {self.dtype.name} {self.device}{state} #{id(self) & 0xFFFF:04x}>"


def const(value: Any, dtype: np.dtype, device: str, shape: tuple[int, ...] = ()) -> Node:
    node = Node(Op.CONST, (), dtype.type(value).item(), (), dtype, device)
    return view(node, View(tuple(shape), (0,) * len(shape), 0)) if shape else node


def from_buffer(buffer: "Buffer", shape: tuple[int, ...]) -> Node:
    node = Node(Op.BUFFER, (), None, tuple(shape), buffer.dtype, buffer.device_name)
    node.buffer = buffer
    return node


def buffer_node(buffer: "Buffer", shape: tuple[int, ...], device: str) -> Node:
    """`from_buffer` for callers that already have the shape as a tuple and the device's name
    (ug.jit replays: this runs once per returned tensor per call)."""
    # what Node(Op.BUFFER, (), None, shape, buffer.dtype, device) does, minus the call into
    # __init__ and its loop over (no) sources
    node = Node.__new__(Node)
    node.op, node.srcs, node.arg, node.shape, node.dtype, node.device = Op.BUFFER, (), None, shape, buffer.dtype, device
    node.sig = (shape, buffer.dtype, device)
    node.buffer = buffer
    node._readers = []
    node._creator = 0
    return node


def view(src: Node, v: View) -> Node:
    """Read `src` through `v` (which indexes src's contiguous layout)."""
    # a loop, not a recursion: a view of a view merges into one and is tried on the next one
    # down, and a chain of views that did not merge can be long
    while True:
        if v.shape == src.shape and v.is_contiguous:
            return src
        if src.op is not Op.VIEW or src.realized:
            break
        merged = chain_push((v,), src.arg)
        if len(merged) != 1:
            break
        src, v = src.srcs[0], merged[0]
    return Node(Op.VIEW, (src,), v, v.shape, src.dtype, src.device)


def alu(op: Op, srcs: tuple[Node, ...], dtype: np.dtype) -> Node:
    """Elementwise op. Shape rule: all operands already have one shape (the frontend broadcasts)."""
    assert op in ALU and ALU[op].arity == len(srcs), op
    first = srcs[0]
    shape = first.shape
    for src in srcs:
        assert src.shape == shape, [s.shape for s in srcs]
    return Node(op, srcs, None, shape, dtype, first.device)


def cast(src: Node, dtype: np.dtype) -> Node:
    if src.dtype == dtype:
        return src
    if src.op is Op.CONST:
        return const(src.arg, dtype, src.device)
    return Node(Op.CAST, (src,), dtype, src.shape, dtype, src.device)


def reduce(src: Node, op: Op, axes: tuple[int, ...], dtype: np.dtype) -> Node:
    """Reduction over `axes`. Shape rule: reduced dims are kept with size 1."""
    assert op in REDUCE
    shape = tuple(1 if d in axes else s for d, s in enumerate(src.shape))
    return Node(Op.REDUCE, (cast(src, dtype),), (op, tuple(sorted(axes))), shape, dtype, src.device)


def matmul(a: Node, b: Node, dtype: np.dtype) -> Node:
    """Shape rule: (..., M, K) @ (..., K, N) -> (..., M, N); batch dims already equal."""
    assert a.shape[:-2] == b.shape[:-2] and a.shape[-1] == b.shape[-2], (a.shape, b.shape)
    shape = a.shape[:-1] + (b.shape[-1],)
    return Node(Op.MATMUL, (cast(a, dtype), cast(b, dtype)), None, shape, dtype, a.device)


def custom(fn: Callable[..., Any], srcs: tuple[Node, ...], shape: tuple[int, ...], dtype: np.dtype, device: str) -> Node:
    return Node(Op.CUSTOM, srcs, fn, tuple(shape), dtype, device)


def copy(src: Node, device: str) -> Node:
    return Node(Op.COPY, (src,), None, src.shape, src.dtype, device)


def assign(target: Node, value: Node, region: View | None) -> Node:
    """Write `value` into `target` (all of it, or `region`, a View over target's layout)."""
    assert value.shape == (region.shape if region is not None else target.shape)
    return Node(Op.ASSIGN, (target, value), region, target.shape, target.dtype, target.device)
