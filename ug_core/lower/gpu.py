"""The gpu strategies: a thread per outer index (short phases, scans), a workgroup per outer
index whose threads share each reduction (a tree in shared memory) and each store loop, and a
workgroup per row of a long scan (chunks, their totals scanned in shared memory)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..kernel_ir import Reduction
from ..loop_ir import BOOL, Inst, Opc
from ..ops import REDUCE, Op
from ..view import prod
from .emit import Lowering, _acc_dtype, _scan_acc
from .index import _next_pow2, split_grid
from .reduce import accumulate
from .serial import serial_phases


GPU_SCAN_MIN = 256
"""gpu: a scan of at least this many values per outer index is shared by a workgroup (chunks,
totals scanned in shared memory, chunks again); a shorter one is a thread's, in order."""


def lower_gpu_thread_per_outer(lw: Lowering) -> None:
    b = lw.b
    local = min(lw.opts.local_size, lw.n_outer)
    grid = split_grid(-(-lw.n_outer // local), lw.opts.max_global_size)
    lw.global_size, lw.local_size = grid, (local,) + (1,) * (len(grid) - 1)
    gidx = b.add(b.mul(lw.b.group_index(grid), local), lw.local_id(local))
    guarded = prod(grid) * local != lw.n_outer
    if guarded:  # the last workgroup(s) run past the end
        b.if_(b.alu(Op.CMPLT, (gidx, b.const(lw.n_outer)), BOOL))
    serial_phases(lw, gidx)
    if guarded:
        b.close()


def is_long_gpu_scan(lw: Lowering) -> bool:
    """A kernel of scan stores of one extent long enough to share among a workgroup."""
    stores = lw.k.stores
    return (not lw.k.reductions and all(s.scan is not None for s in stores)
            and len({lw.extent(s.shape) for s in stores}) == 1 and lw.extent(stores[0].shape) >= GPU_SCAN_MIN)


def lower_gpu_scan(lw: Lowering) -> None:
    """gpu, a kernel of long scans: a workgroup per outer index, whose threads take consecutive
    chunks of the row (about as many chunks as values in each). Each thread combines its
    chunk into a total; the totals' inclusive scan is made in shared memory (Hillis-Steele:
    log2(local) steps between barriers); each thread then runs its chunk again from the
    total before it, storing the running values. The combination order is fixed by the
    sizes alone: the same bits on every run (a float sum's differ from a sequential scan's
    in the last places, as a blocked scan's do)."""
    b = lw.b
    e = lw.extent(lw.k.stores[0].shape)
    local = max(1, min(lw.opts.local_size, _next_pow2(math.isqrt(e))))
    chunk = -(-e // local)
    grid = split_grid(lw.n_outer, lw.opts.max_global_size)
    lw.global_size, lw.local_size = grid, (local,) + (1,) * (len(grid) - 1)
    row = lw.b.group_index(grid)
    lid = lw.local_id(local)
    first = b.mul(lid, chunk)
    end = b.min(b.add(first, b.const(chunk)), b.const(e))
    guarded = prod(grid) != lw.n_outer
    if guarded:  # uniform per workgroup, so the barriers inside stay legal
        b.if_(b.alu(Op.CMPLT, (row, b.const(lw.n_outer)), BOOL))
    for s in lw.k.stores:
        assert s.scan is not None
        dt, init = _scan_acc(s, lw.k.args[s.buf].dtype)
        combine = REDUCE[s.scan].combine
        total = b.emit(Opc.DEFINE_ACC, dt, (), init)
        i = b.range(first, end)
        b.emit(Opc.ACC_UPDATE, None, (total, b.cast(lw.expr(s.expr, lw.phase(s.shape, row, i)), dt)), combine)
        b.close()
        before = _exclusive_scan(lw, b.emit(Opc.ACC_READ, dt, (total,)), lid, local, dt, init, combine)
        running = b.emit(Opc.DEFINE_ACC, dt, (), init)
        b.emit(Opc.ACC_UPDATE, None, (running, before), combine)
        i = b.range(first, end)
        index = lw.phase(s.shape, row, i)
        b.emit(Opc.ACC_UPDATE, None, (running, b.cast(lw.expr(s.expr, index), dt)), combine)
        lw.store_value(s, index, b.cast(b.emit(Opc.ACC_READ, dt, (running,)), lw.k.args[s.buf].dtype))
        b.close()
    if guarded:
        b.close()


def _exclusive_scan(lw: Lowering, value: Inst, lid: Inst, local: int, dt: np.dtype, init: Any, combine: Op) -> Inst:
    """The combination of the values of the threads before this one in the workgroup (the
    identity for thread 0): an inclusive Hillis-Steele scan in a shared array, then the
    neighbour's slot."""
    b = lw.b
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


def lower_gpu_workgroup_per_outer(lw: Lowering) -> None:
    b = lw.b
    # no more threads than the longest phase can keep busy
    local = min(lw.opts.local_size, _next_pow2(max(lw.extents())))
    grid = split_grid(lw.n_outer, lw.opts.max_global_size)
    lw.global_size, lw.local_size = grid, (local,) + (1,) * (len(grid) - 1)
    # one shared array per reduction, so that reading one reduction's result never
    # races with the next reduction's writes (no barrier needed between them)
    shared = [b.emit(Opc.DEFINE_LOCAL, _acc_dtype(r), (), local) if local > 1 else None for r in lw.k.reductions]
    row = lw.b.group_index(grid)
    lid = lw.local_id(local)
    guarded = prod(grid) != lw.n_outer
    if guarded:  # uniform per workgroup, so the barriers inside stay legal
        b.if_(b.alu(Op.CMPLT, (row, b.const(lw.n_outer)), BOOL))
    for r, smem in zip(lw.k.reductions, shared):
        lw.accs.append(_cooperative_reduce(lw, r, row, lid, local, smem))
    for s in lw.k.stores:
        e = lw.extent(s.shape)
        if e == 0:
            continue
        if e == 1 and local > 1:  # one element: thread 0 writes it
            b.if_(b.alu(Op.CMPEQ, (lid, b.const(0)), BOOL))
            lw.store(s, row, None)
            b.close()
        elif e == 1:
            lw.store(s, row, None)
        else:
            for i in lw.ix.loop(b.const(0), b.const(e), lw.phase_cuts(s.shape, [s.expr]), local, lid):
                lw.store(s, row, i)
    if guarded:
        b.close()


def _cooperative_reduce(lw: Lowering, r: Reduction, row: Inst, lid: Inst, local: int, smem: Inst | None) -> Inst:
    b = lw.b
    e = lw.extent(r.shape)
    init = lw.identity(r)
    combine = REDUCE[r.op].combine
    if e == 0:
        return b.const(init, r.dtype)
    if e == 1:  # every thread computes the single value itself: no communication
        return lw.phase_value(r.expr, r.shape, row, None, r.dtype)
    dt = _acc_dtype(r)
    # each thread: partial over i = lid, lid + local, ...
    part = accumulate(lw, r, dt, lambda i: lw.phase_value(r.expr, r.shape, row, i, dt), local, lid)
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
