"""What convolution and pooling share: their argument checks (torch's int-or-tuple arguments,
batched or unbatched inputs) and the window views (each output position's window of the padded
input, overlapping, a strided view of it; padding a masked view).
"""

from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from ..array_api.manipulation import pad
from ..tensor import Tensor
from ..view import View, contiguous_strides


# --- argument checks ------------------------------------------------------------------------


def _check_tensor(x: Any, fn: str, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: {name} must be a ug Tensor, got {type(x).__name__}")
    return x


def _ints(value: Any, nd: int, fn: str, name: str, minimum: int) -> tuple[int, ...]:
    """An int or a sequence of nd ints (torch's _single/_pair/_triple), each >= minimum."""
    items = [value] * nd if isinstance(value, (int, np.integer)) else list(value) \
        if isinstance(value, (tuple, list)) else None
    if items is None:
        raise TypeError(f"{fn}: {name} must be an int or a tuple of {nd} ints, got {value!r}")
    if len(items) == 1 and nd > 1:
        items = items * nd
    if len(items) != nd:
        raise ValueError(f"{fn}: {name} must be an int or a tuple of {nd} ints, got {value!r}")
    try:
        out = tuple(operator.index(v) for v in items)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an int or a tuple of {nd} ints, got {value!r}") from None
    if any(v < minimum for v in out):
        raise ValueError(f"{fn}: {name} must be >= {minimum}, got {value!r}")
    return out


def _batched(x: Tensor, nd: int, fn: str) -> tuple[Tensor, bool]:
    """x as (N, C, *spatial): torch takes an unbatched (C, *spatial) input too; whether it was."""
    if x.ndim == nd + 1:
        return x.reshape(1, *x.shape), True
    if x.ndim != nd + 2:
        raise ValueError(f"{fn}: expected a {nd + 1}-d (unbatched) or {nd + 2}-d (batched) input, "
                         f"got shape {x.shape}")
    return x, False


def _unbatched(out: Tensor, was: bool) -> Tensor:
    return out.reshape(out.shape[1:]) if was else out


# --- views ----------------------------------------------------------------------------------


def _pad_or_crop(x: Tensor, pairs: Sequence[tuple[int, int]], value: float = 0.0) -> Tensor:
    """x with (before, after) added around each dim: a positive width pads with `value` (a masked
    view), a negative one crops (a slice)."""
    if any(b < 0 or a < 0 for b, a in pairs):
        x = x[tuple(slice(max(-b, 0), n - max(-a, 0)) for (b, a), n in zip(pairs, x.shape))]
    widths = [(max(b, 0), max(a, 0)) for b, a in pairs]
    if any(b or a for b, a in widths):
        x = pad(x, widths, constant_value=value)
    return x


def _out_size(n: int, k: int, stride: int, dilation: int) -> int:
    """Windows of k taps `dilation` apart, `stride` apart, that fit in n (padded) elements."""
    return (n - dilation * (k - 1) - 1) // stride + 1


def _windows(x: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]) -> Tensor:
    """The windows over x's last len(kernel) dims: shape x.shape[:-nd] + positions + kernel, a
    view of x (overlapping windows share its elements; no copy)."""
    nd = len(kernel)
    lead = x.ndim - nd
    strides = contiguous_strides(x.shape)
    outs = tuple(_out_size(n, k, s, d) for n, k, s, d in zip(x.shape[lead:], kernel, stride, dilation))
    view = View(x.shape[:lead] + outs + kernel,
                strides[:lead] + tuple(st * s for st, s in zip(strides[lead:], stride))
                + tuple(st * d for st, d in zip(strides[lead:], dilation)))
    return x._view(view, writeable=False)
