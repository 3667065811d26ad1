"""Dtype coverage: creation, astype, numpy promotion rules, scalar promotion,
per-dtype arithmetic and the device dtype-capability contract."""
import itertools

import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.data import RNG
from ug_core.testing.oracles import softmax

ALL = [np.float32, np.float64, np.float16, np.int32, np.int64, np.bool_]
NUMERIC = [np.float32, np.float64, np.float16, np.int32, np.int64]
name = lambda d: np.dtype(d).name  # noqa: E731
# a bool, an int32 and a float32 operand of one shape, for the promotion tests
MIXED = (np.array([True, False, True]), np.array([1, 2, 3], np.int32), np.array([0.5, 1.5, 2.5], np.float32))


def sample(dt, shape=(3, 4)):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return RNG.random(shape) > 0.5
    if dt.kind == "i":
        return RNG.integers(-20, 20, size=shape).astype(dt)
    return RNG.uniform(-4, 4, size=shape).astype(dt)


def test_capability_contract(device):
    """Every listed dtype is either supported with the right dtype, or rejected with TypeError."""
    supported = []
    for dt in ALL:
        a = sample(dt)
        try:
            x = ug.tensor(a, device=device)
        except TypeError:
            continue
        supported.append(dt)
        assert x.dtype == dt
        np.testing.assert_array_equal(x.numpy(), a)
    assert np.float32 in supported, "float32 must be supported everywhere"


@pytest.mark.parametrize("dt", ALL, ids=name)
def test_roundtrip(device, close, require_dtype, dt):
    require_dtype(dt)
    a = sample(dt)
    x = ug.tensor(a, device=device)
    assert x.dtype == dt
    close(x, a)
    close(x[1:, ::2].T, a[1:, ::2].T)
    close(x.reshape(-1), a.reshape(-1))


@pytest.mark.parametrize("dt", ALL, ids=name)
def test_creation_with_dtype(device, close, require_dtype, dt):
    require_dtype(dt)
    close(ug.zeros((2, 3), dtype=dt, device=device), np.zeros((2, 3), dt))
    close(ug.ones((2, 3), dtype=dt, device=device), np.ones((2, 3), dt))
    val = True if dt == np.bool_ else 3
    close(ug.full((4,), val, dt, device=device), np.full((4,), val, dt))
    if dt != np.bool_:
        close(ug.arange(6, dt, device=device), np.arange(6, dtype=dt))
    close(ug.tensor([1, 0, 2], dtype=dt, device=device), np.array([1, 0, 2], dt))


ASTYPE_SRC = {
    "float": np.array([-2.75, -1.0, -0.5, 0.0, 0.5, 1.0, 3.25, 7.0]),
    "int": np.array([-3, -1, 0, 1, 2, 7, 100, -100]),
    "bool": np.array([True, False, True, True, False, False, True, False]),
}


@pytest.mark.parametrize("src,dst", list(itertools.product(ALL, ALL)), ids=lambda d: name(d))
def test_astype(device, close, require_dtype, src, dst):
    require_dtype(src, dst)
    kind = {"f": "float", "i": "int", "b": "bool"}[np.dtype(src).kind]
    a = ASTYPE_SRC[kind].astype(src)
    x = ug.tensor(a, device=device)
    got = x.astype(dst)
    assert got.dtype == dst
    close(got, a.astype(dst), rtol=0, atol=0)
    # astype of a computed value and of a view
    close((x[::2]).astype(dst), a[::2].astype(dst), rtol=0, atol=0)


def test_astype_float_to_int_truncates(device, close):
    a = np.array([-2.9, -2.1, -0.9, 0.9, 2.1, 2.9], np.float32)
    close(ug.tensor(a, device=device).astype(np.int32), a.astype(np.int32))


def test_astype_in_expression(device, close):
    a = sample(np.float32, (5,))
    x = ug.tensor(a, device=device)
    close((x * 10).astype(np.int32) + 1, (a * np.float32(10)).astype(np.int32) + 1)
    close((x > 0).astype(np.float32) * 2, (a > 0).astype(np.float32) * 2)


PAIRS = [(a, b) for a, b in itertools.product(ALL, ALL) if not (a == np.bool_ and b == np.bool_)]


@pytest.mark.parametrize("da,db", PAIRS, ids=lambda d: name(d))
def test_promotion_add_mul(device, close, require_dtype, da, db):
    expected_dt = np.result_type(da, db)
    require_dtype(da, db, expected_dt)
    a, b = sample(da, (3, 1)), sample(db, (1, 4))
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    tol = dict(rtol=5e-3, atol=5e-3) if expected_dt == np.float16 else dict(rtol=1e-6, atol=1e-6)
    close(x + y, np.add(a, b), **tol)
    close(x * y, np.multiply(a, b), **tol)
    close(ug.maximum(x, y), np.maximum(a, b), **tol)
    cmp = x < y
    assert cmp.dtype == np.bool_
    close(cmp, a < b)


@pytest.mark.parametrize("da,db", [(a, b) for a, b in itertools.product(NUMERIC, NUMERIC)], ids=lambda d: name(d))
def test_promotion_sub_div(device, close, require_dtype, da, db):
    a, b = sample(da, (4,)), sample(db, (4,))
    b = np.where(b == 0, 1, b).astype(db)
    require_dtype(da, db, np.result_type(da, db), np.divide(a, b).dtype)
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    low = np.float16 in (np.result_type(da, db), np.divide(a, b).dtype)
    tol = dict(rtol=5e-3, atol=5e-3) if low else dict(rtol=1e-6, atol=1e-6)
    close(x - y, np.subtract(a, b), **tol)
    close(x / y, np.divide(a, b), **tol)


def test_int_true_division_follows_numpy(device, close, require_dtype):
    require_dtype(np.float64)
    a = np.array([7, -7, 3, 0], np.int32)
    b = np.array([2, 2, -4, 5], np.int32)
    got = ug.tensor(a, device=device) / ug.tensor(b, device=device)
    close(got, a / b)  # float64 per numpy


def test_where_promotion(device, close, require_dtype):
    require_dtype(np.int32, np.float64)
    c, a, b = MIXED
    ct, at, bt = (ug.tensor(v, device=device) for v in MIXED)
    close(ug.where(ct, at, at * 2), np.where(c, a, a * 2))
    close(ug.where(ct, at, bt), np.where(c, a, b))
    close(ug.where(ct, bt, bt.astype(np.float64)), np.where(c, b, b.astype(np.float64)))


# ---------------------------------------------------------------- scalar promotion (contract)
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16], ids=name)
def test_scalar_keeps_float_dtype(device, close, require_dtype, dt):
    require_dtype(dt)
    a = sample(dt, (5,))
    x = ug.tensor(a, device=device)
    tol = dict(rtol=5e-3, atol=5e-3) if dt == np.float16 else {}
    for got, exp in [(x + 2.5, a + dt(2.5)), (2.5 * x, dt(2.5) * a), (x - 3, a - dt(3)),
                     (1 / (x.abs() + 1), dt(1) / (np.abs(a) + dt(1))), (x ** 2, a ** dt(2)),
                     (ug.maximum(x, 0.5), np.maximum(a, dt(0.5)))]:
        assert got.dtype == dt, got.dtype
        close(got, exp, **tol)


@pytest.mark.parametrize("dt", [np.int32, np.int64], ids=name)
def test_scalar_keeps_int_dtype(device, close, require_dtype, dt):
    require_dtype(dt)
    a = sample(dt, (6,))
    x = ug.tensor(a, device=device)
    for got, exp in [(x + 3, a + dt(3)), (3 + x, dt(3) + a), (x * -2, a * dt(-2)), (5 - x, dt(5) - a),
                     (ug.maximum(x, 0), np.maximum(a, dt(0))), (ug.where(x > 0, x, 0), np.where(a > 0, a, dt(0)))]:
        assert got.dtype == dt, got.dtype
        close(got, exp)


@pytest.mark.parametrize("dt", [np.int32, np.int64], ids=name)
def test_float_scalar_with_int_tensor_is_float32(device, close, require_dtype, dt):
    require_dtype(dt)
    a = sample(dt, (6,))
    x = ug.tensor(a, device=device)
    got = x + 2.5
    assert got.dtype == np.float32
    close(got, a.astype(np.float32) + np.float32(2.5))
    got = x * 0.5
    assert got.dtype == np.float32
    close(got, a.astype(np.float32) * np.float32(0.5))
    got = 1.5 - x
    assert got.dtype == np.float32
    close(got, np.float32(1.5) - a.astype(np.float32))


@pytest.mark.parametrize("dt", [np.int32, np.int64], ids=name)
def test_compare_int_tensor_with_float_scalar(device, close, require_dtype, dt):
    require_dtype(dt)
    a = sample(dt, (8,))
    x = ug.tensor(a, device=device)
    close(x < 2.5, a < 2.5)
    close(x >= -0.5, a >= -0.5)
    close(x == 3, a == 3)


# ---------------------------------------------------------------- unary on ints
@pytest.mark.parametrize("fn", ["exp", "log", "sqrt", "sin", "cos", "tanh"])
@pytest.mark.parametrize("dt", [np.int32, np.int64], ids=name)
def test_float_unary_on_int_follows_numpy(device, close, require_dtype, dt, fn):
    a = RNG.integers(1, 6, size=(7,)).astype(dt)
    expected = getattr(np, fn)(a)
    require_dtype(dt, expected.dtype)
    got = getattr(ug.tensor(a, device=device), fn)()
    close(got, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dt", [np.int32, np.int64], ids=name)
def test_int_keeps_dtype_ops(device, close, require_dtype, dt):
    require_dtype(dt)
    a = sample(dt, (3, 4))
    x = ug.tensor(a, device=device)
    close(-x, -a)
    close(x.abs(), np.abs(a))
    close(x.relu(), np.maximum(a, dt(0)))
    close(x.max(axis=1), a.max(axis=1))
    close(x.min(), a.min())
    close(x.T * x.T, a.T * a.T)


def test_int64_large_values_exact(device, close, require_dtype):
    require_dtype(np.int64)
    a = np.array([2 ** 40 + 1, -(2 ** 45) + 3, 2 ** 62, 7], np.int64)
    x = ug.tensor(a, device=device)
    close(x + 1, a + 1)
    close(x - x, np.zeros(4, np.int64))
    close(x.max(), a.max())
    close(x.sum(), a.sum(), check_dtype=False)
    close(x[:2] * 2, a[:2] * 2)


def test_int32_large_values_exact(device, close, require_dtype):
    require_dtype(np.int32)
    a = np.array([2 ** 30 + 1, -(2 ** 30) - 3, 123456789], np.int32)  # not representable in float32
    x = ug.tensor(a, device=device)
    close(x + 5, a + np.int32(5))
    close(x - 7, a - np.int32(7))
    close(x.max(), a.max())


def test_float64_precision_is_real(device, close, require_dtype):
    require_dtype(np.float64)
    a = np.array([1.0, 1e8, -3.0], np.float64)
    x = ug.tensor(a, device=device)
    got = (x + 1e-9) - x  # zero if computed in float32
    close(got, (a + 1e-9) - a, rtol=1e-6, atol=0)
    s = ug.tensor(np.full(1000, 0.1, np.float64), device=device).sum()
    close(s, np.full(1000, 0.1).sum(), rtol=1e-13, atol=0)
    y = ug.tensor(np.array([0.1, 1.5, -3.0]), device=device)
    close(y.exp().log(), np.log(np.exp(np.array([0.1, 1.5, -3.0]))), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- float16 / bool
def test_float16_ops(device, close, require_dtype):
    require_dtype(np.float16)
    a = RNG.uniform(-2, 2, (4, 8)).astype(np.float16)
    b = RNG.uniform(0.5, 2, (8,)).astype(np.float16)
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    for got, exp in [(x + y, a + b), (x * y, a * b), (x / y, a / b), (x.exp(), np.exp(a)),
                     (x.tanh(), np.tanh(a)), (x.relu(), np.maximum(a, np.float16(0))),
                     (x.softmax(axis=-1), softmax(a).astype(np.float16)), (x.max(axis=0), a.max(axis=0))]:
        assert got.dtype == np.float16
        close(got, exp, rtol=1e-2, atol=1e-2)
    close(x.astype(np.float32).sum(axis=1), a.astype(np.float32).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_bool_tensors(device, close, require_dtype):
    require_dtype(np.bool_)
    c = np.array([[True, False, True], [False, False, True]])
    x = ug.tensor(c, device=device)
    assert x.dtype == np.bool_
    close(x, c)
    close(x.T, c.T)
    close(x == ug.tensor(c[::-1].copy(), device=device), c == c[::-1])
    close(x != ug.tensor(c[::-1].copy(), device=device), c != c[::-1])
    close(ug.where(x, 1.0, 0.0), np.where(c, 1.0, 0.0), check_dtype=False)
    close(x.astype(np.int32).max(axis=1), c.astype(np.int32).max(axis=1))
    close(ug.tensor([True, False], device=device), np.array([True, False]))


def test_bool_and_numeric_promotion(device, close, require_dtype):
    require_dtype(np.bool_, np.int32)
    c, i, f = MIXED
    ct, it, ft = (ug.tensor(v, device=device) for v in MIXED)
    close(ct + it, c + i)
    close(ct * ft, c * f)
    close(ft * ct, f * c)
