"""The ops: each op's name, arity, dtype rule and numpy meaning, in one table.

Adding an op means adding it to `Op` and to exactly one of the tables below; every
consumer that dispatches on ops (the ref device, the lowering, each backend's renderer)
calls `check_exhaustive`, so a missing case fails loudly at import time instead of
falling into a silent default.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np


class Op(enum.Enum):
    # members are singletons compared by identity; Enum's own __hash__ (of the name) is Python
    # code, and the scheduler and the kernel builders hash ops in every dict lookup
    __hash__ = object.__hash__

    # elementwise, one operand
    NEG = enum.auto()
    RECIP = enum.auto()
    EXP = enum.auto()
    LOG = enum.auto()
    SQRT = enum.auto()
    SIN = enum.auto()
    COS = enum.auto()
    TANH = enum.auto()
    ABS = enum.auto()
    NOT = enum.auto()
    # elementwise, two operands
    ADD = enum.auto()
    SUB = enum.auto()
    MUL = enum.auto()
    DIV = enum.auto()
    POW = enum.auto()
    MAX = enum.auto()
    MIN = enum.auto()
    CMPLT = enum.auto()
    CMPLE = enum.auto()
    CMPEQ = enum.auto()
    CMPNE = enum.auto()
    # elementwise, three operands
    WHERE = enum.auto()
    # dtype conversion (arg: target dtype)
    CAST = enum.auto()
    # reductions (kept dims have size 1)
    SUM = enum.auto()
    RMAX = enum.auto()
    RMIN = enum.auto()
    # a constant (arg: Python scalar); shape () in the graph, broadcast through a VIEW
    CONST = enum.auto()
    # graph-only ops (never appear inside a kernel expression)
    BUFFER = enum.auto()   # an input that is already on a device
    VIEW = enum.auto()     # arg: View over the source's contiguous layout
    REDUCE = enum.auto()   # arg: (reduce op, axes)
    MATMUL = enum.auto()   # srcs (a, b) with shapes (..., M, K), (..., K, N)
    CUSTOM = enum.auto()   # arg: host function fn(out, *inputs)
    COPY = enum.auto()     # srcs (x,) on another device
    ASSIGN = enum.auto()   # srcs (target, value); arg: region View into target or None
    # kernel-expression leaves (only inside kernel IR)
    LOAD = enum.auto()     # arg: (buffer argument index, ViewChain from the phase's index space)
    ACC = enum.auto()      # arg: index of a reduction already finished for the current outer index


@dataclass(frozen=True)
class Alu:
    """An elementwise op: how many operands, what numpy computes, how it prints."""

    arity: int
    numpy: Callable[..., Any]
    symbol: str
    returns_bool: bool = False


ALU: dict[Op, Alu] = {
    Op.NEG: Alu(1, np.negative, "neg"),
    Op.RECIP: Alu(1, np.reciprocal, "recip"),
    Op.EXP: Alu(1, np.exp, "exp"),
    Op.LOG: Alu(1, np.log, "log"),
    Op.SQRT: Alu(1, np.sqrt, "sqrt"),
    Op.SIN: Alu(1, np.sin, "sin"),
    Op.COS: Alu(1, np.cos, "cos"),
    Op.TANH: Alu(1, np.tanh, "tanh"),
    Op.ABS: Alu(1, np.abs, "abs"),
    Op.NOT: Alu(1, np.logical_not, "not", returns_bool=True),
    Op.ADD: Alu(2, np.add, "+"),
    Op.SUB: Alu(2, np.subtract, "-"),
    Op.MUL: Alu(2, np.multiply, "*"),
    Op.DIV: Alu(2, np.true_divide, "/"),
    Op.POW: Alu(2, np.power, "**"),
    Op.MAX: Alu(2, np.maximum, "max"),
    Op.MIN: Alu(2, np.minimum, "min"),
    Op.CMPLT: Alu(2, np.less, "<", returns_bool=True),
    Op.CMPLE: Alu(2, np.less_equal, "<=", returns_bool=True),
    Op.CMPEQ: Alu(2, np.equal, "==", returns_bool=True),
    Op.CMPNE: Alu(2, np.not_equal, "!=", returns_bool=True),
    Op.WHERE: Alu(3, np.where, "where"),
}

UNARY = frozenset(op for op, d in ALU.items() if d.arity == 1)
BINARY = frozenset(op for op, d in ALU.items() if d.arity == 2)
TRANSCENDENTAL = frozenset({Op.EXP, Op.LOG, Op.SQRT, Op.SIN, Op.COS, Op.TANH})
"""Unary ops that only make sense on floats: integer inputs are cast first (numpy's rule)."""


@dataclass(frozen=True)
class Reduce:
    """A reduction: its name (also the accumulator identity's key), numpy meaning and combine op."""

    name: str
    numpy: Callable[..., Any]
    combine: Op


REDUCE: dict[Op, Reduce] = {
    Op.SUM: Reduce("sum", np.sum, Op.ADD),
    Op.RMAX: Reduce("max", np.max, Op.MAX),
    Op.RMIN: Reduce("min", np.min, Op.MIN),
}

GRAPH_ONLY = frozenset({Op.BUFFER, Op.VIEW, Op.REDUCE, Op.MATMUL, Op.CUSTOM, Op.COPY, Op.ASSIGN})
LEAVES = frozenset({Op.CONST, Op.LOAD, Op.ACC})


def check_exhaustive(handled: Iterable[Op], required: Iterable[Op], who: str) -> None:
    """Raise at import time if `who` does not handle every op in `required`."""
    missing = set(required) - set(handled)
    if missing:
        names = ", ".join(sorted(op.name for op in missing))
        raise NotImplementedError(f"{who} does not handle ops: {names}")


# every op lives in exactly one group
check_exhaustive(set(ALU) | {Op.CAST} | set(REDUCE) | GRAPH_ONLY | LEAVES, Op, "ops tables")
