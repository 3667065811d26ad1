"""Searching functions of the Array API standard: argmax, argmin, count_nonzero, nonzero,
searchsorted.

argmax (argmin) of values of 32 bits or fewer is one reduction pass carrying (value, index):
each element becomes an int64 key, the value's order above its position, and the row's max
(min) key holds the extreme and its first index (_packed_arg_extreme). 64-bit values, and stored rows short
enough to stay in cache along the last axis (_rows_in_cache), take two reductions over the row
in one kernel (as softmax's max and sum): the max (min) m, then the smallest index i with
x[i] == m, or with x[i] NaN. Either way numpy's rules: the first NaN
wins, ties go to the first index, -0.0 and 0.0 tie, and elementwise work before
(`argmax(x * w + b)`) and after (`argmax(x, axis=1) * 2`) fuses into that kernel."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import dtypes, graph
from ..ops import Op
from ..shapes import normalize_axes, normalize_axis
from ..tensor import Tensor, tensor, values_for_shape
from ..tensor_arith import where
from ._common import check_tensor, index_dtype
from .data_types import result_type
from .indexing import _take, take
from .sorting import sorts_before

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
        normalize_axes(axis, 1)
        return Tensor(graph.const(0, index_dtype(x.device), x.device, ()))
    axes = normalize_axes(axis, x.ndim)
    count = math.prod(x.shape[a] for a in axes)
    if count == 0:
        raise ValueError(f"attempt to get {name} of an empty sequence (shape {x.shape}, axis {axis})")
    packed = None if _rows_in_cache(x, axis, count) else _packed_arg_extreme(x, axis, keepdims, largest, count)
    if packed is not None:
        return packed
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
        a = normalize_axis(int(axis), x.ndim)
        size = x.shape[a]
        position = Tensor(graph.iota((size,), work, x.device)).reshape(
            tuple(size if d == a else 1 for d in range(x.ndim)))
    past_end = Tensor(graph.const(count, work, x.device, ()))
    first = where(hit, position, past_end)._reduce(Op.RMIN, axis, keepdims, work)
    # both loops compute x alike on every device (no fma contraction, see ops.py), so a row always
    # has a hit; the clamp keeps a backend that broke that rule from returning an index past the end
    last = Tensor(graph.const(count - 1, work, x.device, ()))
    return where(first < last, first, last).astype(index_dtype(x.device))


ROW_IN_CACHE_BYTES = 64 * 1024
"""argmax along the last axis of stored values takes the two-reduction form when a row is at
most this long: the second pass (the first index holding the extreme) reads the row again from
the core's cache, and both passes are 32-bit lanes, while the packed form's int64 keys take
twice the vector work per element (cpu, 4096 x 4096 float32 rows: 6.0 ms two passes, 9.8-12 ms
packed, numpy 7.0 ms)."""


def _rows_in_cache(x: Tensor, axis: int | None, count: int) -> bool:
    """Whether argmax (argmin) of x along `axis` is faster as two passes over each row: the
    reduced axis is x's last, a row fits in a core's cache (ROW_IN_CACHE_BYTES), and x is
    stored values (a buffer, or views of one), so the second pass recomputes nothing (where x
    is computed, `argmax(sin(x) * w)`, the packed form's one pass computes it once)."""
    if axis is None or x.ndim == 0 or normalize_axis(int(axis), x.ndim) != x.ndim - 1:
        return False
    if count * x.dtype.itemsize > ROW_IN_CACHE_BYTES:
        return False
    node = x._node
    while node.op == Op.VIEW and node.buffer is None:
        node = node.srcs[0]
    return node.buffer is not None or node.op == Op.BUFFER


def _packed_arg_extreme(x: Tensor, axis: int | None, keepdims: bool, largest: bool, count: int) -> Tensor | None:
    """argmax / argmin as one reduction pass: each element becomes one int64 key, its value's
    order in the high 32 bits and its position in the low ones (largest: 2**32 - 1 - position,
    so that the first of equal values wins), and the row's max (min) key holds both the extreme
    and its first index. A float's order is its bits as an int32 with the magnitude flipped
    where negative; -0.0 is made 0.0 (they tie), NaN the largest (smallest) of all (the first
    NaN wins, as numpy's). For values of 32 bits or fewer, rows shorter than 2**32 and devices
    with int64; None otherwise (the two-pass form)."""
    i64, i32 = _INT64, _INT32
    if x.dtype.itemsize > 4 or count >= 2**32 or index_dtype(x.device) != i64:
        return None
    if x.dtype.kind == "f":
        v = x.astype(np.dtype(np.float32)) if x.dtype != np.dtype(np.float32) else x
        bits = Tensor(graph.bitcast(where(v == 0, 0.0, v)._node, i32))
        order = bits ^ ((bits >> 31) & 0x7FFFFFFF)
        nan = np.iinfo(np.int32).max if largest else np.iinfo(np.int32).min
        order = where(v != v, Tensor(graph.const(nan, i32, x.device, ())), order).astype(i64)
    elif x.dtype.kind == "u" and x.dtype.itemsize == 4:
        order = x.astype(i64) - 2**31   # (an int64 with room for the shift)
    else:
        order = x.astype(i64)
    if axis is None:
        position = Tensor(graph.iota(x.shape, i64, x.device))
    else:
        a = normalize_axis(int(axis), x.ndim)
        position = Tensor(graph.iota((x.shape[a],), i64, x.device)).reshape(
            tuple(x.shape[a] if d == a else 1 for d in range(x.ndim)))
    low = (2**32 - 1) - position if largest else position
    key = (order << 32) + low
    best = key._reduce(Op.RMAX if largest else Op.RMIN, axis, keepdims, i64)
    found = best & (2**32 - 1)
    return (2**32 - 1) - found if largest else found


def nonzero(x: Tensor, /) -> tuple[Tensor, ...]:
    """The indices of the elements that are not zero (NaN is not zero), one int64 vector per
    dimension, in row-major order (numpy's). Their length depends on the values: `x != 0` is
    realized and read on the host (the one sync), then the indices are made there and copied
    to x's device. A 0-d x is an error (the standard's, and numpy 2's)."""
    check_tensor(x, "nonzero")
    if x.ndim == 0:
        raise ValueError("nonzero: x must have at least one dimension (use atleast_1d)")
    mask = values_for_shape(x if x.dtype == dtypes.BOOL else x != 0, "nonzero")
    found = np.nonzero(mask)
    dt = index_dtype(x.device)
    return tuple(tensor(f.astype(dt), device=x.device) for f in found)


def searchsorted(x1: Tensor, x2: Any, /, *, side: str = "left", sorter: Any = None) -> Tensor:
    """Where each value of x2 would go in the sorted 1-d x1 to keep it sorted (numpy's): the
    first such index (`side="left"`: x1[i-1] < v <= x1[i]) or the last ("right": x1[i-1] <= v
    < x1[i]); NaNs sort last, as numpy's sort puts them. A binary search per value of x2, all of
    it one kernel: ceil(log2(n + 1)) reads of x1 at computed indices (gathers), each step
    halving the range [lo, hi) where the index can be. `sorter`: indices that sort x1."""
    check_tensor(x1, "searchsorted", "x1")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if x1.ndim != 1:
        raise ValueError(f"searchsorted: x1 must be 1-d, got shape {x1.shape}")
    if sorter is not None:
        x1 = take(x1, sorter, axis=0)
    # values given as Python or numpy numbers are an array of numpy's making (1.5 is float64),
    # and the search compares in the promoted dtype, as numpy's: searchsorted(int32 [1 2 3],
    # [1.5, 2.5]) is [1, 2] (casting the values to x1's dtype first made them 1 and 2: [0, 1])
    v = x2 if isinstance(x2, Tensor) else tensor(np.asarray(x2), device=x1.device)
    if v.device != x1.device:
        raise ValueError(f"searchsorted: x2 is on {v.device!r}, x1 on {x1.device!r}")
    common = result_type(x1, v)
    a, v = x1.astype(common), v.astype(common)
    n = a.shape[0]
    dt = index_dtype(x1.device)
    lo = Tensor(graph.const(0, dt, v.device, v.shape))
    hi = Tensor(graph.const(n, dt, v.device, v.shape))
    if n == 0:
        return lo
    for _ in range(n.bit_length()):   # n + 1 possible answers: that many halvings
        mid = (lo + hi) // 2
        at = _take(a, mid, 0)
        go_right = sorts_before(at, v) if side == "left" else ~sorts_before(v, at)
        open_range = lo < hi
        lo = where(open_range & go_right, mid + 1, lo)
        hi = where(open_range & ~go_right, mid, hi)
    return lo


__all__ = ["argmax", "argmin", "count_nonzero", "nonzero", "searchsorted"]
