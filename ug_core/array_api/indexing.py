"""Indexing functions of the Array API standard (take, take_along_axis) and numpy's
integer-array indexing (`x[idx]`, `x[:, idx]`, `x[i, j]`), all on one primitive: a gather
(ops.Op.GATHER), a load at an element computed in the kernel. The gather fuses into its
consumer and its index producer (`emb[ids] * scale` is one kernel); its source is a buffer
(a computed source is realized first, as a matmul's operands are).

Indices: negative ones count from the end (numpy's). An index given as a numpy array, a list
or an int is checked here: out of range is an IndexError naming it. An index given as a ug
tensor is not read (that would wait for the device): it is clamped into range in the kernel,
so an out-of-range index reads the first or last element and never outside the tensor.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from .. import dtypes, graph
from ..shapes import broadcast_node, broadcast_shape, normalize_axis
from ..tensor import Tensor, tensor, tracing, values_for_shape
from ..tensor_io import realize
from ..tensor_arith import maximum, minimum, where
from ..view import View
from ._common import check_tensor

__all__ = ["take", "take_along_axis"]

_ALL = slice(None)


def take(x: Tensor, indices: Any, /, *, axis: int | None = None) -> Tensor:
    """The elements of x at `indices` along `axis` (numpy's take: the result's shape is
    x.shape[:axis] + indices.shape + x.shape[axis + 1:]); axis=None takes from the flattened x."""
    check_tensor(x, "take")
    if axis is None:
        if x.ndim > 1:
            x = x.reshape(-1)
        axis = 0
    if x.ndim == 0:
        raise ValueError("take: x must have at least one dimension")
    axis = normalize_axis(axis, x.ndim)
    index = _index_tensor(indices, x.shape[axis], x.device, f"take: axis {axis} of x")
    return _take(x, index, axis)


def take_along_axis(x: Tensor, indices: Any, /, *, axis: int = -1) -> Tensor:
    """out[..., j, ...] = x[..., indices[..., j, ...], ...] along `axis` (x and indices have one
    rank and broadcast against each other off that axis; the result has indices' size on it)."""
    check_tensor(x, "take_along_axis")
    if x.ndim == 0:
        raise ValueError("take_along_axis: x must have at least one dimension")
    axis = normalize_axis(axis, x.ndim)
    index = _index_tensor(indices, x.shape[axis], x.device, f"take_along_axis: axis {axis} of x")
    if index.ndim != x.ndim:
        raise ValueError(f"take_along_axis: indices (shape {index.shape}) must have x's rank {x.ndim} (shape {x.shape})")
    try:
        shape = list(broadcast_shape(tuple(s for d, s in enumerate(x.shape) if d != axis),
                                      tuple(s for d, s in enumerate(index.shape) if d != axis)))
    except ValueError:
        raise ValueError(f"take_along_axis: x (shape {x.shape}) and indices (shape {index.shape}) do not "
                         f"broadcast off axis {axis}") from None
    out_shape = tuple(shape[:axis] + [index.shape[axis]] + shape[axis:])
    src_shape = tuple(shape[:axis] + [x.shape[axis]] + shape[axis:])
    return _gather(x.broadcast_to(src_shape), index.broadcast_to(out_shape), axis)


def getitem(x: Tensor, index: tuple[Any, ...]) -> Tensor:
    """numpy's advanced indexing where some items of `index` are integer arrays (ug tensors,
    numpy arrays or lists; ints among them count as 0-d arrays): basic indexing by the other
    items, then one gather over the array-indexed dims. The arrays broadcast to one shape B,
    which replaces those dims where they are adjacent, else comes first (numpy's rule)."""
    if len(index) == 1 and is_mask(index[0]) and _ndim(index[0]) == 0:   # numpy's: a new axis, of 1 or 0
        keep = bool(values_for_shape(index[0], "indexing with a boolean mask")) if isinstance(index[0], Tensor) \
            else bool(index[0])
        return x[None] if keep else x[None][0:0]
    masks = [i for i in index if isinstance(i, Tensor) and i.dtype == dtypes.BOOL]
    if masks and not tracing():
        # the masks are read on the host and x's value is the gather's source: one schedule
        # computes both (a mask computed from x, `x[x > 0]`, would otherwise compute x twice)
        realize(x, *masks)
    index = _expand_ellipsis(x.ndim, expand_masks(index, x.shape, x.device))
    basic: list[Any] = []
    arrays: list[tuple[int, Any]] = []   # (dim of the basic view, the index array)
    dim = 0
    for item in index:
        if item is None:
            basic.append(None)
            dim += 1
        elif isinstance(item, slice):
            basic.append(item)
            dim += 1
        else:   # an array or an int: an advanced index of this dim
            basic.append(slice(None))
            arrays.append((dim, item))
            dim += 1
    # (an index of arrays and full slices only, the common case, views all of x: no view to build)
    view = x if all(b == _ALL for b in basic) else x[tuple(basic)]
    dims = [d for d, _ in arrays]
    sizes = [view.shape[d] for d in dims]
    checked = [_checked_index(item, n, x.device, f"index {k} of a tensor of shape {x.shape}")
               for k, ((d, item), n) in enumerate(zip(arrays, sizes))]
    parts = [p for p, _ in checked]
    try:
        common = broadcast_shape(*(p.shape for p in parts))
    except ValueError:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together with shapes "
                         + " ".join(str(p.shape) for p in parts)) from None
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    at = dims[0] if adjacent else 0
    rest = [d for d in range(view.ndim) if d not in dims]
    order = rest[:at] + dims + rest[at:]
    moved = view.permute(*order) if order != list(range(view.ndim)) else view
    lead, trail = moved.shape[:at], moved.shape[at + len(dims):]
    flat = moved.reshape(*lead, math.prod(sizes), *trail) if len(dims) > 1 else moved
    # one linear index over the indexed dims (row-major), each part wrapped and clamped first
    # (clamping only the sum could read another row's element)
    linear = parts[0]   # (one array: the gather wraps and clamps it)
    if len(parts) > 1:
        linear = _wrapped(*checked[0], sizes[0])
        for (p, in_range), n in zip(checked[1:], sizes[1:]):
            linear = linear * n + _wrapped(p, in_range, n)
    return _take(flat, linear if linear.shape == common else linear.broadcast_to(common), at)


# --- the gather -------------------------------------------------------------------------------


def _take(x: Tensor, index: Tensor, axis: int) -> Tensor:
    """x.shape[:axis] + index.shape + x.shape[axis + 1:] (numpy's take of an int tensor)."""
    k = index.ndim
    if k == 0:
        return _take(x, index.reshape(1), axis).reshape(*x.shape[:axis], *x.shape[axis + 1:])
    pre, post = x.shape[:axis], x.shape[axis + 1:]
    out_shape = pre + index.shape + post
    n = x.shape[axis]
    # x with size-1 dims for index's leading dims, broadcast: the gathered axis is index's last
    # (built on the nodes: the shapes are right by construction, and these views are internal)
    src = x._node
    if k > 1:
        src = broadcast_node(graph.view(src, View.contiguous(pre + (1,) * (k - 1) + (n,) + post)),
                             pre + index.shape[:-1] + (n,) + post)
    at = index._node
    if pre or post:
        at = broadcast_node(graph.view(at, View.contiguous((1,) * len(pre) + index.shape + (1,) * len(post))), out_shape)
    return _gather_nodes(src, at, axis + k - 1)


def _gather(src: Tensor, index: Tensor, axis: int) -> Tensor:
    return _gather_nodes(src._node, index._node, axis)


def _gather_nodes(src: graph.Node, index: graph.Node, axis: int) -> Tensor:
    if math.prod(index.shape) and src.shape[axis] == 0:
        raise IndexError(f"cannot index into axis {axis} of size 0 (tensor of shape {src.shape})")
    if math.prod(index.shape) == 0:  # nothing to read
        return Tensor(graph.const(0, src.dtype, src.device, index.shape))
    return Tensor(graph.gather(src, index, axis))


def _wrapped(index: Tensor, in_range: bool, n: int) -> Tensor:
    """index + n where negative, clamped into [0, n) (the gather clamps its own index too);
    `in_range`: known to be in [0, n) already (checked on the host)."""
    if in_range:
        return index
    if index.dtype.kind == "u":
        return index if n - 1 >= np.iinfo(index.dtype).max else minimum(index, n - 1)
    wide = index.astype(dtypes.to_dtype("int64")) if index.dtype.itemsize < 8 else index
    return minimum(maximum(where(wide < 0, wide + n, wide), 0), n - 1)


def _index_tensor(indices: Any, n: int, device: str, where: str) -> Tensor:
    """`indices` as an integer tensor on `device`; values known here (numpy, lists, ints) are
    checked against the axis size `n` and wrapped (see `in_range`)."""
    index, _ = _checked_index(indices, n, device, where)
    return index


def _checked_index(indices: Any, n: int, device: str, where: str) -> tuple[Tensor, bool]:
    """(`indices` as an integer tensor on `device`, whether its values are known to be in
    [0, n)): values known here (numpy, lists, ints) are checked and wrapped, a tensor's are not."""
    if isinstance(indices, Tensor):
        if indices.dtype.kind not in "iu":
            raise IndexError(f"{where}: indices must be integers, got a tensor of {indices.dtype.name}")
        if indices.device != device:
            raise ValueError(f"{where}: indices are on {indices.device!r}, the tensor on {device!r}")
        return indices, False
    if isinstance(indices, (int, np.integer)) and not isinstance(indices, bool):
        known = np.asarray(operator.index(indices), dtype=np.int64)
    else:
        known = np.asarray(indices)
        if known.size == 0 and known.dtype.kind == "f":   # [] is an empty index list
            known = known.astype(np.int64)
        if known.dtype.kind not in "iu":
            raise IndexError(f"{where}: indices must be integers, got {known.dtype.name}")
    if known.size:
        low, high = int(known.min()), int(known.max())
        if low < -n or high >= n:
            bad = low if low < -n else high
            raise IndexError(f"{where}: index {bad} is out of bounds for size {n}")
    small = known.size == 0 or (int(known.min()) >= -(2**31) and int(known.max()) < 2**31)
    wrapped = np.where(known < 0, known + n, known) if known.dtype.kind == "i" else known
    return tensor(wrapped.astype(np.int32 if small else np.int64), device=device), True


def _ndim(item: Any) -> int:
    """An index item's rank, without reading a tensor's values (np.ndim would)."""
    return item.ndim if isinstance(item, Tensor) else int(np.ndim(item))


def is_mask(item: Any) -> bool:
    """A boolean array index (a tensor, numpy array or list of bools)."""
    if isinstance(item, Tensor):
        return item.dtype == dtypes.BOOL
    if isinstance(item, (np.ndarray, list)):
        return np.asarray(item).dtype == np.bool_
    return False


def expand_masks(index: tuple[Any, ...], shape: tuple[int, ...], device: str) -> tuple[Any, ...]:
    """`index` (into a tensor of `shape`) with each boolean mask replaced by its nonzero() index
    vectors (numpy's rule: a k-d mask indexes k dims, whose sizes it must have, or 0). Which elements a
    mask selects depends on its values: it is read on the host here (a tensor's is realized first)."""
    if not any(is_mask(i) for i in index):
        return index
    used = sum(_ndim(i) if is_mask(i) else 0 if i is None or i is Ellipsis else 1 for i in index)
    out: list[Any] = []
    dim = 0
    for item in index:
        if item is Ellipsis:
            dim += len(shape) - used
        if not is_mask(item):
            out.append(item)
            dim += 0 if item is None or item is Ellipsis else 1
            continue
        k = _ndim(item)
        if k == 0:
            raise IndexError("a 0-d boolean index is not supported beside other indices")
        # (a mask dim of 0 selects nothing whatever the axis's size: numpy's and the standard's rule)
        mask_shape = tuple(item.shape if isinstance(item, Tensor) else np.shape(item))
        if len(shape[dim:dim + k]) != k or not all(m in (s, 0) for m, s in zip(mask_shape, shape[dim:dim + k])):
            raise IndexError(f"boolean index of shape {tuple(np.shape(item) if not isinstance(item, Tensor) else item.shape)} "
                             f"does not match the indexed dims {tuple(shape[dim:dim + k])} of a tensor of shape {shape}")
        dim += k
        mask = values_for_shape(item, "indexing with a boolean mask") if isinstance(item, Tensor) else np.asarray(item)
        small = mask.size < 2**31   # (int32 indices: half the bytes to copy to the device)
        # as tensors: in range by construction, so not checked again on the host
        out.extend(tensor(i.astype(np.int32) if small else i, device=device) for i in np.nonzero(mask))
    return tuple(out)


def _expand_ellipsis(ndim: int, index: tuple[Any, ...]) -> tuple[Any, ...]:
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > ndim:
        raise IndexError(f"too many indices for a tensor of {ndim} dimensions: {used} were indexed")
    at = next((k for k, i in enumerate(index) if i is Ellipsis), None)
    if at is not None:
        return index[:at] + (slice(None),) * (ndim - used) + index[at + 1:]
    return index + (slice(None),) * (ndim - used)
