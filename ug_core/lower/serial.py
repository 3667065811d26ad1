"""A whole outer index on one thread: its reductions, then its stores (plain, scan or scatter),
each a loop over the phase's reduced index. The cpu's default strategy and the gpu's
thread-per-outer-index one."""

from __future__ import annotations

from ..kernel_ir import Store
from ..loop_ir import Inst, Opc
from ..ops import REDUCE
from .emit import Lowering, _scan_acc
from .reduce import serial_reduce
from .scatter import serial_scatter


def serial_phases(lw: Lowering, outer: Inst) -> None:
    b = lw.b
    for r in lw.k.reductions:
        lw.accs.append(serial_reduce(lw, r, outer))
    for s in lw.k.stores:
        e = lw.extent(s.shape)
        if s.scatter is not None:
            serial_scatter(lw, s, outer)
        elif e == 1:  # (a scan of one value is the value: combine(identity, v) == v)
            lw.store(s, outer, None)
        elif e > 1 and s.scan is not None:
            _serial_scan(lw, s, outer)
        elif e > 1:
            for i in lw.ix.loop(b.const(0), b.const(e), lw.phase_cuts(s.shape, [s.expr])):
                lw.store(s, outer, i)


def _serial_scan(lw: Lowering, s: Store, outer: Inst) -> None:
    """A scan store: `for i: acc = combine(acc, value(i)); out[i] = acc`, in order (a
    loop-carried accumulator and a store per step: a tight loop)."""
    b = lw.b
    assert s.scan is not None
    out_dtype = lw.k.args[s.buf].dtype
    dt, init = _scan_acc(s, out_dtype)
    acc = b.emit(Opc.DEFINE_ACC, dt, (), init)
    i = b.range(b.const(0), b.const(lw.extent(s.shape)))
    index = lw.phase(s.shape, outer, i)
    b.emit(Opc.ACC_UPDATE, None, (acc, b.cast(lw.expr(s.expr, index), dt)), REDUCE[s.scan].combine)
    lw.store_value(s, index, b.cast(b.emit(Opc.ACC_READ, dt, (acc,)), out_dtype))
    b.close()
