"""The state of one kernel's lowering (Lowering) and the code every strategy emits: a phase's
index, its expressions (loads, gathers, index vectors, accumulators, ALU ops, constant powers
by multiplies) and its stores."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .. import dtypes
from ..kernel_ir import Expr, Kernel, Reduction, Store, toposort
from ..loop_builder import LoopBuilder
from ..loop_ir import ACC_COMBINE, BOOL, INDEX, Inst, Opc, Special
from ..ops import ALU, CONVERSIONS, INDEXED, LEAVES, REDUCE, Op, check_exhaustive
from ..view import prod
from .index import IndexMath, _Cuts, _PhaseIndex, _cuts, _first_views
from .options import LowerOptions


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


# Expr op -> how to lower it; dispatch must cover every op a kernel expression can hold
_EXPR_OPS = set(ALU) | set(CONVERSIONS) | set(LEAVES) | set(INDEXED)


class Lowering:
    """One kernel's lowering for `opts`: the loop builder, the kernel's parameters and what the
    strategy (cpu, gpu, scatter: the modules beside this one) has computed so far."""

    def __init__(self, kernel: Kernel, opts: LowerOptions):
        self.k = kernel
        self.opts = opts
        self.b = LoopBuilder()
        self.ix = IndexMath(self.b, kernel.outer)
        self.axes = tuple(sorted(kernel.axes))
        self.outer_dims = tuple(d for d, s in enumerate(kernel.outer) if d not in self.axes and s > 1)
        self.n_outer = prod(kernel.outer)
        self.params: list[Inst] = []
        self.moved: list[Inst] = []  # the runtime offset of each slot (Kernel.offsets_arg), as INDEX
        self.accs: list[Inst | _LaneAcc] = []  # finished value of each reduction, for the current outer index
        self.lane: Inst | None = None  # outer-blocked cpu: the current index in the block
        self.global_size: tuple[int, ...] = (0,)
        self.local_size: tuple[int, ...] = (1,)

    def extent(self, shape: tuple[int, ...]) -> int:
        """Number of reduced-index positions of a phase."""
        return prod([shape[d] for d in self.axes])

    def extents(self) -> list[int]:
        return [self.extent(shape) for _, shape, _ in self.k.phases()]

    def local_id(self, local: int) -> Inst:
        return self.b.emit(Opc.SPECIAL, INDEX, (), (Special.LOCAL_ID, 0)) if local > 1 else self.b.const(0)

    def phase_cuts(self, shape: tuple[int, ...], exprs: list[Expr]) -> _Cuts | None:
        """Where to split a phase's loop over its reduced index: at the bounds of the masks on
        its leading reduced dim (a mask on a later one keeps its gate). None: nowhere."""
        red = [d for d in self.axes if shape[d] > 1]
        if not red:
            return None
        return _cuts(_first_views(exprs), red[0], shape[red[0]], prod([shape[d] for d in red[1:]]))

    def identity(self, r: Reduction) -> Any:
        return r.dtype.type(dtypes.identity(REDUCE[r.op].name, r.dtype)).item()

    def phase(self, shape: tuple[int, ...], outer: Inst, red: Inst | None) -> _PhaseIndex:
        assert len(shape) == self.k.rank and all(
            shape[d] == self.k.outer[d] for d in range(self.k.rank) if d not in self.axes), (shape, self.k.outer)
        red_dims = tuple(d for d in self.axes if shape[d] > 1)
        assert (red is None) == (not red_dims), (shape, red)
        return _PhaseIndex(shape, outer, self.outer_dims, red, red_dims, self.lane)

    def phase_value(self, expr: Expr, shape: tuple[int, ...], outer: Inst, red: Inst | None,
                    dtype: np.dtype) -> Inst:
        return self.b.cast(self.expr(expr, self.phase(shape, outer, red)), dtype)

    def store(self, s: Store, outer: Inst, red: Inst | None) -> None:
        index = self.phase(s.shape, outer, red)
        self.store_value(s, index, self.b.cast(self.expr(s.expr, index), self.k.args[s.buf].dtype))

    def store_value(self, s: Store, index: _PhaseIndex, value: Inst) -> None:
        """Store `value` (of the output's dtype) where store `s` writes at `index`."""
        assert s.view.mask is None, "a store through a masked view"
        self.b.emit(Opc.STORE, None, (self.params[s.buf], self.ix.view_index(s.view, index, self._moved(s.slot)), value))

    def expr(self, root: Expr, index: _PhaseIndex) -> Inst:
        """Lower one phase's expression; each (interned) node once."""
        done: dict[int, Inst] = {}
        for node in toposort(root):
            done[id(node)] = self._EXPR[node.op](self, node, [done[id(s)] for s in node.srcs], index)
        return done[id(root)]

    def _expr_load(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        buf, chain, slot = node.arg
        read_only = not self.k.args[buf].output
        element, gate = self.ix.chain_index(chain, index, self._moved(slot))
        if gate is not None and gate.opc is Opc.CONST:  # never valid here
            return self.b.const(0, node.dtype)
        return self.b.load(self.params[buf], element, node.dtype, read_only, gate)

    def _expr_gather(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        buf = node.arg   # the element (srcs[0]) is in range: the scheduler clamped it
        return self.b.load(self.params[buf], srcs[0], node.dtype, not self.k.args[buf].output, None)

    def _expr_iota(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        chain, slot = node.arg
        element, gate = self.ix.chain_index(chain, index, self._moved(slot))
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

    def _expr_scatter(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        raise AssertionError("a SCATTER is a store's root, lowered by scatter.serial_scatter")

    _EXPR: dict[Op, Callable[..., Inst]] = {
        Op.LOAD: _expr_load, Op.IOTA: _expr_iota, Op.CONST: _expr_const, Op.ACC: _expr_acc, Op.CAST: _expr_cast,
        Op.GATHER: _expr_gather, Op.SCATTER: _expr_scatter, Op.BITCAST: _expr_bitcast,
        **dict.fromkeys(ALU, _expr_alu),
    }


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


check_exhaustive(Lowering._EXPR, _EXPR_OPS, "lowering of kernel expressions")
check_exhaustive(ACC_COMBINE, {r.combine for r in REDUCE.values()}, "loop IR accumulator combine ops")
