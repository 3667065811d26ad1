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
