"""Indexed stores (ops.Op.SCATTER): scatter_add, index_add, bincount and integer-array
assignment against numpy, on every device; duplicates (all add; the last write wins) and
determinism (the same bits on every run)."""
import numpy as np
import pytest

import ug_core as ug
from ug_core.scatter import MAX_PARTS, parts_for
from ug_core.testing.data import rand


def add_at(x, axis, idx, src):
    out = x.copy()
    for q in np.ndindex(idx.shape):
        target = list(q)
        target[axis] = idx[q]
        out[tuple(target)] += src[q]
    return out


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_add_matches_a_sequential_loop(device, axis, rng):
    x = rand((6, 5, 4))
    shape = [6, 5, 4]
    shape[axis] = 9
    shape[(axis + 1) % 3] -= 1          # index smaller than x off the axis (torch's rule)
    idx = rng.integers(-x.shape[axis], x.shape[axis], shape)
    src = rand(tuple(shape))
    want = add_at(x, axis % 3, np.where(idx < 0, idx + x.shape[axis], idx), src)
    for index in (idx, ug.tensor(idx, device=device)):
        got = ug.scatter_add(ug.tensor(x, device=device), axis, index, ug.tensor(src, device=device))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dt", [np.int32, np.int64, np.float64, np.float16], ids=lambda d: np.dtype(d).name)
def test_scatter_add_dtypes_and_many_duplicates(device, require_dtype, dt, rng):
    require_dtype(dt)
    n, slots = 5000, 7     # several parts (parts_for), each with many hits per slot
    assert parts_for(n, slots) > 1
    x = (rng.standard_normal(slots) * 4).astype(dt)
    idx = rng.integers(0, slots, n)
    src = (rng.standard_normal(n) * 4).astype(dt)
    want = x.astype(np.float64)
    np.add.at(want, idx, src.astype(np.float64))
    got = ug.scatter_add(ug.tensor(x, device=device), 0, idx, ug.tensor(src, device=device)).numpy()
    assert got.dtype == np.dtype(dt)
    if np.dtype(dt).kind == "i":
        np.testing.assert_array_equal(got, want.astype(dt))
    else:
        tol = {np.dtype(np.float64): 1e-9, np.dtype(np.float16): 0.5}[np.dtype(dt)]
        np.testing.assert_allclose(got.astype(np.float64), want, atol=tol * np.abs(src).sum() / slots)


def test_scatter_add_is_deterministic(device, rng):
    n, slots = 40000, 50
    x = np.zeros(slots, np.float32)
    idx = rng.integers(0, slots, n)
    src = (rng.standard_normal(n) * 1e3).astype(np.float32)
    runs = [ug.scatter_add(ug.tensor(x, device=device), 0, idx, src).numpy() for _ in range(3)]
    assert all(np.array_equal(r.view(np.int32), runs[0].view(np.int32)) for r in runs)
    # every device sums each part in the same order; only the sum of the parts' rows is the
    # device's own reduction
    ref = ug.scatter_add(ug.tensor(x, device="ref"), 0, idx, src).numpy()
    np.testing.assert_allclose(runs[0], ref, rtol=1e-5, atol=1e-6 * np.abs(src).sum())


def test_index_add(device, rng):
    x = rand((4, 6, 3))
    idx = np.array([5, 0, 5, -1, 2])
    src = rand((4, 5, 3))
    want = x.copy()
    np.add.at(want, (slice(None), np.where(idx < 0, idx + 6, idx)), src)
    got = ug.index_add(ug.tensor(x, device=device), 1, idx, ug.tensor(src, device=device))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n,high", [(0, 1), (1, 1), (1000, 20), (50000, 300)])
def test_bincount(device, n, high, rng):
    x = rng.integers(0, high, n)
    got = ug.bincount(ug.tensor(x, device=device))
    np.testing.assert_array_equal(got.numpy(), np.bincount(x))
    np.testing.assert_array_equal(ug.bincount(ug.tensor(x, device=device), minlength=high + 5).numpy(),
                                  np.bincount(x, minlength=high + 5))
    w = rng.standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(ug.bincount(ug.tensor(x, device=device), weights=w).numpy(),
                               np.bincount(x, weights=w), rtol=1e-5, atol=1e-4)


def test_bincount_errors(device):
    with pytest.raises(ValueError, match="non-negative"):
        ug.bincount(ug.tensor(np.array([1, -2, 3]), device=device))
    with pytest.raises(TypeError, match="1-d integer"):
        ug.bincount(ug.tensor(np.ones((2, 2), np.int32), device=device))


SETITEM = [
    (lambda i: (i([0, 2, 0]),), (3, 5)),                 # duplicates: the last write wins
    (lambda i: (slice(None), i([4, 1, 4])), (6, 3)),
    (lambda i: (i([[1], [3]]), i([0, 4])), (2, 2)),
    (lambda i: (Ellipsis, i([-1])), (6, 1)),
    (lambda i: (i([5, 5, 5, 5]),), (4, 5)),
]


@pytest.mark.parametrize("case", range(len(SETITEM)))
def test_integer_array_assignment(device, case, rng):
    make, vshape = SETITEM[case]
    x = rand((6, 5))
    v = rand(vshape)
    want = x.copy()
    want[make(np.asarray)] = v
    for form in (np.asarray, lambda a: ug.tensor(np.asarray(a), device=device)):
        t = ug.tensor(x, device=device)
        t[make(form)] = ug.tensor(v, device=device)
        np.testing.assert_array_equal(t.numpy(), want)
    t = ug.tensor(x, device=device)
    t[make(np.asarray)] = 3.5   # a scalar broadcasts
    want = x.copy()
    want[make(np.asarray)] = 3.5
    np.testing.assert_array_equal(t.numpy(), want)


def test_assignment_last_write_wins_across_parts(device, rng):
    # enough writes for several parts: the order is the positions', not the parts'
    n = 4 * MAX_PARTS * 10
    x = np.zeros(10, np.float32)
    idx = rng.integers(0, 10, n)
    v = np.arange(n, dtype=np.float32)
    t = ug.tensor(x, device=device)
    t[idx] = v
    want = x.copy()
    want[idx] = v
    np.testing.assert_array_equal(t.numpy(), want)


def test_scatter_fuses_its_sources(device, rng):
    x = ug.tensor(np.zeros(8, np.float32), device=device)
    idx = ug.tensor(rng.integers(0, 8, 100), device=device)
    src = ug.tensor(rand(100), device=device)
    out = ug.scatter_add(x, 0, (idx + 1) % 8, src * 2.0)
    kinds = [item.kernel.name[0] for item in ug.schedule(out).items if item.kind == "kernel"]
    assert kinds.count("x") == 1 and len(kinds) <= 2, kinds   # the scatter (sources fused) and its rows' sum
