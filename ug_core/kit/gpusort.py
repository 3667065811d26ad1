"""Sorting in GPU memory (Device.sort for the kit's gpu targets): a bitonic sort whose short
stages run inside a workgroup's shared memory and whose long ones run as global passes.

Each row is padded to m, a power of two (pads sort last), and the rows x m elements are cut into
tiles of T (a power of two, T <= m, one element per thread of a workgroup):

1. `local sort`: a workgroup loads its tile from the source (keys, and their positions as int32),
   runs every bitonic stage of block size <= T in shared memory (a barrier between steps), and
   writes the tile to the scratch buffers;
2. for each block size 2T ... m: the steps whose partner distance j >= T are `global steps`
   (a thread per pair, in place: each pair has one owner), then the steps j < T are one
   `local merge` per tile in shared memory (both read log2 j and log2 of the block size from a
   small int64 buffer of their own: one compiled program each for every step);
3. `output`: the first k of each row, the keys or their positions.

The order compares (key, position): NaN after every number (first when descending), equal keys
by position, so the result is stable whatever the network does; the pads (position >= n) go
after every element. The four programs are loop IR, built here for every gpu device of the kit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..specs import SortSpec
from ..loop_ir import BOOL, INDEX, Inst, LoopProgram, Opc, ParamSpec
from ..ops import Op
from ..view import prod
from .grid import GridProgram

I32 = np.dtype(np.int32)
U8 = np.dtype(np.uint8)

KEYS, ORDER, SOURCE, OUT, STEP = range(5)
"""Every program's parameters: the scratch keys and positions (rows x m), the source (rows x
n), the output (rows x k), and the step: (log2 j, log2 block) as int32 (read by the global step
and the local merge)."""


@dataclass(frozen=True)
class SortPlan:
    """The shape of one sort: what its programs are built from."""

    spec: SortSpec
    dtype: np.dtype          # the source's
    out_dtype: np.dtype      # the output's (the source's, or an int dtype for positions)
    m: int                   # the padded row length, a power of two
    tile: int                # elements per workgroup in the local stages, a power of two <= m
    max_grid: tuple[int, ...]

    @property
    def key_dtype(self) -> np.dtype:
        return U8 if self.dtype == BOOL else self.dtype   # (bools compare as 0 / 1)

    def params(self) -> tuple[ParamSpec, ...]:
        size = self.spec.rows * self.m
        return (ParamSpec(self.key_dtype, True, size), ParamSpec(I32, True, size),
                ParamSpec(self.dtype, False, self.spec.rows * self.spec.n),
                ParamSpec(self.out_dtype, True, self.spec.rows * self.spec.k), ParamSpec(I32, False, 2))


def plan(spec: SortSpec, dtype: np.dtype, out_dtype: np.dtype, local_size: int, max_grid: tuple[int, ...]) -> SortPlan:
    if spec.n >= 2**31:
        raise ValueError(f"sort: rows of {spec.n} elements are too long for a GPU sort (positions are int32)")
    m = 1 << max(0, (spec.n - 1).bit_length())
    tile = min(m, 1 << (max(1, local_size).bit_length() - 1))
    return SortPlan(spec, np.dtype(dtype), np.dtype(out_dtype), m, tile, max_grid)


def programs(p: SortPlan) -> tuple[LoopProgram, LoopProgram, LoopProgram, LoopProgram]:
    """(tiles, global step, local merge, output)."""
    return _local(p, first=True), _global_step(p), _local(p, first=False), _output(p)


TILES, GLOBAL_STEP, LOCAL_MERGE, OUTPUT = range(4)


def launches(p: SortPlan) -> list[tuple[int, tuple[int, int]]]:
    """The sort's launches in order: (which program, its step (log2 j, log2 block))."""
    out = [(TILES, (0, 0))]
    block = 2 * p.tile
    while block <= p.m:
        j = block // 2
        while j >= p.tile:
            out.append((GLOBAL_STEP, (j.bit_length() - 1, block.bit_length() - 1)))
            j //= 2
        out.append((LOCAL_MERGE, (0, block.bit_length() - 1)))
        block *= 2
    out.append((OUTPUT, (0, 0)))
    return out


# --- the programs ------------------------------------------------------------------------------


class _Program(GridProgram):
    """A program under construction: `threads` threads in workgroups of `local`, `tid` the thread's."""

    def __init__(self, p: SortPlan, threads: int, local: int):
        super().__init__(p.params(), -(-threads // local), local, p.max_grid)
        self.p = p
        b = self.b
        self.tid = b.add(b.mul(self.group, local), self.lid)
        # the last workgroups of a grid split over dimensions may run past the end (whole
        # workgroups in the local programs, whose barriers the test then keeps uniform)
        if prod(self.grid) * local != threads:
            self.guard(b.alu(Op.CMPLT, (self.tid, b.const(threads)), BOOL))


def _before(pr: _Program, a: Inst, ia: Inst, b_: Inst, ib: Inst) -> Inst:
    """(a, ia) sorts before (b, ib): pads (position >= n) last, then by key (NaN after every
    number; descending: the reverse, NaN first), then by position."""
    b, p = pr.b, pr.p
    dt = p.key_dtype

    def less(x: Inst, y: Inst) -> Inst:
        lt = b.alu(Op.CMPLT, (x, y), BOOL)
        if dt.kind != "f":
            return lt
        y_nan = b.alu(Op.CMPNE, (y, y), BOOL)
        x_num = b.alu(Op.CMPEQ, (x, x), BOOL)
        return b.alu(Op.OR, (lt, b.alu(Op.AND, (y_nan, x_num), BOOL)), BOOL)

    lesser, greater = less(a, b_), less(b_, a)
    ahead, behind = (greater, lesser) if p.spec.descending else (lesser, greater)
    by_position = b.alu(Op.CMPLT, (ia, ib), BOOL)
    by_value = b.alu(Op.OR, (ahead, b.alu(Op.AND, (b.alu(Op.NOT, (behind,), BOOL), by_position), BOOL)), BOOL)
    n = b.const(p.spec.n, I32)
    a_real, b_real = b.alu(Op.CMPLT, (ia, n), BOOL), b.alu(Op.CMPLT, (ib, n), BOOL)
    both = b.alu(Op.AND, (a_real, b_real), BOOL)
    same = b.alu(Op.CMPEQ, (a_real, b_real), BOOL)
    return b.alu(Op.WHERE, (both, by_value, b.alu(Op.WHERE, (same, by_position, a_real), BOOL)), BOOL)


def _exchange(pr: _Program, read: Callable[[int, Inst], Inst], write: Callable[[int, Inst, Inst], None],
              lo: Inst, hi: Inst, ascending: Inst) -> None:
    """Order the pair at lo < hi: the first of the two at lo in an ascending block, at hi in a
    descending one."""
    b, kt = pr.b, pr.p.key_dtype
    a, ia, c, ic = read(KEYS, lo), read(ORDER, lo), read(KEYS, hi), read(ORDER, hi)
    swap = b.alu(Op.CMPNE, (_before(pr, a, ia, c, ic), ascending), BOOL)
    write(KEYS, lo, b.alu(Op.WHERE, (swap, c, a), kt))
    write(ORDER, lo, b.alu(Op.WHERE, (swap, ic, ia), I32))
    write(KEYS, hi, b.alu(Op.WHERE, (swap, a, c), kt))
    write(ORDER, hi, b.alu(Op.WHERE, (swap, ia, ic), I32))


def _local(p: SortPlan, first: bool) -> LoopProgram:
    """first: load each tile from the source and run the stages of block sizes 2 ... T in shared
    memory; else the steps j < T of the step's block size (> T) on each tile of the scratch."""
    T = p.tile
    pr = _Program(p, p.spec.rows * p.m, T)
    b, lid = pr.b, pr.lid
    g = pr.tid
    shared = {KEYS: b.emit(Opc.DEFINE_LOCAL, p.key_dtype, (), T), ORDER: b.emit(Opc.DEFINE_LOCAL, I32, (), T)}
    if first:
        position = b.mod(g, p.m)
        valid = b.alu(Op.CMPLT, (position, b.const(p.spec.n)), BOOL)
        at = b.add(b.mul(b.idiv(g, p.m), p.spec.n), b.min(position, b.const(p.spec.n - 1)))
        key = b.cast(b.load(pr.params[SOURCE], at, p.dtype, True, valid), p.key_dtype)
        order = b.cast(position, I32)
    else:
        key = b.load(pr.params[KEYS], g, p.key_dtype, False)
        order = b.load(pr.params[ORDER], g, I32, False)
    b.emit(Opc.LOCAL_STORE, None, (shared[KEYS], lid, key))
    b.emit(Opc.LOCAL_STORE, None, (shared[ORDER], lid, order))
    b.emit(Opc.BARRIER, None)

    def read(which: int, at: Inst) -> Inst:
        return b.emit(Opc.LOCAL_LOAD, p.key_dtype if which == KEYS else I32, (shared[which], at))

    def write(which: int, at: Inst, value: Inst) -> None:
        b.emit(Opc.LOCAL_STORE, None, (shared[which], at, value))

    # the direction: the bit `size` of the position in the row (for size = T, alternating from
    # tile to tile; a merge's block size is the step's)
    # (j, block size) of each step; a merge's block size is the step buffer's (None here)
    steps: list[tuple[int, int | None]]
    if first:
        steps = [(size // 2 ** i, size) for size in _pow2s(2, T) for i in range(1, size.bit_length())]
    else:
        steps = [(T // 2 ** i, None) for i in range(1, T.bit_length())]
    merge_ascending = None if first else _bit_clear(pr, b.mod(g, p.m), _step(pr, 1))
    for j, size in steps:
        owner = b.alu(Op.CMPEQ, (b.mod(b.idiv(lid, j), 2), b.const(0)), BOOL)   # (the lower thread of each pair)
        b.if_(owner)
        if size is None:
            assert merge_ascending is not None
            ascending = merge_ascending
        else:
            ascending = b.alu(Op.CMPEQ, (b.mod(b.idiv(b.mod(g, p.m), size), 2), b.const(0)), BOOL)
        _exchange(pr, read, write, lid, b.add(lid, b.const(j)), ascending)
        b.close()
        b.emit(Opc.BARRIER, None)
    b.emit(Opc.STORE, None, (pr.params[KEYS], g, read(KEYS, lid)))
    b.emit(Opc.STORE, None, (pr.params[ORDER], g, read(ORDER, lid)))
    return pr.finish("sort_tiles" if first else "sort_merge")


def _step(pr: _Program, i: int) -> Inst:
    """Item i of the step buffer: 0, log2 j; 1, log2 of the block size."""
    return pr.b.cast(pr.b.load(pr.params[STEP], pr.b.const(i), I32, True), INDEX)


def _bit_clear(pr: _Program, x: Inst, bit: Inst) -> Inst:
    """Bit `bit` of the index x is 0."""
    b = pr.b
    shifted = b.alu(Op.SHR, (x, bit), INDEX)
    return b.alu(Op.CMPEQ, (b.alu(Op.AND, (shifted, b.const(1)), INDEX), b.const(0)), BOOL)


def _global_step(p: SortPlan) -> LoopProgram:
    """One step of distance j = 2**s (>= T) in blocks of 2**t ((s, t): the step buffer): a
    thread per pair (lo, lo + j), in place."""
    pairs = p.spec.rows * p.m // 2
    pr = _Program(p, max(1, pairs), max(1, min(p.tile, pairs)))
    b = pr.b
    s, t = _step(pr, 0), _step(pr, 1)
    one = b.const(1)
    j = b.alu(Op.SHL, (one, s), INDEX)
    # lo: the pair's index with a 0 bit inserted at bit s
    low = b.alu(Op.AND, (pr.tid, b.alu(Op.SUB, (j, one), INDEX)), INDEX)
    high = b.alu(Op.SHL, (b.alu(Op.SHR, (pr.tid, s), INDEX), b.add(s, one)), INDEX)
    lo = b.alu(Op.OR, (high, low), INDEX)
    hi = b.add(lo, j)
    ascending = _bit_clear(pr, b.mod(lo, p.m), t)

    def read(which: int, at: Inst) -> Inst:
        return b.load(pr.params[which], at, p.key_dtype if which == KEYS else I32, False)

    def write(which: int, at: Inst, value: Inst) -> None:
        b.emit(Opc.STORE, None, (pr.params[which], at, value))

    _exchange(pr, read, write, lo, hi, ascending)
    return pr.finish("sort_step")


def _output(p: SortPlan) -> LoopProgram:
    """The first k of each sorted row: keys (the source's dtype) or positions (the output's)."""
    k = p.spec.k
    count = p.spec.rows * k
    pr = _Program(p, count, min(p.tile, max(1, count)))
    b = pr.b
    at = b.add(b.mul(b.idiv(pr.tid, k), p.m), b.mod(pr.tid, k))
    if p.spec.indices:
        value = b.cast(b.load(pr.params[ORDER], at, I32, False), p.out_dtype)
    else:
        value = b.cast(b.load(pr.params[KEYS], at, p.key_dtype, False), p.out_dtype)
    b.emit(Opc.STORE, None, (pr.params[OUT], pr.tid, value))
    return pr.finish("sort_output")


def _pow2s(lo: int, hi: int) -> list[int]:
    out = []
    while lo <= hi:
        out.append(lo)
        lo *= 2
    return out
