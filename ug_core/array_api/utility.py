"""Utility functions of the Array API standard: all, any, diff."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from .. import dtypes
from ..ops import Op
from ..shapes import normalize_axes, normalize_axis
from ..tensor import Tensor, full as _full, tensor
from ..tensor_reduce import into
from ._common import check_tensor
from .elementwise import _as_bool
from .manipulation import concat

Axis = int | tuple[int, ...] | None


def _truth_reduce(x: Tensor, axis: Axis, keepdims: bool, op: Op, fn: str) -> Tensor:
    """A bool reduction (min is `and`, max is `or`); over no elements it is the identity
    (True for all, False for any), where ug's max/min reductions refuse empty input."""
    b = _as_bool(x, fn)
    axes = normalize_axes(axis, x.ndim)
    if builtins.any(x.shape[a] == 0 for a in axes):
        shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape) if keepdims or d not in axes)
        return _full(shape, op is Op.RMIN, dtypes.BOOL, x.device)
    return b._reduce(op, axis, keepdims, dtypes.BOOL)


def all(x: Tensor, /, *, axis: Axis = None, keepdims: bool = False, out: Any = None) -> Tensor:
    """Whether every element along `axis` is true. `out` is numpy's (xarray passes numpy's
    out=None on): a tensor given the result, see Tensor.sum."""
    return into(out, _truth_reduce(x, axis, keepdims, Op.RMIN, "all"))


def any(x: Tensor, /, *, axis: Axis = None, keepdims: bool = False, out: Any = None) -> Tensor:
    """Whether some element along `axis` is true (`out` as for all)."""
    return into(out, _truth_reduce(x, axis, keepdims, Op.RMAX, "any"))


def diff(x: Tensor, /, *, axis: int = -1, n: int = 1, prepend: Any = None, append: Any = None) -> Tensor:
    """The n-th forward difference along `axis` (of bools: whether neighbours differ, as numpy),
    of x with `prepend` and `append` joined to it along the axis first (a masked-view concat:
    still one kernel)."""
    check_tensor(x, "diff")
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"diff: n must be a non-negative int, got {n!r}")
    if x.ndim == 0:
        raise ValueError("diff: needs at least 1 dimension, got a 0-d tensor")
    a = normalize_axis(axis, x.ndim)
    parts = [_edge(v, x, a, name) for v, name in ((prepend, "prepend"),) if v is not None]
    parts.append(x)
    parts += [_edge(v, x, a, "append") for v in (append,) if v is not None]
    out = concat(parts, axis=a) if len(parts) > 1 else x
    before = (slice(None),) * a
    for _ in range(n):
        if out.shape[a] == 0:
            break
        hi, lo = out[before + (slice(1, None),)], out[before + (slice(None, -1),)]
        out = hi != lo if out.dtype == dtypes.BOOL else hi - lo
    return Tensor(out.node) if out is x else out


def _edge(value: Any, x: Tensor, axis: int, name: str) -> Tensor:
    """diff's prepend/append as a tensor to join to x: a scalar is x's shape with length 1 along
    the axis (numpy's rule, in x's dtype); a tensor must match x's other dimensions."""
    shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    if isinstance(value, Tensor):
        if value.ndim != x.ndim:
            raise ValueError(f"diff: {name} must have {x.ndim} dimensions like x (shape {x.shape}), "
                             f"got shape {value.shape}")
        return value
    if isinstance(value, (np.ndarray, np.generic)):   # typed (numpy's diff of a numpy value, NEP 50)
        array = np.asarray(value)
        return _edge(tensor(np.broadcast_to(array, shape) if array.ndim == 0 else array, device=x.device),
                     x, axis, name)
    if dtypes.is_scalar(value):
        return _full(shape, value, x.dtype, x.device)   # (a weak scalar: x's dtype)
    raise TypeError(f"diff: {name} must be a tensor or a Python scalar, got {type(value).__name__}")


__all__ = ["all", "any", "diff"]
