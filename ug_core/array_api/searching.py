"""Searching functions of the Array API standard: argmax, argmin, count_nonzero.

argmax (argmin) is two reductions over the same row, which the scheduler puts in one kernel
(as softmax's max and sum): the max (min) m, then the smallest index i with x[i] == m, or
with x[i] NaN (a NaN max means the row has one: numpy's first NaN wins). Ties go to the first
index, -0.0 and 0.0 tie (they compare equal), and elementwise work before (`argmax(x * w + b)`)
and after (`argmax(x, axis=1) * 2`) fuses into that kernel."""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes, graph
from ..ops import Op
from ..tensor import Tensor, _normalize_axes, _normalize_axis, where
from ._common import check_tensor, index_dtype

INT32_MAX = 2**31 - 1
_INT32 = np.dtype(np.int32)
_INT64 = np.dtype(np.int64)


def argmax(x: Tensor, /, *, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """The index of the first largest value (of the first NaN, if any) along `axis`, or into
    the flattened x for axis=None; the index dtype (int64, int32 where a device has no int64)."""
    return _arg_extreme(check_tensor(x, "argmax"), axis, keepdims, largest=True)


def argmin(x: Tensor, /, *, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """The index of the first smallest value (of the first NaN, if any), as argmax."""
    return _arg_extreme(check_tensor(x, "argmin"), axis, keepdims, largest=False)


def count_nonzero(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
    """How many elements are not zero (NaN is not zero), as the index dtype."""
    check_tensor(x, "count_nonzero")
    nonzero = x if x.dtype == dtypes.BOOL else x != 0
    return nonzero._reduce(Op.SUM, axis, keepdims, index_dtype(x.device))


def _arg_extreme(x: Tensor, axis: int | None, keepdims: bool, largest: bool) -> Tensor:
    name = "argmax" if largest else "argmin"
    if axis is not None and not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{name}: axis must be an int or None, got {axis!r}")
    if x.ndim == 0:  # numpy's: one element, index 0 (axis 0 or -1 allowed, as numpy)
        _normalize_axes(axis, 1)
        return Tensor(graph.const(0, index_dtype(x.device), x.device, ()))
    axes = _normalize_axes(axis, x.ndim)
    count = math.prod(x.shape[a] for a in axes)
    if count == 0:
        raise ValueError(f"attempt to get {name} of an empty sequence (shape {x.shape}, axis {axis})")
    extreme = x.max(axis, keepdims=True) if largest else x.min(axis, keepdims=True)
    hit = x == extreme
    if x.dtype.kind == "f":
        hit = hit | (x != x)  # a NaN extreme: the first NaN (x == NaN is False everywhere)
    # the row's index in a narrow int where it fits (twice the lanes per vector), widened after
    small = count <= INT32_MAX or index_dtype(x.device) == _INT32
    work = _INT32 if small else _INT64
    if axis is None:
        position = Tensor(graph.iota(x.shape, work, x.device))  # the flat (row-major) position
    else:
        a = _normalize_axis(int(axis), x.ndim)
        size = x.shape[a]
        position = Tensor(graph.iota((size,), work, x.device)).reshape(
            tuple(size if d == a else 1 for d in range(x.ndim)))
    past_end = Tensor(graph.const(count, work, x.device, ()))
    first = where(hit, position, past_end)._reduce(Op.RMIN, axis, keepdims, work)
    # both loops compute x alike on every device (no fma contraction, see ops.py), so a row always
    # has a hit; the clamp keeps a backend that broke that rule from returning an index past the end
    last = Tensor(graph.const(count - 1, work, x.device, ()))
    return where(first < last, first, last).astype(index_dtype(x.device))


__all__ = ["argmax", "argmin", "count_nonzero"]
