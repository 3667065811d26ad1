"""Sorting where device memory is host memory (Device.sort, a schedule item as matmul is: the
kit's devices whose allocator has host views, and ref): the rows are split over the device's
threads, and each block of rows is sorted by numpy in place in the device's memory, which
releases the GIL while it sorts (np.sort / np.argsort: introsort with SIMD kernels, radix sort for small ints, timsort
when stable). A top-k (k < n / 8) partitions first (np.argpartition, linear) and sorts only the
k candidates. ug's order: NaN after every number; descending is the stable reverse (NaN first),
made by sorting the reversed row ascending: equal elements keep their order either way.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Literal
import numpy as np

from ..device import SortSpec

PARTITION_FRACTION = 8
"""A top-k with k below n / PARTITION_FRACTION partitions each row before sorting the k."""


class HostSort:
    def __init__(self, threads: int):
        self.threads = max(1, threads)
        self._pool: ThreadPoolExecutor | None = None

    def run(self, keys: np.ndarray, result: np.ndarray, spec: SortSpec) -> None:
        """Sort `keys` (spec.rows x spec.n) into `result` (spec.rows x spec.k) as `spec` says."""
        if spec.rows == 0 or spec.k == 0:
            return
        blocks = min(self.threads, spec.rows)
        if blocks == 1:
            _sort_block(keys, result, spec)
            return
        bounds = [spec.rows * i // blocks for i in range(blocks + 1)]
        jobs = [(keys[lo:hi], result[lo:hi]) for lo, hi in zip(bounds, bounds[1:])]
        list(self._executor().map(lambda job: _sort_block(job[0], job[1], spec), jobs))

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="ug-sort")
            if hasattr(os, "register_at_fork"):   # a forked child gets no threads: a new pool there
                os.register_at_fork(after_in_child=self._forget_pool)
        return self._pool

    def _forget_pool(self) -> None:
        self._pool = None


def sort_rows(keys: np.ndarray, out: np.ndarray, spec: SortSpec) -> None:
    """Sort rows of `keys` into `out` (one thread)."""
    if spec.rows and spec.k:
        _sort_block(keys, out, spec)


def _sort_block(keys: np.ndarray, out: np.ndarray, spec: SortSpec) -> None:
    """Sort a block of rows of `keys` into `out` (rows of spec.k)."""
    n, k = spec.n, spec.k
    if not spec.indices and k == n:   # values: numpy's fastest sort; equal values are the same
        out[...] = np.sort(keys, axis=1)      # bits, but for zeros (-0.0 and 0.0: put back in order)
        if spec.descending:
            out[...] = out[:, ::-1]
        if keys.dtype.kind == "f":
            _zeros_in_order(keys, out)
        return
    rows = keys[:, ::-1] if spec.descending else keys   # descending: the reversed row, ascending
    kind: Literal["stable", "quicksort"] = "stable" if spec.stable or spec.descending else "quicksort"
    if k * PARTITION_FRACTION < n:
        first = _top_candidates(rows, k, spec.descending)
    else:
        order = np.argsort(rows, axis=1, kind=kind)
        first = order[:, n - k:][:, ::-1] if spec.descending else order[:, :k]
    if spec.descending:
        first = n - 1 - first   # positions in the reversed row -> in the row
    if spec.indices:
        out[...] = first
    else:
        out[...] = np.take_along_axis(keys, first, axis=1)


def _zeros_in_order(keys: np.ndarray, out: np.ndarray) -> None:
    """In rows holding both -0.0 and 0.0 (equal, so a stable sort keeps their order), the
    sorted row's run of zeros as they came (an unstable sort may have swapped them)."""
    zero = keys == 0
    negative = np.signbit(keys) & zero
    mixed = negative.any(axis=1) & (zero & ~negative).any(axis=1)
    for r in np.flatnonzero(mixed):
        out[r, out[r] == 0] = keys[r, zero[r]]


def _top_candidates(rows: np.ndarray, k: int, from_end: bool) -> np.ndarray:
    """The positions of the k smallest (from_end: largest, last first) of each row, in order.
    (Which of several elements equal to the k-th one are taken is numpy's partition's choice.)"""
    n = rows.shape[1]
    kth = n - k if from_end else k - 1
    part = np.argpartition(rows, kth, axis=1)
    chosen = np.sort(part[:, n - k:] if from_end else part[:, :k], axis=1)   # by position, for stable ties
    order = np.argsort(np.take_along_axis(rows, chosen, axis=1), axis=1, kind="stable")
    ranked = np.take_along_axis(chosen, order, axis=1)
    return ranked[:, ::-1] if from_end else ranked

