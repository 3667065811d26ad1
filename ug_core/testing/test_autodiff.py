"""Differentiation on the device under test (ug.grad, ug.vjp, ug.jvp and the VJP rules in ops.py).

Every differentiable op and rule is checked against central finite differences in float64: a
function of float64 inputs, a random cotangent c, and the gradient of sum(c * f(x)) compared,
element by element, with (L(x + h e_i) - L(x - h e_i)) / 2h computed on the same device. Inputs
are drawn away from kinks (abs and relu near 0, ties of max / min, floor's jumps), so that the
finite difference is the derivative; ties and zeros (where the rule picks a value) are checked
against the documented rule exactly. The step h = 1e-6 makes the difference accurate to about
1e-9 relative, and the tolerance (1e-6 relative) is far below any real error of a rule (a
missing factor, a wrong sign, a gradient sent to the wrong element). A check also fails if the
finite difference is all zero where a gradient is expected (a test that could not fail).

Kernel counts: the backward passes of softmax, layernorm and GELU are one kernel each.
"""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug

H = 1e-6
RTOL = 1e-6


# --- the finite-difference check --------------------------------------------------------------


def _to_device(arrays, device):
    return [ug.tensor(a, device=device) for a in arrays]


def _loss(fn, arrays, c, device) -> float:
    out = fn(*_to_device(arrays, device))
    return float(np.sum(c * out.numpy()))


def finite_difference(fn, arrays, c, device, h=H):
    """d sum(c * fn(*arrays)) / d arrays[i], central differences, one element at a time: fn
    compiled once by ug.jit where it can be (replays are cheap), else run eagerly (a
    data-dependent shape, a host item)."""
    jitted = ug.jit(fn)
    try:
        np.testing.assert_array_equal(jitted(*_to_device(arrays, device)).numpy(), fn(*_to_device(arrays, device)).numpy())
        fn = jitted
    except (AssertionError, ug.TracerValueError, TypeError, ValueError):
        pass
    grads = []
    for i, a in enumerate(arrays):
        fd = np.zeros_like(a)
        for j in np.ndindex(a.shape):
            plus = [x.copy() for x in arrays]
            minus = [x.copy() for x in arrays]
            plus[i][j] += h
            minus[i][j] -= h
            fd[j] = (_loss(fn, plus, c, device) - _loss(fn, minus, c, device)) / (2 * h)
        grads.append(fd)
    return grads


def check_grad(device, rng, fn, *arrays, zero=False, rtol=RTOL, atol=None, h=H):
    """ug.vjp of fn at float64 `arrays` with a random cotangent, against finite differences on
    the same device. zero=True: the derivative is 0 (piecewise-constant ops), checked exactly."""
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    out, pullback = ug.vjp(fn, *_to_device(arrays, device))
    expected_out = fn(*_to_device(arrays, device)).numpy()
    np.testing.assert_array_equal(out.numpy(), expected_out)
    c = rng.uniform(0.5, 1.5, size=expected_out.shape) * rng.choice([-1.0, 1.0], size=expected_out.shape)
    grads = pullback(ug.tensor(c, device=device))
    assert len(grads) == len(arrays)
    fds = finite_difference(fn, arrays, c, device, h)
    for i, (a, g, fd) in enumerate(zip(arrays, grads, fds)):
        assert g.shape == a.shape and g.dtype == np.float64, (i, g.shape, g.dtype)
        got = g.numpy()
        if zero:
            np.testing.assert_array_equal(got, np.zeros_like(a), err_msg=f"input {i}")
            np.testing.assert_allclose(fd, 0.0, atol=1e-9, err_msg=f"input {i}: the finite difference is not 0")
            continue
        assert np.max(np.abs(fd)) > 1e-3, f"input {i}: the finite difference is 0: a test that cannot fail"
        tol = 1e-7 * max(1.0, float(np.max(np.abs(fd)))) if atol is None else atol
        np.testing.assert_allclose(got, fd, rtol=rtol, atol=tol, err_msg=f"input {i}")
    return grads


@pytest.fixture(autouse=True)
def _float64(require_dtype):
    require_dtype(np.float64)


def away(rng, shape, lo=0.3, hi=2.0):
    """Values with |x| in [lo, hi] and random signs (away from 0)."""
    return rng.uniform(lo, hi, size=shape) * rng.choice([-1.0, 1.0], size=shape)


def distinct(rng, shape, gap=0.1):
    """Values that differ pairwise by at least `gap` (no ties for max / min / sort)."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * gap * 2 + rng.uniform(0, gap / 2, n) - n * gap).reshape(shape)


def fractional(rng, shape):
    """Values at least 0.1 away from every integer and half-integer (floor / round's jumps)."""
    return rng.integers(-4, 4, size=shape) + rng.choice([0.15, 0.35, 0.65, 0.85], size=shape)


# --- elementwise ------------------------------------------------------------------------------

S = (3, 4)
UNARY = {
    # name: (fn, sampler)
    "neg": (lambda x: -x, lambda r: r.standard_normal(S)),
    "positive": (lambda x: +x, lambda r: r.standard_normal(S)),
    "reciprocal": (lambda x: x.reciprocal(), lambda r: away(r, S, 0.5)),
    "exp": (lambda x: x.exp(), lambda r: r.standard_normal(S)),
    "log": (lambda x: x.log(), lambda r: r.uniform(0.5, 3, S)),
    "sqrt": (lambda x: x.sqrt(), lambda r: r.uniform(0.5, 3, S)),
    "sin": (lambda x: x.sin(), lambda r: r.uniform(-3, 3, S)),
    "cos": (lambda x: x.cos(), lambda r: r.uniform(-3, 3, S)),
    "tanh": (lambda x: x.tanh(), lambda r: r.standard_normal(S)),
    "abs": (lambda x: x.abs(), lambda r: away(r, S)),
    "square": (lambda x: ug.square(x), lambda r: r.standard_normal(S)),
    "pow_scalar_exponent": (lambda x: x ** 3, lambda r: r.standard_normal(S)),
    "pow_half": (lambda x: x ** 0.5, lambda r: r.uniform(0.5, 3, S)),
    "rpow": (lambda x: 2.0 ** x, lambda r: r.standard_normal(S)),
    "rdiv": (lambda x: 3.0 / x, lambda r: away(r, S, 0.5)),
    "rsub": (lambda x: 3.0 - x, lambda r: r.standard_normal(S)),
    "tan": (lambda x: ug.tan(x), lambda r: r.uniform(-1.2, 1.2, S)),
    "asin": (lambda x: ug.asin(x), lambda r: r.uniform(-0.8, 0.8, S)),
    "acos": (lambda x: ug.acos(x), lambda r: r.uniform(-0.8, 0.8, S)),
    "atan": (lambda x: ug.atan(x), lambda r: r.standard_normal(S)),
    "sinh": (lambda x: ug.sinh(x), lambda r: r.standard_normal(S)),
    "cosh": (lambda x: ug.cosh(x), lambda r: away(r, S)),
    "asinh": (lambda x: ug.asinh(x), lambda r: r.standard_normal(S)),
    "acosh": (lambda x: ug.acosh(x), lambda r: r.uniform(1.3, 3, S)),
    "atanh": (lambda x: ug.atanh(x), lambda r: r.uniform(-0.8, 0.8, S)),
    "expm1": (lambda x: ug.expm1(x), lambda r: r.standard_normal(S)),
    "log1p": (lambda x: ug.log1p(x), lambda r: r.uniform(-0.5, 3, S)),
    "log2": (lambda x: ug.log2(x), lambda r: r.uniform(0.5, 3, S)),
    "log10": (lambda x: ug.log10(x), lambda r: r.uniform(0.5, 3, S)),
    "sigmoid": (lambda x: x.sigmoid(), lambda r: r.standard_normal(S) * 2),
    "relu": (lambda x: x.relu(), lambda r: away(r, S, 0.1)),
    "gelu": (lambda x: x.gelu(), lambda r: r.standard_normal(S) * 2),
    "silu": (lambda x: x.silu(), lambda r: r.standard_normal(S) * 2),
    "clip": (lambda x: ug.clip(x, -0.5, 0.7), lambda r: fractional(r, S) * 0.3),
    "softmax_last": (lambda x: x.softmax(axis=-1), lambda r: r.standard_normal(S)),
    "softmax_first": (lambda x: x.softmax(axis=0), lambda r: r.standard_normal(S)),
    "log_softmax": (lambda x: x.log_softmax(axis=-1), lambda r: r.standard_normal(S)),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(device, rng, name):
    fn, sample = UNARY[name]
    check_grad(device, rng, fn, sample(rng))


ZERO_UNARY = {
    "floor": lambda x: ug.floor(x),
    "ceil": lambda x: ug.ceil(x),
    "trunc": lambda x: ug.trunc(x),
    "round": lambda x: ug.round(x),
    "sign": lambda x: ug.sign(x),
    "floor_divide": lambda x: x // 0.7,
}


@pytest.mark.parametrize("name", list(ZERO_UNARY))
def test_piecewise_constant_has_zero_gradient(device, rng, name):
    check_grad(device, rng, ZERO_UNARY[name], fractional(rng, S), zero=True)


def _pos(r, shape=S):
    return r.uniform(0.5, 2.0, shape)


BINARY = {
    # name: (fn, sampler of (a, b))
    "add": (lambda a, b: a + b, lambda r: (r.standard_normal(S), r.standard_normal(S))),
    "sub": (lambda a, b: a - b, lambda r: (r.standard_normal(S), r.standard_normal(S))),
    "mul": (lambda a, b: a * b, lambda r: (r.standard_normal(S), r.standard_normal(S))),
    "div": (lambda a, b: a / b, lambda r: (r.standard_normal(S), away(r, S, 0.5))),
    "pow": (lambda a, b: a ** b, lambda r: (_pos(r), r.uniform(-2, 2, S))),
    "maximum": (lambda a, b: ug.maximum(a, b), lambda r: tuple(distinct(r, (2,) + S)[i] for i in (0, 1))),
    "minimum": (lambda a, b: ug.minimum(a, b), lambda r: tuple(distinct(r, (2,) + S)[i] for i in (0, 1))),
    "remainder": (lambda a, b: a % b, lambda r: (fractional(r, S) * 1.0, r.choice([-1.0, 1.0], S) * 1.0)),
    "remainder_scaled": (lambda a, b: a % (b * 0.1 + 2.0), lambda r: (r.uniform(-5, 5, S), r.uniform(-1, 1, S))),
    "atan2": (lambda a, b: ug.atan2(a, b), lambda r: (away(r, S), away(r, S))),
    "hypot": (lambda a, b: ug.hypot(a, b), lambda r: (away(r, S), away(r, S))),
    "logaddexp": (lambda a, b: ug.logaddexp(a, b), lambda r: (r.standard_normal(S), r.standard_normal(S))),
    "nextafter": (lambda a, b: ug.nextafter(a, b) * b, lambda r: (away(r, S), away(r, S))),
    "copysign": (lambda a, b: ug.copysign(a, b) * b, lambda r: (away(r, S), away(r, S))),
    "broadcast_row": (lambda a, b: a * b, lambda r: (r.standard_normal(S), r.standard_normal(S[1:]))),
    "broadcast_column": (lambda a, b: a / b, lambda r: (r.standard_normal(S), away(r, (S[0], 1), 0.5))),
    "broadcast_outer": (lambda a, b: (a - b).exp(), lambda r: (r.standard_normal((3, 1)), r.standard_normal((1, 4)))),
    "same_tensor_twice": (lambda a, b: a * a + b * a, lambda r: (r.standard_normal(S), r.standard_normal(S))),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary(device, rng, name):
    fn, sample = BINARY[name]
    check_grad(device, rng, fn, *sample(rng))


def test_remainder_is_fixed_point_shift(device, rng):
    # remainder's derivative in its first argument is 1 and in its second -floor(a / b): check
    # the values exactly as well, at points away from the jumps
    a, b = np.array([5.3, -5.3, 7.9, 0.4]), np.array([2.0, 2.0, -3.0, 0.3])
    ga, gb = ug.grad(lambda x, y: (x % y).sum(), argnums=(0, 1))(*_to_device([a, b], device))
    np.testing.assert_allclose(ga.numpy(), np.ones(4))
    np.testing.assert_allclose(gb.numpy(), -np.floor(a / b))


def test_pow_of_zero_base(device):
    # torch's values where the formulas divide by 0 or take log(0): d 0**b / db is 0 for b >= 0,
    # and d a**0 / da is 0
    a = ug.tensor(np.array([0.0, 0.0, 2.0]), device=device)
    b = ug.tensor(np.array([2.0, 0.0, 0.0]), device=device)
    ga, gb = ug.grad(lambda x, y: (x ** y).sum(), argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(ga.numpy(), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(gb.numpy(), [0.0, 0.0, np.log(2.0)])


def test_where(device, rng):
    cond = rng.random(S) < 0.5
    cond[0, 0], cond[0, 1] = True, False
    c = ug.tensor(cond, device=device)
    check_grad(device, rng, lambda a, b: ug.where(c, a * 2, b.exp()), rng.standard_normal(S), rng.standard_normal(S))
    # a Python scalar on one side and a broadcast condition
    c_row = ug.tensor(cond[0], device=device)
    check_grad(device, rng, lambda a: ug.where(c_row, a.sin(), 0.5), rng.standard_normal(S))


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_ties_split_equally(device, name):
    f = getattr(ug, name)
    a = ug.tensor(np.array([1.0, 2.0, 3.0, -1.0]), device=device)
    b = ug.tensor(np.array([1.0, 1.0, 4.0, -1.0]), device=device)
    ga, gb = ug.grad(lambda x, y: (f(x, y) * ug.tensor(np.array([1.0, 2.0, 3.0, 4.0]), device=device)).sum(),
                     argnums=(0, 1))(a, b)
    if name == "maximum":
        np.testing.assert_array_equal(ga.numpy(), [0.5, 2.0, 0.0, 2.0])
        np.testing.assert_array_equal(gb.numpy(), [0.5, 0.0, 3.0, 2.0])
    else:
        np.testing.assert_array_equal(ga.numpy(), [0.5, 0.0, 3.0, 2.0])
        np.testing.assert_array_equal(gb.numpy(), [0.5, 2.0, 0.0, 2.0])


def test_at_the_branch_points(device):
    # functions computed by branches (sigmoid, gelu and silu on the sign of x, logaddexp on a
    # tie) have the derivative of the function there, not of one branch's abs
    x = ug.tensor(np.array([0.0, -0.0]), device=device)
    np.testing.assert_array_equal(ug.grad(lambda t: t.sigmoid().sum())(x).numpy(), [0.25, 0.25])
    np.testing.assert_allclose(ug.grad(lambda t: t.gelu().sum())(x).numpy(), [0.5, 0.5], rtol=1e-15)
    np.testing.assert_allclose(ug.grad(lambda t: t.silu().sum())(x).numpy(), [0.5, 0.5], rtol=1e-15)
    ab = ug.tensor(np.array([1.5, 1.5]), device=device)
    np.testing.assert_array_equal(ug.grad(lambda t: ug.logaddexp(t[0], t[1]))(ab).numpy(), [0.5, 0.5])


def test_relu_and_abs_at_zero(device):
    x = ug.tensor(np.array([-1.0, 0.0, 2.0]), device=device)
    np.testing.assert_array_equal(ug.grad(lambda t: t.relu().sum())(x).numpy(), [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(ug.grad(lambda t: t.abs().sum())(x).numpy(), [-1.0, 0.0, 1.0])


@pytest.mark.parametrize("direction", ["float64_to_float32", "float32_to_float64"])
def test_cast(device, rng, direction):
    if direction == "float64_to_float32":
        # the gradient flows back through a float32 value and comes back in float64
        x = ug.tensor(rng.standard_normal(S), device=device)
        g = ug.grad(lambda t: (t.astype(ug.float32) * 3.0).sum())(x)
        assert g.dtype == np.float64
        np.testing.assert_array_equal(g.numpy(), np.full(S, 3.0))
    else:
        x32 = rng.standard_normal(S).astype(np.float32)
        g = ug.grad(lambda t: (t.astype(ug.float64) ** 2).sum())(ug.tensor(x32, device=device))
        assert g.dtype == np.float32
        np.testing.assert_allclose(g.numpy(), 2 * x32, rtol=1e-6)


def test_cast_to_int_carries_no_gradient(device, rng):
    x = ug.tensor(fractional(rng, S), device=device)
    g = ug.grad(lambda t: (t.astype(ug.int64).astype(ug.float64) + t * 0.0).sum())(x)
    np.testing.assert_array_equal(g.numpy(), np.zeros(S))


# --- reductions ---------------------------------------------------------------------------------

R = (3, 4, 2)
REDUCTIONS = {
    "sum_all": (lambda x: x.sum(), lambda r: r.standard_normal(R)),
    "sum_axis1": (lambda x: x.sum(axis=1), lambda r: r.standard_normal(R)),
    "sum_axes02_keepdims": (lambda x: x.sum(axis=(0, 2), keepdims=True), lambda r: r.standard_normal(R)),
    "prod_axis1": (lambda x: x.prod(axis=1), lambda r: away(r, R, 0.5)),
    "prod_all": (lambda x: x.prod(), lambda r: away(r, R, 0.7, 1.3)),
    "max_axis1": (lambda x: x.max(axis=1), lambda r: distinct(r, R)),
    "min_axis2": (lambda x: x.min(axis=2), lambda r: distinct(r, R)),
    "max_all": (lambda x: x.max(), lambda r: distinct(r, R)),
    "min_axes01": (lambda x: x.min(axis=(0, 1)), lambda r: distinct(r, R)),
    "mean_axis0": (lambda x: x.mean(axis=0), lambda r: r.standard_normal(R)),
    "mean_all": (lambda x: x.mean(), lambda r: r.standard_normal(R)),
    "var_axis1": (lambda x: ug.var(x, axis=1), lambda r: r.standard_normal(R)),
    "var_correction": (lambda x: ug.var(x, axis=-1, correction=1), lambda r: distinct(r, R)),
    "std_axis1": (lambda x: ug.std(x, axis=1), lambda r: r.standard_normal(R)),
    "std_all": (lambda x: x.std(), lambda r: r.standard_normal(R)),
    "vector_norm": (lambda x: ug.linalg.vector_norm(x, axis=-1), lambda r: away(r, R)),
    "logsumexp_by_hand": (lambda x: (x - x.max(axis=1, keepdims=True)).exp().sum(axis=1).log()
                          + x.max(axis=1), lambda r: distinct(r, R)),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction(device, rng, name):
    fn, sample = REDUCTIONS[name]
    check_grad(device, rng, fn, sample(rng))


def test_prod_with_zeros(device):
    # rows with no zero, one zero, two zeros: the gradient of a product is the product of the
    # others (exact, no division by zero), 0 for every element of a row with two zeros
    x = np.array([[2.0, 3.0, 4.0], [2.0, 0.0, 4.0], [0.0, 3.0, 0.0], [0.0, -1.5, 2.0]])
    g = ug.grad(lambda t: (t.prod(axis=1) * ug.tensor(np.array([1.0, 2.0, 3.0, 4.0]), device=device)).sum())(
        ug.tensor(x, device=device))
    expected = np.array([[12.0, 8.0, 6.0], [0.0, 16.0, 0.0], [0.0, 0.0, 0.0], [-12.0, 0.0, 0.0]])
    np.testing.assert_array_equal(g.numpy(), expected)


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_reduction_ties_split_equally(device, name):
    x = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0], [-1.0, 0.0, -2.0, -2.0]])
    g = ug.grad(lambda t: (getattr(t, name)(axis=1) * ug.tensor(np.array([1.0, 2.0, 3.0]), device=device)).sum())(
        ug.tensor(x, device=device))
    if name == "max":
        expected = [[0, 0.5, 0.5, 0], [0.5, 0.5, 0.5, 0.5], [0, 3, 0, 0]]
    else:
        expected = [[1, 0, 0, 0], [0.5, 0.5, 0.5, 0.5], [0, 0, 1.5, 1.5]]
    np.testing.assert_array_equal(g.numpy(), np.array(expected, dtype=np.float64))


# --- scans ----------------------------------------------------------------------------------------

SCANS = {
    "cumulative_sum_axis1": (lambda x: ug.cumulative_sum(x, axis=1), lambda r: r.standard_normal(S)),
    "cumulative_sum_axis0": (lambda x: ug.cumulative_sum(x, axis=0), lambda r: r.standard_normal(S)),
    "cumulative_sum_include_initial": (lambda x: ug.cumulative_sum(x, axis=1, include_initial=True),
                                       lambda r: r.standard_normal(S)),
    "cumulative_prod": (lambda x: ug.cumulative_prod(x, axis=1), lambda r: away(r, S, 0.5)),
    "cumulative_prod_axis0": (lambda x: ug.cumulative_prod(x, axis=0), lambda r: away(r, S, 0.5)),
    "cumulative_max": (lambda x: ug.cumulative_max(x, axis=1), lambda r: distinct(r, S)),
    "cumulative_min_axis0": (lambda x: ug.cumulative_min(x, axis=0), lambda r: distinct(r, S)),
    "diff": (lambda x: ug.diff(x, axis=1), lambda r: r.standard_normal(S)),
}


@pytest.mark.parametrize("name", list(SCANS))
def test_scan(device, rng, name):
    fn, sample = SCANS[name]
    check_grad(device, rng, fn, sample(rng))


def test_cumulative_prod_with_zeros(device, rng):
    # rows with one zero and with two: the derivative of each running product in each element
    # (the products of the others), against numpy's exact Jacobian of cumprod
    x = np.array([[2.0, 0.0, 3.0, -1.5, 2.0], [0.5, 2.0, 0.0, 4.0, 0.0], [0.0, 1.5, 2.0, 0.0, 3.0],
                  [1.5, -2.0, 0.5, 3.0, 2.0]])
    c = rng.standard_normal(x.shape)
    _, pullback = ug.vjp(lambda t: ug.cumulative_prod(t, axis=1), ug.tensor(x, device=device))
    (g,) = pullback(ug.tensor(c, device=device))
    expected = np.zeros_like(x)
    for r in range(x.shape[0]):
        for j in range(x.shape[1]):
            for i in range(j + 1):
                others = np.prod(np.delete(x[r, :j + 1], i))
                expected[r, i] += c[r, j] * others
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["cumulative_max", "cumulative_min"])
def test_cumulative_extreme_ties_go_to_the_last(device, name):
    # torch's cummax rule: each running extreme's gradient goes to the last element equal to it
    x = np.array([[1.0, 3.0, 2.0, 3.0, 0.0], [2.0, 2.0, 2.0, 1.0, 5.0]])
    if name == "cumulative_min":
        x = -x
    f = getattr(ug, name)
    c = np.array([[1.0, 2.0, 3.0, 4.0, 5.0], [10.0, 20.0, 30.0, 40.0, 50.0]])
    _, pullback = ug.vjp(lambda t: f(t, axis=1), ug.tensor(x, device=device))
    (g,) = pullback(ug.tensor(c, device=device))
    expected = np.array([[1.0, 5.0, 0.0, 9.0, 0.0], [10.0, 20.0, 70.0, 0.0, 50.0]])
    np.testing.assert_array_equal(g.numpy(), expected)


# --- views ----------------------------------------------------------------------------------------

V = (4, 6)
VIEWS = {
    "reshape": lambda x: x.reshape(2, 12) * ug.arange(12, dtype=ug.float64, device=x.device),
    "reshape_3d": lambda x: x.reshape(2, 3, 4).sum(axis=1),
    "transpose": lambda x: x.T,
    "permute_3d": lambda x: x.reshape(2, 2, 6).permute(2, 0, 1),
    "matrix_transpose": lambda x: ug.matrix_transpose(x.reshape(2, 2, 6)),
    "broadcast_to": lambda x: ug.broadcast_to(x[:1], (3, 4, 6)),
    "broadcast_middle": lambda x: ug.broadcast_to(x.reshape(4, 1, 6), (4, 3, 6)),
    "expand_dims_squeeze": lambda x: ug.squeeze(ug.expand_dims(x, axis=1), axis=1) * ug.expand_dims(x, axis=0),
    "slice": lambda x: x[1:3, 2:5],
    "slice_step": lambda x: x[::2, 1::3],
    "slice_negative_step": lambda x: x[::-1, 4:0:-2],
    "slice_int_index": lambda x: x[2],
    "slice_ellipsis_newaxis": lambda x: x[..., None, 1],
    "flip": lambda x: ug.flip(x, axis=1),
    "flip_all": lambda x: ug.flip(x),
    "pad_constant": lambda x: ug.pad(x, ((1, 2), (0, 3))),
    "pad_constant_value": lambda x: ug.pad(x, ((1, 0), (2, 1)), constant_value=1.5),
    "pad_edge": lambda x: ug.pad(x, ((1, 2), (2, 1)), mode="edge"),
    "pad_reflect": lambda x: ug.pad(x, ((1, 2), (2, 1)), mode="reflect"),
    "concat": lambda x: ug.concat([x[:, :2], x.exp()[:, 1:3], x[1:3, 4:0:-2]], axis=0),
    "concat_axis1": lambda x: ug.concat([x, x * 2], axis=1),
    "stack": lambda x: ug.stack([x, x.sin(), x[::-1]], axis=1),
    "unstack": lambda x: ug.unstack(x, axis=1)[2] * ug.unstack(x, axis=0)[1][:4],
    "roll": lambda x: ug.roll(x, 2, axis=1),
    "roll_flat": lambda x: ug.roll(x, -5),
    "roll_two_axes": lambda x: ug.roll(x, (1, -2), axis=(0, 1)),
    "tile": lambda x: ug.tile(x[:2, :3], (2, 3)),
    "repeat": lambda x: ug.repeat(x[:, :3], 2, axis=1),
    "repeat_flat": lambda x: ug.repeat(x[:2, :2], 3),
    "moveaxis": lambda x: ug.moveaxis(x.reshape(2, 2, 6), 0, 2),
    "diagonal": lambda x: ug.linalg.diagonal(x),
    "diagonal_offset": lambda x: ug.linalg.diagonal(x, offset=2),
    "triu": lambda x: ug.triu(x, k=1),
    "tril": lambda x: ug.tril(x),
    "sliding_window": lambda x: ug.lib.stride_tricks.sliding_window_view(x, 3, axis=1),
    "sliding_window_2d": lambda x: ug.lib.stride_tricks.sliding_window_view(x, (2, 3)),
    "sliding_window_strided": lambda x: ug.lib.stride_tricks.sliding_window_view(x, 3, axis=1)[:, ::2],
    "ravel_then_view": lambda x: x.ravel()[3:20:4],
    "chained": lambda x: x.T[1:, ::-1].reshape(5, 4)[::2],
    "view_of_view_used_twice": lambda x: x[1:] * x[:-1],
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_view(device, rng, name):
    check_grad(device, rng, VIEWS[name], rng.standard_normal(V))


def test_sliding_window_many_taps(device, rng):
    # more window taps than autodiff.view_vjp.MAX_OVERLAP_TAPS: the transpose falls back to a scatter-add
    fn = lambda x: ug.lib.stride_tricks.sliding_window_view(x, (9, 9)) * 1.0  # noqa: E731
    x = rng.standard_normal((10, 10))
    out, pullback = ug.vjp(fn, ug.tensor(x, device=device))
    c = rng.standard_normal(out.shape)
    (g,) = pullback(ug.tensor(c, device=device))
    expected = np.zeros_like(x)
    win = np.lib.stride_tricks.sliding_window_view(expected, (9, 9), writeable=True)
    for i in range(2):
        for j in range(2):
            expected[i:i + 9, j:j + 9] += c[i, j]
    del win
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12, atol=1e-12)


# --- matmul ---------------------------------------------------------------------------------------

MATMULS = {
    "2d": (lambda a, b: a @ b, ((3, 4), (4, 2))),
    "batched": (lambda a, b: a @ b, ((2, 3, 4), (2, 4, 2))),
    "broadcast_batch": (lambda a, b: a @ b, ((2, 3, 4), (4, 5))),
    "matrix_vector": (lambda a, b: a @ b, ((3, 4), (4,))),
    "vector_matrix": (lambda a, b: a @ b, ((4,), (4, 3))),
    "vector_vector": (lambda a, b: a @ b, ((4,), (4,))),
    "transposed_operands": (lambda a, b: a.T @ b.T, ((4, 3), (2, 4))),
    "tensordot": (lambda a, b: ug.tensordot(a, b, axes=([1], [0])), ((3, 4), (4, 2))),
    "vecdot": (lambda a, b: ug.vecdot(a, b), ((3, 4), (3, 4))),
}


@pytest.mark.parametrize("name", list(MATMULS))
def test_matmul(device, rng, name):
    fn, shapes = MATMULS[name]
    check_grad(device, rng, fn, *(rng.standard_normal(s) for s in shapes))


# --- gather, scatter, sort, assign ------------------------------------------------------------

IDX = np.array([3, 0, 3, -1, 1])


def _ix(device, arr):
    return ug.tensor(np.asarray(arr), device=device)


GATHERS = {
    "take": lambda d: lambda x: ug.take(x, _ix(d, [2, 0, 2, -1]), axis=1),
    "take_flat": lambda d: lambda x: ug.take(x, _ix(d, [5, 5, 0, 17])),
    "take_along_axis": lambda d: lambda x: ug.take_along_axis(x, _ix(d, [[0, 3], [2, 2], [5, 1], [4, 0]]), axis=1),
    "take_along_axis0": lambda d: lambda x: ug.take_along_axis(x, _ix(d, np.array([[1, 0, 3, 3, 2, 1]])), axis=0),
    "integer_array_index": lambda d: lambda x: x[_ix(d, IDX)],
    "integer_array_index_axis1": lambda d: lambda x: x[:, _ix(d, [1, 1, 4])],
    "integer_array_two_axes": lambda d: lambda x: x[_ix(d, [0, 3, 3]), _ix(d, [5, 0, 0])],
    "list_index": lambda d: lambda x: x[[2, 2, 0]],
    "boolean_mask": lambda d: lambda x: x[_ix(d, np.arange(24).reshape(4, 6) % 3 == 1)],
    "boolean_mask_rows": lambda d: lambda x: x[_ix(d, np.array([True, False, True, True]))],
    "computed_boolean_mask": lambda d: lambda x: x[x > 0] * 2.0,
}


@pytest.mark.parametrize("name", list(GATHERS))
def test_gather(device, rng, name):
    check_grad(device, rng, GATHERS[name](device), away(rng, V))


SCATTERS = {
    "scatter_add_src": lambda d: lambda x, s: ug.scatter_add(x, 1, _ix(d, [[0, 2, 0], [5, 5, 5], [1, 0, 2], [3, 4, 3]]), s),
    "index_add": lambda d: lambda x, s: ug.index_add(x, 1, _ix(d, [1, 5, 1]), s),
    "setitem_tensor_index": lambda d: lambda x, s: _setitem(x, _ix(d, [2, 0]), s[:2, :1] * 3.0),
    "setitem_slice": lambda d: lambda x, s: _setitem(x, (slice(1, 3), slice(None, None, 2)), s[:2].exp()),
    "setitem_mask": lambda d: lambda x, s: _setitem(x, _ix(d, np.arange(24).reshape(4, 6) % 5 == 0), 2.0) * s[0, 0],
    "iadd_tensor_index": lambda d: lambda x, s: _iadd(x, _ix(d, [1, 2]), s[:2, :1]),
}


def _setitem(x, key, value):
    y = x * 1.0
    y[key] = value
    return y * y


def _iadd(x, key, value):
    y = x + 0.0
    y[key] += value
    return y.sin()


@pytest.mark.parametrize("name", list(SCATTERS))
def test_scatter_and_assign(device, rng, name):
    check_grad(device, rng, SCATTERS[name](device), rng.standard_normal(V), rng.standard_normal((4, 3)))


def test_bincount_weights(device, rng):
    idx = _ix(device, np.array([0, 3, 3, 1, 0, 3]))
    check_grad(device, rng, lambda w: ug.bincount(idx, weights=w) ** 2, rng.standard_normal(6))


def test_write_to_the_argument_inside_the_function(device, rng):
    # the gradient is the argument's value's, from before the write: an overwritten element
    # gets none
    def f(t):
        t[0] = 5.0
        t[2:] += t[:2] * 2
        return t * t
    x = rng.standard_normal(4)
    check_grad(device, rng, f, x)
    xt = ug.tensor(x, device=device)
    g = ug.grad(lambda t: f(t).sum())(xt)
    np.testing.assert_allclose(g.numpy(), [0.0, 2 * x[1] + 4 * (x[3] + 2 * x[1]), 2 * (x[2] + 10), 2 * (x[3] + 2 * x[1])],
                               rtol=1e-14)
    np.testing.assert_array_equal(xt.numpy(), x)   # and the caller's tensor is not written


def test_host_linalg_is_not_silently_constant(device, rng):
    # numpy.linalg on the host: differentiated by its own rules (test_linalg_grad.py checks them
    # all), or a TypeError where there is none (QR's complete Q of a tall matrix), never a 0
    x = ug.tensor(rng.standard_normal((3, 3)) + 3 * np.eye(3), device=device)
    g = ug.grad(lambda t: ug.linalg.inv(t).sum())(x).numpy()
    inv = np.linalg.inv(x.numpy())
    np.testing.assert_allclose(g, -np.outer(inv.sum(axis=0), inv.sum(axis=1)), rtol=1e-12)   # -A^-T 1 1^T A^-T
    tall = ug.tensor(rng.standard_normal((4, 3)), device=device)
    with pytest.raises(TypeError, match="complete"):
        ug.grad(lambda t: ug.linalg.qr(t, mode="complete").Q.sum())(tall)


def test_in_place_write_inside_the_function(device, rng):
    # the brief's ASSIGN case: y = x * 1; y[1:3] = x[0:2] * 2; then y is used
    def f(x):
        y = x * 1
        y[1:3] = x[0:2] * 2
        return y * y.sum()
    check_grad(device, rng, f, rng.standard_normal(6))


def test_assign_method_inside_the_function(device, rng):
    def f(x):
        y = ug.zeros((4, 6), dtype=ug.float64, device=x.device) + x
        y[:, 1].assign(x[:, 0].exp())
        return y.tanh()
    check_grad(device, rng, f, rng.standard_normal(V))


SORTS = {
    "sort": lambda x: ug.sort(x, axis=1),
    "sort_axis0_descending": lambda x: ug.sort(x, axis=0, descending=True),
    "topk": lambda x: ug.topk(x, 3, axis=1)[0],
    "topk_smallest": lambda x: ug.topk(x, 2, axis=0, largest=False)[0],
    "sort_then_weight": lambda x: ug.sort(x.reshape(-1)) * ug.arange(24, dtype=ug.float64, device=x.device),
    "median_by_sort": lambda x: ug.sort(x, axis=1)[:, 2:4].mean(axis=1),
}


@pytest.mark.parametrize("name", list(SORTS))
def test_sort(device, rng, name):
    check_grad(device, rng, SORTS[name], distinct(rng, V))


# --- composites: softmax & co, layernorm, an MLP ------------------------------------------------


def layernorm(x, eps=1e-5):
    m = x.mean(axis=-1, keepdims=True)
    xc = x - m
    return xc / ((xc * xc).mean(axis=-1, keepdims=True) + eps).sqrt()


def test_layernorm(device, rng):
    check_grad(device, rng, layernorm, rng.standard_normal(S))


def test_mlp_loss(device, rng):
    def loss(w1, b1, w2, x):
        h = (x @ w1 + b1).relu()
        logits = h @ w2
        return -(logits.log_softmax(axis=-1)[:, 0]).mean()
    x = rng.standard_normal((5, 3))
    check_grad(device, rng, loss, rng.standard_normal((3, 4)), rng.standard_normal(4) + 0.5,
               rng.standard_normal((4, 3)), x)
