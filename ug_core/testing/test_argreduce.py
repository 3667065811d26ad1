"""Index reductions (argmax, argmin) and count_nonzero against numpy, on every device.

numpy's meaning: the first occurrence of the largest (smallest) value wins; a NaN counts as
both the largest and the smallest, so the first NaN wins; -0.0 and 0.0 tie (the first wins);
the result is int64 (the index dtype); an empty reduction is a ValueError."""
import numpy as np
import pytest

import ug_core as ug
from ug_core.array_api.manipulation import flip, pad
from ug_core.dtypes import SUPPORTED
from ug_core.tensor_reduce import SPLIT_MIN_ELEMENTS
from ug_core.testing.data import RNG, rand

ARG = {"argmax": (ug.argmax, np.argmax), "argmin": (ug.argmin, np.argmin)}


def check(device, name: str, a: np.ndarray, **kw) -> None:
    f, ref = ARG[name]
    got = f(ug.tensor(a, device=device), **kw)
    want = ref(a, **kw)
    assert got.dtype == np.int64 and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    np.testing.assert_array_equal(got.numpy(), want)


def each_axis(ndim: int) -> list:
    return [None, *range(ndim), *range(-ndim, 0)]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape", [(1,), (7,), (1, 1), (3, 5), (4, 1, 6), (2, 3, 4, 5)])
@pytest.mark.parametrize("name", sorted(ARG))
def test_every_axis(device, name, shape, keepdims):
    a = rand(shape)
    for axis in each_axis(len(shape)):
        check(device, name, a, axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("name", sorted(ARG))
def test_zero_dim(device, name):
    check(device, name, np.array(2.5, np.float32))
    check(device, name, np.array(2.5, np.float32), axis=0)


@pytest.mark.parametrize("name", sorted(ARG))
def test_ties_first_wins(device, name):
    a = RNG.integers(0, 3, size=(6, 50)).astype(np.float32)  # many ties in every row
    for axis in each_axis(2):
        check(device, name, a, axis=axis)
    zeros = np.array([[0.0, -0.0, 0.0], [-0.0, 0.0, -0.0]], np.float32)  # -0.0 == 0.0: the first
    for axis in each_axis(2):
        check(device, name, zeros, axis=axis)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("name", sorted(ARG))
def test_nan_and_inf(device, require_dtype, name, dtype):
    require_dtype(dtype)
    a = rand((5, 9)).astype(dtype)
    a[0, 4] = a[0, 7] = np.nan   # the first NaN wins
    a[1, :] = np.nan
    a[2, 0] = np.inf
    a[2, 3] = -np.inf
    a[3, 8] = np.nan              # last position
    a[4, 2] = np.inf
    a[4, 5] = np.inf
    for axis in each_axis(2):
        check(device, name, a, axis=axis)
    check(device, name, np.array([-np.inf, -np.inf, np.inf, np.inf], dtype))


@pytest.mark.parametrize("dtype", [d.name for d in SUPPORTED])
@pytest.mark.parametrize("name", sorted(ARG))
def test_dtypes(device, require_dtype, name, dtype):
    require_dtype(dtype)
    dt = np.dtype(dtype)
    if dt.kind == "c":   # complex numbers are not ordered (the standard's argmax / argmin take real data)
        with pytest.raises(TypeError, match=f"not defined on complex.*{dt.name}"):
            ARG[name][0](ug.tensor(np.ones((2, 3), dt), device=device), axis=1)
        return
    if dt.kind == "b":
        a = RNG.integers(0, 2, size=(4, 30)).astype(bool)
        a[0] = False
        a[1] = True
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        a = RNG.integers(info.min, info.max, size=(4, 30), endpoint=True, dtype=dt)
        a[0, 3] = a[0, 9] = info.max
        a[1, 5] = a[1, 20] = info.min
    else:
        a = rand((4, 30)).astype(dt)
    for axis in each_axis(2):
        check(device, name, a, axis=axis)


@pytest.mark.parametrize("name", sorted(ARG))
def test_long_rows_split(device, name):
    """A row past SPLIT_MIN_ELEMENTS takes the two-stage (split) reductions."""
    n = SPLIT_MIN_ELEMENTS * 16 + 5
    a = rand((n,))
    a[n // 3] = a[n - 2] = 100.0
    a[n // 5] = a[n - 1] = -100.0
    check(device, name, a)
    a[n // 2] = a[n - 3] = np.nan
    check(device, name, a)
    b = rand((2, SPLIT_MIN_ELEMENTS * 2))
    for axis in (None, 1):
        check(device, name, b, axis=axis)


@pytest.mark.parametrize("name", sorted(ARG))
def test_views_as_input(device, name):
    f, ref = ARG[name]
    a = RNG.integers(0, 5, size=(6, 7)).astype(np.float32)
    x = ug.tensor(a, device=device)
    for axis in each_axis(2):
        np.testing.assert_array_equal(f(x.T, axis=axis).numpy(), ref(a.T, axis=axis))
        np.testing.assert_array_equal(f(flip(x, axis=1), axis=axis).numpy(), ref(a[:, ::-1], axis=axis))
        np.testing.assert_array_equal(f(x[1:5, ::2], axis=axis).numpy(), ref(a[1:5, ::2], axis=axis))
        padded = np.pad(a, 2)
        np.testing.assert_array_equal(f(pad(x, 2), axis=axis).numpy(), ref(padded, axis=axis))
        np.testing.assert_array_equal(f(x[2:3].broadcast_to((4, 7)), axis=axis).numpy(),
                                      ref(np.broadcast_to(a[2:3], (4, 7)), axis=axis))


@pytest.mark.parametrize("name", sorted(ARG))
def test_tensor_methods(device, name):
    a = rand((3, 8))
    x = ug.tensor(a, device=device)
    np.testing.assert_array_equal(getattr(x, name)().numpy(), getattr(a, name)())
    np.testing.assert_array_equal(getattr(x, name)(1, keepdims=True).numpy(), getattr(a, name)(1, keepdims=True))
    np.testing.assert_array_equal(getattr(x, name)(axis=0).numpy(), getattr(a, name)(axis=0))


def test_fuses_before_and_after(device):
    """argmax(x * w + b) * 2 + 1: the elementwise work before, the two reductions and the work
    after are one kernel."""
    a, w, b = rand((16, 300)), rand((300,)), rand((16, 1))
    x, tw, tb = (ug.tensor(v, device=device) for v in (a, w, b))
    out = ug.argmax(x * tw + tb, axis=1) * 2 + 1
    assert len(ug.schedule(out).kernels) == 1
    np.testing.assert_array_equal(out.numpy(), np.argmax(a * w + b, axis=1) * 2 + 1)
    low = ug.argmin(x, axis=0, keepdims=True) + ug.count_nonzero(x, axis=0, keepdims=True)
    np.testing.assert_array_equal(low.numpy(), np.argmin(a, axis=0, keepdims=True) + np.count_nonzero(a, axis=0, keepdims=True))


def test_fused_expression_hits_its_max(device):
    """The max and the index search compute x * w + b in one kernel: each row's index is in
    range and is numpy's (the two phases compute the same values)."""
    a, w, b = rand((64, 1000)), rand((1000,)), rand((64, 1))
    x, tw, tb = (ug.tensor(v, device=device) for v in (a, w, b))
    y = x * tw + tb
    got = ug.argmax(y, axis=1).numpy()
    np.testing.assert_array_equal(got, np.argmax(y.numpy(), axis=1))


def test_jit_replay(device):
    step = ug.jit(lambda x: ug.argmax(x, axis=1) + ug.argmin(x, axis=1))
    for _ in range(3):
        a = rand((5, 33))
        np.testing.assert_array_equal(step(ug.tensor(a, device=device)).numpy(),
                                      np.argmax(a, axis=1) + np.argmin(a, axis=1))


@pytest.mark.parametrize("name", sorted(ARG))
def test_errors(device, name):
    f, _ = ARG[name]
    with pytest.raises(ValueError, match="empty sequence"):
        f(ug.tensor(np.zeros((3, 0), np.float32), device=device), axis=1)
    with pytest.raises(ValueError, match="empty sequence"):
        f(ug.tensor(np.zeros((0,), np.float32), device=device))
    np.testing.assert_array_equal(f(ug.tensor(np.zeros((0, 3), np.float32), device=device), axis=1).numpy(),
                                  np.zeros(0, np.int64))  # no rows: nothing to reduce, no error (numpy)
    x = ug.tensor(np.zeros((2, 3), np.float32), device=device)
    for bad in (2, -3):
        with pytest.raises((ValueError, IndexError)):
            f(x, axis=bad)
    with pytest.raises(TypeError):
        f(x, axis=(0, 1))
    with pytest.raises(TypeError):
        f(np.zeros(3))


@pytest.mark.parametrize("dtype", [d.name for d in SUPPORTED])
def test_count_nonzero(device, require_dtype, dtype):
    require_dtype(dtype)
    dt = np.dtype(dtype)
    a = RNG.integers(0, 3, size=(4, 5, 6)).astype(dt)
    if dt.kind == "f":
        a[0, 0, :3] = (np.nan, -0.0, np.inf)   # NaN and inf count, -0.0 does not
    x = ug.tensor(a, device=device)
    for axis in (None, 0, -1, (0, 2), ()):
        for keepdims in (False, True):
            got = ug.count_nonzero(x, axis=axis, keepdims=keepdims)
            want = np.count_nonzero(a, axis=axis, keepdims=keepdims)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got.numpy(), want)
    assert ug.count_nonzero(ug.tensor(np.zeros((0, 3), dt), device=device)).numpy() == 0


def test_numpy_functions_on_tensors(device):
    """np.argmax / np.argmin / np.count_nonzero of a ug tensor run ug's (lazy ug results)."""
    a = rand((4, 6))
    x = ug.tensor(a, device=device)
    for f in (np.argmax, np.argmin):
        got = f(x, axis=1, keepdims=True)
        assert isinstance(got, ug.Tensor)
        np.testing.assert_array_equal(got.numpy(), f(a, axis=1, keepdims=True))
    got = np.count_nonzero(x > 0, axis=0)
    assert isinstance(got, ug.Tensor)
    np.testing.assert_array_equal(got.numpy(), np.count_nonzero(a > 0, axis=0))


@pytest.mark.parametrize("name", sorted(ARG))
def test_rows_either_side_of_the_cache_bound(device, name):
    # stored rows of at most ROW_IN_CACHE_BYTES along the last axis take two reductions, longer
    # (and computed) rows the packed key: ties, zeros and NaN by numpy's rules either way
    from ug_core.array_api.searching import ROW_IN_CACHE_BYTES
    n = ROW_IN_CACHE_BYTES // 4
    for length in (n, n + 1):
        a = RNG.integers(-3, 3, size=(3, length)).astype(np.float32)
        a[0, [5, 9]] = [-0.0, 0.0]
        a[1, [length - 2, length - 1]] = np.nan
        check(device, name, a, axis=1)
        f, ref = ARG[name]
        got = f(ug.tensor(a, device=device) * 2, axis=1)   # computed: the packed pass
        np.testing.assert_array_equal(got.numpy(), ref(a * 2, axis=1))
