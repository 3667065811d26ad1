"""Scans: cumulative_sum and cumulative_prod (ops.SCANS) against numpy, on every device.

Float results are compared with the exact (float64) running sums and products: a device adds in
its own order (sequentially, or blocked for a long axis over few rows), so the error allowed
grows like sqrt(n) * eps * max |prefix| (ops.SCANS); ints are exact (wrapping)."""
import math
from typing import Any, Callable

import numpy as np
import pytest

import ug_core as ug
from ug_core.array_api.manipulation import flip, pad
from ug_core.array_api.statistical import cumulative_prod, cumulative_sum
from ug_core.dtypes import SUPPORTED
from ug_core.array_api.scans import SPLIT_MIN_LENGTH
from ug_core.testing.data import RNG, rand

SCANS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "sum": (cumulative_sum, np.cumulative_sum), "prod": (cumulative_prod, np.cumulative_prod)}
SIZES = [0, 1, 7, 1000, 100000]
# (shape with n along the scanned axis, axis): first, middle and last axes of 1-3 d tensors
LAYOUTS = {
    "1d": (lambda n: (n,), 0),
    "2d-first": (lambda n: (n, 3), 0),
    "2d-last": (lambda n: (2, n), 1),
    "3d-first": (lambda n: (n, 2, 3), 0),
    "3d-middle": (lambda n: (2, n, 3), 1),
    "3d-last": (lambda n: (3, 2, n), -1),
}


def values(name: str, shape: tuple[int, ...], dtype=np.float32) -> np.ndarray:
    """Data whose running sums and products stay finite and well conditioned: sums of standard
    normal values, products of factors near 1 (each 1 +- 2^-10, so 100,000 of them stay near 1)."""
    if name == "sum":
        return rand(shape, dtype)
    return (1 + RNG.uniform(-1, 1, shape) / 1024).astype(dtype)


def assert_scan_close(got, exact: np.ndarray, axis: int, dtype) -> None:
    """`got` (a tensor) is `exact` (float64 running values) rounded to `dtype`, within the error
    of adding n values in some order: 4 sqrt(n) eps max |prefix| (and a few ulp of each value)."""
    dtype = np.dtype(dtype)
    assert got.shape == exact.shape and got.dtype == dtype, (got.shape, got.dtype, exact.shape, dtype)
    arr = got.numpy()
    eps = np.finfo(dtype).eps
    n = max(exact.shape[axis], 1)
    bound = np.max(np.abs(exact), axis=axis, keepdims=True) if exact.size else 0.0
    tol = 4 * math.sqrt(n) * eps * bound + 4 * eps * np.abs(exact)
    bad = ~(np.abs(arr.astype(np.complex128 if dtype.kind == "c" else np.float64) - exact) <= tol)
    assert not bad.any(), f"{int(bad.sum())} of {bad.size} off: got {arr[bad][:5]}, exact {exact[bad][:5]}"


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name", sorted(SCANS))
def test_scan_along_each_axis(device, name, layout, n):
    shape_of, axis = LAYOUTS[layout]
    a = values(name, shape_of(n))
    f, ref = SCANS[name]
    exact = ref(a.astype(np.float64), axis=axis)
    assert_scan_close(f(ug.tensor(a, device=device), axis=axis), exact, axis, np.float32)


@pytest.mark.parametrize("dtype", [d.name for d in SUPPORTED])
@pytest.mark.parametrize("name", sorted(SCANS))
def test_scan_dtypes(device, close, require_dtype, name, dtype):
    """The default accumulation dtype is numpy's (the default int for ints and bools), and so
    is every value; ints wrap."""
    f, ref = SCANS[name]
    expected_dtype = ref(np.zeros(1, dtype)).dtype
    require_dtype(dtype, expected_dtype)
    if np.dtype(dtype).kind == "c":   # complex running sums and products
        a = (values(name, (3, 40)) + 1j * values(name, (3, 40)) / 4).astype(dtype)
        got = f(ug.tensor(a, device=device), axis=1)
        assert_scan_close(got, ref(a.astype(np.complex128), axis=1), 1, expected_dtype)
        return
    if np.dtype(dtype).kind == "f":
        a = values(name, (3, 40), dtype)
        got = f(ug.tensor(a, device=device), axis=1)
        assert_scan_close(got, ref(a.astype(np.float64), axis=1), 1, expected_dtype)
        return
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    lo, hi = (0, 2) if info is None else (max(info.min, -100), min(info.max, 100))
    a = RNG.integers(lo, hi, size=(3, 40), endpoint=True).astype(dtype)
    close(f(ug.tensor(a, device=device), axis=1), ref(a, axis=1))


@pytest.mark.parametrize("name", sorted(SCANS))
def test_scan_int_wraps(device, close, require_dtype, name):
    require_dtype(np.int32, np.int64)
    a = RNG.integers(-2**31, 2**31, size=(4, 1000)).astype(np.int32) | 1  # odd: the products never reach 0
    x = ug.tensor(a, device=device)
    f, ref = SCANS[name]
    close(f(x, axis=1, dtype=np.int32), ref(a, axis=1, dtype=np.int32))
    close(f(x, axis=0), ref(a, axis=0))  # in int64
    long = RNG.integers(-2**31, 2**31, size=SPLIT_MIN_LENGTH + 3).astype(np.int32) | 1
    close(f(ug.tensor(long, device=device), dtype=np.int32), ref(long, dtype=np.int32))  # blocked: still exact


@pytest.mark.parametrize("name", sorted(SCANS))
def test_scan_dtype_argument(device, close, require_dtype, name):
    require_dtype(np.float64, np.int64)
    f, ref = SCANS[name]
    a = values(name, (5, 9))
    got = f(ug.tensor(a, device=device), axis=0, dtype=np.float64)
    assert_scan_close(got, ref(a.astype(np.float64), axis=0), 0, np.float64)
    b = RNG.integers(0, 2, size=(5, 9)).astype(bool)
    close(f(ug.tensor(b, device=device), axis=1, dtype=bool), ref(b, axis=1, dtype=bool))  # or / and
    i = RNG.integers(-50, 50, size=(5, 9)).astype(np.int64)
    close(f(ug.tensor(i, device=device), axis=1, dtype=np.float32), ref(i, axis=1, dtype=np.float32), rtol=1e-6)


def test_float16_accumulates_in_float32(device, require_dtype):
    """numpy rounds its running float16 sum at every step (5000 x 0.1 stops at 256); ug rounds
    each output once (ops.SCANS)."""
    require_dtype(np.float16)
    a = np.full(5000, 0.1, np.float16)
    got = cumulative_sum(ug.tensor(a, device=device))
    assert_scan_close(got, np.cumsum(a.astype(np.float64)), 0, np.float16)
    assert abs(float(got.numpy()[-1]) - 500) < 1


@pytest.mark.parametrize("n", [0, 1, 5, SPLIT_MIN_LENGTH + 7])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("name", sorted(SCANS))
def test_include_initial(device, name, axis, n):
    f, ref = SCANS[name]
    shape = (n, 2) if axis == 0 else (2, n)
    a = values(name, shape)
    got = f(ug.tensor(a, device=device), axis=axis, include_initial=True)
    assert_scan_close(got, ref(a.astype(np.float64), axis=axis, include_initial=True), axis, np.float32)
    first = np.take(got.numpy(), 0, axis=axis)
    assert (first == (0 if name == "sum" else 1)).all()


VIEWS = {
    "transposed": lambda t: t.permute(1, 0),
    "sliced": lambda t: t[1:, ::2],
    "negative-step": lambda t: t[::-1, ::-3],
    "broadcast": lambda t: t[0:1].broadcast_to((6, 10)),
    "flipped": lambda t: flip(t, axis=1),
    "padded": lambda t: pad(t, ((1, 2), (3, 0))),
}


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("name", sorted(SCANS))
def test_scan_of_views(device, name, view):
    a = values(name, (6, 10))
    host = VIEWS[view](ug.tensor(a, device="ref")).numpy()  # the view's values, by the oracle
    f, ref = SCANS[name]
    x = VIEWS[view](ug.tensor(a, device=device))
    for axis in (0, 1):
        assert_scan_close(f(x, axis=axis), ref(host.astype(np.float64), axis=axis), axis, np.float32)


def test_long_scan_of_a_view(device):
    """A long 1-d scan (blocked) of a strided, reversed view, and of one that needs padding."""
    a = rand(3 * SPLIT_MIN_LENGTH + 10)
    for view in (a[::-2], a[5:-3]):
        got = cumulative_sum(ug.tensor(a, device=device)[::-2] if view.strides[0] < 0 else
                                ug.tensor(a, device=device)[5:-3])
        assert_scan_close(got, np.cumsum(view.astype(np.float64)), 0, np.float32)


@pytest.mark.parametrize("name", sorted(SCANS))
def test_scan_down_the_columns_of_a_wide_matrix(device, name):
    """Many rows side by side (the cpu runs blocks of them at once, one running value each)."""
    a = values(name, (37, 4100))
    f, ref = SCANS[name]
    assert_scan_close(f(ug.tensor(a, device=device), axis=0), ref(a.astype(np.float64), axis=0), 0, np.float32)


def test_scan_edge_values(device):
    """-0.0 first stays -0.0 (the running sum starts from -0.0); NaN and inf propagate."""
    a = np.array([-0.0, -0.0, 1.0, np.inf, -np.inf, 2.0], np.float32)
    got = cumulative_sum(ug.tensor(a, device=device)).numpy()
    with np.errstate(invalid="ignore"):  # inf - inf
        expected = np.cumsum(a)
    np.testing.assert_array_equal(got, expected)
    assert np.signbit(got[:2]).all()
    p = np.array([2.0, np.nan, 3.0], np.float32)
    np.testing.assert_array_equal(cumulative_prod(ug.tensor(p, device=device)).numpy(), np.cumprod(p))
    z = np.array([3.0, 0.0, np.inf], np.float32)  # 0 * inf is NaN
    with np.errstate(invalid="ignore"):
        expected = np.cumprod(z)
    np.testing.assert_array_equal(cumulative_prod(ug.tensor(z, device=device)).numpy(), expected)


def test_scan_of_0d_is_one_element(device, close):
    close(cumulative_sum(ug.tensor(np.float32(2.5), device=device)), np.cumulative_sum(np.float32(2.5)))


def _kernels(*tensors) -> int:
    return len(ug.schedule(*tensors).kernels)


def test_producers_fuse_and_consumers_load(device, close):
    a = rand((4, 33))
    x = ug.tensor(a, device=device)
    squares = cumulative_sum(x * x, axis=1)
    assert _kernels(squares) == 1  # the producer is the scan's input
    assert_scan_close(squares, np.cumsum(a.astype(np.float64) ** 2, axis=1), 1, np.float32)
    y = cumulative_sum(x * 2, axis=1) + 1
    assert _kernels(y) == 2  # the scan, then the elementwise consumer loading it
    assert_scan_close(y - 1, np.cumsum(a.astype(np.float64) * 2, axis=1), 1, np.float32)
    s = cumulative_prod(x, axis=0)
    both = (s + 1, s * s)
    assert _kernels(*both) == 2  # the scan once, then one kernel computing both consumers
    ug.realize(*both)
    close(both[0], np.cumprod(a, axis=0) + 1, rtol=1e-5)


def test_scan_fuses_a_row_reduction(device):
    """A reduction over the scanned axis (same rows) is computed in the scan's kernel first."""
    a = rand((5, 50))
    x = ug.tensor(a, device=device)
    shifted = cumulative_sum(x - x.max(axis=1, keepdims=True), axis=1)
    assert _kernels(shifted) == 1
    exact = np.cumsum(a.astype(np.float64) - a.max(axis=1, keepdims=True), axis=1)
    assert_scan_close(shifted, exact, 1, np.float32)


def test_long_scan_is_blocked_into_parallel_kernels(device):
    """Block sums, their prefix, then the blocks' scans, written straight into the result."""
    n = 2 * SPLIT_MIN_LENGTH
    a = rand(n)
    got = cumulative_sum(ug.tensor(a, device=device))
    assert _kernels(got) == 3
    assert_scan_close(got, np.cumsum(a.astype(np.float64)), 0, np.float32)


def test_scan_written_into_its_input(device, close):
    """x[...] = scan of x (reversed too): every value is read before the write."""
    a = values("sum", (4, 6))
    x = ug.tensor(a.copy(), device=device)
    ug.realize(x)
    x[:, ::-1] = cumulative_sum(x[:, ::-1], axis=1)
    x[1:3] = cumulative_prod(x[1:3], axis=0)
    expected = np.cumsum(a[:, ::-1].astype(np.float64), axis=1)[:, ::-1]
    expected[1:3] = np.cumprod(expected[1:3], axis=0)
    close(x, expected.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_scan_under_jit(device):
    @ug.jit
    def f(x):
        return cumulative_sum(x * 2, axis=0) + cumulative_prod(x, axis=1, include_initial=True)[:, 1:]

    for _ in range(3):
        a = values("prod", (7, 11))
        exact = np.cumsum(2 * a.astype(np.float64), axis=0) + np.cumprod(a.astype(np.float64), axis=1)
        assert_scan_close(f(ug.tensor(a, device=device)), exact, 0, np.float32)


@pytest.mark.parametrize("name", sorted(SCANS))
def test_scan_errors(device, name):
    f, _ = SCANS[name]
    x = ug.tensor(rand((2, 3)), device=device)
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        f(x)  # axis None on a 2-d tensor
    for axis in (2, -3):
        with pytest.raises(IndexError):  # numpy's AxisError: an IndexError and a ValueError
            f(x, axis=axis)
        with pytest.raises(ValueError):
            f(x, axis=axis)
    with pytest.raises(TypeError):
        f(x, axis=1.0)
    with pytest.raises(TypeError):
        f(np.zeros(3), axis=0)
    with pytest.raises(TypeError):
        f(x, axis=0, dtype="not a dtype")


def test_long_scan_over_many_rows(device):
    # rows longer than a device's loop limit (lavapipe ends a loop after 65535 trips, silently)
    # are blocked even when there are many of them
    x = np.ones((17, 70000), np.float32)
    got = ug.cumulative_sum(ug.tensor(x, device=device), axis=1).numpy()
    np.testing.assert_array_equal(got[:, -1], np.full(17, 70000, np.float32))
    np.testing.assert_allclose(got, np.cumsum(x, axis=1))
