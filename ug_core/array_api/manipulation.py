"""Manipulation functions of the Array API standard, as views (no copies).

`flip` and negative-step slices are views with negative strides; `concat` (and `stack`,
`roll`, `pad`'s edge and reflect modes built on it) lays its inputs end to end as masked views
(view.View.mask: each input padded with invalid indices to the result's shape) and selects,
per element, the one whose mask holds: a consumer of the result fuses all of it into its own
kernel, and each element is loaded from one input only. `tile` and `repeat` are broadcasts
read through a reshape."""

from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from .. import dtypes, graph
from ..shapes import broadcast_shape, normalize_axis
from ..tensor import Tensor, TensorView, full, values_for_shape
from ..tensor_arith import where
from ..view import View
from ._common import check_tensor, shape_tuple
from .indexing import take
from .data_types import result_type


def _axis(axis: Any, ndim: int) -> int:
    return normalize_axis(axis, ndim)


def permute_dims(x: Tensor, /, axes: tuple[int, ...]) -> Tensor:
    return check_tensor(x, "permute_dims").permute(tuple(axes))


def expand_dims(x: Tensor, /, axis: int | tuple[int, ...] = 0) -> Tensor:
    """x with a size-1 axis inserted at `axis` (in [-x.ndim - 1, x.ndim]); a tuple of axes (numpy's,
    which cubed's indexing passes) names where each new axis is in the result."""
    check_tensor(x, "expand_dims")
    if not isinstance(axis, tuple):
        return x.expand_dims(_axis(axis, x.ndim + 1))
    ndim = x.ndim + len(axis)
    where = sorted(_axis(a, ndim) for a in axis)
    if len(set(where)) != len(where):
        raise ValueError(f"expand_dims: repeated axis in {axis} (for a result of {ndim} dims)")
    for a in where:   # ascending: each insertion leaves the later positions as the result numbers them
        x = x.expand_dims(a)
    return x


def squeeze(x: Tensor, /, axis: int | tuple[int, ...] | None = None) -> Tensor:
    """x without the size-1 axes `axis`; numpy's default axis=None (cubed's groupby) drops every
    size-1 axis."""
    return check_tensor(x, "squeeze").squeeze(axis)


def broadcast_to(x: Tensor, /, shape: tuple[int, ...]) -> Tensor:
    return check_tensor(x, "broadcast_to").broadcast_to(shape_tuple(shape, "broadcast_to"))


def broadcast_arrays(*arrays: Tensor) -> list[Tensor]:
    for i, a in enumerate(arrays):
        check_tensor(a, "broadcast_arrays", f"arrays[{i}]")
    if not arrays:
        return []
    shape = broadcast_shape(*(a.shape for a in arrays))
    return [a.broadcast_to(shape) for a in arrays]


def reshape(x: Tensor, /, shape: tuple[int, ...], *, copy: bool | None = None) -> Tensor:
    """x in a new shape, as numpy's: a view of x where one strided window on x's elements does it
    (always, for a tensor that is not itself a view), else a new value; copy=True always gives a
    new value, copy=False raises ValueError where one strided window cannot do it."""
    check_tensor(x, "reshape")
    out = x.reshape(shape_tuple(shape, "reshape"))
    if copy:
        return Tensor(out.node)
    if copy is False and not isinstance(out, TensorView):
        raise ValueError(f"reshape(copy=False): this view of shape {x.shape} cannot be read as shape {out.shape} "
                         f"through one strided window on its base's elements; a copy is needed")
    return out


def _axes_list(axes: Any, ndim: int, fn: str) -> list[int]:
    items = [axes] if isinstance(axes, (int, np.integer)) else list(axes)
    out = [_axis(a, ndim) for a in items]
    if len(set(out)) != len(out):
        raise ValueError(f"{fn}: repeated axis in {axes!r}")
    return out


def moveaxis(x: Tensor, source: int | tuple[int, ...], destination: int | tuple[int, ...], /) -> Tensor:
    check_tensor(x, "moveaxis")
    src = _axes_list(source, x.ndim, "moveaxis")
    dst = _axes_list(destination, x.ndim, "moveaxis")
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source!r} and destination {destination!r} differ in length")
    order = [d for d in range(x.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return x.permute(tuple(order))


def unstack(x: Tensor, /, *, axis: int = 0) -> tuple[Tensor, ...]:
    """The slices of x along `axis` (views)."""
    check_tensor(x, "unstack")
    if x.ndim == 0:
        raise ValueError("unstack: needs at least 1 dimension, got a 0-d tensor")
    a = _axis(axis, x.ndim)
    return tuple(x[(slice(None),) * a + (i,)] for i in range(x.shape[a]))


def _repeat_along(x: Tensor, axis: int, times: int, inner: bool) -> Tensor:
    """x repeated `times` along `axis`: each element (inner=True, `repeat`) or the whole axis
    (inner=False, `tile`), as a broadcast of a new size-1 axis, then a reshape."""
    at = axis + 1 if inner else axis
    spread = x.expand_dims(at)
    target = spread.shape[:at] + (times,) + spread.shape[at + 1:]
    shape = x.shape[:axis] + (x.shape[axis] * times,) + x.shape[axis + 1:]
    return spread.broadcast_to(target).reshape(shape)


def _count(value: Any, fn: str) -> int:
    try:
        n = operator.index(value)
    except TypeError as e:
        raise TypeError(f"{fn}: repetitions must be ints, got {value!r}") from e
    if n < 0:
        raise ValueError(f"{fn}: repetitions must be non-negative, got {n}")
    return n


def tile(x: Tensor, repetitions: tuple[int, ...], /) -> Tensor:
    check_tensor(x, "tile")
    reps = [_count(r, "tile") for r in repetitions]
    ndim = max(len(reps), x.ndim)
    out = x.reshape((1,) * (ndim - x.ndim) + x.shape)
    reps = [1] * (ndim - len(reps)) + reps
    for axis, r in enumerate(reps):
        if r != 1:
            out = _repeat_along(out, axis, r, inner=False)
    return out


def repeat(x: Tensor, repeats: int | Tensor, /, *, axis: int | None = None) -> Tensor:
    """Each element repeated `repeats` times: an int, or per element a tensor (or sequence) of
    counts along `axis`, whose values make the shape: they are read on the host (a sync), and
    the result is a gather of x at the repeated positions."""
    check_tensor(x, "repeat")
    if isinstance(repeats, Tensor) and (repeats.ndim != 0 or repeats.size != 1):
        return _repeat_each(x, values_for_shape(repeats, "repeat with per-element repeats"), axis)
    if isinstance(repeats, (list, tuple, np.ndarray)):
        return _repeat_each(x, np.asarray(repeats), axis)
    if isinstance(repeats, Tensor):
        repeats = int(repeats)
    n = _count(repeats, "repeat")
    if axis is None:
        return _repeat_along(x.reshape(-1), 0, n, inner=True)
    return _repeat_along(x, _axis(axis, x.ndim), n, inner=True)


def _repeat_each(x: Tensor, counts: np.ndarray, axis: int | None) -> Tensor:
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = _axis(axis, x.ndim)
    n = x.shape[axis]
    if counts.dtype.kind not in "iu" or counts.ndim != 1 or counts.shape[0] not in (1, n):
        raise ValueError(f"repeat: repeats must be ints, one per element along axis {axis} (size {n}), got shape "
                         f"{counts.shape} of {counts.dtype}")
    if counts.size and counts.min() < 0:
        raise ValueError("repeat: repeats must be non-negative")
    positions = np.repeat(np.arange(n, dtype=np.int64), np.broadcast_to(counts, (n,)))
    return take(x, positions, axis=axis)


def _tensors(arrays: Sequence[Tensor], fn: str) -> list[Tensor]:
    """The inputs of a join: at least one, tensors on one device."""
    items = list(arrays)
    if not items:
        raise ValueError(f"{fn}: needs at least one tensor")
    for i, a in enumerate(items):
        check_tensor(a, fn, f"arrays[{i}]")
    devices = {a.device for a in items}
    if len(devices) > 1:
        raise ValueError(f"{fn}: tensors are on different devices: {sorted(devices)}")
    return items


def _padded(x: Tensor, widths: list[tuple[int, int]]) -> Tensor:
    """x with invalid indices (reading 0 / False) before and after each dim: a masked view."""
    return Tensor(graph.view(x.node, View.contiguous(x.shape).pad(tuple(widths))))


_JOIN_GROUP = 16
"""A join of more tensors than this is a join of joins of this many each (see _join)."""


def _join(items: list[Tensor], axis: int) -> Tensor:
    """Tensors of one dtype whose shapes differ along `axis` only, end to end along it: each is a
    masked view over the result's shape, and a select on the masks picks the one to read.

    More than _JOIN_GROUP of them are joined in groups of that many, and the groups' results
    joined in turn: a chain of n selects over the whole result costs n selects per element of
    it, and the scheduler cuts a long one into kernels that each compute all of it (scipy's
    ~1,000 one-element resamples joined: ~110 kernels of 999 elements, all different). Groups
    alike are kernels alike (one build, one compile), each over its own elements."""
    if len(items) > _JOIN_GROUP:
        groups = [items[i:i + _JOIN_GROUP] for i in range(0, len(items), _JOIN_GROUP)]
        return _join([_join(g, axis) for g in groups], axis)
    total = sum(a.shape[axis] for a in items)
    out: Tensor | None = None
    end = total
    for a in reversed(items):
        n = a.shape[axis]
        end -= n
        if n == 0:
            continue
        widths = [(0, 0)] * a.ndim
        widths[axis] = (end, total - end - n)
        piece = _padded(a, widths)
        out = piece if out is None else where(_padded(full(a.shape, True, np.bool_, a.device), widths), piece, out)
    if out is None:  # every input is empty along the axis
        shape = items[0].shape[:axis] + (0,) + items[0].shape[axis + 1:]
        return full(shape, 0, items[0].dtype, items[0].device)
    return out


def concat(arrays: tuple[Tensor, ...] | list[Tensor], /, *, axis: int | None = 0) -> Tensor:
    """The tensors joined along an existing axis (axis=None: flattened first), in their promoted
    dtype (see _join: masked views, fused into the consumer)."""
    items = _tensors(arrays, "concat")
    if axis is None:
        items, at = [a.reshape(-1) for a in items], 0
    else:
        ndims = {a.ndim for a in items}
        if len(ndims) > 1:
            raise ValueError(f"concat: tensors must have one number of dimensions, got {sorted(ndims)}")
        if items[0].ndim == 0:
            raise ValueError("concat: zero-dimensional tensors cannot be concatenated")
        at = _axis(axis, items[0].ndim)
        others = {a.shape[:at] + a.shape[at + 1:] for a in items}
        if len(others) > 1:
            raise ValueError(f"concat: shapes {[a.shape for a in items]} differ outside axis {at}")
    dt = result_type(*items)
    return _join([a.astype(dt) for a in items], at)


def stack(arrays: tuple[Tensor, ...] | list[Tensor], /, *, axis: int = 0) -> Tensor:
    """The tensors (of one shape) joined along a new axis (a concat of size-1 views)."""
    items = _tensors(arrays, "stack")
    shapes = {a.shape for a in items}
    if len(shapes) > 1:
        raise ValueError(f"stack: tensors must have one shape, got {sorted(shapes)}")
    at = _axis(axis, items[0].ndim + 1)
    dt = result_type(*items)
    return _join([a.astype(dt).expand_dims(at) for a in items], at)


def _axes_or_all(axis: Any, ndim: int, fn: str) -> list[int]:
    return list(range(ndim)) if axis is None else _axes_list(axis, ndim, fn)


def flip(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None) -> Tensor:
    """x with the order of the elements along `axis` (every axis: None) reversed: a view."""
    check_tensor(x, "flip")
    axes = _axes_or_all(axis, x.ndim, "flip")
    return x[tuple(slice(None, None, -1) if d in axes else slice(None) for d in range(x.ndim))]


def _along(x: Tensor, axis: int, index: slice) -> Tensor:
    return x[(slice(None),) * axis + (index,)]


def roll(x: Tensor, /, shift: int | tuple[int, ...], *, axis: int | tuple[int, ...] | None = None) -> Tensor:
    """x with its elements moved `shift` places along `axis` (None: the flattened x), those
    past the end coming back at the start: the two parts of each axis concatenated."""
    check_tensor(x, "roll")
    if axis is None:
        return roll(x.reshape(-1), shift, axis=0).reshape(x.shape)
    shifts, axes = np.broadcast_arrays(np.asarray(shift), np.asarray(axis))
    if shifts.ndim > 1:
        raise ValueError("roll: 'shift' and 'axis' should be scalars or 1D sequences")
    total = [0] * x.ndim
    for s, a in zip(shifts.reshape(-1), axes.reshape(-1)):
        total[_axis(int(a), x.ndim)] += int(s)
    out = x
    for a, s in enumerate(total):
        n = x.shape[a]
        if n and s % n:
            cut = n - s % n
            out = _join([_along(out, a, slice(cut, None)), _along(out, a, slice(None, cut))], a)
    return out


_PAD_MODES = ("constant", "edge", "reflect", "wrap")


def _pad_pairs(pad_width: Any, ndim: int) -> list[tuple[int, int]]:
    """numpy's forms of pad_width: n, (n,), (before, after), ((before, after),), or a pair per axis."""
    w = np.asarray(pad_width)
    if w.dtype.kind not in "iu":
        raise TypeError("`pad_width` must be of integral type.")
    if w.size and w.min() < 0:
        raise ValueError("index can't contain negative values")
    if w.ndim < 3 and w.size == 1:
        return [(int(w.reshape(-1)[0]),) * 2] * ndim
    if w.ndim < 3 and w.size == 2 and w.shape != (2, 1):
        before, after = (int(v) for v in w.reshape(-1))
        return [(before, after)] * ndim
    try:
        pairs = np.broadcast_to(w, (ndim, 2))
    except ValueError as e:
        raise ValueError(f"pad: pad_width of shape {w.shape} does not fit {ndim} dimensions") from e
    return [(int(b), int(a)) for b, a in pairs]


def _reflect_runs(n: int, before: int, after: int) -> list[slice]:
    """Slices of an axis of size n > 1 that, end to end, are its reflect padding: positions
    -before .. n + after - 1 mapped to the element numpy's pad reads there, in monotone runs."""
    period = 2 * (n - 1)  # ... 2 1 | 0 1 .. n-1 | n-2 .. 1 0 ...
    runs, p, end = [], -before, n + after
    while p < end:
        m = p % period
        if m < n:  # ascending: m, m + 1, ... up to n - 1
            count = min(n - m, end - p)
            runs.append(slice(m, m + count))
        else:      # descending: period - m down to 1
            top = period - m
            count = min(top, end - p)
            runs.append(slice(top, top - count, -1))
        p += count
    return runs


def _wrap_runs(n: int, before: int, after: int) -> list[slice]:
    """Slices of an axis of size n > 0 that, end to end, are its wrap padding (numpy's: position
    p reads p mod n, however many times the pad wraps around), in monotone runs."""
    runs, p, end = [], -before, n + after
    while p < end:
        start = p % n
        length = min(n - start, end - p)
        runs.append(slice(start, start + length))
        p += length
    return runs


def _spread(x: Tensor, axis: int, count: int) -> Tensor:
    """x (size 1 along `axis`) broadcast to `count` along it."""
    return x.broadcast_to(x.shape[:axis] + (count,) + x.shape[axis + 1:])


def pad(x: Tensor, /, pad_width: Any, mode: str = "constant", constant_value: Any = 0, *,
        constant_values: Any = None) -> Tensor:
    """numpy's np.pad for modes "constant", "edge", "reflect" and "wrap" (periodic: torch's
    "circular", here also wrapping more than once, as numpy's), as views: the constant padding
    is a masked view (a select with the constant where it is not 0), edge, reflect and wrap a
    concat of (reversed, broadcast) slices per axis, axis after axis as numpy pads them.
    `constant_values` is numpy's name of constant_value (xarray passes it): one value, or
    numpy's per-axis (before, after) pairs when they are all one value."""
    check_tensor(x, "pad")
    if constant_values is not None:
        values = np.unique(np.asarray(constant_values))
        if values.size != 1:
            raise ValueError(f"pad: ug pads with one constant, got constant_values={constant_values!r}")
        constant_value = values.reshape(()).item()
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode must be one of {_PAD_MODES}, got {mode!r}")
    pairs = _pad_pairs(pad_width, x.ndim)
    if mode == "constant":
        out = _padded(x, pairs)
        # numpy's `a[i] = v` conversion: exact, and an int x's dtype cannot hold is an OverflowError
        scalar = dtypes.is_scalar(constant_value)
        value = dtypes.written(constant_value, x.dtype) if scalar else x.dtype.type(constant_value)
        if value != 0 or np.signbit(value.real) or np.signbit(value.imag):   # (not a +0 the padding reads)
            inside = _padded(full(x.shape, True, np.bool_, x.device), pairs)
            out = where(inside, out, full((), value.item(), x.dtype, x.device))
        return out
    out = x
    for axis, (before, after) in enumerate(pairs):
        if not before and not after:
            continue
        n = x.shape[axis]
        if n == 0:
            raise ValueError(f"can't extend empty axis {axis} using modes other than 'constant' or 'empty'")
        if mode == "edge" or n == 1:  # (numpy's reflect or wrap of one element repeats it, as edge does)
            pieces = [_spread(_along(out, axis, slice(0, 1)), axis, before), out,
                      _spread(_along(out, axis, slice(n - 1, n)), axis, after)]
        elif mode == "wrap":
            pieces = [_along(out, axis, run) for run in _wrap_runs(n, before, after)]
        else:
            pieces = [_along(out, axis, run) for run in _reflect_runs(n, before, after)]
        out = _join(pieces, axis)
    return out


__all__ = ["broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis", "pad", "permute_dims",
           "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack"]
