"""Indexed stores (ops.Op.SCATTER): scatter_add, index_add, bincount and integer-array
assignment against numpy, on every device; duplicates (all add; the last write wins) and
determinism (the same bits on every run)."""
import numpy as np
import pytest

import ug_core as ug
from ug_core.array_api.scatter import MAX_PARTS, parts_for
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


# --- scatter and scatter_reduce (torch's) ------------------------------------------------------


def _targets(idx, axis):
    """(position q of idx, the slot it lands in) in C order."""
    for q in np.ndindex(idx.shape):
        target = list(q)
        target[axis] = idx[q]
        yield q, tuple(target)


def scatter_loop(x, axis, idx, src):
    """numpy's `x[...] = v` order: the last position writing a slot wins."""
    out = x.copy()
    for q, t in _targets(idx, axis):
        out[t] = src[q]
    return out


def scatter_reduce_loop(x, axis, idx, src, reduce, include_self):
    """torch's scatter_reduce, one value at a time (float64 sums, integer means rounded down)."""
    groups = {}
    for q, t in _targets(idx, axis):
        groups.setdefault(t, []).append(src[q])
    out = x.copy()
    for t, vals in groups.items():
        vals = ([x[t]] if include_self else []) + vals
        if reduce == "sum":
            v = np.sum(np.array(vals, np.float64))
        elif reduce == "prod":
            v = np.prod(np.array(vals, np.float64))
        elif reduce == "mean":
            v = np.sum(np.array(vals, np.float64)) / len(vals)
            v = np.floor(v) if x.dtype.kind in "iu" else v
        else:
            v = (np.max if reduce == "amax" else np.min)(vals)
        out[t] = v
    return out


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_last_write_wins(device, axis, rng):
    x = rand((4, 5, 6))
    idx = rng.integers(0, 3, (3, 4, 5))
    src = rand((5, 6, 7))   # larger than the index: its leading (3, 4, 5) block is read (torch's rule)
    want = scatter_loop(x, axis % 3, idx, src)
    got = ug.scatter(ug.tensor(x, device=device), axis, ug.tensor(idx, device=device), ug.tensor(src, device=device))
    np.testing.assert_array_equal(got.numpy(), want)
    got = ug.scatter(ug.tensor(x, device=device), axis, idx, 2.5)   # a scalar, host indices
    np.testing.assert_array_equal(got.numpy(), scatter_loop(x, axis % 3, idx, np.full(idx.shape, 2.5, np.float32)))


def test_scatter_duplicates_across_parts(device, rng):
    n = 4 * MAX_PARTS * 10   # several parts: the order is the positions', not the parts'
    idx = rng.integers(0, 10, n)
    v = np.arange(n, dtype=np.float32)
    got = ug.scatter(ug.tensor(np.zeros(10, np.float32), device=device), 0, idx, ug.tensor(v, device=device))
    want = np.zeros(10, np.float32)
    want[idx] = v
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False], ids=["self", "noself"])
def test_scatter_reduce_matches_a_loop(device, reduce, include_self, rng):
    for axis in (0, -1):
        x = rand((4, 5, 6))
        idx = rng.integers(0, 3, (3, 4, 5))
        src = rand((3, 4, 5))
        src[0, 0, 0] = 0.0
        want = scatter_reduce_loop(x, axis % 3, idx, src, reduce, include_self)
        got = ug.scatter_reduce(ug.tensor(x, device=device), axis, ug.tensor(idx, device=device),
                                ug.tensor(src, device=device), reduce, include_self=include_self)
        assert got.dtype == np.float32 and got.shape == x.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_integers_and_many_duplicates(device, reduce, rng):
    n, slots = 5000, 7   # several parts, many values per slot
    assert parts_for(n, slots) > 1
    x = rng.integers(-50, 50, slots).astype(np.int32)
    idx = rng.integers(0, slots, n)
    src = rng.integers(-3, 4, n).astype(np.int32) if reduce != "prod" else rng.choice([-1, 1, 1, 1], n).astype(np.int32)
    for include_self in (True, False):
        want = scatter_reduce_loop(x, 0, idx, src, reduce, include_self)
        got = ug.scatter_reduce(ug.tensor(x, device=device), 0, idx, ug.tensor(src, device=device), reduce,
                                include_self=include_self)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got.numpy(), want)


def test_scatter_reduce_leaves_untouched_slots(device, rng):
    x = rand((6,))
    idx = np.array([1, 1, 4])
    src = rand((3,))
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        got = ug.scatter_reduce(ug.tensor(x, device=device), 0, idx, ug.tensor(src, device=device), reduce,
                                include_self=False).numpy()
        np.testing.assert_array_equal(got[[0, 2, 3, 5]], x[[0, 2, 3, 5]])
    # torch's scatter with reduce: 'add' and 'multiply' (include_self)
    got = ug.scatter(ug.tensor(x, device=device), 0, idx, 3.0, reduce="multiply").numpy()
    want = x.copy()
    want[1] *= 9.0
    want[4] *= 3.0
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False], ids=["self", "noself"])
def test_scatter_reduce_gradient_finite_differences(device, require_dtype, reduce, include_self, rng):
    require_dtype(np.float64)
    from ug_core.testing.test_autodiff import check_grad, distinct
    idx = rng.integers(0, 3, (3, 4))
    x, src = np.split(distinct(rng, (2 * 4 * 3,)), 2)   # no ties for amax / amin
    fn = lambda x, s: ug.scatter_reduce(x, 1, ug.tensor(idx, device=device), s, reduce, include_self=include_self)  # noqa: E731
    check_grad(device, rng, fn, x.reshape(4, 3) / 4 + 1, src.reshape(3, 4) / 4 + 1)


def test_scatter_reduce_gradient_ties_and_zeros(device, require_dtype, rng):
    """amax's ties split g equally between every equal value, x's element included (torch's
    rule); prod's gradient with one zero in a slot is the product of the others, with two 0."""
    require_dtype(np.float64)
    x = np.array([2.0, 5.0, 1.0])
    idx = np.array([0, 0, 1, 2, 2])
    src = np.array([2.0, 2.0, 3.0, 0.0, 4.0])
    g = np.array([3.0, 5.0, 7.0])
    gx, gs = ug.vjp(lambda x, s: ug.scatter_reduce(x, 0, idx, s, "amax"), ug.tensor(x, device=device),
                    ug.tensor(src, device=device))[1](ug.tensor(g, device=device))
    np.testing.assert_array_equal(gx.numpy(), [1.0, 5.0, 0.0])       # 3 / 3 each to x[0] and its ties; x[1] wins
    np.testing.assert_array_equal(gs.numpy(), [1.0, 1.0, 0.0, 0.0, 7.0])
    gx, gs = ug.vjp(lambda x, s: ug.scatter_reduce(x, 0, idx, s, "prod"), ug.tensor(x, device=device),
                    ug.tensor(src, device=device))[1](ug.tensor(g, device=device))
    np.testing.assert_array_equal(gx.numpy(), [3.0 * 4.0, 5.0 * 3.0, 0.0])
    np.testing.assert_array_equal(gs.numpy(), [3.0 * 4.0, 3.0 * 4.0, 5.0 * 5.0, 7.0 * 4.0, 0.0])
    src[4] = 0.0   # two zeros in slot 2: every gradient there is 0
    gs = ug.vjp(lambda s: ug.scatter_reduce(ug.tensor(x, device=device), 0, idx, s, "prod"),
                ug.tensor(src, device=device))[1](ug.tensor(g, device=device))[0]
    np.testing.assert_array_equal(gs.numpy()[3:], [0.0, 0.0])


def test_scatter_gradient_goes_to_the_value_written(device, require_dtype, rng):
    require_dtype(np.float64)
    x = np.arange(4.0)
    src = np.array([10.0, 20.0, 30.0])
    gx, gs = ug.vjp(lambda x, s: ug.scatter(x, 0, np.array([1, 1, 3]), s), ug.tensor(x, device=device),
                    ug.tensor(src, device=device))[1](ug.tensor(np.array([1.0, 2.0, 3.0, 4.0]), device=device))
    np.testing.assert_array_equal(gx.numpy(), [1.0, 0.0, 3.0, 0.0])
    np.testing.assert_array_equal(gs.numpy(), [0.0, 2.0, 4.0])


def test_scatter_reduce_errors(device):
    x = ug.tensor(np.zeros((3, 4), np.float32), device=device)
    with pytest.raises(ValueError, match="reduce must be one of"):
        ug.scatter_reduce(x, 0, np.zeros((1, 4), np.int64), x, "max")
    with pytest.raises(ValueError, match="reduce must be None, 'add' or 'multiply'"):
        ug.scatter(x, 0, np.zeros((1, 4), np.int64), 1.0, reduce="sum")
    with pytest.raises(ValueError, match="larger than src"):
        ug.scatter(x, 0, np.zeros((2, 4), np.int64), ug.tensor(np.zeros((1, 4), np.float32), device=device))
    with pytest.raises(ValueError, match="larger than x"):
        ug.scatter(x, 0, np.zeros((2, 5), np.int64), 1.0)
    with pytest.raises(IndexError, match="out of bounds"):
        ug.scatter_reduce(x, 1, np.full((3, 4), 4), x, "sum")
    with pytest.raises(TypeError, match="bool"):
        ug.scatter_reduce(ug.tensor(np.zeros(3, bool), device=device), 0, [0], ug.tensor(np.ones(1, bool), device=device), "mean")
