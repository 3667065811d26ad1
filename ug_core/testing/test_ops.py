"""Elementwise ops, creation functions, tensor properties and conversions."""
import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.data import RNG
from ug_core.testing.oracles import gelu, sigmoid


def rand(shape, dtype=np.float32, lo=-3.0, hi=3.0, seed=None):
    rng = RNG if seed is None else np.random.default_rng(seed)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


# name -> (ug fn, numpy fn computed in float64 then cast, (lo, hi) input domain, loose?)
UNARY = {
    "neg": (lambda t: -t, np.negative, (-3, 3), False),
    "exp": (lambda t: t.exp(), np.exp, (-5, 5), True),
    "log": (lambda t: t.log(), np.log, (0.05, 20), True),
    "sqrt": (lambda t: t.sqrt(), np.sqrt, (0.0, 20), True),
    "sin": (lambda t: t.sin(), np.sin, (-4, 4), True),
    "cos": (lambda t: t.cos(), np.cos, (-4, 4), True),
    "tanh": (lambda t: t.tanh(), np.tanh, (-4, 4), True),
    "abs": (lambda t: t.abs(), np.abs, (-3, 3), False),
    "reciprocal": (lambda t: t.reciprocal(), np.reciprocal, (0.1, 5), True),
    "relu": (lambda t: t.relu(), lambda x: np.maximum(x, 0), (-3, 3), False),
    "sigmoid": (lambda t: t.sigmoid(), sigmoid, (-8, 8), True),
    "gelu": (lambda t: t.gelu(), gelu, (-5, 5), True),
    "silu": (lambda t: t.silu(), lambda x: x * sigmoid(x), (-6, 6), True),
}

FLOAT_DTYPES = [np.float32, np.float64, np.float16]


def _unary_tol(dtype, loose):
    dtype = np.dtype(dtype)
    if dtype == np.float16:
        return (1e-2, 1e-2) if loose else (2e-3, 2e-3)
    if dtype == np.float64:
        return (1e-9, 1e-12) if loose else (1e-12, 1e-14)
    return (2e-5, 2e-6) if loose else (1e-6, 1e-7)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(device, close, require_dtype, name, dtype):
    require_dtype(dtype)
    f, ref, (lo, hi), loose = UNARY[name]
    a = rand((7, 33), dtype, lo, hi)
    got = f(ug.tensor(a, device=device))
    expected = ref(a.astype(np.float64)).astype(dtype)
    rtol, atol = _unary_tol(dtype, loose)
    close(got, expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(), (1,), (0,), (3, 0, 2), (1023,), (2, 3, 5, 7)], ids=str)
def test_unary_shapes(device, close, name, shape):
    f, ref, (lo, hi), loose = UNARY[name]
    a = rand(shape, np.float32, lo, hi)
    got = f(ug.tensor(a, device=device))
    rtol, atol = _unary_tol(np.float32, loose)
    close(got, ref(a.astype(np.float64)).astype(np.float32), rtol=rtol, atol=atol)


def test_unary_special_values(device, close):
    a = np.array([0.0, -0.0, 1.0, -1.0, 50.0, -50.0, 88.0, -100.0], np.float32)
    x = ug.tensor(a, device=device)
    close(x.exp(), np.exp(a).astype(np.float32), rtol=2e-5, atol=1e-30)
    close(x.tanh(), np.tanh(a), rtol=2e-5, atol=2e-6)
    close(x.sigmoid(), sigmoid(a.astype(np.float64)).astype(np.float32), rtol=2e-5, atol=2e-6)
    close(x.relu(), np.maximum(a, 0))
    close(x.abs(), np.abs(a))
    with np.errstate(divide="ignore", invalid="ignore"):
        close(ug.tensor(np.array([1.0, 0.0, 4.0], np.float32), device=device).log(),
              np.log(np.array([1.0, 0.0, 4.0], np.float32)))
        close(ug.tensor(np.array([-1.0, 4.0], np.float32), device=device).sqrt(),
              np.sqrt(np.array([-1.0, 4.0], np.float32)))


# --------------------------------------------------------------------------- binary
BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "pow": (lambda a, b: a ** b, np.power),
    "maximum": (ug.maximum, np.maximum),
    "minimum": (ug.minimum, np.minimum),
}

BROADCAST_SHAPES = [
    ((3, 4), (3, 4)),
    ((3, 1), (1, 4)),
    ((5,), (2, 5)),
    ((2, 5), (5,)),
    ((), (2, 3)),
    ((2, 3), ()),
    ((), ()),
    ((4, 1, 3), (2, 1)),
    ((1,), (3, 1, 2)),
    ((0, 3), (1, 3)),
    ((2, 1, 4, 1), (3, 1, 5)),
]


def _binary_inputs(name, sa, sb, dtype=np.float32):
    if name == "pow":
        return rand(sa, dtype, 0.2, 3.0), rand(sb, dtype, -2.0, 2.0)
    if name == "div":
        b = rand(sb, dtype, 0.5, 3.0) * np.where(rand(sb, dtype) > 0, 1, -1).astype(dtype)
        return rand(sa, dtype), b.astype(dtype)
    return rand(sa, dtype), rand(sb, dtype)


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast(device, close, name, shapes):
    f, ref = BINARY[name]
    a, b = _binary_inputs(name, *shapes)
    got = f(ug.tensor(a, device=device), ug.tensor(b, device=device))
    rtol = 2e-5 if name == "pow" else 1e-6
    close(got, ref(a, b), rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.float16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_other_float_dtypes(device, close, require_dtype, name, dtype):
    require_dtype(dtype)
    f, ref = BINARY[name]
    a, b = _binary_inputs(name, (3, 1), (1, 4), dtype)
    got = f(ug.tensor(a, device=device), ug.tensor(b, device=device))
    expected = ref(a, b)
    assert expected.dtype == dtype
    if dtype == np.float16:
        close(got, expected, rtol=5e-3, atol=5e-3)
    else:
        close(got, expected, rtol=1e-12, atol=1e-14)


SCALARS = [2.5, -1.5, 3, 0.5]


@pytest.mark.parametrize("s", SCALARS)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
def test_scalar_right(device, close, name, s):
    f, ref = BINARY[name]
    a = rand((3, 5), np.float32, 0.2, 3.0) if name == "pow" else rand((3, 5))
    got = f(ug.tensor(a, device=device), s)
    expected = ref(a, np.float32(s))
    assert expected.dtype == np.float32
    close(got, expected, rtol=2e-5 if name == "pow" else 1e-6, atol=1e-6)


@pytest.mark.parametrize("s", SCALARS)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
def test_scalar_left(device, close, name, s):
    f, ref = BINARY[name]
    if name == "pow":
        s = abs(s)
        a = rand((3, 5), np.float32, -2, 2)
    elif name == "div":
        a = rand((3, 5), np.float32, 0.5, 3.0)
    else:
        a = rand((3, 5))
    got = f(s, ug.tensor(a, device=device))
    expected = ref(np.float32(s), a)
    close(got, expected, rtol=2e-5 if name == "pow" else 1e-6, atol=1e-6)


def test_reversed_operators(device, close):
    a = rand((4, 3), np.float32, 0.5, 2.0)
    x = ug.tensor(a, device=device)
    f32 = np.float32
    close(2 - x, f32(2) - a)
    close(2 / x, f32(2) / a)
    close(2 ** x, f32(2) ** a, rtol=2e-5)
    close(2 + x, f32(2) + a)
    close(2 * x, f32(2) * a)
    close(1.5 - x, f32(1.5) - a)
    close(-x, -a)
    close(-(-x), a)


def test_pow_special_exponents(device, close):
    a = rand((5, 6), np.float32, -3, 3)  # negative bases
    x = ug.tensor(a, device=device)
    close(x ** 2, a ** np.float32(2), rtol=1e-5)
    close(x ** 3, a ** np.float32(3), rtol=1e-5)
    close(x ** 1, a)
    close(x ** 0, np.ones_like(a))
    close(x ** 2.0, a ** np.float32(2.0), rtol=1e-5)
    p = np.abs(a) + np.float32(0.1)
    xp = ug.tensor(p, device=device)
    close(xp ** 0.5, np.sqrt(p), rtol=2e-5)
    close(xp ** -1, 1 / p, rtol=2e-5)
    close(xp ** -2.0, p ** np.float32(-2.0), rtol=2e-5)


def test_binary_same_tensor_and_reuse(device, close):
    a = rand((6, 7))
    x = ug.tensor(a, device=device)
    close(x + x, a + a)
    close(x * x - x, a * a - a)
    y = x * 2
    close(y + y * y, a * 2 + (a * 2) * (a * 2), rtol=1e-5)
    # building ops never mutates the inputs
    close(x, a)


def test_binary_non_contiguous_inputs(device, close):
    a, b = rand((4, 6)), rand((6, 4))
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    close(x.T + y, a.T + b)
    close(x[:, ::2] * y[::2, :].T, a[:, ::2] * b[::2, :].T)
    close(x[1:3] - y.T[2:], a[1:3] - b.T[2:])


@pytest.mark.parametrize("n", [1, 3, 7, 8, 15, 16, 17, 31, 33, 127, 1000, 4099])
def test_odd_lengths(device, close, n):
    a, b = rand((n,)), rand((n,))
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    close(x * y + x.exp(), a * b + np.exp(a), rtol=2e-5)


# --------------------------------------------------------------------------- comparisons
CMP = {
    "lt": (lambda a, b: a < b, np.less),
    "le": (lambda a, b: a <= b, np.less_equal),
    "gt": (lambda a, b: a > b, np.greater),
    "ge": (lambda a, b: a >= b, np.greater_equal),
    "eq": (lambda a, b: a == b, np.equal),
    "ne": (lambda a, b: a != b, np.not_equal),
}


def _cmp_inputs(sa, sb, dtype=np.float32):
    # small integer-valued data so equality actually happens
    a = RNG.integers(-2, 3, size=sa).astype(dtype)
    b = RNG.integers(-2, 3, size=sb).astype(dtype)
    return a, b


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((5,), (2, 5)), ((), (3,))], ids=str)
@pytest.mark.parametrize("name", sorted(CMP))
def test_compare_tensor_tensor(device, close, name, shapes):
    f, ref = CMP[name]
    a, b = _cmp_inputs(*shapes)
    got = f(ug.tensor(a, device=device), ug.tensor(b, device=device))
    assert got.dtype == np.bool_
    close(got, ref(a, b))


@pytest.mark.parametrize("name", sorted(CMP))
def test_compare_scalar(device, close, name):
    f, ref = CMP[name]
    a, _ = _cmp_inputs((4, 5), ())
    x = ug.tensor(a, device=device)
    close(f(x, 1), ref(a, np.float32(1)))
    close(f(x, 0.5), ref(a, np.float32(0.5)))
    # scalar on the left: Python reflects to the mirrored comparison
    close(f(1, x), ref(np.float32(1), a))


def test_compare_int(device, close):
    a = RNG.integers(-5, 5, size=(3, 4)).astype(np.int32)
    b = RNG.integers(-5, 5, size=(4,)).astype(np.int32)
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    close(x < y, a < b)
    close(x == y, a == b)
    close(x >= 0, a >= 0)


def test_compare_result_in_arithmetic_via_astype(device, close):
    a = rand((10,))
    x = ug.tensor(a, device=device)
    close((x > 0).astype(np.float32) * x, (a > 0).astype(np.float32) * a)
    close((x > 0).astype(np.float32).sum(), np.float32((a > 0).sum()))


# --------------------------------------------------------------------------- where / maximum / minimum
def test_where_tensors(device, close):
    a, b = rand((3, 4)), rand((3, 4))
    c = a > b
    got = ug.where(ug.tensor(c, device=device), ug.tensor(a, device=device), ug.tensor(b, device=device))
    close(got, np.where(c, a, b))


def test_where_broadcast(device, close):
    c = RNG.random((3, 1)) > 0.5
    a, b = rand((1, 4)), rand((4,))
    got = ug.where(ug.tensor(c, device=device), ug.tensor(a, device=device), ug.tensor(b, device=device))
    close(got, np.where(c, a, b))


def test_where_scalars(device, close):
    a = rand((3, 4))
    x = ug.tensor(a, device=device)
    close(ug.where(x > 0, x, 0.0), np.where(a > 0, a, np.float32(0)))
    close(ug.where(x > 0, 1.0, x), np.where(a > 0, np.float32(1), a))
    close(ug.where(x > 0, -x, 2), np.where(a > 0, -a, np.float32(2)))
    # both branches scalars: value check only (result dtype is not specified)
    close(ug.where(x > 0, 1.0, -1.0), np.where(a > 0, 1.0, -1.0), check_dtype=False)


def test_where_from_computed_condition(device, close):
    a = rand((5, 6))
    x = ug.tensor(a, device=device)
    got = ug.where((x * x) > 1.0, x.exp(), x.abs())
    close(got, np.where(a * a > 1.0, np.exp(a), np.abs(a)), rtol=2e-5)


def test_maximum_minimum_scalars(device, close):
    a = rand((4, 5))
    x = ug.tensor(a, device=device)
    z = np.float32(0)
    close(ug.maximum(x, 0.0), np.maximum(a, z))
    close(ug.maximum(0.0, x), np.maximum(z, a))
    close(ug.minimum(x, 0.5), np.minimum(a, np.float32(0.5)))
    close(ug.minimum(-0.5, x), np.minimum(np.float32(-0.5), a))
    close(ug.maximum(x, 1), np.maximum(a, np.float32(1)))


def test_maximum_minimum_broadcast(device, close):
    a, b = rand((3, 1, 4)), rand((5, 1))
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    close(ug.maximum(x, y), np.maximum(a, b))
    close(ug.minimum(y, x), np.minimum(b, a))


# --------------------------------------------------------------------------- compositions
def test_gelu_mlp_like_chain(device, close):
    a = rand((8, 16))
    x = ug.tensor(a, device=device)
    y = ((x * 0.5 + 1).gelu() - x.silu()) * x.sigmoid() + x.tanh()
    a64 = a.astype(np.float64)
    s = sigmoid(a64)
    expected = (gelu(a64 * 0.5 + 1) - a64 * s) * s + np.tanh(a64)
    close(y, expected.astype(np.float32), rtol=1e-4, atol=1e-5)


def test_long_chain(device, close):
    a = rand((64,))
    x = ug.tensor(a, device=device)
    e = a.copy()
    for i in range(40):
        x = (x * 0.9 + 0.1).tanh() + x * 0.05
        e = np.tanh(e * np.float32(0.9) + np.float32(0.1)) + e * np.float32(0.05)
    close(x, e, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------- creation / properties / conversion
def test_tensor_from_numpy_properties(device, close):
    a = rand((2, 3, 4))
    x = ug.tensor(a, device=device)
    assert x.shape == (2, 3, 4)
    assert isinstance(x.shape, tuple)
    assert x.ndim == 3
    assert x.size == 24
    assert x.dtype == np.float32
    assert x.device == device
    close(x, a)


def test_tensor_from_nested_lists_and_scalars(device, close):
    x = ug.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32, device=device)
    close(x, np.array([[1, 2], [3, 4]], np.float32))
    y = ug.tensor([[1, 2, 3]], dtype=np.int32, device=device)
    assert y.shape == (1, 3)
    np.testing.assert_array_equal(y.numpy(), [[1, 2, 3]])
    s = ug.tensor(2.5, dtype=np.float32, device=device)
    assert s.shape == () and s.ndim == 0 and s.size == 1
    assert s.item() == 2.5
    assert isinstance(s.item(), float)
    i = ug.tensor(7, dtype=np.int32, device=device)
    assert i.item() == 7 and isinstance(i.item(), int)


def test_tensor_dtype_argument_converts(device, close):
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    close(ug.tensor(a, dtype=np.float32, device=device), a.astype(np.float32))


def test_tensor_copies_input(device, close):
    a = np.arange(6, dtype=np.float32)
    x = ug.tensor(a, device=device)
    a[:] = -1  # mutating the source after creation must not leak in
    close(x, np.arange(6, dtype=np.float32))


@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3), (2, 0, 4)], ids=str)
def test_zeros_ones_full(device, close, shape):
    close(ug.zeros(shape, device=device), np.zeros(shape, np.float32))
    close(ug.ones(shape, device=device), np.ones(shape, np.float32))
    close(ug.full(shape, 3.5, np.float32, device=device), np.full(shape, 3.5, np.float32))
    close(ug.zeros(shape, dtype=np.int32, device=device), np.zeros(shape, np.int32))
    close(ug.ones(shape, np.int32, device=device), np.ones(shape, np.int32))
    close(ug.full(shape, -2, np.int32, device=device), np.full(shape, -2, np.int32))


def test_arange(device, close):
    close(ug.arange(5, np.int32, device=device), np.arange(5, dtype=np.int32))
    close(ug.arange(7, np.float32, device=device), np.arange(7, dtype=np.float32))
    close(ug.arange(0, np.float32, device=device), np.arange(0, dtype=np.float32))
    close(ug.arange(6, np.float32, device=device).reshape(2, 3) * 2, np.arange(6, dtype=np.float32).reshape(2, 3) * 2)


def test_full_in_expression(device, close):
    a = rand((3, 3))
    x = ug.tensor(a, device=device)
    close(x + ug.full((3, 1), 2.0, np.float32, device=device), a + 2)
    close(x * ug.ones((3,), device=device), a)
    close(x + ug.zeros((1, 1), device=device), a)


def test_numpy_asarray_item(device):
    a = rand((2, 3))
    x = ug.tensor(a, device=device)
    n = x.numpy()
    assert isinstance(n, np.ndarray) and n.dtype == np.float32
    np.testing.assert_array_equal(n, a)
    arr = np.asarray(x)
    assert isinstance(arr, np.ndarray) and arr.dtype == np.float32
    np.testing.assert_array_equal(arr, a)
    arr64 = np.asarray(x, dtype=np.float64)
    assert arr64.dtype == np.float64
    np.testing.assert_array_equal(arr64, a.astype(np.float64))
    np.testing.assert_array_equal(np.array(x + 1), a + 1)
    # numpy functions accept ug tensors through __array__
    np.testing.assert_allclose(np.sum(np.asarray(x * 2)), np.sum(a * 2), rtol=1e-6)
    assert (x[1, 2]).item() == pytest.approx(float(a[1, 2]))
    assert (x.sum()).item() == pytest.approx(float(a.sum()), rel=1e-5)
    assert ug.tensor(np.array([[4.0]], np.float32), device=device).item() == 4.0


def test_realize_returns_self(device, close):
    a = rand((3,))
    x = ug.tensor(a, device=device) * 2
    assert x.realize() is x
    close(x, a * 2)
    close(x + 1, a * 2 + 1)  # realized tensors keep working in new graphs


def test_to_every_device(device, close):
    a = rand((3, 4))
    x = ug.tensor(a, device=device)
    for d in ug.devices():
        y = x.to(d)
        assert y.device == d
        close(y, a)
        back = y.to(device)
        assert back.device == device
        close(back, a)
        close((y * 2 + 1).to(device), a * 2 + 1)


def test_to_lazy_result_and_view(device, close):
    a = rand((3, 4))
    x = ug.tensor(a, device=device)
    for d in ug.devices():
        close((x.exp() + 1).to(d), np.exp(a) + 1, rtol=2e-5)
        close(x.T[1:].to(d), a.T[1:])


def test_int_elementwise(device, close):
    a = RNG.integers(-50, 50, size=(4, 5)).astype(np.int32)
    b = RNG.integers(1, 9, size=(5,)).astype(np.int32)
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    close(x + y, a + b)
    close(x - y, a - b)
    close(x * y, a * b)
    close(-x, -a)
    close(x.abs(), np.abs(a))
    close(ug.maximum(x, y), np.maximum(a, b))
    close(ug.minimum(x, 0), np.minimum(a, np.int32(0)))
    close(x + 3, a + np.int32(3))
    close(3 - x, np.int32(3) - a)
    close(x * 2, a * np.int32(2))
    close(ug.where(x > 0, x, y), np.where(a > 0, a, b))


def test_nan_inf_propagation_follows_numpy(device, close):
    """maximum/minimum/relu propagate NaN like numpy (C fmaxf would not); exp(-inf) == 0."""
    a = np.array([np.nan, 1.0, -2.0, np.inf, -np.inf], np.float32)
    x = ug.tensor(a, device=device)
    with np.errstate(invalid="ignore"):
        close(ug.maximum(x, 0.0), np.maximum(a, np.float32(0)))
        close(ug.minimum(x, 0.0), np.minimum(a, np.float32(0)))
        close(ug.maximum(0.0, x), np.maximum(np.float32(0), a))
        close(x.exp(), np.exp(a))
        close(x * 0 + 1, a * 0 + 1)
        close(x.abs(), np.abs(a))
