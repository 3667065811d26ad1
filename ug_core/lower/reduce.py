"""Reductions one thread runs in order: an accumulator over a phase's reduced index, split at
the masks' bounds (a partial per segment) and, for a long float sum, in blocks (a partial per
block, SUM_BLOCK_GROUP blocks a level), so that its rounding error grows with the block sizes,
not the number of elements."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..kernel_ir import Reduction
from ..loop_ir import Inst, Opc
from ..ops import REDUCE, Op
from .emit import Lowering, _acc_dtype


SUM_BLOCK_GROUP = 32
"""A blocked float sum adds at most this many block sums into one partial before the partial is
added into the next level's (see sum_blocks)."""


def serial_reduce(lw: Lowering, r: Reduction, outer: Inst) -> Inst:
    b = lw.b
    e = lw.extent(r.shape)
    if e == 0:
        return b.const(lw.identity(r), r.dtype)
    if e == 1:  # combine(identity, v) == v
        return lw.phase_value(r.expr, r.shape, outer, None, r.dtype)
    dt = _acc_dtype(r)
    acc = accumulate(lw, r, dt, lambda i: lw.phase_value(r.expr, r.shape, outer, i, dt))
    return b.cast(b.emit(Opc.ACC_READ, dt, (acc,)), r.dtype)


def accumulate(lw: Lowering, r: Reduction, dt: np.dtype, value: Callable[[Inst], Inst], local: int = 1,
               lid: Inst | None = None) -> Inst:
    """An accumulator of `dt` holding r's combine of value(i) over the phase's reduced index
    i; with `local` threads, thread `lid`'s share, i = lid (mod local) (threads past the
    extent keep the identity). Split at the masks' bounds (IndexMath.segments), each segment into a
    partial of its own, combined after its loops, so that the segments' dependency chains
    are independent (one accumulator through a concat of 8 rows of 512 made a row max 3x
    slower than a plain one: 512 maxes in one chain). A long float sum in blocks
    (sum_blocks, of `local` * size with threads)."""
    b = lw.b
    init = lw.identity(r)
    acc = b.emit(Opc.DEFINE_ACC, dt, (), init)
    cuts = lw.phase_cuts(r.shape, [r.expr])
    for start, stop in lw.ix.segments(b.const(0), b.const(lw.extent(r.shape)), cuts):
        lo, hi = int(start.arg), int(stop.arg)  # (constants: the bounds of a segment of constants)
        part = acc if cuts is None else b.emit(Opc.DEFINE_ACC, dt, (), init)
        sizes = [size * local for size in sum_blocks(lw, r, dt, -(-(hi - lo) // local))]
        # a thread's first index past a block's start (every one is lo (mod local))
        shift = lid if lid is None or lo % local == 0 else b.mod(b.add(lid, b.const(local - lo % local)), local)
        _blocks(lw, part, start, stop, hi - lo, sizes, value, r, shift, local)
        if part is not acc:
            b.emit(Opc.ACC_UPDATE, None, (acc, b.emit(Opc.ACC_READ, dt, (part,))), REDUCE[r.op].combine)
    return acc


def _blocks(lw: Lowering, into: Inst, lo: Inst, end: Inst, count: int, sizes: list[int], value: Callable[[Inst], Inst],
            r: Reduction, shift: Inst | None, step: int) -> None:
    """into = combine(into, value(i)) for i in [lo, end) (i = lo + shift (mod step)), in blocks
    of sizes[0], each in blocks of sizes[1], ...: a partial per block, combined into the
    enclosing one (see sum_blocks). `count`: the indices of the whole blocked range (where
    it is no multiple of a block size, its last block of that size ends early)."""
    b = lw.b
    combine = REDUCE[r.op].combine
    if not sizes:
        i = b.range(lo if shift is None else b.add(lo, shift), end, step)
        b.emit(Opc.ACC_UPDATE, None, (into, value(i)), combine)
        b.close()
        return
    start = b.range(lo, end, sizes[0])
    part = b.emit(Opc.DEFINE_ACC, into.dtype, (), lw.identity(r))
    stop = b.add(start, b.const(sizes[0]))
    if count % sizes[0]:
        stop = b.min(stop, end)
    _blocks(lw, part, start, stop, count, sizes[1:], value, r, shift, step)
    b.emit(Opc.ACC_UPDATE, None, (into, b.emit(Opc.ACC_READ, into.dtype, (part,))), combine)
    b.close()


def sum_blocks(lw: Lowering, r: Reduction, dt: np.dtype, count: int) -> list[int]:
    """Block sizes (outermost first) of a blocked float sum of `count` values: `sum_block`,
    then groups of SUM_BLOCK_GROUP blocks while more remain, so that each partial sum adds
    at most about that many values (the error grows with the largest number of additions
    into one partial: ~1e-6 for a 1M-element float32 sum with one level, ~2e-7 with two).
    Empty: not a float sum, or too short to block."""
    if r.op is not Op.SUM or dt.kind != "f" or count <= lw.opts.sum_block:
        return []
    sizes = [lw.opts.sum_block]
    while count > sizes[0] * SUM_BLOCK_GROUP:
        sizes.insert(0, sizes[0] * SUM_BLOCK_GROUP)
    return sizes
