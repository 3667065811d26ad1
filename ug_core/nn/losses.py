"""torch.nn.functional's losses on ug tensors (mse_loss, cross_entropy, nll_loss, kl_div, ...), with
torch's `reduction='none'|'mean'|'sum'`: see functional.py for what they are made of."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..array_api import aliasing as _aliasing
from ..array_api._common import check_tensor, iota
from ..array_api.indexing import take
from ..array_api.transcendental import log1p
from ..tensor import Tensor
from ..tensor_arith import as_tensor, maximum, where
from .activations import _float, _k

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "huber_loss", "kl_div",
           "l1_loss", "mse_loss", "nll_loss", "smooth_l1_loss"]

_REDUCTIONS = ("none", "mean", "sum")


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


_aliasing.apply(globals(), __all__)   # numpy's aliasing rule: results never alias arguments
