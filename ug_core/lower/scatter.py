"""Scatter stores (ops.Op.SCATTER): each outer index, a part, fills its row of the output with
the reduction's identity and combines its values into computed slots: in order on one thread
(cpu, and a gpu's floats), or with atomic updates by the part's workgroup where a gpu target
has them for the store's ints."""

from __future__ import annotations

from ..kernel_ir import Store
from ..loop_ir import ATOMIC_COMBINE, BOOL, Inst, Opc
from ..ops import REDUCE, Op
from ..view import prod
from .emit import Lowering
from .index import _next_pow2, split_grid
from .reduce import serial_reduce


def serial_scatter(lw: Lowering, s: Store, outer: Inst) -> None:
    """A scatter store (ops.Op.SCATTER): the outer index's row of the output filled with the
    identity, then `for i: row[slot(i)] = combine(row[slot(i)], value(i))`, in order."""
    _scatter_fill(lw, s, outer, lw.b.const(0), 1)
    _scatter_combine(lw, s, outer)


def lower_gpu_scatter(lw: Lowering) -> None:
    """gpu, a kernel of scatter stores: a workgroup per part, whose threads fill the part's
    row with the identity (each a strided share: no thread loops over a whole row), then,
    after a barrier, combine the part's values into it: all threads, each a strided share,
    with atomic updates where the target has them for the store's ints (exact: any order
    gives the same result), else the first thread alone, in order (floats: a sum's bits
    depend on its order, and scatters are deterministic)."""
    b = lw.b
    assert all(s.scatter is not None for s in lw.k.stores), "a scatter kernel stores only scatters"
    local = min(lw.opts.local_size, _next_pow2(max(s.expr.arg[1] for s in lw.k.stores)))
    grid = split_grid(lw.n_outer, lw.opts.max_global_size)
    lw.global_size, lw.local_size = grid, (local,) + (1,) * (len(grid) - 1)
    part = lw.b.group_index(grid)
    lid = lw.local_id(local)
    guarded = prod(grid) != lw.n_outer
    if guarded:  # uniform per workgroup, so the barrier inside stays legal
        b.if_(b.alu(Op.CMPLT, (part, b.const(lw.n_outer)), BOOL))
    # reductions fused into the kernel (the values read them: a gradient's scatter-add of a
    # softmax's cotangent): every thread computes them for its part, serially (rare, small)
    for r in lw.k.reductions:
        lw.accs.append(serial_reduce(lw, r, part))
    for s in lw.k.stores:
        _scatter_fill(lw, s, part, lid, local)
    if local > 1:
        b.emit(Opc.BARRIER, None)
    atomic = [s for s in lw.k.stores if local > 1 and _atomic_scatter(lw, s)]
    for s in atomic:
        _scatter_combine(lw, s, part, lid, local)
    in_order = [s for s in lw.k.stores if s not in atomic]
    if in_order and local > 1:
        b.if_(b.alu(Op.CMPEQ, (lid, b.const(0)), BOOL))
    for s in in_order:
        _scatter_combine(lw, s, part)
    if in_order and local > 1:
        b.close()
    if guarded:
        b.close()


def _atomic_scatter(lw: Lowering, s: Store) -> bool:
    """Whether the target combines this scatter's values atomically (loop_ir ATOMIC)."""
    assert s.scatter is not None
    dt = lw.k.args[s.buf].dtype
    return (dt.kind in "iu" and dt.itemsize * 8 in lw.opts.atomic_int_bits
            and REDUCE[s.scatter.arg[0]].combine in ATOMIC_COMBINE
            and lw.extent(s.shape) > 1)


def _scatter_fill(lw: Lowering, s: Store, outer: Inst, first: Inst, step: int) -> None:
    """Slots first, first + step, ... of the outer index's row: the identity."""
    b = lw.b
    assert s.scatter is not None
    _, slots, identity = s.scatter.arg
    row = b.mul(outer, slots)
    k = b.range(first, b.const(slots), step)
    b.emit(Opc.STORE, None, (lw.params[s.buf], b.add(row, k), b.const(identity, lw.k.args[s.buf].dtype)))
    b.close()


def _scatter_combine(lw: Lowering, s: Store, outer: Inst, first: Inst | None = None, step: int = 1) -> None:
    """`for i: row[slot(i)] = combine(row[slot(i)], value(i))`, in order; or, given the
    thread's `first` value and the `step` between its values, an atomic update per value."""
    b = lw.b
    root = s.scatter
    assert root is not None
    rop, slots, _ = root.arg
    dt = lw.k.args[s.buf].dtype
    out = lw.params[s.buf]
    row = b.mul(outer, slots)
    extent = lw.extent(s.shape)
    if first is not None:
        i: Inst | None = b.range(first, b.const(extent), step)
    else:
        i = b.range(b.const(0), b.const(extent)) if extent > 1 else None
    index = lw.phase(s.shape, outer, i)
    slot, value = (lw.expr(e, index) for e in root.srcs)
    at = b.add(row, slot)
    if first is not None:
        b.emit(Opc.ATOMIC, None, (out, at, b.cast(value, dt)), REDUCE[rop].combine)
    else:
        old = b.load(out, at, dt, False)
        b.emit(Opc.STORE, None, (out, at, b.alu(REDUCE[rop].combine, (old, b.cast(value, dt)), dt)))
    if i is not None:
        b.close()
