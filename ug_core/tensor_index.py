"""The Tensor's movement and basic indexing (numpy's views: reshape, permute/transpose,
broadcast_to, squeeze, expand_dims, x[1:3, None, ..., 2]) and its writes (assign, x[idx] = v).
Indexing with integer arrays or boolean masks is a gather or scatter: array_api/methods.py's
__getitem__ and __setitem__ send such an index to array_api.indexing / array_api.scatter, and the
others here."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from . import dtypes, graph, scalars
from .graph import Node
from .shapes import broadcast_node, normalize_axes, normalize_axis, shape_arg
from .tensor import Tensor, tensor
from .view import View, prod as product


# --- movement (views: numpy's, see TensorView) ------------------------------------------------


def reshape(self: Tensor, *shape: Any) -> Tensor:
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = tuple(shape[0])
    try:
        dims = [operator.index(s) for s in shape]
    except TypeError as e:
        raise TypeError(f"reshape takes ints, got {shape!r}") from e
    if dims.count(-1) > 1:
        raise ValueError(f"can only specify one unknown dimension (-1) in reshape {tuple(dims)}")
    if -1 in dims:
        known = product([d for d in dims if d != -1])
        if known == 0 or self.size % known:
            raise ValueError(f"cannot reshape tensor of shape {self.shape} into shape {tuple(dims)}")
        dims[dims.index(-1)] = self.size // known
    new = tuple(dims)
    if any(d < 0 for d in new) or product(new) != self.size:
        raise ValueError(f"cannot reshape tensor of shape {self.shape} (size {self.size}) into shape {new}")
    return self._view(View.contiguous(new))


def permute(self: Tensor, *axes: Any) -> Tensor:
    if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
        axes = tuple(axes[0])
    if len(axes) != self.ndim:
        raise ValueError(f"permute needs {self.ndim} axes for shape {self.shape}, got {axes}")
    norm = tuple(normalize_axis(a, self.ndim) for a in axes)
    if sorted(norm) != list(range(self.ndim)):
        raise ValueError(f"{axes} is not a permutation of the axes of shape {self.shape}")
    return self._view(View.contiguous(self.shape).permute(norm))


def transpose(self: Tensor, *axes: Any) -> Tensor:
    return self.permute(*axes) if axes else self.permute(tuple(reversed(range(self.ndim))))


def broadcast_to(self: Tensor, shape: Any) -> Tensor:
    shape = shape_arg(shape)
    if len(shape) < self.ndim or any(s != 1 and s != t for s, t in zip(self.shape, shape[len(shape) - self.ndim:])):
        raise ValueError(f"cannot broadcast tensor of shape {self.shape} to shape {shape}")
    pad = (1,) * (len(shape) - self.ndim)
    # numpy's broadcast_to: a read-only view (several indices share one element)
    return self._view(View.contiguous(pad + self.shape).expand(shape), writeable=False)


def squeeze(self: Tensor, axis: Any = None) -> Tensor:
    if axis is None:
        axes = tuple(d for d, s in enumerate(self.shape) if s == 1)
    else:
        axes = normalize_axes(axis, self.ndim)
        bad = [a for a in axes if self.shape[a] != 1]
        if bad:
            raise ValueError(f"cannot squeeze axis {bad[0]} of shape {self.shape}: its size is not 1")
    return self.reshape(tuple(s for d, s in enumerate(self.shape) if d not in axes))


def expand_dims(self: Tensor, axis: Any) -> Tensor:
    items = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    ndim = self.ndim + len(items)
    axes = normalize_axes(items, ndim)
    it = iter(self.shape)
    return self.reshape(tuple(1 if d in axes else next(it) for d in range(ndim)))


def unsqueeze(self: Tensor, axis: int) -> Tensor:
    return self.expand_dims(axis)


def flatten(self: Tensor) -> Tensor:
    """The elements in row-major order, 1-d: a new value (numpy's flatten copies; reshape(-1)
    is the view)."""
    return Tensor(self.reshape(-1)._node)


def ravel(self: Tensor, order: str = "C") -> Tensor:
    """numpy's ravel: reshape(-1) (dask's argmax calls it on chunks); order "C", or "K"/"A" (the
    memory order, which is C for a ug tensor's value; cubed's groupby passes "A"), never "F"."""
    if order not in ("C", "K", "A"):
        raise ValueError(f"ravel: order must be 'C', 'K' or 'A' (ug tensors are row-major), got {order!r}")
    return self.reshape(-1)


# --- basic indexing ------------------------------------------------------------------------


def _index_view(shape: tuple[int, ...], index: Any) -> View:
    """The View that basic indexing (ints, slices with any nonzero step, None, Ellipsis) selects."""
    if not isinstance(index, tuple):
        index = (index,)
    # one pass: the items' types checked (slices and ints, the common ones, first), the ellipses
    # and the indexed dims counted
    used, ellipses, at = 0, 0, -1
    for k, item in enumerate(index):
        kind = type(item)
        if kind is slice or kind is int:
            used += 1
            continue
        if item is None:
            continue
        if item is Ellipsis:
            ellipses += 1
            at = k if at < 0 else at
            continue
        if isinstance(item, (Tensor, np.ndarray, list)) or isinstance(item, bool):
            raise TypeError(f"indexing with {type(item).__name__} is not supported here; use ints, slices, None and ...")
        if not isinstance(item, (slice, int, np.integer)):
            raise TypeError(f"invalid index {item!r}: use ints, slices, None and ...")
        used += 1
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if used > len(shape):
        raise IndexError(f"too many indices for tensor of shape {shape}: {used} were indexed")
    if at >= 0:
        index = index[:at] + (slice(None),) * (len(shape) - used) + index[at + 1:]
    elif used < len(shape):
        index = index + (slice(None),) * (len(shape) - used)
    view = View.contiguous(shape)
    out_shape: list[int] = []
    out_strides: list[int] = []
    offset = 0
    dim = 0
    for item in index:
        if item is None:
            out_shape.append(1)
            out_strides.append(0)
            continue
        size, stride = view.shape[dim], view.strides[dim]
        if isinstance(item, slice):
            if item.step is not None and operator.index(item.step) == 0:
                raise ValueError("slice step cannot be zero")
            start, stop, step = item.indices(size)
            n = len(range(start, stop, step))
            if n:
                offset += start * stride
            out_shape.append(n)
            out_strides.append(stride * step)
        else:
            i = operator.index(item)
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for axis {dim} with size {size}")
            offset += (i % size) * stride
        dim += 1
    return View(tuple(out_shape), tuple(out_strides), offset)


def _indexes_every_dim(index: Any) -> bool:
    """Whether a basic index gives an integer for every dimension (no slice, None or ...)."""
    items = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in items)


def basic_getitem(self: Tensor, index: Any) -> Tensor:
    """x[index] for ints, slices, None and ...: a view (numpy's), or the element for an integer
    per dimension."""
    v = _index_view(self.shape, index)
    if not v.shape and _indexes_every_dim(index):
        # numpy: an integer for every dimension (or () of a 0-d array) gives the element, a
        # copy (x[0, ...] and x[...] are views)
        return Tensor(graph.view(self._node, v))
    return self._view(v)


def basic_setitem(self: Tensor, index: Any, value: Any) -> None:
    """x[index] = value for ints, slices, None and ...: a write of that region."""
    region = _index_view(self.shape, index)
    self._write(_value_for(self, value, region.shape), region)


# --- writes ----------------------------------------------------------------------------------


def assign(self: Tensor, value: Any) -> Tensor:
    """Give this tensor a new value (same shape and dtype). Later reads of this tensor (and
    of its views) see it; values computed from it before do not."""
    self._write(_value_for(self, value, self.shape), None)
    return self


def _value_for(self: Tensor, value: Any, shape: tuple[int, ...]) -> Node:
    if isinstance(value, Tensor):
        if value.device != self.device:
            raise ValueError(f"cannot assign a tensor on {value.device!r} to a tensor on {self.device!r}")
        node = value._node
    elif dtypes.is_scalar(value):
        # numpy's `a[i] = v`: the value must fit (an OverflowError, not a wrapped value); a
        # kernel argument unless it folds
        node = scalars.scalar(dtypes.written(value, self.dtype), self.dtype, self.device)
    else:
        node = written_array(value, self.dtype, self.device)._node
    if not all(s == 1 or s == t for s, t in zip(node.shape[::-1], shape[::-1])) or len(node.shape) > len(shape):
        raise ValueError(f"cannot assign a value of shape {node.shape} to a region of shape {shape}")
    return broadcast_node(graph.cast(node, self.dtype), shape)


def written_array(value: Any, dtype: np.dtype, device: str) -> Tensor:
    """The tensor of a non-scalar value written into a tensor of `dtype`: nested Python numbers
    become `dtype` directly, as numpy's `a[:2] = [v, w]` (exactly: a float64 tensor's 0.1 is not
    rounded through ug's float32 default, and an int it cannot hold is an OverflowError); an
    array keeps its dtype (the write casts it, as numpy's)."""
    if isinstance(value, (list, tuple)) and not any(isinstance(v, Tensor) for v in value):
        try:
            value = np.asarray(value, dtype=dtype)
        except ValueError as e:
            raise ValueError(f"cannot write a ragged nested sequence: {e}") from e
    return tensor(value, device=device)
