"""The Array API's transcendental functions beyond ug's primitives: log1p, expm1, log2, log10,
logaddexp, tan, atan, atan2, asin, acos, sinh, cosh, asinh, acosh, atanh and hypot.

Each is a composition of exp, log, sqrt, sin, cos and ATAN2 (the core's atan2, ug_core.mathlib
.atan2) in the forms that stay accurate where the naive ones cancel (Kahan's log1p and expm1,
fdlibm's inverse hyperbolic functions, a scaled hypot), with the special cases of the standard
(C99's) made explicit where the arithmetic would not give them. So each fuses into one kernel
with its neighbours, on every device, and every device computes the same thing.

dtypes are numpy's: ints and bools are promoted as its ufuncs promote them (int32 -> float64),
and float16 is computed in float32 and rounded once, as numpy does. Accuracy, measured against
numpy's long double (tests/test_transcendental.py, the bounds are there): within 2.5 ulp in
float32 and float64 on a device whose exp and log are within 1.3 ulp (ug's own, libm's).

Constants are `graph.const`s (folded into the kernel's code), not user scalars, which would be
kernel arguments (ug_core.scalars); 0, 1, 2, 0.5 fold either way.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..custom import define_vjp
from ..ops import Op
from ..tensor import Tensor
from ..tensor_arith import as_tensor, maximum as _maximum, minimum as _minimum, where
from . import _complex
from ._common import check_tensor
from .elementwise import _pair

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
LN2 = math.log(2)
# float64 hi + lo (lo: the rounding error of hi)
LOG2_E = (1.4426950408889634, 2.0355273740931033e-17)      # 1 / log(2)
LOG10_E = (0.4342944819032518, 1.098319650216765e-17)     # 1 / log(10)
LN2_HI = 0.693359375                                       # log(2) rounded to 9 bits
HALF_EXP_LN2_HI = (1.0002122169548873, 9.72600901753356e-17)   # exp(LN2_HI) / 2
HUGE = 2.0 ** 28     # beyond, asinh(x) = log(2|x|) and acosh(x) = log(2x) to below float64's rounding
SINH_BIG = 20.0      # beyond, exp(-|x|) is below float64's rounding of sinh / cosh: exp(|x|) / 2 alone


def _k(like: Tensor, value: float) -> Tensor:
    """A constant of like's dtype and device, folded into the kernel."""
    return as_tensor(value, like)


def _odd(x: Tensor, magnitude: Tensor) -> Tensor:
    """An odd function's value from its value at |x|: negated for x < 0, and x itself for +-0
    (whose sign a computation at |x| loses)."""
    return where(x == 0, x, where(x < 0, -magnitude, magnitude))


def _in_float(x: Tensor, compute: Callable[..., Tensor], *more: Tensor) -> Tensor:
    """compute(x, *more) for float32 / float64 operands (of x's dtype): float16 is computed in
    float32 and rounded once."""
    if x.dtype != F16:
        return compute(x, *more)
    return compute(x.astype(F32), *(m.astype(F32) for m in more)).astype(F16)


def _unary_function(compute: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """The Array API function (any real dtype) of `compute` (of a float32 / float64 tensor)."""
    name = compute.__name__

    def fn(x: Tensor, /) -> Tensor:
        x = check_tensor(x, name)
        if x.dtype.kind == "c":   # of complex numbers: complex_math's, on the parts
            return _complex.math_function(name)(x)
        return _in_float(x._float(), compute)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{compute.__doc__} Of complex numbers: complex_math.{name}."
    return fn


def _binary_function(compute: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Any, Any], Tensor]:
    """The same for a function of two operands (tensors or scalars, of a common dtype)."""
    name = compute.__name__

    def fn(x1: Any, x2: Any, /) -> Tensor:
        a, b = _pair(x1, x2, name)
        if a.dtype.kind == "c":   # (the standard defines none of them on complex numbers)
            raise _complex.refused(name, a.dtype)
        return _in_float(a._float(), compute, b._float())
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = compute.__doc__
    return fn


# --- logarithms and exponentials ------------------------------------------------------------

def _log1p_from(t: Tensor, u: Tensor, log_u: Tensor) -> Tensor:
    """log(1 + t) from u = 1 + t (rounded) and log(u), accurate for tiny t (Kahan: u's rounding
    cancels in log(u) * t / (u - 1)); for t > -1 finite, and -inf for t == -1."""
    return where(u == 1, t, log_u * (t / (u - 1)))


def _expm1_from(x: Tensor, u: Tensor) -> Tensor:
    """exp(x) - 1 from u = exp(x) (rounded), accurate for tiny x (Kahan: (u - 1) * x / log(u));
    for x where u is finite and u - 1 is not -1."""
    return where(u == 1, x, (u - 1) * (x / u.log()))


@_unary_function
def log1p(x: Tensor) -> Tensor:
    """log(1 + x), accurate for tiny x; log1p(-1) == -inf, NaN below, log1p(inf) == inf."""
    u = 1 + x
    out = where(x == math.inf, x, _log1p_from(x, u, u.log()))
    # its own derivative: the careful formula's unused branches (x / log(u) at u == 1) gave NaN
    return define_vjp(out, [x], lambda g, out, x: (g / (1 + x),))


@_unary_function
def expm1(x: Tensor) -> Tensor:
    """exp(x) - 1, accurate for tiny x; expm1(-inf) == -1, inf where exp overflows."""
    u = x.exp()
    r = where(u - 1 == -1, u - 1, _expm1_from(x, u))
    # its own derivative (exp(x)): the careful formula's unused branches gave NaN at 0
    return define_vjp(where(u == math.inf, u, r), [x], lambda g, out, x: (g * x.exp(),))


def _times(v: Tensor, constant: tuple[float, float]) -> Tensor:
    """v * constant, the constant given as float64 hi + lo and split into v's dtype, so that
    its rounding adds nothing (an infinite v * hi stays itself: v * lo could be of the other
    sign)."""
    hi = float(v.dtype.type(constant[0]))
    lo = float(v.dtype.type((constant[0] - hi) + constant[1]))
    big = v * _k(v, hi)
    return where(big.abs() == math.inf, big, big + v * _k(v, lo))


@_unary_function
def log2(x: Tensor) -> Tensor:
    """The base-2 logarithm: log(x) / log(2)."""
    return _times(x.log(), LOG2_E)


@_unary_function
def log10(x: Tensor) -> Tensor:
    """The base-10 logarithm: log(x) / log(10)."""
    return _times(x.log(), LOG10_E)


@_binary_function
def logaddexp(a: Tensor, b: Tensor) -> Tensor:
    """log(exp(x1) + exp(x2)), numpy's way: max + log1p(exp(-|x1 - x2|)), and x + log(2) for
    equal operands (infinities included, whose difference is NaN)."""
    # (the equal operands' max is a itself: written so for ug.grad, which splits a tie of
    # maximum equally, the derivative of logaddexp there: 1/2 each)
    return where(a == b, _maximum(a, b) + _k(a, LN2), _maximum(a, b) + log1p((-(a - b).abs()).exp()))


# --- trigonometric --------------------------------------------------------------------------

def _angle(y: Tensor, x: Tensor) -> Tensor:
    """atan2(y, x): the ATAN2 op, which the core computes on every device (mathlib.atan2)."""
    return y._binary(Op.ATAN2, x, ufunc=np.arctan2)


@_unary_function
def tan(x: Tensor) -> Tensor:
    """sin(x) / cos(x)."""
    return x.sin() / x.cos()


@_binary_function
def atan2(y: Tensor, x: Tensor) -> Tensor:
    """The angle of the point (x2, x1), in [-pi, pi], with C99's special cases (signed zeros:
    atan2(+-0, -0) == +-pi; infinities: atan2(+-inf, -inf) == +-3pi/4)."""
    return _angle(y, x)


@_unary_function
def atan(x: Tensor) -> Tensor:
    """The arctangent: atan2(x, 1)."""
    return _angle(x, _k(x, 1.0))


def _cosine_of_asin(x: Tensor) -> Tensor:
    """sqrt(1 - x*x) as sqrt((1 - x)(1 + x)): exact factors near |x| == 1; NaN for |x| > 1."""
    return ((1 - x) * (1 + x)).sqrt()


@_unary_function
def asin(x: Tensor) -> Tensor:
    """The arcsine: atan2(x, sqrt((1 - x)(1 + x)))."""
    return _angle(x, _cosine_of_asin(x))


@_unary_function
def acos(x: Tensor) -> Tensor:
    """The arccosine: atan2(sqrt((1 - x)(1 + x)), x) (acos(1) == +0)."""
    return _angle(_cosine_of_asin(x), x)


# --- hyperbolic -----------------------------------------------------------------------------

def _exp_for_sinh(a: Tensor) -> tuple[Tensor, Tensor]:
    """(small, u): small is whether a = |x| < SINH_BIG, u = exp(a) there, else exp(a - LN2_HI),
    which exp(LN2_HI) / 2 makes exp(a) / 2: a - LN2_HI is exact there (a multiple of 2**-9),
    and the product overflows only where the result does (exp(a) overflows first)."""
    small = a < _k(a, SINH_BIG)
    return small, where(small, a, a - _k(a, LN2_HI)).exp()


@_unary_function
def sinh(x: Tensor) -> Tensor:
    """(t + t / (t + 1)) / 2 with t = expm1(|x|) (no cancellation near 0), and exp(|x|) / 2
    for |x| >= 20."""
    a = x.abs()
    small, u = _exp_for_sinh(a)
    t = _expm1_from(a, u)
    return _odd(x, where(small, (t + t / (t + 1)) * 0.5, _times(u, HALF_EXP_LN2_HI)))


@_unary_function
def cosh(x: Tensor) -> Tensor:
    """(e + 1 / e) / 2 with e = exp(|x|), and exp(|x|) / 2 for |x| >= 20."""
    small, u = _exp_for_sinh(x.abs())
    return where(small, (u + u.reciprocal()) * 0.5, _times(u, HALF_EXP_LN2_HI))


def _log_by_range(small: Tensor, t: Tensor, mid: Tensor, x: Tensor) -> Tensor:
    """fdlibm's three ranges of asinh and acosh with one logarithm: log1p(t) where `small`,
    log(mid) below HUGE, log(x) + log(2) above (x: the argument, >= 0)."""
    below = x < _k(x, HUGE)
    u = where(small, 1 + t, where(below, mid, x))
    log_u = u.log()
    return where(small, _log1p_from(t, u, log_u), where(below, log_u, log_u + _k(x, LN2)))


@_unary_function
def asinh(x: Tensor) -> Tensor:
    """fdlibm's: log1p(|x| + x*x / (1 + sqrt(1 + x*x))) below 2, log(2|x| + 1 / (sqrt(x*x + 1)
    + |x|)) below 2**28, log(|x|) + log(2) above."""
    a = x.abs()
    a2 = a * a
    root = (a2 + 1).sqrt()
    return _odd(x, _log_by_range(a < 2, a + a2 / (root + 1), a * 2 + (root + a).reciprocal(), a))


@_unary_function
def acosh(x: Tensor) -> Tensor:
    """fdlibm's: log1p(t + sqrt(2t + t*t)), t = x - 1 (exact), up to 2; log(2x - 1 / (x +
    sqrt(x*x - 1))) below 2**28, log(x) + log(2) above; NaN below 1."""
    t = x - 1
    mid = x * 2 - (x + (x * x - 1).sqrt()).reciprocal()
    out = _log_by_range(x <= 2, t + (t * 2 + t * t).sqrt(), mid, x)
    # its own derivative, torch's formula 1 / sqrt(x*x - 1) as 1 / (sqrt(|x| - 1) sqrt(|x| + 1))
    # (no overflow): inf at 1 and a number below -1, where the value is NaN (the careful
    # formula's branches gave NaN there)
    return define_vjp(where(x < 1, _k(x, math.nan), out), [x],
                      lambda g, out, x: (g / ((x.abs() - 1).sqrt() * (x.abs() + 1).sqrt()),))


@_unary_function
def atanh(x: Tensor) -> Tensor:
    """fdlibm's: log1p(2a + 2a * a / (1 - a)) / 2 for a = |x| < 0.5, log1p(2a / (1 - a)) / 2
    above; atanh(+-1) == +-inf, NaN beyond."""
    a = x.abs()
    twice = a * 2
    out = _odd(x, log1p(where(a < 0.5, twice + twice * a / (1 - a), twice / (1 - a))) * 0.5)
    # its own derivative, torch's 1 / (1 - x*x), as 1 / ((1 - x)(1 + x)): inf at +-1 and a number
    # beyond, where the value is NaN
    return define_vjp(out, [x], lambda g, out, x: (g / ((1 - x) * (1 + x)),))


@_binary_function
def hypot(a: Tensor, b: Tensor) -> Tensor:
    """sqrt(x1*x1 + x2*x2) without overflow or underflow: m sqrt(1 + (n/m)**2) for n <= m the
    magnitudes; inf if either is infinite (even with a NaN), m if n == 0."""
    a, b = a.abs(), b.abs()
    m, n = _maximum(a, b), _minimum(a, b)
    r = n / m
    h = where(n == 0, m, m * (r * r + 1).sqrt())
    inf = _k(a, math.inf)
    return where((a == inf) | (b == inf), inf, h)


__all__ = ["acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cosh", "expm1", "hypot", "log10", "log1p",
           "log2", "logaddexp", "sinh", "tan"]
