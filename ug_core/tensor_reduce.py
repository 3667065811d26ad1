"""The Tensor's reductions: sum, prod, max, min, mean, softmax and log_softmax (std, var,
argmax, any, all... are the namespace's, array_api/methods.py), numpy's `out=` for all of them
(`into`), and the split of a long reduction over few rows into two stages."""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from . import dtypes, graph
from .graph import Node
from .ops import Op, REDUCE
from .shapes import broadcast_node, normalize_axes
from .tensor import Tensor, check_supported, graph_scalar
from .view import View, prod as product

_F16, _F32 = np.dtype(np.float16), np.dtype(np.float32)


def _reduce(self: Tensor, op: Op, axis: Any, keepdims: bool, dtype: np.dtype) -> Tensor:
    axes = normalize_axes(axis, self.ndim)
    if op in (Op.RMAX, Op.RMIN) and any(self.shape[a] == 0 for a in axes):
        name = "maximum" if op is Op.RMAX else "minimum"
        raise ValueError(f"zero-size array to reduction operation {name} which has no identity "
                         f"(shape {self.shape}, axis {axis})")
    if dtype.kind == "c" and op is not Op.SUM:
        return self._complex_reduce(op, axes, keepdims, dtype)
    node = graph.cast(self._node, dtype)
    if axes:
        node = _split_reduce(node, op, axes, dtype) or graph.reduce(node, op, axes, dtype)
    check_supported(node.dtype, node.device)
    if not keepdims:   # (the reduced dims dropped: what a reshape's view reads, without the Tensor view)
        node = graph.view(node, View.contiguous(tuple(s for d, s in enumerate(self.shape) if d not in axes)))
    return Tensor(node)


def _dtype_arg(self: Tensor, dtype: Any) -> np.dtype:
    return check_supported(dtypes.to_dtype(dtype), self.device)


_ACCUMULATORS: dict[tuple[Any, np.dtype], np.dtype] = {}


def _accumulator(fn: Any, dt: np.dtype) -> np.dtype:
    """The dtype numpy's sum or prod (`fn`) accumulates `dt` in (int8 in int64, uint8 in uint64,
    floats in their own), asked of numpy once per dtype."""
    acc = _ACCUMULATORS.get((fn, dt))
    if acc is None:
        acc = _ACCUMULATORS[(fn, dt)] = fn(np.empty(0, dt)).dtype
    return acc


# numpy's methods, by keyword (dask and xarray call them on chunks: `chunk.sum(axis=..,
# dtype=.., keepdims=..)`); positionally, ug's (axis, keepdims) for sum/prod/max/min/mean/
# argmax/argmin. `dtype` is the accumulation and result dtype (the Array API's); `out`, a
# tensor given the result (assign, numpy's unsafe casting of a reduction) or a numpy array
# written, is what is returned then.
def sum(self: Tensor, axis: Any = None, keepdims: bool = False, *, dtype: Any = None, out: Any = None) -> Tensor:
    acc = _accumulator(np.sum, self.dtype) if dtype is None else _dtype_arg(self, dtype)
    return into(out, self._reduce(Op.SUM, axis, keepdims, acc))


def prod(self: Tensor, axis: Any = None, keepdims: bool = False, *, dtype: Any = None, out: Any = None) -> Tensor:
    acc = _accumulator(np.prod, self.dtype) if dtype is None else _dtype_arg(self, dtype)
    return into(out, self._reduce(Op.PROD, axis, keepdims, acc))


def max(self: Tensor, axis: Any = None, keepdims: bool = False, *, out: Any = None) -> Tensor:
    return into(out, self._reduce(Op.RMAX, axis, keepdims, self.dtype))


def min(self: Tensor, axis: Any = None, keepdims: bool = False, *, out: Any = None) -> Tensor:
    return into(out, self._reduce(Op.RMIN, axis, keepdims, self.dtype))


def mean(self: Tensor, axis: Any = None, keepdims: bool = False, *, dtype: Any = None, out: Any = None) -> Tensor:
    """The mean, of floats in their dtype, of ints and bools in float64 (numpy's); with `dtype`,
    computed in it (numpy's: an integer dtype truncates the mean). float16 is summed and
    divided in float32 and rounded once, as numpy does: in float16 the count itself
    overflows (65504 is its largest value) and a sum of 1000 x 100 is inf."""
    if dtype is None and out is None and self.dtype in _PLAIN_FLOATS:
        return _float_mean(self, axis, keepdims)
    if dtype is not None:
        dt = _dtype_arg(self, dtype)
        if dt.kind != "f":
            return into(out, self.astype(dt).mean(axis, keepdims).astype(dt))
        if dt != self.dtype:
            return into(out, self.astype(dt).mean(axis, keepdims))
    axes = normalize_axes(axis, self.ndim)
    dt = dtypes.ufunc_result(np.true_divide, self.dtype, self.dtype) if self.dtype.kind != "f" else self.dtype
    work = _F32 if dt == _F16 else dt
    count = product([self.shape[a] for a in axes])
    # (a complex sum is divided by a real count: each part)
    result = self.astype(work).sum(axis, keepdims) / graph_scalar(count, dtypes.part_dtype(work), self.device)
    return into(out, result.astype(dt) if work != dt else result)


_PLAIN_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
"""The dtypes whose mean is their sum over the count in the dtype itself (mean's fast path)."""


def _float_mean(self: Tensor, axis: Any, keepdims: bool) -> Tensor:
    """mean's common case (a float32/float64 tensor, no dtype, no out) built on the nodes: the
    nodes `self.sum(axis, keepdims) / count` makes, without its intermediate tensors and views."""
    axes = normalize_axes(axis, self.ndim)
    node, dt, shape = self._node, self.dtype, self.shape
    if axes:
        node = _split_reduce(node, Op.SUM, axes, dt) or graph.reduce(node, Op.SUM, axes, dt)
        if not keepdims:
            node = graph.view(node, View.contiguous(tuple(s for d, s in enumerate(shape) if d not in axes)))
    return Tensor(graph.alu(Op.DIV, (node, _count(product([shape[a] for a in axes]), dt, node.device, node.shape)), dt))


_COUNTS: dict[tuple[int, np.dtype, str, tuple[int, ...]], Node] = {}
"""mean's counts, broadcast to the result's shape, by (count, dtype, device, shape): up to 1,024."""


def _count(n: int, dt: np.dtype, device: str, shape: tuple[int, ...]) -> Node:
    """The constant n as `dt`, broadcast to `shape`: one node kept per key (a constant is folded into
    the kernel's code and never written, so every graph may share it; a mean per resample in a
    loop of thousands then adds 2 nodes fewer each to the graph and to the garbage collector)."""
    key = (n, dt, device, shape)
    node = _COUNTS.get(key)
    if node is None:
        node = broadcast_node(graph.const(n, dt, device), shape)
        if len(_COUNTS) >= 1024:
            _COUNTS.clear()
        _COUNTS[key] = node
    return node


def softmax(self: Tensor, axis: int = -1) -> Tensor:
    x = self._float()
    e = (x - x.max(axis, keepdims=True).detach()).exp()  # (the shift cancels: no gradient)
    return e / e.sum(axis, keepdims=True)


def log_softmax(self: Tensor, axis: int = -1) -> Tensor:
    x = self._float()
    shifted = x - x.max(axis, keepdims=True).detach()
    return shifted - shifted.exp().sum(axis, keepdims=True).log()


def into(out: Any, result: Tensor) -> Any:
    """A method's result, or with numpy's `out=`, written into out (a tensor: assigned, as
    numpy's reductions cast, unsafely; a numpy array: copied into), which is returned."""
    if out is None:
        return result
    if isinstance(out, np.ndarray):
        np.copyto(out, result.numpy(), casting="unsafe")
        return out
    if not isinstance(out, Tensor):
        raise TypeError(f"out must be a ug Tensor or a numpy array, got {type(out).__name__}")
    if out.shape != result.shape:
        raise ValueError(f"output parameter has the wrong shape: {out.shape}, the result's is {result.shape}")
    out.assign(result.astype(out.dtype) if result.dtype != out.dtype else result)
    return out


SPLIT_MIN_ELEMENTS = 1 << 16
"""A reduction at least this long over at most SPLIT_MAX_ROWS rows is done in two stages: partial
results over many rows first (parallel across threads / workgroups), then a short reduction of
those. One long serial loop per row would leave all but one core idle."""
SPLIT_MAX_ROWS = 16


def _split_reduce(node: Node, op: Op, axes: tuple[int, ...], dtype: np.dtype) -> Node | None:
    shape = node.shape
    n = product([shape[a] for a in axes])
    rows = product([s for d, s in enumerate(shape) if d not in axes])
    if n < SPLIT_MIN_ELEMENTS or rows > SPLIT_MAX_ROWS:
        return None
    most = builtins.min(1024, math.isqrt(n))
    parts = next((p for p in range(most, 63, -1) if n % p == 0), most)
    chunk = n // parts
    head = parts * chunk  # n, or (n has no divisor in range, e.g. a large prime) n - (n % parts)
    keep = [d for d in range(len(shape)) if d not in axes]
    kept = tuple(shape[d] for d in keep)
    flat = Tensor(node).permute(keep + list(axes)).reshape(*kept, n)
    staged = (flat if head == n else flat[..., :head]).reshape(*kept, parts, chunk)._node
    partial = graph.reduce(staged, op, (len(keep) + 1,), dtype)
    total = graph.reduce(partial, op, (len(keep),), dtype)
    if head < n:
        # the rest (fewer than `parts` elements) reduced on its own, then combined: every length
        # gets the two stages' accuracy (a prime length's single serial loop lost ~1e-6 in a
        # float32 sum on cpu, and 1e-1 on a gpu) and parallelism
        rest = graph.reduce(flat[..., head:]._node, op, (len(keep),), dtype)
        total = graph.view(total, View.contiguous(total.shape).reshape(rest.shape) or View.contiguous(rest.shape))
        total = graph.alu(REDUCE[op].combine, (total, rest), dtype)
    keepdims_shape = tuple(1 if d in axes else s for d, s in enumerate(shape))
    return graph.view(total, View.contiguous(total.shape).reshape(keepdims_shape) or View.contiguous(keepdims_shape))
