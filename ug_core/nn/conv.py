"""Convolutions and unfold (torch.nn.functional's signatures and semantics).

Everything here is built from ug's differentiable tensor ops, so a gradient of any of them is
the gradient of those ops: a window of the (padded) input is a strided view of it (each output
position's window, overlapping, as numpy's sliding_window_view), padding is a masked view.

- Convolution: two forms, chosen per case (measured on cpu, see `_use_taps`):
  *im2col*: the windows laid out as a (batch, C/groups * prod(kernel), positions) matrix (one
  kernel materializes it) multiplied by the weight's (O/groups, C/groups * prod(kernel)) matrix:
  one matmul per group, whose (N, O, positions) product is the result in NC* layout already;
  *taps* ("direct"): the sum over the kernel's taps of a shifted, strided slice of the input
  times that tap's weights, elementwise: one fused kernel with no intermediate buffer. It is
  faster where each output channel reads one input channel (depthwise convolutions: C/groups
  == 1 with groups > 1), whose im2col matmul would have one row per group.

The transposed convolutions are in conv_transpose.py, the im2col matmuls with their own
gradients in conv_matmul.py, pooling in pool.py and interpolation in interpolation.py; the
argument checks and window views they share in windows.py.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ..tensor import Tensor
from ..tensor_arith import matmul
from .conv_matmul import _weight_matmul, _whole_row_conv, _whole_rows
from .windows import _batched, _check_tensor, _ints, _out_size, _pad_or_crop, _unbatched, _windows

__all__ = ["conv1d", "conv2d", "conv3d", "unfold"]

TAPS_MAX = 64
"""The most kernel taps (prod(kernel_size)) the taps form sums in one expression."""


# --- convolution ----------------------------------------------------------------------------


def _conv_padding(padding: Any, nd: int, kernel: tuple[int, ...], stride: tuple[int, ...],
                  dilation: tuple[int, ...], fn: str) -> list[tuple[int, int]]:
    """torch's padding argument as (before, after) per spatial dim: ints, 'valid' or 'same'
    (total dilation * (k - 1), the odd one after, as torch pads it)."""
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{fn}: padding='same' is not supported for strided convolutions (stride={stride})")
            return [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation)]
        raise ValueError(f"{fn}: padding must be 'valid', 'same', an int or a tuple of ints, got {padding!r}")
    return [(p, p) for p in _ints(padding, nd, fn, "padding", 0)]


def _use_taps(cin_g: int, groups: int, kernel: tuple[int, ...]) -> bool:
    """The direct (taps) form where each output channel reads one input channel of many groups
    (depthwise): im2col's matmul then has one row per group and a K of prod(kernel), and the
    taps' elementwise sum is several times faster on cpu (see the module doc); im2col for the
    rest, whose matmul does the channels' sums far faster (timings in tests/test_nn_torch.py's
    module doc)."""
    return cin_g == 1 and groups > 1 and math.prod(kernel) <= TAPS_MAX


def _conv(x: Tensor, weight: Tensor, bias: Tensor | None, stride: Any, padding: Any, dilation: Any, groups: int,
          nd: int, fn: str, fold_batch: bool = False) -> Tensor:
    _check_tensor(x, fn, "input")
    _check_tensor(weight, fn, "weight")
    x, was_unbatched = _batched(x, nd, fn)
    if weight.ndim != nd + 2:
        raise ValueError(f"{fn}: weight must be {nd + 2}-d (out_channels, in_channels/groups, *kernel), "
                         f"got shape {weight.shape}")
    groups = operator.index(groups)
    if groups < 1:
        raise ValueError(f"{fn}: groups must be positive, got {groups}")
    n, c = x.shape[:2]
    o, cin_g = weight.shape[:2]
    kernel = tuple(weight.shape[2:])
    if c % groups or o % groups:
        raise ValueError(f"{fn}: in_channels ({c}) and out_channels ({o}) must be divisible by groups ({groups})")
    if cin_g * groups != c:
        raise ValueError(f"{fn}: weight of shape {weight.shape} expects {cin_g * groups} input channels "
                         f"({cin_g} per group, groups={groups}), but input of shape {x.shape} has {c}")
    stride_ = _ints(stride, nd, fn, "stride", 1)
    dilation_ = _ints(dilation, nd, fn, "dilation", 1)
    pairs = _conv_padding(padding, nd, kernel, stride_, dilation_, fn)
    padded = tuple(s + b + a for s, (b, a) in zip(x.shape[2:], pairs))
    if any(d * (k - 1) + 1 > p for k, d, p in zip(kernel, dilation_, padded)):
        raise ValueError(f"{fn}: kernel size {kernel} (dilation {dilation_}) is larger than the padded input "
                         f"{padded} (input shape {x.shape}, padding {pairs})")
    if bias is not None:
        _check_tensor(bias, fn, "bias")
        if bias.shape != (o,):
            raise ValueError(f"{fn}: bias must have shape ({o},), got {bias.shape}")
    xp = _pad_or_crop(x, [(0, 0), (0, 0)] + pairs)
    outs = tuple(_out_size(p, k, s, d) for p, k, s, d in zip(padded, kernel, stride_, dilation_))
    o_g = o // groups
    if _use_taps(cin_g, groups, kernel):
        # out[n, g, j, *pos] = sum over taps t and the group's channels c of
        #     x[n, g * cin_g + c, *(pos * stride + t * dilation)] * w[g * o_g + j, c, *t]
        total: Tensor | None = None
        for tap in np.ndindex(*kernel):
            shifted = xp[(slice(None), slice(None)) + tuple(
                slice(t * d, t * d + (m - 1) * s + 1, s) for t, d, m, s in zip(tap, dilation_, outs, stride_))]
            w_tap = weight[(slice(None), slice(None)) + tuple(tap)].reshape(1, groups, o_g, cin_g, *(1,) * nd)
            term = shifted.reshape(n, groups, 1, cin_g, *outs) * w_tap
            term = term.reshape(n, groups, o_g, *outs) if cin_g == 1 else term.sum(axis=3)
            total = term if total is None else total + term
        assert total is not None
        out = total.reshape(n, o, *outs)
    else:
        win = _windows(xp, kernel, stride_, dilation_)          # (N, C, *positions, *kernel)
        order = (0, 1, *range(2 + nd, 2 + 2 * nd), *range(2, 2 + nd))
        positions = math.prod(outs)
        taps = cin_g * math.prod(kernel)
        wm = weight.reshape(groups, o_g, taps)
        if fold_batch:
            # the batch joins the positions: (groups, O/g, taps) @ (groups, taps, N * positions), so
            # a weight the matmul cannot read in place (conv_transpose's, permuted and flipped) is
            # copied once, not once per batch item as a broadcast to (N, groups, O/g, taps) would be
            order = (1, *range(2 + nd, 2 + 2 * nd), 0, *range(2, 2 + nd))
            cols = win.permute(order).reshape(groups, taps, n * positions)
            prod = matmul(wm, cols).reshape(groups, o_g, n, *outs)
            out = prod.permute(2, 0, 1, *range(3, 3 + nd)).reshape(n, o, *outs)
        elif _whole_rows(xp, nd, stride_):
            out = _whole_row_conv(xp, wm, bias, kernel, dilation_, outs)
            return _unbatched(out, was_unbatched)
        else:
            cols = win.permute(order).reshape(n, groups, taps, positions)
            if groups == 1:
                prod = _weight_matmul(wm.reshape(o_g, taps), cols.reshape(n, taps, positions))   # (N, O, positions)
            else:
                prod = _weight_matmul(wm, cols)                                                   # (N, groups, O/g, positions)
            out = prod.reshape(n, o, *outs)
    if bias is not None:
        out = out + bias.reshape(1, o, *(1,) * nd)
    return _unbatched(out, was_unbatched)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-d convolution (cross-correlation) of input (N, C, L) or (C, L) with weight (O, C/groups, k),
    as torch.nn.functional.conv1d; padding: an int, a tuple, 'valid' or 'same'."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-d convolution (cross-correlation) of input (N, C, H, W) or (C, H, W) with weight
    (O, C/groups, kh, kw), as torch.nn.functional.conv2d; padding: an int, a tuple, 'valid' or 'same'."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """3-d convolution (cross-correlation) of input (N, C, D, H, W) or (C, D, H, W) with weight
    (O, C/groups, kd, kh, kw), as torch.nn.functional.conv3d; padding: an int, a tuple, 'valid' or 'same'."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def unfold(input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Tensor:
    """torch.nn.functional.unfold (im2col): the sliding windows of a (N, C, H, W) or unbatched
    (C, H, W) input, zero-padded, as columns: (N, C * kh * kw, L) with L the windows' positions
    in row-major order, each column the window's channels then taps. One view of the padded
    input, copied by whatever reads it; its gradient sums the windows back (a fold)."""
    fn = "unfold"
    _check_tensor(input, fn, "input")
    x, was_unbatched = _batched(input, 2, fn)
    kernel = _ints(kernel_size, 2, fn, "kernel_size", 1)
    dilation_ = _ints(dilation, 2, fn, "dilation", 1)
    padding_ = _ints(padding, 2, fn, "padding", 0)
    stride_ = _ints(stride, 2, fn, "stride", 1)
    xp = _pad_or_crop(x, [(0, 0), (0, 0)] + [(p, p) for p in padding_])
    outs = tuple(_out_size(n, k, s, d) for n, k, s, d in zip(xp.shape[2:], kernel, stride_, dilation_))
    if any(m < 1 for m in outs):
        raise ValueError(f"{fn}: input of shape {input.shape} (padding {padding_}) is too small for kernel_size "
                         f"{kernel} with dilation {dilation_}")
    win = _windows(xp, kernel, stride_, dilation_)     # (N, C, oh, ow, kh, kw)
    n, c = x.shape[:2]
    cols = win.permute(0, 1, 4, 5, 2, 3).reshape(n, c * math.prod(kernel), math.prod(outs))
    return _unbatched(cols, was_unbatched)
