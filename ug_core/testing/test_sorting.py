"""Sorting, searching and data-dependent shapes against numpy, on every device: sort, argsort
(stable, descending, NaN last), topk, searchsorted, nonzero, boolean masks, cumulative_max/min.
A sort is a schedule item: a device sorts in its own memory, or Device.sort's default sorts a
host copy."""
import numpy as np
import pytest

import ug_core as ug
from ug_core.dtypes import SUPPORTED
from ug_core.testing.data import rand


def stable_argsort(x, axis, descending):
    """numpy's stable argsort; descending: the stable reverse (equal elements in order, NaN first)."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    flipped = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return x.shape[axis] - 1 - np.flip(flipped, axis)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("shape,axis", [((1,), 0), ((9,), 0), ((33,), -1), ((4, 17), 1), ((17, 4), 0), ((2, 3, 8), 1),
                                        ((3, 0), 1), ((0, 5), 1)])
def test_argsort_and_sort(device, shape, axis, descending, rng):
    x = rng.integers(-4, 4, shape).astype(np.float32)   # many ties: stability shows
    if x.size > 3:
        x.flat[[1, 3]] = np.nan
    t = ug.tensor(x, device=device)
    want = stable_argsort(x, axis, descending)
    got = ug.argsort(t, axis=axis, descending=descending)
    assert got.dtype == np.int64 and got.shape == x.shape
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(ug.sort(t, axis=axis, descending=descending).numpy(),
                                  np.take_along_axis(x, want, axis))


@pytest.mark.parametrize("dt", sorted(SUPPORTED, key=str), ids=str)
def test_sort_every_dtype(device, require_dtype, dt, rng):
    require_dtype(dt)
    x = (rng.standard_normal(50) * 30).astype(dt)
    if dt.kind == "c":   # not ordered: the standard's sort and argsort take real data
        for fn in (ug.sort, ug.argsort):
            with pytest.raises(TypeError, match=f"not defined on complex.*{dt.name}"):
                fn(ug.tensor(x, device=device))
        return
    np.testing.assert_array_equal(ug.sort(ug.tensor(x, device=device)).numpy(), np.sort(x, kind="stable"))
    np.testing.assert_array_equal(ug.argsort(ug.tensor(x, device=device)).numpy(), np.argsort(x, kind="stable"))


def test_sort_of_a_computed_and_transposed_value_fuses_after(device):
    x = rand((6, 5))
    t = ug.tensor(x, device=device)
    got = ug.sort(t.T * 2.0, axis=1) + 1.0
    np.testing.assert_allclose(got.numpy(), np.sort(x.T * 2.0, axis=1) + 1.0, rtol=1e-6)


@pytest.mark.parametrize("largest", [True, False])
def test_topk(device, largest, rng):
    x = rand((6, 50))   # distinct values: the k are unambiguous
    values, indices = ug.topk(ug.tensor(x, device=device), 5, largest=largest)
    order = np.argsort(-x if largest else x, axis=1, kind="stable")[:, :5]
    np.testing.assert_array_equal(indices.numpy(), order)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, order, 1))
    v0, i0 = ug.topk(ug.tensor(x, device=device), 2, axis=0, largest=largest)
    order0 = np.argsort(-x if largest else x, axis=0, kind="stable")[:2]
    np.testing.assert_array_equal(i0.numpy(), order0)
    with pytest.raises(ValueError, match="out of range"):
        ug.topk(ug.tensor(x, device=device), 51)


@pytest.mark.parametrize("dtype", [np.float16, np.int16, np.uint32])
def test_sort_of_many_equal_values(device, require_dtype, dtype, rng):
    """numpy 2.4.6's np.sort of float16 misplaced a few of 20000 integers in [-5, 5) (an
    AVX512 machine): a device sorting with numpy must not inherit that."""
    require_dtype(dtype)
    x = rng.integers(0, 10, (2, 20000)).astype(dtype) - dtype(5 if dtype != np.uint32 else 0)
    for descending in (False, True):
        got = ug.sort(ug.tensor(x, device=device), descending=descending).numpy()
        want = np.sort(x.astype(np.float64), axis=1)
        np.testing.assert_array_equal(got, want[:, ::-1] if descending else want)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype,n,k", [(np.float32, 4096, 16), (np.float32, 1000, 3), (np.int32, 700, 1),
                                       (np.uint8, 513, 32), (np.int64, 2048, 100), (np.float64, 800, 100)])
def test_topk_of_wide_rows(device, require_dtype, dtype, n, k, largest, rng):
    """Rows wide enough for a device's shortcuts (a host sort takes a threshold from group
    maxima): few distinct values (ties across the k-th), the dtype's extremes, -inf, an odd
    row length."""
    require_dtype(dtype)
    x = rng.integers(0, 40, (5, n)).astype(dtype)
    info = np.finfo(dtype) if x.dtype.kind == "f" else np.iinfo(dtype)
    x[0, 7], x[1, -1], x[2, 3] = info.max, info.min, info.max
    x[3] = x[3, ::-1] if x.dtype.kind != "f" else rng.standard_normal(n).astype(dtype)
    if x.dtype.kind == "f":
        x[4, ::5] = -np.inf
    values, indices = ug.topk(ug.tensor(x, device=device), k, largest=largest)
    wide = x.astype(np.float64)
    order = np.argsort(-wide if largest else wide, axis=1, kind="stable")[:, :k]
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, order, 1))
    got = indices.numpy()
    np.testing.assert_array_equal(np.take_along_axis(x, got, 1), values.numpy())
    assert all(len(set(row)) == k for row in got.tolist())
    # equal values inside the k by position (which of those equal to the k-th: unspecified)
    same = values.numpy()[:, 1:] == values.numpy()[:, :-1]
    assert (got[:, 1:][same] > got[:, :-1][same]).all()


def test_topk_with_nan(device):
    x = np.arange(3000, dtype=np.float32).reshape(1, -1)
    x[0, [5, 2000]] = np.nan   # NaN is larger than every number (sorts last)
    _, largest = ug.topk(ug.tensor(x, device=device), 4)
    assert largest.numpy().tolist() == [[5, 2000, 2999, 2998]]
    _, smallest = ug.topk(ug.tensor(x, device=device), 4, largest=False)
    assert smallest.numpy().tolist() == [[0, 1, 2, 3]]


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(device, side, rng):
    a = np.sort(rng.integers(0, 30, 100)).astype(np.float32)
    a[-3:] = np.nan   # NaN sorts last
    v = np.concatenate([rng.integers(-2, 33, 50).astype(np.float32), [np.nan, np.inf, -np.inf, 0.0]])
    got = ug.searchsorted(ug.tensor(a, device=device), ug.tensor(v, device=device), side=side)
    np.testing.assert_array_equal(got.numpy(), np.searchsorted(a, v, side=side))
    ints = np.array([1, 3, 3, 7], np.int32)
    np.testing.assert_array_equal(ug.searchsorted(ug.tensor(ints, device=device), [0, 3, 8], side=side).numpy(),
                                  np.searchsorted(ints, [0, 3, 8], side=side))
    perm = rng.permutation(len(ints))
    np.testing.assert_array_equal(
        ug.searchsorted(ug.tensor(ints[perm], device=device), [3], sorter=np.argsort(ints[perm])).numpy(),
        np.searchsorted(ints[perm], [3], sorter=np.argsort(ints[perm])))
    assert ug.searchsorted(ug.tensor(np.zeros(0, np.float32), device=device), [1.0]).numpy().tolist() == [0]


def test_nonzero_and_boolean_masks(device, rng):
    x = rand((5, 6))
    t = ug.tensor(x, device=device)
    for got, want in zip(ug.nonzero(t > 0), np.nonzero(x > 0)):
        np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(t[t > 0].numpy(), x[x > 0])
    np.testing.assert_array_equal(t[x[:, 0] > 0].numpy(), x[x[:, 0] > 0])
    np.testing.assert_array_equal(t[:, [True, False, True, False, False, True]].numpy(), x[:, [True, False, True, False, False, True]])
    s = ug.tensor(x, device=device)
    s[s < 0] = 0.0   # a select: no sync
    np.testing.assert_array_equal(s.numpy(), np.where(x < 0, 0, x))
    m = x > 0.5
    u = ug.tensor(x, device=device)
    u[m] = np.arange(m.sum(), dtype=np.float32)
    want = x.copy()
    want[m] = np.arange(m.sum())
    np.testing.assert_array_equal(u.numpy(), want)
    with pytest.raises(ValueError, match="at least one dimension"):
        ug.nonzero(ug.tensor(np.float32(1), device=device))
    for wrong in (np.ones((5, 7), bool), ug.tensor(np.ones(6, bool), device=device)):   # must match the dims
        with pytest.raises(IndexError, match="does not match"):
            t[wrong]
    np.testing.assert_array_equal(t[..., x[0] > 0].numpy(), x[..., x[0] > 0])
    np.testing.assert_array_equal(t[None, x > 0].numpy(), x[None, x > 0])


@pytest.mark.parametrize("shape,axis", [((9,), 0), ((3, 40), 1), ((40, 3), 0), ((100000,), 0)])
def test_cumulative_max_and_min(device, shape, axis, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    x.flat[min(7, x.size - 1)] = np.nan
    t = ug.tensor(x, device=device)
    np.testing.assert_array_equal(ug.cumulative_max(t, axis=axis).numpy(), np.maximum.accumulate(x, axis=axis))
    np.testing.assert_array_equal(ug.cumulative_min(t, axis=axis).numpy(), np.minimum.accumulate(x, axis=axis))
    xi = rng.integers(-50, 50, shape).astype(np.int32)
    np.testing.assert_array_equal(ug.cumulative_max(ug.tensor(xi, device=device), axis=axis).numpy(),
                                  np.maximum.accumulate(xi, axis=axis))


def test_jit_replays_sorts_and_refuses_data_dependent_shapes(device, rng):
    f = ug.jit(lambda t: ug.sort(t, descending=True)[:3] * 2.0)
    for _ in range(3):
        x = rand(20)
        np.testing.assert_array_equal(f(ug.tensor(x, device=device)).numpy(), -np.sort(-x)[:3] * 2.0)
    g = ug.jit(lambda t: t[t > 0])
    with pytest.raises(ug.TracerValueError, match="depends on the values"):
        g(ug.tensor(rand(5), device=device))
    h = ug.jit(lambda t: ug.nonzero(t)[0])
    with pytest.raises(ug.TracerValueError, match="nonzero"):
        h(ug.tensor(rand(5), device=device))


def test_unique_functions(device, rng):
    x = rng.integers(0, 5, (4, 6)).astype(np.float32)
    x[0, 0] = x[2, 3] = np.nan   # each NaN is a value of its own (the standard's rule)
    t = ug.tensor(x, device=device)
    values, index, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                               equal_nan=False)
    np.testing.assert_array_equal(ug.unique_values(t).numpy(), values)
    got = ug.unique_all(t)
    np.testing.assert_array_equal(got.values.numpy(), values)
    np.testing.assert_array_equal(got.indices.numpy(), index)
    np.testing.assert_array_equal(got.inverse_indices.numpy(), inverse.reshape(x.shape))
    np.testing.assert_array_equal(got.counts.numpy(), counts)
    np.testing.assert_array_equal(ug.unique_counts(t).counts.numpy(), counts)
    np.testing.assert_array_equal(ug.unique_inverse(t).inverse_indices.numpy(), inverse.reshape(x.shape))
    assert ug.unique_values(ug.tensor(np.zeros(0, np.int32), device=device)).shape == (0,)


def test_repeat_with_per_element_counts(device):
    x = rand((3, 2))
    t = ug.tensor(x, device=device)
    np.testing.assert_array_equal(ug.repeat(t, ug.tensor(np.array([2, 0, 1]), device=device), axis=0).numpy(),
                                  np.repeat(x, [2, 0, 1], axis=0))
    np.testing.assert_array_equal(ug.repeat(t, [1, 3], axis=1).numpy(), np.repeat(x, [1, 3], axis=1))
    np.testing.assert_array_equal(ug.repeat(t, ug.tensor(np.arange(6), device=device)).numpy(), np.repeat(x, np.arange(6)))


@pytest.mark.parametrize("descending", [False, True])
def test_long_rows(device, descending, rng):
    # long enough for a host sort's threads to split the row (chunks, then merges)
    x = rng.integers(-1000, 1000, 70001).astype(np.float32)
    x[::997] = np.nan
    x[[3, 11, 500]] = [-0.0, 0.0, -0.0]
    t = ug.tensor(x, device=device)
    want = stable_argsort(x, 0, descending)
    np.testing.assert_array_equal(ug.argsort(t, descending=descending).numpy(), want)
    np.testing.assert_array_equal(ug.sort(t, descending=descending).numpy().view(np.uint32), x[want].view(np.uint32))
    two = np.stack([x, -x])
    np.testing.assert_array_equal(ug.argsort(ug.tensor(two, device=device), axis=1, descending=descending).numpy(),
                                  stable_argsort(two, 1, descending))
