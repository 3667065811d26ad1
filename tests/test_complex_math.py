"""The complex elementwise functions over pairs of real tensors (ug_core.array_api.complex_math).

Each function is called with the parts of a complex argument as real ug tensors and its result
`re + 1j * im` compared with:
- mpmath (at a precision enough for both parts, zero parts taken as +-2**-4000 so that a signed
  zero picks its side of a branch cut) on a dense grid of finite values, magnitudes from the
  subnormals to the largest floats and the regions where the careful formulas matter (near 0,
  near |z| == 1, near 1 and i): the error in ulps of |result| must be within MAX_ULP;
- numpy's complex functions on the special values {+-0, +-tiny, +-1, +-huge, +-inf, NaN}**2 (NaN
  signs ignored, zero signs compared), except where numpy and the standard (or accuracy)
  disagree: DEVIATIONS lists those cases, and there the standard's value (or mpmath's) is
  expected;
- the standard's symmetries (conj, and oddness where it requires it) bit for bit.
pow has its own grids (z and w); its error is measured in ulps of |result| times
(1 + |w log z|), the condition of exp(w log z). Every function is one fused kernel, and its
derivative (ug.grad through the parts) is conj(f'(z)) times the cotangent, checked against
mpmath's derivative.
"""
from __future__ import annotations

import functools
import itertools
import math
import warnings

import mpmath
import numpy as np
import pytest

import ug_core as ug
from ug_core.array_api import complex_math as cm
from ug_core.plugins import registry
from ug_core.testing.test_complex_math import MAX_ULP as KIT_MAX_ULP

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
CT = {F32: np.complex64, F64: np.complex128}
mp = mpmath.mp

NUMPY = {
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "log2": np.log2, "log10": np.log10,
    "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh, "reciprocal": np.reciprocal, "square": np.square, "sign": np.sign, "round": np.round,
}
MPMATH = {
    "exp": mp.exp, "expm1": mp.expm1, "log": mp.log, "log1p": mp.log1p, "log2": lambda z: mp.log(z) / mp.log(2),
    "log10": lambda z: mp.log(z) / mp.log(10), "sqrt": mp.sqrt, "sin": mp.sin, "cos": mp.cos, "tan": mp.tan,
    "sinh": mp.sinh, "cosh": mp.cosh, "tanh": mp.tanh, "asin": mp.asin, "acos": mp.acos, "atan": mp.atan,
    "asinh": mp.asinh, "acosh": mp.acosh, "atanh": mp.atanh, "reciprocal": lambda z: 1 / z,
    "square": lambda z: z * z, "sign": lambda z: z / abs(z),
}
# mpmath computes these part by part (products of exp, sin, cos of each part): extra precision
# only for tiny parts; the others cancel against 1 and the other part, and get it for both
COMPONENTWISE = {"exp", "expm1", "sin", "cos", "tan", "sinh", "cosh", "tanh", "square"}
HOLOMORPHIC = sorted(set(MPMATH) - {"sign"})
# the bounds, in ulps of |result| (pow's: of |result| / (1 + |w log z|)): the kit's (the largest
# error measured on these grids and the kit's on cpu, ref, c and vulkan, rounded up by a
# margin); docs/array-api.md ("Complex functions: accuracy") has the table per device
MAX_ULP = KIT_MAX_ULP
TINY_EXP = 4000     # a zero part is taken as +-2**-TINY_EXP: below every float's rounding, even squared


def _parts(dt: np.dtype, re: np.ndarray, im: np.ndarray) -> np.ndarray:
    """The complex array of these parts (re + 1j * im would turn infinite parts into NaNs)."""
    z = np.empty(re.shape, CT[dt])
    z.real, z.imag = re, im
    return z


def _run(name: str, device: str, re: np.ndarray, im: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r, i = getattr(cm, name)(ug.tensor(re, device=device), ug.tensor(im, device=device))
    return r.numpy(), i.numpy()


def _grid(dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Finite arguments: a mesh of magnitudes over the dtype's range and values where formulas
    switch (1 +- eps, pi/2, 700, ...), both signs and both zeros, and random points where the
    careful formulas matter."""
    fi = np.finfo(dt)
    mags = 10.0 ** np.linspace(math.log10(fi.smallest_subnormal) + 1, math.log10(fi.max) - 0.5, 14)
    special = [0.5, 1.0, 1 - fi.eps, 1 + 2 * fi.eps, math.pi / 2, 3.0, 30.0, 700.0]
    vals = np.concatenate([mags, special])
    vals = np.concatenate([vals, -vals, [0.0, -0.0]]).astype(dt)
    re, im = (a.ravel() for a in np.meshgrid(vals, vals))
    rng = np.random.default_rng(20241201 + dt.itemsize)
    n = 200
    sign = rng.choice([-1.0, 1.0], (2, n))
    angle = rng.uniform(0, 2 * np.pi, n)
    radius = 1 + 10.0 ** rng.uniform(-7, -1, n) * sign[0]
    boxes = [rng.uniform(-4, 4, (2, n)), rng.uniform(-1.5, 1.5, (2, n)), 10.0 ** rng.uniform(-8, 0, (2, n)) * sign,
             np.stack([radius * np.cos(angle), radius * np.sin(angle)]),                    # near |z| == 1
             np.stack([1 + rng.uniform(-1e-3, 1e-3, n), 10.0 ** rng.uniform(-8, -2, n) * sign[1]]),   # near 1
             np.stack([10.0 ** rng.uniform(-8, -2, n) * sign[0], 1 + rng.uniform(-1e-3, 1e-3, n)])]   # near i
    extra = np.concatenate(boxes, axis=1).astype(dt)
    return np.concatenate([re, extra[0]]), np.concatenate([im, extra[1]])


def _mp_value(f, a: float, b: float, componentwise: bool) -> tuple[float, float, float, float] | None:
    """f(a + bi) in mpmath as (re, re's rounding error, im, im's rounding error) in float64, or
    None where it is not finite (a pole, log(0))."""
    ea, eb = (math.frexp(v)[1] if v != 0 else 0 for v in (a, b))
    span = max(0, -ea, -eb) if componentwise else max(abs(ea), abs(eb))
    with mp.workprec(128 + span):
        try:
            v = f(mp.mpc(a, b))
        except (ZeroDivisionError, ValueError):
            return None
        if not (mp.isfinite(v.real) and mp.isfinite(v.imag)):
            return None
    if a == 0 or b == 0:
        # a zero part's sign says which side of a cut (mpmath's numbers have no -0)
        tiny = mp.mpf(2) ** -TINY_EXP
        with mp.workprec(128 + TINY_EXP + span):
            v = f(mp.mpc(a if a != 0 else math.copysign(1, a) * tiny, b if b != 0 else math.copysign(1, b) * tiny))
    vr, vi = v.real, v.imag
    hr, hi = float(vr), float(vi)
    return hr, (float(vr - hr) if math.isfinite(hr) else 0.0), hi, (float(vi - hi) if math.isfinite(hi) else 0.0)


def _reference(name: str, re: np.ndarray, im: np.ndarray, f=None) -> np.ndarray:
    """mpmath's values, (4, n): re, its rounding error, im, its rounding error (NaN: none)."""
    f = f or MPMATH[name]
    out = np.full((4, len(re)), np.nan)
    for k, (a, b) in enumerate(zip(re.tolist(), im.tolist())):
        v = _mp_value(f, a, b, name in COMPONENTWISE)
        if v is not None:
            out[:, k] = v
    return out


@functools.lru_cache(maxsize=None)
def _grid_reference(name: str, dt: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    re, im = _grid(dt)
    return re, im, _reference(name, re, im)


def _ulps(dt: np.dtype, got_re: np.ndarray, got_im: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(error in ulps of |reference|, where measured: the reference finite in dt)."""
    rr, rl, ir, il = ref
    with np.errstate(all="ignore"):
        mag = np.hypot(rr, ir)
        ok = np.isfinite(mag) & (mag <= np.finfo(dt).max)
        spacing = np.spacing(np.where(ok, mag, 1).astype(dt)).astype(np.float64)
        dr = (got_re.astype(np.float64) - rr) - rl
        di = (got_im.astype(np.float64) - ir) - il
        err = np.hypot(dr, di) / spacing
    err = np.where(ok, err, 0.0)
    return np.where(np.isnan(err), np.inf, err), ok


# --- accuracy ---------------------------------------------------------------------------------

# the part each function takes the sine and cosine of (exp(x + iy) = e**x (cos y + i sin y))
TRIG_PART = {"exp": 1, "expm1": 1, "sinh": 1, "cosh": 1, "tanh": 1, "sin": 0, "cos": 0, "tan": 0}


def _exact_float64_trig(device: str) -> bool:
    """Whether the device's float64 sin and cos reduce any argument exactly (libm's, numpy's):
    without native math (vulkan) the core's are within 1 ulp only below 2**20 pi/2
    (docs/array-api.md, "Differences from numpy")."""
    info = getattr(registry.get(device), "info", None)
    return info is None or "native_math" in info.capabilities


def _trig_reduced(name: str, device: str, dt: np.dtype, re: np.ndarray, im: np.ndarray) -> np.ndarray:
    """Where the device's sin and cos of the part TRIG_PART names are within their bounds: all
    but finite float64 arguments beyond 2**20 pi/2 on a device without exact reduction."""
    if dt != F64 or name not in TRIG_PART or _exact_float64_trig(device):
        return np.ones(re.shape, bool)
    part = (re, im)[TRIG_PART[name]]
    return ~(np.abs(part) > 2.0 ** 20 * np.pi / 2) | ~np.isfinite(part)


@pytest.mark.slow
@pytest.mark.parametrize("dt", [F32, F64], ids=str)
@pytest.mark.parametrize("name", sorted(MPMATH))
def test_accuracy(device, require_dtype, name, dt):
    require_dtype(dt)
    re, im, ref = _grid_reference(name, dt)
    got = _run(name, device, re, im)
    err, ok = _ulps(dt, *got, ref)
    reduced = _trig_reduced(name, device, dt, re, im)
    err, ok = np.where(reduced, err, 0.0), ok & reduced
    k = int(np.argmax(err))
    assert ok.sum() > len(re) // 2
    assert err[k] <= MAX_ULP[dt][name], (f"{name}({re[k]!r} + {im[k]!r}j) on {device}: {err[k]:.2f} ulp "
                                         f"(got {got[0][k]!r} + {got[1][k]!r}j, mpmath {ref[0][k]!r} + {ref[2][k]!r}j)")


def _pow_grid(dt: np.dtype) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(7 + dt.itemsize)
    n = 150
    z = np.concatenate([rng.uniform(-3, 3, (2, n)), 10.0 ** rng.uniform(-6, 6, (2, n)) * rng.choice([-1, 1], (2, n))],
                       axis=1)
    ws = [(2, 0), (3, 0), (-1, 0), (-2, 0), (7, 0), (0.5, 0), (-2.5, 0), (1 / 3, 0), (1, 1), (0.3, -2), (-1.5, 0.25),
          (0, 1), (10, 0.1), (1e-3, 0)]
    a, b = np.repeat(z, len(ws), axis=1)
    c, d = np.tile(np.array(ws, dtype=np.float64).T, z.shape[1])
    return tuple(v.astype(dt) for v in (a, b, c, d))


@functools.lru_cache(maxsize=None)
def _pow_reference(dt: np.dtype) -> tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
    args = _pow_grid(dt)
    out = np.full((4, len(args[0])), np.nan)
    condition = np.zeros(len(args[0]))
    for k, (a, b, c, d) in enumerate(zip(*(v.tolist() for v in args))):
        with mp.workprec(160):
            z, w = mp.mpc(a, b), mp.mpc(c, d)
            v = mp.power(z, w)
            hr, hi = float(v.real), float(v.imag)
            out[:, k] = hr, float(v.real - hr), hi, float(v.imag - hi)
            condition[k] = 1 + float(abs(w * mp.log(z)))
    return args, out, condition


@pytest.mark.slow
@pytest.mark.parametrize("dt", [F32, F64], ids=str)
def test_pow_accuracy(device, require_dtype, dt):
    """z**w within MAX_ULP ulps of |result| times the condition 1 + |w log z| (the rounding of
    w log z is amplified by exp; the integer exponents are products, better than that)."""
    require_dtype(dt)
    args, ref, condition = _pow_reference(dt)
    r, i = cm.pow(*(ug.tensor(v, device=device) for v in args))
    err, ok = _ulps(dt, r.numpy(), i.numpy(), ref)
    scaled = err / condition
    k = int(np.argmax(scaled))
    assert ok.sum() > len(args[0]) // 2
    assert scaled[k] <= MAX_ULP[dt]["pow"], (f"({args[0][k]!r} + {args[1][k]!r}j) ** ({args[2][k]!r} + "
                                              f"{args[3][k]!r}j): {err[k]:.2f} ulp, condition {condition[k]:.1f}")


# --- special values ----------------------------------------------------------------------------

def _special_grid(dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    fi = np.finfo(dt)
    vals = [0.0, -0.0, fi.smallest_subnormal, -fi.smallest_subnormal, fi.smallest_normal, 1.0, -1.0, fi.max, -fi.max,
            np.inf, -np.inf, np.nan]
    pts = np.array(list(itertools.product(vals, vals)), dtype=dt)
    return pts[:, 0].copy(), pts[:, 1].copy()


def _standard_expm1(dt, re, im):
    """numpy's expm1 is exp(z) - 1 as complex arithmetic: its infinities and NaNs are not the
    standard's (expm1(-inf + inf i) is NaN + NaN i there, -1 + 0i in the standard; expm1(NaN +
    0i) NaN + NaN i, NaN + 0i in the standard). Where a part is not finite or exp overflows:
    exp(z) (numpy's, C99's) with 1 taken from the real part."""
    e = np.exp(_parts(dt, re, im))
    with np.errstate(all="ignore"):
        where = ~np.isfinite(re) | ~np.isfinite(im) | (re > np.log(np.finfo(dt).max))
        want_re = e.real - 1
    # expm1(+-0 +- 0i) == +0 +- 0i: the standard's 0 + 0j (numpy's real zero is x's)
    zero = (re == 0) & (im == 0)
    return where | zero, np.where(zero, 0.0, want_re), e.imag


def _accurate(name):
    def rule(dt, re, im):
        """numpy computes log1p(z) as log(1 + z), losing the tiny parts of z and overflowing
        1 + z; and sign(z) as z / hypot(z), losing subnormal parts and overflowing: mpmath's
        value for finite z."""
        finite = np.isfinite(re) & np.isfinite(im) & ((re != 0) | (im != 0))
        ref = _reference(name, re[finite], im[finite])
        want_re, want_im = np.full(re.shape, np.nan), np.full(re.shape, np.nan)
        want_re[finite], want_im[finite] = ref[0], ref[2]
        return ~np.isnan(want_re), want_re, want_im     # (not at a pole: log1p(-1) is numpy's)
    return rule


def _standard_sign(dt, re, im):
    """The standard: sign(z) is NaN + NaN i when a part is NaN (numpy's is +-1 for an infinite
    other part); finite z as _accurate; an infinite part with a finite other: +-1 and a zero
    of the other part's sign (numpy's zero is always +0: not conj-symmetric)."""
    where, want_re, want_im = _accurate("sign")(dt, re, im)
    nan = np.isnan(re) | np.isnan(im)
    want_re[nan], want_im[nan] = np.nan, np.nan
    inf_re, inf_im = np.isinf(re) & np.isfinite(im), np.isinf(im) & np.isfinite(re)
    want_re[inf_re], want_im[inf_re] = np.sign(re[inf_re]), np.copysign(0.0, im[inf_re])
    want_re[inf_im], want_im[inf_im] = np.copysign(0.0, re[inf_im]), np.sign(im[inf_im])
    return where | nan | inf_re | inf_im, want_re, want_im


def _standard_round(dt, re, im):
    """The standard: each part rounded as a real (numpy multiplies by 10**0 as a complex
    number, so an infinite part makes the other NaN, and -0 becomes +0)."""
    return np.ones(re.shape, bool), np.round(re), np.round(im)


def _standard_tanh(dt, re, im):
    """The standard: tanh(+inf + iy) == 1 + 0i for y > 0 (and conj, odd), the zero's sign y's;
    numpy's (C99's) is sin(2y)'s."""
    want = np.tanh(_parts(dt, re, im))
    where = np.isinf(re) & np.isfinite(im)
    return where, want.real, np.copysign(0.0, im)


def _standard_tan(dt, re, im):
    """tan(z) = -i tanh(iz), so tanh's rule: tan(x +- inf i)'s real zero has x's sign."""
    want = np.tan(_parts(dt, re, im))
    where = np.isinf(im) & np.isfinite(re)
    return where, np.copysign(0.0, re), want.imag


def _unfused_square(dt, re, im):
    """numpy's build contracts x*x - y*y into a fused multiply-add, so where both squares
    overflow it says -inf (x*x exact inside the fma); ug computes the textbook formula
    unfused: inf - inf, NaN (the standard leaves it to the implementation)."""
    with np.errstate(all="ignore"):
        return np.ones(re.shape, bool), re * re - im * im, re * im + im * re


def _symmetric(name):
    def rule(dt, re, im):
        """Signs the standard leaves open, which ug chooses to keep C99's symmetries (sinh and
        sin odd, cosh and cos even, all conj-symmetric) and numpy (glibc) does not:
        sinh(+-inf + i(inf or NaN)) == +-inf + NaN i (numpy: +inf); sin(x +- inf i) for x
        infinite or NaN: NaN +- inf i (numpy: +inf); cosh(+-0 + i(inf or NaN)) == NaN + (x *
        copysign(0, y)) i, and cos(z) == cosh(iz) (numpy: +0)."""
        want = NUMPY[name](_parts(dt, re, im))
        want_re, want_im = want.real.astype(np.float64), want.imag.astype(np.float64)
        if name == "sinh":
            where = np.isinf(re) & ~np.isfinite(im)
            want_re = np.where(where, re, want_re)
        elif name == "sin":
            where = np.isinf(im) & ~np.isfinite(re)
            want_im = np.where(where, im, want_im)
        elif name == "cosh":
            where = (re == 0) & ~np.isfinite(im)
            want_im = np.where(where, re * np.copysign(0.0, im), want_im)
        else:    # cos(x + iy) = cosh(-y + ix)
            where = (im == 0) & ~np.isfinite(re)
            want_im = np.where(where, -im * np.copysign(0.0, re), want_im)
        return where, want_re, want_im
    return rule


# function -> rule(dt, re, im) -> (where, expected re, expected im): where numpy's value is not
# the standard's (or is inaccurate), the standard's (or mpmath's) is expected
DEVIATIONS = {"expm1": _standard_expm1, "log1p": _accurate("log1p"), "sign": _standard_sign, "round": _standard_round,
              "tanh": _standard_tanh, "tan": _standard_tan, "square": _unfused_square, "sinh": _symmetric("sinh"),
              "sin": _symmetric("sin"), "cosh": _symmetric("cosh"), "cos": _symmetric("cos")}


def _same(dt, got_re, got_im, want_re, want_im, tol_ulp):
    """Per element: NaN where expected NaN (any sign), infinities and zeros exactly (signs
    included), other values within tol_ulp ulps (a number or one per element) of the expected
    result's finite parts."""
    fi = np.finfo(dt)
    with np.errstate(all="ignore"):
        scale = np.fmax(np.where(np.isfinite(want_re), np.abs(want_re), 0),
                        np.where(np.isfinite(want_im), np.abs(want_im), 0))
        tol = tol_ulp * np.spacing(np.maximum(scale, fi.smallest_normal).astype(dt)).astype(np.float64)

    def part(got, want):
        exact = np.isinf(want) | (want == 0)
        with np.errstate(all="ignore"):
            close = np.abs(got.astype(np.float64) - want) <= tol
        return np.where(np.isnan(want), np.isnan(got),
                        np.where(exact, (got == want) & (np.signbit(got) == np.signbit(want)), close))
    return part(got_re, want_re) & part(got_im, want_im)


@pytest.mark.parametrize("dt", [F32, F64], ids=str)
@pytest.mark.parametrize("name", sorted(NUMPY))
def test_special_values(device, require_dtype, name, dt):
    require_dtype(dt)
    re, im = _special_grid(dt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            want = NUMPY[name](_parts(dt, re, im))
        want_re, want_im = want.real.astype(np.float64), want.imag.astype(np.float64)
        if name in DEVIATIONS:
            where, dev_re, dev_im = DEVIATIONS[name](dt, re, im)
            want_re, want_im = np.where(where, dev_re, want_re), np.where(where, dev_im, want_im)
    got_re, got_im = _run(name, device, re, im)
    ok = _same(dt, got_re, got_im, want_re, want_im, 2 * MAX_ULP[dt].get(name, 1) + 2)
    ok |= ~_trig_reduced(name, device, dt, re, im)
    bad = [f"{name}({a!r} + {b!r}j) = {c!r} + {d!r}j, expected {e!r} + {f!r}j"
           for a, b, c, d, e, f in zip(re[~ok], im[~ok], got_re[~ok], got_im[~ok], want_re[~ok], want_im[~ok])]
    assert not bad, f"on {device}: " + "; ".join(bad[:8])


def test_standard_special_cases(device):
    """The cases the standard lists for complex arguments that numpy (glibc) gets otherwise,
    spelled out (the special-values grid expects them through DEVIATIONS)."""
    inf, nan = math.inf, math.nan
    cases = [("expm1", -inf, inf, -1.0, None), ("expm1", -inf, nan, -1.0, None), ("expm1", inf, inf, inf, nan),
             ("expm1", inf, nan, inf, nan), ("expm1", inf, 0.0, inf, 0.0), ("expm1", nan, 0.0, nan, 0.0),
             ("expm1", -0.0, 0.0, 0.0, 0.0),
             ("tanh", inf, 2.0, 1.0, 0.0), ("tanh", inf, 3.0, 1.0, 0.0), ("tanh", inf, -3.0, 1.0, -0.0),
             ("tanh", -inf, 3.0, -1.0, 0.0), ("sign", inf, nan, nan, nan), ("sign", nan, -inf, nan, nan),
             ("acosh", 0.0, nan, nan, math.pi / 2), ("atanh", 1.0, 0.0, inf, 0.0), ("log1p", -1.0, 0.0, -inf, 0.0)]
    for name, a, b, want_re, want_im in cases:
        r, i = _run(name, device, np.array([a]), np.array([b]))
        got = complex(r[0], i[0])
        for g, w in ((got.real, want_re), (got.imag, want_im)):
            if w is None:
                continue
            if math.isnan(w):
                assert math.isnan(g), (name, a, b, got)
            else:
                assert g == w and math.copysign(1, g) == math.copysign(1, w), (name, a, b, got)


def _angle_noise(dt, z: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where z**w = |z**w| (cos a + i sin a), a = Im(w log z), has a part below the rounding
    of a itself (|cos a| or |sin a| below (1 + |a|) eps, for |a| beyond 1/eps every part):
    that part's value and sign mean nothing (it is below an ulp of |z**w| there)."""
    with np.errstate(all="ignore"):
        lz = np.log(z.astype(np.complex128))
        a = w.real.astype(np.float64) * lz.imag + w.imag.astype(np.float64) * lz.real
        noise = 4 * (1 + np.abs(a)) * np.finfo(dt).eps
        far = ~(np.abs(a) < 1 / np.finfo(dt).eps)
        return far | (np.abs(np.cos(a)) < noise), far | (np.abs(np.sin(a)) < noise)


@pytest.mark.parametrize("dt", [F32, F64], ids=str)
def test_pow_special_values(device, require_dtype, dt):
    """z**w against numpy's on the special values (z and w each from a grid of 13 values, both
    parts): 1 for w == 0, 0**w, the integer exponents' products and exp(w log z) with C99's
    multiplication. The zeros' signs are not compared: numpy's come from the sign bits of the
    NaNs its products make (x86's are negative), which mean nothing; nor the parts below the
    rounding of the angle (_angle_noise)."""
    require_dtype(dt)
    fi = np.finfo(dt)
    vals = [0.0, -0.0, fi.smallest_subnormal, 1.0, -1.0, 2.0, 0.5, -3.0, fi.max, -fi.max, np.inf, -np.inf, np.nan]
    a, b, c, d = np.array(list(itertools.product(vals, repeat=4)), dtype=dt).T.copy()
    z, w = _parts(dt, a, b), _parts(dt, c, d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            want = np.power(z, w)
    r, i = cm.pow(*(ug.tensor(v, device=device) for v in (a, b, c, d)))
    got_re, got_im = r.numpy(), i.numpy()
    want_re, want_im = want.real.astype(np.float64), want.imag.astype(np.float64)
    # zero signs: compare |.| (a zero's sign is then the same)
    with np.errstate(all="ignore"):
        condition = 1 + np.abs(w.astype(np.complex128) * np.log(z.astype(np.complex128)))
        tol = (2 * MAX_ULP[dt]["pow"] + 2) * np.where(np.isfinite(condition), condition, 1.0)
    # (a part below the angle's rounding taken as numpy's: its value means nothing)
    noise_re, noise_im = _angle_noise(dt, z, w)
    got_re, got_im = np.where(noise_re, want_re, got_re), np.where(noise_im, want_im, got_im)
    unsigned = [np.where(v == 0, 0.0, v) for v in (got_re, got_im, want_re, want_im)]
    ok = _same(dt, *unsigned, tol)
    bad = [f"({p!r} + {q!r}j) ** ({s!r} + {t!r}j) = {u!r} + {v!r}j, numpy {x!r}"
           for p, q, s, t, u, v, x in zip(a[~ok], b[~ok], c[~ok], d[~ok], got_re[~ok], got_im[~ok], want[~ok])]
    assert not bad, f"on {device}: " + "; ".join(bad[:8])


def test_pow_integer_exponents(device):
    """numpy's integer powers are repeated products: z**2 is z*z exactly, for a Python scalar
    exponent (specialized when the op is built) and for a tensor of exponents alike."""
    rng = np.random.default_rng(3)
    z = (rng.uniform(-3, 3, 64) + 1j * rng.uniform(-3, 3, 64)).astype(np.complex128)
    z[:4] = [1 + 1j, 2j, -1 + 0j, 0.5 - 0.5j]
    x, y = ug.tensor(z.real.copy(), device=device), ug.tensor(z.imag.copy(), device=device)
    exps = [2, 3, 4, 5, 7, 16, 99, -1, -2, -3, -7, 100, -100, 1]
    for n in exps:
        want = np.power(z, complex(n, 0))
        sr, si = cm.pow(x, y, n)
        tr, ti = cm.pow(x, y, ug.tensor(np.full(64, float(n)), device=device))
        for r, i in ((sr, si), (tr, ti)):
            got = r.numpy() + 1j * i.numpy()
            scale = np.abs(want) * (np.finfo(np.float64).eps * (4 + 2 * abs(n) if abs(n) < 100 else 400))
            assert np.all(np.abs(got - want) <= scale), (n, np.max(np.abs(got - want) / scale))
        np.testing.assert_array_equal(sr.numpy(), tr.numpy())
        np.testing.assert_array_equal(si.numpy(), ti.numpy())
    r, i = cm.pow(x, y, 2)
    assert complex(r.numpy()[0], i.numpy()[0]) == 2j           # (1 + 1j)**2, exactly (not 1.2e-16 + 2j)
    r, i = cm.pow(x, y, 0)
    assert np.all(r.numpy() == 1) and np.all(i.numpy() == 0)


# --- symmetries, kernels, derivatives, errors ------------------------------------------------------

CONJ = sorted(NUMPY)
ODD = ["asinh", "atanh", "sin", "tan", "sinh", "tanh", "asin", "atan", "sign", "round", "reciprocal"]
EVEN = ["cos", "cosh", "square"]


UNSIGNED_ZERO = {"sign": lambda re, im: (re == 0) & (im == 0)}   # the standard's sign(+-0 +- 0i) == +0 + 0i


def _identical(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (np.isnan(a) & np.isnan(b)) | ((a == b) & (np.signbit(a) == np.signbit(b)))


@pytest.mark.parametrize("dt", [F32, F64], ids=str)
def test_symmetries(device, require_dtype, dt):
    """f(conj z) == conj(f(z)) for every function, f(-z) == -f(z) for the odd ones (the
    standard requires them of asinh and atanh) and f(-z) == f(z) for the even ones, bit for bit,
    zeros' signs included (C99's symmetries, which ug keeps where the standard leaves a sign
    open)."""
    require_dtype(dt)
    sre, sim = _special_grid(dt)
    gre, gim = _grid(dt)
    re, im = np.concatenate([sre, gre[::7]]), np.concatenate([sim, gim[::7]])
    # (not with a NaN part: negating it gives a NaN, the same value, and acos(inf + NaN i)'s -inf,
    # say, is not symmetric)
    keep = ~np.isnan(re) & ~np.isnan(im)
    re, im = re[keep], im[keep]
    for name in CONJ:
        r, i = _run(name, device, re, im)
        cr, ci = _run(name, device, re, -im)
        ok = _identical(cr, r) & _identical(ci, -i)
        # (but sign(0) == +0 + 0i, the standard's)
        if name in UNSIGNED_ZERO:
            ok |= UNSIGNED_ZERO[name](re, im)
        assert ok.all(), f"{name}(conj z) != conj({name}(z)) at {re[~ok][:4]!r} + {im[~ok][:4]!r}j on {device}"
        if name in ODD:
            nr, ni = _run(name, device, -re, -im)
            ok = _identical(nr, -r) & _identical(ni, -i)
            if name in UNSIGNED_ZERO:
                ok |= UNSIGNED_ZERO[name](re, im)
            assert ok.all(), f"{name}(-z) != -{name}(z) at {re[~ok][:4]!r} + {im[~ok][:4]!r}j on {device}"
        if name in EVEN:
            nr, ni = _run(name, device, -re, -im)
            ok = _identical(nr, r) & _identical(ni, i)
            assert ok.all(), f"{name}(-z) != {name}(z) at {re[~ok][:4]!r} + {im[~ok][:4]!r}j on {device}"


@pytest.mark.parametrize("name", sorted(NUMPY) + ["pow"])
def test_one_kernel(name):
    """Each function of a complex argument is one kernel, with its neighbours fused in."""
    x = ug.tensor(np.linspace(-2, 2, 64), device="ref")
    y = ug.tensor(np.linspace(-1, 3, 64), device="ref")
    if name == "pow":
        r, i = cm.pow(x * 2, y, y + 1, x)
    else:
        r, i = getattr(cm, name)(x * 2, y - 1)
    assert len(ug.schedule(r * r + i * i).kernels) == 1
    assert len(ug.schedule(r + 1, i * 3).kernels) == 1


@pytest.mark.parametrize("name", HOLOMORPHIC + ["pow"])
def test_derivative(device, name):
    """ug.grad through the parts: for f holomorphic and a real loss L(re, im), dL/dx + i dL/dy
    == conj(f'(z)) (dL/dre + i dL/dim), f' mpmath's (its numerical derivative)."""
    rng = np.random.default_rng(11)
    z = rng.uniform(-1.5, 1.5, 6) + 1j * rng.uniform(0.2, 1.5, 6) * rng.choice([-1, 1], 6)
    x, y = ug.tensor(z.real.copy(), device=device), ug.tensor(z.imag.copy(), device=device)
    g = 0.3 - 0.7j
    w = 1.5 - 0.5j

    def loss(a, b):
        r, i = cm.pow(a, b, ug.tensor(np.full(6, w.real), device=device), ug.tensor(np.full(6, w.imag), device=device)) \
            if name == "pow" else getattr(cm, name)(a, b)
        return (r * g.real + i * g.imag).sum()
    gx, gy = ug.grad(loss, argnums=(0, 1))(x, y)
    got = gx.numpy() + 1j * gy.numpy()
    f = (lambda v: mp.power(v, mp.mpc(w.real, w.imag))) if name == "pow" else MPMATH[name]
    with mp.workprec(100):
        want = np.array([complex(mp.diff(f, mp.mpc(v.real, v.imag))) for v in z]).conj() * g
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=name)


def test_sign_derivative(device):
    """sign(z) = z / |z| is not holomorphic: its derivative against central differences, and 0
    at z == 0 (torch's sgn)."""
    z = np.array([1.5 - 0.5j, -0.7 + 1.1j, 2.0 + 0.0j, 1e-3j, 0.0])
    g = 0.6 + 0.2j
    x, y = ug.tensor(z.real.copy(), device=device), ug.tensor(z.imag.copy(), device=device)

    def loss(a, b):
        r, i = cm.sign(a, b)
        return (r * g.real + i * g.imag).sum()
    gx, gy = ug.grad(loss, argnums=(0, 1))(x, y)

    def real_loss(v):
        with np.errstate(all="ignore"):
            s = np.where(v == 0, 0, v / np.abs(v))
        return s.real * g.real + s.imag * g.imag
    h = 1e-6
    want_x = (real_loss(z + h) - real_loss(z - h)) / (2 * h)
    want_y = (real_loss(z + 1j * h) - real_loss(z - 1j * h)) / (2 * h)
    want_x[-1] = want_y[-1] = 0
    np.testing.assert_allclose(gx.numpy(), want_x, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gy.numpy(), want_y, rtol=1e-6, atol=1e-6)


def test_pow_derivative_in_the_exponent(device):
    """d(z**w)/dw = z**w log z (also at integer w, where the value is a product), and 0 at z == 0."""
    z = np.array([1.5 - 0.5j, -0.7 + 1.1j, 2.0 + 0.0j, 0.0])
    w = np.array([2.0, 3.0 + 0.5j, -1.5, 2.0])
    args = [ug.tensor(v.copy(), device=device) for v in (z.real, z.imag, w.real, w.imag)]
    g = 0.6 + 0.2j

    def loss(c, d):
        r, i = cm.pow(args[0], args[1], c, d)
        return (r * g.real + i * g.imag).sum()
    gc, gd = ug.grad(loss, argnums=(0, 1))(args[2], args[3])
    got = gc.numpy() + 1j * gd.numpy()
    with np.errstate(all="ignore"):
        want = np.conj(z ** w * np.log(z)) * g
    want[z == 0] = 0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_bad_arguments():
    x32 = ug.tensor(np.ones(3, np.float32), device="ref")
    x64 = ug.tensor(np.ones(3), device="ref")
    ints = ug.tensor(np.ones(3, np.int32), device="ref")
    with pytest.raises(TypeError, match="float32 or all float64"):
        cm.exp(x32, x64)
    with pytest.raises(TypeError, match="float32 or all float64"):
        cm.log(ints, ints)
    with pytest.raises(TypeError, match="must be ug Tensors"):
        cm.sqrt(np.ones(3), x64)   # type: ignore[arg-type]
    with pytest.raises(TypeError, match="real Python scalar"):
        cm.pow(x64, x64, 1j)
    with pytest.raises(TypeError, match="im2 must be None"):
        cm.pow(x64, x64, 2, x64)
    with pytest.raises(ValueError, match="different devices"):
        cm.exp(x64, ug.tensor(np.ones(3), device="cpu"))


# --- the namespace on complex tensors ---------------------------------------------------------------

# the namespace's name of each complex_math function (square and reciprocal are the core's z * z
# and 1 / z, with Annex G's infinities: array_api._complex)
NAMESPACE = {name: name for name in sorted(MPMATH) if name not in ("square", "reciprocal")}


@pytest.mark.parametrize("ct", [np.complex64, np.complex128], ids=["complex64", "complex128"])
def test_namespace_dispatches_complex_tensors(device, require_dtype, ct):
    """ug.exp(z) and the rest on complex tensors are complex_math's functions of the parts
    (bit for bit), of the argument's dtype, one kernel, and numpy's (np.exp(t) on a ug tensor
    too); z ** w with a tensor exponent is complex_math.pow; atan2, hypot and logaddexp are not
    defined on complex numbers (a TypeError)."""
    require_dtype(ct)
    dt = np.dtype(ct)
    part = np.finfo(dt).dtype
    rng = np.random.default_rng(5)
    zn = (rng.uniform(-3, 3, 32) + 1j * rng.uniform(-3, 3, 32)).astype(dt)
    z = ug.tensor(zn, device=device)
    x, y = ug.tensor(zn.real.copy(), device=device), ug.tensor(zn.imag.copy(), device=device)
    for name, ug_name in NAMESPACE.items():
        got = getattr(ug, ug_name)(z)
        assert got.dtype == dt, name
        assert len(ug.schedule(got).kernels) == 1, name
        r, i = getattr(cm, name)(x, y)
        np.testing.assert_array_equal(got.numpy().real, r.numpy(), err_msg=name)
        np.testing.assert_array_equal(got.numpy().imag, i.numpy(), err_msg=name)
        with np.errstate(all="ignore"):
            want = NUMPY[name](zn.astype(np.complex128))
        np.testing.assert_allclose(got.numpy(), want, rtol=8 * np.finfo(part).eps, atol=8 * np.finfo(part).eps,
                                   err_msg=name)
    assert isinstance(np.expm1(z), ug.Tensor)
    np.testing.assert_array_equal(np.expm1(z).numpy(), ug.expm1(z).numpy())
    w = ug.tensor((zn * 0.5).astype(dt), device=device)
    r, i = cm.pow(x, y, *(ug.tensor(v.copy(), device=device) for v in ((zn * 0.5).real, (zn * 0.5).imag)))
    got = (z ** w).numpy()
    np.testing.assert_array_equal(got.real, r.numpy())
    np.testing.assert_array_equal(got.imag, i.numpy())
    for name in ("atan2", "hypot", "logaddexp"):
        with pytest.raises(TypeError, match="not defined on complex numbers"):
            getattr(ug, name)(z, z)


def test_complex_expression_is_one_kernel():
    """z * conj(w) + exp(1j * phi) (the issue's bench row): one kernel of the parts."""
    rng = np.random.default_rng(9)
    zn, wn = (rng.standard_normal(64) + 1j * rng.standard_normal(64) for _ in range(2))
    phin = rng.uniform(-3, 3, 64)
    z, w = ug.tensor(zn.astype(np.complex64), device="ref"), ug.tensor(wn.astype(np.complex64), device="ref")
    phi = ug.tensor(phin.astype(np.float32), device="ref")
    e = z * ug.conj(w) + ug.exp(1j * phi)
    assert len(ug.schedule(e).kernels) == 1
    np.testing.assert_allclose(e.numpy(), zn * np.conj(wn) + np.exp(1j * phin), rtol=1e-5, atol=1e-5)
