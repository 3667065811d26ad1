"""Convolutions, pooling and interpolation (torch.nn.functional's signatures and semantics).

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
- Transposed convolution: the gradient identity. With stride 1, the input padded by
  dilation * (k - 1) - padding (cropped where that is negative) convolved with the weight
  flipped and its in/out channels swapped per group. With a stride, one such stride-1
  convolution per phase of the output (sub-pixel form, `_conv_transpose_phases`), interleaved:
  spreading the input with stride - 1 zeros between elements instead multiplied those zeros
  (184 ms against torch's 5 for a 16x32x28x28 input, kernel 4, stride 2, on one core; 12 now).
- Where the device's matmul reads split operands (MatmulSpec.b_split, the cpu's gemm), a
  stride-1 2-d convolution computes its output over whole rows of the input (`_whole_row_cols`,
  the extra columns cropped off): the im2col matrix is then a view the matmul reads in place,
  and neither the product nor the weight's gradient reads a copy of it.
- The weight's gradient of the im2col form is (cols @ g^T)^T (`_weight_dims_vjp`): the gemm's
  faster orientation.
- Pooling: max is a max reduction over the window axes of the view of the input padded with
  -inf; average a sum over them divided by the window's count (itself a window sum of ones,
  lazily, so nothing is computed on the host).
- Interpolation: per spatial axis, a gather (`take`) of the source rows at indices computed
  from the shapes alone (host ints, as torch computes them), and for the linear modes a lerp of
  two gathers with weights from the shapes.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import numpy as np

from .. import graph
from ..array_api.creation import arange
from ..array_api.indexing import take, take_along_axis
from ..array_api.manipulation import flip, pad
from ..array_api.scatter import scatter
from ..autodiff import define_vjp
from ..plugins import registry
from ..tensor import Tensor, tensor, zeros
from ..tensor_arith import matmul, maximum, minimum, where
from ..view import View, contiguous_strides

__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "conv1d",
           "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "interpolate",
           "max_pool1d", "max_pool2d", "max_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d", "unfold"]

TAPS_MAX = 64
"""The most kernel taps (prod(kernel_size)) the taps form sums in one expression."""


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


def _whole_rows(xp: Tensor, nd: int, stride: tuple[int, ...]) -> bool:
    """Whether a 2-d convolution computes its output over whole rows of the (padded) input and
    lets the matmul read the im2col matrix in place (_whole_row_cols): stride 1, on a device
    whose matmul reads split operands (MatmulSpec.b_split)."""
    return nd == 2 and stride == (1, 1) and registry.get(xp.device).reads_split_operands()


def _whole_row_cols(xq: Tensor, kernel: tuple[int, ...], dilation: tuple[int, ...], oh: int, groups: int) -> Tensor:
    """The im2col matrix of a stride-1 2-d convolution as a view of xq (N, C, H, W), positions
    over whole rows: (N, groups, C / groups * kh * kw, oh * W), element (g, (c, i, j), y * W + x)
    = xq[g * C / groups + c, y + i * dh, x + j * dw] for every x < W (the last (kw - 1) * dw of
    each row read on into the next row, and past the last one into rows below that xq must have:
    those columns of the product are cropped off). Its positions are one dim of stride 1, its
    rows (c, i, j) a split operand (MatmulSpec.b_split)."""
    n, c, hq, w = xq.shape
    (kh, kw), (dh, dw) = kernel, dilation
    view = View((n, groups, c // groups, kh, kw, oh * w), (c * hq * w, c // groups * hq * w, hq * w, dh * w, dw, 1))
    cols = xq.reshape(n, c, hq * w)._view(view, writeable=False)
    return cols.reshape(n, groups, c // groups * kh * kw, oh * w)


def _whole_row_conv(xp: Tensor, wm: Tensor, bias: Tensor | None, kernel: tuple[int, ...], dilation: tuple[int, ...],
                    outs: tuple[int, ...]) -> Tensor:
    """A stride-1 2-d convolution of xp (N, C, H, W, padded) with wm (groups, O / groups, taps)
    computed over whole rows of xp (_whole_row_cols): the matmul reads the im2col matrix in place
    instead of a copy prod(kernel) times the image's size (conv2 of `ug bench`'s T2: 21 MB
    written and read twice a step), and the extra columns are cropped off. xp gets the zero rows
    below that the last windows read. Its own VJP: the weight's gradient is (cols @ g^T)^T on the
    whole-row cotangent (zeros in the cropped columns); the input's is the full correlation of
    that cotangent with the flipped kernel, another whole-row convolution read in place, so
    neither W^T @ g (prod(kernel) times the image: 23 MB for T2's conv2) nor its col2im is ever
    stored (single thread: 4.9 + 2.5 ms -> 4.7 ms). The bias's gradient sums the whole-row cotangent, which the matmuls read from a
    buffer (summing the cropped one recomputed the expression that gives it in the reduction)."""
    n, c, h, w = xp.shape
    groups, o_g, taps = wm.shape
    (kh, kw), (dh, dw) = kernel, dilation
    oh, ow = outs
    extra = -(-((kw - 1) * dw) // w)
    xq = pad(xp, [(0, 0), (0, 0), (0, extra), (0, 0)]) if extra else xp
    hq = h + extra
    prod = matmul(wm, _whole_row_cols(xq, kernel, dilation, oh, groups))   # (N, groups, O/g, oh * W)
    out = prod.reshape(n, groups * o_g, oh, w)[..., :ow]
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)

    def vjp(g: Tensor, out: Tensor, wm: Tensor, xq: Tensor, *bias: Tensor) -> tuple[Tensor, ...]:
        # the cotangent over whole rows (zeros in the cropped columns), flat per channel, with
        # `front` zeros before it and zeros after, as far as the input's gradient below reads
        front = (kh - 1) * dh * w + (kw - 1) * dw
        length = hq * w + front
        flat = pad(g, [(0, 0), (0, 0), (0, 0), (0, w - ow)]).reshape(n, groups * o_g, oh * w)
        gp = pad(flat, [(0, 0), (0, 0), (front, length - front - oh * w)])
        wide = gp[..., front:front + oh * w].reshape(n, groups, o_g, oh * w)
        cols = _whole_row_cols(xq, kernel, dilation, oh, groups)
        dw_ = matmul(cols, wide.mT).mT.sum(axis=0)                          # (groups, O/g, taps)
        # the input's gradient: the full correlation of the cotangent with the flipped kernel,
        # itself a whole-row convolution over gp (rows (o, i, j) read gp at q + i * dh * W + j * dw
        # for the flipped tap), which the matmul reads in place as a split operand too
        taps_t = gp.reshape(n, groups, o_g, length)._view(
            View((n, groups, o_g, kh, kw, hq * w), (groups * o_g * length, o_g * length, length, dh * w, dw, 1)),
            writeable=False).reshape(n, groups, o_g * kh * kw, hq * w)
        flipped = flip(wm.reshape(groups, o_g, c // groups, kh, kw), axis=(3, 4)).permute(0, 2, 1, 3, 4)
        dx = matmul(flipped.reshape(groups, c // groups, o_g * kh * kw), taps_t).reshape(n, c, hq, w)
        if not bias:
            return dw_, dx
        # (the positions' sums first: one reduction over axes (0, 3) took 0.59 ms on T2's conv2
        # cotangent, these two 0.22)
        return dw_, dx, wide.sum(axis=3).sum(axis=0).reshape(groups * o_g)
    return define_vjp(out, [wm, xq] + ([bias] if bias is not None else []), vjp)


def _weight_dims_vjp(g: Tensor, out: Tensor, w: Tensor, cols: Tensor) -> tuple[Tensor, Tensor]:
    """The VJP of w @ cols (w's batch dims broadcast against the leading ones of cols): the
    weight's gradient as (cols @ g^T)^T, summed over the broadcast batch, and the columns' as
    w^T @ g. cols @ g^T (M = taps) is the product the cpu gemm runs faster than g @ cols^T
    (M = out channels, few rows, and the columns read transposed): 8.7 against 14.1 ms for
    conv2 of ug bench's T2 (taps 144, 64 x 576 positions, 32 channels) on one core."""
    full = matmul(cols, g.mT).mT                                   # (*batch, O, taps)
    lead = full.ndim - w.ndim
    dw = full.sum(axis=tuple(range(lead))) if lead else full
    return dw, matmul(w.mT, g)


def _weight_matmul(w: Tensor, cols: Tensor) -> Tensor:
    """w @ cols with the VJP of _weight_dims_vjp."""
    return define_vjp(matmul(w, cols), [w, cols], _weight_dims_vjp)


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


def _conv_transpose(x: Tensor, weight: Tensor, bias: Tensor | None, stride: Any, padding: Any,
                    output_padding: Any, groups: int, dilation: Any, nd: int, fn: str) -> Tensor:
    _check_tensor(x, fn, "input")
    _check_tensor(weight, fn, "weight")
    x, was_unbatched = _batched(x, nd, fn)
    if weight.ndim != nd + 2:
        raise ValueError(f"{fn}: weight must be {nd + 2}-d (in_channels, out_channels/groups, *kernel), "
                         f"got shape {weight.shape}")
    groups = operator.index(groups)
    if groups < 1:
        raise ValueError(f"{fn}: groups must be positive, got {groups}")
    n, c = x.shape[:2]
    if weight.shape[0] != c:
        raise ValueError(f"{fn}: weight of shape {weight.shape} expects {weight.shape[0]} input channels, "
                         f"but input of shape {x.shape} has {c}")
    if c % groups:
        raise ValueError(f"{fn}: in_channels ({c}) must be divisible by groups ({groups})")
    o_g = weight.shape[1]
    kernel = tuple(weight.shape[2:])
    stride_ = _ints(stride, nd, fn, "stride", 1)
    dilation_ = _ints(dilation, nd, fn, "dilation", 1)
    padding_ = _ints(padding, nd, fn, "padding", 0)
    out_pad = _ints(output_padding, nd, fn, "output_padding", 0)
    if any(op >= s and op >= d for op, s, d in zip(out_pad, stride_, dilation_)):
        raise ValueError(f"{fn}: output_padding {out_pad} must be smaller than either stride {stride_} "
                         f"or dilation {dilation_}")
    sizes = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1
                  for i, s, p, d, k, op in zip(x.shape[2:], stride_, padding_, dilation_, kernel, out_pad))
    if any(m < 1 for m in sizes):
        raise ValueError(f"{fn}: output size {sizes} is too small (input shape {x.shape}, kernel {kernel}, "
                         f"stride {stride_}, padding {padding_}, dilation {dilation_})")
    if bias is not None:
        _check_tensor(bias, fn, "bias")
        if bias.shape != (o_g * groups,):
            raise ValueError(f"{fn}: bias must have shape ({o_g * groups},), got {bias.shape}")
    if any(s > 1 for s in stride_):
        out = _conv_transpose_phases(x, weight, stride_, padding_, dilation_, sizes, groups, fn)
        if bias is not None:
            out = out + bias.reshape(1, -1, *(1,) * nd)
        return _unbatched(out, was_unbatched)
    # stride 1: a convolution of the input padded by dilation * (k - 1) - padding (the output
    # padding after), with the weight's taps reversed
    pairs = [(d * (k - 1) - p, d * (k - 1) - p + op) for k, p, d, op in zip(kernel, padding_, dilation_, out_pad)]
    xp = _pad_or_crop(x, [(0, 0), (0, 0)] + pairs)
    # weight (C, O/g, *k) -> (O, C/g, *k): per group its in/out channels swapped, taps reversed
    c_g = c // groups
    w = weight.reshape(groups, c_g, o_g, *kernel).permute(0, 2, 1, *range(3, 3 + nd))
    w = w.reshape(groups * o_g, c_g, *kernel)
    w = w[(slice(None), slice(None)) + (slice(None, None, -1),) * nd]
    out = _conv(xp, w, bias, 1, 0, dilation_, groups, nd, fn, fold_batch=True)
    assert out.shape[2:] == sizes, (out.shape, sizes)
    return _unbatched(out, was_unbatched)


def _conv_transpose_phases(x: Tensor, weight: Tensor, stride: tuple[int, ...], padding: tuple[int, ...],
                           dilation: tuple[int, ...], sizes: tuple[int, ...], groups: int, fn: str) -> Tensor:
    """A strided transposed convolution as s_1 * ... * s_nd stride-1 convolutions, one per phase
    of the output (sub-pixel form): output element y = q * s + r of a dim reads input i = q + e at
    the taps t with i * s - p + t * d == y, i.e. (r + p - t * d) % s == 0, e = (r + p - t * d) // s;
    those taps are every s / gcd(s, d)-th one and e steps by d / gcd(s, d) between them, so each
    phase is a correlation of the (cropped or padded) input with a strided, reversed slice of the
    weight, dilated by d / gcd(s, d). The phases interleave into the output (each padded into its
    slot of a (q, s) pair of dims, summed, the pairs merged and cropped to the output's size).
    Unlike spreading the input with s - 1 zeros between elements, nothing multiplies those zeros."""
    n, c = x.shape[:2]
    nd = len(stride)
    c_g, o_g = c // groups, weight.shape[1]
    kernel = tuple(weight.shape[2:])
    counts = tuple(-(-m // s_) for m, s_ in zip(sizes, stride))      # phase lengths, padded to the longest
    total: Tensor | None = None
    for phase in np.ndindex(*stride):
        taps: list[slice] = []
        pairs: list[tuple[int, int]] = []
        dil: list[int] = []
        for r, s_, p, d, k, i, m, q_max in zip(phase, stride, padding, dilation, kernel, x.shape[2:], sizes, counts):
            valid = [t for t in range(k) if (r + p - t * d) % s_ == 0]
            q = max(0, -(-(m - r) // s_))                            # outputs of this phase along the dim
            if not valid or q == 0:
                break
            step = valid[1] - valid[0] if len(valid) > 1 else 1
            e0 = (r + p - valid[-1] * d) // s_                       # the input offset of the last tap
            dp = d * step // s_ if len(valid) > 1 else 1               # (one tap: no dilation to speak of)
            # reversed: tap valid[-1] reads input q + e0, the next (valid[-2]) q + e0 + dp, ...
            taps.append(slice(valid[-1], valid[0] - step if valid[0] - step >= 0 else None, -step))
            # the phase's input: x[e0:], padded or cropped so that exactly q_max outputs come out
            pairs.append((-e0, q_max + dp * (len(valid) - 1) - i + e0))
            dil.append(dp)
        else:
            xp = _pad_or_crop(x, [(0, 0), (0, 0)] + pairs)
            w = weight[(slice(None), slice(None)) + tuple(taps)]
            sub = tuple(w.shape[2:])
            w = w.reshape(groups, c_g, o_g, *sub).permute(0, 2, 1, *range(3, 3 + nd)).reshape(groups * o_g, c_g, *sub)
            part = _conv(xp, w, None, 1, 0, tuple(dil), groups, nd, fn)      # (N, O, *counts)
            # into its slot: (N, O, q_1, 1, q_2, 1, ...) padded to (N, O, q_1, s_1, ...)
            part = part.reshape(n, groups * o_g, *(v for q_max in counts for v in (q_max, 1)))
            part = pad(part, [(0, 0), (0, 0)] + [w_ for r, s_ in zip(phase, stride) for w_ in ((0, 0), (r, s_ - 1 - r))])
            total = part if total is None else total + part
    if total is None:   # no phase reads any tap (every output is 0: a kernel of 1 with a large stride)
        return zeros((n, groups * o_g, *sizes), x.dtype, x.device)
    out = total.reshape(n, groups * o_g, *(q_max * s_ for q_max, s_ in zip(counts, stride)))
    return out[(slice(None), slice(None)) + tuple(slice(0, m) for m in sizes)]


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """Transposed 1-d convolution of input (N, C, L) with weight (C, O/groups, k), as
    torch.nn.functional.conv_transpose1d (the gradient of conv1d with respect to its input)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 1,
                           "conv_transpose1d")


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """Transposed 2-d convolution of input (N, C, H, W) with weight (C, O/groups, kh, kw), as
    torch.nn.functional.conv_transpose2d (the gradient of conv2d with respect to its input)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 2,
                           "conv_transpose2d")


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """Transposed 3-d convolution of input (N, C, D, H, W) with weight (C, O/groups, kd, kh, kw), as
    torch.nn.functional.conv_transpose3d (the gradient of conv3d with respect to its input)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 3,
                           "conv_transpose3d")


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


# --- pooling --------------------------------------------------------------------------------


def _pool_size(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """torch's pooling_output_shape: with ceil_mode, a last partial window counts if it starts
    inside the input or its left padding."""
    span = n + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _pool_args(x: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool, nd: int,
               fn: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(kernel, stride, padding, dilation, output sizes), checked as torch checks them."""
    kernel = _ints(kernel_size, nd, fn, "kernel_size", 1)
    stride_ = kernel if stride is None or (isinstance(stride, (list, tuple)) and not stride) \
        else _ints(stride, nd, fn, "stride", 1)
    padding_ = _ints(padding, nd, fn, "padding", 0)
    dilation_ = _ints(dilation, nd, fn, "dilation", 1)
    if any(p > k // 2 for p, k in zip(padding_, kernel)):
        raise ValueError(f"{fn}: padding {padding_} must be at most half of kernel_size {kernel}")
    outs = tuple(_pool_size(n, k, s, p, d, ceil_mode)
                 for n, k, s, p, d in zip(x.shape[2:], kernel, stride_, padding_, dilation_))
    if any(m < 1 for m in outs):
        raise ValueError(f"{fn}: input of shape {x.shape} is too small for kernel_size {kernel} "
                         f"(padding {padding_}, dilation {dilation_}): output size {outs}")
    return kernel, stride_, padding_, dilation_, outs


def _pool_pairs(x: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...],
                dilation: tuple[int, ...], outs: tuple[int, ...]) -> list[tuple[int, int]]:
    """(before, after) per spatial dim: the padding, and after it what the last (ceil_mode)
    window reaches past it, or a crop of what no window reads."""
    return [(p, (m - 1) * s + d * (k - 1) + 1 - n - p)
            for n, k, s, p, d, m in zip(x.shape[2:], kernel, stride, padding, dilation, outs)]


def _lowest(dtype: np.dtype) -> float | int | bool:
    """max pooling's padding value: below every value of the dtype."""
    if dtype.kind == "f":
        return -math.inf
    if dtype.kind in "iu":
        return int(np.iinfo(dtype).min)
    return False


def _max_pool(x: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool,
              return_indices: bool, nd: int, fn: str) -> Tensor | tuple[Tensor, Tensor]:
    _check_tensor(x, fn, "input")
    x, was_unbatched = _batched(x, nd, fn)
    kernel, stride_, padding_, dilation_, outs = _pool_args(x, kernel_size, stride, padding, dilation, ceil_mode,
                                                           nd, fn)
    pairs = _pool_pairs(x, kernel, stride_, padding_, dilation_, outs)
    xp = _pad_or_crop(x, [(0, 0), (0, 0)] + pairs, _lowest(x.dtype))
    win = _windows(xp, kernel, stride_, dilation_)     # (N, C, *outs, *kernel)
    axes = tuple(range(2 + nd, 2 + 2 * nd))
    values = _unbatched(win.max(axis=axes), was_unbatched)
    if not return_indices:
        return values
    # torch's indices: the window's first maximum, as a flat index into the input's spatial dims
    local = win.reshape(*win.shape[:2 + nd], math.prod(kernel)).argmax(axis=-1)
    flat: Tensor | None = None
    for a, (k, s, p, d, m, size) in enumerate(zip(kernel, stride_, padding_, dilation_, outs, x.shape[2:])):
        inner = math.prod(kernel[a + 1:])
        tap = (local // inner) % k if a else local // inner
        pos = _arange(m, x.device).reshape(*(1,) * (2 + a), m, *(1,) * (nd - a - 1))
        coord = pos * s - p + tap * d
        flat = coord if flat is None else flat * size + coord
    assert flat is not None
    return values, _unbatched(flat.astype(np.int64), was_unbatched)


def _arange(n: int, device: str) -> Tensor:
    return arange(n, dtype=np.int64, device=device)


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """1-d max pooling of (N, C, L) or (C, L), as torch.nn.functional.max_pool1d (stride defaults to
    kernel_size; padding reads -inf); return_indices: also the int64 flat index of each maximum."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1, "max_pool1d")


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """2-d max pooling of (N, C, H, W) or (C, H, W), as torch.nn.functional.max_pool2d (stride defaults
    to kernel_size; padding reads -inf); return_indices: also the int64 flat index (h * W + w) of each
    maximum."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2, "max_pool2d")


def max_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """3-d max pooling of (N, C, D, H, W) or (C, D, H, W), as torch.nn.functional.max_pool3d (stride
    defaults to kernel_size; padding reads -inf); return_indices: also the int64 flat index of each
    maximum."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 3, "max_pool3d")


def _max_unpool(x: Tensor, indices: Any, kernel_size: Any, stride: Any, padding: Any, output_size: Any, nd: int,
                fn: str) -> Tensor:
    """max pooling's partial inverse: each value of x written at its flat spatial index
    (max_pool's return_indices) into zeros of the unpooled size (a scatter per plane)."""
    _check_tensor(x, fn, "input")
    _check_tensor(indices, fn, "indices")
    if indices.dtype.kind not in "iu":
        raise TypeError(f"{fn}: indices must be integers, got {indices.dtype}")
    if indices.shape != x.shape:
        raise ValueError(f"{fn}: indices (shape {indices.shape}) must have the input's shape {x.shape}")
    x, was_unbatched = _batched(x, nd, fn)
    kernel = _ints(kernel_size, nd, fn, "kernel_size", 1)
    stride_ = kernel if stride is None or (isinstance(stride, (list, tuple)) and not stride) \
        else _ints(stride, nd, fn, "stride", 1)
    padding_ = _ints(padding, nd, fn, "padding", 0)
    default = tuple((n - 1) * s + k - 2 * p for n, k, s, p in zip(x.shape[2:], kernel, stride_, padding_))
    if output_size is None:
        outs = default
    else:
        sizes = list(output_size)
        if len(sizes) == nd + 2:   # (torch's: the batch and channel sizes are ignored)
            sizes = sizes[2:]
        if len(sizes) != nd:
            raise ValueError(f"{fn}: output_size must have {nd} or {nd + 2} elements, got {output_size!r}")
        outs = tuple(operator.index(m) for m in sizes)
        for m, d, s in zip(outs, default, stride_):
            if not d - s < m < d + s:
                raise ValueError(f"{fn}: output_size {tuple(outs)} must be within a stride of the default size "
                                 f"{default} (stride {stride_}), exclusive")
    n, c = x.shape[:2]
    size = math.prod(outs)
    zeros = Tensor(graph.const(0, x.dtype, x.device, (n, c, size)))
    index = indices.reshape(n, c, -1)
    if not index.shape[2]:
        return _unbatched(zeros.reshape(n, c, *outs), was_unbatched)
    out = scatter(zeros, 2, index, x.reshape(n, c, -1)).reshape(n, c, *outs)
    if x.dtype.kind == "f":
        # torch's derivative: every value reads g at its index, also where two share one (the
        # scatter's own would give it to the value written only)
        out = define_vjp(out, [x], lambda g, out, x: (take_along_axis(g.reshape(n, c, size), index, axis=2)
                                                       .reshape(x.shape),))
    return _unbatched(out, was_unbatched)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    """torch.nn.functional.max_unpool1d: see max_unpool2d."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    """torch.nn.functional.max_unpool2d: zeros of the unpooled size ((H - 1) * stride - 2 *
    padding + kernel_size per dim, or output_size: within a stride of that; its leading batch
    and channel sizes are ignored) with each input value written at its index (max_pool2d's
    return_indices: h * W + w in its plane). Where two values share an index the later one (in
    row-major order) is written (torch leaves it unspecified); an index outside the plane is
    clamped into it (the scatter's rule), not checked. The gradient reads g at the indices
    (torch's: each value, also one whose index another value wrote later)."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d")


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    """torch.nn.functional.max_unpool3d: see max_unpool2d."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d")


def _avg_pool(x: Tensor, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool, count_include_pad: bool,
              divisor_override: int | None, nd: int, fn: str) -> Tensor:
    _check_tensor(x, fn, "input")
    x, was_unbatched = _batched(x, nd, fn)
    if x.dtype.kind != "f":
        raise TypeError(f"{fn}: input must be floating-point, got {x.dtype}")
    kernel, stride_, padding_, dilation_, outs = _pool_args(x, kernel_size, stride, padding, 1, ceil_mode, nd, fn)
    pairs = _pool_pairs(x, kernel, stride_, padding_, dilation_, outs)
    xp = _pad_or_crop(x, [(0, 0), (0, 0)] + pairs)
    axes = tuple(range(2 + nd, 2 + 2 * nd))
    sums = _windows(xp, kernel, stride_, dilation_).sum(axis=axes)
    if divisor_override is not None:
        divisor_override = operator.index(divisor_override)
        if divisor_override == 0:
            raise ValueError(f"{fn}: divisor_override must be nonzero")
        return _unbatched(sums / divisor_override, was_unbatched)
    # the count of each window (torch's divisor): per dim, its taps inside the input, or inside
    # the input and its padding (count_include_pad), computed from the window's position (an
    # index vector: elementwise, fused into the pooling's kernel); their product
    count: Tensor | None = None
    for a, (n, k, s, p, m) in enumerate(zip(x.shape[2:], kernel, stride_, padding_, outs)):
        start = _arange(m, x.device) * s - p
        end = minimum(start + k, n + p)
        if not count_include_pad:
            start, end = maximum(start, 0), minimum(end, n)
        per = (end - start).astype(x.dtype).reshape(*(1,) * (2 + a), m, *(1,) * (nd - a - 1))
        count = per if count is None else count * per
    assert count is not None
    return _unbatched(sums / count, was_unbatched)


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """1-d average pooling of (N, C, L) or (C, L), as torch.nn.functional.avg_pool1d (and divisor_override
    as avg_pool2d's)."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 1,
                     "avg_pool1d")


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """2-d average pooling of (N, C, H, W) or (C, H, W), as torch.nn.functional.avg_pool2d."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2,
                     "avg_pool2d")


def avg_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """3-d average pooling of (N, C, D, H, W) or (C, D, H, W), as torch.nn.functional.avg_pool3d."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3,
                     "avg_pool3d")


def _adaptive(x: Tensor, output_size: Any, nd: int, is_max: bool, fn: str) -> Tensor:
    """torch's adaptive pooling: output index i of a dim of n reads [floor(i * n / m), ceil((i + 1) * n / m)).
    Separable: per dim, a gather of each bin's (up to) kmax rows, the rows past the bin masked, reduced."""
    _check_tensor(x, fn, "input")
    x, was_unbatched = _batched(x, nd, fn)
    if not is_max and x.dtype.kind != "f":
        raise TypeError(f"{fn}: input must be floating-point, got {x.dtype}")
    sizes_in = x.shape[2:]
    outs = _adaptive_sizes(x, output_size, nd, fn)
    out = x
    for a, (n, m) in enumerate(zip(sizes_in, outs)):
        axis = 2 + a
        if n % m == 0:   # equal bins: a window view
            k = n // m
            win = _windows(out.permute(*(d for d in range(out.ndim) if d != axis), axis), (k,), (k,), (1,))
            red = win.max(axis=-1) if is_max else win.mean(axis=-1)
            out = red.permute(*range(axis), out.ndim - 1, *range(axis, out.ndim - 1))
            continue
        starts = [(i * n) // m for i in range(m)]
        ends = [-((-(i + 1) * n) // m) for i in range(m)]
        kmax = max(e - s for s, e in zip(starts, ends))
        index = np.array([[min(s + j, n - 1) for j in range(kmax)] for s in starts], dtype=np.int64)
        valid = np.array([[s + j < e for j in range(kmax)] for s, e in zip(starts, ends)])
        rows = take(out, tensor(index, device=x.device), axis=axis)       # (..., m, kmax, ...)
        mask = tensor(valid, device=x.device).reshape(m, kmax, *(1,) * (out.ndim - axis - 1))
        if is_max:
            red = where(mask, rows, _lowest(x.dtype)).max(axis=axis + 1)
        else:
            counts = np.array([e - s for s, e in zip(starts, ends)], dtype=x.dtype)
            red = (rows * mask.astype(x.dtype)).sum(axis=axis + 1) \
                / tensor(counts, device=x.device).reshape(m, *(1,) * (out.ndim - axis - 1))
        out = red
    return _unbatched(out, was_unbatched)


def _adaptive_sizes(x: Tensor, output_size: Any, nd: int, fn: str) -> tuple[int, ...]:
    items = [output_size] * nd if output_size is None or isinstance(output_size, (int, np.integer)) \
        else list(output_size)
    if len(items) != nd:
        raise ValueError(f"{fn}: output_size must be an int or a tuple of {nd} ints (None: the input's), "
                         f"got {output_size!r}")
    outs = tuple(n if m is None else operator.index(m) for m, n in zip(items, x.shape[2:]))
    if any(m < 1 for m in outs) or any(n < 1 for n in x.shape[2:]):
        raise ValueError(f"{fn}: output_size {outs} and the input's spatial sizes {x.shape[2:]} must be positive")
    return outs


def _adaptive_max_indices(x: Tensor, output_size: Any, nd: int, fn: str) -> tuple[Tensor, Tensor]:
    """adaptive max pooling with torch's indices: every bin's elements gathered (up to kmax per
    dim, those past the bin masked with the lowest value) into one trailing axis in row-major
    order, whose max and first argmax give the value and, with the bin's start, the flat index."""
    _check_tensor(x, fn, "input")
    x, was_unbatched = _batched(x, nd, fn)
    outs = _adaptive_sizes(x, output_size, nd, fn)
    cur, mask, starts_all, kmaxes = x, None, [], []
    for a, (n, m) in enumerate(zip(x.shape[2:], outs)):
        axis = 2 + 2 * a      # the earlier dims are (m, kmax) pairs now
        starts = [(i * n) // m for i in range(m)]
        ends = [-((-(i + 1) * n) // m) for i in range(m)]
        kmax = max(e - s for s, e in zip(starts, ends))
        index = np.array([[min(s + j, n - 1) for j in range(kmax)] for s in starts], dtype=np.int64)
        valid = np.array([[s + j < e for j in range(kmax)] for s, e in zip(starts, ends)])
        cur = take(cur, tensor(index.reshape(-1), device=x.device), axis=axis)
        cur = cur.reshape(*cur.shape[:axis], m, kmax, *cur.shape[axis + 1:])
        v = tensor(valid, device=x.device).reshape(*(1,) * axis, m, kmax, *(1,) * (2 * (nd - a - 1)))
        mask = v if mask is None else mask & v
        starts_all.append(np.array(starts, dtype=np.int64))
        kmaxes.append(kmax)
    assert mask is not None
    cur = where(mask, cur, _lowest(x.dtype))
    order = [0, 1] + [2 + 2 * a for a in range(nd)] + [3 + 2 * a for a in range(nd)]
    bins = cur.permute(*order).reshape(*x.shape[:2], *outs, math.prod(kmaxes))
    values = bins.max(axis=-1)
    local = bins.argmax(axis=-1)
    flat: Tensor | None = None
    for a, (n, m) in enumerate(zip(x.shape[2:], outs)):
        inner = math.prod(kmaxes[a + 1:])
        tap = (local // inner) % kmaxes[a] if a else local // inner
        start = tensor(starts_all[a], device=x.device).reshape(*(1,) * (2 + a), m, *(1,) * (nd - a - 1))
        coord = start + tap
        flat = coord if flat is None else flat * n + coord
    assert flat is not None
    return _unbatched(values, was_unbatched), _unbatched(flat.astype(np.int64), was_unbatched)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """1-d adaptive average pooling to `output_size`, as torch.nn.functional.adaptive_avg_pool1d."""
    return _adaptive(input, output_size, 1, False, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """2-d adaptive average pooling to `output_size` (an int, or a pair whose None items keep the
    input's size), as torch.nn.functional.adaptive_avg_pool2d."""
    return _adaptive(input, output_size, 2, False, "adaptive_avg_pool2d")


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """3-d adaptive average pooling to `output_size`, as torch.nn.functional.adaptive_avg_pool3d."""
    return _adaptive(input, output_size, 3, False, "adaptive_avg_pool3d")


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """1-d adaptive max pooling to `output_size` as torch.nn.functional.adaptive_max_pool1d (return_indices:
    also each bin's first maximum's index)."""
    if return_indices:
        return _adaptive_max_indices(input, output_size, 1, "adaptive_max_pool1d")
    return _adaptive(input, output_size, 1, True, "adaptive_max_pool1d")


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """2-d adaptive max pooling to `output_size`, as torch.nn.functional.adaptive_max_pool2d;
    return_indices: also the int64 flat index (h * W + w) of each bin's first maximum."""
    if return_indices:
        return _adaptive_max_indices(input, output_size, 2, "adaptive_max_pool2d")
    return _adaptive(input, output_size, 2, True, "adaptive_max_pool2d")


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """3-d adaptive max pooling to `output_size` as torch.nn.functional.adaptive_max_pool3d (return_indices:
    also each bin's first maximum's flat index)."""
    if return_indices:
        return _adaptive_max_indices(input, output_size, 3, "adaptive_max_pool3d")
    return _adaptive(input, output_size, 3, True, "adaptive_max_pool3d")


# --- interpolation --------------------------------------------------------------------------

_MODES = {"nearest": None, "nearest-exact": None, "area": None, "linear": 1, "bilinear": 2, "bicubic": 2,
          "trilinear": 3}
_CUBIC_A = -0.75
"""torch's (and OpenCV's) bicubic convolution coefficient."""


def _source_scale(n: int, m: int, scale: float | None, align_corners: bool, ftype: type) -> Any:
    """torch's area_pixel_compute_scale, in the input's float precision (ftype): the source
    step per output step."""
    if align_corners:
        return ftype((n - 1) / (m - 1)) if m > 1 else ftype(0)
    if scale is not None and scale > 0:
        return ftype(1.0 / scale)
    return ftype(n) / ftype(m)


def _nearest_index(n: int, m: int, scale: float | None, exact: bool) -> np.ndarray:
    """torch's nearest source indices (computed in float32 as torch does, so ties round alike)."""
    dst = np.arange(m)
    if not exact and m == n:
        return dst
    if not exact and m == 2 * n:
        return dst >> 1
    s = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(n) / np.float32(m)
    if exact:
        src = np.floor(((dst + 0.5) * np.float64(s)).astype(np.float32))
    else:
        src = np.floor(dst.astype(np.float32) * s)
    return np.minimum(src.astype(np.int64), n - 1)


def _linear_taps(n: int, m: int, scale: float | None, align_corners: bool,
                 dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """torch's linear interpolation per output index: (i0, i1, lambda1), in the input's precision."""
    ftype = np.float64 if dtype == np.float64 else np.float32
    s = _source_scale(n, m, scale, align_corners, ftype)
    dst = np.arange(m).astype(ftype)
    src = s * dst if align_corners else np.maximum(s * (dst + ftype(0.5)) - ftype(0.5), ftype(0))
    i0 = src.astype(np.int64)
    i1 = np.where(i0 < n - 1, i0 + 1, i0)
    lam = (src - i0.astype(ftype)).astype(ftype)
    return i0, i1, lam


def _cubic_taps(n: int, m: int, scale: float | None, align_corners: bool,
                dtype: np.dtype) -> list[tuple[np.ndarray, np.ndarray]]:
    """torch's bicubic taps per output index: four (index, weight) pairs, the source indices
    floor(x) - 1 .. floor(x) + 2 clamped into [0, n), the weights Keys' cubic convolution (a =
    -0.75) at the fraction t, in the input's precision; the source x is not clamped at 0."""
    ftype = np.float64 if dtype == np.float64 else np.float32
    s = _source_scale(n, m, scale, align_corners, ftype)
    dst = np.arange(m).astype(ftype)
    src = s * dst if align_corners else s * (dst + ftype(0.5)) - ftype(0.5)
    base = np.floor(src)
    t = (src - base).astype(ftype)
    a = ftype(_CUBIC_A)

    def near(x: np.ndarray) -> np.ndarray:     # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: np.ndarray) -> np.ndarray:      # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    weights = (far(t + 1), near(t), near(1 - t), far(2 - t))
    return [(np.clip(base.astype(np.int64) - 1 + j, 0, n - 1), w.astype(ftype)) for j, w in enumerate(weights)]


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize the spatial dims of input (N, C, *spatial; 1 to 3 of them) to `size`, or by
    `scale_factor` (then the size is floor(n * scale_factor)), as torch.nn.functional.interpolate,
    for modes 'nearest', 'nearest-exact', 'linear' (3-d input), 'bilinear' (4-d), 'bicubic' (4-d),
    'trilinear' (5-d) and 'area' (adaptive average pooling to the size); align_corners for the
    linear and cubic modes only. Each dim is a gather of source rows (and a lerp, or the four
    taps of a cubic: torch's a = -0.75 kernel, unclamped, so values may overshoot the input's)."""
    fn = "interpolate"
    _check_tensor(input, fn, "input")
    if mode not in _MODES:
        raise ValueError(f"{fn}: mode must be one of {sorted(_MODES)}, got {mode!r}")
    if antialias:
        raise ValueError(f"{fn}: antialias=True is not supported")
    nd = input.ndim - 2
    if nd < 1 or nd > 3:
        raise ValueError(f"{fn}: input must be 3-d, 4-d or 5-d (N, C, *spatial), got shape {input.shape}")
    want = _MODES[mode]
    if want is not None and want != nd:
        raise ValueError(f"{fn}: mode {mode!r} needs a {want + 2}-d input, got shape {input.shape}")
    if want is None and align_corners is not None:
        raise ValueError(f"{fn}: align_corners only has an effect with the linear and cubic modes, not mode={mode!r}")
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{fn}: exactly one of size and scale_factor must be given, got size={size!r}, "
                         f"scale_factor={scale_factor!r}")
    spatial = input.shape[2:]
    scales: list[float | None]
    if size is not None:
        outs = _ints(size, nd, fn, "size", 1) if not isinstance(size, (tuple, list)) or len(size) == nd \
            else None
        if outs is None:
            raise ValueError(f"{fn}: size must be an int or a tuple of {nd} ints for input of shape "
                             f"{input.shape}, got {size!r}")
        scales = [None] * nd
    else:
        items = list(scale_factor) if isinstance(scale_factor, (tuple, list)) else [scale_factor] * nd
        if len(items) != nd:
            raise ValueError(f"{fn}: scale_factor must be a number or a tuple of {nd} numbers for input of shape "
                             f"{input.shape}, got {scale_factor!r}")
        try:
            factors = [float(f) for f in items]
        except (TypeError, ValueError):
            raise TypeError(f"{fn}: scale_factor must be a number or a tuple of numbers, got {scale_factor!r}") \
                from None
        if any(not f > 0 or not math.isfinite(f) for f in factors):
            raise ValueError(f"{fn}: scale_factor must be positive and finite, got {scale_factor!r}")
        outs = tuple(int(math.floor(n * f)) for n, f in zip(spatial, factors))
        if any(m < 1 for m in outs):
            raise ValueError(f"{fn}: scale_factor {scale_factor!r} makes an empty output {outs} from input "
                             f"of shape {input.shape}")
        scales = [None] * nd if recompute_scale_factor else list(factors)
    if (want is not None or mode == "area") and input.dtype.kind != "f":
        raise TypeError(f"{fn}: mode {mode!r} needs a floating-point input, got {input.dtype}")
    if mode == "area":   # torch's: adaptive average pooling to the output size
        return _adaptive(input, outs, nd, False, fn)
    # one gather per corner of the source cell (2 ** nd for the linear modes, 1 for nearest) from
    # the flattened spatial dims, at flat indices (and with weights) that are broadcast sums (and
    # products) of per-dim host vectors: the whole resize is one kernel reading the input
    flat = input.reshape(*input.shape[:2], math.prod(spatial))
    inner = [math.prod(spatial[a + 1:]) for a in range(nd)]

    def along(values: np.ndarray, a: int) -> Tensor:
        """A per-dim host vector as a tensor broadcasting along output dim a."""
        return tensor(values, device=input.device).reshape(*(1,) * a, -1, *(1,) * (nd - a - 1))

    if want is None:
        index: Tensor | None = None
        for a, (n, m, scale) in enumerate(zip(spatial, outs, scales)):
            term = along(_nearest_index(n, m, scale, mode == "nearest-exact") * inner[a], a)
            index = term if index is None else index + term
        assert index is not None
        return take(flat, index, axis=2)
    taps: list[list[tuple[np.ndarray, np.ndarray]]] = []
    for n, m, scale in zip(spatial, outs, scales):
        if mode == "bicubic":
            taps.append(_cubic_taps(n, m, scale, bool(align_corners), input.dtype))
        else:
            i0, i1, lam = _linear_taps(n, m, scale, bool(align_corners), input.dtype)
            taps.append([(i0, 1 - lam), (i1, lam)])
    out: Tensor | None = None
    for corner in np.ndindex(*(len(t) for t in taps)):
        index = weight = None
        for a, (j, per_dim) in enumerate(zip(corner, taps)):
            i_term = along(per_dim[j][0] * inner[a], a)
            w_term = along(per_dim[j][1].astype(input.dtype), a)
            index = i_term if index is None else index + i_term
            weight = w_term if weight is None else weight * w_term
        assert index is not None and weight is not None
        term = take(flat, index, axis=2) * weight
        out = term if out is None else out + term
    assert out is not None
    return out
