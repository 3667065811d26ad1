"""Lowering: kernel IR (expressions over index spaces) -> loop IR (explicit loops and indices).

Shared by every backend; the backends only render the resulting `LoopProgram`.

The kernel's shape (see kernel_ir): for each outer index, the reductions run in order,
each over its phase's reduced extent, then each store runs over its own reduced extent.
The *outer index* is the linear index over the non-reduced dims; the *reduced index* of
a phase is the linear index over its reduced dims (the kernel's `axes`), row-major.

Strategies (which thread does what):

* cpu: one parallel index `global_id(0)` per outer index (global_size=(prod(outer),),
  local_size=(1,)); the backend splits that range over its threads. Each reduction is a
  serial loop with an accumulator; a long float sum is accumulated in blocks of
  `sum_block` elements (a partial sum per block, added into the total; past 32 blocks, into
  a partial per 32 blocks, and so on) so that its rounding error grows with the block and
  group sizes, not the number of elements.
* cpu, outer-blocked (option `outer_block` = B > 1, chosen when the kernel's loads read the
  reduced dims with a large stride but consecutive outer indices contiguously, e.g. a column
  sum): each global id runs B consecutive outer indices (the last one fewer), with one
  accumulator per index in a small array (DEFINE_LOCAL, B elements, private to the global
  id on cpu). The loop over the B indices is innermost in every phase:
  `for r in reduced: for b in block: acc[b] = combine(acc[b], x[r, o + b])`, so it reads
  memory contiguously and the backend vectorizes it; later phases read acc[b].
* gpu, thread per outer index (every phase's reduced extent is at most
  `gpu_serial_max_extent`, e.g. elementwise kernels): a flat global index
  group * local_size + local_id with a bounds check, then the same serial code as cpu.
* gpu, workgroup per outer index (long reductions): the workgroup's threads stride over
  the reduced extent (i = local_id, local_id + L, ...), each with a partial accumulator;
  partials are combined by a tree reduction in shared memory, and the result is read
  back by every thread, so later phases and stores can use it; they again stride over
  their extent. A thread's long float sum is blocked as on cpu.
* cpu, masked elementwise (no reduction, a mask on an outer dim, e.g. `pad(x) + 1`): each
  global id is a row (the outer dims but the innermost; with few rows, a chunk of one) and
  loops over the innermost dim, split at the masks' bounds (below).

A scan store (kernel_ir) runs its axis in order with a running accumulator, stored at each
step: on cpu serially per outer index (or, outer-blocked, one running value per lane in the
small array), on gpu always one thread per outer index (a long scan over few rows arrives
blocked into many rows: ug_core.array_api.scans).

`x ** c` for a constant c in {0, 0.5, 1..8} (and -1..-4 for floats) is multiplies (and a
reciprocal, or a sqrt) instead of POW (see _pow_by_multiplies).

Accumulators have the reduction's dtype, except float16 sums, which accumulate in
float32 (and are cast back once at the end).

Index math is int64: the outer / reduced linear index is unravelled into per-dim
indices with IDIV / MOD only where a view needs them (runs of dims that a view reads
contiguously are taken from the linear index in one piece), multiplications by stride 0
and dims of size 1 disappear, constants fold, and identical pure instructions are
computed once per block (CSE) and hoisted out of loops they do not depend on.
Strides may be negative. A view's mask (view.py) becomes a gate, the conjunction of
`lo <= i[d] < hi` over its restricted dims, and its loads GATED_LOADs: nothing is read where
the gate is false, whatever the (then meaningless) index. A kernel without masks has no
gates, so its loads stay plain (and vectorizable) LOADs. An IOTA (index vector) lowers to
its chain's element index, cast, and 0 where its gate is false.

Most gates never make it into the code: a loop over a dim that masks (of the views over the
phase index) restrict is split at the masks' bounds into consecutive loops, one per segment
between two bounds (a concat of 8 along a row: 8 loops, each reading one input), and in each
the mask tests on the dim are known true or false and fold: a gated load becomes a plain load
(which vectorizes) or 0, a select on a mask one of its values. That is the loop over a
phase's leading reduced dim (a reduction, each segment into a partial of its own; a store
loop) in every strategy, and the cpu row loop of masked elementwise kernels; on cpu the code
for an outer index also comes in versions, one per combination of the segments of the masked
outer dims (a pad's first, middle and last rows), each under an IF; at most MAX_COPIES copies
of a loop's body in all. A mask on another dim (a reduction's second reduced dim, a view
after a reshape, an outer dim on gpu, where a thread has one element) keeps its gate.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from . import dag, dtypes
from .kernel_ir import Expr, Kernel, Reduction, Store, toposort
from .loop_builder import LoopBuilder
from .loop_ir import ACC_COMBINE, ATOMIC_COMBINE, BOOL, INDEX, Inst, LoopProgram, Opc, ParamSpec, Special
from .ops import ALU, CONVERSIONS, INDEXED, LEAVES, REDUCE, Op, check_exhaustive
from .view import View, ViewChain, prod


@dataclass(frozen=True)
class LowerOptions:
    target: str = "cpu"                    # "cpu" or "gpu"
    local_size: int = 256                  # gpu: threads per workgroup (an upper bound; small rows use fewer)
    max_global_size: tuple[int, int, int] = (65535, 65535, 65535)  # gpu: workgroups per dim (Vulkan's guaranteed minimum)
    sum_block: int = 1024                  # cpu/serial: float sums longer than this accumulate per block
    gpu_serial_max_extent: int = 16        # gpu: reduced extents up to this run serially, one thread per outer index
    outer_block: int = 0                   # cpu: B > 1 enables the outer-blocked strategy where loads favour it
    outer_block_always: bool = False       # cpu: use it whenever B > 1 and there is a reduction (tests)
    atomic_int_bits: tuple[int, ...] = ()  # gpu: int widths with atomic add/max/min on buffers (loop_ir ATOMIC)

    def __post_init__(self) -> None:
        if self.target not in ("cpu", "gpu"):
            raise ValueError(f"unknown lowering target {self.target!r}")
        if self.local_size < 1 or self.sum_block < 1 or self.outer_block < 0 or not 1 <= len(self.max_global_size) <= 3:
            raise ValueError(f"bad lowering options {self}")


def lower(kernel: Kernel, opts: LowerOptions = LowerOptions()) -> LoopProgram:
    """The loop program computing `kernel` for `opts.target`."""
    return _Lowerer(kernel, opts).run()


# --- lowering -------------------------------------------------------------------------------


@dataclass
class _PhaseIndex:
    """Where one phase is: the outer linear index and the phase's reduced linear index,
    and the dims each of them unravels into (only dims of size > 1)."""

    shape: tuple[int, ...]
    outer_lin: Inst
    outer_dims: tuple[int, ...]
    red_lin: Inst | None
    red_dims: tuple[int, ...]
    lane: Inst | None = None   # outer-blocked cpu: the index b in the block (selects acc[b])


@dataclass(frozen=True)
class _LaneAcc:
    """A reduction's results for a block of outer indices: `local[b]`, accumulated in its
    dtype and read as `dtype` (outer-blocked cpu strategy)."""

    local: Inst
    dtype: np.dtype


F16, F32 = np.dtype(np.float16), np.dtype(np.float32)


def _acc_dtype(r: Reduction) -> np.dtype:
    """The accumulator's dtype: float16 sums and products accumulate in float32 (float16 has ~3
    digits)."""
    return F32 if r.op in (Op.SUM, Op.PROD) and r.dtype == F16 else r.dtype


def _scan_acc(s: Store, out_dtype: np.dtype) -> tuple[np.dtype, Any]:
    """(dtype, initial value) of a scan store's running value: float16 runs in float32 (as
    reductions do, see _acc_dtype), and a float sum starts from -0.0, the identity that keeps
    -0.0 (so the first output is the first value itself, as in numpy; ops.SCANS)."""
    assert s.scan is not None
    dt = F32 if out_dtype == F16 else out_dtype
    if s.scan is Op.SUM and dt.kind == "f":
        return dt, -0.0
    if s.scan is Op.SUM and dt.kind == "c":
        return dt, complex(-0.0, -0.0)
    return dt, dt.type(dtypes.identity(REDUCE[s.scan].name, dt)).item()


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def split_grid(count: int, limits: tuple[int, ...]) -> tuple[int, ...]:
    """Workgroups per dim covering `count` (x first, spilling to y, z); the product may exceed
    `count` by less than one row of dim 0, so callers bounds-check when it does."""
    dims: list[int] = []
    rest = count
    for limit in limits:
        dims.append(min(rest, limit))
        rest = -(-rest // dims[-1])
        if rest == 1:
            return tuple(dims)
    raise ValueError(f"{count} workgroups exceed the grid limit {limits}")


Known = dict[int, tuple[int, int]]
"""Per phase dim, a range [a, b) its index is known to lie in, for the code being emitted (a loop
segment or a version, see _Lowerer._segments and _Lowerer._versions)."""


@dataclass(frozen=True)
class _Cuts:
    """How to split a loop over a linear index whose leading digit is dim `dim` (the index moves
    `inner` per step of the digit): at `bounds` (0 = c0 < c1 < ... < cn = the dim's size), the
    points where a mask on the dim starts or ends, so that in each segment [c_k, c_k+1) of the
    dim every mask test on it is known true or false."""

    dim: int
    bounds: tuple[int, ...]
    inner: int = 1


def _first_views(roots: list[Expr]) -> list[View]:
    """The masked first views (over the phase index) of the loads and index vectors under `roots`."""
    out = []
    for node in dag.toposort(roots, lambda e: e.srcs):
        chain = node.arg[1] if node.op is Op.LOAD else node.arg[0] if node.op is Op.IOTA else None
        if chain is not None and chain[0].mask is not None:
            out.append(chain[0])
    return out


def _mask_bounds(views: list[View], dim: int, size: int) -> tuple[int, ...]:
    """0, `size`, and every point between where the mask of one of `views` on `dim` starts or ends."""
    points = {0, size}
    for v in views:
        points.update(x for x in v.valid_ranges()[dim] if 0 < x < size)
    return tuple(sorted(points))


MAX_COPIES = 32
"""The most copies of a loop's body that splitting makes (its segments, times the versions of the
code around it, see _Lowerer._versions): each is compiled on its own (a softmax over a concat of
8 compiles in 3x the time of one over a plain row), so a loop with more segments keeps its
gates, and the outer dims that would make more versions too."""


def _cuts(views: list[View], dim: int, size: int, inner: int = 1) -> _Cuts | None:
    """Where the masks of `views` split a loop over `dim` (see _Cuts); None: nowhere, or in more
    than MAX_COPIES segments."""
    bounds = _mask_bounds(views, dim, size)
    return _Cuts(dim, bounds, inner) if 2 < len(bounds) <= MAX_COPIES + 1 else None


def _copies(cuts: _Cuts | None) -> int:
    """The loops a loop split at `cuts` becomes."""
    return 1 if cuts is None else len(cuts.bounds) - 1


GPU_SCAN_MIN = 256
"""gpu: a scan of at least this many values per outer index is shared by a workgroup (chunks,
totals scanned in shared memory, chunks again); a shorter one is a thread's, in order."""

ROW_PARALLELISM = 64
"""cpu, masked elementwise kernels: with fewer rows than this, a row's loop is split into chunks
(of at least ROW_CHUNK_MIN elements) that are global ids of their own, so the threads share it."""
ROW_CHUNK_MIN = 4096
ROW_MIN = 8
"""cpu, unmasked elementwise kernels whose flat index would need divisions per element: the row
strategy where the innermost outer dim has at least this many elements (shorter rows: the flat
index, whose divisions then cost about as much as a row's loop)."""

SUM_BLOCK_GROUP = 32
"""A blocked float sum adds at most this many block sums into one partial before the partial is
added into the next level's (see _Lowerer._sum_blocks)."""

# Expr op -> how to lower it; dispatch must cover every op a kernel expression can hold
_EXPR_OPS = set(ALU) | set(CONVERSIONS) | set(LEAVES) | set(INDEXED)


class _Lowerer:
    def __init__(self, kernel: Kernel, opts: LowerOptions):
        self.k = kernel
        self.opts = opts
        self.b = LoopBuilder()
        self.axes = tuple(sorted(kernel.axes))
        self.outer_dims = tuple(d for d, s in enumerate(kernel.outer) if d not in self.axes and s > 1)
        self.n_outer = prod(kernel.outer)
        self.params: list[Inst] = []
        self.moved: list[Inst] = []  # the runtime offset of each slot (Kernel.offsets_arg), as INDEX
        self.accs: list[Inst | _LaneAcc] = []  # finished value of each reduction, for the current outer index
        self.lane: Inst | None = None  # outer-blocked cpu: the current index in the block
        self.known: Known = {}  # what the open loop segments and versions tell of the phase index
        self.global_size: tuple[int, ...] = (0,)
        self.local_size: tuple[int, ...] = (1,)

    # -- entry
    def run(self) -> LoopProgram:
        specs = tuple(ParamSpec(a.dtype, a.output, a.size) for a in self.k.args)
        if self.n_outer > 0:
            self.params = [self.b.emit(Opc.PARAM, a.dtype, (), i) for i, a in enumerate(self.k.args)]
            if self.k.offsets_arg is not None:  # read once, before any loop
                offsets = self.k.args[self.k.offsets_arg]
                self.moved = [self.b.cast(self.b.load(self.params[self.k.offsets_arg], self.b.const(j), offsets.dtype, True), INDEX)
                              for j in range(offsets.size)]
            if self.opts.target == "cpu":
                self._lower_cpu()
            elif any(s.scatter is not None for s in self.k.stores):
                self._lower_gpu_scatter()
            elif self._is_long_gpu_scan():
                self._lower_gpu_scan()
            elif (max(self._extents(), default=0) <= self.opts.gpu_serial_max_extent
                  or any(s.scan is not None for s in self.k.stores)):
                # (a scan: one thread runs each outer index's scan in order; a long one over few
                # rows arrives blocked into many rows, see ug_core.array_api.scans)
                self._lower_gpu_thread_per_outer()
            else:
                self._lower_gpu_workgroup_per_outer()
        program = LoopProgram(self.k.name, self.opts.target, specs, self.global_size, self.local_size,
                              self.b.finish())
        program.verify()
        return program

    def _extent(self, shape: tuple[int, ...]) -> int:
        """Number of reduced-index positions of a phase."""
        return prod([shape[d] for d in self.axes])

    def _extents(self) -> list[int]:
        return [self._extent(shape) for _, shape, _ in self.k.phases()]

    # -- strategies
    def _lower_cpu(self) -> None:
        if self.opts.outer_block > 1 and self._wants_outer_block():
            self._lower_cpu_outer_blocked(self.opts.outer_block)
            return
        if self._is_masked_elementwise():
            self._lower_cpu_rows()
            return
        self.global_size, self.local_size = (self.n_outer,), (1,)
        outer = self.b.emit(Opc.SPECIAL, INDEX, (), (Special.GLOBAL_ID, 0))
        copies = max((_copies(self._phase_cuts(shape, [e])) for _, shape, e in self.k.phases()), default=1)
        for _ in self._versions(self.outer_dims, functools.partial(self._outer_digit, outer, self.outer_dims),
                                [e for _, _, e in self.k.phases()], copies):
            self.accs = []
            self._serial_phases(outer)

    def _outer_digit(self, lin: Inst, dims: tuple[int, ...], d: int) -> Inst:
        """The index along outer dim d, a digit of `lin` over the outer `dims`."""
        return self._digit(lin, tuple(self.k.outer[x] for x in dims), dims.index(d))

    # -- cpu, elementwise kernels that read through masks: a loop per row
    def _is_masked_elementwise(self) -> bool:
        """An elementwise kernel (no reduction, no scan) with a mask on some outer dim, or with a
        gather and rows (`emb[ids] * s`: a row's index math and index load are the backend's to
        hoist out of the loop over the row, whose gathered loads are then contiguous)."""
        if self.k.reductions or not self.outer_dims or any(self._extent(s.shape) > 1 for s in self.k.stores):
            return False
        exprs = [s.expr for s in self.k.stores]
        if len(self.outer_dims) > 1 and any(e.op is Op.GATHER for e in dag.toposort(exprs, lambda e: e.srcs)):
            return True
        views = _first_views(exprs)
        if any(len(_mask_bounds(views, d, self.k.outer[d])) > 2 for d in self.outer_dims):
            return True
        return self._divides_per_element(exprs)

    def _divides_per_element(self, exprs: list[Expr]) -> bool:
        """Whether a flat index over the outer dims would be unravelled into several digits for
        every element (a store or a single-view load that walks the outer dims in two or more
        contiguous runs: an im2col copy, a transposing copy; a broadcast's one modulo does not
        count), where a row of at least ROW_MIN
        elements per global id computes them once per row and its loop reads and writes at a
        constant stride (which vectorizes). Loads through a chain of views keep the flat index
        (their divisions stay in the row's loop either way)."""
        if self.k.outer[self.outer_dims[-1]] < ROW_MIN:
            return False
        views = [s.view for s in self.k.stores]
        for node in dag.toposort(exprs, lambda e: e.srcs):
            if node.op is Op.LOAD:
                if len(node.arg[1]) != 1:
                    return False
                views.append(node.arg[1][0])
        dims = self.outer_dims

        def runs(v: View) -> int:
            """The digits a flat index unravels into for v (as _linear_terms groups them): runs
            of dims contiguous in v, those of stride 0 (a broadcast) not counted."""
            count, g = 0, 0
            while g < len(dims):
                h = g
                while h + 1 < len(dims) and v.strides[dims[h]] == v.strides[dims[h + 1]] * v.shape[dims[h + 1]]:
                    h += 1
                count += v.strides[dims[h]] != 0
                g = h + 1
            return count
        return any(runs(v) > 1 for v in views)

    def _lower_cpu_rows(self) -> None:
        """The global id is a row (an index over the outer dims but the innermost; a chunk of
        one where there are fewer rows than ROW_PARALLELISM), which loops over the innermost
        dim, split at the masks' bounds (_loop), in one version per segment of the other dims'
        masks (_versions): in each segment a load is a plain load, which vectorizes, or 0."""
        b = self.b
        inner, rows = self.outer_dims[-1], self.outer_dims[:-1]
        n_rows, n = prod([self.k.outer[d] for d in rows]), self.k.outer[inner]
        chunks = max(1, min(-(-ROW_PARALLELISM // n_rows), n // ROW_CHUNK_MIN))
        length = -(-n // chunks)
        chunks = -(-n // length)
        self.global_size, self.local_size = (n_rows * chunks,), (1,)
        gid = b.emit(Opc.SPECIAL, INDEX, (), (Special.GLOBAL_ID, 0))
        row = b.idiv(gid, chunks)
        exprs = [s.expr for s in self.k.stores]
        cuts = _cuts(_first_views(exprs), inner, n)
        first = b.mul(b.mod(gid, chunks), length)  # the chunk: [first, end)
        end = b.min(b.add(first, b.const(length)), b.const(n))
        for _ in self._versions(rows, functools.partial(self._outer_digit, row, rows), exprs, _copies(cuts)):
            lo = first
            if chunks > 1:
                # a loop of one trip over the chunk, holding the segments' loops as a blocked
                # sum's blocks hold theirs (which backends' work estimates expect)
                lo = b.range(first, end, length)
            for j in self._loop(lo, end, cuts):
                index = _PhaseIndex(self.k.outer, row, rows, j, (inner,))
                for s in self.k.stores:
                    self._store_value(s, index, b.cast(self._expr(s.expr, index), self.k.args[s.buf].dtype))
            if chunks > 1:
                b.close()

    # -- cpu, a block of consecutive outer indices per global id
    def _wants_outer_block(self) -> bool:
        """Whether the outer-blocked strategy pays: the reductions' loads read consecutive
        outer indices contiguously and the reduced index with a large stride (so the serial
        loop over the reduced index is neither cache-friendly nor vectorizable)."""
        if not self.outer_dims or any(s.scatter is not None for s in self.k.stores):
            return False
        loops = [(r.shape, r.expr) for r in self.k.reductions if self._extent(r.shape) > 1]
        loops += [(s.shape, s.expr) for s in self.k.stores if s.scan is not None and self._extent(s.shape) > 1]
        if not loops:
            return False
        if self.opts.outer_block_always:
            return True
        return _prefers_outer_block(loops, self.axes, self.outer_dims[-1])

    def _lower_cpu_outer_blocked(self, block: int) -> None:
        b = self.b
        n = self.n_outer
        self.global_size, self.local_size = (-(-n // block),), (1,)
        gid = b.emit(Opc.SPECIAL, INDEX, (), (Special.GLOBAL_ID, 0))
        base = b.mul(gid, block)
        if n % block:  # the last block holds n % block indices
            count = b.alu(Op.MIN, (b.add(b.mul(gid, -block), b.const(n)), b.const(block)), INDEX)
        else:
            count = b.const(block)

        def lanes() -> Inst:  # opens `for lane in block`; returns the outer index base + lane
            self.lane = b.range(b.const(0), count)
            return b.add(base, self.lane)

        def lanes_only() -> Inst:  # the same loop, for code that only touches acc[lane]
            self.lane = b.range(b.const(0), count)
            return self.lane

        def end_lanes() -> None:
            b.close()
            self.lane = None

        for r in self.k.reductions:
            self.accs.append(self._lane_reduce(r, block, lanes, lanes_only, end_lanes))
        for s in self.k.stores:
            e = self._extent(s.shape)
            if e == 0:
                continue
            if e > 1 and s.scan is not None:
                self._lane_scan(s, block, e, lanes, lanes_only, end_lanes)
                continue
            if e == 1:
                self._store(s, lanes(), None)
                end_lanes()
                continue
            for i in self._loop(b.const(0), b.const(e), self._phase_cuts(s.shape, [s.expr])):
                self._store(s, lanes(), i)
                end_lanes()

    def _lane_scan(self, s: Store, block: int, extent: int, lanes: Callable[[], Inst], lanes_only: Callable[[], Inst],
                   end_lanes: Callable[[], None]) -> None:
        """A scan store, one running value per lane in a small array, the loop over the lanes
        innermost: each step reads and writes the block's outer indices contiguously (e.g. a
        cumulative sum down the columns of a matrix)."""
        b = self.b
        assert s.scan is not None
        out_dtype = self.k.args[s.buf].dtype
        dt, init = _scan_acc(s, out_dtype)
        acc = b.emit(Opc.DEFINE_LOCAL, dt, (), block)
        lanes_only()
        b.emit(Opc.LOCAL_STORE, None, (acc, self._lane(), b.const(init, dt)))
        end_lanes()
        i = b.range(b.const(0), b.const(extent))
        index = self._phase(s.shape, lanes(), i)
        running = b.alu(REDUCE[s.scan].combine, (b.emit(Opc.LOCAL_LOAD, dt, (acc, self._lane())),
                                                  b.cast(self._expr(s.expr, index), dt)), dt)
        b.emit(Opc.LOCAL_STORE, None, (acc, self._lane(), running))
        self._store_value(s, index, b.cast(running, out_dtype))
        end_lanes()
        b.close()

    def _lane(self) -> Inst:
        """The lane index of the open `for lane in block` loop (outer-blocked cpu lowering)."""
        assert self.lane is not None, "no lane loop is open"
        return self.lane

    def _lane_reduce(self, r: Reduction, block: int, lanes: Callable[[], Inst], lanes_only: Callable[[], Inst],
                     end_lanes: Callable[[], None]) -> Inst | _LaneAcc:
        b = self.b
        e = self._extent(r.shape)
        init = self._identity(r)
        combine = REDUCE[r.op].combine
        if e == 0:
            return b.const(init, r.dtype)
        dt = _acc_dtype(r)
        acc = b.emit(Opc.DEFINE_LOCAL, dt, (), block)

        def fill(local: Inst) -> None:
            lanes_only()
            b.emit(Opc.LOCAL_STORE, None, (local, self._lane(), b.const(init, dt)))
            end_lanes()

        def update(local: Inst, i: Inst) -> None:
            outer = lanes()
            value = self._phase_value(r.expr, r.shape, outer, i, dt)
            cur = b.emit(Opc.LOCAL_LOAD, dt, (local, self._lane()))
            b.emit(Opc.LOCAL_STORE, None, (local, self._lane(), b.alu(combine, (cur, value), dt)))
            end_lanes()

        if e == 1:
            outer = lanes()
            b.emit(Opc.LOCAL_STORE, None, (acc, self._lane(), self._phase_value(r.expr, r.shape, outer, None, dt)))
            end_lanes()
            return _LaneAcc(acc, r.dtype)
        fill(acc)
        sizes = self._sum_blocks(r, dt, e)
        cuts = self._phase_cuts(r.shape, [r.expr])

        def accumulate(into: Inst, lo: Inst, end: Inst, level: int) -> None:
            if level == len(sizes):
                for i in self._loop(lo, end, cuts):
                    update(into, i)
                return
            # blocked summation, as in _serial_reduce: a partial sum per lane per block of rows
            part = b.emit(Opc.DEFINE_LOCAL, dt, (), block)
            start = b.range(lo, end, sizes[level])
            fill(part)
            stop = b.add(start, b.const(sizes[level]))
            if e % sizes[level]:
                stop = b.alu(Op.MIN, (stop, b.const(e)), INDEX)
            accumulate(part, start, stop, level + 1)
            lanes_only()
            total = b.alu(combine, (b.emit(Opc.LOCAL_LOAD, dt, (into, self._lane())),
                                    b.emit(Opc.LOCAL_LOAD, dt, (part, self._lane()))), dt)
            b.emit(Opc.LOCAL_STORE, None, (into, self._lane(), total))
            end_lanes()
            b.close()

        accumulate(acc, b.const(0), b.const(e), 0)
        del accumulate  # it refers to itself: a reference cycle, which only the cyclic GC frees
        return _LaneAcc(acc, r.dtype)

    def _lower_gpu_thread_per_outer(self) -> None:
        b = self.b
        local = min(self.opts.local_size, self.n_outer)
        grid = split_grid(-(-self.n_outer // local), self.opts.max_global_size)
        self.global_size, self.local_size = grid, (local,) + (1,) * (len(grid) - 1)
        gidx = b.add(b.mul(self.b.group_index(grid), local), self._local_id(local))
        guarded = prod(grid) * local != self.n_outer
        if guarded:  # the last workgroup(s) run past the end
            b.if_(b.alu(Op.CMPLT, (gidx, b.const(self.n_outer)), BOOL))
        self._serial_phases(gidx)
        if guarded:
            b.close()

    def _is_long_gpu_scan(self) -> bool:
        """A kernel of scan stores of one extent long enough to share among a workgroup."""
        stores = self.k.stores
        return (not self.k.reductions and all(s.scan is not None for s in stores)
                and len({self._extent(s.shape) for s in stores}) == 1 and self._extent(stores[0].shape) >= GPU_SCAN_MIN)

    def _lower_gpu_scan(self) -> None:
        """gpu, a kernel of long scans: a workgroup per outer index, whose threads take consecutive
        chunks of the row (about as many chunks as values in each). Each thread combines its
        chunk into a total; the totals' inclusive scan is made in shared memory (Hillis-Steele:
        log2(local) steps between barriers); each thread then runs its chunk again from the
        total before it, storing the running values. The combination order is fixed by the
        sizes alone: the same bits on every run (a float sum's differ from a sequential scan's
        in the last places, as a blocked scan's do)."""
        b = self.b
        e = self._extent(self.k.stores[0].shape)
        local = max(1, min(self.opts.local_size, _next_pow2(math.isqrt(e))))
        chunk = -(-e // local)
        grid = split_grid(self.n_outer, self.opts.max_global_size)
        self.global_size, self.local_size = grid, (local,) + (1,) * (len(grid) - 1)
        row = self.b.group_index(grid)
        lid = self._local_id(local)
        first = b.mul(lid, chunk)
        end = b.min(b.add(first, b.const(chunk)), b.const(e))
        guarded = prod(grid) != self.n_outer
        if guarded:  # uniform per workgroup, so the barriers inside stay legal
            b.if_(b.alu(Op.CMPLT, (row, b.const(self.n_outer)), BOOL))
        for s in self.k.stores:
            assert s.scan is not None
            dt, init = _scan_acc(s, self.k.args[s.buf].dtype)
            combine = REDUCE[s.scan].combine
            total = b.emit(Opc.DEFINE_ACC, dt, (), init)
            i = b.range(first, end)
            b.emit(Opc.ACC_UPDATE, None, (total, b.cast(self._expr(s.expr, self._phase(s.shape, row, i)), dt)), combine)
            b.close()
            before = self._exclusive_scan(b.emit(Opc.ACC_READ, dt, (total,)), lid, local, dt, init, combine)
            running = b.emit(Opc.DEFINE_ACC, dt, (), init)
            b.emit(Opc.ACC_UPDATE, None, (running, before), combine)
            i = b.range(first, end)
            index = self._phase(s.shape, row, i)
            b.emit(Opc.ACC_UPDATE, None, (running, b.cast(self._expr(s.expr, index), dt)), combine)
            self._store_value(s, index, b.cast(b.emit(Opc.ACC_READ, dt, (running,)), self.k.args[s.buf].dtype))
            b.close()
        if guarded:
            b.close()

    def _exclusive_scan(self, value: Inst, lid: Inst, local: int, dt: np.dtype, init: Any, combine: Op) -> Inst:
        """The combination of the values of the threads before this one in the workgroup (the
        identity for thread 0): an inclusive Hillis-Steele scan in a shared array, then the
        neighbour's slot."""
        b = self.b
        if local == 1:
            return b.const(init, dt)
        smem = b.emit(Opc.DEFINE_LOCAL, dt, (), local)
        b.emit(Opc.LOCAL_STORE, None, (smem, lid, value))
        b.emit(Opc.BARRIER, None)
        step = 1
        while step < local:
            mine = b.emit(Opc.LOCAL_LOAD, dt, (smem, lid))
            other = b.emit(Opc.LOCAL_LOAD, dt, (smem, b.max(b.add(lid, b.const(-step)), b.const(0))))
            has = b.alu(Op.CMPLE, (b.const(step), lid), BOOL)
            new = b.alu(Op.WHERE, (has, b.alu(combine, (other, mine), dt), mine), dt)
            b.emit(Opc.BARRIER, None)
            b.emit(Opc.LOCAL_STORE, None, (smem, lid, new))
            b.emit(Opc.BARRIER, None)
            step *= 2
        previous = b.emit(Opc.LOCAL_LOAD, dt, (smem, b.max(b.add(lid, b.const(-1)), b.const(0))))
        return b.alu(Op.WHERE, (b.alu(Op.CMPLT, (b.const(0), lid), BOOL), previous, b.const(init, dt)), dt)

    def _lower_gpu_workgroup_per_outer(self) -> None:
        b = self.b
        # no more threads than the longest phase can keep busy
        local = min(self.opts.local_size, _next_pow2(max(self._extents())))
        grid = split_grid(self.n_outer, self.opts.max_global_size)
        self.global_size, self.local_size = grid, (local,) + (1,) * (len(grid) - 1)
        # one shared array per reduction, so that reading one reduction's result never
        # races with the next reduction's writes (no barrier needed between them)
        shared = [b.emit(Opc.DEFINE_LOCAL, _acc_dtype(r), (), local) if local > 1 else None for r in self.k.reductions]
        row = self.b.group_index(grid)
        lid = self._local_id(local)
        guarded = prod(grid) != self.n_outer
        if guarded:  # uniform per workgroup, so the barriers inside stay legal
            b.if_(b.alu(Op.CMPLT, (row, b.const(self.n_outer)), BOOL))
        for r, smem in zip(self.k.reductions, shared):
            self.accs.append(self._cooperative_reduce(r, row, lid, local, smem))
        for s in self.k.stores:
            e = self._extent(s.shape)
            if e == 0:
                continue
            if e == 1 and local > 1:  # one element: thread 0 writes it
                b.if_(b.alu(Op.CMPEQ, (lid, b.const(0)), BOOL))
                self._store(s, row, None)
                b.close()
            elif e == 1:
                self._store(s, row, None)
            else:
                for i in self._loop(b.const(0), b.const(e), self._phase_cuts(s.shape, [s.expr]), local, lid):
                    self._store(s, row, i)
        if guarded:
            b.close()

    def _local_id(self, local: int) -> Inst:
        return self.b.emit(Opc.SPECIAL, INDEX, (), (Special.LOCAL_ID, 0)) if local > 1 else self.b.const(0)

    # -- loops split at the masks' bounds
    def _phase_cuts(self, shape: tuple[int, ...], exprs: list[Expr]) -> _Cuts | None:
        """Where to split a phase's loop over its reduced index: at the bounds of the masks on
        its leading reduced dim (a mask on a later one keeps its gate). None: nowhere."""
        red = [d for d in self.axes if shape[d] > 1]
        if not red:
            return None
        return _cuts(_first_views(exprs), red[0], shape[red[0]], prod([shape[d] for d in red[1:]]))

    def _loop(self, lo: Inst, end: Inst, cuts: _Cuts | None, step: int = 1,
              lane: Inst | None = None) -> Iterator[Inst]:
        """`for i in range(lo + lane, end, step)` (lo a multiple of step), split at `cuts` (see
        _segments): yields each loop's counter while its body is open."""
        for start, stop in self._segments(lo, end, cuts, step, lane):
            yield self.b.range(start, stop, step)
            self.b.close()

    def _segments(self, lo: Inst, end: Inst, cuts: _Cuts | None, step: int = 1,
                  lane: Inst | None = None) -> Iterator[tuple[Inst, Inst]]:
        """The (start, end) of each loop that runs `for i in range(lo + lane, end, step)` (lo a
        multiple of step): one loop, or split at `cuts` into one loop per segment of the cut
        dim, in order, each knowing its segment (self.known) while the caller emits it, so that
        the mask tests on the dim fold: a gated load becomes a load or 0, a select on a mask
        one of its values."""
        b = self.b
        if cuts is None:
            yield (lo if lane is None else b.add(lo, lane)), end
            return
        for a, z in zip(cuts.bounds, cuts.bounds[1:]):
            start = b.max(lo, b.const(a * cuts.inner))
            if lane is not None:  # the first index >= start that is lane (mod step)
                behind = b.add(b.add(lane, b.const(step)), b.mul(b.mod(start, step), -1))
                start = b.add(start, b.mod(behind, step))
            stop = b.min(end, b.const(z * cuts.inner))
            if start.opc is Opc.CONST and stop.opc is Opc.CONST and start.arg >= stop.arg:
                continue
            self.known[cuts.dim] = (a, z)
            yield start, stop
            del self.known[cuts.dim]

    def _versions(self, dims: tuple[int, ...], digit: Callable[[int], Inst], exprs: list[Expr],
                  copies: int) -> Iterator[None]:
        """cpu: the code for an outer index once per combination of the segments of the outer
        `dims` (see _Cuts) that the masks in `exprs` cut, each under an IF on its segments and
        knowing them (self.known), so that a pad's first row, a concat's parts along an outer
        dim, ... each get code without those mask tests. Dims from the innermost while the
        versions, times the `copies` of a loop body each holds, stay within MAX_COPIES; yields
        once per version, with its IF open."""
        views = _first_views(exprs)
        chosen: list[tuple[int, tuple[int, ...]]] = []
        for d in reversed(dims):
            cuts = _cuts(views, d, self.k.outer[d])
            if cuts is not None and copies * _copies(cuts) <= MAX_COPIES:
                chosen.append((d, cuts.bounds))
                copies *= _copies(cuts)
        versions: list[Known] = [{}]
        for d, bounds in chosen:
            versions = [{**v, d: seg} for v in versions for seg in zip(bounds, bounds[1:])]
        for facts in versions:
            cond: Inst | None = None
            for d, (a, z) in facts.items():
                cond = self._range_test(functools.partial(digit, d), a, z, (0, self.k.outer[d]), cond)
            if cond is not None:
                self.b.if_(cond)
            self.known.update(facts)
            yield
            for d in facts:
                del self.known[d]
            if cond is not None:
                self.b.close()

    # -- phases, one thread doing a whole outer index
    def _serial_phases(self, outer: Inst) -> None:
        b = self.b
        for r in self.k.reductions:
            self.accs.append(self._serial_reduce(r, outer))
        for s in self.k.stores:
            e = self._extent(s.shape)
            if s.scatter is not None:
                self._serial_scatter(s, outer)
            elif e == 1:  # (a scan of one value is the value: combine(identity, v) == v)
                self._store(s, outer, None)
            elif e > 1 and s.scan is not None:
                self._serial_scan(s, outer)
            elif e > 1:
                for i in self._loop(b.const(0), b.const(e), self._phase_cuts(s.shape, [s.expr])):
                    self._store(s, outer, i)

    def _serial_scatter(self, s: Store, outer: Inst) -> None:
        """A scatter store (ops.Op.SCATTER): the outer index's row of the output filled with the
        identity, then `for i: row[slot(i)] = combine(row[slot(i)], value(i))`, in order."""
        self._scatter_fill(s, outer, self.b.const(0), 1)
        self._scatter_combine(s, outer)

    def _lower_gpu_scatter(self) -> None:
        """gpu, a kernel of scatter stores: a workgroup per part, whose threads fill the part's
        row with the identity (each a strided share: no thread loops over a whole row), then,
        after a barrier, combine the part's values into it: all threads, each a strided share,
        with atomic updates where the target has them for the store's ints (exact: any order
        gives the same result), else the first thread alone, in order (floats: a sum's bits
        depend on its order, and scatters are deterministic)."""
        b = self.b
        assert all(s.scatter is not None for s in self.k.stores), "a scatter kernel stores only scatters"
        local = min(self.opts.local_size, _next_pow2(max(s.expr.arg[1] for s in self.k.stores)))
        grid = split_grid(self.n_outer, self.opts.max_global_size)
        self.global_size, self.local_size = grid, (local,) + (1,) * (len(grid) - 1)
        part = self.b.group_index(grid)
        lid = self._local_id(local)
        guarded = prod(grid) != self.n_outer
        if guarded:  # uniform per workgroup, so the barrier inside stays legal
            b.if_(b.alu(Op.CMPLT, (part, b.const(self.n_outer)), BOOL))
        # reductions fused into the kernel (the values read them: a gradient's scatter-add of a
        # softmax's cotangent): every thread computes them for its part, serially (rare, small)
        for r in self.k.reductions:
            self.accs.append(self._serial_reduce(r, part))
        for s in self.k.stores:
            self._scatter_fill(s, part, lid, local)
        if local > 1:
            b.emit(Opc.BARRIER, None)
        atomic = [s for s in self.k.stores if local > 1 and self._atomic_scatter(s)]
        for s in atomic:
            self._scatter_combine(s, part, lid, local)
        in_order = [s for s in self.k.stores if s not in atomic]
        if in_order and local > 1:
            b.if_(b.alu(Op.CMPEQ, (lid, b.const(0)), BOOL))
        for s in in_order:
            self._scatter_combine(s, part)
        if in_order and local > 1:
            b.close()
        if guarded:
            b.close()

    def _atomic_scatter(self, s: Store) -> bool:
        """Whether the target combines this scatter's values atomically (loop_ir ATOMIC)."""
        assert s.scatter is not None
        dt = self.k.args[s.buf].dtype
        return (dt.kind in "iu" and dt.itemsize * 8 in self.opts.atomic_int_bits
                and REDUCE[s.scatter.arg[0]].combine in ATOMIC_COMBINE
                and self._extent(s.shape) > 1)

    def _scatter_fill(self, s: Store, outer: Inst, first: Inst, step: int) -> None:
        """Slots first, first + step, ... of the outer index's row: the identity."""
        b = self.b
        assert s.scatter is not None
        _, slots, identity = s.scatter.arg
        row = b.mul(outer, slots)
        k = b.range(first, b.const(slots), step)
        b.emit(Opc.STORE, None, (self.params[s.buf], b.add(row, k), b.const(identity, self.k.args[s.buf].dtype)))
        b.close()

    def _scatter_combine(self, s: Store, outer: Inst, first: Inst | None = None, step: int = 1) -> None:
        """`for i: row[slot(i)] = combine(row[slot(i)], value(i))`, in order; or, given the
        thread's `first` value and the `step` between its values, an atomic update per value."""
        b = self.b
        root = s.scatter
        assert root is not None
        rop, slots, _ = root.arg
        dt = self.k.args[s.buf].dtype
        out = self.params[s.buf]
        row = b.mul(outer, slots)
        extent = self._extent(s.shape)
        if first is not None:
            i: Inst | None = b.range(first, b.const(extent), step)
        else:
            i = b.range(b.const(0), b.const(extent)) if extent > 1 else None
        index = self._phase(s.shape, outer, i)
        slot, value = (self._expr(e, index) for e in root.srcs)
        at = b.add(row, slot)
        if first is not None:
            b.emit(Opc.ATOMIC, None, (out, at, b.cast(value, dt)), REDUCE[rop].combine)
        else:
            old = b.load(out, at, dt, False)
            b.emit(Opc.STORE, None, (out, at, b.alu(REDUCE[rop].combine, (old, b.cast(value, dt)), dt)))
        if i is not None:
            b.close()

    def _expr_scatter(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        raise AssertionError("a SCATTER is a store's root, lowered by _serial_scatter")

    def _serial_scan(self, s: Store, outer: Inst) -> None:
        """A scan store: `for i: acc = combine(acc, value(i)); out[i] = acc`, in order (a
        loop-carried accumulator and a store per step: a tight loop)."""
        b = self.b
        assert s.scan is not None
        out_dtype = self.k.args[s.buf].dtype
        dt, init = _scan_acc(s, out_dtype)
        acc = b.emit(Opc.DEFINE_ACC, dt, (), init)
        i = b.range(b.const(0), b.const(self._extent(s.shape)))
        index = self._phase(s.shape, outer, i)
        b.emit(Opc.ACC_UPDATE, None, (acc, b.cast(self._expr(s.expr, index), dt)), REDUCE[s.scan].combine)
        self._store_value(s, index, b.cast(b.emit(Opc.ACC_READ, dt, (acc,)), out_dtype))
        b.close()

    def _serial_reduce(self, r: Reduction, outer: Inst) -> Inst:
        b = self.b
        e = self._extent(r.shape)
        if e == 0:
            return b.const(self._identity(r), r.dtype)
        if e == 1:  # combine(identity, v) == v
            return self._phase_value(r.expr, r.shape, outer, None, r.dtype)
        dt = _acc_dtype(r)
        acc = self._accumulate(r, dt, lambda i: self._phase_value(r.expr, r.shape, outer, i, dt))
        return b.cast(b.emit(Opc.ACC_READ, dt, (acc,)), r.dtype)

    def _accumulate(self, r: Reduction, dt: np.dtype, value: Callable[[Inst], Inst], local: int = 1,
                    lid: Inst | None = None) -> Inst:
        """An accumulator of `dt` holding r's combine of value(i) over the phase's reduced index
        i; with `local` threads, thread `lid`'s share, i = lid (mod local) (threads past the
        extent keep the identity). Split at the masks' bounds (_segments), each segment into a
        partial of its own, combined after its loops, so that the segments' dependency chains
        are independent (one accumulator through a concat of 8 rows of 512 made a row max 3x
        slower than a plain one: 512 maxes in one chain). A long float sum in blocks
        (_sum_blocks, of `local` * size with threads)."""
        b = self.b
        init = self._identity(r)
        acc = b.emit(Opc.DEFINE_ACC, dt, (), init)
        cuts = self._phase_cuts(r.shape, [r.expr])
        for start, stop in self._segments(b.const(0), b.const(self._extent(r.shape)), cuts):
            lo, hi = int(start.arg), int(stop.arg)  # (constants: the bounds of a segment of constants)
            part = acc if cuts is None else b.emit(Opc.DEFINE_ACC, dt, (), init)
            sizes = [size * local for size in self._sum_blocks(r, dt, -(-(hi - lo) // local))]
            # a thread's first index past a block's start (every one is lo (mod local))
            shift = lid if lid is None or lo % local == 0 else b.mod(b.add(lid, b.const(local - lo % local)), local)
            self._blocks(part, start, stop, hi - lo, sizes, value, r, shift, local)
            if part is not acc:
                b.emit(Opc.ACC_UPDATE, None, (acc, b.emit(Opc.ACC_READ, dt, (part,))), REDUCE[r.op].combine)
        return acc

    def _blocks(self, into: Inst, lo: Inst, end: Inst, count: int, sizes: list[int], value: Callable[[Inst], Inst],
                r: Reduction, shift: Inst | None, step: int) -> None:
        """into = combine(into, value(i)) for i in [lo, end) (i = lo + shift (mod step)), in blocks
        of sizes[0], each in blocks of sizes[1], ...: a partial per block, combined into the
        enclosing one (see _sum_blocks). `count`: the indices of the whole blocked range (where
        it is no multiple of a block size, its last block of that size ends early)."""
        b = self.b
        combine = REDUCE[r.op].combine
        if not sizes:
            i = b.range(lo if shift is None else b.add(lo, shift), end, step)
            b.emit(Opc.ACC_UPDATE, None, (into, value(i)), combine)
            b.close()
            return
        start = b.range(lo, end, sizes[0])
        part = b.emit(Opc.DEFINE_ACC, into.dtype, (), self._identity(r))
        stop = b.add(start, b.const(sizes[0]))
        if count % sizes[0]:
            stop = b.min(stop, end)
        self._blocks(part, start, stop, count, sizes[1:], value, r, shift, step)
        b.emit(Opc.ACC_UPDATE, None, (into, b.emit(Opc.ACC_READ, into.dtype, (part,))), combine)
        b.close()

    def _sum_blocks(self, r: Reduction, dt: np.dtype, count: int) -> list[int]:
        """Block sizes (outermost first) of a blocked float sum of `count` values: `sum_block`,
        then groups of SUM_BLOCK_GROUP blocks while more remain, so that each partial sum adds
        at most about that many values (the error grows with the largest number of additions
        into one partial: ~1e-6 for a 1M-element float32 sum with one level, ~2e-7 with two).
        Empty: not a float sum, or too short to block."""
        if r.op is not Op.SUM or dt.kind != "f" or count <= self.opts.sum_block:
            return []
        sizes = [self.opts.sum_block]
        while count > sizes[0] * SUM_BLOCK_GROUP:
            sizes.insert(0, sizes[0] * SUM_BLOCK_GROUP)
        return sizes

    # -- phases, a workgroup sharing one outer index
    def _cooperative_reduce(self, r: Reduction, row: Inst, lid: Inst, local: int, smem: Inst | None) -> Inst:
        b = self.b
        e = self._extent(r.shape)
        init = self._identity(r)
        combine = REDUCE[r.op].combine
        if e == 0:
            return b.const(init, r.dtype)
        if e == 1:  # every thread computes the single value itself: no communication
            return self._phase_value(r.expr, r.shape, row, None, r.dtype)
        dt = _acc_dtype(r)
        # each thread: partial over i = lid, lid + local, ...
        part = self._accumulate(r, dt, lambda i: self._phase_value(r.expr, r.shape, row, i, dt), local, lid)
        partial = b.emit(Opc.ACC_READ, dt, (part,))
        if smem is None:  # a single thread: its partial is the result
            return b.cast(partial, r.dtype)
        # tree: every slot [0, local) is written before the first barrier; each step folds the
        # upper part [half, n) onto [0, n - half) and halves n (rounding up: any `local` works)
        b.emit(Opc.LOCAL_STORE, None, (smem, lid, partial))
        b.emit(Opc.BARRIER, None)
        n = local
        while n > 1:
            half = (n + 1) // 2
            b.if_(b.alu(Op.CMPLT, (lid, b.const(n - half)), BOOL))
            mine = b.emit(Opc.LOCAL_LOAD, dt, (smem, lid))
            other = b.emit(Opc.LOCAL_LOAD, dt, (smem, b.add(lid, b.const(half))))
            b.emit(Opc.LOCAL_STORE, None, (smem, lid, b.alu(combine, (mine, other), dt)))
            b.close()
            b.emit(Opc.BARRIER, None)
            n = half
        # broadcast: after the last barrier every thread reads the total
        return b.cast(b.emit(Opc.LOCAL_LOAD, dt, (smem, b.const(0))), r.dtype)

    # -- phase bodies
    def _identity(self, r: Reduction) -> Any:
        return r.dtype.type(dtypes.identity(REDUCE[r.op].name, r.dtype)).item()

    def _phase(self, shape: tuple[int, ...], outer: Inst, red: Inst | None) -> _PhaseIndex:
        assert len(shape) == self.k.rank and all(
            shape[d] == self.k.outer[d] for d in range(self.k.rank) if d not in self.axes), (shape, self.k.outer)
        red_dims = tuple(d for d in self.axes if shape[d] > 1)
        assert (red is None) == (not red_dims), (shape, red)
        return _PhaseIndex(shape, outer, self.outer_dims, red, red_dims, self.lane)

    def _phase_value(self, expr: Expr, shape: tuple[int, ...], outer: Inst, red: Inst | None,
                     dtype: np.dtype) -> Inst:
        return self.b.cast(self._expr(expr, self._phase(shape, outer, red)), dtype)

    def _store(self, s: Store, outer: Inst, red: Inst | None) -> None:
        index = self._phase(s.shape, outer, red)
        self._store_value(s, index, self.b.cast(self._expr(s.expr, index), self.k.args[s.buf].dtype))

    def _store_value(self, s: Store, index: _PhaseIndex, value: Inst) -> None:
        """Store `value` (of the output's dtype) where store `s` writes at `index`."""
        assert s.view.mask is None, "a store through a masked view"
        self.b.emit(Opc.STORE, None, (self.params[s.buf], self._view_index(s.view, index, self._moved(s.slot)), value))

    def _expr(self, root: Expr, index: _PhaseIndex) -> Inst:
        """Lower one phase's expression; each (interned) node once."""
        done: dict[int, Inst] = {}
        for node in toposort(root):
            done[id(node)] = self._EXPR[node.op](self, node, [done[id(s)] for s in node.srcs], index)
        return done[id(root)]

    def _expr_load(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        buf, chain, slot = node.arg
        read_only = not self.k.args[buf].output
        element, gate = self._chain_index(chain, index, self._moved(slot))
        if gate is not None and gate.opc is Opc.CONST:  # never valid here
            return self.b.const(0, node.dtype)
        return self.b.load(self.params[buf], element, node.dtype, read_only, gate)

    def _expr_gather(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        buf = node.arg   # the element (srcs[0]) is in range: the scheduler clamped it
        return self.b.load(self.params[buf], srcs[0], node.dtype, not self.k.args[buf].output, None)

    def _expr_iota(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        chain, slot = node.arg
        element, gate = self._chain_index(chain, index, self._moved(slot))
        if gate is not None and gate.opc is Opc.CONST:  # never valid here
            return self.b.const(0, node.dtype)
        value = self.b.cast(element, node.dtype)
        if gate is None:
            return value
        if value.opc is Opc.CONST and value.dtype == BOOL and value.arg:  # a mask's indicator
            return gate
        return self.b.alu(Op.WHERE, (gate, value, self.b.const(0, node.dtype)), node.dtype)

    def _moved(self, slot: int | None) -> Inst | None:
        return None if slot is None else self.moved[slot]

    def _expr_const(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        return self.b.const(node.arg, node.dtype)

    def _expr_acc(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        acc = self.accs[node.arg]
        if isinstance(acc, _LaneAcc):
            assert index.lane is not None, "a per-lane accumulator read outside the lane loop"
            value = self.b.cast(self.b.emit(Opc.LOCAL_LOAD, acc.local.dtype, (acc.local, index.lane)), acc.dtype)
            return self.b.cast(value, node.dtype)
        return self.b.cast(acc, node.dtype)

    def _expr_cast(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        return self.b.cast(srcs[0], node.dtype)

    def _expr_bitcast(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        return self.b.emit(Opc.BITCAST, node.dtype, (srcs[0],))

    def _expr_alu(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        if node.op is Op.POW and srcs[1].opc is Opc.CONST:
            by_multiplies = _pow_by_multiplies(self.b, srcs[0], srcs[1].arg)
            if by_multiplies is not None:
                return by_multiplies
        return self.b.alu(node.op, tuple(srcs), node.dtype)

    _EXPR: dict[Op, Callable[..., Inst]] = {
        Op.LOAD: _expr_load, Op.IOTA: _expr_iota, Op.CONST: _expr_const, Op.ACC: _expr_acc, Op.CAST: _expr_cast,
        Op.GATHER: _expr_gather, Op.SCATTER: _expr_scatter, Op.BITCAST: _expr_bitcast,
        **dict.fromkeys(ALU, _expr_alu),
    }

    # -- index math
    def _chain_index(self, chain: ViewChain, index: _PhaseIndex, moved: Inst | None) -> tuple[Inst, Inst | None]:
        """(buffer element index, gate) read by a LOAD: the first view maps the phase index;
        each later view maps the previous view's result, a linear index into its shape's
        contiguous layout, which is unravelled over that shape. `moved`: a runtime offset added
        to the last view's (a slot, see kernel_params). The gate (None: always true) is where
        every view's mask holds; elsewhere the element index may be anything."""
        first = chain[0]
        gate = self._mask_gate(first, lambda d: self._phase_digit(index, d), None, self.known)
        if gate is not None and gate.opc is Opc.CONST:  # (false: nothing is read, the index is moot)
            return self.b.const(0), gate
        if len(chain) == 1:
            return self._view_index(first, index, moved), gate
        lin = self._view_index(first, index)
        for k, view in enumerate(chain[1:], 2):
            dims = [(size, stride) for size, stride in zip(view.shape, view.strides) if size != 1]
            if view.mask is not None:
                gate = self._mask_gate(view, functools.partial(self._digit, lin, view.shape), gate)
            terms = self._linear_terms(lin, [s for s, _ in dims], [st for _, st in dims])
            lin = self._sum(self._offset(view, moved if k == len(chain) else None), terms)
        return lin, gate

    def _mask_gate(self, view: View, digit: Callable[[int], Inst], gate: Inst | None,
                   known: Known | None = None) -> Inst | None:
        """`gate` and the condition that the index of each dim d (`digit(d)`) is in view's mask;
        None where that always holds, the constant False where it never does. `known`: per dim, a
        range [a, b) the index lies in, which decides the tests it settles."""
        if view.mask is None:
            return gate
        for d, ((lo, hi), size) in enumerate(zip(view.mask, view.shape)):
            a, z = (known or {}).get(d, (0, size))
            if lo >= z or hi <= a:
                return self.b.const(False, BOOL)
            gate = self._range_test(functools.partial(digit, d), lo, hi, (a, z), gate)
        return gate

    def _range_test(self, index: Callable[[], Inst], lo: int, hi: int, known: tuple[int, int],
                    gate: Inst | None) -> Inst | None:
        """`gate` and lo <= index() < hi, for an index known to lie in [known[0], known[1]): the
        tests that this does not settle."""
        b = self.b
        tests = ([b.alu(Op.CMPLE, (b.const(lo), index()), BOOL)] if lo > known[0] else []) + (
            [b.alu(Op.CMPLT, (index(), b.const(hi)), BOOL)] if hi < known[1] else [])
        for test in tests:  # (bool MUL is `and`)
            gate = test if gate is None else b.alu(Op.MUL, (gate, test), BOOL)
        return gate

    def _phase_digit(self, index: _PhaseIndex, d: int) -> Inst:
        """The index along dim d of the phase: a digit of the outer or the reduced linear index."""
        if d in index.outer_dims:
            dims, lin = index.outer_dims, index.outer_lin
        elif d in index.red_dims and index.red_lin is not None:
            dims, lin = index.red_dims, index.red_lin
        else:
            return self.b.const(0)  # a dim of size 1
        return self._digit(lin, tuple(index.shape[x] for x in dims), dims.index(d))

    def _digit(self, lin: Inst, sizes: tuple[int, ...], d: int) -> Inst:
        """Digit d of `lin` unravelled over `sizes` (row-major; lin < prod(sizes) where it matters)."""
        digit = self.b.idiv(lin, prod(sizes[d + 1:]))
        return digit if all(s == 1 for s in sizes[:d]) else self.b.mod(digit, sizes[d])

    def _offset(self, view: View, moved: Inst | None) -> Inst:
        return self.b.const(view.offset) if moved is None else self.b.add(moved, self.b.const(view.offset))

    def _view_index(self, view: View, index: _PhaseIndex, moved: Inst | None = None) -> Inst:
        """offset + sum(i[d] * stride[d]) over the phase index. The outer part comes first
        so that it is one loop-invariant value, shared by every view with the same one."""
        assert view.shape == index.shape, (view.shape, index.shape)
        outer = self._linear_terms(index.outer_lin, [view.shape[d] for d in index.outer_dims],
                                   [view.strides[d] for d in index.outer_dims])
        base = self._sum(self._offset(view, moved), outer)
        if index.red_lin is None:
            return base
        red = self._linear_terms(index.red_lin, [view.shape[d] for d in index.red_dims],
                                 [view.strides[d] for d in index.red_dims])
        return self._sum(base, red)

    def _linear_terms(self, lin: Inst, sizes: list[int], strides: list[int]) -> list[Inst]:
        """sum(digit[d] * strides[d]) where digit = `lin` unravelled over `sizes` (row-major,
        lin < prod(sizes)), as a list of terms. A run of dims that is contiguous in the view
        (stride[d] == stride[d+1] * size[d+1]) is one digit: (lin // inner) % run_extent,
        where the division is skipped for the last dims and the modulo for the first."""
        b = self.b
        terms = []
        g = 0
        while g < len(sizes):
            h = g
            while h + 1 < len(sizes) and strides[h] == strides[h + 1] * sizes[h + 1]:
                h += 1
            if strides[h] != 0:  # broadcast runs read the same element: no term
                digit = b.idiv(lin, prod(sizes[h + 1:]))
                if g > 0:
                    digit = b.mod(digit, prod(sizes[g:h + 1]))
                terms.append(b.mul(digit, strides[h]))
            g = h + 1
        return terms

    def _sum(self, first: Inst, terms: list[Inst]) -> Inst:
        for t in terms:
            first = self.b.add(first, t)
        return first


# --- powers with a constant exponent ----------------------------------------------------------

POW_MULTIPLY_MAX = 8
"""x ** n for a constant integer 0 <= n <= this is computed by multiplies (squaring: at most 4
for n = 7): a general pow is an exp and a log, 3-15x the time of x * x. Each multiply adds half
an ulp, so n stays small: x**8 is within 4 ulp of the correctly rounded power."""
POW_RECIPROCAL_MAX = 4
"""x ** -n for 1 <= n <= this is (1 / x) ** n, float only (within 4 ulp too). The reciprocal
comes first: 1 / (x ** n) would round x ** n in the subnormals for x near 1e-19 and lose
precision there, while (1 / x) ** n underflows or overflows only where x ** -n does."""


def _pow_by_multiplies(b: LoopBuilder, x: Inst, exponent: Any) -> Inst | None:
    """x ** exponent (a constant) without POW, or None where POW must compute it. Matches
    numpy's pow on the edge cases: x ** 0 == 1 (NaN too), (-0.0) ** 3 == -0.0, (-0.0) ** -1 ==
    -inf, (+-inf) ** n, NaN; x ** 0.5 is sqrt(x), as ops.power defines it for a constant 0.5."""
    dtype = x.dtype
    if dtype.kind not in "fiu" or isinstance(exponent, bool) or not math.isfinite(exponent):
        return None
    if dtype.kind == "f" and exponent == 0.5:
        return b.alu(Op.SQRT, (x,), dtype)
    if exponent != int(exponent):
        return None
    n = int(exponent)
    if n == 0:
        return b.const(1, dtype)
    if n < 0:
        if dtype.kind != "f" or -n > POW_RECIPROCAL_MAX:
            return None  # int: ops.power's rule for negative exponents (POW renders it)
        x, n = b.alu(Op.RECIP, (x,), dtype), -n
    if n > POW_MULTIPLY_MAX:
        return None
    result: Inst | None = None
    square = x
    while True:  # binary powering: the squares of x, times those of n's bits
        if n & 1:
            result = square if result is None else b.alu(Op.MUL, (result, square), dtype)
        n >>= 1
        if not n:
            return result
        square = b.alu(Op.MUL, (square, square), dtype)


# --- choosing the outer-blocked cpu strategy ------------------------------------------------


def _chain_offset(chain: ViewChain, idx: tuple[int, ...]) -> int:
    """The buffer element a view chain reads at phase index `idx`."""
    view = chain[0]
    lin = view.offset + sum(i * st for i, st in zip(idx, view.strides))
    for view in chain[1:]:
        digits = []
        for size in reversed(view.shape):
            digits.append(lin % size if size else 0)
            lin = lin // size if size else 0
        lin = view.offset + sum(d * st for d, st in zip(reversed(digits), view.strides))
    return lin


def _load_strides(chain: ViewChain) -> list[int]:
    """Element distance between neighbours along each phase dim (at the origin)."""
    rank = len(chain[0].shape)
    origin = _chain_offset(chain, (0,) * rank)
    strides = []
    for d in range(rank):
        if chain[0].shape[d] < 2:
            strides.append(0)
            continue
        unit = tuple(int(k == d) for k in range(rank))
        strides.append(abs(_chain_offset(chain, unit) - origin))
    return strides


def _prefers_outer_block(loops: list[tuple[tuple[int, ...], Expr]], axes: tuple[int, ...], inner_outer: int) -> bool:
    """Loads vote, in the phases that loop over the reduced dims with an accumulator
    ((shape, expr) of reductions and scans): a load whose innermost reduced dim is contiguous
    prefers the serial loop (it vectorizes); one that reads the innermost outer dim
    contiguously but the reduced index with a stride prefers blocking over outer indices."""
    votes = 0
    for shape, expr in loops:
        red = [d for d in axes if shape[d] > 1]
        for node in toposort(expr):
            if node.op is not Op.LOAD:
                continue
            strides = _load_strides(node.arg[1])
            s_red = strides[red[-1]]
            if s_red == 1:
                votes -= 1
            elif s_red > 1 and strides[inner_outer] == 1:
                votes += 1
    return votes > 0


check_exhaustive(_Lowerer._EXPR, _EXPR_OPS, "lowering of kernel expressions")
check_exhaustive(ACC_COMBINE, {r.combine for r in REDUCE.values()}, "loop IR accumulator combine ops")
