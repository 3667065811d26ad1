"""Pooling (torch.nn.functional's max, average, adaptive pooling and max_unpool), over window
views of the input (windows.py).

- Pooling: max is a max reduction over the window axes of the view of the input padded with
  -inf; average a sum over them divided by the window's count (itself a window sum of ones,
  lazily, so nothing is computed on the host).
- Adaptive pooling: per dim, equal bins are a window view; unequal ones a gather of each bin's
  rows, those past the bin masked, reduced.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from .. import graph
from ..array_api.creation import arange
from ..array_api.indexing import take, take_along_axis
from ..array_api.scatter import scatter
from ..autodiff import define_vjp
from ..tensor import Tensor, tensor
from ..tensor_arith import maximum, minimum, where
from .windows import _batched, _check_tensor, _ints, _pad_or_crop, _unbatched, _windows

__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d",
           "max_pool2d", "max_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d"]


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
