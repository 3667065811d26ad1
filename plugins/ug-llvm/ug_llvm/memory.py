"""The cpu device's raw memory: 64-byte aligned host blocks that are their own addresses.

The kit's CachingAllocator pools them (ug_core.kit.allocator); this is only how one is made
and copied to and from.
"""

from __future__ import annotations

import numpy as np

from ug_core.kit import Allocator, Buffer


class Block(int):
    """One aligned host allocation, which is an int: its address. A kernel's argument for a
    buffer is that address, so a launch packs the buffers' handles as they are, with no
    attribute read per argument (ug.jit replays of tiny kernels pay for every one). The block
    holds its memory: `raw`, and `array`, the aligned `capacity` bytes in it; `ptr` is the
    address as a plain int. (Attributes in a __dict__: an int subclass can have no __slots__.)"""

    raw: np.ndarray
    array: np.ndarray
    ptr: int
    capacity: int

    def __new__(cls, capacity: int, align: int) -> "Block":
        raw = np.empty(capacity + align, dtype=np.uint8)
        offset = (-raw.ctypes.data) % align
        ptr = raw.ctypes.data + offset
        block = super().__new__(cls, ptr)
        block.raw = raw
        block.array = raw[offset:offset + capacity]
        block.ptr = ptr
        block.capacity = capacity
        return block

    @classmethod
    def lend(cls, array: np.ndarray) -> "Block":
        """A block over a C-contiguous host array's memory (kept alive by the block)."""
        ptr = array.ctypes.data
        block = super().__new__(cls, ptr)
        block.raw = array
        block.array = array.reshape(-1).view(np.uint8)
        block.ptr = ptr
        block.capacity = array.nbytes
        return block

    def __repr__(self) -> str:
        return f"<Block {self.capacity} bytes at {self.ptr:#x}>"


class HostAllocator(Allocator):
    """Blocks of host memory (numpy's), at the alignment of the widest vector loads."""

    alignment = 64

    def alloc(self, nbytes: int) -> Block:
        return Block(nbytes, self.alignment)

    def free(self, handle: Block) -> None:
        """Nothing to do: numpy frees the block's memory with its last reference."""

    def copy_in(self, handle: Block, src: np.ndarray) -> None:
        handle.array[: src.nbytes] = src.reshape(-1).view(np.uint8)

    def copy_out(self, handle: Block, dst: np.ndarray) -> None:
        dst.reshape(-1).view(np.uint8)[...] = handle.array[: dst.nbytes]

    def host_view(self, handle: Block, nbytes: int) -> np.ndarray:
        return handle.array[:nbytes]

    def wrap_host(self, array: np.ndarray) -> Block | None:
        if not array.flags.aligned:
            return None  # kernels load whole elements (at element alignment; views start anywhere)
        return Block.lend(array)


def array_of(buffer: Buffer) -> np.ndarray:
    """The buffer's elements as a flat typed numpy array (no copy)."""
    return buffer.handle.array[: buffer.size * buffer.dtype.itemsize].view(buffer.dtype)
