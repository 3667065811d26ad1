"""The Array API's elementwise functions of a complex argument, over pairs of real tensors.

Each function takes the real and imaginary parts of its complex argument(s) as two real ug
tensors of one dtype (float32 for complex64, float64 for complex128) and returns the parts of
its result: `exp(re, im) -> (re, im)`. Every one is built only from ug's real tensor ops (where,
exp, log, sin, cos, sqrt, atan2, hypot, log1p, ...), so it is lazy, fuses into one kernel with
its neighbours, runs on every device, and differentiates (the holomorphic ones with their own
derivative, f'(z), so that the careful formulas' unused branches give no NaN gradients). The
complex tensors of the graph reach these through the REAL/IMAG/COMPLEX ops (tensor_arith's
parts and combine).

The formulas are those of C99's Annex G as FreeBSD's msun writes them (which numpy's npymath
copies): Kahan's for sqrt and tanh, the scaled exp for the hyperbolic functions, CPython's
log1p form for a logarithm near 1, and Hull, Fairgrieve and Tang's for asinh, acos and their
relatives (msun's catrig.c). Their special cases (infinities, NaNs, signed zeros) are the
standard's (2024.12) and C99's; where numpy (glibc underneath) differs from the standard the
standard wins, and where the standard leaves a sign open, C99's symmetries do (f(conj z) ==
conj(f(z)), the odd and even functions): docs/array-api.md lists the differences from numpy.
pow is numpy's: z**0 == 1, 0**w, and the integer exponents below 100 in magnitude by repeated
multiplication (exact for z**2).

Accuracy (tests/test_complex_math.py measures it against mpmath; the bounds are there, the
table per device in docs/array-api.md, "Complex functions: accuracy"): within 3.5 ulp of
|result| in float32 and float64 on cpu, ref, c and vulkan.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable

import numpy as np

from ..custom import define_vjp
from ..tensor import Tensor, full as _full
from ..tensor_arith import as_tensor, combine, maximum as _maximum, minimum as _minimum, parts, where
from . import _complex, transcendental as _t
from .elementwise import copysign as _copysign, floor as _floor, round as _round, signbit as _signbit

Pair = tuple[Tensor, Tensor]
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
INF, NAN = math.inf, math.nan
LN2 = math.log(2)
PI = math.pi
# float64 hi + lo (lo: the rounding error of hi)
LOG2_E = (1.4426950408889634, 2.0355273740931033e-17)      # 1 / log(2)
LOG10_E = (0.4342944819032518, 1.098319650216765e-17)     # 1 / log(10)
PI_2 = (1.5707963267948966, 6.123233995736766e-17)        # pi / 2


class _Limits:
    """The constants of a float dtype that the formulas below need (msun's, for its dtype)."""

    def __init__(self, dt: np.dtype) -> None:
        fi = np.finfo(dt)
        self.eps = float(fi.eps)
        self.max = float(fi.max)
        self.min = float(fi.smallest_normal)
        self.digits = fi.nmant + 1
        # exp(x) for x > EXP_SHIFT: exp(x - EXP_SHIFT) * exp(EXP_SHIFT), both finite (EXP_SHIFT an
        # integer: x - EXP_SHIFT is exact there), so exp(x) cos(y) overflows only where it must
        self.exp_shift = float(math.floor(math.log(self.max)) - 1)
        self.exp_of_shift = float(dt.type(math.exp(self.exp_shift)))
        # the |x| beyond which tanh(x) is +-1 in this dtype (msun: 22, and 11 for float)
        self.tanh_big = 22.0 if dt == F64 else 11.0
        emin, emax = int(fi.minexp), int(fi.maxexp)
        self.sqrt_min = 2.0 ** (emin // 2)                    # >= sqrt(smallest normal)
        self.sqrt_max_half = 2.0 ** (emax // 2 - 1)           # its square times 2 is finite
        self.four_sqrt_min = 4 * self.sqrt_min
        self.recip_eps = 1 / self.eps
        self.sqrt_3_eps = math.sqrt(3 * self.eps)
        self.sqrt_6_eps = math.sqrt(6 * self.eps)
        # sqrt's scaling: below, both parts are multiplied by 2**(2k) (exactly), the result by 2**-k
        self.sqrt_tiny = 4 * self.min
        self.sqrt_k = (self.digits + 3) // 2
        self.sqrt_big = self.max / (1 + math.sqrt(2))
        self.emax = emax


_LIMITS = {F32: _Limits(F32), F64: _Limits(F64)}


def _check(name: str, *parts: Tensor) -> _Limits:
    """The limits of the parts' dtype; the parts must be float32 or float64 tensors of one dtype
    and device (the parts of one complex64 or complex128 argument, or of several)."""
    for p in parts:
        if not isinstance(p, Tensor):
            raise TypeError(f"complex_math.{name}: the parts must be ug Tensors, got {type(p).__name__}")
    dts = {p.dtype for p in parts}
    if len(dts) != 1 or next(iter(dts)) not in _LIMITS:
        raise TypeError(f"complex_math.{name}: the parts must all be float32 or all float64, got "
                        f"{', '.join(str(p.dtype) for p in parts)}")
    devices = {p.device for p in parts}
    if len(devices) != 1:
        raise ValueError(f"complex_math.{name}: the parts are on different devices: {sorted(devices)}")
    return _LIMITS[next(iter(dts))]


def _k(like: Tensor, value: float) -> Tensor:
    """A constant of like's dtype and device, folded into the kernel."""
    return as_tensor(value, like)


def _filled(like: Tensor, value: float) -> Tensor:
    """A tensor of like's shape, dtype and device holding the constant `value` (0 or 1: folded,
    not a kernel argument)."""
    return _full(like.shape, value, like.dtype, like.device)


def _isnan(v: Tensor) -> Tensor:
    return v != v


def _isinf(v: Tensor) -> Tensor:
    return v.abs() == _k(v, INF)


def _isfinite(v: Tensor) -> Tensor:
    return v.abs() < _k(v, INF)


def _signed(value: float, sign_of: Tensor) -> Tensor:
    """copysign(value, sign_of) for a constant value: +-value by sign_of's sign bit (a
    constant's copysign would compute on a 0-d tensor, then broadcast it)."""
    return where(_signbit(sign_of), _k(sign_of, -value), _k(sign_of, value))


def _pi_2(like: Tensor) -> Tensor:
    """pi/2 rounded to like's dtype."""
    return _k(like, PI_2[0])


def _holomorphic(name: str, x: Tensor, y: Tensor, value: Pair, derivative: Callable[[Tensor, Tensor], Pair]) -> Pair:
    """`value` = f(x + iy) with its own derivative: for f holomorphic with f' = p + iq,
    d re/dx = d im/dy = p and d im/dx = -d re/dy = q. `derivative(x, y)` builds (p, q), once
    for both parts' rules (they share it)."""
    built: dict[tuple[Any, Any], Pair] = {}

    def pq(a: Tensor, b: Tensor) -> Pair:
        key = (a.node, b.node)
        if key not in built:
            built[key] = derivative(a, b)
        return built[key]

    def re_rule(g: Tensor, out: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
        p, q = pq(a, b)
        return g * p, -(g * q)

    def im_rule(g: Tensor, out: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
        p, q = pq(a, b)
        return g * q, g * p

    return define_vjp(value[0], [x, y], re_rule), define_vjp(value[1], [x, y], im_rule)


# --- complex arithmetic on pairs (textbook, as numpy's own helpers) ---------------------------

def _mul(a: Tensor, b: Tensor, c: Tensor, d: Tensor) -> Pair:
    """(a + bi)(c + di), the textbook formula (numpy's cmul; no recovery of infinities)."""
    return a * c - b * d, a * d + b * c


def _mul_recovering(a: Tensor, b: Tensor, c: Tensor, d: Tensor) -> Pair:
    """(a + bi)(c + di) with C99's Annex G recovery (its example G.5.1, gcc's __muldc3, which
    glibc's cpow multiplies with): a product that the textbook formula gives as NaN + NaN i
    although a factor is infinite (or a partial product overflowed) is recomputed with the
    infinite factor's parts as +-1 / +-0 and NaN parts as zeros, times infinity."""
    ac, bd, ad, bc = a * c, b * d, a * d, b * c
    re, im = ac - bd, ad + bc
    inf_ab = _isinf(a) | _isinf(b)
    inf_cd = _isinf(c) | _isinf(d)
    zero = _k(a, 0.0)

    def fixed(v: Tensor, boxed: Tensor) -> Tensor:
        # boxed: an infinite part +-1, a finite one +-0; else a NaN part +-0 (only what a
        # recomputation reads: recovery takes both factors so)
        return _copysign(where(boxed & _isinf(v), _k(v, 1.0), where(boxed | _isnan(v), zero, v.abs())), v)
    a2, b2, c2, d2 = fixed(a, inf_ab), fixed(b, inf_ab), fixed(c, inf_cd), fixed(d, inf_cd)
    overflowed = _isinf(ac) | _isinf(bd) | _isinf(ad) | _isinf(bc)
    recover = _isnan(re) & _isnan(im) & (inf_ab | inf_cd | overflowed)
    inf = _k(a, INF)
    return (where(recover, inf * (a2 * c2 - b2 * d2), re),
            where(recover, inf * (a2 * d2 + b2 * c2), im))


def _div(a: Tensor, b: Tensor, c: Tensor, d: Tensor) -> Pair:
    """(a + bi) / (c + di) by Smith's algorithm, as numpy's cdiv (its 0 / 0 included)."""
    ac, ad = c.abs(), d.abs()
    by_c = ac >= ad
    zero = (ac == 0) & (ad == 0)
    rat = where(by_c, d / c, c / d)
    scl = where(by_c, c + d * rat, d + c * rat).reciprocal()
    re = where(by_c, (a + b * rat) * scl, (a * rat + b) * scl)
    im = where(by_c, (b - a * rat) * scl, (b * rat - a) * scl)
    return where(zero, a / ac, re), where(zero, b / ad, im)


# --- exponentials and logarithms ---------------------------------------------------------------

def _exp_times(x: Tensor, lim: _Limits, factors: tuple[Tensor, ...], half: bool = False) -> list[Tensor]:
    """exp(x) * t (exp(x) / 2 * t if half) for each t in factors, finite wherever the product
    is: exp(x) = exp(x - kC) * exp(C)**k for C = EXP_SHIFT and k = 0, 1 or 2 (x - kC exact),
    multiplied in the order ((t * exp(C)) * exp(x - kC)) * exp(C) (the last for k == 2): a t
    at most 1 times exp(C) is finite, and a tiny t (sin y of a subnormal y) is lifted out of
    the subnormals before the rest, so that it is right up to x = log(max / smallest
    subnormal), as numpy's scaled cexp."""
    c = lim.exp_shift
    k1, k2 = x > _k(x, c), x > _k(x, 2 * c)
    u = (x - where(k2, _k(x, 2 * c), where(k1, _k(x, c), _k(x, 0.0)))).exp()
    one = _k(x, 1.0)
    first = where(k1, _k(x, lim.exp_of_shift * (0.5 if half else 1.0)), _k(x, 0.5) if half else one)
    last = where(k2, _k(x, lim.exp_of_shift), one)
    return [t * first * u * last for t in factors]


def _exp(x: Tensor, y: Tensor, lim: _Limits) -> Pair:
    re, im = _exp_times(x, lim, (y.cos(), y.sin()))
    # exp(+-inf + i(inf or NaN)): +inf + NaN i and +-0 +-0 i (cos and sin of inf are NaN)
    bad = _isinf(x) & ~_isfinite(y)
    re = where(bad, where(x > 0, _k(x, INF), _k(x, 0.0)), re)
    im = where(bad & (x < 0), where(_isnan(y), _k(y, 0.0), _signed(0.0, y)), im)
    # exp(x + 0i) == exp(x) + 0i, x NaN or inf included
    return re, where(y == 0, y, im)


def exp(re: Tensor, im: Tensor) -> Pair:
    """e**z = e**x (cos y + i sin y), finite where the result is (scaled beyond exp's overflow)."""
    lim = _check("exp", re, im)
    value = _exp(re, im, lim)
    return _holomorphic("exp", re, im, value, lambda x, y: exp(x, y))


def expm1(re: Tensor, im: Tensor) -> Pair:
    """e**z - 1 accurate near 0: (expm1(x) cos y - 2 sin(y/2)**2) + i e**x sin y."""
    lim = _check("expm1", re, im)
    x, y = re, im
    e_re, e_im = _exp(x, y, lim)
    s = (y * 0.5).sin()
    near = _t.expm1(x) * y.cos() - (s * s) * 2
    big = x > _k(x, lim.exp_shift)
    r = where(big, e_re - 1, near)
    # expm1(-inf + i(inf or NaN)) == -1 +- 0i; expm1(+inf + i(inf or NaN)) == inf + NaN i
    bad = _isinf(x) & ~_isfinite(y)
    r = where(bad, where(x > 0, _k(x, INF), _k(x, -1.0)), r)
    # expm1(+-0 +- 0i) == +0 +- 0i: the standard's "0 + 0j" (its conformance suite reads +0;
    # numpy's expm1(-0 + 0i) is -0 + 0i)
    r = where((x == 0) & (y == 0), _k(x, 0.0), r)
    value = (r, e_im)
    return _holomorphic("expm1", re, im, value, lambda x, y: exp(x, y))


def _log_abs(x: Tensor, y: Tensor, lim: _Limits) -> Tensor:
    """log|x + iy| (CPython's, numpy's and msun's clog), with one logarithm: for |z| in [0.71,
    1.73], 0.5 * log1p((a-1)(a+1) + b*b) (a = max(|x|, |y|), b = min; a - 1 is exact near 1);
    else 0.5 * log(a*a + b*b) where the squares neither overflow nor lose bits (its error
    relative to log|z|, not |z|'s: log(hypot) was 3.7 ulp at |z| = 0.68 in float32), else
    log(hypot) of the parts scaled by a power of 2."""
    ax, ay = x.abs(), y.abs()
    a, b = _maximum(ax, ay), _minimum(ax, ay)
    huge = a > _k(a, lim.max / 4)
    tiny = a < _k(a, lim.min)
    scale = where(huge, _k(a, 0.5), where(tiny, _k(a, 2.0 ** lim.digits), _k(a, 1.0)))
    h = _t.hypot(ax * scale, ay * scale)
    near_one = (h >= _k(h, 0.71)) & (h <= _k(h, 1.73))
    squares = (a >= _k(a, lim.sqrt_min)) & (a <= _k(a, lim.sqrt_max_half))
    # (a == b == inf aside: hypot says inf for an infinite part even with a NaN; neither the
    # near nor the squares branch is taken there)
    am = where(near_one, a, _k(a, 1.0))        # keeps the unused branches finite
    v = (am - 1) * (am + 1) + b * b
    u = v + 1
    sq = where(squares, a, _k(a, 1.0))
    arg = where(near_one, u, where(squares, sq * sq + b * b, h))
    log_arg = arg.log()
    far = log_arg + where(huge, _k(a, LN2), where(tiny, _k(a, -lim.digits * LN2), _k(a, 0.0)))
    return where(near_one, _t._log1p_from(v, u, log_arg) * 0.5, where(squares, log_arg * 0.5, far))


def _log(x: Tensor, y: Tensor, lim: _Limits) -> Pair:
    return _log_abs(x, y, lim), _t.atan2(y, x)


def log(re: Tensor, im: Tensor) -> Pair:
    """The principal logarithm: log|z| + i atan2(y, x), the cut along the negative reals (the
    imaginary part's sign that of y: log(-1 - 0i) == -i pi)."""
    lim = _check("log", re, im)
    return _holomorphic("log", re, im, _log(re, im, lim), lambda x, y: reciprocal(x, y))


def log1p(re: Tensor, im: Tensor) -> Pair:
    """log(1 + z), accurate near 0: 0.5 * log1p(x (2 + x) + y*y) + i atan2(y, 1 + x) for
    |x|, |y| < 0.5, else log(1 + z)."""
    lim = _check("log1p", re, im)
    x, y = re, im
    small = _maximum(x.abs(), y.abs()) < 0.5
    xs, ys = where(small, x, _k(x, 0.0)), where(small, y, _k(y, 0.0))      # the unused branch finite
    near = _t.log1p(xs * (xs + 2) + ys * ys) * 0.5
    far = _log_abs(x + 1, y, lim)
    value = (where(small, near, far), _t.atan2(y, x + 1))
    return _holomorphic("log1p", re, im, value, lambda x, y: reciprocal(x + 1, y))


def _times(v: Tensor, constant: tuple[float, float]) -> Tensor:
    """v * constant, the constant float64 hi + lo split into v's dtype (transcendental's
    _times), a product that rounds to zero (or overflows) left as v * hi: adding v * lo could
    flip a zero's sign."""
    hi = float(v.dtype.type(constant[0]))
    lo = float(v.dtype.type((constant[0] - hi) + constant[1]))
    big = v * _k(v, hi)
    return where((big == 0) | _isinf(big), big, big + v * _k(v, lo))


def _scaled_log(name: str, re: Tensor, im: Tensor, constant: tuple[float, float]) -> Pair:
    lim = _check(name, re, im)
    lr, li = _log(re, im, lim)
    value = (_times(lr, constant), _times(li, constant))

    def derivative(x: Tensor, y: Tensor) -> Pair:
        p, q = reciprocal(x, y)
        c = _k(x, constant[0])
        return p * c, q * c
    return _holomorphic(name, re, im, value, derivative)


def log2(re: Tensor, im: Tensor) -> Pair:
    """log(z) / log(2), each part (numpy's)."""
    return _scaled_log("log2", re, im, LOG2_E)


def log10(re: Tensor, im: Tensor) -> Pair:
    """log(z) / log(10), each part (numpy's)."""
    return _scaled_log("log10", re, im, LOG10_E)


def sqrt(re: Tensor, im: Tensor) -> Pair:
    """The principal square root (Kahan's: t = sqrt((|x| + |z|) / 2), the other part
    |y| / 2t), the parts scaled by a power of 2 where |z| would overflow or lose bits; its real
    part >= +0, its imaginary part of y's sign (sqrt(-4 - 0i) == -2i)."""
    lim = _check("sqrt", re, im)
    x, y = re, im
    ax, ay = x.abs(), y.abs()
    a = _maximum(ax, ay)
    big = a >= _k(a, lim.sqrt_big)
    tiny = a < _k(a, lim.sqrt_tiny)
    scale = where(big, _k(a, 0.25), where(tiny, _k(a, 2.0 ** (2 * lim.sqrt_k)), _k(a, 1.0)))
    back = where(big, _k(a, 2.0), where(tiny, _k(a, 2.0 ** -lim.sqrt_k), _k(a, 1.0)))
    xs, ys = ax * scale, ay * scale
    t = ((xs + _t.hypot(xs, ys)) * 0.5).sqrt()
    w = ys / (t * 2)
    neg = x < 0
    r = where(neg, w, t) * back
    i = _copysign(where(neg, t, w) * back, y)
    # sqrt(+-0 + yi) for y == 0: +0 + yi; sqrt(x + inf i) == inf + inf i, x NaN included
    zero = (x == 0) & (y == 0)
    inf_y = ay == _k(ay, INF)
    r = where(zero, _k(x, 0.0), where(inf_y, _k(x, INF), r))
    i = where(zero | inf_y, y, i)
    return _holomorphic("sqrt", re, im, (r, i), lambda x, y: _half_reciprocal_of(sqrt(x, y)))


def _half_reciprocal_of(z: Pair) -> Pair:
    p, q = reciprocal(*z)
    return p * 0.5, q * 0.5


# --- pow ---------------------------------------------------------------------------------------

def _integer_power(x: Tensor, y: Tensor, n: int) -> Pair:
    """z**n for an int |n| < 100 as numpy computes it (npy_cpow): z itself, z*z and z*(z*z)
    for 1, 2, 3, else binary powering from 1, then 1 / that for n < 0 (Smith's division)."""
    if n == 1:
        return x, y
    if n == 2:
        return _mul(x, y, x, y)
    if n == 3:
        sq = _mul(x, y, x, y)
        return _mul(x, y, *sq)
    m = abs(n)
    acc: Pair = (_filled(x, 1.0), _filled(x, 0.0))
    p: Pair = (x, y)
    bit = 1
    while True:
        if m & bit:
            acc = _mul(*acc, *p)
        bit <<= 1
        if m < bit:
            break
        p = _mul(*p, *p)
    if n < 0:
        return _div(_filled(x, 1.0), _filled(x, 0.0), *acc)
    return acc


def _integer_power_selected(x: Tensor, y: Tensor, c: Tensor) -> Pair:
    """z**c for c an integer of magnitude below 100 (else anything), each element's own: the
    same multiplications as _integer_power, chosen by selects on c's bits."""
    m = c.abs()
    one, zero = _filled(x, 1.0), _filled(x, 0.0)
    # m's binary digits: floor(m / 2**k) - 2 floor(m / 2**(k+1)) (2**7 > 99)
    h = [m] + [_floor(m * _k(m, 0.5 ** k)) for k in range(1, 7)]
    acc: Pair = (one, zero)
    p: Pair = (x, y)
    sq = p
    for k in range(7):
        bit = (h[k] - h[k + 1] * 2 if k < 6 else h[k]) == 1
        prod = _mul(*acc, *p)
        acc = (where(bit, prod[0], acc[0]), where(bit, prod[1], acc[1]))
        if k < 6:
            p = _mul(*p, *p)
            if k == 0:
                sq = p                                  # z*z, numpy's z**2
    inv = _div(one, zero, *acc)
    neg = c < 0
    acc = (where(neg, inv[0], acc[0]), where(neg, inv[1], acc[1]))
    cube = _mul(x, y, *sq)
    three = c == _k(c, 3.0)
    re = where(c == 1, x, where(c == 2, sq[0], where(three, cube[0], acc[0])))
    im = where(c == 1, y, where(c == 2, sq[1], where(three, cube[1], acc[1])))
    return re, im


def _pow_exp_log(x: Tensor, y: Tensor, c: Tensor, d: Tensor, lim: _Limits) -> Pair:
    """exp(w log z) as glibc's cpow (the product by C99's rules)."""
    lr, li = _log(x, y, lim)
    return _exp(*_mul_recovering(c, d, lr, li), lim)


def _pow_zeros(x: Tensor, y: Tensor, c: Tensor, d: Tensor, r: Tensor, i: Tensor) -> Pair:
    """numpy's z**0 == 1 (for any z) and 0**w == 0 for re(w) > 0, else NaN + NaN i."""
    zero_z = (x == 0) & (y == 0)
    zr = where(c > 0, _k(x, 0.0), _k(x, NAN))
    r, i = where(zero_z, zr, r), where(zero_z, zr, i)
    zero_w = (c == 0) & (d == 0)
    return where(zero_w, _k(x, 1.0), r), where(zero_w, _k(x, 0.0), i)


def pow(re1: Tensor, im1: Tensor, re2: Any, im2: Tensor | None = None) -> Pair:
    """z**w as numpy computes it: 1 for w == 0 (0**0 and NaN**0 included); for z == 0, 0 where
    re(w) > 0, else NaN + NaN i; for w an integer of magnitude below 100, repeated
    multiplication (z**2 == z*z exactly); else exp(w log z), the product by C99's rules (its
    infinities recovered, as glibc's cpow). `re2` may be a Python scalar, a real exponent the
    op is specialized for when built (z**2 is two multiplies); im2 None: a real exponent."""
    if not isinstance(re2, Tensor):
        lim = _check("pow", re1, im1)
        if not isinstance(re2, (int, float)) or isinstance(re2, bool):
            raise TypeError(f"complex_math.pow: the exponent must be a tensor or a real Python scalar, got "
                            f"{type(re2).__name__}")
        if im2 is not None:
            raise TypeError("complex_math.pow: a Python scalar exponent is real (im2 must be None)")
        e = float(re2)
        c, d = _k(re1, e), _k(re1, 0.0)
        if e == 0:
            return _filled(re1, 1.0), _filled(re1, 0.0)
        if e.is_integer() and abs(e) < 100:
            r, i = _integer_power(re1, im1, int(e))
        else:
            r, i = _pow_exp_log(re1, im1, c, d, lim)
        value = _pow_zeros(re1, im1, c, d, r, i)
        return _pow_derivative(value, re1, im1, e, None, lambda x, y: pow(x, y, e - 1))
    lim = _check("pow", re1, im1, re2, *(() if im2 is None else (im2,)))
    x, y, c = re1, im1, re2
    d = c * 0 if im2 is None else im2
    er, ei = _pow_exp_log(x, y, c, d, lim)
    integral = (d == 0) & (c.abs() < _k(c, 100.0)) & (_floor(c) == c)
    ir, ii = _integer_power_selected(x, y, where(integral, c, _k(c, 4.0)))
    value = _pow_zeros(x, y, c, d, where(integral, ir, er), where(integral, ii, ei))
    return _pow_derivative(value, x, y, c, im2, lambda x, y: pow(x, y, c - 1, im2))


def _pow_derivative(value: Pair, x: Tensor, y: Tensor, c: Any, d: Tensor | None,
                    lower: Callable[[Tensor, Tensor], Pair]) -> Pair:
    """z**w's own derivative: d/dz = w z**(w-1) (lower(x, y): z**(w-1), so 2 * z**1 at z == 0,
    not 2 * 0 / 0) and, for a tensor exponent, d/dw = z**w log z (0 at z == 0, as torch's).
    Both holomorphic: the parts' rules as in _holomorphic, per argument."""
    tensor_w = isinstance(c, Tensor)
    inputs = [x, y] + ([c] if tensor_w else []) + ([d] if d is not None else [])
    built: dict[str, Pair] = {}

    def derivatives(a: Tensor, b: Tensor) -> tuple[Pair, Pair | None]:
        if "z" not in built:
            lr, li = lower(a, b)
            if tensor_w:
                w = (c, c * 0 if d is None else d)
                built["z"] = _mul(*w, lr, li)
                out = value
                log_z = log(a, b)
                fw = _mul(*out, *log_z)
                zero = (a == 0) & (b == 0)
                built["w"] = (where(zero, _k(a, 0.0), fw[0]), where(zero, _k(a, 0.0), fw[1]))
            else:
                built["z"] = (lr * float(c), li * float(c))
        return built["z"], built.get("w")

    def rule(part: int) -> Callable[..., tuple[Tensor | None, ...]]:
        def r(g: Tensor, out: Tensor, a: Tensor, b: Tensor, *rest: Tensor) -> tuple[Tensor | None, ...]:
            (p, q), fw = derivatives(a, b)
            grads: list[Tensor | None] = [g * p, -(g * q)] if part == 0 else [g * q, g * p]
            if fw is not None:
                s_, t_ = fw
                grads.append(g * s_ if part == 0 else g * t_)
                if d is not None:
                    grads.append(-(g * t_) if part == 0 else g * s_)
            return tuple(grads)
        return r
    return define_vjp(value[0], inputs, rule(0)), define_vjp(value[1], inputs, rule(1))


# --- hyperbolic and trigonometric --------------------------------------------------------------

def _cosh_sinh_parts(x: Tensor, y: Tensor, lim: _Limits) -> tuple[Tensor, ...]:
    """(cosh x, sinh x, cos y, sin y, big, (exp(|x|) / 2 cos y, exp(|x|) / 2 sin y)) where big
    is |x| > EXP_SHIFT: there cosh x and sinh x are +-exp(|x|) / 2, which overflows before its
    products with cos y and sin y do (see _exp_times)."""
    ax = x.abs()
    big = ax > _k(x, lim.exp_shift)
    cy, sy = y.cos(), y.sin()
    bc, bs = _exp_times(where(big, ax, _k(x, 0.0)), lim, (cy, sy), half=True)
    return _t.cosh(x), _t.sinh(x), cy, sy, big, bc, bs


def _sinh(x: Tensor, y: Tensor, lim: _Limits) -> Pair:
    ch, sh, cy, sy, big, bc, bs = _cosh_sinh_parts(x, y, lim)
    re = where(big, where(x < 0, -bc, bc), sh * cy)
    im = where(big, bs, ch * sy)
    fin_y = _isfinite(y)
    # sinh(+-0 + i(inf or NaN)) == +-0 + NaN i; sinh(+-inf + i(inf or NaN)) == +-inf + NaN i
    # (signs the standard leaves open: C99's symmetries, sinh odd and conj-symmetric; numpy's
    # infinity is +inf for both)
    re = where((x == 0) & ~fin_y, x, where(_isinf(x) & ~fin_y, x, re))
    return re, where(y == 0, y, im)


def _cosh(x: Tensor, y: Tensor, lim: _Limits) -> Pair:
    ch, sh, cy, sy, big, bc, bs = _cosh_sinh_parts(x, y, lim)
    re = where(big, bc, ch * cy)
    im = where(big, where(x < 0, -bs, bs), sh * sy)
    fin_y = _isfinite(y)
    # cosh(+-inf + i(inf or NaN)) == +inf + NaN i; cosh(+-0 + i(inf or NaN)) == NaN + 0i, the
    # zero's sign left open by the standard: msun's x * copysign(0, y), keeping cosh even and
    # conj-symmetric (numpy's is +0 for all four)
    re = where(_isinf(x) & ~fin_y, _k(x, INF), re)
    im = where((x == 0) & ~fin_y, x * _signed(0.0, y), im)
    # cosh(x +- 0i): the imaginary part sinh(x) * (+-0), a zero of sign(x) sign(y) (also for x
    # infinite, where the product is NaN); y itself for x NaN (whose sign means nothing)
    return re, where(y == 0, where(_isnan(x), y, _signed(0.0, x) * y), im)


def _tanh(x: Tensor, y: Tensor, lim: _Limits) -> Pair:
    """Kahan's: with t = tan y, beta = 1 + t*t, s = sinh x, rho = sqrt(1 + s*s):
    tanh z = (beta rho s + i t) / (1 + beta s*s); for |x| >= 22 (11 in float32)
    sign(x) + i 4 sin y cos y exp(-2|x|)."""
    ax = x.abs()
    big = ax >= _k(x, lim.tanh_big)
    xs = where(big, _k(x, 0.0), x)                       # the unused branch finite
    cy, sy = y.cos(), y.sin()
    t = sy / cy
    beta = t * t + 1
    s = _t.sinh(xs)
    rho = (s * s + 1).sqrt()
    denom = beta * s * s + 1
    e = (-ax).exp()
    one = _signed(1.0, x)
    re = where(big, one, beta * rho * s / denom)
    im = where(big, sy * cy * _k(x, 4.0) * e * e, t / denom)
    fin_y = _isfinite(y)
    # tanh(+-inf + iy) == +-1 + 0i with y's sign (the standard's: C99 and numpy take sin 2y's)
    inf_x = _isinf(x)
    im = where(inf_x, _signed(0.0, y), im)
    # tanh(x + i(inf or NaN)) for finite x: +-0 + NaN i for x == +-0, else NaN + NaN i (the
    # |x| >= 22 branch would say +-1)
    re = where(~fin_y & ~inf_x, where(x == 0, x, _k(x, NAN)), re)
    # tanh(NaN +- 0i) == NaN +- 0i
    return re, where(_isnan(x) & (y == 0), y, im)


def _rotated(f: Callable[[Tensor, Tensor, _Limits], Pair], x: Tensor, y: Tensor, lim: _Limits) -> Pair:
    """-i f(iz) for f odd (sin from sinh, tan from tanh): msun's rotation, exact in the
    zeros' signs."""
    p, q = f(-y, x, lim)
    return q, -p


def sinh(re: Tensor, im: Tensor) -> Pair:
    """sinh x cos y + i cosh x sin y, scaled beyond exp's overflow; C99's special values."""
    lim = _check("sinh", re, im)
    return _holomorphic("sinh", re, im, _sinh(re, im, lim), lambda x, y: cosh(x, y))


def cosh(re: Tensor, im: Tensor) -> Pair:
    """cosh x cos y + i sinh x sin y, scaled beyond exp's overflow; C99's special values."""
    lim = _check("cosh", re, im)
    return _holomorphic("cosh", re, im, _cosh(re, im, lim), lambda x, y: sinh(x, y))


def tanh(re: Tensor, im: Tensor) -> Pair:
    """Kahan's formula (see _tanh); C99's special values."""
    lim = _check("tanh", re, im)

    def derivative(x: Tensor, y: Tensor) -> Pair:    # 1 - tanh(z)**2
        p, q = tanh(x, y)
        s = _mul(p, q, p, q)
        return 1 - s[0], -s[1]
    return _holomorphic("tanh", re, im, _tanh(re, im, lim), derivative)


def sin(re: Tensor, im: Tensor) -> Pair:
    """-i sinh(iz) (the standard's special cases are sinh's, so rotated)."""
    lim = _check("sin", re, im)
    return _holomorphic("sin", re, im, _rotated(_sinh, re, im, lim), lambda x, y: cos(x, y))


def cos(re: Tensor, im: Tensor) -> Pair:
    """cosh(iz)."""
    lim = _check("cos", re, im)

    def derivative(x: Tensor, y: Tensor) -> Pair:
        p, q = sin(x, y)
        return -p, -q
    return _holomorphic("cos", re, im, _cosh(-im, re, lim), derivative)


def tan(re: Tensor, im: Tensor) -> Pair:
    """-i tanh(iz)."""
    lim = _check("tan", re, im)

    def derivative(x: Tensor, y: Tensor) -> Pair:    # 1 + tan(z)**2
        p, q = tan(x, y)
        s = _mul(p, q, p, q)
        return 1 + s[0], s[1]
    return _holomorphic("tan", re, im, _rotated(_tanh, re, im, lim), derivative)


# --- inverse hyperbolic and trigonometric (Hull, Fairgrieve and Tang; msun's catrig.c) ----------

def _f(a: Tensor, b: Tensor, hypot_ab: Tensor) -> Tensor:
    """(hypot(a, b) - b) / 2 without cancellation (b >= 0: a*a / (hypot + b) / 2)."""
    return where(b < 0, (hypot_ab - b) * 0.5, where(b == 0, a * 0.5, a * a / (hypot_ab + b) * 0.5))


def _hard_work(x: Tensor, y: Tensor, lim: _Limits) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """msun's do_hard_work for x, y >= 0 below 1/eps: (rx, usable, num, den) with
    rx = Re(asinh(x + iy)) and Im(asinh(x + iy)) = atan2(num, den): num = B = y/A and den =
    sqrt(1 - B*B) where B is `usable` (asin(B)), else new_y and sqrt(A*A - y*y) (scaled alike)."""
    eps = lim.eps
    R = _t.hypot(x, y + 1)                    # |z + i|
    S = _t.hypot(x, y - 1)                    # |z - i|
    A = _maximum((R + S) * 0.5, _k(x, 1.0))
    small_a = A < _k(A, 10.0)                 # msun's A_crossover
    # Re: log(A + sqrt(A*A - 1)) as log1p(Am1 + sqrt(Am1 (A + 1))), Am1 = A - 1 without
    # cancellation; the cases below msun's, with one log1p for them all
    am1 = _f(x, 1 + y, R) + _f(x, 1 - y, S)
    ordinary = x >= (y - 1).abs() * eps
    log_arg = where(small_a,
                    where(ordinary, am1 + (am1 * (A + 1)).sqrt(), (y - 1) + ((y - 1) * (y + 1)).sqrt()),
                    (A - 1) + (A * A - 1).sqrt())
    # (the unused branches kept finite: sqrt of a negative is NaN, harmless in a select)
    rx = _t.log1p(log_arg)
    one_tiny = (y == 1) & (x < _k(x, eps * eps / 128))
    below = (~ordinary) & (y < 1)
    rx = where(small_a & one_tiny, x.sqrt(),
               where(small_a & below & ~one_tiny, x / ((1 - y) * (1 + y)).sqrt(), rx))
    # Im
    B = y / A
    tiny_y = y < _k(y, lim.four_sqrt_min)
    big_b = B > _k(B, 0.6417)                 # msun's B_crossover
    usable = ~tiny_y & ~big_b
    one_tiny_b = (y == 1) & (x < _k(x, eps / 128))
    amy = _f(x, y + 1, R) + _f(x, y - 1, S)
    s4 = 4 / eps / eps
    den_b = where(one_tiny_b, x.sqrt() * ((A + y) * 0.5).sqrt(),
                  where(ordinary, (amy * (A + y)).sqrt(),
                        where(y > 1, x * _k(x, s4) * y / ((y + 1) * (y - 1)).sqrt(),
                              ((1 - y) * (1 + y)).sqrt())))
    num_b = where(~one_tiny_b & ~ordinary & (y > 1), y * _k(y, s4), y)
    num = where(usable, B, where(tiny_y, y * _k(y, 2 / eps), num_b))
    den = where(usable, ((1 - B) * (1 + B)).sqrt(), where(tiny_y, A * _k(A, 2 / eps), den_b))
    return rx, usable, num, den


def _asinh(x: Tensor, y: Tensor, lim: _Limits) -> Pair:
    ax, ay = x.abs(), y.abs()
    large = (ax > _k(x, lim.recip_eps)) | (ay > _k(y, lim.recip_eps))
    tiny = (ax < _k(x, lim.sqrt_6_eps / 4)) & (ay < _k(y, lim.sqrt_6_eps / 4))
    # (the hard work on values it takes: the other cases are selected below)
    inner = ~large & ~tiny
    hx, hy = where(inner, ax, _k(x, 0.5)), where(inner, ay, _k(y, 0.5))
    rx, _, num, den = _hard_work(hx, hy, lim)
    # large |z|: asinh z = log(2|z|) + i atan2(|y|, |x|), the signs x's and y's
    r = where(large, _log_abs(x, y, lim) + _k(x, LN2), where(tiny, ax, rx))
    i = _t.atan2(where(large, ay, where(tiny, ay, num)), where(large, ax, where(tiny, _k(x, 1.0), den)))
    i = where(tiny, ay, i)
    r, i = _copysign(r, x), _copysign(i, y)
    # NaNs: asinh(NaN +- 0i) == NaN +- 0i; asinh(+-inf + NaN i) == +-inf + NaN i;
    # asinh(NaN + -+inf i) == +inf + NaN i; else NaN + NaN i
    nan_x, nan_y = _isnan(x), _isnan(y)
    any_inf = _isinf(x) | _isinf(y)
    nan = _k(x, NAN)
    r = where(nan_x & _isinf(y), _k(x, INF), where((nan_x | nan_y) & ~any_inf, nan, r))
    i = where((nan_x | nan_y) & ~any_inf, where(y == 0, y, nan), i)
    return r, i


def asinh(re: Tensor, im: Tensor) -> Pair:
    """The inverse hyperbolic sine (cuts along the imaginary axis beyond +-i), Hull et al.'s
    algorithm; asinh(conj z) == conj(asinh z) and asinh(-z) == -asinh(z)."""
    lim = _check("asinh", re, im)

    def derivative(x: Tensor, y: Tensor) -> Pair:    # 1 / sqrt(1 + z*z)
        s = _mul(x, y, x, y)
        return reciprocal(*sqrt(s[0] + 1, s[1]))
    return _holomorphic("asinh", re, im, _asinh(re, im, lim), derivative)


def asin(re: Tensor, im: Tensor) -> Pair:
    """The inverse sine: -i asinh(iz), computed as msun does (swap the parts, asinh, swap)."""
    lim = _check("asin", re, im)
    p, q = _asinh(im, re, lim)

    def derivative(x: Tensor, y: Tensor) -> Pair:    # 1 / sqrt(1 - z*z)
        s = _mul(x, y, x, y)
        return reciprocal(*sqrt(1 - s[0], -s[1]))
    return _holomorphic("asin", re, im, (q, p), derivative)


def _acos(x: Tensor, y: Tensor, lim: _Limits) -> Pair:
    ax, ay = x.abs(), y.abs()
    sx, sy = _signbit(x), _signbit(y)
    large = (ax > _k(x, lim.recip_eps)) | (ay > _k(y, lim.recip_eps))
    tiny = (ax < _k(x, lim.sqrt_6_eps / 4)) & (ay < _k(y, lim.sqrt_6_eps / 4))
    inner = ~large & ~tiny
    hx, hy = where(inner, ay, _k(x, 0.5)), where(inner, ax, _k(y, 0.5))
    ry, _, num, den = _hard_work(hx, hy, lim)        # of (|y|, |x|): ry = |Im acos z|
    # Re: acos(+-B) = atan2(sqrt(1 - B*B), +-B), or atan2(sqrt(A*A - x*x), +-new_x);
    # large |z|: atan2(|y|, x) and |Im| = log(2|z|)
    signed = where(sx, -num, num)
    rx = _t.atan2(where(large, ay, den), where(large, x, signed))
    ry = where(large, _log_abs(x, y, lim) + _k(x, LN2), ry)
    # tiny |z|: pi/2 - x (pi/2 as hi + lo: its rounding error below x's contribution) - iy
    pi2_hi, pi2_lo = _k(x, PI_2[0]), _k(x, float(x.dtype.type(PI_2[0] - float(x.dtype.type(PI_2[0])) + PI_2[1])))
    rx = where(tiny, pi2_hi - (x - pi2_lo), rx)
    ry = where(tiny, ay, ry)
    im = where(sy, ry, -ry)
    # acos(1 +- 0i) == +0 -+ 0i
    one = (x == 1) & (y == 0)
    rx = where(one, _k(x, 0.0), rx)
    # NaNs: acos(+-inf + NaN i) == NaN - inf i (the sign unspecified); acos(NaN +- inf i) ==
    # NaN -+ inf i; acos(+-0 + NaN i) == pi/2 + NaN i; else NaN + NaN i
    nan_x, nan_y = _isnan(x), _isnan(y)
    nan = _k(x, NAN)
    any_nan = nan_x | nan_y
    rx = where(any_nan, where((x == 0) & nan_y, pi2_hi, nan), rx)
    im = where(any_nan, where(_isinf(x), _k(x, -INF), where(_isinf(y), -y, nan)), im)
    return rx, im


def acos(re: Tensor, im: Tensor) -> Pair:
    """The inverse cosine (cuts along the reals beyond +-1), Hull et al.'s algorithm, accurate
    near 1 (not pi/2 - asin z); acos(conj z) == conj(acos z)."""
    lim = _check("acos", re, im)

    def derivative(x: Tensor, y: Tensor) -> Pair:    # -1 / sqrt(1 - z*z)
        s = _mul(x, y, x, y)
        p, q = reciprocal(*sqrt(1 - s[0], -s[1]))
        return -p, -q
    return _holomorphic("acos", re, im, _acos(re, im, lim), derivative)


def acosh(re: Tensor, im: Tensor) -> Pair:
    """The inverse hyperbolic cosine: +-i acos(z), the sign making the real part >= 0 (msun's);
    acosh(+0 + NaN i) == NaN + i pi/2 as the standard says."""
    lim = _check("acosh", re, im)
    rx, ry = _acos(re, im, lim)
    nan_r, nan_i = _isnan(rx), _isnan(ry)
    r = where(nan_i, _k(re, NAN), ry.abs())
    i = where(nan_r | nan_i, _k(re, NAN), _copysign(rx, im))
    # acosh(+-0 + NaN i): acos gives pi/2 + NaN i, the standard NaN + i pi/2
    i = where((re == 0) & _isnan(im), rx, i)

    def derivative(x: Tensor, y: Tensor) -> Pair:    # 1 / (sqrt(z - 1) sqrt(z + 1))
        a = sqrt(x - 1, y)
        b = sqrt(x + 1, y)
        return reciprocal(*_mul(*a, *b))
    return _holomorphic("acosh", re, im, (r, i), derivative)


def _real_part_reciprocal(x: Tensor, y: Tensor) -> Tensor:
    """Re(1 / (x + iy)) = x / (x*x + y*y) without overflow or spurious underflow (both parts
    divided by the larger first); +-0 where a part is infinite."""
    m = _maximum(x.abs(), y.abs())
    xs, ys = x / m, y / m
    r = xs / (xs * xs + ys * ys) / m
    return where(_isinf(x) | _isinf(y), _signed(0.0, x), r)


def _atanh(x: Tensor, y: Tensor, lim: _Limits) -> Pair:
    eps = lim.eps
    ax, ay = x.abs(), y.abs()
    large = (ax > _k(x, lim.recip_eps)) | (ay > _k(y, lim.recip_eps))
    tiny = (ax < _k(x, lim.sqrt_3_eps / 2)) & (ay < _k(y, lim.sqrt_3_eps / 2))
    # Re = log1p(4|x| / ((|x| - 1)**2 + y*y)) / 4, and log(2 / |y|) / 2 at |x| == 1, |y| < eps
    at_one = (ax == 1) & (ay < _k(y, eps))
    am1 = ax - 1
    squares = where(ay < _k(y, lim.sqrt_min), am1 * am1, am1 * am1 + ay * ay)
    t = ax * 4 / squares
    u = where(at_one, ay, t + 1)
    log_u = u.log()
    rx = where(at_one, (_k(x, LN2) - log_u) * 0.5, _t._log1p_from(t, u, log_u) * 0.25)
    rx = where(large, _real_part_reciprocal(ax, ay), where(tiny, ax, rx))
    # Im = atan2(2|y|, (1 - |x|)(1 + |x|) - y*y) / 2 (atan2(2, -|y|) / 2 at |x| == 1);
    # pi/2 for large |z|, atan(y) at x == 0
    den = where(ax == 1, -ay, where(ay < _k(y, eps), (1 - ax) * (1 + ax), (1 - ax) * (1 + ax) - ay * ay))
    num = where(ax == 1, _k(y, 2.0), ay * 2)
    zero_x = x == 0
    angle = _t.atan2(where(zero_x, ay, num), where(zero_x, _k(x, 1.0), den))
    ry = where(zero_x, angle, angle * 0.5)
    ry = where(large, _pi_2(y), where(tiny & ~zero_x, ay, ry))
    r, i = _copysign(rx, x), _copysign(ry, y)
    # atanh(x +- 0i) for |x| <= 1: atanh(x) +- 0i; x == 0: x + i atan(y)
    i = where((y == 0) & (ax <= 1), y, i)
    r = where(zero_x, x, r)
    # NaNs: atanh(+-inf + NaN i) == +-0 + NaN i; atanh(NaN +- inf i) == +-0 +- i pi/2;
    # atanh(+-0 + NaN i) == +-0 + NaN i (above); else NaN + NaN i
    nan_x, nan_y = _isnan(x), _isnan(y)
    nan = _k(x, NAN)
    r = where((nan_x & _isinf(y)) | (_isinf(x) & nan_y), _signed(0.0, x), where((nan_x | nan_y) & ~zero_x, nan, r))
    i = where(nan_x & _isinf(y), _signed(PI_2[0], y), where((nan_x | nan_y) & ~(nan_x & _isinf(y)), nan, i))
    return r, i


def atanh(re: Tensor, im: Tensor) -> Pair:
    """The inverse hyperbolic tangent (cuts along the reals beyond +-1), msun's formula;
    atanh(conj z) == conj(atanh z) and atanh(-z) == -atanh(z)."""
    lim = _check("atanh", re, im)

    def derivative(x: Tensor, y: Tensor) -> Pair:    # 1 / (1 - z*z)
        s = _mul(x, y, x, y)
        return reciprocal(1 - s[0], -s[1])
    return _holomorphic("atanh", re, im, _atanh(re, im, lim), derivative)


def atan(re: Tensor, im: Tensor) -> Pair:
    """The inverse tangent: -i atanh(iz), computed as msun does (swap, atanh, swap)."""
    lim = _check("atan", re, im)
    p, q = _atanh(im, re, lim)

    def derivative(x: Tensor, y: Tensor) -> Pair:    # 1 / (1 + z*z)
        s = _mul(x, y, x, y)
        return reciprocal(1 + s[0], s[1])
    return _holomorphic("atan", re, im, (q, p), derivative)


# --- the rest ----------------------------------------------------------------------------------

def reciprocal(re: Tensor, im: Tensor) -> Pair:
    """1 / z by Smith's algorithm (numpy's: 1 / (inf + 0i) == 0 - 0i, 1 / 0 == NaN + NaN i)."""
    lim = _check("reciprocal", re, im)
    del lim
    x, y = re, im
    by_x = y.abs() <= x.abs()
    r = where(by_x, y / x, x / y)
    d = where(by_x, x + y * r, x * r + y)
    value = (where(by_x, d.reciprocal(), r / d), where(by_x, -r / d, -(d.reciprocal())))

    def derivative(x: Tensor, y: Tensor) -> Pair:    # -1 / z**2
        p, q = reciprocal(x, y)
        s = _mul(p, q, p, q)
        return -s[0], -s[1]
    return _holomorphic("reciprocal", re, im, value, derivative)


def square(re: Tensor, im: Tensor) -> Pair:
    """z*z, numpy's: (x*x - y*y) + i (x*y + y*x)."""
    _check("square", re, im)
    return re * re - im * im, re * im + im * re


def sign(re: Tensor, im: Tensor) -> Pair:
    """z / |z| (+0 + 0i at 0, the standard's), both parts divided by the larger magnitude first
    (no overflow); an infinite part with a finite other: +-1 and a zero of the other's sign
    (numpy's zero is +0; this keeps sign(conj z) == conj(sign z)); NaN + NaN i for a NaN part
    (the standard's) or two infinite parts."""
    _check("sign", re, im)
    x, y = re, im
    m = _maximum(x.abs(), y.abs())
    xs, ys = x / m, y / m
    h = _t.hypot(xs, ys)
    r, i = xs / h, ys / h
    zero = (x == 0) & (y == 0)
    inf_x, inf_y = _isinf(x), _isinf(y)
    one = _k(x, 1.0)
    r = where(zero, _k(x, 0.0), where(inf_y & _isfinite(x), _signed(0.0, x), where(inf_x & _isfinite(y), _signed(1.0, x), r)))
    i = where(zero, _k(x, 0.0), where(inf_x & _isfinite(y), _signed(0.0, y), where(inf_y & _isfinite(x), _signed(1.0, y), i)))
    # its own derivative (not holomorphic): with (u, v) = sign(z) and r = |z|, d(u, v)/dx =
    # v (v, -u) / r and d(u, v)/dy = u (-v, u) / r; 0 at 0 and at infinity (torch's sgn); the
    # graph's would be NaN at 0 (the unused branch's x / 0)
    def rule(part: int) -> Callable[..., tuple[Tensor, Tensor]]:
        def vjp(g: Tensor, out: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
            u, v = sign(a, b)
            h = _t.hypot(a, b)
            scale = where((h == 0) | _isinf(h), _k(h, 0.0), g / where(h == 0, _k(h, 1.0), h))
            return (scale * v * v, -(scale * u * v)) if part == 0 else (-(scale * u * v), scale * u * u)
        return vjp
    return define_vjp(r, [re, im], rule(0)), define_vjp(i, [re, im], rule(1))


def round(re: Tensor, im: Tensor) -> Pair:
    """Each part rounded to the nearest integer, half to even."""
    _check("round", re, im)
    return _round(re), _round(im)


def absolute(z: Tensor) -> Tensor:
    """(Of a complex tensor, not of its parts: the Tensor's abs() of complex numbers, through
    _complex.unary.) |z| in z's part dtype: hypot(re, im), without overflow or underflow (the larger part
    times sqrt(1 + r^2), r the ratio of the smaller to it: |1e30 + 1e30j| in complex64 is
    1.4142135e30); inf where either part is infinite, even with a NaN one (C99's hypot). Its
    derivative is torch's: g z / |z|, 0 at 0."""
    a, b = parts(z)

    def rule(g: Tensor, out: Tensor, z: Tensor) -> tuple[Tensor]:
        # g z / |z|, and 0 at z == 0 (torch's): hypot's own derivative is NaN there (0 / 0)
        re, im = parts(z)
        zero = out == 0
        safe = where(zero, _k(out, 1.0), out)
        return (combine(where(zero, _k(g, 0.0), g * re / safe), where(zero, _k(g, 0.0), g * im / safe)),)
    return define_vjp(_t.hypot(a, b), [z], rule)


__all__ = ["acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "exp", "expm1", "log", "log10", "log1p",
           "log2", "pow", "reciprocal", "round", "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh"]

# elementwise's and transcendental's functions, and the Tensor's operators, hand complex
# arguments to _complex, which is below this module: it finds these functions there
_complex.register_math(sys.modules[__name__])
