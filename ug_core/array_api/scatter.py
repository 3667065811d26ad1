"""Indexed stores: scatter_add, index_add, bincount and `x[idx] = v`, on one primitive, a
deterministic scatter (ops.Op.SCATTER).

A scatter splits its N values into `parts` consecutive parts; the kernel runs each part in order
(one thread per part) into a row of its own, filled with the identity first, and the rows are
then reduced (a plain reduction, which fuses with what follows). The number of parts depends
only on N and the number of slots (`parts_for`), never on the device or its threads: the result
has the same bits on every run, float sums included (each part's values are added in order,
on every device; the rows' sum is the device's reduction, in a fixed order of its own).

    scatter_add: x + rows.sum(0), the rows summing src at their slots
    scatter_reduce: the rows combined by sum, prod, max or min (a mean is a sum over a count,
                 itself a scatter of ones), then with x (include_self) or in x's place where
                 some value landed; its gradient is torch's (define_vjp: ties of amax / amin
                 split equally between all equal values, self included; prod exact with zeros)
    scatter:     torch's scatter: the value that lands last in each slot is written (the rule
                 of `x[idx] = v`, below), or reduce='add' / 'multiply' (scatter_reduce's)
    x[idx] = v:  numpy's last write wins: the rows hold, per slot, the largest position that
                 writes it (a max of positions, which any order gives alike), then one gather
                 reads v at that position where some position wrote, x elsewhere
    bincount:    scatter_add of ones (or weights) into max(x) + 1 slots: the length depends on
                 the values, so x is realized and its min and max read first (a sync)

Indices known on the host (numpy arrays, lists, ints) are checked (IndexError); a tensor's are
clamped into range in the kernel (documented; never a write outside).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import dtypes, graph, scalars
from ..custom import define_vjp
from ..graph import Node
from ..memory import available_host_bytes
from ..ops import Op
from ..plugins import registry
from ..schedule import scatter_identity
from ..shapes import broadcast_node, normalize_axis
from ..tensor import Tensor, tensor, tracing, values_for_shape
from ..tensor_arith import maximum, minimum, where
from ..tensor_index import written_array
from ..tensor_io import realize
from .indexing import _checked_index, _gather, _wrapped, getitem, is_mask
from .manipulation import pad

__all__ = ["scatter", "scatter_add", "scatter_reduce", "index_add", "bincount"]

MAX_PARTS = 64
"""At most this many parts (rows) per scatter: enough threads for a cpu, and the rows (parts x
slots elements) stay at most about N / 4 elements (`parts_for`)."""


def parts_for(n: int, slots: int) -> int:
    """How many parts a scatter of n values into `slots` slots runs in: rows cost parts * slots
    elements to fill and to reduce, so a part gets at least 4 values per slot. (A part longer
    than a device can loop over is split further by the scheduler's device pass, into the
    same rows: the graph is the same on every device.)"""
    return max(1, min(MAX_PARTS, n // (4 * slots)))


def scatter_add(x: Tensor, axis: int, index: Any, src: Any) -> Tensor:
    """x with src added at `index` along `axis` (torch's scatter_add): for every position q of
    index, out[q with q[axis] replaced by index[q]] += src[q]. index has x's rank, at most x's
    size off `axis`; src broadcasts to index's shape. Duplicate indices all add."""
    axis, idx, in_range = _target(x, axis, index, "scatter_add")
    if idx.ndim != x.ndim:
        raise ValueError(f"scatter_add: index (shape {idx.shape}) must have x's rank {x.ndim} (shape {x.shape})")
    if any(idx.shape[d] > x.shape[d] for d in range(x.ndim) if d != axis):
        raise ValueError(f"scatter_add: index (shape {idx.shape}) is larger than x (shape {x.shape}) off axis {axis}")
    values = _values(src, idx.shape, x, "scatter_add")
    return _added(x, values, _linear_slots(idx, in_range, x.shape, axis))


_REDUCE_OPS = {"sum": Op.SUM, "prod": Op.PROD, "mean": Op.SUM, "amax": Op.RMAX, "amin": Op.RMIN}


def scatter(x: Tensor, axis: int, index: Any, src: Any, reduce: str | None = None) -> Tensor:
    """torch's scatter: x with src written along `axis` at `index`: for every position q of
    index, out[q with q[axis] replaced by index[q]] = src[q]. index has x's rank and at most x's
    size off `axis`; src is a scalar, or a tensor at least as large as index in every dim (only
    its leading index.shape block is read, as torch's), or broadcasts to index's shape; it is
    cast to x's dtype. Where several positions write one slot the last one (in index's C order)
    wins, as numpy's `x[idx] = v` (torch leaves that order unspecified); the gradient goes to the
    value written. reduce='add' or 'multiply' combines instead: scatter_reduce(..., 'sum' or
    'prod', include_self=True)."""
    if reduce is not None:
        ops = {"add": "sum", "multiply": "prod"}
        if reduce not in ops:
            raise ValueError(f"scatter: reduce must be None, 'add' or 'multiply', got {reduce!r}")
        return scatter_reduce(x, axis, index, src, ops[reduce])
    axis, slots, values = _indexed(x, axis, index, src, "scatter")
    n = values.shape[0]
    if n == 0:
        return Tensor(x.node)
    order = dtypes.to_dtype("int32") if n < 2**31 else dtypes.to_dtype("int64")
    writer = Tensor(graph.iota((n,), order, x.device))
    rows = _scatter(writer, slots, Op.RMAX, x.size)
    last = rows.max(axis=0) if rows.shape[0] > 1 else rows.reshape(x.size)   # -1: nobody wrote
    picked = _gather(values, last, 0)   # (clamped: -1 reads value 0, not used)
    return where(last >= 0, picked, x.reshape(x.size)).reshape(*x.shape)


def scatter_reduce(x: Tensor, axis: int, index: Any, src: Any, reduce: str, include_self: bool = True) -> Tensor:
    """torch's scatter_reduce: the values of src (placed as `scatter` places them) combined per
    slot by reduce = 'sum', 'prod', 'mean', 'amax' or 'amin', together with x's element there
    (include_self) or replacing it (include_self=False: x stays where no value lands). An
    integer mean rounds down (torch's floor division). Deterministic (see the module's note).
    Gradients as torch's: amax / amin split g equally between the values equal to the result
    (x's element included when it takes part; torch also counts an x that takes no part,
    include_self=False, when it equals the result, and so loses that share), prod gives each
    value the product of the others (exact with zeros), mean divides g by each slot's count."""
    if reduce not in _REDUCE_OPS:
        raise ValueError(f"scatter_reduce: reduce must be one of {sorted(_REDUCE_OPS)}, got {reduce!r}")
    axis, slots, values = _indexed(x, axis, index, src, "scatter_reduce")
    if reduce in ("prod", "amax", "amin") and "c" in (x.dtype.kind, values.dtype.kind):
        # (a product of complex numbers mixes the parts: no accumulator combines them one
        # part at a time; complex numbers are not ordered)
        raise TypeError(f"scatter_reduce: reduce={reduce!r} is not defined on complex values "
                        f"({x.dtype.name}, {values.dtype.name})")
    if values.shape[0] == 0:
        return Tensor(x.node)
    op = _REDUCE_OPS[reduce]
    flat = x.reshape(x.size)
    red = _combined(values, slots, op, x.size)
    counts = dtypes.to_dtype("int32") if values.shape[0] < 2**31 else dtypes.to_dtype("int64")
    count = _combined(Tensor(graph.const(1, counts, x.device, values.shape)), slots, Op.SUM, x.size)
    touched = count > 0
    if reduce == "mean":
        if x.dtype.kind == "b":
            raise TypeError("scatter_reduce: reduce='mean' needs a numeric tensor, got bool")
        total = flat + red if include_self else red
        n = count + 1 if include_self else maximum(count, 1)
        out = total // n.astype(x.dtype) if x.dtype.kind in "iu" else total / n.astype(x.dtype)
    elif include_self:
        out = {Op.SUM: lambda: flat + red, Op.PROD: lambda: flat * red, Op.RMAX: lambda: maximum(flat, red),
               Op.RMIN: lambda: minimum(flat, red)}[op]()
    else:
        out = red
    if not include_self:
        out = where(touched, out, flat)
    out = out if out.dtype == x.dtype else out.astype(x.dtype)
    if x.dtype.kind != "f":
        return out.reshape(*x.shape)

    def at(t: Tensor) -> Tensor:
        """t (flat, x's size) read at each value's slot."""
        return _gather(t, slots, 0)

    def rule(g: Tensor, out: Tensor, x: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        g, out, x = g.reshape(x.size), out.reshape(x.size), x.reshape(x.size)
        if reduce == "sum":
            gx, gv = g, at(g)
        elif reduce == "mean":
            n = (count + 1 if include_self else maximum(count, 1)).astype(g.dtype)
            gx, gv = g / n, at(g / n)
        elif reduce in ("amax", "amin"):
            def equal(a: Tensor, b: Tensor) -> Tensor:   # (the NaN a NaN result came from counts too)
                return (a == b) | ((a != a) & (b != b))
            self_hit = equal(x, out) if include_self else equal(x, out) & ~touched
            src_hit = equal(values, at(out))
            shares = self_hit.astype(g.dtype) + _combined(src_hit.astype(g.dtype), slots, Op.SUM, x.size)
            share = g / where(shares > 0, shares, 1.0)
            gx, gv = where(self_hit, share, 0.0), where(src_hit, at(share), 0.0)
        else:   # prod: the product of the others, from the zeros' count and the nonzero values' product
            is_zero = values == 0
            zeros = _combined(is_zero.astype(g.dtype), slots, Op.SUM, x.size)
            nonzero = _combined(where(is_zero, 1.0, values), slots, Op.PROD, x.size)
            if include_self:
                zeros = zeros + (x == 0).astype(g.dtype)
                nonzero = nonzero * where(x == 0, 1.0, x)
            z, p = at(zeros), at(nonzero)
            others = where(is_zero, where(z == 1, p, 0.0), where(z == 0, p / where(is_zero, 1.0, values), 0.0))
            # x's own share: the product of the values at its slot (1 where none lands)
            gx, gv = g * _combined(values, slots, Op.PROD, x.size), at(g) * others
        if not include_self:
            gx = where(touched, 0.0, gx)
        return gx.reshape(*out_shape), gv

    out_shape = x.shape
    return define_vjp(out.reshape(*x.shape), [x, values], rule)


def index_add(x: Tensor, axis: int, index: Any, source: Any) -> Tensor:
    """x with source's slices added along `axis` at `index` (torch's index_add): for each i,
    out[..., index[i], ...] += source[..., i, ...]; index is 1-d, source has x's shape but
    len(index) on `axis`. Duplicate indices all add."""
    axis, idx, in_range = _target(x, axis, index, "index_add")
    if idx.ndim != 1:
        raise ValueError(f"index_add: index must be 1-d, got shape {idx.shape}")
    shape = x.shape[:axis] + (idx.shape[0],) + x.shape[axis + 1:]
    full = idx.reshape(*(1,) * axis, idx.shape[0], *(1,) * (x.ndim - axis - 1)).broadcast_to(shape)
    return _added(x, _values(source, shape, x, "index_add"), _linear_slots(full, in_range, x.shape, axis))


def bincount(x: Any, /, weights: Any = None, minlength: int = 0) -> Tensor:
    """numpy's bincount: how many times each value 0, 1, ..., max(x) occurs in the 1-d,
    non-negative integer x (int64 counts), or the sums of `weights` there (in the weights'
    float dtype; integer weights sum as float64, as numpy's, float32 where the device has no
    float64). The length, max(max(x) + 1, minlength), depends on the values: x is realized and
    its min and max read first."""
    if not isinstance(x, Tensor):
        x = tensor(np.asarray(x))
    if x.ndim != 1 or x.dtype.kind not in "iu":
        raise TypeError(f"bincount: x must be a 1-d integer tensor, got shape {x.shape} of {x.dtype.name}")
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
    n = x.shape[0]
    low, high = (0, -1)
    if n:
        low, high = _min_max(x)
        if low < 0:
            raise ValueError(f"bincount: x must be non-negative, its minimum is {low}")
    length = max(high + 1, minlength)
    if weights is None:
        counts = dtypes.to_dtype("int64") if np.dtype(np.int64) in _device_dtypes(x.device) else dtypes.to_dtype("int32")
        values = Tensor(graph.const(1, counts, x.device, (n,)))
    else:
        w = weights if isinstance(weights, Tensor) else tensor(np.asarray(weights), device=x.device)
        if w.shape != x.shape:
            raise ValueError(f"bincount: weights (shape {w.shape}) must have x's shape {x.shape}")
        values = w if w.dtype.kind == "f" else w.astype(dtypes.to_dtype("float64") if np.dtype(np.float64) in _device_dtypes(x.device) else dtypes.to_dtype("float32"))
    if length == 0:
        return Tensor(graph.const(0, values.dtype, x.device, (0,)))
    if n == 0:
        return Tensor(graph.const(0, values.dtype, x.device, (length,)))
    _check_bincount_size(length, parts_for(n, length), values.dtype,
                         high, minlength)
    # the scatter's rows are summed into the counts, or are the counts (one part): then its one
    # row's buffer is the result itself, not copied into another (no zeros added either: a
    # count of one huge value filled two buffers of the whole length)
    rows = _scatter(values, x, Op.SUM, length)
    # (lazy also while a function is differentiated, graph.kept_sources: a buffer of the counts
    # read back would be a constant, and the weights' gradient silently 0)
    if rows.shape[0] > 1 or tracing() or graph.kept_sources.depth:
        return rows._reduce(Op.SUM, 0, False, rows.dtype) if rows.shape[0] > 1 else rows.reshape(length)
    rows.realize()
    buffer = rows.node.buffer
    assert buffer is not None
    return Tensor(graph.from_buffer(buffer, (length,)))


def setitem(x: Tensor, index: tuple[Any, ...], value: Any) -> Node:
    """The new value of x after `x[index] = value` with integer arrays or boolean masks in
    index (numpy's advanced assignment: duplicates, the last write wins), as a node. A mask of
    x's shape with a value that broadcasts to x is a select (no sync); other masks are read."""
    v: Tensor | None = None
    if len(index) == 1 and is_mask(index[0]):
        mask = index[0] if isinstance(index[0], Tensor) else tensor(np.asarray(index[0]), device=x.device)
        if mask.shape == x.shape or mask.ndim == 0:
            if dtypes.is_scalar(value):   # converted as numpy's `a[mask] = v`: it must fit x's dtype
                return where(mask, dtypes.written(value, x.dtype), x)._node   # a kernel argument (scalars)
            v = _written_value(value, x)
            if v.size == 1 and v.ndim <= 1:
                return where(mask, Tensor(graph.cast(v.reshape(())._node, x.dtype)), x)._node
    position = getitem(_positions(x), index)   # each written element's linear position in x
    count = math.prod(position.shape)
    if v is None:
        v = _written_value(value, x)   # (checked even when nothing is written, as numpy does)
    if v.ndim > position.ndim or not all(a == 1 or a == b for a, b in zip(v.shape[::-1], position.shape[::-1])):
        # (numpy's check, also when nothing is selected: x[[]] = ones(3) raises there)
        raise ValueError(f"shape mismatch: value array of shape {v.shape} could not be broadcast to indexing "
                         f"result of shape {position.shape}")
    if count == 0:
        return x._node
    flat_positions = position.reshape(count)
    order = dtypes.to_dtype("int32") if count < 2**31 else dtypes.to_dtype("int64")
    writer = Tensor(graph.iota((count,), order, x.device))
    rows = _scatter(writer, flat_positions, Op.RMAX, x.size)
    last = rows.max(axis=0) if rows.shape[0] > 1 else rows.reshape(x.size)   # -1: nobody wrote
    if v.size == 1:   # one value for every written element: no gather (which would want it in a buffer)
        picked = Tensor(broadcast_node(graph.cast(v.reshape(())._node, x.dtype), (x.size,)))
    else:
        written = Tensor(broadcast_node(graph.cast(v._node, x.dtype), position.shape)).reshape(count)
        picked = _gather(written, last, 0)   # (clamped: -1 reads element 0, not used)
    return where(last >= 0, picked, x.reshape(x.size)).reshape(*x.shape)._node


# --- helpers ---------------------------------------------------------------------------------


def _written_value(value: Any, x: Tensor) -> Tensor:
    """A value written into x (`x[idx] = value`, a scatter's values) as a tensor, before its
    cast to x's dtype: a scalar as numpy's `a[i] = v` converts it (dtypes.written: it must fit
    x's dtype, exactly; a kernel argument, see scalars), nested Python numbers as x's dtype
    directly (the same rule), an array or a tensor as it is (the cast wraps, as numpy's)."""
    if isinstance(value, Tensor):
        if value.device != x.device:
            raise ValueError(f"cannot write a tensor on {value.device!r} into a tensor on {x.device!r}")
        return value
    if dtypes.is_scalar(value):
        return Tensor(scalars.scalar(dtypes.written(value, x.dtype), x.dtype, x.device))
    return written_array(value, x.dtype, x.device)


def _target(x: Any, axis: int, index: Any, fn: str) -> tuple[int, Tensor, bool]:
    """(the normalized axis, the index as a tensor, whether it is known in range) of an indexed
    add into x along `axis`."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: x must be a ug Tensor, got {type(x).__name__}")
    if x.ndim == 0:
        raise ValueError(f"{fn}: x must have at least one dimension")
    axis = normalize_axis(axis, x.ndim)
    idx, in_range = _checked_index(index, x.shape[axis], x.device, f"{fn}: axis {axis} of x")
    return axis, idx, in_range


def _positions(x: Tensor) -> Tensor:
    """The linear position of each element of x, as a lazy index vector of x's shape."""
    dt = dtypes.to_dtype("int32") if x.size < 2**31 else dtypes.to_dtype("int64")
    return Tensor(graph.iota(x.shape, dt, x.device))


def _values(src: Any, shape: tuple[int, ...], x: Tensor, fn: str) -> Tensor:
    if isinstance(src, Tensor) and src.device != x.device:
        raise ValueError(f"{fn}: src is on {src.device!r}, x on {x.device!r}")
    s = _written_value(src, x)
    if s.ndim > len(shape) or not all(a == 1 or a == b for a, b in zip(s.shape[::-1], shape[::-1])):
        raise ValueError(f"{fn}: src of shape {s.shape} does not broadcast to the index's shape {shape}")
    return Tensor(broadcast_node(graph.cast(s._node, x.dtype), shape))


def _linear_slots(idx: Tensor, in_range: bool, shape: tuple[int, ...], axis: int) -> Tensor:
    """The linear position in a tensor of `shape` of each position q of idx, with q[axis]
    replaced by idx[q] (wrapped once if negative, clamped, unless known `in_range`; a 1-d
    one only wrapped: the scatter clamps its slots): int64 index math where x needs it."""
    wide = dtypes.to_dtype("int32") if math.prod(shape) < 2**31 else dtypes.to_dtype("int64")
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    if len(shape) == 1 and not in_range and idx.dtype.kind == "i":
        i = idx.astype(wide) if idx.dtype.itemsize < wide.itemsize else idx
        return where(i < 0, i + shape[0], i)
    total = _wrapped(idx, in_range, shape[axis])
    total = total.astype(wide) if total.dtype != wide else total
    total = total * strides[axis] if strides[axis] != 1 else total
    for d, size in enumerate(idx.shape):
        if d != axis and size > 1:
            coord = Tensor(graph.iota((size,), wide, idx.device)).reshape(*(1,) * d, size, *(1,) * (idx.ndim - d - 1))
            total = total + coord * strides[d]
    return total


def _added(x: Tensor, values: Tensor, slots: Tensor) -> Tensor:
    """x plus values summed at their linear slots (flattened)."""
    n = math.prod(values.shape)
    if n == 0:
        return x
    rows = _scatter(values.reshape(n), slots.broadcast_to(values.shape).reshape(n), Op.SUM, x.size)
    total = rows._reduce(Op.SUM, 0, False, rows.dtype) if rows.shape[0] > 1 else rows.reshape(x.size)
    return x + total.reshape(*x.shape)


def _indexed(x: Any, axis: int, index: Any, src: Any, fn: str) -> tuple[int, Tensor, Tensor]:
    """(the axis, the flat linear slot of each position of index, the flat values in x's
    dtype) of a torch-style scatter of src into x: index has x's rank and at most x's size off
    `axis`; a src tensor of index's rank at least index's size in every dim is read in its
    leading index.shape block (torch's rule), any other src broadcasts to index's shape."""
    axis, idx, in_range = _target(x, axis, index, fn)
    if idx.ndim != x.ndim:
        raise ValueError(f"{fn}: index (shape {idx.shape}) must have x's rank {x.ndim} (shape {x.shape})")
    if any(idx.shape[d] > x.shape[d] for d in range(x.ndim) if d != axis):
        raise ValueError(f"{fn}: index (shape {idx.shape}) is larger than x (shape {x.shape}) off axis {axis}")
    if isinstance(src, Tensor) and src.ndim == idx.ndim and src.shape != idx.shape:
        if any(i > s for i, s in zip(idx.shape, src.shape)):
            raise ValueError(f"{fn}: index (shape {idx.shape}) is larger than src (shape {src.shape})")
        src = src[tuple(slice(0, i) for i in idx.shape)]
    values = _values(src, idx.shape, x, fn)
    n = math.prod(idx.shape)
    slots = _linear_slots(idx, in_range, x.shape, axis)
    return axis, slots.broadcast_to(idx.shape).reshape(n), values.reshape(n)


def _combined(values: Tensor, slots: Tensor, op: Op, n_slots: int) -> Tensor:
    """The 1-d values combined by `op` at their slots: (n_slots,), the identity where none lands."""
    rows = _scatter(values, slots, op, n_slots)
    return rows._reduce(op, 0, False, rows.dtype) if rows.shape[0] > 1 else rows.reshape(n_slots)


def _check_bincount_size(length: int, parts: int, dtype: np.dtype, high: int, minlength: int) -> None:
    """bincount's result has `length` elements, which the values decide: a length beyond int64
    index math is a ValueError, one whose memory (the scatter's `parts` rows, plus their sum
    when there are several) the host cannot hold now a MemoryError, both naming the argument
    that asked for it, before anything is allocated."""
    cause = f"max(x) + 1 = {high + 1}" if high + 1 >= minlength else f"minlength = {minlength}"
    if length >= 2**63:
        raise ValueError(f"bincount: the result would have {length} elements ({cause}), more than any array "
                         f"can index (2**63 - 1)")
    nbytes = length * dtype.itemsize * (parts + 1 if parts > 1 else 1)
    available = available_host_bytes()
    if available is not None and nbytes > available:
        raise MemoryError(f"bincount: the result would have {length} elements of {dtype.name} ({cause}): "
                          f"{nbytes} bytes, more than the {available} bytes of memory available")


def _scatter(values: Tensor, slots: Tensor, op: Op, n_slots: int) -> Tensor:
    """The (parts, n_slots) rows of a scatter of 1-d values at 1-d slots (padded to a multiple of
    the parts with the identity at slot 0, which changes nothing)."""
    n = values.shape[0]
    parts = parts_for(n, n_slots)
    padded = -(-n // parts) * parts
    if padded > n:
        values = pad(values, (0, padded - n), constant_value=scatter_identity(op, values.dtype))
        slots = pad(slots, (0, padded - n))
    return Tensor(graph.scatter(values._node, slots._node, op, n_slots, parts))


def _min_max(x: Tensor) -> tuple[int, int]:
    """x's smallest and largest value, read on the host (one schedule for both)."""
    low, high = x.min(), x.max()
    if not tracing():
        realize(low, high)
    return int(values_for_shape(low, "bincount")), int(values_for_shape(high, "bincount"))


def _device_dtypes(device: str) -> frozenset[np.dtype]:
    return registry.get(device).dtypes

