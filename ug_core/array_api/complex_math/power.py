"""pow of complex numbers (numpy's: z**0 == 1, 0**w, small integer exponents by repeated
multiplication), on pairs of real tensors."""

from __future__ import annotations

from typing import Any, Callable

from ...custom import define_vjp
from ...tensor import Tensor
from ...tensor_arith import where
from ..elementwise import floor as _floor
from .arithmetic import _div, _mul, _mul_recovering
from .common import NAN, Pair, _Limits, _check, _filled, _k
from .exp_log import _exp, _log, log


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
