"""The native merge of the host sort's runs (hostmerge.py) against numpy's stable sort, and the
kit's host sort of long rows with it on several threads (several merge rounds, an odd run)."""

import numpy as np
import pytest

from ug_core.kit.hostsort import SPLIT_MIN, HostSort
from ug_core.specs import SortSpec

from ug_llvm.hostmerge import _TYPES, HostMerge
from ug_llvm.jit import get_jit


@pytest.fixture(scope="module")
def merge():
    return HostMerge(get_jit())


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


@pytest.mark.parametrize("threads", [2, 3, 4])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint64"])
@pytest.mark.parametrize("descending", [False, True])
def test_long_rows_merged_natively(merge, threads, dtype, descending):
    rng = np.random.default_rng(threads)
    n = 2 * SPLIT_MIN + 12345
    a, b = _runs(rng, dtype, n // 2, n - n // 2)
    x = np.concatenate([a, b])
    rng.shuffle(x)
    calls = []

    def counted(*args):
        calls.append(1)
        return merge(*args)
    out = np.empty((1, n), x.dtype)
    HostSort(threads, counted).run(x[None], out, SortSpec(1, n, n, descending=descending, stable=True, indices=False))
    order = np.argsort(x[::-1] if descending else x, kind="stable")
    want = (x[::-1][order])[::-1] if descending else x[order]
    assert calls   # the merges were the native ones
    np.testing.assert_array_equal(out[0].view(f"u{x.itemsize}"), want.view(f"u{x.itemsize}"))
