"""exp, expm1, log, log1p, log2, log10 and sqrt of complex numbers, on pairs of real tensors."""

from __future__ import annotations

from ...tensor import Tensor
from ...tensor_arith import maximum as _maximum, minimum as _minimum, where
from .. import transcendental as _t
from ..elementwise import copysign as _copysign
from .arithmetic import reciprocal
from .common import (INF, LN2, LOG10_E, LOG2_E, Pair, _Limits, _check, _holomorphic, _isfinite, _isinf, _isnan, _k,
                     _signed)


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
