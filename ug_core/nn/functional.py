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

The activations (relu, gelu, softmax...) are in activations.py and the losses in losses.py; this
module holds the rest and is the namespace of them all (`ug.nn.functional`).
"""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

import numpy as np

from ..array_api import aliasing as _aliasing
from ..array_api._common import check_tensor, iota
from ..array_api.elementwise import isnan
from ..array_api.extras import erf, erfc, logsumexp
from ..array_api.indexing import take
from ..array_api.scatter import scatter_add
from ..array_api.statistical import cumulative_max, cumulative_min
from ..shapes import normalize_axis
from ..tensor import Tensor, tensor
from ..tensor_arith import matmul, where
from . import activations, losses
from .activations import *  # noqa: F403
from .activations import SELU_ALPHA, SELU_SCALE, _float   # (the constants: F.SELU_ALPHA, as before)
from .attention import scaled_dot_product_attention
from .losses import *  # noqa: F403
from .losses import LOG_CLAMP   # (F.LOG_CLAMP, as before)

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

# numpy's aliasing rule: results never alias arguments (split: views); activations' and losses'
# are wrapped there
_aliasing.apply(globals(), [n for n in __all__ if n not in activations.__all__ and n not in losses.__all__])
