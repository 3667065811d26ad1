"""The `cpu` device: kernels compiled to native code by LLVM (llvmlite MCJIT), run on a thread pool.

* compile: `ug_core.lower` (cpu target) -> `render.render` (LLVM IR) -> O3 -> object code
  (disk cache) -> MCJIT; the kernel is a C function `void k(i8** args, i64 start, i64 end)`
  called through ctypes (which releases the GIL, except around the tiniest kernels), and
  `void k.all(i8** args)` runs the whole range on the calling thread.
* run: the global range is split over a persistent thread pool when the kernel touches
  enough elements; chunk boundaries are multiples of 64 so each thread runs the same
  vector/scalar split as a single thread would (same bits).
* buffers: 64-byte aligned host memory from a pool that reuses freed blocks by size.
* matmul: our packed gemm (gemm.py) for float32/float64, threaded over row blocks and
  batch entries; numpy's BLAS on strided views for the rest (and with UG_LLVM_MATMUL=numpy).
* settings: the UG_LLVM_* variables below are read at import; a bad value makes `cpu` unusable
  with an error naming the variable (`_probe`, `ug devices`) rather than failing the import.
"""

from __future__ import annotations

import array
import ctypes
import functools
import hashlib
import math
import os
import struct
import threading
from collections import deque
from typing import Any, Callable

import numpy as np

import ug_core as ug
from ug_core import env
from ug_core.device import Buffer, Device, DeviceSpec, MatmulSpec, Program
from ug_core.dtypes import SUPPORTED
from ug_core.env import env_choice, env_int
from ug_core.kernel_ir import Kernel
from ug_core.loop_ir import LoopProgram, Opc, index_bound
from ug_core.lower import LowerOptions, lower
from ug_core.ops import Op
from ug_core.view import View

from . import __version__
from .gemm import PackedGemm, Problem
from .pool import SpinPool
from .small_matmul import SMALL_MATMUL_MACS, matmul_kernel
from .render import RenderError, render

ALIGN = 64
CHUNK_ALIGN = 64
CHUNKS_PER_THREAD = 4  # ranges per pool thread in a parallel launch (see _run_parallel)
# below this many (weighted) element visits a kernel runs on the calling thread. A hand-off to
# the pool cost 50-150 us here (waking a thread); measured in alternating processes against
# 1 << 18: sums of 128K and 256K float32 (work 0.26M, 0.53M) went 176 -> 30 and 193 -> 63 us
# on one thread, and kernels of 1-4M work were within noise either way
PARALLEL_MIN_WORK = env_int("UG_LLVM_PARALLEL_MIN_WORK", 1 << 20, minimum=0, strict=False)
# outer indices per global id in the outer-blocked lowering (column reductions): a multiple of
# every vector width, small enough that the per-block accumulators stay in L1
OUTER_BLOCK = env_int("UG_LLVM_OUTER_BLOCK", 64, minimum=0, strict=False)
# ... and for outputs at least this wide per thread: a block of 1024 columns reads 4 KiB of each
# row (one page) into 4 KiB of L1 accumulators, where 64 columns touch a page per 256 bytes.
# Measured on 4096 x 4096: column sum 6.4 -> 4.3 ms, softmax over axis 0 108 -> 32 ms; for
# narrow outputs it leaves too few blocks to share out (8192 x 256: 0.57 -> 0.77 ms).
WIDE_OUTER_BLOCK = env_int("UG_LLVM_WIDE_OUTER_BLOCK", 1024, minimum=0, strict=False)
POOL_CACHE_BYTES = 1 << 30  # freed blocks kept for reuse, at most this many bytes (of blocks over SMALL_BLOCK)
# blocks up to this size are always kept for reuse, like malloc's free lists: the pool of one
# such size holds at most as many blocks as were once in use at the same time. That spares them
# the byte count, so their free can be a C-level list append (see handle_allocator)
SMALL_BLOCK = 1 << 16
# matmul: "ug" (our packed gemm, ug_llvm.gemm) or "numpy" (numpy's BLAS on strided views)
MATMUL_IMPL = env_choice("UG_LLVM_MATMUL", "ug", ("ug", "numpy"), strict=False)
# below this many rows or columns the packed gemm's register tile is mostly padding: numpy's
# BLAS (a matrix-vector product) does better
GEMM_MIN_DIM = 8
# operand dtype -> the dtype the packed gemm multiplies and sums in
GEMM_DTYPES = {np.dtype(np.float16): np.dtype(np.float32), np.dtype(np.float32): np.dtype(np.float32),
               np.dtype(np.float64): np.dtype(np.float64)}
# below this many multiply-adds a matmul runs on the calling thread: measured on 2 threads
# against 1 in one process, with the spinning workers (pool.SpinPool): about even at 160^3
# (124 against 116 us), ahead from 192^3 (142 / 191; 224^3: 218 / 332)
GEMM_PARALLEL_MIN_MNK = 1 << 22

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
# vectors for those tiny kernels: 128-bit. Wider multiplies and FMAs put an AVX-512 machine's
# core into a lower clock for a while (its "AVX license"), which costs the Python code around a
# tiny kernel far more than the wider vectors save in it (a ug.jit replay of 64 elements and ten
# ops: about 10% slower with 256-bit vectors)
TINY_VECTOR_BITS = 128


def backend_version() -> str:
    import llvmlite

    from .jit import llvm_version

    return f"{__version__}+llvmlite{llvmlite.__version__}.llvm{llvm_version()}"


class _Block(int):
    """One aligned host allocation, which is an int: its address. A kernel's argument for a
    buffer is that address, so a launch packs the buffers' handles as they are, with no
    attribute read per argument (ug.jit replays of tiny kernels pay for every one). The block
    holds its memory: `raw`, and `array`, the aligned `capacity` bytes in it; `ptr` is the
    address as a plain int. (Attributes in a __dict__: an int subclass can have no __slots__.)"""

    raw: np.ndarray
    array: np.ndarray
    ptr: int
    capacity: int

    def __new__(cls, capacity: int) -> "_Block":
        raw = np.empty(capacity + ALIGN, dtype=np.uint8)
        offset = (-raw.ctypes.data) % ALIGN
        ptr = raw.ctypes.data + offset
        block = super().__new__(cls, ptr)
        block.raw = raw
        block.array = raw[offset:offset + capacity]
        block.ptr = ptr
        block.capacity = capacity
        return block

    def __repr__(self) -> str:
        return f"<_Block {self.capacity} bytes at {self.ptr:#x}>"


class _Kernel:
    """A compiled kernel: the entry point(s) and what the scheduler needs to split its range."""

    def __init__(self, device: "CPUDevice", program: LoopProgram, name: str):
        self.device = device
        self.program = program
        self.name = name
        self.global_size = int(np.prod(program.global_size)) if not program.is_empty else 0
        self.work = self.global_size * _work_per_index(program)
        self.fn: Any = None            # noalias entry (distinct buffers)
        self.whole_addr = 0            # address of its `.all` entry (see render)
        self.fn_alias: Any = None      # entry without noalias, compiled when buffers repeat
        self._addresses: dict[bool, int] = {}  # see entry_address
        self.launch: Callable[[list[Buffer]], None] | None = None  # CPUDevice.launcher, made on first use
        self.ir = ""

    def entry_address(self, aliased: bool) -> int:
        """The address of entry(aliased), for native callers (the gemm's epilogue)."""
        found = self._addresses.get(aliased)
        if found is None:
            found = self._addresses[aliased] = ctypes.cast(self.entry(aliased), ctypes.c_void_p).value or 0
        return found

    def entry(self, aliased: bool) -> Any:
        if not aliased:
            return self.fn
        if self.fn_alias is None:
            ir, name = self.device._module_ir(self.program, noalias=False)
            self.fn_alias = self.device._load(ir, name)
        return self.fn_alias


def _work_per_index(program: LoopProgram) -> int:
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


class CPUDevice(Device):
    name = "cpu"
    dtypes = frozenset(SUPPORTED)

    def __init__(self) -> None:
        from .jit import get_jit

        self.version = backend_version()
        self.jit = get_jit()
        self.threads = _usable_cores()
        self._pool = SpinPool(self.jit, self.threads - 1) if self.threads > 1 else None
        # the pool: freed blocks by capacity. allocate/free run on every ug.jit replay (and free
        # also from __del__ on whatever thread drops a buffer), so the common path takes no lock:
        # deque.pop/deque.append are atomic under the GIL (a deque rather than a list: a list
        # that goes between empty and one block reallocates on every pop and append). The lock
        # guards only the rare paths that change `_created` (the bytes of all live blocks,
        # pooled or in use).
        self._free: dict[int, deque[_Block]] = {}
        self._free_bytes = 0   # roughly the pooled bytes of blocks over SMALL_BLOCK: bounds them (POOL_CACHE_BYTES)
        self._created = 0
        self._lock = threading.Lock()
        self.lower_options = LowerOptions(target="cpu", outer_block=OUTER_BLOCK)
        self.wide_lower_options = LowerOptions(target="cpu", outer_block=WIDE_OUTER_BLOCK)
        self._gemms: dict[np.dtype, PackedGemm] = {}  # compiled on first use, per operand dtype
        self._gemm_plans: dict[int, tuple[MatmulSpec, PackedGemm, Problem, bool]] = {}
        self._small_matmuls: dict[int, tuple[MatmulSpec, tuple[int, int, int], Callable[[list[Buffer]], None]]] = {}

    # -- memory
    def allocate(self, nbytes: int) -> _Block:
        capacity = -(-nbytes // ALIGN) * ALIGN or ALIGN
        blocks = self._free.get(capacity)
        if blocks:
            try:
                block = blocks.pop()
            except IndexError:  # another thread took the last one since the check
                pass
            else:
                if capacity > SMALL_BLOCK:
                    self._free_bytes -= capacity
                return block
        return self._new_block(capacity)

    def _new_block(self, capacity: int) -> _Block:
        with self._lock:
            self._created += capacity
        return _Block(capacity)

    def free(self, handle: _Block) -> None:
        capacity = handle.capacity
        blocks = self._free.get(capacity)
        if blocks is None:
            blocks = self._free.setdefault(capacity, deque())  # setdefault: one deque even when threads race
        if capacity <= SMALL_BLOCK:
            blocks.append(handle)
        elif self._free_bytes + capacity <= POOL_CACHE_BYTES:
            self._free_bytes += capacity
            blocks.append(handle)
        else:  # pool full: let numpy free the block
            with self._lock:
                self._created -= capacity

    def handle_allocator(self, nbytes: int) -> tuple[Callable[[], _Block], Callable[[], _Block], Callable[[_Block], None]]:
        """(take, allocate, free) for one size (ug.jit replays, see Device.handle_allocator): for
        a small block, the pop and the append of that size's free list, and a new block."""
        capacity = -(-nbytes // ALIGN) * ALIGN or ALIGN
        if capacity > SMALL_BLOCK:
            return super().handle_allocator(nbytes)
        blocks = self._free.get(capacity)
        if blocks is None:
            blocks = self._free.setdefault(capacity, deque())
        return blocks.pop, functools.partial(self._new_block, capacity), blocks.append

    def copy_in(self, handle: _Block, src: np.ndarray) -> None:
        handle.array[: src.nbytes] = src.reshape(-1).view(np.uint8)

    def copy_out(self, handle: _Block, dst: np.ndarray) -> None:
        dst.reshape(-1).view(np.uint8)[...] = handle.array[: dst.nbytes]

    def memory_usage(self) -> int:
        """Bytes of blocks in use (live blocks minus the pooled ones)."""
        return self._created - self.pool_bytes()

    def pool_bytes(self) -> int:
        """Bytes of freed blocks kept for reuse (ug.memory_stats)."""
        return sum(capacity * len(blocks) for capacity, blocks in list(self._free.items()))

    @staticmethod
    def array(buffer: Buffer) -> np.ndarray:
        """The buffer's elements as a flat typed numpy array (no copy)."""
        return buffer.handle.array[: buffer.size * buffer.dtype.itemsize].view(buffer.dtype)

    # -- compile
    def lower(self, kernel: Kernel) -> LoopProgram:
        wide = kernel.outer[-1] >= WIDE_OUTER_BLOCK * self.threads if kernel.outer else False
        return lower(kernel, self.wide_lower_options if wide else self.lower_options)

    def _module_ir(self, program: LoopProgram, noalias: bool = True) -> tuple[str, str]:
        jit = self.jit
        tiny = math.prod(program.global_size) * _work_per_index(program) < HOLD_GIL_WORK
        ir = render(program, "ug_kernel", noalias=noalias, triple=jit.triple, data_layout=jit.data_layout,
                    cpu=jit.cpu, features=jit.features, vector_bits=TINY_VECTOR_BITS if tiny else 0)
        name = "ug_" + hashlib.sha256(ir.encode()).hexdigest()[:24]
        return ir.replace("@ug_kernel", "@" + name), name

    def render(self, kernel: Kernel) -> str:
        return self._module_ir(self.lower(kernel))[0]

    def _load(self, ir: str, name: str) -> Any:
        from .jit import LLVMError

        try:
            addr = self.jit.load(ir, name)
        except LLVMError as e:
            raise ug.CompileError(f"LLVM failed to compile {name}: {e}", ir) from None
        return _KERNEL_FN(addr)

    def compile(self, kernel: Kernel) -> Program:
        program = self.lower(kernel)
        compiled = _Kernel(self, program, kernel.name)
        if compiled.global_size:
            try:
                ir, name = self._module_ir(program)
            except RenderError as e:
                raise ug.CompileError(f"cannot render {kernel.name}: {e}", str(program)) from None
            compiled.ir = ir
            compiled.fn = self._load(ir, name)
            compiled.whole_addr = self.jit.address(name + ".all")
        return Program(kernel.name, compiled, compiled.ir, program.global_size, program.local_size)

    # -- run
    def launcher(self, program: Program) -> Callable[[list[Buffer]], None]:
        """Per-program launch function: the argument layout and entry point are worked out
        here once, so a launch is: read the pointers, pack them, call (ug.jit replays of tiny
        kernels are dominated by this path)."""
        k: _Kernel = program.handle
        if k.launch is None:
            k.launch = self._make_launch(k)
        return k.launch

    def _make_launch(self, k: _Kernel) -> Callable[[list[Buffer]], None]:
        n = k.global_size
        if not n:
            return lambda buffers: None
        pack = self._packer(k)
        work = k.work
        serial = self._pool is None or n < 2  # fixed for this device; PARALLEL_MIN_WORK is read per call (run_threads)
        run_parallel = self._run_parallel
        whole = self._whole(k)

        def launch(buffers: list[Buffer]) -> None:
            handles = [b.handle for b in buffers]  # blocks are their addresses: the kernel's arguments
            args = pack(*handles)
            if len(set(handles)) != len(handles):  # a buffer passed twice: the entry without noalias
                if serial or work < PARALLEL_MIN_WORK:
                    k.entry(aliased=True)(args, 0, n)
                else:
                    run_parallel(k.entry_address(aliased=True), args, n)
            elif serial or work < PARALLEL_MIN_WORK:
                whole(args)  # small work: threads would cost more than they save
            else:
                run_parallel(k.entry_address(aliased=False), args, n)
        return launch

    @staticmethod
    def _packer(k: _Kernel) -> Callable[..., bytes]:
        """handles (addresses) -> the kernel's argument array. A packed bytes object is such an
        array (ctypes passes a pointer to its data) and is far cheaper to build than a ctypes
        array. A kernel without arguments gets one null pointer: never an empty array."""
        nargs = len(k.program.params)
        if nargs == 0:
            pack0 = struct.pack("P", 0)
            return lambda *handles: pack0
        return struct.Struct(f"{nargs}P").pack

    @staticmethod
    def _whole(k: _Kernel) -> Callable[[bytes], None]:
        """The kernel's `.all` entry (the whole range on this thread), holding the GIL when the
        kernel is tiny."""
        return (_WHOLE_FN_GIL if k.work < HOLD_GIL_WORK else _WHOLE_FN)(k.whole_addr)

    def handle_launcher(self, program: Program) -> tuple[Callable[..., bytes], Callable[[bytes], None]]:
        """`launcher` one level down, for ug.jit's single-kernel replay (see
        Device.handle_launcher): (pack, call) with call(pack(*handles)) running the kernel, where
        the buffers the kernel writes are passed nowhere else, so the noalias entry is right.
        Small work runs on this thread through the `.all` entry: the pack and one ctypes call,
        both C-level."""
        k: _Kernel = program.handle
        pack = self._packer(k)
        n = k.global_size
        if not n:
            return pack, _launch_nothing
        # serial or parallel is decided here, once (`launch` reads PARALLEL_MIN_WORK per call,
        # for run_threads; a replay has no use for that)
        if self._pool is None or n < 2 or k.work < PARALLEL_MIN_WORK:
            return pack, self._whole(k)
        fn, run_parallel = k.entry_address(aliased=False), self._run_parallel

        def call_parallel(args: bytes) -> None:
            run_parallel(fn, args, n)
        return pack, call_parallel

    def run(self, program: Program, buffers: list[Buffer]) -> None:
        self.launcher(program)(buffers)

    def _run_parallel(self, fn: int, args: bytes, n: int) -> None:
        """fn(args, start, end) (fn: an entry's address) over [0, n) on the pool:
        CHUNKS_PER_THREAD ranges per thread, claimed by the threads as they ask for them (in
        native code, SpinPool.run_ranges), so a thread slowed down by a busy core (these
        machines are shared) runs fewer of them instead of holding everyone up."""
        assert self._pool is not None
        threads = min(self.threads, n)
        pieces = min(n, threads * CHUNKS_PER_THREAD)
        step = -(-n // pieces)
        step = -(-step // CHUNK_ALIGN) * CHUNK_ALIGN if n >= CHUNK_ALIGN * pieces else step
        self._pool.run_ranges(fn, args, n, step)

    def run_threads(self, program: Program, buffers: list[Buffer], threads: int) -> None:
        """Run with exactly `threads` chunks (tests: threads must give the same bits as one)."""
        saved = self.threads, globals()["PARALLEL_MIN_WORK"]
        try:
            self.threads = threads
            globals()["PARALLEL_MIN_WORK"] = 0 if threads > 1 else 1 << 62
            self.run(program, buffers)
        finally:
            self.threads, globals()["PARALLEL_MIN_WORK"] = saved

    # -- matmul
    def _matmul_path(self, spec: MatmulSpec, out: Buffer, a: Buffer, b: Buffer) -> str:
        """How `matmul` computes this product: "none" (nothing to write), "zeros" (an empty
        sum), "small" (a reduction kernel, see small_matmul), "gemm" (the packed gemm) or "numpy"."""
        m, n = spec.out_shape[-2:]
        k = spec.a_view.shape[-1]
        if not out.size:
            return "none"
        if not k:
            return "zeros"
        if MATMUL_IMPL == "ug" and a.dtype == b.dtype == out.dtype and a.dtype in GEMM_DTYPES:
            if out.size * k <= SMALL_MATMUL_MACS and a.dtype.itemsize >= 4:  # (float16: summed in float32 by the gemm)
                return "small"
            if m >= GEMM_MIN_DIM and n >= GEMM_MIN_DIM:
                return "gemm"
        return "numpy"

    def matmul(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec) -> None:
        path = self._matmul_path(spec, out, a, b)
        if path == "none":
            return
        if path == "zeros":
            self.array(out)[...] = 0
        elif path == "small":
            self._small_matmul(spec, out, a, b)([out, a, b])
        elif path == "gemm":
            m, n = spec.out_shape[-2:]
            self._packed_gemm(out, a, b, spec, m * n * spec.a_view.shape[-1])
        elif path == "numpy":
            av = _strided(self.array(a), spec.a_view)
            bv = _strided(self.array(b), spec.b_view)
            dst = self.array(out).reshape(spec.out_shape)
            if av.dtype == bv.dtype == dst.dtype:
                np.matmul(av, bv, out=dst)
            else:
                dst[...] = np.matmul(av, bv)
        else:
            raise AssertionError(path)

    def matmul_epilogue(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec, program: Program,
                        buffers: list[Buffer]) -> bool:
        """The packed gemm calls the epilogue kernel's ranged entry on each block of C's rows
        as soon as the block is final (in the gemm's threads, on rows still in cache). Only where
        the packed gemm runs and writes `out` itself (not float16, which rounds a float32
        workspace at the end) and the kernel's range is C's elements in order; otherwise False."""
        epilogue: _Kernel = program.handle
        if (self._matmul_path(spec, out, a, b) != "gemm" or GEMM_DTYPES[a.dtype] != out.dtype
                or epilogue.fn is None or tuple(epilogue.program.global_size) != (out.size,)):
            return False
        m, n = spec.out_shape[-2:]
        handles = [buf.handle for buf in buffers]
        fn_addr = epilogue.entry_address(aliased=len(set(handles)) != len(handles))
        args = array.array("Q", handles)  # the kernel's i8** argument, alive until the gemm returns
        self._packed_gemm(out, a, b, spec, m * n * spec.a_view.shape[-1], (fn_addr, args.buffer_info()[0]))
        return True

    def _packed_gemm(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec, mnk: int,
                     epilogue: tuple[int, int] = (0, 0)) -> None:
        gemm, problem, parallel = self._gemm_plan(spec, a.dtype, mnk)
        threads = self.threads if parallel and self._pool is not None else 1
        compute = gemm.cfg.dtype
        if compute == out.dtype:
            gemm.run(problem, a.handle.ptr, b.handle.ptr, out.handle.ptr, self._workspace, self.free,
                     self._on_threads, threads, epilogue)
            return
        assert epilogue == (0, 0), "float16 results are rounded at the end: no epilogue"
        # float16: float32 sums into a workspace, rounded once at the end (numpy's result)
        wide = Buffer(self, out.size, compute)
        gemm.run(problem, a.handle.ptr, b.handle.ptr, wide.handle.ptr, self._workspace, self.free,
                 self._on_threads, threads)
        np.copyto(self.array(out), self.array(wide), casting="same_kind")

    def _small_matmul(self, spec: MatmulSpec, out: Buffer, a: Buffer, b: Buffer) -> Callable[[list[Buffer]], None]:
        """The launch of a small matmul's reduction kernel (see small_matmul), made once per
        spec and buffer sizes (a ug.jit replay passes the same spec every call)."""
        sizes = (out.size, a.size, b.size)
        hit = self._small_matmuls.get(id(spec))
        if hit is not None and hit[0] is spec and hit[1] == sizes:
            return hit[2]
        launch = self.launcher(self.compile(matmul_kernel(spec, *sizes)))
        if len(self._small_matmuls) >= 4096:  # bounded, as _gemm_plans
            self._small_matmuls.clear()
        self._small_matmuls[id(spec)] = (spec, sizes, launch)
        return launch

    def _gemm_plan(self, spec: MatmulSpec, source: np.dtype, mnk: int) -> tuple[PackedGemm, Problem, bool]:
        """The gemm, problem and whether to use the threads, of a matmul, worked out once per spec: a ug.jit
        replay passes the same spec every call, and for small matrices this Python is most of
        the cost. Keyed by id, checked by identity (the entry keeps its spec alive)."""
        hit = self._gemm_plans.get(id(spec))
        if hit is not None and hit[0] is spec:
            return hit[1], hit[2], hit[3]
        gemm = self._gemms.get(source)
        if gemm is None:
            with self._lock:
                gemm = self._gemms.get(source) or PackedGemm(self.jit, GEMM_DTYPES[source], source=source)
                self._gemms[source] = gemm
        av, bv = spec.a_view, spec.b_view
        problem = Problem.from_views(av.shape, av.strides, av.offset, bv.shape, bv.strides, bv.offset)
        parallel = mnk * problem.batch >= GEMM_PARALLEL_MIN_MNK
        if len(self._gemm_plans) >= 4096:  # bounded: specs of dropped schedules go eventually
            self._gemm_plans.clear()
        self._gemm_plans[id(spec)] = (spec, gemm, problem, parallel)
        return gemm, problem, parallel

    def _workspace(self, nbytes: int) -> tuple[_Block, int]:
        block = self.allocate(nbytes)
        return block, block.ptr

    def _on_threads(self, fn: Callable[[int], None], threads: int) -> None:
        """fn(tid) on `threads` threads (tid 0 on this one, the others on the pool's workers 1 ..),
        for the packed gemm, whose fn(0) returns only when all the work is done, whichever
        threads did it: so this does not wait for the workers. One that starts late finds
        nothing left to do; waiting for it would have put its wake-up on every product."""
        if threads <= 1 or self._pool is None:
            fn(0)
            return

        def job(worker: int) -> None:
            if worker < threads:
                fn(worker)
        self._pool.post(job)
        fn(0)

    def synchronize(self) -> None:
        """Nothing to wait for: `run` returns only after every thread has finished its range."""


def _launch_nothing(args: bytes) -> None:
    """The launch of a kernel with an empty range."""


def _strided(flat: np.ndarray, view: View) -> np.ndarray:
    """The view's elements of `flat`, in place. (The ndarray constructor: numpy's as_strided
    costs about 15 us a call, which dominated small matmuls.)"""
    if view.size == 0:
        return np.zeros(view.shape, dtype=flat.dtype)
    item = flat.itemsize
    return np.ndarray(view.shape, flat.dtype, flat, view.offset * item, tuple(s * item for s in view.strides))


def _usable_cores() -> int:
    """The cores this process may run on: its CPU set (a container's, not the host's count),
    and no more than a container's CPU quota (a quota of 2 CPUs on a 64-core host would
    otherwise get 64 threads, 63 of them spinning for work, see pool.SpinPool)."""
    try:
        cores = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        cores = max(1, os.cpu_count() or 1)
    quota = _cpu_quota()
    return cores if quota is None else max(1, min(cores, math.ceil(quota)))


def _cpu_quota(root: str = "/sys/fs/cgroup") -> float | None:
    """The cgroup's CPU quota in cores (v2 `cpu.max`, else v1 `cpu.cfs_quota_us` over
    `cpu.cfs_period_us`); None when there is none or it cannot be read."""
    try:
        with open(os.path.join(root, "cpu.max")) as f:
            quota, period = f.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(root, "cpu", "cpu.cfs_quota_us")) as f:
            quota_us = int(f.read())
        with open(os.path.join(root, "cpu", "cpu.cfs_period_us")) as f:
            period_us = int(f.read())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def _factory() -> CPUDevice:
    return CPUDevice()


def _probe() -> None:
    """Cheap: the UG_LLVM_* settings are valid and llvmlite's native library loads; no LLVM
    target, JIT or thread pool is made (the factory does that, on first use)."""
    env.check("UG_LLVM_")   # a bad value is an error naming the variable, not a silently missing cpu
    try:
        import llvmlite.binding  # noqa: F401  (loads libllvmlite)
    except ImportError as e:
        raise RuntimeError(f"llvmlite is not usable: {e} (pip install llvmlite)") from e


@ug.hookimpl
def ug_register_devices(register: Any) -> None:
    try:
        import llvmlite

        version = f"{__version__}+llvmlite{llvmlite.__version__}"
    except ImportError:  # the factory reports it
        version = __version__
    register(DeviceSpec(name="cpu", factory=_factory, plugin="ug-llvm", version=version, priority=10,
                        description="LLVM JIT (llvmlite MCJIT), vectorized, multithreaded", probe=_probe))
