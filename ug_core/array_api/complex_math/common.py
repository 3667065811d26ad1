"""What the complex functions share (see the package's doc): the constants of each float dtype
that the formulas need, the check of the parts, constants as tensors, and _holomorphic (a value
with its own complex derivative)."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ...custom import define_vjp
from ...tensor import Tensor, full as _full
from ...tensor_arith import as_tensor, where
from ..elementwise import signbit as _signbit

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
