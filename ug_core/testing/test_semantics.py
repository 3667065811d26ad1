"""The meaning of each (op, dtype kind), as ug_core.ops defines it next to each op, on every
device: edge cases where numpy, IEEE and the hardware disagree (signed zeros, NaN, integer
division and powers, pow's special cases) give the same result everywhere.

Ops the frontend never builds (int DIV, int RECIP: numpy promotes them to float) are run as
kernels built directly, so that every renderer is checked on them too."""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug
from ug_core import ops
from ug_core.device import Buffer
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Store
from ug_core.ops import Op
from ug_core.plugins import registry
from ug_core.view import View

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64 = np.dtype(np.int32), np.dtype(np.int64)
FLOATS = [F32, F64, F16]
INTS = [I32, I64]


def run_alu(device: str, op: Op, inputs: list[np.ndarray], out_dtype: np.dtype) -> np.ndarray:
    """`op` applied elementwise to flat `inputs` by one kernel compiled and run on `device`."""
    n = inputs[0].size
    eb = ExprBuilder()
    view = View.contiguous((n,))
    loads = tuple(eb.load(i + 1, (view,), a.dtype) for i, a in enumerate(inputs))
    args = (BufferArg(out_dtype, n, True),) + tuple(BufferArg(a.dtype, n, False) for a in inputs)
    kernel = Kernel(f"semantics_{op.name}", args, (n,), (), (), (Store(0, (n,), view, eb.alu(op, loads, out_dtype)),))
    dev = registry.get(device)
    buffers = [Buffer(dev, n, out_dtype)] + [Buffer(dev, n, a.dtype).copy_in(a) for a in inputs]
    dev.run(dev.compile(kernel), buffers)
    return buffers[0].numpy()


def same_values(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Elementwise: equal with the same sign of zero, or both NaN."""
    got, expected = np.asarray(got), np.asarray(expected)
    if expected.dtype.kind == "c":   # each part
        return same_values(got.real, expected.real) & same_values(got.imag, expected.imag)
    if expected.dtype.kind != "f":
        return got == expected
    return (np.isnan(got) & np.isnan(expected)) | ((got == expected) & (np.signbit(got) == np.signbit(expected)))


def assert_same(got, expected, inputs=()) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    bad = ~same_values(got, expected)
    if bad.any():
        rows = [tuple(np.asarray(a)[i] for a in inputs) + (got[i], expected[i]) for i in np.flatnonzero(bad)[:10]]
        raise AssertionError(f"{int(bad.sum())} of {bad.size} differ (inputs..., got, expected): {rows}")


def assert_within_ulp(got, exact, dtype: np.dtype, max_ulp: float, inputs=()) -> None:
    """Specials exact (NaN, infinities, the sign of zero); finite results within `max_ulp` of
    the exact (float64 or better) values, in ulps of `dtype`."""
    got = np.asarray(got)
    exact = np.asarray(exact, dtype=np.float64)
    with np.errstate(all="ignore"):
        rounded = exact.astype(dtype)
        spacing = np.maximum(np.spacing(np.abs(rounded)).astype(np.float64), float(np.finfo(dtype).smallest_subnormal))
        err = np.abs(got.astype(np.float64) - exact) / spacing
    special = ~np.isfinite(rounded) | (rounded == 0)
    ok = np.where(special, same_values(got, rounded), err <= max_ulp) | same_values(got, rounded)
    if not ok.all():
        rows = [tuple(np.asarray(a)[i] for a in inputs) + (got[i], rounded[i]) for i in np.flatnonzero(~ok)[:10]]
        raise AssertionError(f"{int((~ok).sum())} of {ok.size} beyond {max_ulp} ulp (inputs..., got, expected): {rows}")


# --- MAX / MIN: IEEE 754-2019 maximum / minimum ------------------------------------------------

MAX_A = [0.0, -0.0, -0.0, 0.0, np.nan, 1.0, np.nan, -np.inf, 2.0, -3.0]
MAX_B = [-0.0, 0.0, -0.0, 0.0, 1.0, np.nan, np.nan, np.inf, 2.0, -1.0]
MAX_EXPECTED = [0.0, 0.0, -0.0, 0.0, np.nan, np.nan, np.nan, np.inf, 2.0, -1.0]
MIN_EXPECTED = [-0.0, -0.0, -0.0, 0.0, np.nan, np.nan, np.nan, -np.inf, 2.0, -3.0]


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_max_min_of_signed_zeros_and_nan(device, require_dtype, dt):
    require_dtype(dt)
    a, b = np.array(MAX_A, dt), np.array(MAX_B, dt)
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    assert_same(ug.maximum(x, y).numpy(), np.array(MAX_EXPECTED, dt), (a, b))
    assert_same(ug.minimum(x, y).numpy(), np.array(MIN_EXPECTED, dt), (a, b))
    assert_same(ug.maximum(y, x).numpy(), np.array(MAX_EXPECTED, dt), (b, a))   # commutative
    assert_same(ug.minimum(y, x).numpy(), np.array(MIN_EXPECTED, dt), (b, a))
    assert_same(x.relu().numpy()[:4], np.array([0.0, 0.0, 0.0, 0.0], dt))       # max(-0, +0) is +0
    assert_same(ops.maximum(a, b), np.array(MAX_EXPECTED, dt))


@pytest.mark.parametrize("n", [7, 4099, 300_007])
def test_max_min_reductions_of_signed_zeros(device, n):
    rng = np.random.default_rng(n)
    zeros = np.where(rng.random(n) < 0.5, np.float32(-0.0), np.float32(0.0)).astype(np.float32)
    zeros[n // 3] = 0.0
    zeros[n // 2] = -0.0
    x = ug.tensor(zeros, device=device)
    assert_same(x.max().numpy(), np.float32(0.0))
    assert_same(x.min().numpy(), np.float32(-0.0))
    negative = ug.tensor(np.full(n, -0.0, np.float32), device=device)
    assert_same(negative.max().numpy(), np.float32(-0.0))
    positive = ug.tensor(np.zeros(n, np.float32), device=device)
    assert_same(positive.min().numpy(), np.float32(0.0))
    with_nan = zeros.copy()
    with_nan[n - 1] = np.nan
    assert np.isnan(ug.tensor(with_nan, device=device).max().numpy())
    assert np.isnan(ug.tensor(with_nan, device=device).min().numpy())


# --- integer DIV / RECIP (not built by the frontend: run as kernels) ---------------------------

def _int_pairs(dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
    a = [7, -7, 7, -7, 6, -6, 0, 5, -5, lo, lo, hi, hi, lo, 1, -1, 3]
    b = [2, 2, -2, -2, 3, 3, 5, 0, 0, -1, 1, -1, 2, lo, lo, hi, 7]
    return np.array(a, dt), np.array(b, dt)


@pytest.mark.parametrize("dt", INTS, ids=str)
def test_int_division_is_floor_division(device, require_dtype, dt):
    require_dtype(dt)
    a, b = _int_pairs(dt)
    got = run_alu(device, Op.DIV, [a, b], dt)
    with np.errstate(all="ignore"):
        expected = np.floor_divide(a, b)
    lo = np.iinfo(dt).min
    assert list(expected[:10]) == [3, -4, -4, 3, 2, -2, 0, 0, 0, lo]   # x // 0 == 0, INT_MIN // -1 == INT_MIN
    assert_same(got, expected, (a, b))
    assert_same(ops.divide(a, b), expected)


@pytest.mark.parametrize("dt", INTS, ids=str)
def test_int_reciprocal(device, require_dtype, dt):
    require_dtype(dt)
    lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
    a = np.array([0, 1, -1, 2, -2, 7, hi, lo], dt)
    got = run_alu(device, Op.RECIP, [a], dt)
    assert_same(got, np.array([lo, 1, -1, 0, 0, 0, 0, 0], dt), (a,))


@pytest.mark.parametrize("dt", INTS, ids=str)
def test_int_division_and_true_division_from_the_frontend(device, require_dtype, dt):
    require_dtype(dt)
    a, b = _int_pairs(dt)
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    with np.errstate(all="ignore"):
        expected = np.true_divide(a, b)
    assert (x / y).dtype == expected.dtype == F64   # numpy's true division: never an int DIV
    assert_same((x / y).numpy(), expected, (a, b))


# --- POW on ints -------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", INTS, ids=str)
def test_int_power_with_negative_tensor_exponents(device, require_dtype, dt):
    require_dtype(dt)
    base = np.array([0, 1, -1, 2, -2, 3, -1, 1, 5, -3, 2, 0, 7], dt)
    exponent = np.array([-1, -5, -3, -1, -2, -7, -4, -1, 0, 3, 62, 0, 2], dt)
    got = (ug.tensor(base, device=device) ** ug.tensor(exponent, device=device)).numpy()
    # ops.power: 1 / base**-e truncated for e < 0 (numpy raises); wrapping otherwise
    expected = np.array([0, 1, -1, 0, 0, 0, 1, 1, 1, -27, np.power(dt.type(2), dt.type(62)), 1, 49], dt)
    assert_same(got, expected, (base, exponent))
    assert_same(ops.power(base, exponent), expected)


@pytest.mark.parametrize("dt", INTS + [np.dtype(bool)], ids=str)
@pytest.mark.parametrize("exponent", [-1, -2, np.int64(-3), [-1, 2, 1], np.array([1, -2, 0])], ids=repr)
def test_int_power_with_known_negative_exponent_raises(device, dt, exponent):
    x = ug.tensor(np.array([1, 2, 3], dt), device=device)
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        x ** exponent  # raised when the op is built, as numpy raises
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        np.power(np.array([1, 2, 3], dt), exponent)
    assert (x.astype(np.float32) ** -1).dtype == F32                      # floats are fine
    assert (x ** 2).numpy().tolist() == (np.array([1, 2, 3], dt) ** 2).tolist()


# --- POW on floats -----------------------------------------------------------------------------

POW_BASES = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, np.inf, -np.inf, np.nan, 1.4e-45, -3e-39,
             1e19, -1e19, 1e-19, 7.25, -1.0001, 123.0]
POW_EXPONENTS = [0.0, -0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 8.0, 9.0, -1.0, -2.0, -3.0, -4.0, -5.0, 0.5, -0.5, 2.5,
                 1e-45, np.inf, -np.inf, np.nan, 31.0]


def _exact_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.power(a.astype(np.float64), b.astype(np.float64))


# float64 pow on vulkan is exp(y log x) in float64 software (the GLSL.std.450 functions have no
# float64): its error grows with |y log x|, to ~1e-14 relative (a few hundred ulp)
POW_ULP = {F32: 2, F16: 1, F64: 512}


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_float_pow_edge_cases_with_a_tensor_exponent(device, require_dtype, dt):
    require_dtype(dt)
    grid = np.array(np.meshgrid(POW_BASES, POW_EXPONENTS)).reshape(2, -1)
    with np.errstate(all="ignore"):
        a, b = grid.astype(dt)
    got = (ug.tensor(a, device=device) ** ug.tensor(b, device=device)).numpy()
    assert_within_ulp(got, _exact_pow(a, b), dt, POW_ULP[dt], (a, b))


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("exponent", [0, 1, 2, 3, 4, 5, 7, 8, 9, -1, -2, -3, -4, -5, 0.5, 2.0, -2.0, 2.5, -0.5],
                         ids=repr)
def test_float_pow_edge_cases_with_a_scalar_exponent(device, require_dtype, dt, exponent):
    require_dtype(dt)
    with np.errstate(all="ignore"):
        a = np.array(POW_BASES + list(np.linspace(-3, 3, 41)), np.float64).astype(dt)
    got = (ug.tensor(a, device=device) ** exponent).numpy()
    assert got.dtype == dt
    # multiplies (x**8: 7 roundings) stay within 4 ulp; specials exactly as numpy's pow, but
    # 0.5, which is sqrt (ops.power)
    with np.errstate(all="ignore"):
        exact = np.sqrt(a.astype(np.float64)) if exponent == 0.5 else _exact_pow(a, np.full_like(a, exponent))
    assert_within_ulp(got, exact, dt, max(4, POW_ULP[dt]), (a,))


def test_pow_special_values_exactly(device):
    x = ug.tensor(np.array([0.0, -0.0, np.nan, np.inf, -np.inf, -0.0, -0.0, -np.inf], np.float32), device=device)
    assert_same((x ** 0).numpy(), np.ones(8, np.float32))                            # 0**0, nan**0 == 1
    assert_same((x ** -1).numpy()[:5], np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32))
    assert_same((x ** 3).numpy()[:5], np.array([0.0, -0.0, np.nan, np.inf, -np.inf], np.float32))
    # a constant 0.5 is sqrt (numpy's x ** 0.5): sqrt(-0) == -0, sqrt(-inf) is NaN
    assert_same((x ** 0.5).numpy(), np.array([0.0, -0.0, np.nan, np.inf, np.nan, -0.0, -0.0, np.nan], np.float32))
    assert_same((x ** -2).numpy()[:5], np.array([np.inf, np.inf, np.nan, 0.0, 0.0], np.float32))
    y = ug.tensor(np.array([-1.0, -1.0, 1.0, np.nan], np.float32), device=device)
    e = ug.tensor(np.array([np.inf, -np.inf, np.nan, 0.0], np.float32), device=device)
    assert_same((y ** e).numpy(), np.ones(4, np.float32))                            # C99: pow(-1, +-inf) == 1
    m = ug.tensor(np.array([-0.0, -0.0, -np.inf, -np.inf, -2.0], np.float32), device=device)
    f = ug.tensor(np.array([-1.0, -3.0, 0.5, -0.5, 0.5], np.float32), device=device)
    assert_same((m ** f).numpy(), np.array([-np.inf, -np.inf, np.inf, 0.0, np.nan], np.float32))


# --- transcendental special values -------------------------------------------------------------

SPECIAL_UNARY = {
    "exp": ([-np.inf, np.inf, np.nan, 0.0, -0.0, 89.0, -104.0, -100.0, 88.72283],
            [0.0, np.inf, np.nan, 1.0, 1.0, np.inf, 0.0, 3.8e-44, 3.4e38]),
    "log": ([-np.inf, np.inf, np.nan, 0.0, -0.0, -1.0, 1.0, 1.4e-45, -1e-45],
            [np.nan, np.inf, np.nan, -np.inf, -np.inf, np.nan, 0.0, -103.27893, np.nan]),
    "tanh": ([-np.inf, np.inf, np.nan, 0.0, -0.0, 1e-6, -1e-6, 1e-40, 20.0],
             [-1.0, 1.0, np.nan, 0.0, -0.0, 1e-6, -1e-6, 1e-40, 1.0]),
    "sin": ([-np.inf, np.inf, np.nan, 0.0, -0.0, 1e-40, -1e-30],
            [np.nan, np.nan, np.nan, 0.0, -0.0, 1e-40, -1e-30]),
    "cos": ([-np.inf, np.inf, np.nan, 0.0, -0.0, 1e-40],
            [np.nan, np.nan, np.nan, 1.0, 1.0, 1.0]),
    "sqrt": ([-np.inf, np.inf, np.nan, 0.0, -0.0, -1.0, 1e-45],
             [np.nan, np.inf, np.nan, 0.0, -0.0, np.nan, 3.7433921e-23]),
}


@pytest.mark.parametrize("name", sorted(SPECIAL_UNARY))
@pytest.mark.parametrize("dt", [F32, F16], ids=str)
def test_transcendental_special_values(device, require_dtype, name, dt):
    require_dtype(dt)
    inputs, expected = SPECIAL_UNARY[name]
    with np.errstate(all="ignore"):
        x = np.array(inputs, np.float32).astype(dt)
        want = np.array(expected, np.float32).astype(dt)
        exact = getattr(np, name)(x.astype(np.float64))
    got = getattr(ug.tensor(x, device=device), name)().numpy()
    assert got.dtype == dt
    assert_within_ulp(got, exact, dt, 1, (x,))
    if dt == F32:  # (float16 flushes some of these inputs to 0)
        special = ~np.isfinite(want) | (want == 0) | (np.abs(want) == 1) | (want == x)
        assert_same(got[special], want[special], (x[special],))


