"""Rounding, floor division and remainder, bitwise ops and shifts, signbit, copysign and
nextafter on every device, against numpy, at the edge cases: INT_MIN, -1 and 0 divisors, shift
counts outside [0, bits), NaN, infinities, -0.0, subnormals, float16's own steps; empty and 0-d
tensors. The values of every pair of edge cases are compared bit for bit (NaNs as NaNs)."""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug
from ug_core import ops
from ug_core.array_api import elementwise as ew
from ug_core.ops import Op
from ug_core.testing.test_semantics import FLOATS, INTS, assert_same, run_alu

BOOL = np.dtype(bool)


def int_edges(dt: np.dtype) -> list[int]:
    lo, hi = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
    return [0, 1, -1, 2, -2, 3, -3, 7, -7, 100, -100, lo, lo + 1, hi, hi - 1]


def float_edges(dt: np.dtype) -> list[float]:
    info = np.finfo(dt)
    tiny, big = float(info.smallest_subnormal), float(info.max)
    return [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, -3.0, 5.5, 0.1, -7.0, 1e-3, 1e4, -3e4,
            float(info.smallest_normal), tiny, -tiny, big, -big, np.inf, -np.inf, np.nan, -np.nan]


def pairs(values: list, dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every (a, b) of the values (-nan keeps its sign bit), as two flat arrays of dtype dt."""
    with np.errstate(all="ignore"):
        column = np.array(values, np.float64).astype(dt) if dt.kind == "f" else np.array(values, dt)
    a, b = np.meshgrid(column, column, indexing="ij")
    return a.reshape(-1), b.reshape(-1)


def wide_floats(dt: np.dtype, rng: np.random.Generator, n: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """Random pairs over many orders of magnitude (quotients far beyond 2**mantissa too)."""
    span = {np.dtype(np.float16): 4, np.dtype(np.float32): 30, np.dtype(np.float64): 200}[dt]
    with np.errstate(all="ignore"):
        a, b = (rng.standard_normal(n) * 10.0 ** rng.uniform(-span, span, n) for _ in range(2))
        return a.astype(dt), b.astype(dt)


def _run(device: str, fn, *arrays: np.ndarray) -> np.ndarray:
    return fn(*(ug.tensor(a, device=device) for a in arrays)).numpy()


def _numpy(fn, *arrays):
    with np.errstate(all="ignore"):
        return fn(*arrays)


# --- floor division and remainder ----------------------------------------------------------------

@pytest.mark.parametrize("dt", INTS, ids=str)
def test_int_floor_divide_and_remainder(device, require_dtype, dt):
    require_dtype(dt)
    a, b = pairs(int_edges(dt), dt)
    for ug_fn, np_fn in ((lambda x, y: x // y, np.floor_divide), (lambda x, y: x % y, np.remainder)):
        got = _run(device, ug_fn, a, b)
        assert got.dtype == dt
        assert_same(got, _numpy(np_fn, a, b), (a, b))


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_float_floor_divide_and_remainder_edges(device, require_dtype, dt):
    require_dtype(dt)
    a, b = pairs(float_edges(dt), dt)
    assert_same(_run(device, lambda x, y: x // y, a, b), _numpy(np.floor_divide, a, b), (a, b))
    assert_same(_run(device, lambda x, y: x % y, a, b), _numpy(np.remainder, a, b), (a, b))


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_float_floor_divide_and_remainder_wide(device, require_dtype, rng, dt):
    require_dtype(dt)
    a, b = wide_floats(dt, rng)
    assert_same(_run(device, ew.floor_divide, a, b), _numpy(np.floor_divide, a, b), (a, b))
    assert_same(_run(device, ew.remainder, a, b), _numpy(np.remainder, a, b), (a, b))


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_fmod_is_exact(device, require_dtype, rng, dt):
    """FMOD (C's fmod), which the frontend never builds, run as a kernel: the expansions rest on it."""
    require_dtype(dt)
    edges = pairs(float_edges(dt), dt)
    wide = wide_floats(dt, rng)
    a, b = (np.concatenate([e, w]) for e, w in zip(edges, wide))
    assert_same(run_alu(device, Op.FMOD, [a, b], dt), _numpy(np.fmod, a, b), (a, b))


def test_floor_divide_and_remainder_with_scalars(device):
    x = ug.tensor(np.array([-7, -1, 0, 5, 9], np.int32), device=device)
    a = np.array([-7, -1, 0, 5, 9], np.int32)
    for got, want in (((x // 2), a // 2), ((x % -3), a % -3), ((7 // x), _numpy(np.floor_divide, 7, a)),
                      ((7 % x), _numpy(np.remainder, 7, a)), ((x // 0), a * 0), ((x % 0), a * 0)):
        assert got.dtype == np.int32
        assert_same(got.numpy(), want.astype(np.int32))
    f = ug.tensor(np.array([-7.5, -0.0, 0.0, 5.25], np.float32), device=device)
    fa = np.array([-7.5, -0.0, 0.0, 5.25], np.float32)
    assert_same((f // 2).numpy(), fa // np.float32(2))
    assert_same((f % -2.5).numpy(), fa % np.float32(-2.5))
    assert_same((3.0 % f).numpy(), _numpy(np.remainder, np.float32(3.0), fa))


# --- rounding ------------------------------------------------------------------------------------

ROUNDING = {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": np.rint}


@pytest.mark.parametrize("name", sorted(ROUNDING))
@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_rounding(device, require_dtype, rng, name, dt):
    require_dtype(dt)
    halves = np.arange(-6, 6.5, 0.5)
    with np.errstate(all="ignore"):
        x = np.concatenate([float_edges(dt), halves, halves + 0.25, rng.uniform(-1e6, 1e6, 200),
                            [2.0 ** 52 + 0.5, 2.0 ** 23 + 0.5, 2.0 ** 10 + 0.5, 4503599627370497.0]]).astype(dt)
    got = _run(device, getattr(ew, name), x)
    assert got.dtype == dt
    assert_same(got, ROUNDING[name](x), (x,))


@pytest.mark.parametrize("name", sorted(ROUNDING))
@pytest.mark.parametrize("dt", INTS, ids=str)
def test_rounding_of_integers_is_the_identity(device, require_dtype, name, dt):
    require_dtype(dt)
    x = np.array(int_edges(dt), dt)
    got = _run(device, getattr(ew, name), x)
    assert got.dtype == dt
    assert_same(got, x)


# --- bitwise ops and shifts ----------------------------------------------------------------------

BITWISE = {"&": (lambda x, y: x & y, np.bitwise_and), "|": (lambda x, y: x | y, np.bitwise_or),
           "^": (lambda x, y: x ^ y, np.bitwise_xor)}


@pytest.mark.parametrize("symbol", sorted(BITWISE))
@pytest.mark.parametrize("dt", INTS + [BOOL], ids=str)
def test_bitwise(device, require_dtype, symbol, dt):
    require_dtype(dt)
    a, b = pairs([True, False] if dt == BOOL else int_edges(dt), dt)
    ug_fn, np_fn = BITWISE[symbol]
    got = _run(device, ug_fn, a, b)
    assert got.dtype == dt
    assert_same(got, np_fn(a, b), (a, b))


@pytest.mark.parametrize("dt", INTS + [BOOL], ids=str)
def test_invert(device, require_dtype, dt):
    require_dtype(dt)
    x = np.array([True, False] if dt == BOOL else int_edges(dt), dt)
    got = _run(device, lambda t: ~t, x)
    assert got.dtype == dt
    assert_same(got, np.invert(x))


@pytest.mark.parametrize("dt", INTS, ids=str)
def test_shifts(device, require_dtype, dt):
    require_dtype(dt)
    bits = 8 * dt.itemsize
    counts = [0, 1, 2, 5, bits - 2, bits - 1, bits, bits + 1, 2 * bits, 100, -1, -2, -bits, -bits - 1,
              int(np.iinfo(dt).min), int(np.iinfo(dt).max)]
    values = np.repeat(np.array(int_edges(dt), dt), len(counts))
    n = np.tile(np.array(counts, dt), len(int_edges(dt)))
    got_left, got_right = _run(device, lambda x, y: x << y, values, n), _run(device, lambda x, y: x >> y, values, n)
    assert got_left.dtype == got_right.dtype == dt
    assert_same(got_left, np.left_shift(values, n), (values, n))
    assert_same(got_right, np.right_shift(values, n), (values, n))


def test_shifts_and_bitwise_with_scalars(device):
    a = np.array([-5, -1, 0, 3, 2**30], np.int32)
    x = ug.tensor(a, device=device)
    for got, want in ((x << 3, a << 3), (x >> 1, a >> 1), (x << 40, a * 0), (x >> 40, np.where(a < 0, -1, 0)),
                      (1 << (x & 31), np.left_shift(np.int32(1), a & 31)), (-64 >> (x & 7), np.right_shift(-64, a & 7)),
                      (x & 6, a & 6), (6 | x, 6 | a), (x ^ -1, ~a)):
        assert got.dtype == np.int32
        assert_same(got.numpy(), want.astype(np.int32))
    b = ug.tensor(np.array([True, False]), device=device)
    assert_same((b & True).numpy(), np.array([True, False]))
    assert_same((False | b).numpy(), np.array([True, False]))
    assert_same((b ^ True).numpy(), np.array([False, True]))
    assert (b & 1).dtype == np.int64   # numpy: a Python int with bools is the default int


# --- signbit, copysign, nextafter ----------------------------------------------------------------

@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_signbit(device, require_dtype, dt):
    require_dtype(dt)
    with np.errstate(all="ignore"):
        x = np.array(float_edges(dt), np.float64).astype(dt)
    got = _run(device, ew.signbit, x)
    assert got.dtype == BOOL
    assert_same(got, np.signbit(x), (x,))
    assert got[1] and got[-1] and not got[0] and not got[-2]   # -0.0 and -nan: set


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_copysign(device, require_dtype, dt):
    require_dtype(dt)
    a, b = pairs(float_edges(dt), dt)
    got = _run(device, ew.copysign, a, b)
    want = np.copysign(a, b)
    assert_same(got, want, (a, b))
    assert_same(np.signbit(got), np.signbit(want), (a, b))   # NaNs' signs too


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_nextafter(device, require_dtype, rng, dt):
    require_dtype(dt)
    info = np.finfo(dt)
    edges = float_edges(dt) + [float(info.smallest_normal) * (1 - float(info.eps) / 2), 2.0, 4.0, 1024.0, 0.25]
    a, b = pairs(edges, dt)
    wide, toward = wide_floats(dt, rng)
    a, b = np.concatenate([a, wide]), np.concatenate([b, toward])
    got = _run(device, ew.nextafter, a, b)
    assert got.dtype == dt
    # numpy's, with y where x == y for float16 too (numpy >= 2.5; before, its float16 loop kept x)
    assert_same(got, _numpy(ops.nextafter, a, b), (a, b))


# --- shapes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (1,)], ids=str)
def test_empty_and_0d(device, shape):
    i = np.full(shape, 7, np.int32)
    f = np.full(shape, -2.5, np.float32)
    x, y = ug.tensor(i, device=device), ug.tensor(f, device=device)
    for got, want in ((x // 2, i // 2), (x % 3, i % 3), (x << 2, i << 2), (~x, ~i), (x & 5, i & 5),
                      (ew.floor(y), np.floor(f)), (ew.round(y), np.rint(f)), (y // 2, f // 2), (y % 2, f % 2),
                      (ew.signbit(y), np.signbit(f)), (ew.nextafter(y, 0.0), np.nextafter(f, np.float32(0)))):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert_same(got.numpy(), want)


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32], ids=lambda d: np.dtype(d).name)
def test_widened_to_int64_compares_signed(device, require_dtype, dt):
    # lavapipe compared a sign-extended int64 (OpSConvert) as if zero-extended: -1 < 0 was false
    require_dtype(np.dtype(dt))
    a = np.array([-1, 2, -3, 0, np.iinfo(dt).min, np.iinfo(dt).max], dt)
    wide = ug.tensor(a, device=device).astype(ug.int64)
    w = a.astype(np.int64)
    for got, want in ((wide < 0, w < 0), (wide < 1, w < 1), (wide <= -1, w <= -1), (wide > -2, w > -2),
                      (ug.maximum(wide, 0), np.maximum(w, 0)), (wide, w)):
        assert_same(got.numpy(), want, (a,))
