"""Sorting functions of the Array API standard (sort, argsort) and top-k.

ug's order: NaN after every number (numpy's); descending is the stable reverse (equal elements
keep their order, NaN first). argsort is always stable (stable=False is allowed to be too).

A sort is a schedule item of its own (ops.Op.SORT, as matmul is) on a device that sorts by
itself (Device.sorts(): the kit's devices: on host memory with numpy over the device's threads,
kit.hostsort; on a gpu target with a bitonic sort in shared memory and global steps,
kit.gpusort); on a device without (one written to the low-level Device interface) it is a
bitonic network built from kernels: rows padded to a power of two,
then log2(m) (log2(m) + 1) / 2 passes, each one kernel that reads every element and its partner
(i xor j, a gather) and keeps the smaller or the larger of the pair, comparing (value, original
index) so that the result is stable. Every pass is the same kernel (j and the block size are
kernel arguments), compiled once.
"""

from __future__ import annotations

import math

import numpy as np

from .. import graph
from ..device import SortSpec
from ..plugins import registry
from ..shapes import normalize_axis
from ..tensor import Tensor
from ..tensor_arith import where
from ._common import check_tensor, index_dtype
from ._complex import refused
from .indexing import take_along_axis
from .manipulation import pad

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
    elif registry.get(x.device).sorts():   # (rows of the moved tensor: no reshape, no copy)
        out = Tensor(graph.sort(moved._node, SortSpec(rows, n, k, descending, stable, indices), dt))
    else:
        keys, order = _bitonic(moved.reshape(rows, n), descending)
        out = (order if indices else keys)[:, :k]
        out = (out.astype(dt) if out.dtype != dt else out).reshape(*lead, k)
    if axis == x.ndim - 1:
        return out
    back = list(range(x.ndim - 1))
    back.insert(axis, x.ndim - 1)
    return out.permute(*back)


def _bitonic(x: Tensor, descending: bool) -> tuple[Tensor, Tensor]:
    """(sorted keys, their original indices) of each row of the 2-d x, by a bitonic network."""
    rows, n = x.shape
    m = 1 << max(0, (n - 1).bit_length())
    i32 = np.dtype(np.int32)
    keys = pad(x, ((0, 0), (0, m - n))) if m > n else x
    col = Tensor(graph.iota((m,), i32, x.device)).reshape(1, m).broadcast_to((rows, m))
    order = col
    block = 2
    while block <= m:
        j = block // 2
        while j >= 1:
            partner = col ^ j
            other_keys = take_along_axis(keys, partner, axis=1)
            other_order = take_along_axis(order, partner, axis=1)
            first = _before(keys, order, other_keys, other_order, n, descending)
            # the lower of the pair keeps the first in an ascending block, the second in a
            # descending one; the upper the other
            keep = first == (((col & j) == 0) == ((col & block) == 0))
            keys, order = where(keep, keys, other_keys), where(keep, order, other_order)
            j //= 2
        block *= 2
    return keys, order


def sorts_before(a: Tensor, b: Tensor) -> Tensor:
    """a sorts before b: a < b, with NaN after every number (numpy's sort order)."""
    if a.dtype.kind != "f":
        return a < b
    return (a < b) | ((b != b) & (a == a))


def _before(a: Tensor, ia: Tensor, b: Tensor, ib: Tensor, n: int, descending: bool) -> Tensor:
    """Whether (a, ia) sorts before (b, ib): padding (index >= n) last, then by value (NaN after
    every number ascending, before descending), then by index."""
    less, more = sorts_before(a, b), sorts_before(b, a)
    ahead, behind = (more, less) if descending else (less, more)
    by_value = ahead | (~behind & (ia < ib))
    a_real, b_real = ia < n, ib < n
    return where(a_real & b_real, by_value, where(a_real == b_real, ia < ib, a_real))

