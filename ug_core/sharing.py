"""Memory ug shares with other libraries, and which reads of it are snapshots.

Two ways memory becomes shared: `asarray(np_array)` (and `from_dlpack`) without a copy lends ug
another library's memory (device.LentBuffer), and a DLPack export of a tensor on a host-memory
device (`np.from_dlpack(t)`, `torch.from_dlpack(t)`) lends the tensor's buffer out. Either way,
code outside ug may then write that memory at any time, which ug's graph cannot see; such a
buffer is `exposed` (device.Buffer.exposed). The rules (docs/array-api.md, "Shared memory"):

- a copy (`ug.tensor(t)`, `asarray(t, copy=True)`, `astype(t, t.dtype, copy=True)`,
  `copy.copy`/`copy.deepcopy`) is a snapshot: its value is t's value at the call, whatever is
  written later, through ug or outside it. Where t's value is (or is computed from) exposed
  memory, the copy is made at once (`snapshot_node`); otherwise it stays lazy, since nothing
  but ug can change what it reads and ug's writes never change a value made before them.
- an export lends only memory that no other ug value reads: a tensor whose buffer another
  tensor or a lazy value still reads moves to a copy of it first (`needs_private_copy`), so
  values made before the export never see writes made through it; memory exposed already
  (another library's, or exported before) is lent as it is, since its readers see outside
  writes anyway (and a tensor over a numpy array keeps sharing it).
- any other lazy value reads shared memory when it is computed: `u = asarray(a) * 2; a[0] = 5`
  shows in `u` unless `u` was computed (or copied) before the write, as documented.
- read-only memory ug is lent (`flags.writeable` False) is never written (LentBuffer.writable).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import graph
from .device import Buffer, is_exposed

__all__ = ["copy_buffer", "host_array", "is_exposed", "needs_private_copy", "reads_exposed", "snapshot_node"]
from .graph import Node
from .execute import realize_nodes


def reads_exposed(node: Node) -> bool:
    """Whether node's value is, or is computed (lazily) from, a buffer outside code may write."""
    stack, seen = [node], set()
    while stack:  # iterative: graphs can be deep
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.buffer is not None:
            if is_exposed(n.buffer):
                return True
            continue
        stack.extend(n.srcs)
    return False


def snapshot_node(node: Node, tracing: bool = False) -> Node:
    """A node holding node's value as it is now (the copy rule above): node itself where nothing
    outside ug can change what it reads, else a copy made now (node is computed first if it is
    lazy). While ug.jit traces (`tracing`), values have no memory yet: node itself."""
    if node.buffer is None:
        if tracing or not reads_exposed(node):
            return node
        realize_nodes([node])
        assert node.buffer is not None
    if not is_exposed(node.buffer):
        return node
    return graph.from_buffer(copy_buffer(node.buffer), node.shape)


def copy_buffer(buffer: Buffer) -> Buffer:
    """A new buffer of the device holding a copy of `buffer` now: one memcpy where the device's
    memory is the host's (the only devices whose buffers are ever exposed), else through the host."""
    out = Buffer(buffer.device, buffer.size, buffer.dtype)
    if buffer.size:
        src = buffer.device.host_view(buffer.handle, buffer.nbytes)
        dst = out.device.host_view(out.handle, out.nbytes)
        if src is not None and dst is not None:
            dst[...] = src
        else:
            out.copy_in(buffer.numpy())
    return out


def needs_private_copy(holder: Any, node: Node) -> bool:
    """Whether anything other than `holder` (the tensor about to lend out node's buffer) may
    read node's value later: another tensor holding it, a ug.jit output known by its id
    (Node._creator), or a lazy node reading it."""
    if node._creator and node._creator != id(holder):
        return True
    for reader in node.readers():
        if reader is holder:
            continue
        if isinstance(reader, Node):
            if not reader.realized:
                return True
        elif reader._holds(node):
            return True
    return False


def host_array(array: np.ndarray) -> np.ndarray:
    """A numpy array as ug takes it in: in the machine's byte order (a big-endian array, as
    files often hold, is byte-swapped: a copy), other arrays as they are."""
    if not array.dtype.isnative:
        return array.astype(array.dtype.newbyteorder("="))
    return array
