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

SPLIT_MIN = 1 << 16
"""A row at least this long is sorted by several threads (chunks, then merges) when there are
fewer rows than threads."""

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
        if blocks == 1 and self.threads > 1 and spec.k == spec.n and spec.n >= SPLIT_MIN and keys.dtype.kind in "fiu":
            for r in range(spec.rows):   # one long row (or few): chunks sorted on the threads, then merged
                self._sort_long_row(keys[r], result[r], spec)
            return
        if blocks == 1:
            _sort_block(keys, result, spec)
            return
        bounds = [spec.rows * i // blocks for i in range(blocks + 1)]
        jobs = [(keys[lo:hi], result[lo:hi]) for lo, hi in zip(bounds, bounds[1:])]
        list(self._executor().map(lambda job: _sort_block(job[0], job[1], spec), jobs))

    def _sort_long_row(self, key: np.ndarray, out: np.ndarray, spec: SortSpec) -> None:
        """A merge sort over the threads: one chunk per thread sorted by numpy in place, then
        pairs of runs merged into the next buffer, each merge split into one piece per thread at
        its co-ranks (where the merged order crosses a piece boundary, found by binary search),
        each piece merged by numpy's stable sort, which sees two runs and merges them. Few
        buffers (page faults of fresh memory cost as much as the merges): the last merge of an
        ascending value sort writes into `out`. Descending: the reversed row, as in _sort_block."""
        n = key.shape[0]
        row = key[::-1] if spec.descending else key
        pool = self._executor()
        chunks = min(self.threads, n // (SPLIT_MIN // 2))
        bounds = [n * i // chunks for i in range(chunks + 1)]
        spans = list(zip(bounds, bounds[1:]))
        vals = np.empty(n, row.dtype)
        pos = np.empty(n, np.int64) if spec.indices else None

        def sort_chunk(span: tuple[int, int]) -> None:
            lo, hi = span
            if pos is None:   # (values: any sort; zeros are put in order at the end)
                vals[lo:hi] = row[lo:hi]
                vals[lo:hi].sort()
            else:
                order = np.argsort(row[lo:hi], kind="stable")
                pos[lo:hi] = order + lo
                vals[lo:hi] = row[lo:hi][order]
        list(pool.map(sort_chunk, spans))
        while len(spans) > 1:
            pairs = [(spans[i], spans[i + 1]) for i in range(0, len(spans) - 1, 2)]
            last = len(pairs) == 1 and len(spans) == 2
            into = out if last and pos is None and not spec.descending else np.empty_like(vals)
            into_pos = np.empty_like(pos) if pos is not None else None
            if len(spans) % 2:   # the odd run out moves on as it is
                lo, hi = spans[-1]
                into[lo:hi] = vals[lo:hi]
                if into_pos is not None and pos is not None:
                    into_pos[lo:hi] = pos[lo:hi]
            pieces = max(1, self.threads // len(pairs))
            jobs = [(first, second, p) for first, second in pairs for p in range(pieces)]
            list(pool.map(lambda job: _merge_piece(vals, pos, job[0], job[1], job[2], pieces, into, into_pos), jobs))
            vals, pos = into, into_pos
            spans = [(first[0], second[1]) for first, second in pairs] + ([spans[-1]] if len(spans) % 2 else [])
        if spec.indices:
            assert pos is not None
            out[...] = (n - 1 - pos[::-1]) if spec.descending else pos
            return
        if vals is not out:
            out[...] = vals[::-1] if spec.descending else vals
        if key.dtype.kind == "f":
            _zeros_in_order(key[None, :], out[None, :], spec.descending)

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="ug-sort")
            if hasattr(os, "register_at_fork"):   # a forked child gets no threads: a new pool there
                os.register_at_fork(after_in_child=self._forget_pool)
        return self._pool

    def _forget_pool(self) -> None:
        self._pool = None


def _before(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x sorts strictly before y (NaN after every number)."""
    if x.dtype.kind != "f":
        return x < y
    return (x < y) | (np.isnan(y) & ~np.isnan(x))


def _co_rank(a: np.ndarray, b: np.ndarray, m: int) -> int:
    """How many of the first m elements of the stable merge of runs a, b (a first on ties) come
    from a."""
    lo, hi = max(0, m - len(b)), min(m, len(a))
    while lo < hi:
        i = (lo + hi) // 2
        j = m - i
        # too few from a when a[i] comes before b[j - 1] (a[i] <= b[j - 1]: a wins ties)
        if j > 0 and not _before(b[j - 1:j], a[i:i + 1])[0]:
            lo = i + 1
        else:
            hi = i
    return lo


def _merge_piece(vals: np.ndarray, pos: np.ndarray | None, first: tuple[int, int], second: tuple[int, int], piece: int,
                 pieces: int, into: np.ndarray, into_pos: np.ndarray | None) -> None:
    """Piece `piece` of `pieces` of the stable merge of the runs vals[first] and vals[second]
    (adjacent), written to the same place in `into` (and their positions in `into_pos`)."""
    a, b = vals[first[0]:first[1]], vals[second[0]:second[1]]
    total = len(a) + len(b)
    m0, m1 = total * piece // pieces, total * (piece + 1) // pieces
    i0, i1 = _co_rank(a, b, m0), _co_rank(a, b, m1)
    j0, j1 = m0 - i0, m1 - i1
    merged = np.concatenate([a[i0:i1], b[j0:j1]])
    at = slice(first[0] + m0, first[0] + m1)
    if pos is None or into_pos is None:
        merged.sort(kind="stable")
        into[at] = merged
        return
    order = np.argsort(merged, kind="stable")   # (two runs: numpy's stable sort merges them)
    into[at] = merged[order]
    into_pos[at] = np.concatenate([pos[first[0] + i0:first[0] + i1], pos[second[0] + j0:second[0] + j1]])[order]


def sort_rows(keys: np.ndarray, out: np.ndarray, spec: SortSpec) -> None:
    """Sort rows of `keys` into `out` (one thread)."""
    if spec.rows and spec.k:
        _sort_block(keys, out, spec)


def _sort_block(keys: np.ndarray, out: np.ndarray, spec: SortSpec) -> None:
    """Sort a block of rows of `keys` into `out` (rows of spec.k)."""
    n, k = spec.n, spec.k
    if not spec.indices and k == n:   # values: numpy's fastest sort, in place; equal values are the
        out[...] = keys                   # same bits, but for zeros (-0.0 and 0.0: put back in order)
        out.sort(axis=1)
        if spec.descending:
            out[...] = out[:, ::-1]
        if keys.dtype.kind == "f":
            _zeros_in_order(keys, out, spec.descending)
        return
    rows = keys[:, ::-1] if spec.descending else keys   # descending: the reversed row, ascending
    kind: Literal["stable", "quicksort"] = "stable" if spec.stable or spec.descending else "quicksort"
    picked = _top_by_blocks(keys, k, spec.descending) if k * PARTITION_FRACTION < n else None
    if picked is not None:
        first = picked
    elif k * PARTITION_FRACTION < n:
        first = _top_candidates(rows, k, spec.descending)
        if spec.descending:
            first = n - 1 - first
    else:
        order = np.argsort(rows, axis=1, kind=kind)
        first = order[:, n - k:][:, ::-1] if spec.descending else order[:, :k]
        if spec.descending:
            first = n - 1 - first   # positions in the reversed row -> in the row
    if spec.indices:
        out[...] = first
    else:
        out[...] = np.take_along_axis(keys, first, axis=1)


def _zeros_in_order(keys: np.ndarray, out: np.ndarray, descending: bool) -> None:
    """The sorted rows' runs of zeros as they came: -0.0 and 0.0 are equal, so a stable sort
    keeps their order, and numpy's SIMD sort does not even keep their bits (sorting one -0.0
    and many 0.0 gave several -0.0). A run is found by binary search in the sorted row; only
    a row with two zeros or more is read again."""
    ascending = out[:, ::-1] if descending else out   # (NaN last, as searchsorted expects)
    for r in range(out.shape[0]):
        lo, hi = np.searchsorted(ascending[r], 0.0, "left"), np.searchsorted(ascending[r], 0.0, "right")
        if hi - lo > 1:
            out[r, out[r] == 0] = keys[r, keys[r] == 0]


def _top_by_blocks(keys: np.ndarray, k: int, largest: bool, blocks: int = 64) -> np.ndarray | None:
    """The positions of the k largest (smallest) of each row, largest (smallest) first, equal
    values by position: the k-th largest of the maxima of a row's `blocks` blocks is a threshold
    that at least k elements reach, so only elements past it, in blocks whose maximum is past
    it, are candidates (a few per row), and only those are sorted. None where it does not apply
    (short rows, NaN: the caller partitions)."""
    rows, n = keys.shape
    size = n // blocks
    if size < 2 or blocks < k or keys.dtype.kind not in "fiu":
        return None
    work = keys if largest else _descending_key(keys)   # the k smallest: the k largest of an order-reversing map
    body = work[:, :blocks * size].reshape(rows, blocks, size)
    extreme = body.max(axis=2)
    if extreme.dtype.kind == "f" and np.isnan(extreme).any():
        return None
    kth = blocks - k
    threshold = np.partition(extreme, kth, axis=1)[:, kth:kth + 1]
    block_row, block = np.nonzero(extreme >= threshold)   # the blocks that can hold candidates
    inside = body[block_row, block]
    i, j = np.nonzero(inside >= threshold[block_row])
    r, c, v = block_row[i], block[i] * size + j, inside[i, j]
    if blocks * size < n:   # the tail past the last whole block: all candidates
        tail = n - blocks * size
        r = np.concatenate([r, np.repeat(np.arange(rows), tail)])
        c = np.concatenate([c, np.tile(np.arange(blocks * size, n), rows)])
        v = np.concatenate([v, work[:, blocks * size:].reshape(-1)])
    # by row, then value descending, then position (both sorts stable; candidates come by position)
    by_value = np.argsort(_descending_key(v), kind="stable")
    order = by_value[np.argsort(r[by_value], kind="stable")]
    counts = np.bincount(r, minlength=rows)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return c[order][starts[:, None] + np.arange(k)[None, :]]


def _descending_key(v: np.ndarray) -> np.ndarray:
    """A key whose ascending order is v's descending order (ints by bitwise not: no overflow)."""
    if v.dtype.kind == "f":
        return -v
    return ~v if v.dtype.kind == "i" else np.iinfo(v.dtype).max - v


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

