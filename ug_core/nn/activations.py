"""torch.nn.functional's activations on ug tensors (relu, gelu, softplus, softmax, glu, ...):
see functional.py for what they are made of.

gelu: approximate='none' is torch's exact gelu, 0.5 x erfc(-x / sqrt 2) (ug.erfc, accurate for
large negative x where 1 + erf(x / sqrt 2) cancels); approximate='tanh' is Tensor.gelu, the
tanh approximation 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) (computed as x sigmoid(2u)).
"""

from __future__ import annotations

import math
from typing import Any

from .. import dtypes
from ..array_api import aliasing as _aliasing
from ..array_api._common import check_tensor
from ..array_api.extras import erfc
from ..array_api.transcendental import expm1, log1p
from ..autodiff import define_vjp
from ..shapes import normalize_axis
from ..tensor import Tensor
from ..tensor_arith import as_tensor, maximum, minimum, where

__all__ = ["celu", "elu", "gelu", "glu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu", "log_softmax",
           "logsigmoid", "mish", "relu", "relu6", "selu", "sigmoid", "silu", "softmax", "softmin", "softplus",
           "softsign", "tanh"]


def _k(like: Tensor, value: float) -> Tensor:
    """A library constant of like's dtype, folded into the kernel's code."""
    return as_tensor(value, like)


def _float(x: Any, fn: str, name: str = "input") -> Tensor:
    return check_tensor(x, fn, name)._float()


# --- activations ------------------------------------------------------------------------------

def relu(input: Tensor) -> Tensor:
    """max(x, 0)."""
    return check_tensor(input, "relu").relu()


def relu6(input: Tensor) -> Tensor:
    """min(max(x, 0), 6) (hardtanh's: its derivative is 0 at 0 and at 6, torch's)."""
    return hardtanh(input, 0.0, 6.0)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """x clamped to [min_val, max_val]. Its derivative is torch's: 1 strictly inside, 0 at
    and beyond the bounds (clip's is 1 at the bounds), 1 at NaN."""
    x = check_tensor(input, "hardtanh")
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) must not be greater than max_val ({max_val})")
    out = minimum(maximum(x, min_val), max_val)
    if x.dtype.kind != "f":
        return out
    return define_vjp(out, [x], lambda g, out, x: (where((x <= min_val) | (x >= max_val), 0.0, g),))


def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """x for x > 0, negative_slope * x below."""
    x = check_tensor(input, "leaky_relu")
    return where(x > 0, x, x * negative_slope)


def elu(input: Tensor, alpha: float = 1.0) -> Tensor:
    """x for x > 0, alpha (exp(x) - 1) below (expm1: accurate near 0)."""
    x = _float(input, "elu")
    return where(x > 0, x, expm1(minimum(x, _k(x, 0))) * alpha)


SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def selu(input: Tensor) -> Tensor:
    """scale * elu(x, alpha) with torch's constants (self-normalizing)."""
    x = _float(input, "selu")
    return _k(x, SELU_SCALE) * where(x > 0, x, expm1(minimum(x, _k(x, 0))) * _k(x, SELU_ALPHA))


def celu(input: Tensor, alpha: float = 1.0) -> Tensor:
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0 (it divides x)")
    x = _float(input, "celu")
    return where(x > 0, x, expm1(minimum(x, _k(x, 0)) / alpha) * alpha)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x Phi(x): approximate='none' exact (0.5 x erfc(-x / sqrt 2)), 'tanh' torch's tanh
    approximation (Tensor.gelu)."""
    x = _float(input, "gelu")
    if approximate == "tanh":
        return x.gelu()
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _k(x, 0.5) * x * erfc(x * _k(x, -math.sqrt(0.5)))


def silu(input: Tensor) -> Tensor:
    """x sigmoid(x) (swish)."""
    return _float(input, "silu").silu()


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (torch's)."""
    x = _float(input, "softplus")
    bx = x * beta
    soft = log1p(minimum(bx, threshold).exp()) / beta   # (clamped: the unselected branch stays finite)
    return where(bx > threshold, x, soft)


def mish(input: Tensor) -> Tensor:
    """x tanh(softplus(x))."""
    x = _float(input, "mish")
    return x * softplus(x).tanh()


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    x = _float(input, "softsign")
    return x / (1 + x.abs())


def hardsigmoid(input: Tensor) -> Tensor:
    """relu6(x + 3) / 6."""
    x = _float(input, "hardsigmoid")
    return relu6(x + 3) / 6


def hardswish(input: Tensor) -> Tensor:
    """x relu6(x + 3) / 6."""
    x = _float(input, "hardswish")
    return x * relu6(x + 3) / 6


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x)) (Tensor.sigmoid: no overflow for large negative x)."""
    return _float(input, "sigmoid").sigmoid()


def tanh(input: Tensor) -> Tensor:
    return _float(input, "tanh").tanh()


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): no overflow, no log(0)."""
    x = _float(input, "logsigmoid")
    return minimum(x, _k(x, 0)) - log1p((-x.abs()).exp())


def _dtype_first(x: Tensor, dtype: Any) -> Tensor:
    return x if dtype is None else x.astype(dtypes.to_dtype(dtype))


def softmax(input: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    """exp(x) / sum(exp(x)) along `dim` (max-shifted); `dtype`: cast to it first (torch's)."""
    x = _dtype_first(check_tensor(input, "softmax"), dtype)
    return x.softmax(normalize_axis(dim, max(x.ndim, 1)) if x.ndim else -1)


def softmin(input: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    """softmax(-x) along `dim`."""
    x = _dtype_first(check_tensor(input, "softmin"), dtype)
    return (-x).softmax(normalize_axis(dim, max(x.ndim, 1)) if x.ndim else -1)


def log_softmax(input: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    """x - logsumexp(x) along `dim` (max-shifted)."""
    x = _dtype_first(check_tensor(input, "log_softmax"), dtype)
    return x.log_softmax(normalize_axis(dim, max(x.ndim, 1)) if x.ndim else -1)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b) for the halves a, b of x along `dim` (of even length)."""
    x = _float(input, "glu")
    if x.ndim == 0:
        raise ValueError("glu: input must have at least one dimension")
    axis = normalize_axis(dim, x.ndim)
    n = x.shape[axis]
    if n % 2:
        raise ValueError(f"glu: halving dimension {dim} must be of even length, got {n} (shape {x.shape})")
    lead = (slice(None),) * axis
    return x[lead + (slice(0, n // 2),)] * x[lead + (slice(n // 2, n),)].sigmoid()


_aliasing.apply(globals(), __all__)   # numpy's aliasing rule: results never alias arguments
