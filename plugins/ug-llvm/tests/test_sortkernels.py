"""The native merge of the host sort's runs (sortkernels.py) against numpy's stable sort, and the
kit's host sort of long rows with it on several threads (several merge rounds, an odd run)."""

import numpy as np
import pytest

from ug_core.kit.hostsort import SPLIT_MIN, HostSort
from ug_core.specs import SortSpec

from ug_llvm.sortkernels import _TYPES, SortKernels
from ug_llvm.jit import get_jit


@pytest.fixture(scope="module")
def kernels():
    return SortKernels(get_jit())


@pytest.fixture(scope="module")
def merge(kernels):
    return kernels.merge


def _runs(rng, dtype, na, nb):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":   # few distinct values (ties), NaNs and both zeros
        a, b = (rng.integers(-4, 4, n).astype(dtype) for n in (na, nb))
        a[::7], b[::5] = np.nan, np.nan
        a[1::9], b[2::11] = -0.0, 0.0
    else:
        info = np.iinfo(dtype)
        a, b = (rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True) for n in (na, nb))
        a[::3], b[::4] = info.max, info.min   # the extremes: a signed compare read as unsigned would misorder them
    a.sort(kind="stable")
    b.sort(kind="stable")
    return a, b


@pytest.mark.parametrize("dtype", sorted(_TYPES, key=str))
@pytest.mark.parametrize("na, nb", [(0, 0), (0, 5), (6, 0), (1, 1), (17, 9), (1000, 333)])
def test_merge_is_the_stable_merge(merge, dtype, na, nb):
    a, b = _runs(np.random.default_rng(na * 1000 + nb), dtype, na, nb)
    out = np.full(na + nb, 7, dtype)
    assert merge(a, b, out)
    want = np.concatenate([a, b])
    want = want[np.argsort(want, kind="stable")]   # NaN last, ties: a's first
    np.testing.assert_array_equal(out.view(f"u{out.itemsize}"), want.view(f"u{want.itemsize}"))   # bits: -0.0 vs 0.0


def test_merge_declines_what_it_cannot_merge(merge):
    a = np.arange(10, dtype=np.float16)
    assert not merge(a[:4], a[4:], np.empty(10, np.float16))   # no native merge of float16
    b = np.arange(20, dtype=np.float32)
    assert not merge(b[:10:2], b[10:15], np.empty(10, np.float32))   # a strided run
    with pytest.raises(ValueError, match="do not fit"):
        merge(b[:3], b[3:6], np.empty(5, np.float32))


class _Counted:
    """The kernels, counting the calls of each."""

    def __init__(self, kernels):
        self.kernels, self.calls = kernels, []

    def __getattr__(self, name):
        fn = getattr(self.kernels, name)

        def counted(*args):
            self.calls.append(name)
            return fn(*args)
        return counted


@pytest.mark.parametrize("threads, how", [(2, "partition"), (3, "merge"), (4, "merge"), (2, "merge")])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint64"])
@pytest.mark.parametrize("descending", [False, True])
def test_long_rows_sorted_natively(kernels, threads, how, dtype, descending):
    rng = np.random.default_rng(threads)
    n = 2 * SPLIT_MIN + 12345
    a, b = _runs(rng, dtype, n // 2, n - n // 2)
    x = np.concatenate([a, b])
    rng.shuffle(x)
    if how == "merge" and threads == 2:   # a lopsided row: nearly all one value, no split
        x[: n - n // 16] = x[0]
    counted = _Counted(kernels)
    out = np.empty((1, n), x.dtype)
    HostSort(threads, counted).run(x[None], out, SortSpec(1, n, n, descending=descending, stable=True, indices=False))
    order = np.argsort(x[::-1] if descending else x, kind="stable")
    want = (x[::-1][order])[::-1] if descending else x[order]
    assert how in counted.calls   # the native kernels did it
    np.testing.assert_array_equal(out[0].view(f"u{x.itemsize}"), want.view(f"u{x.itemsize}"))


def test_partition_and_count(kernels):
    x = np.array([3.0, np.nan, -1.0, 2.0, -0.0, 5.0, -np.inf], np.float32)
    pivot = np.float32(2.0)
    below = kernels.count_below(x, pivot)
    assert below == 3
    low, high = np.empty(below, np.float32), np.empty(x.size - below, np.float32)
    assert kernels.partition(x, pivot, low, high)
    np.testing.assert_array_equal(low, [-1.0, -0.0, -np.inf])
    np.testing.assert_array_equal(high, [3.0, np.nan, 2.0, 5.0])
    assert kernels.count_below(np.zeros(4, np.float16), np.float16(1)) is None
    with pytest.raises(ValueError, match="places"):
        kernels.partition(x, pivot, low, high[:2])


def _stable_argsort(x, descending):
    """numpy's stable argsort; descending: the stable reverse (equal elements in order, NaN first)."""
    if not descending:
        return np.argsort(x, kind="stable")
    return x.shape[0] - 1 - np.argsort(x[::-1], kind="stable")[::-1]


def _radix_rows(rng, dtype, data, n):
    dtype = np.dtype(dtype)
    if data == "spread":
        x = (rng.standard_normal(n) * 1000).astype(dtype) if dtype.kind in "fi" else rng.integers(0, 2, n).astype(dtype)
    elif data == "ties":
        x = rng.integers(0 if dtype.kind in "ub" else -4, 4, n).astype(dtype)
    elif data == "one digit":   # codes differing in their low 11 bits only: one pass
        x = rng.integers(0, 2048, n).astype(dtype)
    elif data == "two digits":   # a low digit every code shares: two passes (a second scratch buffer)
        x = (rng.integers(0, 1 << 21, n) << 11).astype(dtype)
    else:   # "same": no pass at all
        x = np.full(n, 3, dtype)
    if dtype.kind == "f" and data in ("spread", "ties"):
        x[::97], x[1::13], x[2::17] = np.nan, -0.0, 0.0
    if dtype.kind == "i" and data == "spread":
        info = np.iinfo(dtype)
        x[::101], x[5::103] = info.min, info.max   # the extremes: a code read with the sign wrong would misorder them
    return x


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("dtype, data", [("float32", "spread"), ("float32", "ties"), ("int32", "spread"),
                                         ("uint32", "one digit"), ("uint32", "two digits"), ("int32", "same"),
                                         ("float16", "ties"), ("int8", "spread"), ("bool", "spread")])
@pytest.mark.parametrize("descending", [False, True])
def test_radix_argsort_is_the_stable_argsort(kernels, monkeypatch, threads, dtype, data, descending):
    from ug_core.kit import hostsort
    monkeypatch.setattr(hostsort, "RADIX_SPLIT_MIN", hostsort.RADIX_MIN)   # (rows this long: two threads)
    rng = np.random.default_rng(threads)
    n = hostsort.RADIX_MIN + 4321   # (odd halves on two threads)
    x = _radix_rows(rng, dtype, data, n)
    counted = _Counted(kernels)
    out = np.full((1, n), -1, np.int64)
    HostSort(threads, counted).run(x[None], out, SortSpec(1, n, n, descending=descending, stable=True, indices=True))
    np.testing.assert_array_equal(out[0], _stable_argsort(x, descending))
    assert "radix_codes" in counted.calls
    passes = 1 if dtype == "bool" else {"same": 0, "one digit": 1, "two digits": 2}.get(data, 3)
    assert counted.calls.count("radix_scatter") == passes * min(threads, 2)   # a trivial digit is no pass


def test_radix_argsort_of_many_rows_and_scratch_reuse(kernels):
    from ug_core.kit.hostsort import RADIX_MIN
    rng = np.random.default_rng(5)
    sort = HostSort(2, _Counted(kernels))
    for rows, n in [(5, RADIX_MIN + 3), (1, 3 * RADIX_MIN), (3, RADIX_MIN)]:   # a kept buffer longer, then shorter
        x = rng.integers(-50, 50, (rows, n)).astype(np.float32)
        out = np.empty((rows, n), np.int64)
        sort.run(x, out, SortSpec(rows, n, n, descending=True, stable=True, indices=True))
        for r in range(rows):
            np.testing.assert_array_equal(out[r], _stable_argsort(x[r], True))
    assert "radix_scatter" in sort.kernels.calls


def test_radix_declines_what_it_cannot_sort(kernels):
    from ug_llvm.sortkernels import RADIX_BUCKETS
    hist = np.zeros((3, RADIX_BUCKETS), np.uint32)
    items = np.empty(10, np.uint64)
    assert not kernels.radix_codes(np.arange(10.0), 0, False, items, hist)   # float64: no 32-bit code
    assert not kernels.radix_codes(np.arange(20, dtype=np.float32)[::2], 0, False, items, hist)   # strided
    with pytest.raises(ValueError, match="do not fit"):
        kernels.radix_codes(np.arange(10, dtype=np.float32), 0, False, items[:5], hist)


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32", "float16", "int16"])
@pytest.mark.parametrize("k", [1, 5, 16])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("indices", [True, False])
def test_native_topk_is_the_stable_order(kernels, dtype, k, largest, indices):
    """The one-pass top-k against the stable sort's first k: ties across the k-th (the earlier
    first), NaN (after every number), zeros of both signs, a sorted row (every element beats
    the k-th so far: the slow path throughout), a row length that leaves a tail."""
    rng = np.random.default_rng(k)
    rows, n = 7, 64 * 9 + 13
    x = rng.integers(0 if dtype.startswith("u") else -20, 20, (rows, n)).astype(dtype)
    x[1] = np.sort(x[1])
    x[2] = np.sort(x[2])[::-1]
    x[3] = (rng.standard_normal(n) * 100).astype(dtype) if dtype.startswith("f") else x[3]
    if dtype.startswith("f"):
        x[4, ::7], x[5, 1::3], x[5, 2::5] = np.nan, -0.0, 0.0
        x[6] = np.nan
    counted = _Counted(kernels)
    out = np.empty((rows, k), np.int64 if indices else x.dtype)
    HostSort(2, counted).run(x, out, SortSpec(rows, n, k, descending=largest, stable=True, indices=indices))
    want = np.stack([_stable_argsort(row, largest)[:k] for row in x])
    if indices:
        np.testing.assert_array_equal(out, want)
    else:
        np.testing.assert_array_equal(out.view(f"u{x.itemsize}"), np.take_along_axis(x, want, 1).view(f"u{x.itemsize}"))
    assert "topk" in counted.calls


def test_native_topk_declines(kernels):
    x = np.arange(200, dtype=np.float64).reshape(2, 100)
    assert not kernels.topk(x, 3, True, np.empty((2, 3), np.int64), np.empty((2, 3)))   # float64: no 32-bit code
    y = x.astype(np.float32)
    with pytest.raises(ValueError, match="k=3"):
        kernels.topk(y, 3, True, np.empty((2, 4), np.int64), np.empty((2, 3), np.float32))


def test_native_topk_gives_up_a_row_sorted_the_wrong_way(kernels):
    """Every 16th element of row 1 ascending and the others all one low value (so the floor,
    the worst of the 16 lanes' best, is that value and every element reaches it): each of the
    ascending elements beats the k largest so far, and the scan gives the row up (its budget of
    insertions spent) rather than take O(n k); the host sort sorts it. A plainly sorted row
    keeps its floor high (the last 16 elements) and is done."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 4096)).astype(np.float32)
    x[1] = -1e9
    x[1, ::16] = np.arange(256)
    x[3].sort()
    out_idx, out_val = np.empty((4, 16), np.int64), np.empty((4, 16), np.float32)
    assert kernels.topk(x, 16, True, out_idx, out_val).tolist() == [True, False, True, True]
    assert kernels.topk(x, 16, False, out_idx, out_val).tolist() == [True, True, True, True]
    out = np.empty((4, 16), np.int64)
    HostSort(2, kernels).run(x, out, SortSpec(4, 4096, 16, descending=True, stable=True, indices=True))
    np.testing.assert_array_equal(out, np.stack([_stable_argsort(row, True)[:16] for row in x]))
