"""Values out of the lazy graph: ug.realize (several tensors, one schedule), a tensor's value on
the host (numpy(), item(), bool()/int()/float()/complex(), numpy's __array__) and DLPack export,
which lends a host-memory device's buffer itself."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import graph, sharing
from .execute import realize_nodes
from .graph import Node
from .memory import read_item
from .ops import Op
from .tensor import Scalar, Tensor, TensorView, before_read, tracing, write_lock


def nodes_of(tensors: tuple[Any, ...]) -> list[Any]:
    """The nodes of the tensors given (nested in lists and tuples); anything else is a TypeError."""
    nodes = []
    for t in tensors:
        if isinstance(t, (list, tuple)):
            nodes += nodes_of(tuple(t))
        elif isinstance(t, Tensor):
            nodes.append(t.node)
        else:
            raise TypeError(f"expected tensors, got {type(t).__name__}")
    return nodes


def realize(*tensors: Tensor) -> Any:
    """Compute several tensors with one schedule (shared work is done once).

    While ug.jit traces a function (on this thread) it does nothing: the tensors stay lazy and
    the trace computes them (see ug_core.jit)."""
    nodes = nodes_of(tensors)
    if not tracing():
        graph.note_thread()
        realize_nodes(nodes)
        _keep_views(tensors)
    return tensors[0] if len(tensors) == 1 else tensors


def _keep_views(tensors: tuple[Any, ...]) -> None:
    """Views keep the value just computed for them (TensorView.realize: done already, so cheap)."""
    for t in tensors:
        if isinstance(t, (list, tuple)):
            _keep_views(tuple(t))
        elif isinstance(t, TensorView):
            t.realize()


class _BufferArray:
    """A numpy array interface over a buffer's memory that holds the buffer: np.asarray of it
    is an array whose base keeps the buffer from being freed (and its memory reused)."""

    def __init__(self, array: np.ndarray, buffer: Any):
        self.__array_interface__ = array.__array_interface__
        self.array, self.buffer = array, buffer


def numpy(self: Tensor) -> np.ndarray:
    before_read(self)   # (raises for a value a jitted function's trace does not have)
    buf = self._realized().buffer
    assert buf is not None
    return buf.numpy().reshape(self.shape)


def __array__(self: Tensor, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
    arr = self.numpy()
    return arr.astype(dtype) if dtype is not None else arr


def item(self: Tensor) -> Scalar:
    if self.size != 1:
        raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
    if not tracing():
        _realize_with_held(self)
    before_read(self)   # (numpy()'s, without its copy into a new array: see memory.read_item)
    buf = self._realized().buffer
    assert buf is not None
    return read_item(buf)


HELD_WALK_MAX = 256
"""The most lazy nodes `_realize_with_held` looks through above a scalar for held values."""


_LEAVES = (Op.CONST, Op.IOTA)


def _realize_with_held(t: Tensor) -> None:
    """Realize the one-element t (bool(), float(), item(): a value Python branches on) together
    with the lazy values above it that live tensors hold. Code that tests a value computed from
    others (`if not xp.any(mask): ...`, `if xp.all(x == 0)`) goes on to use those others; realized
    now, in the same schedule, they are buffers the next realize reads, not a graph it computes
    again (and compiles again, within a larger graph) from their sources. Only held values: an
    intermediate nothing holds stays fused, as before. The walk is bounded (HELD_WALK_MAX)."""
    graph.note_thread()
    with write_lock:   # (as Tensor._realized: no write between taking the nodes and realizing)
        node = t._node
        if node.buffer is not None:
            return
        held: list[Node] = []
        stack, seen = list(node.srcs), {id(node)}
        while stack and len(seen) < HELD_WALK_MAX:
            n = stack.pop()
            if n.buffer is not None or id(n) in seen:
                continue
            seen.add(id(n))
            stack.extend(n.srcs)
            if n.op in _LEAVES or (n.op is Op.VIEW and n.srcs[0].op in _LEAVES):
                continue   # (a constant or index vector, broadcast or not: nothing to compute)
            for r in n.readers():   # (no list for a node's one reader: graph.Node._readers)
                if type(r) is not Node and isinstance(r, Tensor) and r._holds(n):
                    held.append(n)
                    break
        if held:
            realize_nodes([node, *held])


def __bool__(self: Tensor) -> bool:
    if self.size != 1:
        raise ValueError(f"the truth value of a tensor with shape {self.shape} is ambiguous")
    return bool(self.item())


def _python_scalar(self: Tensor, kind: str) -> Scalar:
    """The one element, for int()/float()/complex()/operator.index(): numpy's TypeError
    for a tensor of another size (bool() keeps its ValueError, as numpy's does)."""
    if self.size != 1:
        raise TypeError(f"only tensors with one element can be converted to Python {kind}s, "
                        f"this one has shape {self.shape}")
    return self.item()


def __float__(self: Tensor) -> float:
    return float(_python_scalar(self, "float"))


def __int__(self: Tensor) -> int:
    return int(_python_scalar(self, "int"))


def __complex__(self: Tensor) -> complex:
    return complex(_python_scalar(self, "complex"))


def __index__(self: Tensor) -> int:
    """Only integer tensors are indices (the Array API standard; numpy agrees)."""
    if self.dtype.kind not in "iu":
        raise TypeError(f"only integer tensors can be used as an index, this one is {self.dtype.name}")
    return int(_python_scalar(self, "int"))


def __dlpack__(self: Tensor, *, stream: Any = None, max_version: tuple[int, int] | None = None,
               dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
    """A DLPack capsule of the value, realized, in host memory: the tensor's own buffer on a
    host-memory device (cpu, c, ref; the capsule keeps it alive, and a write through it
    changes this tensor only: see _host_memory), else a copy (copy=False then raises
    BufferError). Read-only memory (asarray of a read-only numpy array) is exported
    read-only, or copied for a consumer older than DLPack 1.0, which cannot be told."""
    if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
        raise BufferError(f"ug tensors export to the CPU (DLPack device (1, 0)) only, not {dl_device}")
    lent = None if copy else self._host_memory()
    if lent is None:
        if copy is False and self.size:   # (an empty tensor has no memory to share or copy)
            raise BufferError(f"device {self.device!r} does not keep its buffers in host memory: "
                              f"DLPack export copies (copy=False cannot be honoured)")
        lent = self.numpy()
    try:
        return lent.__dlpack__(max_version=max_version)
    except BufferError:
        if lent.flags.writeable or copy is False:
            raise
        return self.numpy().__dlpack__(max_version=max_version)


def _host_memory(self: Tensor) -> np.ndarray | None:
    """The value as a numpy array sharing the buffer's memory (which it keeps alive), on a
    device whose memory is the host's; else None. The memory is lent out (`exposed`, see
    sharing): code outside ug may write it from now on. Where another ug value still reads
    that buffer (a tensor holding the same value, a lazy result built on it) and it was not
    exposed before, this tensor first moves to a copy of it, so writes through the export
    change this tensor only."""
    before_read(self)   # (raises for a value a jitted function's trace does not have)
    node = self._realized()
    buf = node.buffer
    assert buf is not None
    if not buf.size or buf.device.host_view(buf.handle, buf.nbytes) is None:
        return None
    if tracing():
        # a trace's tensors may not move to another node: lend a copy, which nothing else
        # reads (a TensorView lends its base's memory, see TensorView._host_memory)
        buf = sharing.copy_buffer(buf)
    elif not sharing.is_exposed(buf) and sharing.needs_private_copy(self, node):
        # (memory outside code may write already, another library's, is lent as it is: its
        # readers see such writes anyway, and asarray's sharing with its owner stays)
        buf = sharing.copy_buffer(buf)
        self._replace_node(graph.from_buffer(buf, self.shape))
    buf.exposed = True
    raw = buf.device.host_view(buf.handle, buf.nbytes)
    assert raw is not None
    return np.asarray(_BufferArray(raw.view(buf.dtype).reshape(self.shape), buf))


def __dlpack_device__(self: Tensor) -> tuple[int, int]:
    """(kDLCPU, 0): where __dlpack__'s data lives, whatever device holds the tensor."""
    return (1, 0)
