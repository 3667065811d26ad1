"""numpy / scipy / torch functions beyond the Array API standard that models need: erf, erfc,
logsumexp, logcumsumexp, isclose, allclose, lerp, split and array_split.

Each is built from ug's own differentiable ops (arithmetic, exp, where, max/sum reductions,
views), never from host numpy on values: so they stay lazy, fuse with their neighbours, run
under ug.jit and get their gradients from the autodiff's rules for those ops.

erf and erfc are fdlibm's s_erf.c (Sun Microsystems, 1993; the algorithm of most C libraries):
rational approximations on |x| < 0.84375, [0.84375, 1.25), [1.25, 1/0.35) and [1/0.35, 28),
with erfc(x) = exp(-x^2 - 0.5625 + R/S(1/x^2)) / x on the last two, where exp(-x^2) is taken as
exp(-z^2 - 0.5625) exp((z - x)(z + x) + R/S) with z = x rounded down to a few bits (so z^2 is
exact and the large exponent carries no rounding error: erfc keeps its relative accuracy in the
tail). fdlibm zeroes x's low mantissa bits for z; here z = floor(x 2^k) / 2^k, no bit tricks, so
it differentiates: floor's derivative is 0 and (z - x)(z + x) carries the whole -2x. Measured
(tests/test_nn_functional_torch.py, ug_core/testing/test_nn_functional.py) against math.erf and
math.erfc: erf within 1 ulp, erfc within 5 ulp, in float32 and float64. float16 is computed in
float32 and rounded once; ints and bools are promoted as numpy promotes them.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import numpy as np

from ..shapes import normalize_axes, normalize_axis
from ..tensor import Tensor, tensor
from ..tensor_arith import as_tensor, maximum as _maximum, minimum as _minimum, parts, where
from ._common import check_tensor
from .elementwise import _pair, floor, isfinite, isnan
from .manipulation import pad
from .transcendental import _in_float, atan2, logaddexp

# --- erf and erfc (fdlibm s_erf.c's coefficients, constant term first) ------------------------
ERX = 8.45062911510467529297e-01      # erf(1) rounded to float32's precision
PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
      -5.77027029648944159157e-03, -2.37630166566501626084e-05)            # erf on [0, 0.84375]
QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
      1.32494738004321644526e-04, -3.96022827877536812320e-06)
PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
      3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
      -2.16637559486879084300e-03)                                          # erf - erx on [0.84375, 1.25]
QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
      1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
      -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
      -8.12874355063065934246e+01, -9.81432934416914548592e+00)             # erfc on [1.25, 1/0.35]
SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
      6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
      6.57024977031928170135e+00, -6.04244152148580987438e-02)
RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
      -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
      -4.83519191608651397019e+02)                                          # erfc on [1/0.35, 28]
SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
      3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
      -2.24409524465858183362e+01)
# beyond, erfc is 0 in the dtype (float64's smallest subnormal is erfc(27.2), float32's erfc(10.1));
# and the bits kept of x for z (z^2 and -z^2 - 0.5625 exact: 5 + 21 bits of float64's 53, 4 + 8 of 24)
_TAIL = {np.dtype(np.float64): (28.0, 2.0 ** 21), np.dtype(np.float32): (11.0, 2.0 ** 8)}


def _k(like: Tensor, value: float) -> Tensor:
    """A constant of like's dtype and device, folded into the kernel's code."""
    return as_tensor(value, like)


def _poly(x: Tensor, coefficients: Sequence[float]) -> Tensor:
    """sum(c_i x^i) by Horner's rule (constant term first)."""
    out = _k(x, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        out = out * x + _k(x, c)
    return out


def _clamped(x: Tensor, low: float, high: float) -> Tensor:
    return _minimum(_maximum(x, _k(x, low)), _k(x, high))


def _erf_parts(x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The pieces of fdlibm's erf and erfc, each evaluated on x clamped into its own interval
    (so that no piece overflows or divides by 0 where `where` does not select it: its gradient
    there is 0, not NaN): (x1, y) with erf(x1) = x1 + x1 y on |x| < 0.84375; p2 = erf(|x|) - erx
    on [0.84375, 1.25); r3 = erfc(|x|) on [1.25, tail); |x|."""
    tail, scale = _TAIL[x.dtype]
    ax = x.abs()
    x1 = _clamped(x, -0.84375, 0.84375)
    z = x1 * x1
    y = _poly(z, PP) / _poly(z, QQ)
    s2 = _clamped(ax, 0.84375, 1.25) - 1
    p2 = _poly(s2, PA) / _poly(s2, QA)
    a = _clamped(ax, 1.25, tail)
    s = (a * a).reciprocal()
    rs = where(a < _k(a, 1 / 0.35), _poly(s, RA) / _poly(s, SA), _poly(s, RB) / _poly(s, SB))
    zz = floor(a * _k(a, scale)) / _k(a, scale)   # a rounded down to a multiple of 1/scale
    r3 = (-zz * zz - _k(a, 0.5625)).exp() * ((zz - a) * (zz + a) + rs).exp() / a
    return x1, y, p2, r3, ax


def _erf(x: Tensor) -> Tensor:
    x1, y, p2, r3, ax = _erf_parts(x)
    magnitude = where(ax < _k(ax, 1.25), _k(ax, ERX) + p2, 1 - r3)
    # (x, not its sign: a NaN stays NaN, as the comparisons with it all fail)
    return where(ax < _k(ax, 0.84375), x1 + x1 * y, where(x < 0, -magnitude, where(x > 0, magnitude, x)))


def _erfc(x: Tensor) -> Tensor:
    x1, y, p2, r3, ax = _erf_parts(x)
    # 1 - erf(x) near 0; from x = 1/4 on, 0.5 - (x - 0.5 + x y): x - 0.5 is exact there (fdlibm)
    r1 = where(x1 < _k(x1, 0.25), 1 - (x1 + x1 * y), _k(x1, 0.5) - (x1 - _k(x1, 0.5) + x1 * y))
    near_one = ax < _k(ax, 1.25)
    positive = where(near_one, _k(ax, 1 - ERX) - p2, r3)
    negative = where(near_one, 1 + (_k(ax, ERX) + p2), 2 - r3)
    return where(ax < _k(ax, 0.84375), r1, where(x < 0, negative, positive))


def erf(x: Tensor, /) -> Tensor:
    """The error function 2/sqrt(pi) * integral_0^x exp(-t^2) dt (scipy.special.erf, torch.erf):
    erf(+-inf) = +-1, erf(+-0) = +-0, NaN for NaN; within 1 ulp in float32 and float64."""
    x = check_tensor(x, "erf")._float()
    return _in_float(x, _erf)


def erfc(x: Tensor, /) -> Tensor:
    """The complementary error function 1 - erf(x), accurate where it is tiny (x large: no
    cancellation, relative error within 5 ulp down to the subnormals): erfc(inf) = 0,
    erfc(-inf) = 2, NaN for NaN."""
    x = check_tensor(x, "erfc")._float()
    return _in_float(x, _erfc)


# --- reductions and comparisons ---------------------------------------------------------------

def logsumexp(x: Tensor, /, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
    """log(sum(exp(x))) over `axis` (None: all), scipy.special.logsumexp's and torch.logsumexp's,
    computed max-shifted so that nothing overflows: m + log(sum(exp(x - m))) with m the max
    (taken as 0 where it is infinite or NaN, so that an all -inf slice gives -inf and a +inf
    gives +inf). An empty slice gives -inf. The shift is a constant of the result (detached):
    the gradient is softmax(x)."""
    x = check_tensor(x, "logsumexp")._float()
    axes = normalize_axes(axis, x.ndim)
    if any(x.shape[a] == 0 for a in axes):
        total = x.exp().sum(axes, keepdims=True)   # 0: log gives -inf
        out = total.log()
    else:
        m = x.max(axes, keepdims=True).detach()   # a constant of the result: no gradient through it
        m = where(isfinite(m), m, _k(m, 0))
        out = (x - m).exp().sum(axes, keepdims=True).log() + m
    if not keepdims:
        out = out.reshape(tuple(s for d, s in enumerate(x.shape) if d not in axes))
    return out


LOGCUMSUMEXP_BLOCK = 32
"""logcumsumexp takes each prefix's logsumexp directly over lines of at most this many
elements (a masked triangle: BLOCK**2 terms per line, one fused reduction); a longer line is
cut into blocks of this size whose totals are scanned the same way (recursively)."""


def logcumsumexp(x: Tensor, /, axis: int | None = None) -> Tensor:
    """log(cumulative_sum(exp(x))) along `axis` (None: the one axis of a 1-d x; a 0-d x is
    itself), torch.logcumsumexp's, without overflow or underflow: each prefix is a logsumexp
    (max-shifted) of its elements, within blocks of LOGCUMSUMEXP_BLOCK elements, and a block's
    prefixes are combined with the blocks' before it by logaddexp. So [0, 100] gives [0, 100]
    exactly, and -inf entries add nothing. Differentiable (the gradient is each prefix's
    softmax, summed)."""
    x = check_tensor(x, "logcumsumexp")._float()
    if x.ndim == 0:   # one element (torch's: axis 0 or -1)
        if axis not in (None, 0, -1):
            raise ValueError(f"logcumsumexp: axis {axis} is out of range for a 0-d array")
        return x + 0.0
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"logcumsumexp: axis is required for an array of more than one dimension (shape {x.shape})")
        axis = 0
    axis = normalize_axis(axis, x.ndim)
    if x.shape[axis] == 0:
        return x + 0.0
    last = x.ndim - 1
    moved = x if axis == last else x.permute(*(d for d in range(x.ndim) if d != axis), axis)
    out = _logcumsumexp_last(moved)
    if axis == last:
        return out
    back = list(range(last))
    back.insert(axis, last)
    return out.permute(*back)


def _logcumsumexp_last(x: Tensor) -> Tensor:
    """logcumsumexp along the last axis (of positive length)."""
    n = x.shape[-1]
    if n <= LOGCUMSUMEXP_BLOCK:
        # [..., j, k] = x[..., k] for k <= j, -inf after: row j's logsumexp is prefix j's
        k = tensor(np.tril(np.ones((n, n), bool)), device=x.device)
        return logsumexp(where(k, x.reshape(*x.shape[:-1], 1, n), -math.inf), axis=-1)
    b = LOGCUMSUMEXP_BLOCK
    blocks = -(-n // b)
    lead = [(0, 0)] * (x.ndim - 1)
    padded = pad(x, lead + [(0, blocks * b - n)], constant_value=-math.inf) if blocks * b > n else x
    inner = _logcumsumexp_last(padded.reshape(*x.shape[:-1], blocks, b))      # within each block
    totals = _logcumsumexp_last(inner[..., -1])                                # through each block
    before = pad(totals[..., :-1], lead + [(1, 0)], constant_value=-math.inf)  # through the previous one
    out = logaddexp(before.reshape(*before.shape, 1), inner).reshape(*x.shape[:-1], blocks * b)
    return out[..., :n] if blocks * b > n else out


def isclose(a: Any, b: Any, /, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """Elementwise |a - b| <= atol + rtol |b| (numpy.isclose: not symmetric, b is the
    reference), computed in the operands' common float dtype; infinities are close only to
    themselves; NaNs to nothing, or to NaNs with equal_nan. Integer and bool operands compare
    exactly where they are equal (as numpy's, which compares in float64)."""
    x, y = _pair(a, b, "isclose")
    if x.dtype.kind != "f" or y.dtype.kind != "f":
        x, y = _pair(x._float(), y._float(), "isclose")
    both_finite = isfinite(x) & isfinite(y)
    close = ((x - y).abs() <= atol + rtol * y.abs()) & both_finite
    result = close | (x == y)
    if equal_nan:
        result = result | (isnan(x) & isnan(y))
    return result


def angle(z: Tensor, /, deg: bool = False) -> Tensor:
    """The argument of complex numbers, atan2(imag, real), in (-pi, pi] (numpy's angle; degrees
    with `deg`); of real numbers atan2(0, x): 0, or pi for negative ones (and -0.0: numpy's),
    in the float dtype numpy gives (float64 for ints)."""
    check_tensor(z, "angle")
    re, im = parts(z if z.dtype.kind in "fc" else z._float())
    out = atan2(im, re)
    return out * (180 / math.pi) if deg else out


def allclose(a: Any, b: Any, /, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """Whether every element is close (see isclose): a 0-d bool tensor, lazy (numpy returns a
    Python bool: `bool(...)` or `if ug.allclose(...)` reads it)."""
    return isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan).all()


def lerp(start: Any, end: Any, weight: Any, /) -> Tensor:
    """start + weight (end - start) (torch.lerp), as torch computes it: from `end` for
    weight >= 0.5 (end - (end - start)(1 - weight)), so lerp(a, b, 1) is exactly b."""
    like = next((t for t in (start, end, weight) if isinstance(t, Tensor)), None)
    if like is None:
        raise TypeError(f"lerp: at least one argument must be a ug Tensor, got {type(start).__name__}, "
                        f"{type(end).__name__} and {type(weight).__name__}")
    s, e = _pair(start, end, "lerp")
    s, e = _pair(s._float(), e._float(), "lerp")
    diff = e - s
    w = weight if not isinstance(weight, Tensor) else weight.astype(diff.dtype) if weight.dtype != diff.dtype \
        else weight
    if not isinstance(w, Tensor):
        return s + diff * w if abs(w) < 0.5 else e - diff * (1 - w)
    return where(w.abs() < 0.5, s + diff * w, e - diff * (1 - w))


# --- split ------------------------------------------------------------------------------------

def _pieces(x: Tensor, bounds: list[tuple[int, int]], axis: int) -> list[Tensor]:
    """x[..., start:stop, ...] along `axis` for each bound: views of x (basic slicing)."""
    lead = (slice(None),) * axis
    return [x[lead + (slice(start, stop),)] for start, stop in bounds]


def _sections(n: int, sections: int, fn: str) -> list[tuple[int, int]]:
    if sections <= 0:
        raise ValueError(f"{fn}: number sections must be larger than 0, got {sections}")
    size, extra = divmod(n, sections)
    bounds, start = [], 0
    for i in range(sections):   # the first n % sections pieces one longer (numpy's array_split)
        stop = start + size + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def _split(x: Tensor, indices_or_sections: Any, axis: int, fn: str, equal: bool) -> list[Tensor]:
    check_tensor(x, fn)
    if x.ndim == 0:
        raise ValueError(f"{fn}: x must have at least one dimension")
    axis = normalize_axis(axis, x.ndim)
    n = x.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)) and not isinstance(indices_or_sections, (bool, np.bool_)):
        sections = int(indices_or_sections)
        if equal and sections > 0 and n % sections:
            raise ValueError(f"{fn}: array split does not result in an equal division: axis {axis} of length {n} "
                             f"into {sections} sections")
        return _pieces(x, _sections(n, sections, fn), axis)
    try:
        indices = [operator.index(i) for i in indices_or_sections]
    except TypeError:
        raise TypeError(f"{fn}: indices_or_sections must be an int or a sequence of ints, "
                        f"got {indices_or_sections!r}") from None
    # numpy's: the pieces are x[:i0], x[i0:i1], ..., x[ik:], each index a slice bound (negative
    # ones from the end, out-of-range ones clipped: such a piece is empty)
    edges = [0, *indices, n]
    return _pieces(x, list(zip(edges[:-1], edges[1:])), axis)


def split(x: Tensor, /, indices_or_sections: Any, axis: int = 0) -> list[Tensor]:
    """numpy.split: x cut along `axis` into `indices_or_sections` equal pieces (an int; a
    ValueError unless it divides the axis) or at the given indices (a sequence): a list of
    views of x."""
    return _split(x, indices_or_sections, axis, "split", True)


def array_split(x: Tensor, /, indices_or_sections: Any, axis: int = 0) -> list[Tensor]:
    """numpy.array_split: as split, but an int need not divide the axis (the first len % n
    pieces are one longer)."""
    return _split(x, indices_or_sections, axis, "array_split", False)


__all__ = ["allclose", "angle", "array_split", "erf", "erfc", "isclose", "lerp", "logcumsumexp", "logsumexp", "split"]
