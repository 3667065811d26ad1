"""torch.nn.functional's functions on ug tensors: activations, normalizations, linear and
embedding, the losses, one_hot, cummax / cummin.

Names, arguments and results are torch's (dim, not axis; `reduction='none'|'mean'|'sum'`), so
code written against torch.nn.functional ports by swapping the import. Every function is a
composition of ug's differentiable ops (arithmetic, exp/log, where, max/sum reductions,
take_along_axis, views, matmul, scans), so each fuses with its neighbours, runs under ug.jit and
gets its gradient from the autodiff's rules for those ops. Where the textbook formula overflows
or cancels, the standard stable form is used (softplus, logsigmoid, log_softmax,
binary_cross_entropy_with_logits); each branch of a `where` is computed on arguments clamped into
its own range, so that an unselected branch is finite and its (zero) gradient is not NaN.

gelu: approximate='none' is torch's exact gelu, 0.5 x erfc(-x / sqrt 2) (ug.erfc, accurate for
large negative x where 1 + erf(x / sqrt 2) cancels); approximate='tanh' is Tensor.gelu, the
tanh approximation 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) (computed as x sigmoid(2u)).
"""

from __future__ import annotations

import math
import operator
from typing import Any, NamedTuple, Sequence

import numpy as np

from .. import dtypes
from ..array_api._common import check_tensor, iota
from ..array_api.elementwise import isnan
from ..array_api.extras import erf, erfc, logsumexp
from ..array_api.indexing import take, take_along_axis
from ..array_api.scatter import scatter_add
from ..array_api.statistical import cumulative_max, cumulative_min
from ..array_api.transcendental import expm1, log1p
from ..autodiff import define_vjp
from ..shapes import normalize_axis
from ..tensor import Tensor, tensor
from ..tensor_arith import as_tensor, matmul, maximum, minimum, where
from .attention import scaled_dot_product_attention

_REDUCTIONS = ("none", "mean", "sum")


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


# --- linear layers and embeddings -------------------------------------------------------------

def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias (weight: (out_features, in_features))."""
    x, w = check_tensor(input, "linear"), check_tensor(weight, "linear", "weight")
    if w.ndim not in (1, 2) or x.ndim == 0 or x.shape[-1] != w.shape[-1]:
        raise ValueError(f"linear: input (shape {x.shape}) and weight (shape {w.shape}) do not match: "
                         f"weight must be (out_features, {x.shape[-1] if x.ndim else '?'})")
    out = matmul(x, w.T if w.ndim == 2 else w)
    return out if bias is None else out + bias


def embedding(input: Any, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0) -> Tensor:
    """weight's rows at the indices `input` (any shape): shape input.shape + (embedding_dim,), as
    torch's F.embedding. padding_idx: that row's gradient is zero (its value is read as it is;
    negative counts from the end). max_norm: the rows `input` reads whose norm_type-norm exceeds
    max_norm are first scaled to max_norm / (norm + 1e-7) and written back into `weight` (torch's
    in-place renormalization; not differentiated: the gradient reaches the rows as read)."""
    w = check_tensor(weight, "embedding", "weight")
    if w.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-d (num_embeddings, embedding_dim), got shape {w.shape}")
    if isinstance(input, Tensor) and input.dtype.kind not in "iu":
        raise TypeError(f"embedding: indices must be integers, got {input.dtype}")
    num = w.shape[0]
    if padding_idx is not None:
        if not -num <= operator.index(padding_idx) < num:
            raise ValueError(f"embedding: padding_idx {padding_idx} is out of range for {num} embeddings")
        padding_idx = operator.index(padding_idx) % num
    rows = take(w, input, axis=0)
    if max_norm is not None:
        index = input if isinstance(input, Tensor) else tensor(input, device=w.device)
        read = scatter_add(iota(num, w.device).astype(np.int64) * 0, 0, index.reshape(-1), 1) > 0
        norms = (w.detach().abs() ** norm_type).sum(axis=1) ** (1.0 / norm_type)
        scale = where(read & (norms > max_norm), max_norm / (norms + 1e-7), 1.0).astype(w.dtype)
        renormed = w.detach() * scale.reshape(num, 1)
        rows = rows + (take(renormed, input, axis=0) - rows).detach()   # the value renormed, the gradient as read
        w.assign(renormed)
    if padding_idx is not None:
        index = input if isinstance(input, Tensor) else tensor(input, device=w.device)
        rows = where((index == padding_idx).reshape(*index.shape, 1), rows.detach(), rows)
    return rows


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 (..., num_classes): 1 at each index's class. num_classes=-1 is max(tensor) + 1,
    which reads the tensor (a realize)."""
    t = check_tensor(tensor, "one_hot", "tensor")
    if t.dtype.kind not in "iu":
        raise TypeError(f"one_hot: tensor must hold integer class indices, got {t.dtype}")
    if num_classes == -1:
        num_classes = int(t.max().item()) + 1 if t.size else 0
    elif num_classes < 0:
        raise ValueError(f"one_hot: num_classes must be -1 or non-negative, got {num_classes}")
    classes = iota(num_classes, t.device).astype(t.dtype)
    return (t.reshape(*t.shape, 1) == classes).astype(np.int64)


# --- normalization ----------------------------------------------------------------------------

def _normalized_axes(x: Tensor, normalized_shape: Any, fn: str) -> tuple[int, ...]:
    shape = (operator.index(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) \
        else tuple(operator.index(s) for s in normalized_shape)
    if len(shape) > x.ndim or tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise ValueError(f"{fn}: normalized_shape {shape} is not the trailing shape of input (shape {x.shape})")
    return tuple(range(x.ndim - len(shape), x.ndim))


def _affine(y: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias over the trailing `normalized_shape` axes
    (var biased, torch's)."""
    x = _float(input, "layer_norm")
    axes = _normalized_axes(x, normalized_shape, "layer_norm")
    mean = x.mean(axes, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axes, keepdims=True)
    return _affine(centered * (var + eps).sqrt().reciprocal(), weight, bias)


def rms_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the trailing axes; eps None: the dtype's
    machine epsilon (torch's)."""
    x = _float(input, "rms_norm")
    axes = _normalized_axes(x, normalized_shape, "rms_norm")
    e = float(np.finfo(x.dtype).eps) if eps is None else eps
    return _affine(x * ((x * x).mean(axes, keepdims=True) + e).sqrt().reciprocal(), weight, None)


def _channel(v: Tensor, ndim: int) -> Tensor:
    """A per-channel (C,) vector shaped to broadcast over (N, C, ...)."""
    return v.reshape(v.shape[0], *([1] * (ndim - 2)))


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Per-channel normalization of (N, C, ...) input. training: by the batch's statistics
    (over every axis but 1, variance biased), and running_mean / running_var, when given,
    updated in place (`assign`): (1 - momentum) * running + momentum * batch, the variance
    unbiased (n / (n - 1)), torch's. Otherwise by running_mean / running_var."""
    x = _float(input, "batch_norm")
    if x.ndim < 2:
        raise ValueError(f"batch_norm: input must be (N, C, ...), got shape {x.shape}")
    axes = tuple(d for d in range(x.ndim) if d != 1)
    if training:
        count = x.size // x.shape[1]
        if count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input "
                             f"shape {x.shape}")
        mean = x.mean(axes, keepdims=True)
        centered = x - mean
        var = (centered * centered).mean(axes, keepdims=True)
        if running_mean is not None:
            running_mean.assign(running_mean * (1 - momentum) + mean.reshape(-1) * momentum)
        if running_var is not None:
            running_var.assign(running_var * (1 - momentum) + var.reshape(-1) * (momentum * count / (count - 1)))
        y = centered * (var + eps).sqrt().reciprocal()
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are required when not training")
        y = (x - _channel(running_mean, x.ndim)) * (_channel(running_var, x.ndim) + eps).sqrt().reciprocal()
    return _affine(y, None if weight is None else _channel(weight, x.ndim),
                   None if bias is None else _channel(bias, x.ndim))


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """(N, C, ...) normalized over each group of C / num_groups channels (and the spatial
    axes), then the per-channel affine."""
    x = _float(input, "group_norm")
    if x.ndim < 2:
        raise ValueError(f"group_norm: input must be (N, C, ...), got shape {x.shape}")
    n, c = x.shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise ValueError(f"group_norm: num_groups ({num_groups}) must divide the channels ({c})")
    g = x.reshape(n, num_groups, -1)
    mean = g.mean(2, keepdims=True)
    centered = g - mean
    var = (centered * centered).mean(2, keepdims=True)
    y = (centered * (var + eps).sqrt().reciprocal()).reshape(x.shape)
    return _affine(y, None if weight is None else _channel(weight, x.ndim),
                   None if bias is None else _channel(bias, x.ndim))


# --- losses -----------------------------------------------------------------------------------

def _check_reduction(reduction: str, fn: str) -> None:
    if reduction not in _REDUCTIONS and not (fn == "kl_div" and reduction == "batchmean"):
        raise ValueError(f"{fn}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def _pointwise(input: Tensor, target: Any, fn: str) -> tuple[Tensor, Tensor]:
    x = _float(input, fn)
    t = target if isinstance(target, Tensor) else as_tensor(target, x)
    if t.shape != x.shape:
        raise ValueError(f"{fn}: target (shape {t.shape}) must have input's shape {x.shape}")
    return x, t._float()


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """(x - y)^2."""
    _check_reduction(reduction, "mse_loss")
    x, t = _pointwise(input, target, "mse_loss")
    d = x - t
    return _reduce(d * d, reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """|x - y|."""
    _check_reduction(reduction, "l1_loss")
    x, t = _pointwise(input, target, "l1_loss")
    return _reduce((x - t).abs(), reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta beyond (beta 0: l1)."""
    _check_reduction(reduction, "smooth_l1_loss")
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    x, t = _pointwise(input, target, "smooth_l1_loss")
    d = (x - t).abs()
    if beta == 0:
        return _reduce(d, reduction)
    return _reduce(where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """0.5 d^2 where |d| <= delta, delta (|d| - 0.5 delta) beyond."""
    _check_reduction(reduction, "huber_loss")
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    x, t = _pointwise(input, target, "huber_loss")
    d = (x - t).abs()
    return _reduce(where(d <= delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction)


def kl_div(input: Tensor, target: Tensor, reduction: str = "mean", log_target: bool = False) -> Tensor:
    """target * (log target - input) (input: log-probabilities), 0 where target is 0;
    log_target: target given as log-probabilities, exp(t) (t - input). reduction 'batchmean'
    divides the sum by input.shape[0] (the true KL divergence of a batch), 'mean' by the count."""
    _check_reduction(reduction, "kl_div")
    x, t = _pointwise(input, target, "kl_div")
    if log_target:
        loss = t.exp() * (t - x)
    else:
        # torch's xlogy(t, t) - t x: t log t is 0 at t == 0 (its log taken of 1 there, so that
        # no -inf * 0 reaches the gradient), NaN for t < 0
        zero = t == 0
        loss = where(zero, _k(t, 0), t * where(zero, _k(t, 1), t).log()) - t * x
    if reduction == "batchmean":
        return loss.sum() / (x.shape[0] if x.ndim else 1)
    return _reduce(loss, reduction)


LOG_CLAMP = -100.0   # torch clamps binary_cross_entropy's logs at -100 (so that log(0) is finite)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         reduction: str = "mean") -> Tensor:
    """-(y log x + (1 - y) log(1 - x)) for probabilities x, each log clamped at -100 (torch's)."""
    _check_reduction(reduction, "binary_cross_entropy")
    x, t = _pointwise(input, target, "binary_cross_entropy")
    log_x = maximum(x.log(), _k(x, LOG_CLAMP))
    log_1mx = maximum(log1p(-x), _k(x, LOG_CLAMP))
    loss = -(t * log_x + (1 - t) * log_1mx)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """binary_cross_entropy(sigmoid(x), y) in the stable form (no exp overflow, no log(0)):
    (1 - y) x + (1 + (pos_weight - 1) y) (log1p(exp(-|x|)) + max(-x, 0))."""
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    x, t = _pointwise(input, target, "binary_cross_entropy_with_logits")
    softplus_neg = log1p((-x.abs()).exp()) + maximum(-x, _k(x, 0))   # log(1 + exp(-x))
    if pos_weight is None:
        loss = (1 - t) * x + softplus_neg
    else:
        loss = (1 - t) * x + (1 + (pos_weight - 1) * t) * softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _class_layout(input: Tensor, fn: str) -> tuple[Tensor, int]:
    """input as (N, C, ...) (a (C,) input as (1, C)), and C."""
    x = _float(input, fn)
    if x.ndim == 0:
        raise ValueError(f"{fn}: input must be (C,), (N, C) or (N, C, d1, ...), got a 0-d tensor")
    if x.ndim == 1:
        x = x.reshape(1, x.shape[0])
    return x, x.shape[1]


def _class_targets(target: Any, x: Tensor, unbatched: bool, fn: str) -> Tensor:
    t = target if isinstance(target, Tensor) else as_tensor(np.asarray(target), x)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{fn}: class-index targets must be integers, got {t.dtype}")
    if unbatched:
        t = t.reshape(1)
    expected = (x.shape[0],) + x.shape[2:]
    if t.shape != expected:
        raise ValueError(f"{fn}: target (shape {t.shape}) must be input's shape without the class axis {expected}")
    return t


def _nll(logp: Tensor, t: Tensor, weight: Tensor | None, ignore_index: int, reduction: str, fn: str,
         unbatched: bool) -> tuple[Tensor, Tensor, Tensor]:
    """The per-element losses -w[t] logp[t] (0 where ignored), each element's weight w[t] (0
    where ignored), and the ignore mask's complement."""
    keep = t != ignore_index
    safe = where(keep, t, 0)     # (an ignored index may be out of range: gather a valid class)
    # the target class's value as a select-and-sum over the class axis, not a gather: a
    # reduction along the axis log_softmax already reduces, so the whole loss per row is one
    # kernel, and its derivative an elementwise select (a gather's is a scatter or a compare)
    classes = iota(logp.shape[1], logp.device, safe.dtype).reshape(1, logp.shape[1], *([1] * (t.ndim - 1)))
    hit = classes == safe.reshape(safe.shape[0], 1, *safe.shape[1:])
    picked = where(hit, logp, _k(logp, 0)).sum(1)
    if weight is None:
        w = keep.astype(logp.dtype)
    else:
        wt = check_tensor(weight, fn, "weight")
        if wt.shape != (logp.shape[1],):
            raise ValueError(f"{fn}: weight (shape {wt.shape}) must have one value per class ({logp.shape[1]})")
        w = where(keep, take(wt.astype(logp.dtype), safe, axis=0), _k(logp, 0))
    return -picked * w, w, keep


def _finish(loss: Tensor, w: Tensor, reduction: str, unbatched: bool) -> Tensor:
    if reduction == "none":
        return loss.reshape(()) if unbatched else loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / w.sum()   # torch's weighted mean: by the total weight of the kept elements


def nll_loss(input: Tensor, target: Any, weight: Tensor | None = None, ignore_index: int = -100,
             reduction: str = "mean") -> Tensor:
    """-input[n, target[n], ...] * weight[target[n]] for log-probabilities input (N, C, ...)
    and class indices target (N, ...); elements whose target is ignore_index count for nothing
    (0 in 'none', left out of 'mean''s total weight)."""
    _check_reduction(reduction, "nll_loss")
    x, _ = _class_layout(input, "nll_loss")
    unbatched = check_tensor(input, "nll_loss").ndim == 1
    t = _class_targets(target, x, unbatched, "nll_loss")
    loss, w, _ = _nll(x, t, weight, ignore_index, reduction, "nll_loss", unbatched)
    return _finish(loss, w, reduction, unbatched)


def cross_entropy(input: Tensor, target: Any, weight: Tensor | None = None, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """log_softmax over the class axis 1 of logits (N, C, ...) (or (C,)), then: class-index
    targets (N, ...) as nll_loss (weight, ignore_index), with label_smoothing e mixing in
    e / C of every class's loss; or class-probability targets (input's shape, floats):
    -sum_c weight_c target_c logp_c, smoothed to (1 - e) target + e / C, 'mean' over N * d1 * ...
    (torch's)."""
    _check_reduction(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    x, c = _class_layout(input, "cross_entropy")
    unbatched = check_tensor(input, "cross_entropy").ndim == 1
    logp = x.log_softmax(1)
    wt = None if weight is None else check_tensor(weight, "cross_entropy", "weight").astype(logp.dtype)
    if wt is not None and wt.shape != (c,):
        raise ValueError(f"cross_entropy: weight (shape {wt.shape}) must have one value per class ({c})")
    wc = None if wt is None else wt.reshape(1, c, *([1] * (x.ndim - 2)))
    if isinstance(target, Tensor) and target.dtype.kind == "f":
        t = target.reshape(1, c) if unbatched else target
        if t.shape != x.shape:
            raise ValueError(f"cross_entropy: probability targets (shape {target.shape}) must have input's shape "
                             f"{check_tensor(input, 'cross_entropy').shape}")
        t = t.astype(logp.dtype)
        if label_smoothing > 0:
            t = t * (1 - label_smoothing) + label_smoothing / c
        terms = logp * t if wc is None else logp * t * wc
        loss = -terms.sum(1)
        if reduction == "none":
            return loss.reshape(()) if unbatched else loss
        return loss.sum() if reduction == "sum" else loss.sum() / (x.size // c if x.size else 1)
    t = _class_targets(target, x, unbatched, "cross_entropy")
    loss, w, keep = _nll(logp, t, wt, ignore_index, reduction, "cross_entropy", unbatched)
    if label_smoothing > 0:
        # every class's loss, weighted, over the kept elements (torch's smooth_loss)
        smooth = -(logp if wc is None else logp * wc).sum(1)
        smooth = where(keep, smooth, _k(smooth, 0))
        if reduction == "none":
            out = loss * (1 - label_smoothing) + smooth * (label_smoothing / c)
            return out.reshape(()) if unbatched else out
        if reduction == "sum":
            return loss.sum() * (1 - label_smoothing) + smooth.sum() * (label_smoothing / c)
        total = w.sum()
        return (loss.sum() * (1 - label_smoothing) + smooth.sum() * (label_smoothing / c)) / total
    return _finish(loss, w, reduction, unbatched)


# --- views -----------------------------------------------------------------------------------

def split(tensor: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """torch.split: pieces of `split_size_or_sections` elements along `dim` (an int: the last
    piece may be shorter) or of the given sizes (a sequence summing to the axis' length): a
    tuple of views."""
    x = check_tensor(tensor, "split", "tensor")
    if x.ndim == 0:
        raise ValueError("split: tensor must have at least one dimension")
    axis = normalize_axis(dim, x.ndim)
    n = x.shape[axis]
    if isinstance(split_size_or_sections, (int, np.integer)):
        size = int(split_size_or_sections)
        if size <= 0 and not (size == 0 and n == 0):
            raise ValueError(f"split: split_size must be positive, got {size}")
        sizes = [min(size, n - start) for start in range(0, n, size)] if n else [0]
    else:
        sizes = [operator.index(s) for s in split_size_or_sections]
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise ValueError(f"split: sizes {sizes} must be non-negative and sum to dimension {dim}'s length {n} "
                             f"(shape {x.shape})")
    lead = (slice(None),) * axis
    pieces, start = [], 0
    for s in sizes:
        pieces.append(x[lead + (slice(start, start + s),)])
        start += s
    return tuple(pieces)


# --- cumulative extremes ----------------------------------------------------------------------

class CumResult(NamedTuple):
    """torch.return_types.cummax / cummin: the running values and the index each came from."""
    values: Tensor
    indices: Tensor


def _cum_extreme(input: Tensor, dim: int, largest: bool, fn: str) -> CumResult:
    x = check_tensor(input, fn)
    flat = x.ndim == 0
    if flat:
        x = x.reshape(1)
    axis = normalize_axis(dim, x.ndim)
    values = (cumulative_max if largest else cumulative_min)(x, axis=axis)
    # torch's ties: the index of the last occurrence of the running extreme (it moves on to each
    # later equal element), and of the last NaN once one was met. The positions where x equals
    # the running value are where the index moves; the running value only ever moves to later
    # positions, so the index is the running max of those positions.
    n = x.shape[axis]
    pos = iota(n, x.device, np.dtype(np.int64)).reshape(*([1] * axis), n, *([1] * (x.ndim - axis - 1)))
    moves = (x == values) | isnan(x) if x.dtype.kind == "f" else x == values
    indices = cumulative_max(where(moves, pos, 0), axis=axis)
    if flat:
        values, indices = values.reshape(()), indices.reshape(())
    return CumResult(values, indices)


def cummax(input: Tensor, dim: int) -> CumResult:
    """The running maximum along `dim` and the index of each (torch.cummax: on ties the last
    occurrence; NaN propagates, its index the latest NaN)."""
    return _cum_extreme(input, dim, True, "cummax")


def cummin(input: Tensor, dim: int) -> CumResult:
    """The running minimum along `dim` and the index of each (as cummax)."""
    return _cum_extreme(input, dim, False, "cummin")


__all__ = [
    "CumResult", "batch_norm", "binary_cross_entropy", "binary_cross_entropy_with_logits", "celu", "cross_entropy",
    "cummax", "cummin", "elu", "embedding", "erf", "erfc", "gelu", "glu", "group_norm", "hardsigmoid", "hardswish",
    "hardtanh", "huber_loss", "kl_div", "l1_loss", "layer_norm", "leaky_relu", "linear", "log_softmax", "logsigmoid",
    "logsumexp", "mish", "mse_loss", "nll_loss", "one_hot", "relu", "relu6", "rms_norm", "selu", "sigmoid", "silu",
    "scaled_dot_product_attention", "smooth_l1_loss", "softmax", "softmin", "softplus", "softsign", "split", "tanh",
]

from ..array_api import aliasing as _aliasing  # noqa: E402
_aliasing.apply(globals(), __all__)   # numpy's aliasing rule: results never alias arguments (split: views)
