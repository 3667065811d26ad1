"""Complex numbers (complex64, complex128) on every device, against numpy.

Complex values are a dtype of the graph (buffers, views, gathers and concatenations move them as
they are); complex arithmetic is built from real ops on the parts (ug_core.array_api._complex)
and the core's legalization splits what stays complex in a kernel into pairs of real values, so
every device computes them without code of its own. These tests check the values on each
device: buffers in and out, views and data movement, arithmetic with the special values
(numpy's results; where numpy's multiply or divide loses an infinity to NaN + NaN j, C99 Annex
G's), reductions and scans, matmul / vecdot, casts, fusion, ug.jit and ug.grad (against torch)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.test_semantics import same_values

C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
COMPLEX = [C64, C128]


def crand(rng: np.random.Generator, shape, dt) -> np.ndarray:
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)


def check_same(got, want: np.ndarray) -> None:
    """Same dtype, shape and values, bit for bit per part (NaN equal to NaN, -0.0 not 0.0)."""
    arr = got.numpy() if isinstance(got, ug.Tensor) else np.asarray(got)
    want = np.asarray(want)
    assert arr.dtype == want.dtype and arr.shape == want.shape, (arr.dtype, arr.shape, want.dtype, want.shape)
    bad = ~same_values(arr, want)
    assert not bad.any(), f"{int(bad.sum())} differ: got {arr[bad][:6]}, want {want[bad][:6]}"


def _part_close(got: np.ndarray, want: np.ndarray, eps: float, tiny: float, scale: np.ndarray | float = 0.0
                ) -> np.ndarray:
    """Per element: both NaN, or equal infinities, or finite and within 8 eps relative (of the
    larger of the two, and of `scale`) plus `tiny` absolute."""
    both_nan = np.isnan(got) & np.isnan(want)
    inf = np.isinf(got) | np.isinf(want)
    with np.errstate(all="ignore"):
        size = np.maximum(np.abs(got), np.abs(want)).astype(np.float64) + np.nan_to_num(scale, posinf=0.0)
        near = np.abs(got.astype(np.float64) - want) <= 8 * eps * size + tiny
    return both_nan | np.where(inf, got == want, near & np.isfinite(got) & np.isfinite(want))


def check_close(got, want: np.ndarray, scale: np.ndarray | None = None) -> None:
    """Same dtype and shape; each part NaN where numpy's is, the same infinity where numpy's is
    one, else within a few ulp of the larger of the two and of `scale` (a complex array: the
    real parts scale the real parts; for a product, |a c| + |b d| + (|a d| + |b c|) j, as
    numpy's complex64 multiply contracts into fma: where a c - b d cancels, its result is off
    by b d's rounding error, which the plain formula's is not)."""
    arr = got.numpy() if isinstance(got, ug.Tensor) else np.asarray(got)
    want = np.asarray(want)
    assert arr.dtype == want.dtype and arr.shape == want.shape, (arr.dtype, arr.shape, want.dtype, want.shape)
    info = np.finfo(want.real.dtype)
    s = np.zeros(want.shape, np.complex128) if scale is None else scale
    ok = _part_close(arr.real, want.real, float(info.eps), float(info.tiny), s.real) & \
        _part_close(arr.imag, want.imag, float(info.eps), float(info.tiny), s.imag)
    assert ok.all(), f"{int((~ok).sum())} differ: got {arr[~ok][:6]}, want {want[~ok][:6]}"


# --- buffers, views, data movement -------------------------------------------------------------


@pytest.mark.parametrize("dt", COMPLEX, ids=str)
def test_buffers_in_and_out(device, require_dtype, dt, rng):
    require_dtype(dt)
    a = crand(rng, (3, 4), dt)
    a[0, 0] = complex(-0.0, np.inf)
    a[1, 2] = complex(np.nan, -0.0)
    x = ug.tensor(a, device=device)
    assert x.dtype == dt
    check_same(x, a)
    check_same(np.asarray(x), a)
    check_same(ug.tensor([[1j, 2], [3, -4j]], device=device), np.array([[1j, 2], [3, -4j]], np.complex64))
    assert complex(ug.tensor(a[1, 1], device=device)) == complex(a[1, 1])
    assert ug.tensor(a, device=device)[2, 3].item() == a[2, 3]


@pytest.mark.parametrize("dt", COMPLEX, ids=str)
def test_views_and_data_movement(device, require_dtype, dt, rng):
    """Views, slices, transposes, concatenation, padding, flips, gathers, where and writes move
    complex values as they are."""
    require_dtype(dt)
    a, b = crand(rng, (4, 5), dt), crand(rng, (4, 5), dt)
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    check_same(x[1:, ::2], a[1:, ::2])
    check_same(x.T, a.T)
    check_same(x.reshape(5, 4), a.reshape(5, 4))
    check_same(ug.concat([x, y], axis=1), np.concatenate([a, b], axis=1))
    check_same(ug.stack([x, y]), np.stack([a, b]))
    check_same(ug.flip(x, axis=0), a[::-1])
    check_same(ug.pad(x, 1), np.pad(a, 1))
    check_same(ug.pad(x, ((1, 0), (0, 2)), constant_value=1 - 2j), np.pad(a, ((1, 0), (0, 2)), constant_values=1 - 2j))
    idx = np.array([3, 0, 0, 2])
    check_same(ug.take(x, ug.tensor(idx, device=device), axis=0), a[idx])
    check_same(ug.take_along_axis(x, ug.tensor(np.argsort(a.real, axis=1), device=device), axis=1),
               np.take_along_axis(a, np.argsort(a.real, axis=1), axis=1))
    mask = a.real > 0
    check_same(ug.where(ug.tensor(mask, device=device), x, y), np.where(mask, a, b))
    check_same(ug.where(ug.tensor(mask, device=device), x, 2j), np.where(mask, a, dt.type(2j)))
    check_same(ug.broadcast_to(x[:1], (3, 5)), np.broadcast_to(a[:1], (3, 5)))
    z = ug.tensor(a, device=device)
    z[1, 2] = 5 - 1j
    z[2:, 0] = ug.tensor(b[2:, 0], device=device)
    z[ug.tensor(mask, device=device)] = -1j
    want = a.copy()
    want[1, 2] = 5 - 1j
    want[2:, 0] = b[2:, 0]
    want[mask] = -1j
    check_same(z, want)
    full = ug.full((2, 3), 1.5 - 0.5j, dtype=dt, device=device)
    check_same(full, np.full((2, 3), 1.5 - 0.5j, dt))
    check_same(ug.zeros((2,), dtype=dt, device=device), np.zeros(2, dt))
    check_same(ug.ones((2,), dtype=dt, device=device), np.ones(2, dt))
    check_close(ug.linspace(0, 2 + 4j, 5, dtype=dt, device=device), np.linspace(0, 2 + 4j, 5, dtype=dt))


# --- arithmetic with special values -----------------------------------------------------------


def _grid(dt: np.dtype) -> np.ndarray:
    """Every pair (re, im) of the special values: zeros of both signs, +-1, +-inf, NaN, tiny and
    huge finite values (whose products stay finite), as complex numbers of `dt`."""
    huge = 1e18 if dt == C64 else 1e150
    tiny = 1e-18 if dt == C64 else 1e-150
    parts = np.array([0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan, tiny, huge, -huge], np.float64)
    re, im = np.meshgrid(parts, parts, indexing="ij")
    out = np.empty(re.size, dt)
    out.real, out.imag = re.ravel(), im.ravel()
    return out


def _box(v: float) -> float:
    return math.copysign(1.0 if math.isinf(v) else 0.0, v)


def _zero_nan(v: float) -> float:
    return math.copysign(0.0, v) if math.isnan(v) else v


def annex_g_multiply(z: complex, w: complex) -> complex:
    """C99 Annex G's _Cmultd (G.5.1, example 1), in Python floats."""
    a, b, c, d = z.real, z.imag, w.real, w.imag
    ac, bd, ad, bc = a * c, b * d, a * d, b * c
    x, y = ac - bd, ad + bc
    if math.isnan(x) and math.isnan(y):
        recalc = False
        if math.isinf(a) or math.isinf(b):
            a, b = _box(a), _box(b)
            c, d = _zero_nan(c), _zero_nan(d)
            recalc = True
        if math.isinf(c) or math.isinf(d):
            c, d = _box(c), _box(d)
            a, b = _zero_nan(a), _zero_nan(b)
            recalc = True
        if not recalc and any(math.isinf(v) for v in (ac, bd, ad, bc)):
            a, b, c, d = (_zero_nan(v) for v in (a, b, c, d))
            recalc = True
        if recalc:
            x, y = math.inf * (a * c - b * d), math.inf * (a * d + b * c)
    return complex(x, y)


def annex_g_divide_recovery(z: complex, w: complex) -> complex | None:
    """C99 Annex G's _Cdivd (G.5.1, example 2) recovery of a NaN + NaN j quotient, in Python
    floats: the quotient it gives instead, or None where it leaves NaN + NaN j."""
    a, b, c, d = z.real, z.imag, w.real, w.imag
    if c == 0 and d == 0 and not (math.isnan(a) and math.isnan(b)):
        return complex(math.copysign(math.inf, c) * a if a == a else math.nan,
                       math.copysign(math.inf, c) * b if b == b else math.nan)
    if (math.isinf(a) or math.isinf(b)) and math.isfinite(c) and math.isfinite(d):
        a, b = _box(a), _box(b)
        return complex(math.inf * (a * c + b * d), math.inf * (b * c - a * d))
    if (math.isinf(c) or math.isinf(d)) and math.isfinite(a) and math.isfinite(b):
        c, d = _box(c), _box(d)
        return complex(0.0 * (a * c + b * d), 0.0 * (b * c - a * d))
    return None


def _product_scale(za: np.ndarray, wa: np.ndarray) -> np.ndarray:
    """|a c| + |b d| + (|a d| + |b c|) j: what the rounding error of a product's parts scales with."""
    a, b, c, d = (np.abs(v).astype(np.float64) for v in (za.real, za.imag, wa.real, wa.imag))
    with np.errstate(all="ignore"):
        return (a * c + b * d) + 1j * (a * d + b * c)


def _inf_times(s: float, v: float) -> float:
    """s * v in Python floats, with IEEE's inf * 0 = NaN (Python raises nothing for it)."""
    with np.errstate(all="ignore"):
        return float(np.float64(s) * np.float64(v))


def _expected(op: str, za: np.ndarray, wa: np.ndarray) -> np.ndarray:
    """numpy's result, but C99 Annex G's where numpy's is NaN + NaN j and Annex G recovers an
    infinity or a zero from it."""
    with np.errstate(all="ignore"):
        want = za * wa if op == "*" else za / wa
    out = want.copy()
    for i in np.flatnonzero(np.isnan(want.real) & np.isnan(want.imag)):
        z, w = complex(za[i]), complex(wa[i])
        with np.errstate(all="ignore"):
            if op == "*":
                got = annex_g_multiply(z, w)
            else:
                rec = annex_g_divide_recovery(z, w)
                got = complex(math.nan, math.nan) if rec is None else rec
        out[i] = got
    return out


@pytest.mark.parametrize("op", ["*", "/"])
@pytest.mark.parametrize("dt", COMPLEX, ids=str)
def test_multiply_divide_special_values(device, require_dtype, dt, op):
    """Every pair of grid values (121 x 121): numpy's products and quotients (its Smith division:
    an exact match; its multiply: to an ulp, it contracts into fma), and where numpy gives
    NaN + NaN j, Annex G's recovered infinities and zeros ((inf + inf j) * (1 + 0j) = inf + inf j,
    1 / (inf + inf j) = 0)."""
    require_dtype(dt)
    g = _grid(dt)
    za, wa = np.repeat(g, g.size), np.tile(g, g.size)
    x, y = ug.tensor(za, device=device), ug.tensor(wa, device=device)
    got = x * y if op == "*" else x / y
    want = _expected(op, za, wa)
    check_close(got, want, _product_scale(za, wa) if op == "*" else None)
    # the recovered ones are exercised (not all NaN + NaN j): an infinity times a nonzero number
    inf_one = np.array([complex(np.inf, np.inf)], dt), np.array([1 + 0j], dt)
    recovered = ug.tensor(inf_one[0], device=device) * ug.tensor(inf_one[1], device=device)
    assert np.isinf(recovered.numpy().real).all() and np.isinf(recovered.numpy().imag).all()


@pytest.mark.parametrize("dt", COMPLEX, ids=str)
def test_real_operands_are_componentwise(device, require_dtype, dt):
    """A real operand (a float tensor, a Python float) multiplies and divides each part (C99
    Annex G's rule: (1 + inf j) * 2 is 2 + inf j, where numpy's 2 + 0j makes NaN + inf j); with
    finite values the result is numpy's."""
    require_dtype(dt)
    g = _grid(dt)
    part = g.real.dtype
    r = np.array([0.0, -0.0, 2.0, -0.5, np.inf, np.nan], part)
    za, ra = np.repeat(g, r.size), np.tile(r, g.size)
    x, s = ug.tensor(za, device=device), ug.tensor(ra, device=device)
    want_mul = np.empty(za.size, dt)
    with np.errstate(all="ignore"):
        want_mul.real, want_mul.imag = za.real * ra, za.imag * ra
        want_div = np.empty(za.size, dt)
        want_div.real, want_div.imag = za.real / ra, za.imag / ra
    check_same(x * s, want_mul)
    check_same(s * x, want_mul)
    check_same(x / s, want_div)
    finite = np.isfinite(za) & np.isfinite(ra)
    with np.errstate(all="ignore"):
        check_close(((x * 2.5) - 1.5)[ug.tensor(finite, device=device)], ((za * 2.5) - 1.5)[finite].astype(dt))


@pytest.mark.parametrize("dt", COMPLEX, ids=str)
def test_add_neg_conj_abs_and_friends(device, require_dtype, dt):
    """+, -, unary -, conj, real, imag, abs (hypot: no overflow), angle-free functions of the
    parts, ==, !=, isnan / isinf / isfinite, square, reciprocal, sign, round: numpy's on the
    grid."""
    require_dtype(dt)
    g = _grid(dt)
    za, wa = np.repeat(g, g.size), np.tile(g, g.size)
    x, y = ug.tensor(za, device=device), ug.tensor(wa, device=device)
    with np.errstate(all="ignore"):
        check_same(x + y, za + wa)
        check_same(x - y, za - wa)
        check_same(x == y, za == wa)
        check_same(x != y, za != wa)
    z = ug.tensor(g, device=device)
    check_same(-z, -g)
    check_same(+z, g)
    check_same(ug.conj(z), np.conj(g))
    check_same(z.conj(), np.conj(g))
    check_same(ug.real(z), g.real)
    check_same(ug.imag(z), g.imag)
    check_same(z.real, g.real)
    with np.errstate(all="ignore"):
        check_close(ug.angle(z), np.angle(g))
        check_close(ug.angle(z, deg=True), np.angle(g, deg=True))
    check_same(ug.isnan(z), np.isnan(g))
    check_same(ug.isinf(z), np.isinf(g))
    check_same(ug.isfinite(z), np.isfinite(g))
    with np.errstate(all="ignore"):
        check_close(abs(z), np.abs(g))
        check_close(ug.abs(z), np.abs(g))
        check_close(ug.square(z), _expected("*", g, g), _product_scale(g, g))
        check_close(ug.reciprocal(z), _expected("/", np.ones_like(g), g))
        regular = np.isfinite(g)
        sign_want = np.where(g == 0, 0, g / np.abs(g)).astype(dt)
        check_close(ug.sign(z)[ug.tensor(regular, device=device)], sign_want[regular])
        zeros = g == 0   # (+0 + 0j for every zero, the standard's)
        check_same(ug.sign(z)[ug.tensor(zeros, device=device)], np.zeros(int(zeros.sum()), dt))
    with np.errstate(all="ignore"):
        check_same(ug.round(ug.tensor(g * 1.25, device=device)), np.round(g * 1.25))
    big = 1e30 if dt == C64 else 1e300
    check_close(abs(ug.tensor(np.array([complex(big, big), complex(3 * big, -4 * big)], dt), device=device)),
                np.abs(np.array([complex(big, big), complex(3 * big, -4 * big)], dt)))
    # a real tensor's real / imag / conj
    r = ug.tensor(np.array([1.5, -2.0], np.float32), device=device)
    check_same(ug.real(r), np.array([1.5, -2.0], np.float32))
    check_same(ug.imag(r), np.zeros(2, np.float32))
    check_same(ug.conj(r), np.array([1.5, -2.0], np.float32))


@pytest.mark.parametrize("dt", COMPLEX, ids=str)
def test_powers_and_mixed_dtypes(device, require_dtype, dt, rng):
    """Integer powers (numpy's by multiplies), and the promotion of complex with every real
    dtype and with Python scalars."""
    require_dtype(dt)
    a = crand(rng, (7,), dt)
    x = ug.tensor(a, device=device)
    for n in (0, 1, 2, 3, 5, -1, -2):
        check_close(x ** n, a ** n)
    ints = np.arange(7, dtype=np.int32)
    i = ug.tensor(ints, device=device)
    check_close(x + i, a + ints)
    check_close(i * x, ints * a)
    f = ug.tensor(np.linspace(-1, 1, 7, dtype=np.float32), device=device)
    check_close(f * x, np.linspace(-1, 1, 7, dtype=np.float32) * a)
    check_close(x * 1j, a * 1j)
    check_close(2 - x, 2 - a)
    check_close(x / 3, a / 3)
    assert (ug.tensor(np.ones(2, np.float32), device=device) * 1j).dtype == C64


# --- reductions, scans, matmul ------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 5, 1000, 70000])
@pytest.mark.parametrize("dt", COMPLEX, ids=str)
def test_reductions(device, require_dtype, dt, n, rng):
    """sum / mean along each axis and over everything (long ones use the devices' tree
    reductions), prod (a tree of multiplies: factors near 1 keep it finite), var."""
    require_dtype(dt)
    a = crand(rng, (3, n), dt)
    x = ug.tensor(a, device=device)
    exact = a.astype(np.complex128)
    eps = np.finfo(a.real.dtype).eps
    tol = 8 * math.sqrt(max(n, 1)) * eps * max(1.0, float(np.abs(exact).sum(axis=1).max(initial=0)))
    for axis in (1, 0, None):
        got = x.sum(axis=axis)
        assert got.dtype == dt
        assert np.abs(got.numpy() - exact.sum(axis=axis)).max(initial=0) <= tol
    if n:
        assert np.abs(x.mean(axis=1).numpy() - exact.mean(axis=1)).max() <= tol / n + 4 * eps
        assert np.abs(ug.var(x, axis=1).numpy() - np.var(exact, axis=1)).max() <= 1e-3 if dt == C64 else 1e-9
    if n <= 1000:
        f = (1 + crand(rng, (3, n), np.complex128) / 64).astype(dt)
        got = ug.prod(ug.tensor(f, device=device), axis=1)
        assert got.dtype == dt
        np.testing.assert_allclose(got.numpy(), f.astype(np.complex128).prod(axis=1), rtol=64 * math.sqrt(max(n, 1)) * eps)


@pytest.mark.parametrize("dt", COMPLEX, ids=str)
def test_scans_and_special_products(device, require_dtype, dt, rng):
    require_dtype(dt)
    a = crand(rng, (4, 37), dt)
    x = ug.tensor(a, device=device)
    eps = np.finfo(a.real.dtype).eps
    for got, exact in ((ug.cumulative_sum(x, axis=1), np.cumsum(a.astype(np.complex128), axis=1)),
                       (ug.cumulative_sum(x, axis=0, include_initial=True).T,
                        np.cumulative_sum(a.astype(np.complex128), axis=0, include_initial=True).T)):
        assert got.dtype == dt   # (within the rounding of some order of the additions: ops.SCANS)
        bound = 4 * math.sqrt(exact.shape[1]) * eps * np.abs(exact).max(axis=1, keepdims=True) + 4 * eps * np.abs(exact)
        assert (np.abs(got.numpy() - exact) <= bound).all()
    f = (1 + crand(rng, (4, 37), np.complex128) / 64).astype(dt)
    np.testing.assert_allclose(ug.cumulative_prod(ug.tensor(f, device=device), axis=1).numpy(),
                               np.cumprod(f.astype(np.complex128), axis=1), rtol=1e-5 if dt == C64 else 1e-12)
    # a product with an infinite factor keeps an infinity (Annex G's multiply): (inf + 0j) 2j is
    # nan + inf j, times 1 + 1j -inf + inf j (numpy's left-to-right product is nan + nan j)
    p = np.array([complex(np.inf, 0), 2j, 1 + 1j], dt)
    check_same(ug.prod(ug.tensor(p, device=device)), np.array(complex(-np.inf, np.inf), dt))


@pytest.mark.parametrize("dt", COMPLEX, ids=str)
def test_matmul_vecdot_tensordot(device, require_dtype, dt, rng):
    """Real matmuls of the parts: complex @ complex, complex @ real, batched; vecdot conjugates
    its first operand."""
    require_dtype(dt)
    a, b = crand(rng, (2, 3, 5), dt), crand(rng, (5, 4), dt)
    r = rng.standard_normal((5, 4)).astype(a.real.dtype)
    x, y, s = (ug.tensor(v, device=device) for v in (a, b, r))
    rtol = 1e-5 if dt == C64 else 1e-12
    np.testing.assert_allclose((x @ y).numpy(), a @ b, rtol=rtol, atol=rtol)
    np.testing.assert_allclose((x @ s).numpy(), a @ r, rtol=rtol, atol=rtol)
    np.testing.assert_allclose((s.T @ x.mT).numpy(), r.T @ np.swapaxes(a, -1, -2), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(ug.vecdot(x, x).numpy(), np.vecdot(a, a), rtol=rtol, atol=rtol)
    assert np.allclose(ug.vecdot(x, x).numpy().imag, 0, atol=rtol)   # (|a|^2: conj(a) a)
    np.testing.assert_allclose(ug.tensordot(x, y, axes=1).numpy(), np.tensordot(a, b, axes=1), rtol=rtol, atol=rtol)
    assert (x @ y).dtype == dt


# --- casts ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dt", COMPLEX, ids=str)
def test_casts(device, require_dtype, dt):
    """Real -> complex: an imaginary part of 0; complex -> real: the real part (numpy's);
    complex -> bool: either part nonzero; complex64 <-> complex128: each part."""
    require_dtype(dt)
    g = _grid(dt)
    z = ug.tensor(g, device=device)
    with np.errstate(all="ignore"):   # (complex128's huge parts overflow float32: inf)
        check_same(z.astype(np.dtype(np.float32)), g.real.astype(np.float32))
    check_same(z.astype(np.dtype(np.float64)) if np.dtype(np.float64) in ug.registry.get(device).dtypes
               else z.real, g.real.astype(np.float64) if np.dtype(np.float64) in ug.registry.get(device).dtypes else g.real)
    check_same(z.astype(bool), g.astype(bool))
    other = C128 if dt == C64 else C64
    if other in ug.registry.get(device).dtypes:
        with np.errstate(all="ignore"):
            check_same(z.astype(other), g.astype(other))
    small = np.array([0, 1, -3, 7], np.int32)
    check_same(ug.tensor(small, device=device).astype(dt), small.astype(dt))
    check_same(ug.tensor(small > 0, device=device).astype(dt), (small > 0).astype(dt))
    check_same(ug.tensor(np.array([1.5, -0.0], np.float32), device=device).astype(dt),
               np.array([1.5, -0.0], np.float32).astype(dt))
    ints = np.array([1.9 - 2j, -3.5 + 1j], dt)
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_same(ug.tensor(ints, device=device).astype(np.dtype(np.int32)), ints.astype(np.int32))


# --- fusion, jit, grad ---------------------------------------------------------------------------


def test_complex_expression_is_one_kernel(device, require_dtype, rng):
    """z * conj(w) + w builds real ops on the parts: the scheduler fuses it as one kernel."""
    require_dtype(C64)
    a, b = crand(rng, (64,), C64), crand(rng, (64,), C64)
    z, w = ug.tensor(a, device=device), ug.tensor(b, device=device)
    out = z * ug.conj(w) + w
    assert len(ug.schedule(out).kernels) == 1
    check_close(out, a * np.conj(b) + b, _product_scale(a, np.conj(b)) + np.abs(b))
    total = (abs(z * w) ** 2).sum()   # and a reduction of it: one kernel too
    assert len(ug.schedule(total).kernels) == 1
    np.testing.assert_allclose(total.numpy(), (np.abs(a * b) ** 2).sum(), rtol=1e-5)


def test_jit_over_complex_arguments(device, require_dtype, rng):
    require_dtype(C64)

    @ug.jit
    def f(z, w, s):
        return z * w + s * z.conj(), (z / w).real

    for _ in range(3):
        a, b = crand(rng, (5,), C64), crand(rng, (5,), C64)
        s = complex(rng.standard_normal(), rng.standard_normal())
        out, re = f(ug.tensor(a, device=device), ug.tensor(b, device=device), s)
        sa = np.full(5, s, C64)
        check_close(out, a * b + sa * np.conj(a), _product_scale(a, b) + _product_scale(sa, np.conj(a)))
        check_close(re, (a / b).real)


def test_grad_through_complex_intermediates_matches_torch(device, require_dtype, rng):
    """A real loss of complex intermediates: ug.grad with respect to real inputs and to a complex
    input; ug's convention for a complex input's gradient is torch's (dL/dre + i dL/dim, see
    docs/autodiff.md)."""
    torch = pytest.importorskip("torch")
    require_dtype(C64)
    re_a, im_a = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    w = crand(rng, (6,), C64)

    def loss_ug(re, im, wz):
        z = ug.asarray(re) + 1j * im
        q = z * wz + ug.conj(z) / (wz + 2)
        return (abs(q) ** 2).sum() + ug.real(q * q).sum() + ug.imag(ug.sum(q)) * 3

    def loss_torch(re, im, wz):
        z = torch.complex(re, im)
        q = z * wz + torch.conj(z) / (wz + 2)
        return (q.abs() ** 2).sum() + (q * q).real.sum() + torch.sum(q).imag * 3

    args = [ug.tensor(v, device=device) for v in (re_a, im_a, w)]
    grads = ug.grad(loss_ug, argnums=(0, 1, 2))(*args)
    targs = [torch.tensor(v, requires_grad=True) for v in (re_a, im_a, w)]
    loss_torch(*targs).backward()
    for g, t in zip(grads, targs):
        assert g.dtype == np.dtype(t.detach().numpy().dtype)
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=2e-4, atol=2e-4)


def test_grad_through_complex_reductions_and_matmul_matches_torch(device, require_dtype, rng):
    """Through sum, mean, prod, cumulative_sum, matmul and vecdot of complex values, and with
    respect to complex inputs."""
    torch = pytest.importorskip("torch")
    require_dtype(C64)
    z0, w0 = crand(rng, (3, 4), C64), crand(rng, (4, 2), C64)

    def loss_ug(z, w):
        m = z @ w
        return (abs(m.sum(axis=0)) ** 2).sum() + ug.real(ug.prod(z[0] / 2)) + \
            ug.imag(ug.cumulative_sum(z, axis=1)).sum() + ug.real(ug.vecdot(z, z * 1j)).sum() + abs(z.mean())

    def loss_torch(z, w):
        m = z @ w
        return (m.sum(dim=0).abs() ** 2).sum() + torch.prod(z[0] / 2).real + \
            torch.cumsum(z, dim=1).imag.sum() + (torch.conj(z) * (z * 1j)).sum(dim=-1).real.sum() + z.mean().abs()

    gz, gw = ug.grad(loss_ug, argnums=(0, 1))(ug.tensor(z0, device=device), ug.tensor(w0, device=device))
    tz, tw = torch.tensor(z0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    loss_torch(tz, tw).backward()
    np.testing.assert_allclose(gz.numpy(), tz.grad.numpy(), rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(gw.numpy(), tw.grad.numpy(), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("dt", COMPLEX, ids=str)
def test_unique_of_complex_values(device, require_dtype, dt):
    """unique_* order complex values as numpy does (by the real parts, then the imaginary ones;
    each NaN a value of its own)."""
    require_dtype(dt)
    a = np.array([1 + 2j, 1 + 1j, 5j, 1 + 2j, complex(np.nan, 0), 5j, -1j, 1 + 1j], dt)
    got = ug.unique_all(ug.tensor(a, device=device))
    values, index, inverse, counts = np.unique(a, return_index=True, return_inverse=True, return_counts=True,
                                               equal_nan=False)
    check_same(got.values, values)
    np.testing.assert_array_equal(got.indices.numpy(), index)
    np.testing.assert_array_equal(got.inverse_indices.numpy(), inverse)
    np.testing.assert_array_equal(got.counts.numpy(), counts)


@pytest.mark.parametrize("dt", COMPLEX, ids=str)
def test_scatters_einsum_and_linalg(device, require_dtype, dt, rng):
    """Scatter sums (index_add, scatter_add, integer-array writes), einsum, trace, outer and the
    host linalg functions take complex values."""
    require_dtype(dt)
    a, b = crand(rng, (3, 3), dt), crand(rng, (3,), dt)
    x, v = ug.tensor(a, device=device), ug.tensor(b, device=device)
    idx = np.array([0, 2, 0])
    want = np.zeros(3, dt)
    np.add.at(want, idx, b)
    check_close(ug.scatter_add(ug.zeros(3, dtype=dt, device=device), 0, ug.tensor(idx, device=device), v), want)
    want2 = np.zeros((3, 3), dt)
    want2[[0, 2]] += a[:2]
    check_close(ug.index_add(ug.zeros((3, 3), dtype=dt, device=device), 0, [0, 2], x[:2]), want2)
    t = ug.zeros(3, dtype=dt, device=device)
    t[ug.tensor(np.array([2, 0]), device=device)] = v[:2]
    check_same(t, np.array([b[1], 0, b[0]], dt))
    rtol = 1e-4 if dt == C64 else 1e-10
    np.testing.assert_allclose(ug.einsum("ij,j->i", x, v).numpy(), np.einsum("ij,j->i", a, b), rtol=rtol)
    np.testing.assert_allclose(ug.linalg.trace(x).numpy(), np.trace(a), rtol=rtol)
    check_close(ug.linalg.outer(v, v), np.outer(b, b), _product_scale(np.repeat(b, 3), np.tile(b, 3)).reshape(3, 3))
    np.testing.assert_allclose(ug.linalg.inv(x).numpy(), np.linalg.inv(a), rtol=rtol * 10, atol=rtol * 10)
    np.testing.assert_allclose(ug.linalg.vector_norm(x).numpy(), np.linalg.norm(a), rtol=rtol)


def test_dlpack_exchange_with_torch(device, require_dtype, rng):
    """Complex tensors go both ways through DLPack (torch's complex64 / complex128)."""
    torch = pytest.importorskip("torch")
    require_dtype(C64)
    a = crand(rng, (2, 3), C64)
    t = torch.from_numpy(a.copy())
    x = ug.asarray(t, device=device)
    assert x.dtype == C64
    check_same(x * 1, a)
    back = torch.from_dlpack(x * 2)
    assert back.dtype == torch.complex64
    np.testing.assert_array_equal(back.numpy(), a * 2)
    check_same(np.from_dlpack(ug.conj(x)), np.conj(a))


def test_grad_of_abs_at_zero_is_torchs(device, require_dtype):
    """d|z| is z / |z|, and 0 at z == 0 (torch's; hypot's own formula would give 0 / 0 there)."""
    torch = pytest.importorskip("torch")
    require_dtype(C64)
    a = np.array([0j, 3 + 4j, -2j, 1e-30 + 0j], C64)
    g = ug.grad(lambda z: abs(z).sum())(ug.tensor(a, device=device))
    t = torch.tensor(a, requires_grad=True)
    t.abs().sum().backward()
    np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-6, atol=0)
