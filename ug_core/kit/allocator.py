"""Device memory for kit backends: the backend's raw `Allocator`, and the core's pool around it.

A backend says how to get and give back device memory and how to copy to and from it; the
core keeps freed allocations by size class for reuse (a kernel's outputs are mostly the sizes
of the last call's) and answers ug.memory_stats. One pool for every backend.
"""

from __future__ import annotations

import abc
import functools
import threading
from collections import deque
from typing import Any, Callable

import numpy as np

from ..env import env_int


class Allocator(abc.ABC):
    """What a backend supplies: raw allocations of at least `nbytes` bytes, and copies."""

    alignment: int = 64   # bytes; every size class is a multiple of it

    @abc.abstractmethod
    def alloc(self, nbytes: int) -> Any: ...

    @abc.abstractmethod
    def free(self, handle: Any) -> None: ...

    @abc.abstractmethod
    def copy_in(self, handle: Any, src: np.ndarray) -> None:
        """Copy the contiguous host array `src` to the start of the allocation."""

    def host_view(self, handle: Any, nbytes: int) -> np.ndarray | None:
        """Device.host_view: the allocation's memory as a numpy uint8 array, for host memory."""
        return None

    def wrap_host(self, array: np.ndarray) -> Any | None:
        """Device.wrap_host: a handle over a C-contiguous host array's memory, or None."""
        return None

    @abc.abstractmethod
    def copy_out(self, handle: Any, dst: np.ndarray) -> None:
        """Copy the start of the allocation into the contiguous host array `dst`."""


class NumpyAllocator(Allocator):
    """Host memory as aligned numpy byte arrays (handles: the arrays; `h.ctypes.data` is the
    address), for backends whose kernels run on the host's own memory."""

    def alloc(self, nbytes: int) -> np.ndarray:
        raw = np.empty(nbytes + self.alignment, np.uint8)
        start = (-raw.ctypes.data) % self.alignment
        return raw[start:start + nbytes]

    def free(self, handle: np.ndarray) -> None:
        pass  # numpy frees it with the last reference

    def copy_in(self, handle: np.ndarray, src: np.ndarray) -> None:
        handle[: src.nbytes] = src.reshape(-1).view(np.uint8)

    def copy_out(self, handle: np.ndarray, dst: np.ndarray) -> None:
        dst.reshape(-1).view(np.uint8)[...] = handle[: dst.nbytes]

    def host_view(self, handle: np.ndarray, nbytes: int) -> np.ndarray:
        return handle[:nbytes]

    def wrap_host(self, array: np.ndarray) -> np.ndarray | None:
        if not array.flags.aligned:
            return None  # C code reads whole elements
        return array.reshape(-1).view(np.uint8)


SMALL_CLASS = 1 << 16
"""Sizes up to this are kept without limit (few bytes each, made on every small call)."""
MAX_REMEMBERED_SIZES = 4096


class CachingAllocator:
    """Freed allocations by size class, reused before the backend allocates again.

    A size class is the size rounded up to the alignment, then, past SMALL_CLASS, to an eighth
    of its power of two (so a pooled block is at most 12.5% larger than asked). Pooled bytes of
    the larger classes are capped (`$UG_POOL_CACHE_MB`, default 1024): past it, a freed block
    goes back to the backend. deque.pop/append are atomic under the GIL, so the common path
    takes no lock: free may run from any thread's Buffer.__del__. An allocation the backend
    refuses (MemoryError) is asked for once more after the pool's free blocks went back to it.
    A freed block is reused at once, by the next allocation of its size class: a backend whose
    launches run asynchronously must order that reuse after the work queued before the free
    (one stream or queue does: ug-cuda, ug-vulkan)."""

    def __init__(self, raw: Allocator, cache_bytes: int | None = None):
        self.raw = raw
        self.cache_bytes = env_int("UG_POOL_CACHE_MB", 1024, minimum=0) << 20 if cache_bytes is None else cache_bytes
        self._free: dict[int, deque[Any]] = {}
        self._capacity: dict[int, int] = {}   # id(handle) -> its size class, for every live handle
        self._classes: dict[int, int] = {}    # nbytes -> size class, of the sizes asked for lately
        self._pooled_large = 0
        self.allocated = 0                     # bytes of every live handle, pooled or in use
        self._lock = threading.Lock()

    def size_class(self, nbytes: int) -> int:
        align = self.raw.alignment
        size = max(-(-nbytes // align) * align, align)
        if size > SMALL_CLASS:
            step = max(1 << (size.bit_length() - 4), align)
            size = -(-size // step) * step
        return size

    def _class_of(self, nbytes: int) -> int:
        """size_class(nbytes), remembered: allocate runs for every buffer, mostly of sizes seen before."""
        if len(self._classes) >= MAX_REMEMBERED_SIZES:
            self._classes.clear()
        capacity = self._classes[nbytes] = self.size_class(nbytes)
        return capacity

    def _pool(self, capacity: int) -> deque[Any]:
        blocks = self._free.get(capacity)
        if blocks is None:
            blocks = self._free.setdefault(capacity, deque())  # one deque even when threads race
        return blocks

    # allocate and free run for every buffer (free from its __del__), so their common paths are
    # written out rather than calling the helpers above
    def allocate(self, nbytes: int) -> Any:
        capacity = self._classes.get(nbytes) or self._class_of(nbytes)
        blocks = self._free.get(capacity)
        if blocks:
            try:
                handle = blocks.pop()
            except IndexError:  # another thread took the last one since the check
                pass
            else:
                if capacity > SMALL_CLASS:
                    self._pooled_large -= capacity
                return handle
        return self._new(capacity)

    def _new(self, capacity: int) -> Any:
        try:
            handle = self.raw.alloc(capacity)
        except MemoryError:   # blocks of other sizes the pool keeps may be what is missing
            self.empty_cache()
            try:
                handle = self.raw.alloc(capacity)
            except MemoryError as e:
                raise MemoryError(f"{e} (after giving the pool's free blocks back)") from None
        with self._lock:
            self._capacity[id(handle)] = capacity
            self.allocated += capacity
        return handle

    def free(self, handle: Any) -> None:
        capacity = self._capacity[id(handle)]
        if capacity > SMALL_CLASS:
            if self._pooled_large + capacity > self.cache_bytes:
                self._release(handle, capacity)
                return
            self._pooled_large += capacity
        blocks = self._free.get(capacity)
        (blocks if blocks is not None else self._pool(capacity)).append(handle)

    def _release(self, handle: Any, capacity: int) -> None:
        with self._lock:
            del self._capacity[id(handle)]
            self.allocated -= capacity
        self.raw.free(handle)

    def handle_allocator(self, nbytes: int) -> tuple[Callable[[], Any], Callable[[], Any], Callable[[Any], None]]:
        """(take, allocate, free) for one size (see Device.handle_allocator): a small class's
        free list's own pop and append, so a ug.jit replay pays no Python frame for them."""
        capacity = self.size_class(nbytes)
        if capacity > SMALL_CLASS:
            allocate = functools.partial(self.allocate, nbytes)
            return allocate, allocate, self.free
        blocks = self._pool(capacity)
        return blocks.pop, functools.partial(self._new, capacity), blocks.append

    def after_fork(self) -> None:
        """In a forked child: a new lock (another thread of the parent may have held it)."""
        self._lock = threading.Lock()

    def pool_bytes(self) -> int:
        return sum(capacity * len(blocks) for capacity, blocks in list(self._free.items()))

    def memory_usage(self) -> int:
        return self.allocated - self.pool_bytes()

    def empty_cache(self) -> None:
        """Give every pooled block back to the backend."""
        for capacity, blocks in list(self._free.items()):
            while True:
                try:
                    handle = blocks.pop()
                except IndexError:
                    break
                if capacity > SMALL_CLASS:
                    self._pooled_large -= capacity
                self._release(handle, capacity)
