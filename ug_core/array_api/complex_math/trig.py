"""The hyperbolic and trigonometric functions of complex numbers (sinh, cosh, tanh, sin, cos,
tan), on pairs of real tensors."""

from __future__ import annotations

from typing import Callable

from ...tensor import Tensor
from ...tensor_arith import where
from .. import transcendental as _t
from .arithmetic import _mul
from .common import INF, NAN, Pair, _Limits, _check, _holomorphic, _isfinite, _isinf, _isnan, _k, _signed
from .exp_log import _exp_times


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
