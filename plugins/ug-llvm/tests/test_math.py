"""Accuracy of the vectorizable transcendentals against numpy (float64 reference), incl. edge cases."""

import numpy as np
import pytest

import ug_core as ug

SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-38, 1.17549435e-38, 3.4e38, -3.4e38, 1.0, -1.0]


def _inputs(op, dtype, rng):
    n = 200_003  # not a multiple of the vector width: the scalar tail runs too
    if op == "exp":
        lo, hi = (-110, 95) if dtype == np.float32 else (-760, 720)
        x = rng.uniform(lo, hi, n)
    elif op == "log":
        top = 38 if dtype == np.float32 else 307
        x = 10.0 ** rng.uniform(-top - (7 if dtype == np.float32 else 16), top, n)
        x = np.concatenate([x, rng.uniform(0.5, 2.0, 10_000), -x[:100]])
    elif op in ("sin", "cos"):
        x = np.concatenate([rng.uniform(-10, 10, n), rng.uniform(-1e4, 1e4, 20_000),
                            np.sign(rng.standard_normal(20_000)) * 10.0 ** rng.uniform(4, 38, 20_000)])
    elif op == "tanh":
        x = np.concatenate([rng.uniform(-1, 1, n), rng.uniform(-25, 25, 20_000)])
    x = np.concatenate([x, SPECIALS]).astype(dtype)
    return x


def _ulp_error(got, x, op, dtype):
    ref = getattr(np, op)(x.astype(np.float64))       # near-exact for float32 inputs
    if dtype == np.float64:
        ref_l = getattr(np, op)(x.astype(np.longdouble))  # a few more bits where the platform has them
        ref = ref_l
    ref_d = ref.astype(dtype)                            # the correctly rounded result (inf on overflow)
    ok = (np.isnan(got) & np.isnan(ref_d)) | (got == ref_d)
    spacing = np.spacing(np.abs(ref_d)).astype(np.float64)
    spacing = np.maximum(spacing, np.finfo(dtype).smallest_subnormal)
    err = np.abs(got.astype(np.float64) - ref.astype(np.float64)) / spacing
    err[ok] = 0
    err[~ok & ~np.isfinite(err)] = np.inf
    return err


@pytest.mark.parametrize("op", ["exp", "log", "sin", "cos", "tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transcendental_accuracy(op, dtype):
    rng = np.random.default_rng(1)
    x = _inputs(op, dtype, rng)
    with np.errstate(all="ignore"):
        got = getattr(ug.tensor(x, device="cpu"), op)().numpy()
        err = _ulp_error(got, x, op, dtype)
    worst = int(np.argmax(err))
    limit = 4 if dtype == np.float32 else 8
    assert err[worst] <= limit, f"{op} {np.dtype(dtype).name}: {err[worst]:.1f} ulp at x={x[worst]!r} got {got[worst]!r}"
    # NaN in, NaN out; and the special values behave like numpy
    with np.errstate(all="ignore"):
        s = np.array(SPECIALS, dtype)
        ref = getattr(np, op)(s)
    got_s = getattr(ug.tensor(s, device="cpu"), op)().numpy()
    assert np.array_equal(np.isnan(got_s), np.isnan(ref))
    assert np.array_equal(got_s[np.isinf(ref)], ref[np.isinf(ref)])


@pytest.mark.parametrize("op", ["exp", "log", "sin", "cos", "tanh"])
def test_transcendental_float16(op):
    x = np.linspace(-8, 8, 4001).astype(np.float16)
    if op == "log":
        x = np.abs(x) + np.float16(0.01)
    got = getattr(ug.tensor(x, device="cpu"), op)().numpy()
    ref = getattr(np, op)(x)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=2e-3, atol=1e-3)


def test_huge_sin_cos_arguments_are_exact():
    # Payne-Hanek reduction: huge arguments are reduced exactly, like libm
    x = np.array([1e10, 3.4e38, -2.5e22, 12345678.0, 1e30, 120.0, 119.99999, 1e5], np.float32)
    for op in ("sin", "cos"):
        got = getattr(ug.tensor(x, device="cpu"), op)().numpy()
        ref = getattr(np, op)(x.astype(np.float64))
        assert np.all(np.abs(got - ref) <= 2 * np.spacing(np.abs(ref).astype(np.float32))), (op, got, ref)


POW_SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 1e-30, 1e30, 7.5, -7.5,
                         1e-45, np.inf, -np.inf, np.nan], np.float32)


def test_pow_float32_special_cases_follow_c99():
    """Every pair of special values: zeros of both signs, +-1, odd/even integers, non-integers,
    infinities and NaN give numpy's (C99 powf) value, sign included."""
    x, y = (a.ravel() for a in np.meshgrid(POW_SPECIALS, POW_SPECIALS))
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    got = (ug.tensor(x, device="cpu") ** ug.tensor(y, device="cpu")).numpy()
    same_nan = np.isnan(got) == np.isnan(want)
    assert same_nan.all(), list(zip(x[~same_nan], y[~same_nan], got[~same_nan]))
    fin = ~np.isnan(want)
    assert (np.signbit(got[fin]) == np.signbit(want[fin])).all()
    assert (np.isinf(got) == np.isinf(want)).all() and ((got == 0) == (want == 0)).all()
    close = np.abs(got[fin & np.isfinite(want)].astype(np.float64) - want[fin & np.isfinite(want)])
    assert (close <= np.spacing(np.abs(want[fin & np.isfinite(want)])).astype(np.float64)).all()


def test_pow_float32_is_within_one_ulp_and_vectorized():
    rng = np.random.default_rng(3)
    n = 300_001
    x = (np.exp(rng.uniform(-40, 40, n)) * rng.choice([1, -1], n)).astype(np.float32)
    y = rng.uniform(-8, 8, n).astype(np.float32)
    y[::3] = np.round(y[::3])  # integer exponents: negative bases give real results
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(np.float64), y.astype(np.float64))
        got = (ug.tensor(x, device="cpu") ** ug.tensor(y, device="cpu")).numpy()
        ref_f = ref.astype(np.float32)  # inf where float32 overflows
    assert np.array_equal(np.isnan(got), np.isnan(ref_f)) and np.array_equal(np.isinf(got), np.isinf(ref_f))
    fin = np.isfinite(ref_f) & (np.abs(ref_f) > np.finfo(np.float32).tiny)
    ulp = np.abs(got[fin].astype(np.float64) - ref[fin]) / np.spacing(np.abs(ref_f[fin])).astype(np.float64)
    assert ulp.max() <= 1.0, ulp.max()
    # the kernel has no libm call left: the loop vectorizer could widen it
    from ug_llvm.jit import get_jit
    t = ug.tensor(x[:4096], device="cpu") ** 2.5
    k = [i for i in ug.schedule(t).items if i.kind == "kernel"][-1].kernel
    asm = get_jit().target.assembly(ug.registry.get("cpu").render(k))
    import re
    assert not re.search(r"call\w*\s+\S*pow", asm), "float32 pow must not call libm"
    assert re.search(r"\bv\w+ps\s.*%[yz]mm", asm), "no packed float instructions: not vectorized"
