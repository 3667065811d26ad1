"""Complex arithmetic on pairs of real tensors: products and quotients (the textbook formulas,
and the one that recovers infinities), reciprocal, square, sign, round, and |z|."""

from __future__ import annotations

from typing import Callable

from ...custom import define_vjp
from ...tensor import Tensor
from ...tensor_arith import combine, maximum as _maximum, parts, where
from .. import transcendental as _t
from ..elementwise import copysign as _copysign, round as _round
from .common import INF, Pair, _check, _holomorphic, _isfinite, _isinf, _isnan, _k, _signed


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


# --- reciprocal, square, sign, round, |z| ------------------------------------------------------

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
