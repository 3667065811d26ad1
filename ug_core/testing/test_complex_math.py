"""The elementwise functions of complex tensors (ug.exp(z), ug.asinh(z), z ** w, ...) on every
device: their accuracy against numpy in long double, and their special values against the `ref`
device's.

The functions are built in the frontend from real ops on the parts (ug_core.array_api.
complex_math), so a device computes them with its real exp, log, sin, cos, sqrt and atan2: the
accuracy is within MAX_ULP ulps of |result| where those are within theirs (tests/
test_complex_math.py measures the bounds against mpmath over the whole range, and checks the
special values against numpy's and the standard's on `ref`; docs/array-api.md has the table).
Here: moderate arguments (|z| from 1e-6 to 1e4, near |z| == 1, near +-1 and +-i) against numpy's
complex long double functions (float64's own on platforms whose long double is float64, with a
bound one ulp wider), and the special values (zeros, subnormals, 1, the largest floats,
infinities, NaN) the same as on `ref`: their infinities, NaNs and zeros' signs exactly, the rest
within the bound.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import ug_core as ug

C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
LONG = np.clongdouble
EXACT_REFERENCE = np.finfo(np.longdouble).nmant > 52

# the largest error in ulps of |result| (measured on cpu, ref, c and vulkan over
# tests/test_complex_math.py's grids, plus a margin); pow's in ulps of |result| / (1 + |w log z|)
MAX_ULP = {
    F32: {"exp": 3, "expm1": 3.5, "log": 3.5, "log1p": 3.5, "log2": 3.5, "log10": 3.5, "sqrt": 2.5, "sin": 4,
          "cos": 3, "tan": 4.5, "sinh": 3.5, "cosh": 3, "tanh": 4.5, "asin": 4, "acos": 3.5, "atan": 4, "asinh": 3.5,
          "acosh": 3.5, "atanh": 3, "reciprocal": 2, "square": 1.5, "sign": 1.5, "pow": 3.5},
    F64: {"exp": 2, "expm1": 3, "log": 3, "log1p": 3.5, "log2": 4, "log10": 4, "sqrt": 2.5, "sin": 3, "cos": 2.5,
          "tan": 4.5, "sinh": 3, "cosh": 2.5, "tanh": 4.5, "asin": 3.5, "acos": 2.5, "atan": 3, "asinh": 3.5,
          "acosh": 2.5, "atanh": 3, "reciprocal": 2, "square": 1.5, "sign": 2, "pow": 3.5},
}


def _long(name: str, z: np.ndarray) -> np.ndarray:
    """`name` of z in numpy's complex long double; expm1 and log1p from identities accurate
    near 0 (numpy's own are exp(z) - 1 and log(1 + z)): 2 e**(z/2) sinh(z/2) and
    2 atanh(z / (2 + z))."""
    z = z.astype(LONG)
    with np.errstate(all="ignore"):
        if name == "expm1":
            return 2 * np.exp(z / 2) * np.sinh(z / 2)
        if name == "log1p":
            return 2 * np.arctanh(z / (2 + z))
        if name == "sign":
            return z / np.abs(z)
        fn = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh,
              "atanh": np.arctanh}.get(name) or getattr(np, name)
        return fn(z)


FUNCTIONS = sorted(set(MAX_ULP[F32]) - {"pow", "reciprocal", "square"})


def _arguments(ct: np.dtype) -> np.ndarray:
    rng = np.random.default_rng(29)
    n = 300
    sign = rng.choice([-1.0, 1.0], (2, n))
    angle = rng.uniform(0, 2 * np.pi, n)
    radius = 1 + 10.0 ** rng.uniform(-6, -1, n) * sign[0]
    parts = [rng.uniform(-4, 4, (2, n)), 10.0 ** rng.uniform(-6, 4, (2, n)) * sign,
             np.stack([radius * np.cos(angle), radius * np.sin(angle)]),
             np.stack([sign[0] + rng.uniform(-1e-3, 1e-3, n), 10.0 ** rng.uniform(-6, -2, n) * sign[1]]),
             np.stack([10.0 ** rng.uniform(-6, -2, n) * sign[0], sign[1] + rng.uniform(-1e-3, 1e-3, n)])]
    re, im = np.concatenate(parts, axis=1)
    return (re + 1j * im).astype(ct)


def _ulps(got: np.ndarray, want: np.ndarray, part: np.dtype) -> np.ndarray:
    """|got - want| in ulps of |want| (of the part dtype); 0 where want is not finite there."""
    with np.errstate(all="ignore"):
        mag = np.abs(want)
        ok = np.isfinite(mag) & (mag <= np.finfo(part).max)
        spacing = np.spacing(np.where(ok, mag, 1).astype(part)).astype(np.longdouble)
        err = np.abs(got.astype(LONG) - want) / spacing
    return np.where(ok, np.where(np.isnan(err), np.inf, err), 0.0).astype(np.float64)


@pytest.mark.parametrize("ct", [C64, C128], ids=str)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_complex_function_accuracy(device, require_dtype, name, ct):
    require_dtype(ct)
    part = np.finfo(ct).dtype
    z = _arguments(ct)
    got = getattr(ug, name)(ug.tensor(z, device=device))
    assert got.dtype == ct
    err = _ulps(got.numpy(), _long(name, z), part)
    bound = MAX_ULP[part][name] + (0 if EXACT_REFERENCE or part != F64 else 1)
    k = int(np.argmax(err))
    assert err[k] <= bound, f"{name}({z[k]!r}) on {device}: {err[k]:.2f} ulp (got {got.numpy()[k]!r})"


@pytest.mark.parametrize("ct", [C64, C128], ids=str)
def test_complex_pow_accuracy(device, require_dtype, ct):
    """z ** w for tensors z and w, within MAX_ULP ulps of |result| times 1 + |w log z|."""
    require_dtype(ct)
    part = np.finfo(ct).dtype
    z = _arguments(ct)[::5]
    ws = np.array([2, -1, 0.5, -2.5, 1 + 1j, 0.3 - 2j, 7, 1e-3j], ct)
    zz, ww = np.repeat(z, ws.size), np.tile(ws, z.size)
    got = ug.tensor(zz, device=device) ** ug.tensor(ww, device=device)
    assert got.dtype == ct
    with np.errstate(all="ignore"):
        want = np.power(zz.astype(LONG), ww.astype(LONG))
        condition = 1 + np.abs(ww.astype(np.complex128) * np.log(zz.astype(np.complex128)))
    err = _ulps(got.numpy(), want, part) / condition
    bound = MAX_ULP[part]["pow"] + (0 if EXACT_REFERENCE or part != F64 else 1)
    k = int(np.argmax(err))
    assert err[k] <= bound, f"({zz[k]!r}) ** ({ww[k]!r}) on {device}: {err[k]:.2f} ulp x condition"


def _specials(ct: np.dtype) -> np.ndarray:
    part = np.finfo(ct)
    vals = [0.0, -0.0, float(part.smallest_subnormal), -float(part.smallest_subnormal), 1.0, -1.0, 2.0,
            float(part.max), -float(part.max), np.inf, -np.inf, np.nan]
    pairs = np.array(list(itertools.product(vals, vals)), dtype=part.dtype)
    z = np.empty(len(pairs), ct)
    z.real, z.imag = pairs[:, 0], pairs[:, 1]
    return z


def _same_specials(got: np.ndarray, want: np.ndarray, part: np.dtype, bound: float) -> np.ndarray:
    """Per element, per part: NaN where want's is, infinities and zeros exactly (signs
    included), finite values within 2 bound ulps of the larger finite part."""
    def parts_of(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return a.real.astype(np.float64), a.imag.astype(np.float64)
    (gr, gi), (wr, wi) = parts_of(got), parts_of(want)
    with np.errstate(all="ignore"):
        scale = np.fmax(np.where(np.isfinite(wr), np.abs(wr), 0), np.where(np.isfinite(wi), np.abs(wi), 0))
        tol = 2 * bound * np.spacing(np.maximum(scale, np.finfo(part).smallest_normal).astype(part)).astype(np.float64)

        def ok(g: np.ndarray, w: np.ndarray) -> np.ndarray:
            exact = np.isinf(w) | (w == 0)
            return np.where(np.isnan(w), np.isnan(g),
                            np.where(exact, (g == w) & (np.signbit(g) == np.signbit(w)), np.abs(g - w) <= tol))
        return ok(gr, wr) & ok(gi, wi)


@pytest.mark.parametrize("ct", [C64, C128], ids=str)
def test_complex_special_values_as_ref(device, require_dtype, ct):
    """Every function at every pair of special values gives `ref`'s infinities, NaNs and signed
    zeros (the functions are the frontend's, so only the device's real exp, sin, ... differ),
    its finite values within the bound; ** too. On a device without exact float64 sin and cos
    (vulkan) the finite float64 arguments of sin and cos beyond 2**20 pi/2 are left out, as
    for the real functions."""
    require_dtype(ct)
    part = np.finfo(ct).dtype
    z = _specials(ct)
    here, ref = ug.tensor(z, device=device), ug.tensor(z, device="ref")
    for name in FUNCTIONS:
        got, want = getattr(ug, name)(here).numpy(), getattr(ug, name)(ref).numpy()
        ok = _same_specials(got, want, part, MAX_ULP[part][name])
        ok |= ~_trig_reduced(name, device, part, z)
        assert ok.all(), f"{name} on {device}: {z[~ok][:6]} gives {got[~ok][:6]}, ref {want[~ok][:6]}"
    w = z[::7]
    zz, ww = np.repeat(z, w.size), np.tile(w, z.size)
    got = (ug.tensor(zz, device=device) ** ug.tensor(ww, device=device)).numpy()
    want = (ug.tensor(zz, device="ref") ** ug.tensor(ww, device="ref")).numpy()
    with np.errstate(all="ignore"):
        wlz = ww.astype(np.complex128) * np.log(zz.astype(np.complex128))
        condition = np.where(np.isfinite(wlz), 1 + np.abs(wlz), 1.0)
    # pow's zeros take their signs from NaNs made on the way (0 * inf), whose sign bits differ
    # between devices: compared without; where the angle of w log z is beyond float precision,
    # its cosine and sine are any values
    meaningful = ~(np.abs(wlz.imag) >= 1 / np.finfo(part).eps)
    bound = MAX_ULP[part]["pow"] * np.minimum(condition, 1e300)
    ok = _same_specials(_unsigned_zeros(got), _unsigned_zeros(want), part, bound) | ~meaningful
    assert ok.all(), f"** on {device}: {zz[~ok][:4]} ** {ww[~ok][:4]} gives {got[~ok][:4]}, ref {want[~ok][:4]}"


def _unsigned_zeros(a: np.ndarray) -> np.ndarray:
    out = np.empty(a.shape, a.dtype)
    out.real, out.imag = np.where(a.real == 0, 0, a.real), np.where(a.imag == 0, 0, a.imag)
    return out


def _trig_reduced(name: str, device: str, part: np.dtype, z: np.ndarray) -> np.ndarray:
    """Where the device's sin and cos of the argument's relevant part are within their bound:
    all but finite float64 ones beyond 2**20 pi/2 without native math (see the module doc)."""
    from ug_core.plugins import registry
    trig = {"exp": "imag", "expm1": "imag", "sinh": "imag", "cosh": "imag", "tanh": "imag", "sin": "real",
            "cos": "real", "tan": "real"}
    info = getattr(registry.get(device), "info", None)
    if part != F64 or name not in trig or info is None or "native_math" in info.capabilities:
        return np.ones(z.shape, bool)
    v = getattr(z, trig[name])
    return ~(np.abs(v) > 2.0 ** 20 * np.pi / 2) | ~np.isfinite(v)


@pytest.mark.parametrize("ct", [C64, C128], ids=str)
def test_complex_functions_fuse(device, require_dtype, ct):
    """Each function of a complex tensor is one kernel with its neighbours: z * 2 in, abs out."""
    require_dtype(ct)
    z = ug.tensor(_arguments(ct)[:64], device=device)
    for name in FUNCTIONS:
        assert len(ug.schedule(abs(getattr(ug, name)(z * 2))).kernels) == 1, name
    assert len(ug.schedule(abs((z * 2) ** (z + 1))).kernels) == 1
