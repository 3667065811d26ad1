"""The inverse hyperbolic and trigonometric functions of complex numbers (asinh, asin, acos,
acosh, atanh, atan), on pairs of real tensors."""

from __future__ import annotations

from ...tensor import Tensor
from ...tensor_arith import maximum as _maximum, where
from .. import transcendental as _t
from ..elementwise import copysign as _copysign, signbit as _signbit
from .arithmetic import _mul, reciprocal
from .common import INF, LN2, NAN, PI_2, Pair, _Limits, _check, _holomorphic, _isinf, _isnan, _k, _pi_2, _signed
from .exp_log import _log_abs, sqrt


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
