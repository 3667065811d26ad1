"""Elementwise functions of the Array API standard that are exact compositions of ug's ops.

The function forms of operators call the Tensor's dunders, so `add(a, b)` and `a + b` are one
thing; a Python scalar may stand for either operand (2024.12), the reflected dunder serving a
scalar first operand. The transcendental ones beyond ug's primitives (log1p ... hypot) are
in transcendental.py."""

from __future__ import annotations

import builtins
import math
import operator
from typing import Any, Callable


import numpy as np

from .. import dtypes, graph
from ..custom import define_vjp
from ..ops import Op
from ..tensor import Tensor, checked_tensor, full as _full
from ..tensor_arith import as_tensor, combine, maximum as _maximum, minimum as _minimum, parts, where
from . import _complex
from ._common import check_tensor

Binary = Callable[[Any, Any], Tensor]
Unary = Callable[[Tensor], Tensor]


def _binary(name: str, dunder: str, reflected: str) -> Binary:
    def fn(x1: Any, x2: Any, /) -> Tensor:
        if isinstance(x1, Tensor):
            return getattr(x1, dunder)(x2)
        if isinstance(x2, Tensor):
            return getattr(x2, reflected)(x1)
        raise TypeError(f"{name}: at least one operand must be a ug Tensor, got {type(x1).__name__} "
                        f"and {type(x2).__name__}")
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"x1 {dunder} x2 (the `{dunder}` operator) as a function."
    return fn


add = _binary("add", "__add__", "__radd__")
subtract = _binary("subtract", "__sub__", "__rsub__")
multiply = _binary("multiply", "__mul__", "__rmul__")
divide = _binary("divide", "__truediv__", "__rtruediv__")
pow = _binary("pow", "__pow__", "__rpow__")
equal = _binary("equal", "__eq__", "__eq__")
not_equal = _binary("not_equal", "__ne__", "__ne__")
less = _binary("less", "__lt__", "__gt__")
less_equal = _binary("less_equal", "__le__", "__ge__")
greater = _binary("greater", "__gt__", "__lt__")
greater_equal = _binary("greater_equal", "__ge__", "__le__")
floor_divide = _binary("floor_divide", "__floordiv__", "__rfloordiv__")
remainder = _binary("remainder", "__mod__", "__rmod__")
bitwise_and = _binary("bitwise_and", "__and__", "__rand__")
bitwise_or = _binary("bitwise_or", "__or__", "__ror__")
bitwise_xor = _binary("bitwise_xor", "__xor__", "__rxor__")
bitwise_left_shift = _binary("bitwise_left_shift", "__lshift__", "__rlshift__")
bitwise_right_shift = _binary("bitwise_right_shift", "__rshift__", "__rrshift__")


def _unary(name: str, method: str) -> Unary:
    def fn(x: Tensor, /) -> Tensor:
        return getattr(check_tensor(x, name), method)()
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Tensor.{method} as a function."
    return fn


abs = _unary("abs", "__abs__")
negative = _unary("negative", "__neg__")
positive = _unary("positive", "__pos__")
sqrt = _unary("sqrt", "sqrt")
exp = _unary("exp", "exp")
log = _unary("log", "log")
sin = _unary("sin", "sin")
cos = _unary("cos", "cos")
tanh = _unary("tanh", "tanh")
reciprocal = _unary("reciprocal", "reciprocal")
bitwise_invert = _unary("bitwise_invert", "__invert__")


def _numeric(x: Any, fn: str) -> Tensor:
    check_tensor(x, fn)
    if x.dtype == dtypes.BOOL:
        raise TypeError(f"{fn}: needs a numeric tensor, got bool")
    return x


def _pair(x1: Any, x2: Any, fn: str) -> tuple[Tensor, Tensor]:
    """Both operands as tensors of their common dtype (a scalar takes the tensor's, weakly)."""
    like = x1 if isinstance(x1, Tensor) else x2
    if not isinstance(like, Tensor):
        raise TypeError(f"{fn}: at least one operand must be a ug Tensor")
    a, b = (as_tensor(v, like) for v in (x1, x2))
    if a.device != b.device:
        raise ValueError(f"{fn}: tensors are on different devices: {a.device!r} and {b.device!r}")
    dt = dtypes.promote(a.dtype, b.dtype)
    return a.astype(dt) if a.dtype != dt else a, b.astype(dt) if b.dtype != dt else b


def square(x: Tensor, /) -> Tensor:
    return _numeric(x, "square") * x


def maximum(x1: Any, x2: Any, /) -> Tensor:
    """The larger (IEEE 754-2019: NaN if either is NaN, +0 over -0)."""
    return _maximum(x1, x2)


def minimum(x1: Any, x2: Any, /) -> Tensor:
    return _minimum(x1, x2)


def _is_float(x: Tensor) -> bool:
    return x.dtype.kind == "f"


def _is_complex(x: Tensor) -> bool:
    return x.dtype.kind == "c"


def isnan(x: Tensor, /) -> Tensor:
    """Of complex numbers: either part is NaN."""
    check_tensor(x, "isnan")
    if _is_complex(x):
        return _complex.isnan(x)
    return x != x if _is_float(x) else _full(x.shape, False, dtypes.BOOL, x.device)


def isinf(x: Tensor, /) -> Tensor:
    """Of complex numbers: either part is infinite (even with a NaN other part)."""
    check_tensor(x, "isinf")
    if _is_complex(x):
        return _complex.isinf(x)
    return x.abs() == math.inf if _is_float(x) else _full(x.shape, False, dtypes.BOOL, x.device)


def isfinite(x: Tensor, /) -> Tensor:
    """|x| < inf: False for NaN, as no comparison with NaN holds; of complex numbers, both
    parts finite."""
    check_tensor(x, "isfinite")
    if _is_complex(x):
        return _complex.isfinite(x)
    return x.abs() < math.inf if _is_float(x) else _full(x.shape, True, dtypes.BOOL, x.device)


def sign(x: Tensor, /) -> Tensor:
    """-1, 0 or 1 (+0 for both zeros), and NaN for NaN; of unsigned ints, 0 or 1 (-1 is not
    one of their values); of complex numbers x / |x| (0 for 0, the standard's)."""
    _numeric(x, "sign")
    if _is_complex(x):
        return _complex.sign(x)
    if x.dtype.kind == "u":
        return (x > 0).astype(x.dtype)
    return where(x > 0, 1, where(x < 0, -1, where(x == 0, 0, x)))


def signbit(x: Tensor, /) -> Tensor:
    """Whether the sign bit is set: True for -0.0 and for NaNs with the sign bit (ints: x < 0)."""
    check_tensor(x, "signbit")
    if _is_complex(x):
        raise _complex.refused("signbit", x.dtype)
    if not _is_float(x):
        return x < 0
    return checked_tensor(graph.alu(Op.SIGNBIT, (x.node,), dtypes.BOOL))


def _floats(x1: Any, x2: Any, fn: str) -> tuple[Tensor, Tensor]:
    a, b = _pair(x1, x2, fn)
    if _is_complex(a):
        raise _complex.refused(fn, a.dtype)
    if not _is_float(a):
        raise TypeError(f"{fn}: needs floating operands, got {a.dtype.name}")
    return a, b


def copysign(x1: Any, x2: Any, /) -> Tensor:
    """|x1| with the sign bit of x2 (NaNs included: abs clears the sign bit, negation flips it)."""
    a, b = _floats(x1, x2, "copysign")
    magnitude = a.abs()
    return where(signbit(b), -magnitude, magnitude)


def nextafter(x1: Any, x2: Any, /) -> Tensor:
    """The next value of x1's dtype after x1 toward x2 (numpy's, float16's steps included)."""
    a, b = _floats(x1, x2, "nextafter")
    return a._binary(Op.NEXTAFTER, b)


def _rounding(name: str, op: Op, ufunc: Callable[..., Any]) -> Unary:
    def fn(x: Tensor, /) -> Tensor:
        _numeric(x, name)
        if _is_complex(x):
            raise _complex.refused(name, x.dtype)
        return x._unary(op, ufunc) if _is_float(x) else Tensor(x.node)   # an integer is its own
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"numpy's {ufunc.__name__} of floats, exactly; integer tensors are returned as they are."
    return fn


floor = _rounding("floor", Op.FLOOR, np.floor)
ceil = _rounding("ceil", Op.CEIL, np.ceil)
trunc = _rounding("trunc", Op.TRUNC, np.trunc)
_rint = _rounding("round", Op.RINT, np.rint)   # half to even


def round(x: Tensor, /, decimals: int = 0) -> Tensor:
    """numpy's round of floats, half to even, exactly; integer tensors are returned as they are.
    `decimals` (numpy's, which xarray passes): floats as numpy rounds them, rint(x * 10**d) /
    10**d (rint(x / 10**-d) * 10**-d for d < 0) in x's dtype; integers to a multiple of 10**-d
    for d < 0, half to even, as numpy's."""
    _numeric(x, "round")
    if _is_complex(x):   # each part rounded (the standard's and numpy's)
        re, im = parts(x)
        return combine(round(re, decimals), round(im, decimals))
    d = operator.index(decimals)
    if d == 0:
        return _rint(x)
    if _is_float(x):
        factor = x.dtype.type(10.0 ** builtins.abs(d)).item()
        return _rint(x * factor) / factor if d > 0 else _rint(x / factor) * factor
    if d > 0 or x.dtype == dtypes.BOOL:
        return Tensor(x.node)
    step = 10 ** -d
    if step > np.iinfo(x.dtype).max:   # every value rounds to 0 (numpy's too)
        return x * 0
    low = x // step                       # floor: x = low * step + rest, 0 <= rest < step
    rest = x - low * step
    half = step - rest                    # (rest * 2 could overflow)
    up = (rest > half) | ((rest == half) & (low % 2 != 0))
    return where(up, low + 1, low) * step


def _clip_bound(x: Tensor, bound: Any, lower: bool) -> Any:
    """A bound of clip for x: an integer scalar beyond x's integer dtype is dropped where it
    limits nothing (a min below the range, a max above it) and an OverflowError where it would
    replace every element by a value x's dtype cannot hold (numpy 2's clip, for numpy's
    integers too: clip's result has x's dtype, the standard's rule)."""
    if x.dtype.kind not in "iu" or not isinstance(bound, (int, np.integer)) or isinstance(bound, (bool, np.bool_)):
        return bound
    low, high = dtypes.iinfo_range(x.dtype)
    value = int(bound)
    if value < low:
        if lower:
            return None
    elif value > high:
        if not lower:
            return None
    else:
        return bound
    raise OverflowError(f"Python integer {value} out of bounds for {x.dtype.name}")


def clip(x: Tensor, /, min: Any = None, max: Any = None) -> Tensor:
    """x limited to [min, max], in x's dtype (the standard's rule, also for bounds of other
    dtypes); a NaN in x stays NaN. Python scalars are weak (exact in x's dtype)."""
    check_tensor(x, "clip")
    min, max = _clip_bound(x, min, True), _clip_bound(x, max, False)
    out = x
    if min is not None:
        out = _maximum(out, min)
    if max is not None:
        out = _minimum(out, max)
    if out is x:
        return Tensor(x.node)
    out = out if out.dtype == x.dtype else out.astype(x.dtype)
    if x.dtype.kind != "f":
        return out
    # torch's derivative: g to x where min <= x <= max (maximum / minimum split a tie in half),
    # and to a tensor bound where it is taken
    bounds = [(b, lower) for b, lower in ((min, True), (max, False)) if isinstance(b, Tensor)]

    def rule(g: Tensor, out: Tensor, x: Tensor, *bs: Tensor) -> tuple[Tensor | None, ...]:
        inside = (x == x) if min is None else (x >= min)
        if max is not None:
            inside = inside & (x <= max)
        grads: list[Tensor | None] = [where(inside, g, 0.0)]
        for (_, lower), b in zip(bounds, bs):
            taken = (x < b) if lower else (x > b)
            grads.append(_sum_to(where(taken, g, 0.0), b.shape).astype(b.dtype) if b.dtype.kind == "f" else None)
        return tuple(grads)
    return define_vjp(out, [x] + [b for b, _ in bounds], rule)


def _sum_to(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """t summed over the dims a broadcast to its shape added or stretched from size 1."""
    lead = t.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape) if n == 1 and t.shape[lead + d] != 1)
    return t.sum(axis=axes, keepdims=True).reshape(shape) if axes else t


def conj(x: Tensor, /) -> Tensor:
    """The complex conjugate re - im j (numpy's conj: a zero imaginary part's sign flips too);
    of a real tensor, the tensor itself (2024.12: conj takes any numeric dtype)."""
    _numeric(x, "conj")
    return _complex.conjugate(x) if _is_complex(x) else Tensor(x.node)


def real(x: Tensor, /) -> Tensor:
    """The real part, in the complex dtype's part dtype (complex64: float32); of a real (or
    bool: numpy's, which xarray's reductions call) tensor, the tensor itself."""
    check_tensor(x, "real")
    return parts(x)[0] if _is_complex(x) else Tensor(x.node)


def imag(x: Tensor, /) -> Tensor:
    """The imaginary part, in the complex dtype's part dtype; of a real (or bool) tensor, zeros
    of its dtype."""
    check_tensor(x, "imag")
    return parts(x)[1] if _is_complex(x) else _full(x.shape, 0, x.dtype, x.device)


def _as_bool(x: Any, fn: str) -> Tensor:
    check_tensor(x, fn)
    return x if x.dtype == dtypes.BOOL else x != 0


def _bools(x1: Any, x2: Any, fn: str) -> tuple[Tensor, Any]:
    """A bool tensor and the other operand (a bool tensor, or a Python scalar as a bool)."""
    if not isinstance(x1, Tensor):
        x1, x2 = x2, x1  # the ops are symmetric
    a = _as_bool(x1, fn)
    return a, _as_bool(x2, fn) if isinstance(x2, Tensor) else builtins.bool(x2)


def logical_and(x1: Any, x2: Any, /) -> Tensor:
    a, b = _bools(x1, x2, "logical_and")
    return a & b


def logical_or(x1: Any, x2: Any, /) -> Tensor:
    a, b = _bools(x1, x2, "logical_or")
    return a | b


def logical_xor(x1: Any, x2: Any, /) -> Tensor:
    a, b = _bools(x1, x2, "logical_xor")
    return a ^ b


def logical_not(x: Tensor, /) -> Tensor:
    return ~_as_bool(x, "logical_not")


__all__ = ["abs", "add", "clip", "conj", "copysign", "cos", "divide", "equal", "exp", "greater", "greater_equal",
           "imag", "isfinite", "isinf", "isnan", "less", "less_equal", "log", "logical_and",
           "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative", "not_equal",
           "positive", "pow", "real", "reciprocal", "sign", "signbit", "sin", "sqrt", "square", "subtract", "tanh",
           "bitwise_and", "bitwise_invert", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
           "ceil", "floor", "floor_divide", "nextafter", "remainder", "round", "trunc"]
