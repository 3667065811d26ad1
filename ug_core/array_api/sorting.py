"""Sorting functions of the Array API standard (sort, argsort) and top-k.

ug's order: NaN after every number (numpy's); descending is the stable reverse (equal elements
keep their order, NaN first). argsort is always stable (stable=False is allowed to be too).

A sort is a schedule item of its own (ops.Op.SORT, as matmul is), which the device runs
(Device.sort: the kit's devices on host memory with numpy over the device's threads,
kit.hostsort; on a gpu target with a bitonic sort in shared memory and global steps,
kit.gpusort; any other device through the host).
"""

from __future__ import annotations

import math

import numpy as np

from .. import graph
from ..specs import SortSpec
from ..shapes import normalize_axis
from ..tensor import Tensor
from ._common import check_tensor, index_dtype
from ._complex import refused
from .indexing import take_along_axis

__all__ = ["argsort", "sort", "topk"]


def argsort(x: Tensor, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Tensor:
    """The indices that sort x along `axis` (int64; stable: equal elements keep their order)."""
    check_tensor(x, "argsort")
    return _sorted(x, axis, descending, stable, indices=True, k=None, fn="argsort")


def sort(x: Tensor, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Tensor:
    """x sorted along `axis` (NaN last; descending: NaN first)."""
    check_tensor(x, "sort")
    return _sorted(x, axis, descending, stable, indices=False, k=None, fn="sort")


def topk(x: Tensor, k: int, /, *, axis: int = -1, largest: bool = True) -> tuple[Tensor, Tensor]:
    """(values, indices) of the k largest (smallest) elements along `axis`, largest (smallest)
    first; equal values inside the k in index order. Which of several elements equal to the
    k-th value are returned is unspecified (torch.topk's rule)."""
    check_tensor(x, "topk")
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
        raise TypeError(f"topk: k must be an int, got {k!r}")
    n = x.shape[normalize_axis(axis, x.ndim)] if x.ndim else 1
    if not 0 <= k <= n:
        raise ValueError(f"topk: k={k} is out of range for an axis of size {n}")
    indices = _sorted(x, axis, largest, True, indices=True, k=int(k), fn="topk")
    values = take_along_axis(x, indices, axis=axis) if x.ndim else x.reshape(1)[:k]
    return values, indices


def _sorted(x: Tensor, axis: int, descending: bool, stable: bool, indices: bool, k: int | None, fn: str) -> Tensor:
    if not isinstance(descending, bool) or not isinstance(stable, bool):
        raise TypeError(f"{fn}: descending and stable must be bools, got {descending!r}, {stable!r}")
    if x.dtype.kind == "c":   # (the standard's sort, argsort and topk take real-valued data)
        raise refused(fn, x.dtype)
    if x.ndim == 0:
        one = _sorted(x.reshape(1), 0, descending, stable, indices, k, fn)
        return one.reshape(()) if k is None else one
    axis = normalize_axis(axis, x.ndim)
    n = x.shape[axis]
    k = n if k is None else k
    moved = x if axis == x.ndim - 1 else x.permute(*[d for d in range(x.ndim) if d != axis], axis)
    lead = moved.shape[:-1]
    rows = math.prod(lead)
    dt = index_dtype(x.device) if indices else x.dtype
    if rows == 0 or k == 0 or n == 0:
        out = Tensor(graph.const(0, dt, x.device, lead + (k,)))
    else:   # (rows of the moved tensor: no reshape, no copy)
        out = Tensor(graph.sort(moved._node, SortSpec(rows, n, k, descending, stable, indices), dt))
    if axis == x.ndim - 1:
        return out
    back = list(range(x.ndim - 1))
    back.insert(axis, x.ndim - 1)
    return out.permute(*back)


def sorts_before(a: Tensor, b: Tensor) -> Tensor:
    """a sorts before b: a < b, with NaN after every number (numpy's sort order)."""
    if a.dtype.kind != "f":
        return a < b
    return (a < b) | ((b != b) & (a == a))
