"""Sorting where device memory is host memory (Device.sort, a schedule item as matmul is: the
kit's devices whose allocator has host views, and ref): the rows are split over the device's
threads, and each block of rows is sorted by numpy in place in the device's memory, which
releases the GIL while it sorts. A value sort is np.sort's; an index sort (argsort) of values
of 32 bits or fewer is the device's native LSD radix sort of (value code, position) items where
it has one (SortKernels.radix_codes, radix_scatter), else numpy's sort of packed (value code,
position) keys, which is the stable order without an indirect sort; a top-k of few (k < n / 8)
is the device's one-pass scan of each row (SortKernels.topk) where it has one, else a threshold
from group maxima, and only the few elements past it sorted. ug's order: NaN after every
number; descending is the stable reverse (NaN first), made by sorting the reversed row
ascending: equal elements keep their order either way."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Literal, Protocol
import numpy as np

from ..device import register_host_fallback
from ..specs import SortSpec

SPLIT_MIN = 1 << 16
"""A row at least this long is sorted by several threads (chunks, then merges) when there are
fewer rows than threads."""

PARTITION_FRACTION = 8
"""A top-k with k below n / PARTITION_FRACTION partitions each row before sorting the k."""


class SortKernels(Protocol):
    """A device's native helpers for sorting a long row over the threads (KitDevice.sort_kernels:
    the cpu device's are ug_llvm.sortkernels), each without the GIL. merge(a, b, out): the
    stable merge of the sorted 1-d runs a and b into out (NaN after every number, the first
    run's element first on ties); count_below(x, pivot): how many of x are below pivot (NaN is
    not); partition(x, pivot, low, high): x's elements below pivot into low, the others into
    high. Each returns False (None) where it does not apply (the dtype), and numpy's way is
    taken instead."""

    def merge(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> bool: ...

    def count_below(self, x: np.ndarray, pivot: np.generic) -> int | None: ...

    def partition(self, x: np.ndarray, pivot: np.generic, low: np.ndarray, high: np.ndarray) -> bool: ...

    def radix_codes(self, x: np.ndarray, base: int, descending: bool, items: np.ndarray, hist: np.ndarray) -> bool:
        """The radix argsort's first pass (HostSort._radix_argsort): items (uint64) = x's codes
        (unsigned order = ug's order; every bit flipped when descending) above base + position,
        the counts of the codes' three digits (RADIX_SHIFTS) added to hist (uint32, 3 x
        RADIX_BUCKETS)."""
        ...

    def radix_scatter(self, items: np.ndarray, shift: int, offsets: np.ndarray, out: np.ndarray, mid: int,
                      next_shift: int, next_hist: np.ndarray | None) -> bool:
        """A radix pass: each item in order to out at offsets[its code's digit at shift]
        (int64, moved on), the code's digit at next_shift counted in next_hist[place >= mid]
        (uint32, 2 x RADIX_BUCKETS; None: not counted); out int64: the last pass (positions
        only)."""
        ...

    def topk(self, x: np.ndarray, k: int, largest: bool, out_idx: np.ndarray, out_val: np.ndarray) -> np.ndarray | None:
        """The k largest (smallest) of each row of x, best first, ties by position, NaN after
        every number: positions into out_idx (int64), values into out_val. Returns which rows
        are done (bool per row: a row may be given up, e.g. one sorted the wrong way, where the
        scan costs O(n k)); None where it does not apply (nothing written)."""
        ...


RADIX_MIN = 1 << 15
"""An index sort of rows at least this long (of 32-bit or narrower values) is a radix sort where
the device has the native passes (SortKernels.radix_codes, radix_scatter)."""

RADIX_SPLIT_MIN = 1 << 22
"""...on two threads from this length (each pass a thread per half, the threads meeting after
each pass). A pass is bound by memory, and on a loaded machine (other processes on the cores
and the memory) the two-thread sort of 1M float32 took 0.9x numpy's argsort time against 0.7x
for one thread (alone: 0.4x either way)."""

RADIX_BUCKETS = 1 << 11
RADIX_SHIFTS = (0, 11, 22)
"""The radix sort's digits of the 32-bit codes: 11, 11 and 10 bits, the lowest first."""

TOPK_NATIVE_MAX = 16
"""A top-k of k up to this many (of rows of 64 or more) is the device's one-pass scan
(SortKernels.topk) where it has one: each element that beats the k-th best so far is inserted
among the k (O(k)), most elements skipped by a floor (the worst of 16 lanes' best: k <= 16). A
row that takes too many insertions (arranged against the floor and sorted the wrong way) is
given up and sorted as before. 4096x4096, k = 16, two threads: 21 ms for random or sorted rows,
against 62 and 79 ms the old way. Before the floor, k = 32 and 64 lost to the old way on sorted
rows (one insertion moves up to k elements)."""

SCRATCH_MAX = 32 << 20
"""The most bytes of scratch memory a HostSort keeps between sorts (_take_scratch)."""

SPLIT_BALANCE = 8
"""A split sort (HostSort._split_sort) goes on only when each side holds at least 1/SPLIT_BALANCE
of the row (a pivot among many equal values may put nearly all on one side)."""


class HostSort:
    def __init__(self, threads: int, kernels: SortKernels | None = None):
        self.threads = max(1, threads)
        self.kernels = kernels
        self._pool: ThreadPoolExecutor | None = None
        self._scratch: np.ndarray | None = None   # the radix sort's buffer, kept (_take_scratch)
        self._lock = threading.Lock()

    def run(self, keys: np.ndarray, result: np.ndarray, spec: SortSpec) -> None:
        """Sort `keys` (spec.rows x spec.n) into `result` (spec.rows x spec.k) as `spec` says."""
        if spec.rows == 0 or spec.k == 0:
            return
        if _sorts_wrongly(keys, spec):
            wide = np.empty(result.shape, np.float32)
            self.run(keys.astype(np.float32), wide, spec)
            result[...] = wide
            return
        blocks = min(self.threads, spec.rows)
        if self._native_topk(keys, result, spec, blocks):
            return
        radix = spec.indices and spec.k == spec.n and spec.n >= RADIX_MIN
        if radix and self._radix_argsort(keys, result, spec, blocks):
            return
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
        each piece merged by the device's native merge (self.merge), else by numpy's stable
        sort, which sees two runs and merges them (a full merge sort: slower). Few
        buffers (page faults of fresh memory cost as much as the merges): the last merge of an
        ascending value sort writes into `out`. Descending: the reversed row, as in _sort_block.
        An index sort of keys of 32 bits or fewer sorts packed keys (see _packed) as values."""
        n = key.shape[0]
        row = key[::-1] if spec.descending else key
        packed = _packed(row[None, :]) if spec.indices else None
        if packed is not None:
            in_place = not spec.descending and out.dtype == np.int64   # sorted into `out`, then unpacked there
            order = out.view(np.uint64) if in_place else np.empty(n, np.uint64)
            self._sort_long_row(packed[0], order, SortSpec(1, n, n, descending=False, stable=True, indices=False))
            order &= np.uint64(_POSITION_MASK)
            if not in_place:
                out[...] = (n - 1 - order[::-1].view(np.int64)) if spec.descending else order
            return
        if not spec.indices and self._split_sort(key, out, spec.descending):
            if key.dtype.kind == "f":
                _zeros_in_order(key[None, :], out[None, :], spec.descending)
            return
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
            merge = self.kernels.merge if self.kernels is not None else None
            list(pool.map(lambda job: _merge_piece(vals, pos, job[0], job[1], job[2], pieces, into, into_pos, merge),
                          jobs))
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

    def _radix_argsort(self, keys: np.ndarray, out: np.ndarray, spec: SortSpec, blocks: int) -> bool:
        """The stable index sort of each row as an LSD radix sort of 32-bit codes with 32-bit
        positions (SortKernels.radix_codes, radix_scatter: three passes of 11-bit digits, each
        key and position read and written once a pass): 10 ms for 1M float32 on one thread
        here, against numpy's argsort's 26 ms. Few rows (a long row each) of RADIX_SPLIT_MIN or
        more: every pass is split over two threads, the second thread's keys of a digit after
        the first's (the counts per half come from the pass before); shorter rows: one thread;
        many rows: blocks of rows over the threads. False (nothing written)
        where it does not apply: no native passes, the dtype (64-bit values), rows of 2^31."""
        kernels, n = self.kernels, spec.n
        wide = {"f": np.float32, "i": np.int32, "u": np.uint32, "b": np.uint32}.get(keys.dtype.kind)
        if (kernels is None or not hasattr(kernels, "radix_codes") or wide is None or keys.dtype.itemsize > 4
                or n >= 1 << 31 or out.dtype != np.int64 or not out.flags.c_contiguous):
            return False
        if keys.dtype != wide:   # (exact: float16 as float32, narrow ints as 32-bit ones)
            keys = keys.astype(wide)
        if not keys.flags.c_contiguous:
            keys = np.ascontiguousarray(keys)
        if blocks > 1 and spec.rows >= self.threads:
            bounds = [spec.rows * i // blocks for i in range(blocks + 1)]
            done = self._executor().map(lambda b: all(self._radix_row(keys[r], out[r], spec.descending, 1)
                                                      for r in range(b[0], b[1])), zip(bounds, bounds[1:]))
            if not all(done):
                raise RuntimeError("sort: the device's radix passes declined a row of a dtype they took")
            return True
        parts = 2 if self.threads >= 2 and n >= RADIX_SPLIT_MIN else 1
        for r in range(spec.rows):
            if not self._radix_row(keys[r], out[r], spec.descending, parts):
                if r:
                    raise RuntimeError("sort: the device's radix passes declined a row of a dtype they took")
                return False
        return True

    def _radix_row(self, key: np.ndarray, out: np.ndarray, descending: bool, parts: int) -> bool:
        """One row's radix argsort (see _radix_argsort) into out (int64), split in `parts` (1, 2)
        for the threads. A digit that every key shares is no pass. The passes go back and forth
        between a scratch buffer and `out` (its bytes as uint64 items: a code above a position),
        the last into out; an even number of passes takes a second scratch buffer."""
        work = self._take_scratch(key.shape[0])
        try:
            return self._radix_passes(key, out, descending, parts, work)
        finally:
            self._give_scratch(work)

    def _radix_passes(self, key: np.ndarray, out: np.ndarray, descending: bool, parts: int, work: np.ndarray) -> bool:
        """_radix_row's passes, with `work` (uint64, the row's length) as the scratch buffer."""
        kernels, n = self.kernels, key.shape[0]
        assert kernels is not None
        bounds = [0, n // 2, n] if parts == 2 else [0, n]
        spans = list(zip(bounds, bounds[1:]))
        hist = np.zeros((parts, 3, RADIX_BUCKETS), np.uint32)
        jobs = [(key[lo:hi], lo, work[lo:hi], hist[t]) for t, (lo, hi) in enumerate(spans)]
        if not all(self._map(lambda j: kernels.radix_codes(j[0], j[1], descending, j[2], j[3]), jobs)):
            return False
        total = hist.sum(axis=0, dtype=np.int64)
        passes = [d for d in range(3) if total[d].max() < n]
        if not passes:   # every key the same: the order as it is
            out[...] = np.arange(n)
            return True
        src, dst = work, (out.view(np.uint64) if len(passes) % 2 else np.empty(n, np.uint64))
        per_part = hist[:, passes[0]].astype(np.int64)
        mid = bounds[1] if parts == 2 else n
        for step, d in enumerate(passes):
            last = step == len(passes) - 1
            counts = total[d]
            offsets = (np.cumsum(counts) - counts) + (np.cumsum(per_part, axis=0) - per_part)
            # one thread: the next pass's counts are the first pass's (total); two: counted on the way
            next_hist = np.zeros((parts, 2, RADIX_BUCKETS), np.uint32) if parts > 1 and not last else None
            next_shift = 0 if last else RADIX_SHIFTS[passes[step + 1]]
            into = out if last else dst
            moves = [(src[lo:hi], offsets[t], None if next_hist is None else next_hist[t])
                     for t, (lo, hi) in enumerate(spans)]
            if not all(self._map(lambda m: kernels.radix_scatter(m[0], RADIX_SHIFTS[d], m[1], into, mid, next_shift,
                                                                 m[2]), moves)):
                raise RuntimeError("sort: the device's radix pass declined after its first pass")
            if not last:
                per_part = (total[passes[step + 1]][None] if next_hist is None
                            else next_hist.sum(axis=0, dtype=np.int64))
            src, dst = dst, src
        return True

    def _take_scratch(self, n: int) -> np.ndarray:
        """A uint64 buffer of n elements: the one kept from an earlier sort where it is long
        enough (a fresh one's page faults cost as much as a radix pass), else a new one."""
        with self._lock:
            kept, self._scratch = self._scratch, None
        if kept is not None and kept.shape[0] >= n:
            return kept[:n]
        return np.empty(n, np.uint64)

    def _give_scratch(self, buffer: np.ndarray) -> None:
        """Keep `buffer` (from _take_scratch) for the next sort, up to SCRATCH_MAX bytes."""
        whole = buffer.base if isinstance(buffer.base, np.ndarray) else buffer
        if whole.nbytes <= SCRATCH_MAX:
            with self._lock:
                if self._scratch is None or self._scratch.shape[0] < whole.shape[0]:
                    self._scratch = whole

    def _native_topk(self, keys: np.ndarray, result: np.ndarray, spec: SortSpec, blocks: int) -> bool:
        """A top-k of few (TOPK_NATIVE_MAX) of long rows (k < n / PARTITION_FRACTION) by the
        device's one-pass scan (SortKernels.topk), blocks of rows over the threads. False
        (nothing written) where it does not apply: no native top-k, the dtype."""
        kernels, k = self.kernels, spec.k
        if (kernels is None or not hasattr(kernels, "topk") or k > TOPK_NATIVE_MAX or spec.n < 64
                or k * PARTITION_FRACTION >= spec.n or not result.flags.c_contiguous):
            return False
        if keys.dtype.itemsize < 4 and keys.dtype.kind in "fiub":   # (exact: as float32, int32)
            keys = keys.astype({"f": np.float32, "i": np.int32}.get(keys.dtype.kind, np.uint32))
        if not keys.flags.c_contiguous:
            keys = np.ascontiguousarray(keys)
        places = result if spec.indices else np.empty(result.shape, np.int64)
        values = np.empty(result.shape, keys.dtype) if spec.indices or result.dtype != keys.dtype else result
        bounds = [spec.rows * i // blocks for i in range(blocks + 1)]
        spans = list(zip(bounds, bounds[1:]))

        def block(span: tuple[int, int]) -> bool:
            lo, hi = span
            done = kernels.topk(keys[lo:hi], k, spec.descending, places[lo:hi], values[lo:hi])
            if done is None:
                return False
            if not spec.indices and values is not result:
                result[lo:hi] = values[lo:hi]
            given_up = np.flatnonzero(~done)   # (rows sorted the wrong way: numpy's way, on this thread)
            if given_up.size == hi - lo:
                _sort_block(keys[lo:hi], result[lo:hi], SortSpec(hi - lo, spec.n, k, spec.descending, spec.stable,
                                                                  spec.indices))
            elif given_up.size:
                redone = np.empty((given_up.size, k), result.dtype)
                _sort_block(keys[lo + given_up], redone, SortSpec(given_up.size, spec.n, k, spec.descending,
                                                                  spec.stable, spec.indices))
                result[lo + given_up] = redone
            return True
        return all(self._map(block, spans))

    def _map(self, fn: Callable[[Any], Any], jobs: list[Any]) -> list[Any]:
        """fn over the jobs: on the pool's threads, or on this one for a single job."""
        if len(jobs) == 1:
            return [fn(jobs[0])]
        return list(self._executor().map(fn, jobs))

    def _split_sort(self, key: np.ndarray, out: np.ndarray, descending: bool) -> bool:
        """A value sort of one long row on two threads without a merge: a pivot (the median of
        a sample) splits the row, each thread counts then moves its half's elements below the
        pivot and the others straight to their side of `out` (the device's native count and
        partition), and each side is sorted in place by numpy on a thread of its own. The
        whole costs about a numpy sort of the row plus one pass (a merge of sorted halves cost
        one more sort's worth); the order of equal values does not matter to a value sort but
        for zeros, which the caller puts back. False (nothing written) where it does not
        apply: not two threads, no native kernels for the dtype, a NaN pivot or a lopsided
        split (SPLIT_BALANCE): the chunks and merges then."""
        kernels, n = self.kernels, key.shape[0]
        if kernels is None or self.threads != 2 or not (key.flags.c_contiguous and out.flags.c_contiguous):
            return False
        sample = np.sort(key[:: max(1, n // 4095)])
        pivot = sample[sample.size // 2]
        if key.dtype.kind == "f" and np.isnan(pivot):
            return False
        pool = self._executor()
        spans = [(0, n // 2), (n // 2, n)]
        counts = list(pool.map(lambda span: kernels.count_below(key[span[0]:span[1]], pivot), spans))
        if any(c is None for c in counts):
            return False
        low = sum(c for c in counts if c is not None)
        if min(low, n - low) * SPLIT_BALANCE < n:
            return False
        jobs, low_at, high_at = [], 0, low
        for (lo, hi), c in zip(spans, counts):
            assert c is not None
            jobs.append((key[lo:hi], out[low_at:low_at + c], out[high_at:high_at + hi - lo - c]))
            low_at, high_at = low_at + c, high_at + hi - lo - c
        if not all(pool.map(lambda job: kernels.partition(job[0], pivot, job[1], job[2]), jobs)):
            raise RuntimeError("sort: the device's partition declined after its count")   # (same dtype: cannot)
        list(pool.map(lambda side: side.sort(), [out[:low], out[low:]]))
        if descending:
            out[...] = out[::-1]
        return True

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="ug-sort")
        return self._pool

    def after_fork(self) -> None:
        """In a forked child (KitDevice.after_fork): the pool's threads are gone, a new pool
        is made on the next sort. (Registered per device, not with os.register_at_fork, which
        would keep every HostSort ever made alive.)"""
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
                 pieces: int, into: np.ndarray, into_pos: np.ndarray | None, merge: Callable[[np.ndarray, np.ndarray, np.ndarray], bool] | None = None
                 ) -> None:
    """Piece `piece` of `pieces` of the stable merge of the runs vals[first] and vals[second]
    (adjacent), written to the same place in `into` (and their positions in `into_pos`), by
    `merge` where it applies (values only)."""
    a, b = vals[first[0]:first[1]], vals[second[0]:second[1]]
    total = len(a) + len(b)
    m0, m1 = total * piece // pieces, total * (piece + 1) // pieces
    i0, i1 = _co_rank(a, b, m0), _co_rank(a, b, m1)
    j0, j1 = m0 - i0, m1 - i1
    at = slice(first[0] + m0, first[0] + m1)
    if pos is None and merge is not None and merge(a[i0:i1], b[j0:j1], into[at]):
        return
    merged = np.concatenate([a[i0:i1], b[j0:j1]])
    if pos is None or into_pos is None:
        merged.sort(kind="stable")
        into[at] = merged
        return
    order = np.argsort(merged, kind="stable")   # (two runs: numpy's stable sort merges them)
    into[at] = merged[order]
    into_pos[at] = np.concatenate([pos[first[0] + i0:first[0] + i1], pos[second[0] + j0:second[0] + j1]])[order]


def sort_rows(keys: np.ndarray, out: np.ndarray, spec: SortSpec) -> None:
    """Sort rows of `keys` into `out` (one thread)."""
    HostSort(1).run(keys, out, spec)   # (one thread: no pool is made)


def _sorts_wrongly(keys: np.ndarray, spec: SortSpec) -> bool:
    """Whether numpy's value sort of these keys may be wrong: np.sort of float16 with many
    equal values misplaced a few of them (numpy 2.4.6 on an AVX512 machine: 16 of 70001
    elements of integers in [-5, 5)); they are sorted as float32, exactly, instead."""
    return keys.dtype == np.float16 and not spec.indices


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
        packed = _packed(rows)
        if packed is not None:   # (unique keys: any sort is the stable one)
            packed.sort(axis=1)
            order = (packed & np.uint64(_POSITION_MASK)).view(np.int64)
        else:
            order = np.argsort(rows, axis=1, kind=kind)
        first = order[:, n - k:][:, ::-1] if spec.descending else order[:, :k]
        if spec.descending:
            first = n - 1 - first   # positions in the reversed row -> in the row
    if spec.indices:
        out[...] = first
    else:
        out[...] = np.take_along_axis(keys, first, axis=1)


_POSITION_MASK = 0xFFFF_FFFF


def _packed(rows: np.ndarray) -> np.ndarray | None:
    """Keys whose ascending order is the stable ascending order of each row (NaN after every
    number, -0.0 equal to 0.0): an order-preserving 32-bit code of the value above the
    element's position in its row, in one uint64. The keys are unique, so numpy's fastest
    sort of them (which sorts values, no indirection: 1.9x a stable argsort of 2^20 float32
    here) is the stable order, and the low 32 bits of the sorted keys are the argsort. None
    for 64-bit values, or rows of 2^32 or more."""
    n, kind = rows.shape[1], rows.dtype.kind
    if rows.dtype.itemsize > 4 or n > _POSITION_MASK or kind not in "fiub":
        return None
    if kind == "f":
        value = rows.astype(np.float32) + np.float32(0)   # (float16 exactly; -0.0 + 0.0 is 0.0)
        bits = value.view(np.uint32)
        # positive: above every negative; negative: flipped, so more negative sorts lower
        code = np.where(bits >> np.uint32(31), ~bits, bits | np.uint32(0x8000_0000))
        code[np.isnan(value)] = 0xFFFF_FFFF   # every NaN one key, after +inf (0xFF80_0000)
    elif kind == "i":
        code = (rows.astype(np.int64) - np.iinfo(np.int32).min).astype(np.uint32)
    else:
        code = rows.astype(np.uint32)
    return (code.astype(np.uint64) << np.uint64(32)) | np.arange(n, dtype=np.uint64)


def _zeros_in_order(keys: np.ndarray, out: np.ndarray, descending: bool) -> None:
    """The sorted rows' runs of zeros as they came: -0.0 and 0.0 are equal, so a stable sort
    keeps their order, and numpy's SIMD sort does not even keep their bits (sorting one -0.0
    and many 0.0 gave several -0.0). A run is found by binary search in the sorted row; only
    a row with two zeros or more is read again."""
    n = out.shape[1]
    zero = out.dtype.type(0)   # (a Python float would make numpy search a float64 copy of the row)
    ascending = out[:, ::-1] if descending else out   # (NaN last, as searchsorted expects)
    for r in range(out.shape[0]):
        lo, hi = int(ascending[r].searchsorted(zero, "left")), int(ascending[r].searchsorted(zero, "right"))
        if hi - lo > 1:
            run = slice(n - hi, n - lo) if descending else slice(lo, hi)
            out[r, run] = keys[r, np.flatnonzero(keys[r] == 0)]


def _top_by_blocks(keys: np.ndarray, k: int, largest: bool) -> np.ndarray | None:
    """The positions of the k largest (smallest) of each row, largest (smallest) first, equal
    values by position. The row's elements are dealt into G groups (element j into group
    j % G, so a group's extreme is one elementwise max over the row's G-wide slices, SIMD in
    numpy); the k-th largest of the G maxima is a threshold that at least k elements reach,
    so the k largest are among the elements past it, a few more than k per row (k = 16 of
    4096 with G = 256: 16.5 on average), and only those are sorted. None where it does not
    apply (short rows, NaN: the caller partitions)."""
    rows, n = keys.shape
    groups = 1 << min((n // 4).bit_length() - 1, (16 * k).bit_length() - 1)   # a power of two <= n/4, <= 16k
    if groups < 2 * k or keys.dtype.kind not in "fiu":
        return None
    body = keys[:, :n - n % groups].reshape(rows, -1, groups)
    extreme = body.max(axis=1) if largest else body.min(axis=1)
    if extreme.dtype.kind == "f" and np.isnan(extreme).any():
        return None
    kth = groups - k if largest else k - 1
    threshold = np.partition(extreme, kth, axis=1)[:, kth:kth + 1]
    # every element of the k largest is at least the k-th largest element, itself at least the threshold
    found = np.flatnonzero(keys >= threshold if largest else keys <= threshold)   # row by row, by position
    r, c = np.divmod(found, n)
    key = keys.reshape(-1)[found]
    if largest:
        key = _descending_key(key)
    # each row's candidates side by side, padded with the key's largest (after any real candidate:
    # the sort is stable and a pad sits behind them), sorted per row
    counts = np.bincount(r, minlength=rows)
    rank = np.arange(found.size) - np.repeat(np.cumsum(counts) - counts, counts)
    pad_key = np.inf if key.dtype.kind == "f" else np.iinfo(key.dtype).max
    padded = np.full((rows, int(counts.max())), pad_key, key.dtype)
    padded[r, rank] = key
    place = np.zeros(padded.shape, np.int64)
    place[r, rank] = c
    order = np.argsort(padded, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(place, order, axis=1)


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


register_host_fallback("sort", sort_rows)   # Device.sort's default (ug_core.device cannot import the kit, built on it)
