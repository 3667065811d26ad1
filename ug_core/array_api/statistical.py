"""Statistical functions of the Array API standard: sum, prod, max, min, mean, var, std, and the
scans cumulative_sum and cumulative_prod (ops.SCANS, built by array_api.scans)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import dtypes, graph
from ..ops import Op
from ..shapes import normalize_axes, normalize_axis
from ..tensor import Tensor, check_supported, graph_scalar as _graph_scalar
from ..tensor_arith import parts
from ..view import View
from . import _complex, scans
from ._common import check_tensor

Axis = int | tuple[int, ...] | None


def sum(x: Tensor, /, *, axis: Axis = None, dtype: Any = None, keepdims: bool = False) -> Tensor:
    """The sum, accumulated in `dtype`; by default the standard's: the tensor's dtype for
    floats, the default integer dtype (int64) for ints and bools."""
    return check_tensor(x, "sum").sum(axis, keepdims, dtype=dtype)


def prod(x: Tensor, /, *, axis: Axis = None, dtype: Any = None, keepdims: bool = False) -> Tensor:
    """The product, accumulated in `dtype`; by default the standard's (as for sum). Over no
    elements it is 1."""
    return check_tensor(x, "prod").prod(axis, keepdims, dtype=dtype)


def max(x: Tensor, /, *, axis: Axis = None, keepdims: bool = False) -> Tensor:
    return check_tensor(x, "max").max(axis, keepdims)


def min(x: Tensor, /, *, axis: Axis = None, keepdims: bool = False) -> Tensor:
    return check_tensor(x, "min").min(axis, keepdims)


def mean(x: Tensor, /, *, axis: Axis = None, keepdims: bool = False, dtype: Any = None) -> Tensor:
    """The standard's mean; `dtype` (numpy's, which cubed's var passes: float64) is the dtype the
    mean is computed in and returned as."""
    check_tensor(x, "mean")
    return (x if dtype is None else x.astype(dtype, copy=False)).mean(axis, keepdims)


def _count(x: Tensor, axis: Axis) -> int:
    return math.prod(x.shape[a] for a in normalize_axes(axis, x.ndim))


_F16, _F32 = np.dtype(np.float16), np.dtype(np.float32)


def _variance(x: Tensor, axis: Axis, correction: int | float, keepdims: bool, fn: str) -> tuple[Tensor, np.dtype]:
    """(the variance in the dtype it is computed in, the result's dtype): floats in their own
    dtype, but float16 in float32 (its count and its sums of squares overflow float16: a
    variance of 1000 values of 100 was inf), rounded once by the caller; ints and bools in
    float64, as their mean (numpy's); complex numbers as numpy's: the mean of |x - mean|^2, in
    their parts' dtype."""
    check_tensor(x, fn)
    if not dtypes.is_scalar(correction) or isinstance(correction, (bool, np.bool_)) or correction < 0:
        raise ValueError(f"{fn}: correction must be a non-negative number, got {correction!r}")
    if x.dtype.kind == "c":   # numpy's: the mean of |x - mean|^2, in the parts' dtype
        centered = x - x.mean(axis, keepdims=True)
        re, im = parts(centered)
        squares, dt = (re * re + im * im).sum(axis, keepdims), dtypes.part_dtype(x.dtype)
        divisor = float(_count(x, axis)) - float(correction)
        return squares / _graph_scalar(divisor if divisor > 0 else 0.0, dt, x.device), dt
    dt = x.dtype if x.dtype.kind == "f" else dtypes.ufunc_result(np.true_divide, x.dtype, x.dtype)
    work = _F32 if dt == _F16 else dt
    xw = x.astype(work)
    centered = xw - xw.mean(axis, keepdims=True)
    squares = (centered * centered).sum(axis, keepdims)
    divisor = float(_count(x, axis)) - float(correction)
    return squares / _graph_scalar(divisor if divisor > 0 else 0.0, work, x.device), dt


def var(x: Tensor, /, *, axis: Axis = None, correction: int | float = 0.0, keepdims: bool = False) -> Tensor:
    """sum((x - mean)^2) / (N - correction), N the number of reduced elements; N <= correction
    divides by 0 (inf or NaN), as numpy does. float16 is computed in float32 and rounded once."""
    out, dt = _variance(x, axis, correction, keepdims, "var")
    return out.astype(dt) if out.dtype != dt else out


def std(x: Tensor, /, *, axis: Axis = None, correction: int | float = 0.0, keepdims: bool = False) -> Tensor:
    """The square root of var, float16's computed in float32 and rounded once."""
    out, dt = _variance(x, axis, correction, keepdims, "std")
    out = out.sqrt()
    return out.astype(dt) if out.dtype != dt else out


def cumulative_sum(x: Tensor, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Tensor:
    """The running sums along `axis` (None: the one axis of a 1-d x), accumulated in `dtype`, by
    default the standard's (as for sum); include_initial puts the empty sum 0 first (the axis
    grows by one). numpy's cumulative_sum, to rounding (see ops.SCANS)."""
    return _cumulative(x, Op.SUM, "cumulative_sum", axis, dtype, include_initial)


def cumulative_prod(x: Tensor, /, *, axis: int | None = None, dtype: Any = None,
                    include_initial: bool = False) -> Tensor:
    """The running products, as cumulative_sum (the empty product is 1)."""
    return _cumulative(x, Op.PROD, "cumulative_prod", axis, dtype, include_initial)


def cumulative_max(x: Tensor, /, *, axis: int | None = None) -> Tensor:
    """The running maximum along `axis` (None: the one axis of a 1-d x), in x's dtype; a NaN
    stays from where it appears on (numpy's maximum.accumulate; torch's cummax values)."""
    return _cumulative(x, Op.RMAX, "cumulative_max", axis, x.dtype if isinstance(x, Tensor) else None, False)


def cumulative_min(x: Tensor, /, *, axis: int | None = None) -> Tensor:
    """The running minimum, as cumulative_max."""
    return _cumulative(x, Op.RMIN, "cumulative_min", axis, x.dtype if isinstance(x, Tensor) else None, False)


def _cumulative(x: Tensor, op: Op, fn: str, axis: int | None, dtype: Any, include_initial: bool) -> Tensor:
    check_tensor(x, fn)
    if x.ndim == 0:  # numpy's: a 0-d x is scanned as one element
        x = x.reshape(1)
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"{fn}: axis is required for an array of more than one dimension (shape {x.shape})")
        axis = 0
    axis = normalize_axis(axis, x.ndim)
    if dtype is None:
        dt = (np.sum if op is Op.SUM else np.prod)(np.empty(0, x.dtype)).dtype
    else:
        dt = dtypes.to_dtype(dtype)
    node = graph.cast(x.node, check_supported(dt, x.device))
    if include_initial:  # the identity in front: a masked index reads 0, a product's selects 1
        widths = tuple((1, 0) if d == axis else (0, 0) for d in range(x.ndim))
        before = View.contiguous(x.shape).pad(widths)
        node = graph.view(node, before)
        if op is Op.PROD:
            valid = graph.view(graph.const(True, dtypes.BOOL, x.device, x.shape), before)
            node = graph.alu(Op.WHERE, (valid, node, graph.const(1, dt, x.device, node.shape)), dt)
    if dt.kind == "c" and op is not Op.SUM:
        if op is not Op.PROD:
            raise _complex.refused(fn, dt)
        # a doubling scan of complex multiplies along the last axis (no componentwise running product)
        t = Tensor(node)
        moved = t.permute(*(d for d in range(t.ndim) if d != axis), axis)
        rows = math.prod(moved.shape[:-1])
        out = _complex.cumprod_rows(moved.reshape(rows, moved.shape[-1])).reshape(moved.shape)
        back = list(range(t.ndim - 1))
        back.insert(axis, t.ndim - 1)
        return out.permute(*back)
    return Tensor(scans.scan(node, op, axis, dt))


__all__ = ["cumulative_max", "cumulative_min", "cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum", "var"]
