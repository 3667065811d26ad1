"""PackedGemm: the gemm compiled for one dtype on this host, run on the calling thread or a pool.

The problem's fixed part (row blocks, workspace layout, the context but its pointers) is set up
once per (problem, threads) and kept (`_Setup`): a ug.jit replay runs the same problem every
call, and for a small matmul that Python was a good part of the call.
"""

from __future__ import annotations

import array
import ctypes
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..render_ir import pipeline_mark
from .config import CTX_FIELDS, FIELD, GemmConfig
from .module import render_module
from .problem import Problem

# the smallest row block (in MR-row panels) of a guided plan (PackedGemm.plan): a block streams
# the whole packed B through L2 once, so a tiny one is slow per row; it ends the schedule only
MIN_BLOCK_PANELS = 2
# ... and where one batch entry's packed B is at least BIG_B_BYTES: such a B comes from L3 or
# memory for every block (it does not stay in L2 beside the A block), which for a few rows
# is not hidden by their compute. 1024^3 float32 on one thread running a 2-thread plan,
# alternating in one process: blocks of 12-18 rows at the end (14 blocks) 15.81 ms, at least
# 48 (10 blocks) 15.41, 4 even blocks 15.11 (but then a late thread waits up to a quarter)
BIG_B_MIN_BLOCK_PANELS = 8
BIG_B_BYTES = 1 << 20

_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
_SERIAL = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # (an untyped call would pass an int as a 32-bit C int)
_PARALLEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)

# on_threads(fn, threads, native=...) runs fn(tid) once on each of `threads` threads, tid 0 on the
# calling one; need not wait for the others (the gemm's fn(0) returns when all the work is done,
# see module._parallel). `native` is the same work as a native function, (its ctypes function,
# address, pointer argument, what keeps that alive), which a pool may run without the GIL.
OnThreads = Callable[..., None]

_EPI_FN, _EPI_ARGS, _PACK_NEXT, _GEMM_NEXT = FIELD["epi_fn"], FIELD["epi_args"], FIELD["pack_next"], FIELD["gemm_next"]
_PACK_DONE, _GEMM_DONE, _B_LOCAL = FIELD["pack_done"], FIELD["gemm_done"], FIELD["b_local"]
# batch by batch (see module._batch_by_batch) from this many batch entries per thread
LOCAL_MIN_BATCHES = 4
assert CTX_FIELDS[:5] == ("a", "b", "c", "a_pack", "b_pack")  # (run sets them by position)
# a problem whose workspace is at most this many bytes keeps its context and a workspace of
# its own between calls (_Setup.spare): taking a workspace from the device's pool and building
# the context were a third of the Python around a 64^3 product. (Such workspaces are the
# gemm's, like its code: not device buffers, at most 2 * 256 of them, 64 MiB in all.)
SPARE_WORKSPACE = 1 << 17
MAX_SETUPS = 256
GEMM_PIPELINE = 1   # the LLVM pipeline level of the gemm's module (see render_ir.pipeline_mark)


def _own_bs(p: Problem) -> bool:
    """Whether the batch entries read different B (not one B broadcast over the batch)."""
    return len(set(p.offsets[1::3])) > 1


def _address(table: array.array | None) -> int:
    """A row table's address (the problem keeps it alive), or 0 for none."""
    return 0 if table is None else table.buffer_info()[0]


def _own_workspace(nbytes: int) -> tuple[np.ndarray, int]:
    """A 64-byte aligned workspace owned by the gemm (freed with the array)."""
    block = np.empty(nbytes + 64, np.uint8)
    address = block.ctypes.data
    return block, address + (-address) % 64


@dataclass(frozen=True)
class _Setup:
    problem: Problem      # kept alive: setups are found by its id
    starts: array.array   # row block starts (the ctx points at them)
    ctx: array.array      # the context without the pointers (a, b, c, workspaces, epilogue)
    workspace: int        # bytes: the A panels of each thread, then the packed B at b_pack_at
    b_pack_at: int
    # (workspace, context, its address) of earlier calls, for the next ones: one per call
    # running at the same time, two at most, and only for workspaces <= SPARE_WORKSPACE
    spare: list[tuple[Any, array.array, int]] = field(default_factory=list)


class PackedGemm:
    """The compiled gemm for one dtype on this host, and how to run it over a thread pool."""

    def __init__(self, jit: Any, dtype: np.dtype, cfg: GemmConfig | None = None, source: np.dtype | None = None):
        """dtype: the compute and C dtype; source: A's and B's (default: dtype)."""
        self.cfg = cfg or GemmConfig.for_host(dtype, jit.features, source)
        # LLVM's O1 pipeline: the module is vectorized and unrolled by hand, and O3 found nothing
        # to add (1024^3, 512^3 with B transposed, 256 x 255 x 300, 64^3, 1000 x 13 x 500 on one
        # thread: within noise) while taking a third longer to compile (0.9 -> 0.6 s cold here)
        ir = pipeline_mark(GEMM_PIPELINE) + render_module(self.cfg, "ug_gemm", jit.triple, jit.data_layout, jit.cpu,
                                                          jit.features)
        prefix = "ug_gemm_" + hashlib.sha256(ir.encode()).hexdigest()[:16]
        ir = ir.replace("@ug_gemm_", f"@{prefix}_")
        self.ir = ir
        # (id(problem), threads) -> what run needs of them (see _setup)
        self._setups: dict[tuple[int, int], _Setup] = {}
        # one module, loaded (compiled, or read from the disk cache) once for its three entries
        c = self.cfg
        label = f"gemm module {c.source.name}->{c.dtype.name} tile {c.mr}x{c.nr}"
        self.pack_b = _ENTRY(jit.load(ir, f"{prefix}_pack_b", label))
        self.gemm = _ENTRY(jit.address(f"{prefix}_gemm"))
        self.serial = _SERIAL(jit.address(f"{prefix}_serial"))
        self.parallel_address = jit.address(f"{prefix}_parallel")
        self.parallel = _PARALLEL(self.parallel_address)
        self.local_address = jit.address(f"{prefix}_local")
        self.local = _PARALLEL(self.local_address)

    def plan(self, p: Problem, threads: int) -> array.array:
        """The row blocks of one batch entry, as their starts (multiples of MR, then M): the
        threads take (batch entry, block) units from a shared counter.

        One thread: blocks of at most mc_max rows. Threads and few batch entries: blocks that
        shrink towards the end (guided: each a 1/(2*threads) share of the rows left, within
        [MIN_BLOCK_PANELS, mc_max], or BIG_B_MIN_BLOCK_PANELS for a big B), so a thread that comes late or runs on a busy core leaves
        the others at most one small block to wait for. With equal blocks of a quarter of each
        thread's share, a 1024^3 matmul on 2 threads ended with one thread idle for 1.6-2.7 ms
        of 12-14. Many batch entries share out evenly by themselves: equal blocks."""
        mr = self.cfg.mr
        panels = -(-p.m // mr)
        most = max(1, self.cfg.mc_max // mr)
        sizes: list[int] = []
        if threads <= 1 or p.batch >= 4 * threads:
            blocks = -(-panels // most)
            sizes = [panels // blocks + (1 if i < panels % blocks else 0) for i in range(blocks)]
        else:
            npad = -(-p.n // self.cfg.nr) * self.cfg.nr
            big_b = p.k * npad * self.cfg.itemsize >= BIG_B_BYTES
            least = BIG_B_MIN_BLOCK_PANELS if big_b else MIN_BLOCK_PANELS
            left = panels
            while left:
                size = min(left, most, max(least, -(-left // (2 * threads))))
                sizes.append(size)
                left -= size
        starts = array.array("q", [0])
        for size in sizes:
            starts.append(min(p.m, starts[-1] + size * mr))
        return starts

    def run(self, p: Problem, a: int, b: int, c: int, alloc: Callable[[int], tuple[Any, int]],
            release: Callable[[Any], None], on_threads: OnThreads, threads: int,
            epilogue: tuple[int, int] = (0, 0)) -> None:
        """C = A @ B for pointers a, b, c; `alloc(nbytes) -> (handle, pointer)` gives 64-byte
        aligned workspaces, `release(handle)` takes them back. `epilogue`: (the address of a
        kernel's ranged entry `void f(i8** args, i64 start, i64 end)`, the address of its
        argument array), called on the elements [start, end) of C (row-major, over the whole
        batch) of each block of rows as soon as they are final; (0, 0): none."""
        setup = self._setups.get((id(p), threads))
        if setup is None or setup.problem is not p:
            setup = self._setup(p, threads)
        if threads > 1:
            self._run_parallel(setup, a, b, c, alloc, release, on_threads, threads, epilogue)
            return
        try:  # a context with its workspace from an earlier call (small problems only, see _Setup)
            ws, ctx, ctx_ptr = setup.spare.pop()
        except IndexError:
            ws, ws_ptr = _own_workspace(setup.workspace) if setup.workspace <= SPARE_WORKSPACE else alloc(setup.workspace)
            ctx = setup.ctx[:]  # a copy per call: the counters in it are the threads' shared state
            ctx[3], ctx[4] = ws_ptr, ws_ptr + setup.b_pack_at
            ctx_ptr = ctx.buffer_info()[0]
        ctx[0], ctx[1], ctx[2] = a, b, c
        ctx[_EPI_FN], ctx[_EPI_ARGS] = epilogue
        ctx[_PACK_NEXT] = ctx[_GEMM_NEXT] = ctx[_PACK_DONE] = ctx[_GEMM_DONE] = 0
        try:
            if ctx[_B_LOCAL]:
                self.local(ctx_ptr, 0)
            else:
                self.serial(ctx_ptr)
        finally:
            if setup.workspace > SPARE_WORKSPACE:
                release(ws)
            elif len(setup.spare) < 2:
                setup.spare.append((ws, ctx, ctx_ptr))

    def _run_parallel(self, setup: "_Setup", a: int, b: int, c: int, alloc: Callable[[int], tuple[Any, int]],
                      release: Callable[[Any], None], on_threads: OnThreads, threads: int,
                      epilogue: tuple[int, int]) -> None:
        """The product on `threads` threads, each running the parallel entry on a context of
        its own for this call. The caller's thread returns once all the work is done; another
        thread may start after that (on_threads need not wait for it), finds nothing left and
        leaves: it touches only the context (kept alive by its closure), never the workspace,
        which is therefore given back at once."""
        ws, ws_ptr = alloc(setup.workspace)
        try:
            ctx = setup.ctx[:]
            ctx[0], ctx[1], ctx[2], ctx[3], ctx[4] = a, b, c, ws_ptr, ws_ptr + setup.b_pack_at
            ctx[_EPI_FN], ctx[_EPI_ARGS] = epilogue
            ctx_ptr = ctx.buffer_info()[0]
            parallel, address = (self.local, self.local_address) if ctx[_B_LOCAL] else (self.parallel, self.parallel_address)

            def work(tid: int, ctx: array.array = ctx) -> None:  # (ctx: alive while a thread may read it)
                parallel(ctx_ptr, tid)
            on_threads(work, threads, native=(parallel, address, ctx_ptr, ctx))
        finally:
            release(ws)

    def _setup(self, p: Problem, threads: int) -> "_Setup":
        """What `run` needs of a problem on some threads that does not change between calls (a
        ug.jit replay runs the same problem every call, and for a small matmul this Python
        was a good part of the call): the row blocks, the workspace (A panels per thread, then
        the packed B) and the context with every field but the pointers filled in."""
        cfg = self.cfg
        npad = -(-p.n // cfg.nr) * cfg.nr
        starts = self.plan(p, threads)
        blocks = len(starts) - 1
        widest = max(starts[i + 1] - starts[i] for i in range(blocks))
        a_stride = -(-widest // cfg.mr) * cfg.mr * min(cfg.kc, p.k)
        b_pack_at = -(-threads * a_stride * cfg.itemsize // 64) * 64
        # pack_b's unit: one row of B, or VW rows where B's columns are contiguous (see pack_b.pack_b)
        group = cfg.vector if p.rsb == 1 and p.csb != 1 and cfg.kc % cfg.vector == 0 else 1
        b_rows, units = p.batch * -(-p.k // group), p.batch * blocks
        # batch by batch (module._batch_by_batch): many entries, each with a B of its own
        local = p.batch >= LOCAL_MIN_BATCHES * threads and p.batch > 1 and _own_bs(p)
        ctx = array.array("q", (0, 0, 0, 0, 0, p.m, p.n, p.k, p.rsa, p.csa, p.rsb, p.csb, p.n,
                                p.offsets.buffer_info()[0], starts.buffer_info()[0], blocks, npad, a_stride, 0, 0,
                                0, 0, b_rows, units, group, 0, 0, max(1, b_rows // (8 * threads)),
                                _address(p.a_rows), _address(p.b_rows), p.batch, int(local)))
        slots = threads if local else p.batch
        setup = _Setup(p, starts, ctx, b_pack_at + slots * p.k * npad * cfg.itemsize, b_pack_at)
        if len(self._setups) >= MAX_SETUPS:  # bounded: problems of dropped schedules go eventually
            self._setups.clear()
        self._setups[id(p), threads] = setup
        return setup
