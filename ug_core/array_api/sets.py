"""Set functions of the Array API standard: unique_values, unique_counts, unique_inverse,
unique_all, on a stable sort (sorting.py).

The flattened x is sorted (complex values lexicographically, by the real parts then the
imaginary parts, as numpy orders them); a group of equal values starts where a value differs from the one
before it (NaN differs from everything, itself included: each NaN is a value of its own, as the
standard asks). How many groups there are depends on the values: the group starts are read on
the host (a sync); the rest stays on the device: the values are a gather of the sorted ones,
the inverse indices a scan of the starts scattered back through the sort's order.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..tensor import Tensor, tensor, tracing, values_for_shape
from ..tensor_io import realize
from ._common import check_tensor, index_dtype
from .sorting import argsort, sort
from .statistical import cumulative_sum

__all__ = ["unique_all", "unique_counts", "unique_inverse", "unique_values"]


HOST_GATHER_MAX = 1 << 16
"""The most elements whose distinct values are picked out of the sorted ones on the host rather
than by a gather kernel: up to this size, reading the sorted values to the host costs less than
compiling a gather for a new shape (each one is new to a cold cache)."""


class UniqueAllResult(NamedTuple):
    values: Tensor
    indices: Tensor
    inverse_indices: Tensor
    counts: Tensor


class UniqueCountsResult(NamedTuple):
    values: Tensor
    counts: Tensor


class UniqueInverseResult(NamedTuple):
    values: Tensor
    inverse_indices: Tensor


def unique_values(x: Tensor, /) -> Tensor:
    """The distinct values of x, sorted (1-d)."""
    return _groups(check_tensor(x, "unique_values"), "unique_values", ordered_only=True)[0]


def unique_counts(x: Tensor, /) -> UniqueCountsResult:
    """The distinct values of x, sorted, and how many times each occurs."""
    values, _, starts, n = _groups(check_tensor(x, "unique_counts"), "unique_counts", ordered_only=True)
    return UniqueCountsResult(values, _counts(starts, n, x.device))


def unique_inverse(x: Tensor, /) -> UniqueInverseResult:
    """The distinct values of x, sorted, and for each element of x the index of its value
    among them (x's shape)."""
    values, order, starts, n = _groups(check_tensor(x, "unique_inverse"), "unique_inverse")
    return UniqueInverseResult(values, _inverse(x, order, starts, n))


def unique_all(x: Tensor, /) -> UniqueAllResult:
    """The distinct values of x, sorted; the index of each one's first occurrence in the
    flattened x; the inverse indices (x's shape); and the counts."""
    values, order, starts, n = _groups(check_tensor(x, "unique_all"), "unique_all")
    first = order[tensor(starts, device=x.device)] if len(starts) else _empty(x.device)
    return UniqueAllResult(values, first, _inverse(x, order, starts, n), _counts(starts, n, x.device))


def _complex_order(flat: Tensor) -> Tensor:
    """The stable order that sorts complex values lexicographically (by the real part, then by
    the imaginary part: numpy's order): a stable sort by the imaginary parts, then one by the
    real parts of the values in that order (equal values end up together, which is what the
    groups need; the standard's sort itself takes no complex values)."""
    by_imag = argsort(flat.imag)
    return by_imag[argsort(flat.real[by_imag])]


def _groups(x: Tensor, fn: str, ordered_only: bool = False) -> tuple[Tensor, Tensor, np.ndarray, int]:
    """(the distinct values, the stable order that sorts the flattened x, where in that order
    each group starts (host int64), the element count). ordered_only: the caller needs no order
    (unique_values, unique_counts), so the values are sorted themselves, not gathered through
    an argsort (a sort of 1M int32 took 1.8 ms, the argsort 90+)."""
    flat = x.reshape(x.size) if x.ndim != 1 else x
    n = flat.shape[0]
    if ordered_only and flat.dtype.kind != "c" and n:   # (sort takes no complex values)
        order, ordered = flat, sort(flat)   # (order: a placeholder, which the caller drops)
    else:
        order = _complex_order(flat) if flat.dtype.kind == "c" else argsort(flat)
        if n == 0:
            return flat, order, np.zeros(0, np.int64), 0
        ordered = flat[order]
    change = ordered[1:] != ordered[:-1]   # (NaN != NaN: every NaN starts a group)
    if not tracing():
        # the sorted values are kept with the changes (one schedule): the values below then
        # read them, not sort again
        realize(ordered, change)
    starts = np.concatenate([[0], np.flatnonzero(values_for_shape(change, fn)) + 1]).astype(np.int64)
    if n <= HOST_GATHER_MAX and not tracing():
        # few values: picked on the host from the sorted ones (a copy each way, no gather kernel
        # to compile for this shape)
        return tensor(ordered.numpy()[starts], device=x.device), order, starts, n
    return ordered[tensor(starts, device=x.device)], order, starts, n


def _counts(starts: np.ndarray, n: int, device: str) -> Tensor:
    return tensor(np.diff(np.append(starts, n)).astype(index_dtype(device)), device=device)


def _inverse(x: Tensor, order: Tensor, starts: np.ndarray, n: int) -> Tensor:
    """For each element, its group: the running count of group starts along the sorted order,
    written back to where each sorted element came from."""
    dt = index_dtype(x.device)
    if n == 0:
        return tensor(np.zeros(x.shape, dt), device=x.device)
    begins = np.zeros(n, dt)
    begins[starts] = 1
    group = cumulative_sum(tensor(begins, device=x.device)) - 1
    inverse = tensor(np.zeros(n, dt), device=x.device)
    inverse[order] = group
    return inverse.reshape(*x.shape)


def _empty(device: str) -> Tensor:
    return tensor(np.zeros(0, index_dtype(device)), device=device)
