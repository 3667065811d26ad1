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


# --- what each op means, per dtype kind ----------------------------------------------------
#
# The `numpy` function of an op is its definition: the ref device computes it, and every
# backend must give the same result (tests/test_semantics.py checks the edge cases on every
# device). Kinds: float (float16 is computed in float32 and rounded once, as numpy does),
# int (int32, int64: two's complement, wrapping on overflow), bool. ug has no unsigned
# dtypes. An op on a kind that the frontend never builds (numpy refuses it or promotes it
# first: bool NEG/SUB/POW, int EXP/LOG/..., which are cast to float) is marked so; a renderer
# may refuse it (a CompileError), but where it computes it, it follows the meaning below.


def _float_zero_pick(a: np.ndarray, b: np.ndarray, out: np.ndarray, want_negative: bool) -> np.ndarray:
    """`out` with the sign of zero fixed where a == b == 0 (IEEE 754-2019 maximum/minimum)."""
    both_zero = (a == 0) & (b == 0)
    if not np.any(both_zero):
        return out
    a, b = np.broadcast_arrays(a, b)
    signed = np.where(np.signbit(a) == want_negative, a, b)
    return np.where(both_zero, signed, out)


def maximum(a: Any, b: Any) -> Any:
    """MAX. float: IEEE 754-2019 maximum: NaN if either is NaN, and -0.0 < +0.0, so
    maximum(0.0, -0.0) == maximum(-0.0, 0.0) == +0.0 (numpy leaves the zero's sign to its
    SIMD loops: the second operand for float32/64, the first for float16 here). Commutative,
    so a reduction's order never shows. int: the larger. bool: or."""
    out = np.maximum(a, b)
    if np.asarray(out).dtype.kind == "f":
        return _float_zero_pick(np.asarray(a), np.asarray(b), out, want_negative=False)
    return out


def minimum(a: Any, b: Any) -> Any:
    """MIN. float: IEEE 754-2019 minimum (NaN if either is NaN; minimum(0.0, -0.0) == -0.0).
    int: the smaller. bool: and."""
    out = np.minimum(a, b)
    if np.asarray(out).dtype.kind == "f":
        return _float_zero_pick(np.asarray(a), np.asarray(b), out, want_negative=True)
    return out


def divide(a: Any, b: Any) -> Any:
    """DIV. float: IEEE division (x/0 = +-inf, 0/0 = NaN). int: floor division, numpy's
    floor_divide: x // 0 == 0 and INT_MIN // -1 == INT_MIN (the frontend never builds it:
    `/` on ints is true division in float64, and there is no `//` yet). bool: never built."""
    if np.result_type(a, b).kind in "iu":
        with np.errstate(divide="ignore", over="ignore"):
            return np.floor_divide(a, b)
    return np.true_divide(a, b)


def power(a: Any, b: Any) -> Any:
    """POW. float: C99 / numpy pow: pow(x, 0) == 1 and pow(1, y) == 1 even for NaN,
    pow(-1, +-inf) == 1, a negative base with a non-integer exponent is NaN, pow(+-0, y < 0)
    is +inf, or -inf for an odd integer y and -0; but a constant exponent 0.5 (one value, as a
    Python scalar exponent is) is sqrt, as numpy's `x ** 0.5` is for float32/64: sqrt(-0.0) is
    -0.0 and sqrt(-inf) NaN where pow gives +0.0 and +inf.
    int: wrapping power by squaring; a negative exponent, which numpy refuses, gives the
    truncated 1 / a**-b: 1 for a == 1, +-1 for a == -1, else 0 (0 for a == 0 too, as int
    division by zero gives 0). The frontend raises numpy's ValueError when the exponent is a
    known negative integer (a Python int, an array), so only a tensor exponent reaches a kernel
    with one. bool: never built (numpy gives int8)."""
    if np.result_type(a, b).kind not in "iu":
        if np.ndim(b) == 0 and b == 0.5:  # (numpy's float16 pow has no such fast path)
            return np.sqrt(a)
        return np.power(a, b)
    a, b = np.asarray(a), np.asarray(b)
    negative = b < 0
    out = np.power(a, np.where(negative, 0, b).astype(b.dtype))
    if not np.any(negative):
        return out
    one_over = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 1, -1, 1), 0)).astype(out.dtype)
    return np.where(negative, one_over, out)


ALU: dict[Op, Alu] = {
    # float: -x (flips the sign of 0 and NaN). int: wraps (-INT_MIN == INT_MIN). bool: never built.
    Op.NEG: Alu(1, np.negative, "neg"),
    # float: 1/x. int: numpy's reciprocal: 1 / x truncated (1, -1, else 0) and INT_MIN for
    # x == 0 (the frontend never builds it: reciprocal() of ints is float64). bool: never built.
    Op.RECIP: Alu(1, np.reciprocal, "recip"),
    # EXP ... TANH: float only (ints and bools are cast to float first, numpy's rule). numpy's
    # results, to a few ulp (tests/test_ulp.py: <= 4 ulp in float32 on every device); exp
    # overflows to inf and underflows through the subnormals to 0; log(0) == -inf, log(x < 0)
    # and log(-inf) are NaN; sin/cos(+-inf) are NaN; sqrt is correctly rounded, sqrt(-0) == -0.
    Op.EXP: Alu(1, np.exp, "exp"),
    Op.LOG: Alu(1, np.log, "log"),
    Op.SQRT: Alu(1, np.sqrt, "sqrt"),
    Op.SIN: Alu(1, np.sin, "sin"),
    Op.COS: Alu(1, np.cos, "cos"),
    Op.TANH: Alu(1, np.tanh, "tanh"),
    # float: |x| (clears the sign of -0 and NaN). int: wraps (|INT_MIN| == INT_MIN). bool: x.
    Op.ABS: Alu(1, np.abs, "abs"),
    # x == 0 (NaN is not zero, so NOT NaN is False), for every kind.
    Op.NOT: Alu(1, np.logical_not, "not", returns_bool=True),
    # float: IEEE, no contraction into fma. int: wraps. bool: ADD is or, MUL is and (numpy);
    # SUB is never built (numpy refuses bool subtraction).
    Op.ADD: Alu(2, np.add, "+"),
    Op.SUB: Alu(2, np.subtract, "-"),
    Op.MUL: Alu(2, np.multiply, "*"),
    Op.DIV: Alu(2, divide, "/"),
    Op.POW: Alu(2, power, "**"),
    Op.MAX: Alu(2, maximum, "max"),
    Op.MIN: Alu(2, minimum, "min"),
    # float: ordered comparisons (False with a NaN), but CMPNE, which is True with a NaN;
    # -0.0 == 0.0. int: signed. bool: False < True.
    Op.CMPLT: Alu(2, np.less, "<", returns_bool=True),
    Op.CMPLE: Alu(2, np.less_equal, "<=", returns_bool=True),
    Op.CMPEQ: Alu(2, np.equal, "==", returns_bool=True),
    Op.CMPNE: Alu(2, np.not_equal, "!=", returns_bool=True),
    # cond ? a : b, for every kind of a and b (cond is bool).
    Op.WHERE: Alu(3, np.where, "where"),
}

FLOAT, INT, BOOL_KIND = "f", "i", "b"
_NUMBERS = frozenset({FLOAT, INT})
_EVERY_KIND = frozenset({FLOAT, INT, BOOL_KIND})
KINDS: dict[Op, frozenset[str]] = {
    **{op: frozenset({FLOAT}) for op in (Op.EXP, Op.LOG, Op.SQRT, Op.SIN, Op.COS, Op.TANH)},
    **{op: _NUMBERS for op in (Op.NEG, Op.RECIP, Op.SUB, Op.DIV, Op.POW)},
    **{op: _EVERY_KIND for op in (Op.ABS, Op.NOT, Op.ADD, Op.MUL, Op.MAX, Op.MIN,
                                  Op.CMPLT, Op.CMPLE, Op.CMPEQ, Op.CMPNE, Op.WHERE)},
}
"""The operand dtype kinds (numpy's dtype.kind, "u" counted as "i") each ALU op is defined on,
as the comments above say: the pairs the frontend never builds (bool NEG, int EXP, ...) are
not. The core's legalization (ug_core.legalize) refuses the rest, the same on every device, so
a renderer spells exactly these pairs. WHERE's kind is its value operands'."""

def kind(dtype: np.dtype) -> str:
    k = np.dtype(dtype).kind
    return INT if k == "u" else k


def defined(op: Op, operand: np.dtype) -> bool:
    """Whether ALU op `op` is defined on operands of dtype `operand`."""
    return kind(operand) in KINDS[op]


TRANSCENDENTAL = frozenset({Op.EXP, Op.LOG, Op.SQRT, Op.SIN, Op.COS, Op.TANH})
"""Unary ops that only make sense on floats: integer inputs are cast first (numpy's rule)."""


@dataclass(frozen=True)
class Reduce:
    """A reduction: its name (also the accumulator identity's key), its meaning
    (numpy(values, axis, keepdims, dtype)) and combine op."""

    name: str
    numpy: Callable[..., Any]
    combine: Op


def _reduce_sum(values: np.ndarray, axis: tuple[int, ...], keepdims: bool, dtype: np.dtype) -> np.ndarray:
    """The sum. float16 / float32 sums accumulate in float64 and round once (numpy sums pairwise
    along a contiguous last axis only: its float32 sum over a strided axis of 1M values was 3e-5
    off), so the ref device is as accurate as the devices must be, whatever the layout, without
    copying the values (a broadcast input stays a view)."""
    if np.dtype(dtype).kind == "f" and np.dtype(dtype).itemsize < 8:
        wide = np.add.reduce(values, axis=axis, keepdims=keepdims, dtype=np.float64)  # type: ignore[call-overload]
        return wide.astype(dtype)
    return np.add.reduce(values, axis=axis, keepdims=keepdims, dtype=dtype)  # type: ignore[call-overload]


def _reduce_extreme(values: np.ndarray, axis: Any, keepdims: bool, dtype: np.dtype, largest: bool) -> np.ndarray:
    """The MAX (MIN) of the values: NaN if any is NaN; a zero result is +0.0 (-0.0) if any
    value is +0.0 (-0.0), whatever the order (maximum/minimum are commutative)."""
    ufunc = np.maximum if largest else np.minimum
    out = ufunc.reduce(values, axis=axis, keepdims=keepdims, dtype=dtype)  # type: ignore[call-overload]
    if out.dtype.kind != "f" or not np.any(out == 0):
        return out
    preferred = (values == 0) & (np.signbit(values) != largest)
    has = np.logical_or.reduce(preferred, axis=axis, keepdims=keepdims)  # type: ignore[call-overload]
    zero = np.where(has == largest, out.dtype.type(0.0), out.dtype.type(-0.0))
    return np.where(out == 0, zero, out)


REDUCE: dict[Op, Reduce] = {
    Op.SUM: Reduce("sum", _reduce_sum, Op.ADD),
    Op.RMAX: Reduce("max", lambda v, axis, keepdims, dtype: _reduce_extreme(v, axis, keepdims, dtype, True), Op.MAX),
    Op.RMIN: Reduce("min", lambda v, axis, keepdims, dtype: _reduce_extreme(v, axis, keepdims, dtype, False), Op.MIN),
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
check_exhaustive(KINDS, ALU, "ops.KINDS")
