"""How the cpu device multiplies matrices: which implementation runs a product, and running it.

* the packed gemm (the gemm/ package) for float16/float32/float64, threaded over row blocks and batch
  entries, with an elementwise epilogue kernel run inside it where one follows;
* small products (SMALL_MATMUL_MACS) as an ordinary reduction kernel (small_matmul.py);
* numpy's BLAS on strided views for the rest (matrix-vector shapes, integer dtypes), and for
  everything with UG_LLVM_MATMUL=numpy;
* tier 0 (ug_core.tiers): while no gemm of a product's operand dtype is compiled, the product runs
  on numpy's BLAS (summing in the gemm's dtype), and from the dtype's second such product on the
  gemm compiles in the background (0.4-1 s of LLVM that a first call would otherwise wait for);
  once it is there, the gemm runs them.
  numpy's sums may differ from the gemm's in the last bits (another order), within the kit's
  tolerances. Tier mode "1" compiles before the first run, "0" stays on numpy;
  ug.precompile compiles the gemm ahead (prepare).
"""

from __future__ import annotations

import array
import dataclasses
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ug_core.kit import Buffer, Loaded, MatmulSpec, Program, View, compile_in_background, env_int, tier_mode

from . import settings
from .gemm import GemmConfig, PackedGemm, Problem
from .memory import Block, array_of
from .small_matmul import SMALL_MATMUL_MACS, matmul_kernel

if TYPE_CHECKING:
    from .device import CPUDevice
    from .launch import CompiledKernel

# below this many rows or columns the packed gemm's register tile is mostly padding: numpy's
# BLAS (a matrix-vector product) does better
GEMM_MIN_DIM = 8
# operand dtype -> the dtype the packed gemm multiplies and sums in
GEMM_DTYPES: dict[np.dtype, np.dtype] = {np.dtype(np.float16): np.dtype(np.float32), np.dtype(np.float32): np.dtype(np.float32),
               np.dtype(np.float64): np.dtype(np.float64)}
# below this many multiply-adds a matmul runs on the calling thread: measured on 2 threads
# against 1 in one process, with the spinning workers (pool.SpinPool): about even at 160^3
# (124 against 116 us), ahead from 192^3 (142 / 191; 224^3: 218 / 332)
GEMM_PARALLEL_MIN_MNK = 1 << 22
NARROW_NV = 2
"""Products at most this many vectors wide use a gemm whose register tile is this many vectors
wide (and proportionally taller), where the host's tile is wider (see _tile_for)."""
# tier 0: a dtype's gemm compiles in the background from its products' COMPILE_AFTER-th run
# on numpy (ug_core.tiers' rule for kernels)
COMPILE_AFTER = 2
MAX_PLANS = 4096  # plans kept per kind, by spec: bounded, so specs of dropped schedules go eventually


class HostMatmul:
    """The cpu device's matmul and matmul_epilogue (see ug_core.device.Device)."""

    def __init__(self, device: "CPUDevice"):
        self.device = device
        self._lock = threading.Lock()
        self._gemms: dict[GemmConfig, PackedGemm] = {}  # compiled on first use, per tile (operand dtype, width)
        # by id(spec): (spec, gemm, problem, parallel, the tile to compile on the next run or None)
        self._gemm_plans: dict[int, tuple[MatmulSpec, PackedGemm, Problem, bool, GemmConfig | None]] = {}
        self._small: dict[int, tuple[MatmulSpec, tuple[int, int, int], Callable[[list[Buffer]], None]]] = {}
        # tier 0: operand dtypes with a gemm compiled (done with tier 0), and the background
        # compiles of the others' gemms
        self._ready: set[np.dtype] = set()
        self._background: dict[np.dtype, Any] = {}
        self._numpy_runs: dict[np.dtype, int] = {}

    def after_fork(self) -> None:
        """In a forked child: a new lock (another thread of the parent may have held it); the
        background compiles queued in the parent are lost (ug_core.tiers)."""
        self._lock = threading.Lock()
        self._background = {}

    def on_numpy(self, spec: MatmulSpec, source: np.dtype) -> bool:
        """Tier 0 of the packed gemm (see the module docstring): whether a product of operand
        dtype `source` runs on numpy's BLAS because no gemm of that dtype is compiled (and the
        tier mode lets it: "1" compiles before the first run, "0" never compiles)."""
        if source in self._ready:
            return False
        mode = tier_mode()
        if mode == "0":
            return True
        if any(c.source == source for c in list(self._gemms)):   # (a snapshot: the background thread adds)
            self._ready.add(source)
            return False
        if mode == "1":
            return False
        task = self._background.get(source)
        return task is None or not task.done   # (done and still no gemm: it failed, and compiling here raises why)

    def _ran_on_numpy(self, spec: MatmulSpec, source: np.dtype) -> None:
        """After a tier-0 product (mode "auto"): from the dtype's COMPILE_AFTER-th on, its gemm's
        compile is queued in the background. Not at the first, nor before the product: a
        program that multiplies once never pays for a compile, and a first call's numpy
        product does not share the cores with LLVM."""
        if source in self._background or tier_mode() != "auto":
            return
        runs = self._numpy_runs[source] = self._numpy_runs.get(source, 0) + 1
        if runs < COMPILE_AFTER:
            return
        host = GemmConfig.for_host(GEMM_DTYPES[source], self.device.jit.features, source)
        want = _tile_for(host, spec.out_shape[-1], spec.out_shape[-2])
        self._background[source] = compile_in_background(f"gemm {source.name} {want.mr}x{want.nv}v",
                                                         lambda: self._gemm(want), env_int("UG_DEBUG", 0, strict=False))

    def path(self, spec: MatmulSpec, out: Buffer, a: Buffer, b: Buffer) -> str:
        """How `run` computes this product: "none" (nothing to write), "zeros" (an empty
        sum), "small" (a reduction kernel, see small_matmul), "gemm" (the packed gemm) or "numpy"."""
        return _path(spec, out.size, out.dtype, a.dtype, b.dtype)

    def prepare(self, spec: MatmulSpec, sizes: tuple[int, int, int], dtypes: tuple[np.dtype, np.dtype, np.dtype],
                same_ab: bool = False) -> bool:
        """Compile (or load from the disk cache) what `run` would compile for this product on
        its first run, running nothing (ug.precompile): the packed gemm of its dtype and tile, or
        its small-matmul kernel (and that kernel's variant for one buffer passed as both a and
        b, `same_ab`). `sizes`, `dtypes`: of the out, a and b buffers. Whether there was
        anything to compile."""
        path = _path(spec, sizes[0], *dtypes)
        if path == "gemm":
            m, n = spec.out_shape[-2:]
            self._gemm_plan(spec, dtypes[1], m * n * spec.a_view.shape[-1], final=True)
            # (and the host's tile: in a fresh process, a product whose tile is not loaded yet
            # may run once on that one, see _gemm_for)
            self._gemm(GemmConfig.for_host(GEMM_DTYPES[dtypes[1]], self.device.jit.features, dtypes[1]))
        elif path == "small":
            program = self.device.compile(matmul_kernel(spec, *sizes))
            variant = program.handle.variant
            if same_ab and variant is not None:
                variant.get()
        return path in ("gemm", "small")

    def run(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec) -> None:
        path = self.path(spec, out, a, b)
        if path == "none":
            return
        if path == "zeros":
            array_of(out)[...] = 0
        elif path == "small":
            self.small_launch(spec, out, a, b)([out, a, b])
        elif path == "gemm":
            if self.on_numpy(spec, a.dtype):
                self._numpy(out, a, b, spec, GEMM_DTYPES[a.dtype])
                self._ran_on_numpy(spec, a.dtype)
                if env_int("UG_DEBUG", 0, strict=False):
                    print(f"  tier 0 (numpy) matmul {spec.out_shape} {a.dtype.name}: the gemm is not compiled yet",
                          file=sys.stderr, flush=True)
                return
            m, n = spec.out_shape[-2:]
            self.packed_gemm(out, a, b, spec, m * n * spec.a_view.shape[-1])
        elif path == "numpy":
            self._numpy(out, a, b, spec)
        else:
            raise AssertionError(path)

    def epilogue(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec, program: Program,
                 buffers: list[Buffer]) -> bool:
        """The packed gemm calls the epilogue kernel's ranged entry on each block of C's rows
        as soon as the block is final (in the gemm's threads, on rows still in cache). Only where
        the packed gemm runs and writes `out` itself (not float16, which rounds a float32
        workspace at the end) and the kernel's range is C's elements in order; otherwise False."""
        loaded: Loaded = program.handle
        if (self.path(spec, out, a, b) != "gemm" or GEMM_DTYPES[a.dtype] != out.dtype or loaded.entry is None
                or tuple(loaded.program.global_size) != (out.size,) or self.on_numpy(spec, a.dtype)):
            return False
        m, n = spec.out_shape[-2:]
        handles = [buf.handle for buf in buffers]
        epilogue: CompiledKernel = loaded.entry_for(handles)   # (the no-alias variant where a buffer is passed twice)
        fn_addr = epilogue.ranged
        args = array.array("Q", handles)  # the kernel's i8** argument, alive until the gemm returns
        self.packed_gemm(out, a, b, spec, m * n * spec.a_view.shape[-1], (fn_addr, args.buffer_info()[0]))
        return True

    @staticmethod
    def _numpy(out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec, compute: np.dtype | None = None) -> None:
        """The product by numpy's matmul on strided views of the buffers; `compute`: the dtype
        to multiply in (float16 operands: float32, as the gemm, rounded once at the end)."""
        av = _matrices(_strided(array_of(a), spec.a_view), spec.a_split)
        bv = _matrices(_strided(array_of(b), spec.b_view), spec.b_split)
        dst = array_of(out).reshape(spec.out_shape)
        if compute is not None and av.dtype != compute:
            av, bv = av.astype(compute), bv.astype(compute)
        if av.dtype == bv.dtype == dst.dtype:
            np.matmul(av, bv, out=dst)
        else:
            dst[...] = np.matmul(av, bv)

    def packed_gemm(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec, mnk: int,
                     epilogue: tuple[int, int] = (0, 0)) -> None:
        device = self.device
        gemm, problem, parallel = self._gemm_plan(spec, a.dtype, mnk)
        runtime = device.runtime
        threads = runtime.threads if parallel and runtime.pool is not None else 1
        compute = gemm.cfg.dtype
        if compute == out.dtype:
            gemm.run(problem, a.handle.ptr, b.handle.ptr, out.handle.ptr, self._workspace, device.free,
                     runtime.on_threads, threads, epilogue)
            return
        assert epilogue == (0, 0), "float16 results are rounded at the end: no epilogue"
        # float16: float32 sums into a workspace, rounded once at the end (numpy's result)
        wide = Buffer(device, out.size, compute)
        gemm.run(problem, a.handle.ptr, b.handle.ptr, wide.handle.ptr, self._workspace, device.free,
                 runtime.on_threads, threads)
        np.copyto(array_of(out), array_of(wide), casting="same_kind")

    def small_launch(self, spec: MatmulSpec, out: Buffer, a: Buffer, b: Buffer) -> Callable[[list[Buffer]], None]:
        """The launch of a small matmul's reduction kernel (see small_matmul), made once per
        spec and buffer sizes (a ug.jit replay passes the same spec every call)."""
        sizes = (out.size, a.size, b.size)
        hit = self._small.get(id(spec))
        if hit is not None and hit[0] is spec and hit[1] == sizes:
            return hit[2]
        device = self.device
        launch = device.kernel_launcher(matmul_kernel(spec, *sizes))   # (numpy until compiled: ug_core.tiers)
        if len(self._small) >= MAX_PLANS:
            self._small.clear()
        self._small[id(spec)] = (spec, sizes, launch)
        return launch

    def _gemm_plan(self, spec: MatmulSpec, source: np.dtype, mnk: int, final: bool = False
                   ) -> tuple[PackedGemm, Problem, bool]:
        """The gemm, problem and whether to use the threads, of a matmul, worked out once per spec: a ug.jit
        replay passes the same spec every call, and for small matrices this Python is most of
        the cost. Keyed by id, checked by identity (the entry keeps its spec alive). The gemm
        may be a stand-in on the first run (_gemm_for); `final`: its own tile at once."""
        hit = self._gemm_plans.get(id(spec))
        if hit is not None and hit[0] is spec:
            if hit[4] is None:
                return hit[1], hit[2], hit[3]
            # a product run again on a stand-in tile (see _gemm_for): now compile its own
            gemm = self._gemm(hit[4])
            self._gemm_plans[id(spec)] = (spec, gemm, hit[2], hit[3], None)
            return gemm, hit[2], hit[3]
        av, bv = spec.a_view, spec.b_view
        problem = Problem.from_views(av.shape, av.strides, av.offset, bv.shape, bv.strides, bv.offset,
                                     spec.a_split, spec.b_split)
        host = GemmConfig.for_host(GEMM_DTYPES[source], self.device.jit.features, source)
        want = _tile_for(host, spec.out_shape[-1], problem.m)
        gemm, later = (self._gemm(want), None) if final else self._gemm_for(host, want)
        parallel = mnk * problem.batch >= GEMM_PARALLEL_MIN_MNK
        if len(self._gemm_plans) >= MAX_PLANS:
            self._gemm_plans.clear()
        self._gemm_plans[id(spec)] = (spec, gemm, problem, parallel, later)
        return gemm, problem, parallel

    def _gemm(self, cfg: GemmConfig) -> PackedGemm:
        """The gemm of a tile, compiled (or loaded from the disk cache) on first use."""
        gemm = self._gemms.get(cfg)
        if gemm is None:
            with self._lock:
                gemm = self._gemms.get(cfg) or PackedGemm(self.device.jit, cfg.dtype, cfg)
                self._gemms[cfg] = gemm
        return gemm

    def _gemm_for(self, host: GemmConfig, want: GemmConfig) -> tuple[PackedGemm, GemmConfig | None]:
        """The gemm a product's first run uses, and the tile to compile if it runs again (None:
        it has its own). Every tile computes any shape, with the same sums in the same order
        (each element of C adds its k products in order, KC blocks in order: the tile only
        decides which elements share registers), so the tile is a matter of speed only: a
        product whose tile (_tile_for) is not compiled yet, where another tile of its dtype is,
        runs once on that one (the host's, else the widest) instead of waiting for a compile
        (0.4-0.6 s here), and compiles its own when it runs again (a ug.jit replay, a loop, a
        kept schedule). Products of many distinct shapes that each run once (a library's test
        suite, a first call) so compile one module per dtype, not one per tile (5 of them for
        37 random shapes up to 300)."""
        if want in self._gemms:
            return self._gemms[want], None
        compiled = [c for c in list(self._gemms) if c.dtype == want.dtype and c.source == want.source]  # (a snapshot: another thread may add one)
        if not compiled:
            return self._gemm(want), None
        stand_in = host if host in compiled else max(compiled, key=lambda c: (c.nv, c.mr))
        return self._gemms[stand_in], want


    def _workspace(self, nbytes: int) -> tuple[Block, int]:
        block = self.device.allocate(nbytes)
        return block, block.ptr


def _path(spec: MatmulSpec, out_size: int, out_dtype: np.dtype, a_dtype: np.dtype, b_dtype: np.dtype) -> str:
    """HostMatmul.path, from the buffers' sizes and dtypes."""
    m, n = spec.out_shape[-2:]
    k = spec.a_view.shape[-1]
    if not out_size:
        return "none"
    if not k:
        return "zeros"
    split = spec.a_split > 1 or spec.b_split > 1
    if settings.MATMUL_IMPL == "ug" and a_dtype == b_dtype == out_dtype and a_dtype in GEMM_DTYPES:
        if out_size * k <= SMALL_MATMUL_MACS and a_dtype.itemsize >= 4 and not split:  # (float16: summed in float32 by the gemm)
            return "small"
        if m >= GEMM_MIN_DIM and n >= GEMM_MIN_DIM:
            return "gemm"
    return "numpy"


def _tile_for(cfg: GemmConfig, n: int, m: int | None = None) -> GemmConfig:
    """The host's tile, no wider (in vectors) than the product's n columns need: a column tile
    past N is work on zero padding (the AVX-512 tile is 64 float32 wide, so a 784-512-512-10
    MLP's (256, 512) @ (512, 10) did 6.4 times its work). Measured on that host (one thread,
    256 x 512 by n): n = 10 or 16 took 0.135 ms with 4 vectors, 0.053 with 1; n = 32 0.135
    with 4, 0.070 with 2; 1024 x 1024 x 10 1.03 ms against 0.46; n >= 64 is unchanged.

    With the rows per batch entry `m`, among the tiles of as many accumulators (MR x NV: 6 x 4,
    8 x 3, 12 x 2 on AVX-512) no wider than n needs, the one that pads M and N least (the host's
    on a tie): T2's convolutions, 32 or 144 rows by 624 whole-row positions, do no padded work on
    8 x 3 (48 columns) where 6 x 4 computed 36 rows for 32 and 640 columns for 624 (one thread:
    the forward 4.5 -> 3.7 ms, the input's gradient 7.8 -> 6.3)."""
    need = -(-n // cfg.vector)
    nv = max(1, min(cfg.nv, need))
    if nv == cfg.nv and m is None:
        return cfg
    # two vectors wide: a tile twice as tall keeps the accumulators busy (a conv's weight
    # gradient, 32 output channels on AVX-512: 8.1 -> 4.8 ms)
    mr = cfg.mr * cfg.nv // NARROW_NV if nv == NARROW_NV else cfg.mr
    best = dataclasses.replace(cfg, nv=nv, mr=mr) if nv != cfg.nv else cfg
    if m is None or nv < NARROW_NV:
        return best

    def padded(c: GemmConfig) -> int:
        return -(-m // c.mr) * c.mr * -(-n // c.nr) * c.nr
    for wide in range(nv - 1, NARROW_NV - 1, -1):   # narrower tiles of as many accumulators
        if (cfg.mr * cfg.nv) % wide:
            continue
        other = dataclasses.replace(cfg, nv=wide, mr=cfg.mr * cfg.nv // wide)
        if padded(other) < padded(best):
            best = other
    return best


def _matrices(x: np.ndarray, split: int) -> np.ndarray:
    """A split operand's (MatmulSpec.a_split / b_split) rows merged into one dim (a copy)."""
    return x if split <= 1 else x.reshape(x.shape[:-1 - split] + (-1, x.shape[-1]))


def _strided(flat: np.ndarray, view: View) -> np.ndarray:
    """The view's elements of `flat`, in place. (The ndarray constructor: numpy's as_strided
    costs about 15 us a call, which dominated small matmuls.)"""
    if view.size == 0:
        return np.zeros(view.shape, dtype=flat.dtype)
    item = flat.itemsize
    return np.ndarray(view.shape, flat.dtype, flat, view.offset * item, tuple(s * item for s in view.strides))
