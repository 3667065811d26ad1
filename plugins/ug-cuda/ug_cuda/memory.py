"""Device memory: raw cuMemAlloc/cuMemFree allocations and stream-ordered copies, the kit's
`Allocator` that the core's pool (ug_core.kit.CachingAllocator) wraps: out of memory, the pool
gives its free blocks back and asks once more.

The pool may hand a freed block to a new buffer at once, while kernels queued before the free
still use it: that is safe because every use of memory is queued on the one stream, so later
work runs after them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ug_core.kit import Allocator

from .driver import Context


class Allocation:
    """A device allocation (a Buffer's handle): `ptr` is the device address as an int. `owner`
    keeps foreign memory (wrapped by ug_cuda.interop, never freed by ug) alive; None for ug's."""

    __slots__ = ("ptr", "owner")

    def __init__(self, ptr: int, owner: Any = None):
        self.ptr = ptr
        self.owner = owner

    def __repr__(self) -> str:
        return f"<Allocation {self.ptr:#x}>"

    # the same memory is the same allocation (the kit's check for a buffer passed twice to one
    # launch: foreign memory wrapped twice is two Allocations)
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Allocation) and other.ptr == self.ptr

    def __hash__(self) -> int:
        return hash(self.ptr)


class CudaAllocator(Allocator):
    # size classes of multiples of 512 B up to 64 KiB (then 8 per power of two): few classes
    # of small blocks to reuse, and cuMemAlloc aligns every block to 256 B or more anyway
    alignment = 512

    def __init__(self, context: Context):
        self.context = context

    def alloc(self, nbytes: int) -> Allocation:
        ctx = self.context
        ctx.current()
        err, ptr = ctx.drv.cuMemAlloc(nbytes)
        if int(err) == int(ctx.drv.CUresult.CUDA_ERROR_OUT_OF_MEMORY):
            raise MemoryError(f"CUDA out of memory allocating {nbytes} bytes on {ctx.gpu_name}")
        ctx.check((err,), "cuMemAlloc")
        return Allocation(int(ptr))

    def free(self, handle: Allocation) -> None:
        self.context.synchronize()  # kernels queued on the stream may still use it
        self.context.check(self.context.drv.cuMemFree(handle.ptr), "cuMemFree")

    def copy_in(self, handle: Allocation, src: np.ndarray) -> None:
        src = np.ascontiguousarray(src)
        ctx = self.context
        ctx.current()
        # pageable source: the call returns once the data is staged, so `src` may go away after it
        ctx.check(ctx.drv.cuMemcpyHtoDAsync(handle.ptr, src.ctypes.data, src.nbytes, ctx.stream), "cuMemcpyHtoDAsync")

    def copy_out(self, handle: Allocation, dst: np.ndarray) -> None:
        """Queued after the work that computes it; returns when `dst` holds the data."""
        assert dst.flags.c_contiguous
        ctx = self.context
        ctx.current()
        ctx.check(ctx.drv.cuMemcpyDtoHAsync(dst.ctypes.data, handle.ptr, dst.nbytes, ctx.stream), "cuMemcpyDtoHAsync")
        ctx.synchronize()

    def copy_device(self, dst: int, src: int, nbytes: int) -> None:
        ctx = self.context
        ctx.current()
        ctx.check(ctx.drv.cuMemcpyDtoDAsync(dst, src, nbytes, ctx.stream), "cuMemcpyDtoDAsync")
