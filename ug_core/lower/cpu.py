"""The cpu strategies: a global id per outer index (serial phases, in versions per segment of
the masked outer dims), a row per global id for masked elementwise kernels, and a block of
consecutive outer indices per global id where the loads favour it (one accumulator per lane
in a small array, the loop over the lanes innermost)."""

from __future__ import annotations

import functools
from typing import Callable

from .. import dag
from ..kernel_ir import Expr, Reduction, Store, toposort
from ..loop_ir import INDEX, Inst, Opc, Special
from ..ops import REDUCE, Op
from ..view import View, ViewChain, prod
from .emit import Lowering, _acc_dtype, _LaneAcc, _scan_acc
from .index import _PhaseIndex, _copies, _cuts, _first_views, _mask_bounds
from .reduce import sum_blocks
from .serial import serial_phases


ROW_PARALLELISM = 64
"""cpu, masked elementwise kernels: with fewer rows than this, a row's loop is split into chunks
(of at least ROW_CHUNK_MIN elements) that are global ids of their own, so the threads share it."""
ROW_CHUNK_MIN = 4096
ROW_MIN = 8
"""cpu, unmasked elementwise kernels whose flat index would need divisions per element: the row
strategy where the innermost outer dim has at least this many elements (shorter rows: the flat
index, whose divisions then cost about as much as a row's loop)."""


def lower_cpu(lw: Lowering) -> None:
    if lw.opts.outer_block > 1 and _wants_outer_block(lw):
        _lower_cpu_outer_blocked(lw, lw.opts.outer_block)
        return
    if _is_masked_elementwise(lw):
        _lower_cpu_rows(lw)
        return
    lw.global_size, lw.local_size = (lw.n_outer,), (1,)
    outer = lw.b.emit(Opc.SPECIAL, INDEX, (), (Special.GLOBAL_ID, 0))
    copies = max((_copies(lw.phase_cuts(shape, [e])) for _, shape, e in lw.k.phases()), default=1)
    for _ in lw.ix.versions(lw.outer_dims, functools.partial(_outer_digit, lw, outer, lw.outer_dims),
                            [e for _, _, e in lw.k.phases()], copies):
        lw.accs = []
        serial_phases(lw, outer)


def _outer_digit(lw: Lowering, lin: Inst, dims: tuple[int, ...], d: int) -> Inst:
    """The index along outer dim d, a digit of `lin` over the outer `dims`."""
    return lw.ix.digit(lin, tuple(lw.k.outer[x] for x in dims), dims.index(d))


def _is_masked_elementwise(lw: Lowering) -> bool:
    """An elementwise kernel (no reduction, no scan) with a mask on some outer dim, or with a
    gather and rows (`emb[ids] * s`: a row's index math and index load are the backend's to
    hoist out of the loop over the row, whose gathered loads are then contiguous)."""
    if lw.k.reductions or not lw.outer_dims or any(lw.extent(s.shape) > 1 for s in lw.k.stores):
        return False
    exprs = [s.expr for s in lw.k.stores]
    if len(lw.outer_dims) > 1 and any(e.op is Op.GATHER for e in dag.toposort(exprs, lambda e: e.srcs)):
        return True
    views = _first_views(exprs)
    if any(len(_mask_bounds(views, d, lw.k.outer[d])) > 2 for d in lw.outer_dims):
        return True
    return _divides_per_element(lw, exprs)


def _divides_per_element(lw: Lowering, exprs: list[Expr]) -> bool:
    """Whether a flat index over the outer dims would be unravelled into several digits for
    every element (a store or a single-view load that walks the outer dims in two or more
    contiguous runs: an im2col copy, a transposing copy; a broadcast's one modulo does not
    count), where a row of at least ROW_MIN
    elements per global id computes them once per row and its loop reads and writes at a
    constant stride (which vectorizes). Loads through a chain of views keep the flat index
    (their divisions stay in the row's loop either way)."""
    if lw.k.outer[lw.outer_dims[-1]] < ROW_MIN:
        return False
    views = [s.view for s in lw.k.stores]
    for node in dag.toposort(exprs, lambda e: e.srcs):
        if node.op is Op.LOAD:
            if len(node.arg[1]) != 1:
                return False
            views.append(node.arg[1][0])
    dims = lw.outer_dims

    def runs(v: View) -> int:
        """The digits a flat index unravels into for v (as IndexMath.linear_terms groups them): runs
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


def _lower_cpu_rows(lw: Lowering) -> None:
    """The global id is a row (an index over the outer dims but the innermost; a chunk of
    one where there are fewer rows than ROW_PARALLELISM), which loops over the innermost
    dim, split at the masks' bounds (IndexMath.loop), in one version per segment of the other dims'
    masks (IndexMath.versions): in each segment a load is a plain load, which vectorizes, or 0."""
    b = lw.b
    inner, rows = lw.outer_dims[-1], lw.outer_dims[:-1]
    n_rows, n = prod([lw.k.outer[d] for d in rows]), lw.k.outer[inner]
    chunks = max(1, min(-(-ROW_PARALLELISM // n_rows), n // ROW_CHUNK_MIN))
    length = -(-n // chunks)
    chunks = -(-n // length)
    lw.global_size, lw.local_size = (n_rows * chunks,), (1,)
    gid = b.emit(Opc.SPECIAL, INDEX, (), (Special.GLOBAL_ID, 0))
    row = b.idiv(gid, chunks)
    exprs = [s.expr for s in lw.k.stores]
    cuts = _cuts(_first_views(exprs), inner, n)
    first = b.mul(b.mod(gid, chunks), length)  # the chunk: [first, end)
    end = b.min(b.add(first, b.const(length)), b.const(n))
    for _ in lw.ix.versions(rows, functools.partial(_outer_digit, lw, row, rows), exprs, _copies(cuts)):
        lo = first
        if chunks > 1:
            # a loop of one trip over the chunk, holding the segments' loops as a blocked
            # sum's blocks hold theirs (which backends' work estimates expect)
            lo = b.range(first, end, length)
        for j in lw.ix.loop(lo, end, cuts):
            index = _PhaseIndex(lw.k.outer, row, rows, j, (inner,))
            for s in lw.k.stores:
                lw.store_value(s, index, b.cast(lw.expr(s.expr, index), lw.k.args[s.buf].dtype))
        if chunks > 1:
            b.close()


def _wants_outer_block(lw: Lowering) -> bool:
    """Whether the outer-blocked strategy pays: the reductions' loads read consecutive
    outer indices contiguously and the reduced index with a large stride (so the serial
    loop over the reduced index is neither cache-friendly nor vectorizable)."""
    if not lw.outer_dims or any(s.scatter is not None for s in lw.k.stores):
        return False
    loops = [(r.shape, r.expr) for r in lw.k.reductions if lw.extent(r.shape) > 1]
    loops += [(s.shape, s.expr) for s in lw.k.stores if s.scan is not None and lw.extent(s.shape) > 1]
    if not loops:
        return False
    if lw.opts.outer_block_always:
        return True
    return _prefers_outer_block(loops, lw.axes, lw.outer_dims[-1])


def _lower_cpu_outer_blocked(lw: Lowering, block: int) -> None:
    b = lw.b
    n = lw.n_outer
    lw.global_size, lw.local_size = (-(-n // block),), (1,)
    gid = b.emit(Opc.SPECIAL, INDEX, (), (Special.GLOBAL_ID, 0))
    base = b.mul(gid, block)
    if n % block:  # the last block holds n % block indices
        count = b.alu(Op.MIN, (b.add(b.mul(gid, -block), b.const(n)), b.const(block)), INDEX)
    else:
        count = b.const(block)

    def lanes() -> Inst:  # opens `for lane in block`; returns the outer index base + lane
        lw.lane = b.range(b.const(0), count)
        return b.add(base, lw.lane)

    def lanes_only() -> Inst:  # the same loop, for code that only touches acc[lane]
        lw.lane = b.range(b.const(0), count)
        return lw.lane

    def end_lanes() -> None:
        b.close()
        lw.lane = None

    for r in lw.k.reductions:
        lw.accs.append(_lane_reduce(lw, r, block, lanes, lanes_only, end_lanes))
    for s in lw.k.stores:
        e = lw.extent(s.shape)
        if e == 0:
            continue
        if e > 1 and s.scan is not None:
            _lane_scan(lw, s, block, e, lanes, lanes_only, end_lanes)
            continue
        if e == 1:
            lw.store(s, lanes(), None)
            end_lanes()
            continue
        for i in lw.ix.loop(b.const(0), b.const(e), lw.phase_cuts(s.shape, [s.expr])):
            lw.store(s, lanes(), i)
            end_lanes()


def _lane_scan(lw: Lowering, s: Store, block: int, extent: int, lanes: Callable[[], Inst], lanes_only: Callable[[], Inst],
               end_lanes: Callable[[], None]) -> None:
    """A scan store, one running value per lane in a small array, the loop over the lanes
    innermost: each step reads and writes the block's outer indices contiguously (e.g. a
    cumulative sum down the columns of a matrix)."""
    b = lw.b
    assert s.scan is not None
    out_dtype = lw.k.args[s.buf].dtype
    dt, init = _scan_acc(s, out_dtype)
    acc = b.emit(Opc.DEFINE_LOCAL, dt, (), block)
    lanes_only()
    b.emit(Opc.LOCAL_STORE, None, (acc, _lane(lw), b.const(init, dt)))
    end_lanes()
    i = b.range(b.const(0), b.const(extent))
    index = lw.phase(s.shape, lanes(), i)
    running = b.alu(REDUCE[s.scan].combine, (b.emit(Opc.LOCAL_LOAD, dt, (acc, _lane(lw))),
                                             b.cast(lw.expr(s.expr, index), dt)), dt)
    b.emit(Opc.LOCAL_STORE, None, (acc, _lane(lw), running))
    lw.store_value(s, index, b.cast(running, out_dtype))
    end_lanes()
    b.close()


def _lane(lw: Lowering) -> Inst:
    """The lane index of the open `for lane in block` loop (outer-blocked cpu lowering)."""
    assert lw.lane is not None, "no lane loop is open"
    return lw.lane


def _lane_reduce(lw: Lowering, r: Reduction, block: int, lanes: Callable[[], Inst], lanes_only: Callable[[], Inst],
                 end_lanes: Callable[[], None]) -> Inst | _LaneAcc:
    b = lw.b
    e = lw.extent(r.shape)
    init = lw.identity(r)
    combine = REDUCE[r.op].combine
    if e == 0:
        return b.const(init, r.dtype)
    dt = _acc_dtype(r)
    acc = b.emit(Opc.DEFINE_LOCAL, dt, (), block)

    def fill(local: Inst) -> None:
        lanes_only()
        b.emit(Opc.LOCAL_STORE, None, (local, _lane(lw), b.const(init, dt)))
        end_lanes()

    def update(local: Inst, i: Inst) -> None:
        outer = lanes()
        value = lw.phase_value(r.expr, r.shape, outer, i, dt)
        cur = b.emit(Opc.LOCAL_LOAD, dt, (local, _lane(lw)))
        b.emit(Opc.LOCAL_STORE, None, (local, _lane(lw), b.alu(combine, (cur, value), dt)))
        end_lanes()

    if e == 1:
        outer = lanes()
        b.emit(Opc.LOCAL_STORE, None, (acc, _lane(lw), lw.phase_value(r.expr, r.shape, outer, None, dt)))
        end_lanes()
        return _LaneAcc(acc, r.dtype)
    fill(acc)
    sizes = sum_blocks(lw, r, dt, e)
    cuts = lw.phase_cuts(r.shape, [r.expr])

    def accumulate(into: Inst, lo: Inst, end: Inst, level: int) -> None:
        if level == len(sizes):
            for i in lw.ix.loop(lo, end, cuts):
                update(into, i)
            return
        # blocked summation, as in reduce.serial_reduce: a partial sum per lane per block of rows
        part = b.emit(Opc.DEFINE_LOCAL, dt, (), block)
        start = b.range(lo, end, sizes[level])
        fill(part)
        stop = b.add(start, b.const(sizes[level]))
        if e % sizes[level]:
            stop = b.alu(Op.MIN, (stop, b.const(e)), INDEX)
        accumulate(part, start, stop, level + 1)
        lanes_only()
        total = b.alu(combine, (b.emit(Opc.LOCAL_LOAD, dt, (into, _lane(lw))),
                                b.emit(Opc.LOCAL_LOAD, dt, (part, _lane(lw)))), dt)
        b.emit(Opc.LOCAL_STORE, None, (into, _lane(lw), total))
        end_lanes()
        b.close()

    accumulate(acc, b.const(0), b.const(e), 0)
    del accumulate  # it refers to itself: a reference cycle, which only the cyclic GC frees
    return _LaneAcc(acc, r.dtype)


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
