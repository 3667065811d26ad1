"""Running compiled kernels: on the calling thread, or with their range split over the pool.

A kernel module has two entries: `void k(i8** args, i64 start, i64 end)` (a range of global
ids, what the threads run) and `void k.all(i8** args)` (the whole range, on this thread). The
argument is an array of the buffers' addresses, which are the buffers' handles (memory.Block).

A launch works out what it can once per program (the argument packer, serial or parallel, the
entry: `CPURuntime.launcher`, the kit's Runtime fast path) and keeps the per-call path to reading
the handles, packing them and one ctypes call: ug.jit replays of tiny kernels are dominated by
it. (The kit picks the entry: the module without `noalias` where one buffer is passed twice.) A parallel launch splits the range into
chunks whose boundaries are multiples of CHUNK_ALIGN, so each thread runs the same
vector/scalar split as a single thread would (same bits for any thread count).
"""

from __future__ import annotations

import ctypes
import math
import struct
from typing import Any, Callable

from ug_core.kit import LoopProgram, Opc, Runtime, defer_interrupts, index_bound

from . import settings
from .fastcall import FastLaunch
from .jit import LLVMError
from .pool import SpinPool

CHUNK_ALIGN = 64
CHUNKS_PER_THREAD = 4  # ranges per pool thread in a parallel launch (see CPURuntime.run_parallel)

_KERNEL_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
# the kernel's `.all` entry (the whole range; one argument: the pointer array) without argtypes:
# a call skips ctypes' per-argument converters, and the one argument (the array as bytes, which
# ctypes passes as a char*) is cheaper to convert than three (together about 3/4 of the cost of
# calling a tiny kernel through _KERNEL_FN)
_WHOLE_FN = ctypes.CFUNCTYPE(None)
# the same, called with the GIL held: for a kernel below HOLD_GIL_WORK releasing and retaking
# the GIL costs more than running it, and other threads wait at most about a microsecond
_WHOLE_FN_GIL = ctypes.PYFUNCTYPE(None)
HOLD_GIL_WORK = 1 << 12


def work_per_index(program: LoopProgram) -> int:
    """Memory accesses and ALU ops per global index, loops weighted by their trip counts."""
    work = 0
    weight, steps = [1], [1]
    for inst in program.instructions:
        if inst.opc is Opc.RANGE:
            start, end = inst.srcs
            bound = index_bound(end, program.global_size)
            if start.opc is Opc.CONST and bound is not None:
                trips = -(-(bound - start.arg) // inst.arg)
            else:  # a blocked inner loop (start .. min(start + block, e)): the enclosing loop's step
                trips = steps[-1]
            weight.append(weight[-1] * max(trips, 1))
            steps.append(inst.arg)
        elif inst.opc is Opc.ENDRANGE:
            weight.pop()
            steps.pop()
        elif inst.opc in (Opc.LOAD, Opc.STORE, Opc.ALU, Opc.CAST):
            work += weight[-1]
    return max(work, 1)


def kernel_work(program: LoopProgram) -> int:
    """Weighted element visits of the whole program (what decides threads and the GIL)."""
    return math.prod(program.global_size) * work_per_index(program)


class CompiledKernel:
    """A loaded kernel: its entries' addresses (`ranged`: entry(args, start, end), for the
    threads and native callers such as the gemm's epilogue; `whole`: entry(args)) and what a
    launch needs to split its range."""

    def __init__(self, program: LoopProgram, ranged: int, whole: int):
        self.program = program
        self.global_size = 0 if program.is_empty else math.prod(program.global_size)
        self.work = kernel_work(program)
        self.ranged, self.whole = ranged, whole


def packer(k: CompiledKernel) -> Callable[..., bytes]:
    """handles (addresses) -> the kernel's argument array. A packed bytes object is such an
    array (ctypes passes a pointer to its data) and is far cheaper to build than a ctypes
    array. A kernel without arguments gets one null pointer: never an empty array."""
    nargs = len(k.program.params)
    if nargs == 0:
        pack0 = struct.pack("P", 0)
        return lambda *handles: pack0
    return struct.Struct(f"{nargs}P").pack


def _launch_nothing(args: bytes) -> None:
    """The launch of a kernel with an empty range."""


class CPURuntime(Runtime):
    """Loads kernels into the process's LLVM engine (jit.Jit) and runs them on this thread or
    on a pool of `threads - 1` workers (pool.SpinPool)."""

    load_errors = (LLVMError,)

    def __init__(self, jit: Any, threads: int):
        self.jit = jit
        self.threads = threads
        self.pool = SpinPool(jit, threads - 1) if threads > 1 else None
        self.parallel_min_work = settings.PARALLEL_MIN_WORK

    def load(self, binary: bytes, program: LoopProgram, name: str) -> CompiledKernel:
        ranged = self.jit.add(binary, name)
        return CompiledKernel(program, ranged, self.jit.address(name + ".all"))

    def runner(self, k: CompiledKernel) -> Callable[[bytes], None]:
        """What runs the kernel on its packed arguments, decided once per program: on this
        thread (tiny work: holding the GIL, see HOLD_GIL_WORK), or split over the pool."""
        n = k.global_size
        if n and not (self.pool is None or n < 2 or k.work < self.parallel_min_work):
            return self._ranged_runner(n, k.work, k.ranged)
        if not n:
            return _launch_nothing
        return (_WHOLE_FN_GIL if k.work < HOLD_GIL_WORK else _WHOLE_FN)(k.whole)

    def _ranged_runner(self, n: int, work: int, address: int) -> Callable[[bytes], None]:
        """A runner of the ranged entry at `address` over [0, n): on this thread, or over the pool."""
        if not n:
            return _launch_nothing
        if self.pool is None or n < 2 or work < self.parallel_min_work:  # threads would cost more than they save
            entry = _KERNEL_FN(address)
            return lambda args: entry(args, 0, n)
        run_parallel = self.run_parallel

        def call_parallel(args: bytes) -> None:
            run_parallel(address, args, n)
        return call_parallel

    def launch(self, loaded: CompiledKernel, program: LoopProgram, handles: list[Any]) -> None:
        self.runner(loaded)(packer(loaded)(*handles))

    def launcher(self, loaded: CompiledKernel, program: LoopProgram) -> tuple[Callable[..., bytes], Callable[[bytes], None]]:
        """(pack, call), made once per program (the kit's fast path, ug.jit's handle launcher):
        the pack is a struct's, and small work runs on this thread through the `.all` entry, so
        both are C-level calls."""
        return packer(loaded), self.runner(loaded)

    def direct_launcher(self, loaded: CompiledKernel, program: LoopProgram) -> Callable[..., None] | None:
        """`launch(*handles)` for a kernel that runs on this thread holding the GIL (below
        HOLD_GIL_WORK): one builtin call into native code that reads the handles and calls the
        `.all` entry (fastcall.py), where packing them and the ctypes call were two calls and
        most of a tiny ug.jit replay (64-element add: 0.14 us against 0.71). None otherwise, or
        where the interpreter's C API is not found: `launcher`'s."""
        if self.runner(loaded) is _launch_nothing or loaded.work >= HOLD_GIL_WORK:
            return None
        if not (self.pool is None or loaded.global_size < 2 or loaded.work < self.parallel_min_work):
            return None   # (split over the threads: the ranged entry)
        if self._fast is None:
            self._fast = FastLaunch(self.jit)
        return self._fast.launcher(loaded.whole, len(program.params))

    _fast: FastLaunch | None = None

    def run_parallel(self, fn: int, args: bytes, n: int) -> None:
        """fn(args, start, end) (fn: an entry's address) over [0, n) on the pool:
        CHUNKS_PER_THREAD ranges per thread, claimed by the threads as they ask for them (in
        native code, SpinPool.run_ranges), so a thread slowed down by a busy core (these
        machines are shared) runs fewer of them instead of holding everyone up."""
        assert self.pool is not None
        threads = min(self.threads, n)
        pieces = min(n, threads * CHUNKS_PER_THREAD)
        step = -(-n // pieces)
        step = -(-step // CHUNK_ALIGN) * CHUNK_ALIGN if n >= CHUNK_ALIGN * pieces else step
        self.pool.run_ranges(fn, args, n, step)

    def run_threads(self, k: CompiledKernel, handles: list[Any], threads: int) -> None:
        """Run with exactly `threads` chunks (tests: threads must give the same bits as one)."""
        saved = self.threads, self.parallel_min_work
        try:
            self.threads = threads
            self.parallel_min_work = 0 if threads > 1 else 1 << 62
            self.launch(k, k.program, handles)
        finally:
            self.threads, self.parallel_min_work = saved

    def on_threads(self, fn: Callable[[int], None], threads: int,
                   native: tuple[Any, int, int, Any] | None = None) -> None:
        """fn(tid) on `threads` threads (tid 0 on this one, the others on the pool's workers 1 ..),
        for the packed gemm and attention, whose fn(0) returns only when all the work is done,
        whichever threads did it: so this does not wait for the workers. One that starts late
        finds nothing left to do; waiting for it would have put its wake-up on every product.
        `native`: the same work as a native function, (its ctypes function, its address, its
        pointer argument, what keeps that alive), which the workers run without the GIL
        (pool.SpinPool.run_native)."""
        if threads <= 1 or self.pool is None:
            fn(0)
            return
        if native is not None:
            entry, address, arg, keep = native
            self.pool.run_native(entry, address, arg, keep, threads)
            return

        def job(worker: int) -> None:
            if worker < threads:
                fn(worker)
        with defer_interrupts:   # (see pool: the workers must not outlive the call)
            self.pool.post(job)
            fn(0)
