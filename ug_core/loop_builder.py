"""The loop IR builder the lowering writes with (ug_core.lower): instructions go into nested
blocks (RANGE / IF bodies) with scoped common-subexpression elimination, constant folding of
int64 index math, and hoisting: a pure instruction lands in the innermost open block that holds
one of its operands, so loop-invariant math sits before its loop. A backend that writes loop
IR by hand (a matmul of its own) can use it too.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from .loop_ir import BOOL, INDEX, OPENS, PURE, Inst, Opc, Special
from .ops import Op


def _key_arg(arg: Any) -> Any:
    # floats: distinguish 0.0 / -0.0 and keep NaN equal to itself
    if isinstance(arg, float):
        return ("f", arg.hex())
    return arg


class _Scope:
    """An open block: its instructions so far (nested blocks appear when they close) and
    the pure instructions placed in it, by structural key, for CSE."""

    def __init__(self, opener: Inst | None):
        self.opener = opener
        self.items: list[Inst | tuple[Inst, list, Inst]] = []
        self.cache: dict[tuple, Inst] = {}


class LoopBuilder:
    """Emits instructions into nested blocks.

    A pure instruction goes into the innermost block that holds one of its operands
    (so loop-invariant math lands before the loop), but never above an open IF (the
    condition may be what makes it meaningful). It is appended there right away; since
    a nested block is only appended to its parent when it closes, the hoisted
    instruction lands before the loop that needed it."""

    def __init__(self) -> None:
        self.scopes: list[_Scope] = [_Scope(None)]
        self.level: dict[int, int] = {}  # id(inst) -> index of the scope holding it

    # -- core
    def emit(self, opc: Opc, dtype: np.dtype | None, srcs: tuple[Inst, ...] = (), arg: Any = None) -> Inst:
        if opc in PURE:
            key = (opc, dtype, tuple(id(s) for s in srcs), _key_arg(arg))
            for scope in reversed(self.scopes):
                found = scope.cache.get(key)
                if found is not None:
                    return found
            level = self._pure_level(srcs)
        else:
            level = len(self.scopes) - 1
        inst = Inst(opc, dtype, srcs, arg)
        scope = self.scopes[level]
        scope.items.append(inst)
        self.level[id(inst)] = level
        if opc in PURE:
            scope.cache[key] = inst
        return inst

    def _pure_level(self, srcs: tuple[Inst, ...]) -> int:
        if not srcs:
            return 0
        floor = max((i for i, s in enumerate(self.scopes) if s.opener is not None and s.opener.opc is Opc.IF), default=0)
        return max(floor, *(self.level[id(s)] for s in srcs))

    def load(self, param: Inst, index: Inst, dtype: np.dtype, read_only: bool, gate: Inst | None = None) -> Inst:
        """A LOAD (a GATED_LOAD with a `gate`); loads of a buffer the kernel never writes are
        reused while visible."""
        opc, srcs = (Opc.LOAD, (param, index)) if gate is None else (Opc.GATED_LOAD, (param, index, gate))
        if not read_only:
            return self.emit(opc, dtype, srcs)
        key = (opc, dtype, *(id(s) for s in srcs))
        for scope in reversed(self.scopes):
            found = scope.cache.get(key)
            if found is not None:
                return found
        inst = self.emit(opc, dtype, srcs)
        self.scopes[-1].cache[key] = inst
        return inst

    def open(self, opc: Opc, dtype: np.dtype | None, srcs: tuple[Inst, ...], arg: Any = None) -> Inst:
        opener = Inst(opc, dtype, srcs, arg)
        self.scopes.append(_Scope(opener))
        self.level[id(opener)] = len(self.scopes) - 1  # a RANGE counter lives in its body
        return opener

    def close(self) -> None:
        scope = self.scopes.pop()
        assert scope.opener is not None, "close() without open()"
        closer = Inst(OPENS[scope.opener.opc], None, (scope.opener,))
        self.scopes[-1].items.append((scope.opener, scope.items, closer))

    def finish(self) -> list[Inst]:
        assert len(self.scopes) == 1, "unclosed blocks"
        out: list[Inst] = []
        # nested blocks written out in order, with a stack of the blocks' remaining items (a
        # nested function calling itself would be a reference cycle, freed only by the GC)
        stack: list[Iterator[Inst | tuple[Inst, list, Inst]]] = [iter(self.scopes[0].items)]
        closers: list[Inst] = []
        while stack:
            item = next(stack[-1], None)
            if item is None:
                stack.pop()
                if closers:
                    out.append(closers.pop())
            elif isinstance(item, tuple):
                opener, body, closer = item
                out.append(opener)
                stack.append(iter(body))
                closers.append(closer)
            else:
                out.append(item)
        for pos, inst in enumerate(out):
            inst.id = pos
        return out

    # -- blocks
    def range(self, start: Inst, end: Inst, step: int = 1) -> Inst:
        return self.open(Opc.RANGE, INDEX, (start, end), step)

    def if_(self, cond: Inst) -> Inst:
        return self.open(Opc.IF, None, (cond,))

    def group_index(self, grid: tuple[int, ...]) -> Inst:
        """The workgroup's linear index in a grid of up to 3 dims: x + X * (y + Y * z)."""
        lin = self.const(0)
        for dim in reversed(range(len(grid))):
            gid = self.emit(Opc.SPECIAL, INDEX, (), (Special.GROUP_ID, dim)) if grid[dim] > 1 else self.const(0)
            lin = self.add(self.mul(lin, grid[dim]), gid)
        return lin

    # -- values, with folding for int64 index math
    def const(self, value: Any, dtype: np.dtype = INDEX) -> Inst:
        return self.emit(Opc.CONST, dtype, (), dtype.type(value).item())

    @staticmethod
    def _const_of(x: Inst) -> int | None:
        return x.arg if x.opc is Opc.CONST else None

    def add(self, a: Inst, b: Inst) -> Inst:
        ca, cb = self._const_of(a), self._const_of(b)
        if ca is not None and cb is not None:
            return self.const(ca + cb)
        if ca is not None:  # constants on the right, so that a+c and c+a are one instruction
            a, b, ca, cb = b, a, cb, ca
        if cb == 0:
            return a
        return self.emit(Opc.ALU, INDEX, (a, b), Op.ADD)

    def mul(self, a: Inst, c: int) -> Inst:
        ca = self._const_of(a)
        if ca is not None:
            return self.const(ca * c)
        if c == 0:
            return self.const(0)
        if c == 1:
            return a
        return self.emit(Opc.ALU, INDEX, (a, self.const(c)), Op.MUL)

    def idiv(self, a: Inst, c: int) -> Inst:
        ca = self._const_of(a)
        if ca is not None:
            return self.const(ca // c)
        return a if c == 1 else self.emit(Opc.IDIV, INDEX, (a, self.const(c)))

    def mod(self, a: Inst, c: int) -> Inst:
        ca = self._const_of(a)
        if ca is not None:
            return self.const(ca % c)
        return self.const(0) if c == 1 else self.emit(Opc.MOD, INDEX, (a, self.const(c)))

    def alu(self, op: Op, srcs: tuple[Inst, ...], dtype: np.dtype) -> Inst:
        consts = [self._const_of(s) if s.dtype == BOOL else None for s in srcs]
        if op is Op.WHERE and consts[0] is not None:  # a mask test known in a segment
            return srcs[1] if consts[0] else srcs[2]
        if op is Op.MUL and dtype == BOOL:  # `and`
            for c, other in zip(consts, reversed(srcs)):
                if c is not None:
                    return other if c else self.const(False, BOOL)
        return self.emit(Opc.ALU, dtype, srcs, op)

    def min(self, a: Inst, b: Inst) -> Inst:
        return self._index_extreme(Op.MIN, a, b)

    def max(self, a: Inst, b: Inst) -> Inst:
        return self._index_extreme(Op.MAX, a, b)

    def _index_extreme(self, op: Op, a: Inst, b: Inst) -> Inst:
        ca, cb = self._const_of(a), self._const_of(b)
        if ca is not None and cb is not None:
            return self.const(min(ca, cb) if op is Op.MIN else max(ca, cb))
        return a if a is b else self.emit(Opc.ALU, INDEX, (a, b), op)

    def cast(self, x: Inst, dtype: np.dtype) -> Inst:
        if x.dtype == dtype:
            return x
        if x.opc is Opc.CONST:   # (a complex constant cast to a real dtype: its real part, numpy's cast)
            return self.const(x.arg.real if isinstance(x.arg, complex) and dtype.kind != "c" else x.arg, dtype)
        return self.emit(Opc.CAST, dtype, (x,))
