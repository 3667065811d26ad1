"""Running compiled kernels: on the calling thread, or with their range split over the pool.

A kernel module has two entries: `void k(i8** args, i64 start, i64 end)` (a range of global
ids, what the threads run) and `void k.all(i8** args)` (the whole range, on this thread). The
argument is an array of the buffers' addresses, which are the buffers' handles (memory.Block).

A launch works out what it can once per program (the argument packer, serial or parallel, the
entry) and keeps the per-call path to reading the handles, packing them and one ctypes call:
ug.jit replays of tiny kernels are dominated by it. A parallel launch splits the range into
chunks whose boundaries are multiples of CHUNK_ALIGN, so each thread runs the same
vector/scalar split as a single thread would (same bits for any thread count).
"""

from __future__ import annotations

import ctypes
import math
import struct
from typing import Any, Callable

from ug_core.device import Buffer
from ug_core.faults import defer_interrupts
from ug_core.kit import Runtime
from ug_core.loop_ir import LoopProgram, Opc, index_bound

from . import settings
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

Launch = Callable[[list[Buffer]], None]


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
    """A loaded kernel: its entries' addresses and what a launch needs to split its range.

    The ranged entry at `_addresses[False]` has `noalias` buffer pointers (distinct buffers);
    the one without, for a launch that passes one buffer twice (an in-place write), is compiled
    on first use by `load_aliased` (its ranged entry's address)."""

    def __init__(self, program: LoopProgram, ranged: int, whole: int, load_aliased: Callable[[], int]):
        self.program = program
        self.global_size = 0 if program.is_empty else math.prod(program.global_size)
        self.work = kernel_work(program)
        self.whole = whole
        self._addresses = {False: ranged}
        self._entries: dict[bool, Any] = {}
        self._load_aliased = load_aliased
        self.launch: Launch | None = None  # CPURuntime.launcher, made on first use

    def entry_address(self, aliased: bool) -> int:
        """The ranged entry's address, for native callers (the pool, the gemm's epilogue)."""
        return _entry_address(self._addresses, self._load_aliased, aliased)

    def entry(self, aliased: bool) -> Any:
        """The ranged entry, callable from Python: entry(args, start, end)."""
        found = self._entries.get(aliased)
        if found is None:
            found = self._entries[aliased] = _KERNEL_FN(self.entry_address(aliased))
        return found


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


def _entry_address(addresses: dict[bool, int], load_aliased: Callable[[], int], aliased: bool) -> int:
    """CompiledKernel.entry_address on the kernel's parts (a launch holds those, not the kernel)."""
    found = addresses.get(aliased)
    if found is None:
        found = addresses[aliased] = load_aliased()
    return found


class CPURuntime(Runtime):
    """Loads kernels into the process's LLVM engine (jit.Jit) and runs them on this thread or
    on a pool of `threads - 1` workers (pool.SpinPool)."""

    def __init__(self, jit: Any, threads: int, load_aliased: Callable[[LoopProgram], int]):
        self.jit = jit
        self.threads = threads
        self.pool = SpinPool(jit, threads - 1) if threads > 1 else None
        self.parallel_min_work = settings.PARALLEL_MIN_WORK
        self._load_aliased = load_aliased  # program -> the ranged entry of its module without noalias

    def load(self, binary: bytes, program: LoopProgram, name: str) -> CompiledKernel:
        ranged = self.jit.add(binary, name)
        return CompiledKernel(program, ranged, self.jit.address(name + ".all"), lambda: self._load_aliased(program))

    def runner(self, k: CompiledKernel, aliased: bool) -> Callable[[bytes], None]:
        """What runs the kernel on its packed arguments, decided once per program: on this
        thread (tiny work: holding the GIL, see HOLD_GIL_WORK), or split over the pool."""
        if aliased:
            return self._ranged_runner(k.global_size, k.work, k.entry_address(True))
        n = k.global_size
        if n and not (self.pool is None or n < 2 or k.work < self.parallel_min_work):
            return self._ranged_runner(n, k.work, k.entry_address(False))
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
        self.runner(loaded, aliased=len(set(handles)) != len(handles))(packer(loaded)(*handles))

    def launcher(self, k: CompiledKernel) -> Launch:
        """The per-program launch function (made once): read the pointers, pack them, call."""
        if k.launch is None:
            pack, run = packer(k), self.runner(k, aliased=False)
            run_aliased: Callable[[bytes], None] | None = None  # made on the first launch that needs it
            # (k's parts, not k: k holds this function, and a closure holding k would be a
            # reference cycle, leaving an evicted program's objects to the gc)
            n, work, addresses, load_aliased = k.global_size, k.work, k._addresses, k._load_aliased

            def launch(buffers: list[Buffer]) -> None:
                nonlocal run_aliased
                handles = [b.handle for b in buffers]  # blocks are their addresses: the kernel's arguments
                if len(set(handles)) == len(handles):
                    run(pack(*handles))
                    return
                if run_aliased is None:  # a buffer passed twice: the entry without noalias (compiled now)
                    run_aliased = self._ranged_runner(n, work, _entry_address(addresses, load_aliased, True))
                run_aliased(pack(*handles))
            k.launch = launch
        return k.launch

    def handle_launcher(self, k: CompiledKernel) -> tuple[Callable[..., bytes], Callable[[bytes], None]]:
        """`launcher` one level down, for ug.jit's single-kernel replay (see
        Device.handle_launcher): (pack, call) with call(pack(*handles)) running the kernel, where
        the buffers the kernel writes are passed nowhere else, so the noalias entry is right.
        Small work runs on this thread through the `.all` entry: the pack and one ctypes call,
        both C-level."""
        return packer(k), self.runner(k, aliased=False)

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
