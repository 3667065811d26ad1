"""numpy's names beside the standard's, for libraries written against numpy that call them on an
array's namespace (xarray's duck_array_ops calls `xp.transpose(a, axes)` and
`xp.lib.stride_tricks.sliding_window_view(a, window, axis)` on any namespace whose dtypes are
numpy's; cubed calls `nxp.broadcast_shapes`, `nxp.nansum` and `nxp.isin` on its backend's):
`ug_core.transpose`, `ug_core.lib.stride_tricks.sliding_window_view`, `ug_core.broadcast_shapes`,
`ug_core.nansum`, `ug_core.isin`. numpy's own
functions of these names, called on tensors, run them too (numpy_interop)."""

from __future__ import annotations

import operator
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..shapes import normalize_axis
from ..tensor import Tensor
from ..view import View, contiguous_strides
from ._common import check_tensor
from .creation import asarray
from .elementwise import isnan
from .manipulation import permute_dims, reshape
from .statistical import sum as xp_sum
from .utility import any as any_
from ..tensor_arith import where


def transpose(x: Tensor, /, axes: Any = None) -> Tensor:
    """numpy's transpose: permute_dims(x, axes), the axes reversed when None."""
    check_tensor(x, "transpose")
    return permute_dims(x, tuple(range(x.ndim))[::-1] if axes is None else tuple(axes))


def sliding_window_view(x: Tensor, /, window_shape: Any, axis: Any = None, *, subok: bool = False,
                        writeable: bool = False) -> Tensor:
    """numpy's sliding_window_view: every window of `window_shape` along `axis` (all axes when
    None), the window's dims appended, as one strided view of x (no copy: windows overlap;
    read-only, as numpy's by default)."""
    check_tensor(x, "sliding_window_view")
    if writeable:
        raise ValueError("sliding_window_view: writeable windows are not supported (they overlap)")
    windows = (window_shape,) if isinstance(window_shape, int) else tuple(window_shape)
    windows = tuple(operator.index(w) for w in windows)
    if any(w < 0 for w in windows):
        raise ValueError("`window_shape` cannot contain negative values")
    if axis is None:
        if len(windows) != x.ndim:
            raise ValueError(f"Since axis is `None`, must provide window_shape for all dimensions of `x`; got "
                             f"{len(windows)} window_shape elements and `x.ndim` is {x.ndim}.")
        axes: tuple[int, ...] = tuple(range(x.ndim))
    else:
        items = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = tuple(normalize_axis(a, x.ndim) for a in items)
        if len(windows) != len(axes):
            raise ValueError(f"Must provide matching length window_shape and axis; got {len(windows)} "
                             f"window_shape elements and {len(axes)} axes elements.")
    shape = list(x.shape)
    for a, w in zip(axes, windows):
        if shape[a] < w:
            raise ValueError("window shape cannot be larger than input array shape")
        shape[a] -= w - 1
    strides = contiguous_strides(x.shape)
    view = View(tuple(shape) + windows, strides + tuple(strides[a] for a in axes))
    return x._view(view, writeable=False)


# numpy's module path of it, as xarray looks it up on a namespace
lib = SimpleNamespace(stride_tricks=SimpleNamespace(sliding_window_view=sliding_window_view))

def broadcast_shapes(*shapes: Any) -> tuple[int, ...]:
    """numpy's broadcast_shapes: the shape that arrays of `shapes` broadcast to (a ValueError
    naming them when they do not)."""
    return tuple(int(n) for n in np.broadcast_shapes(*shapes))


def nansum(x: Tensor, /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Tensor:
    """numpy's nansum: the sum with NaNs counted as zero (an all-NaN slice sums to 0)."""
    check_tensor(x, "nansum")
    filled = where(isnan(x), 0, x) if x.dtype.kind in "fc" else x
    return xp_sum(filled, axis=axis, dtype=dtype, keepdims=keepdims)


def isin(element: Tensor, test_elements: Any, /, *, invert: bool = False) -> Tensor:
    """numpy's isin: whether each element of `element` is among `test_elements` (a bool tensor of
    element's shape); each element compared with every test element, one fused kernel."""
    check_tensor(element, "isin")
    tests = test_elements if isinstance(test_elements, Tensor) else asarray(test_elements, device=element.device)
    found = any_(element[..., None] == reshape(tests, (1,) * element.ndim + (-1,)), axis=-1)
    return ~found if invert else found


__all__ = ["broadcast_shapes", "isin", "lib", "nansum", "transpose"]
