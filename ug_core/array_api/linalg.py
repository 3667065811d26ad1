"""The Array API `linalg` extension (exposed as `ug_core.linalg`), and the linear algebra
functions of the main namespace (matmul, matrix_transpose, tensordot, vecdot).

Everything is built from ug's matmul, views and reductions, except matrix_norm's ord 2, -2 and
'nuc', which need singular values: a host item (ug.custom) running numpy.linalg, or, while a
gradient is being taken, a reduction of linalg.svdvals (which has a derivative)."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .. import graph
from ..custom import custom
from ..shapes import broadcast_shape, normalize_axis
from ..tensor import Tensor
from ..tensor_arith import matmul
from ..view import View, contiguous_strides, prod
from ._common import check_tensor
from .linalg_host import svdvals
from .statistical import sum as _sum

__all__ = ["diagonal", "matmul", "matrix_norm", "matrix_transpose", "outer", "tensordot", "trace", "vecdot",
           "vector_norm"]


def matrix_transpose(x: Tensor, /) -> Tensor:
    return check_tensor(x, "matrix_transpose").mT


def _contracted(x1: Tensor, x2: Tensor, axes: Any) -> tuple[list[int], list[int]]:
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > x1.ndim or n > x2.ndim:
            raise ValueError(f"tensordot: axes={n} does not fit shapes {x1.shape} and {x2.shape}")
        return list(range(x1.ndim - n, x1.ndim)), list(range(n))
    a1, a2 = axes
    a1 = [normalize_axis(a, x1.ndim) for a in ([a1] if isinstance(a1, int) else a1)]
    a2 = [normalize_axis(a, x2.ndim) for a in ([a2] if isinstance(a2, int) else a2)]
    if len(a1) != len(a2):
        raise ValueError(f"tensordot: axes {axes!r} name {len(a1)} and {len(a2)} axes")
    return a1, a2


def tensordot(x1: Tensor, x2: Tensor, /, *, axes: int | tuple[Sequence[int], Sequence[int]] = 2) -> Tensor:
    """Sum of products over the given axes, as one matmul of the operands permuted and reshaped
    to (free1, contracted) @ (contracted, free2)."""
    check_tensor(x1, "tensordot", "x1")
    check_tensor(x2, "tensordot", "x2")
    c1, c2 = _contracted(x1, x2, axes)
    for a, b in zip(c1, c2):
        if x1.shape[a] != x2.shape[b]:
            raise ValueError(f"tensordot: axis {a} of {x1.shape} and axis {b} of {x2.shape} differ in size")
    f1 = [d for d in range(x1.ndim) if d not in c1]
    f2 = [d for d in range(x2.ndim) if d not in c2]
    k = prod([x1.shape[a] for a in c1])
    left = x1.permute(tuple(f1 + c1)).reshape(prod([x1.shape[d] for d in f1]), k)
    right = x2.permute(tuple(c2 + f2)).reshape(k, prod([x2.shape[d] for d in f2]))
    return matmul(left, right).reshape(tuple(x1.shape[d] for d in f1) + tuple(x2.shape[d] for d in f2))


def vecdot(x1: Tensor, x2: Tensor, /, *, axis: int = -1) -> Tensor:
    """Dot products along `axis` of the broadcast operands: sum(conj(x1) * x2), the standard's
    (x1 is conjugated where it is complex)."""
    check_tensor(x1, "vecdot", "x1")
    check_tensor(x2, "vecdot", "x2")
    shape = broadcast_shape(x1.shape, x2.shape)
    if not shape:
        raise ValueError("vecdot: needs at least 1 dimension, got 0-d operands")
    a = normalize_axis(axis, len(shape))
    n1 = x1.shape[a - len(shape) + x1.ndim] if a - len(shape) + x1.ndim >= 0 else 1
    n2 = x2.shape[a - len(shape) + x2.ndim] if a - len(shape) + x2.ndim >= 0 else 1
    if n1 != n2:
        raise ValueError(f"vecdot: shapes {x1.shape} and {x2.shape} differ in size along axis {axis}")
    products = (x1.conj() if x1.dtype.kind == "c" else x1) * x2
    return _sum(products, axis=a - len(shape), dtype=products.dtype)  # int32 stays int32 (not sum's int64)


def outer(x1: Tensor, x2: Tensor, /) -> Tensor:
    for name, x in (("x1", x1), ("x2", x2)):
        if check_tensor(x, "outer", name).ndim != 1:
            raise ValueError(f"outer: {name} must be 1-d, got shape {x.shape}")
    return x1.reshape(-1, 1) * x2.reshape(1, -1)


def diagonal(x: Tensor, /, *, offset: int = 0) -> Tensor:
    """The offset-th diagonal of each matrix (last two axes): one strided view, no copy."""
    check_tensor(x, "diagonal")
    if x.ndim < 2:
        raise ValueError(f"diagonal: needs at least 2 dimensions, got shape {x.shape}")
    rows, cols = x.shape[-2:]
    length = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
    strides = contiguous_strides(x.shape)
    start = offset * strides[-1] if offset >= 0 else -offset * strides[-2]
    view = View(x.shape[:-2] + (length,), strides[:-2] + (strides[-2] + strides[-1],), start if length else 0)
    return x._view(view)


def trace(x: Tensor, /, *, offset: int = 0, dtype: Any = None) -> Tensor:
    return _sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def _float(x: Tensor) -> Tensor:
    return x._float()


def vector_norm(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False,
                ord: int | float = 2) -> Tensor:
    """The ord-norm over `axis` (all axes: the flattened tensor), in x's floating dtype."""
    a = _float(check_tensor(x, "vector_norm")).abs()
    if isinstance(ord, (np.integer, np.floating)):
        ord = ord.item()   # a number, not an operand: a typed np.float64 would make `a ** ord` float64
    if ord == 2:
        return (a * a).sum(axis, keepdims).sqrt()
    if ord == 1:
        return a.sum(axis, keepdims)
    if ord == math.inf:
        return a.max(axis, keepdims)
    if ord == -math.inf:
        return a.min(axis, keepdims)
    if ord == 0:
        return (a != 0).astype(a.dtype).sum(axis, keepdims)
    if not isinstance(ord, (int, float)) or isinstance(ord, bool):
        raise ValueError(f"vector_norm: ord must be a number, got {ord!r}")
    return (a ** ord).sum(axis, keepdims) ** (1.0 / ord)


def _host_matrix_norm(x: Tensor, ord: Any, keepdims: bool) -> Tensor:
    """A norm from the singular values: numpy.linalg on the host (a ug.custom item)."""
    shape = x.shape[:-2] + ((1, 1) if keepdims else ())

    def fill(out: np.ndarray, a: np.ndarray) -> None:
        out[...] = np.linalg.matrix_norm(a, ord=ord, keepdims=keepdims)

    return custom(fill, [x], shape, x.dtype)


def matrix_norm(x: Tensor, /, *, keepdims: bool = False, ord: int | float | str | None = "fro") -> Tensor:
    """The ord-norm of each matrix (last two axes)."""
    check_tensor(x, "matrix_norm")
    if x.ndim < 2:
        raise ValueError(f"matrix_norm: needs at least 2 dimensions, got shape {x.shape}")
    xf = _float(x)
    if ord in (2, -2, "nuc"):
        if not graph.kept_sources.depth:
            return _host_matrix_norm(xf, ord, keepdims)
        # while a gradient is being taken: from the singular values (svdvals differentiates;
        # ord 2 and -2 split a tie's gradient equally, as max / min do)
        s = svdvals(xf)
        out = s.max(-1) if ord == 2 else s.min(-1) if ord == -2 else s.sum(-1)
        return out.reshape(out.shape + (1, 1)) if keepdims else out
    a = xf.abs()
    if ord in ("fro", None):
        out = (a * a).sum((-2, -1), keepdims=True).sqrt()
    elif ord in (1, -1):
        sums = a.sum(-2, keepdims=True)
        out = sums.max(-1, keepdims=True) if ord == 1 else sums.min(-1, keepdims=True)
    elif ord in (math.inf, -math.inf):
        sums = a.sum(-1, keepdims=True)
        out = sums.max(-2, keepdims=True) if ord > 0 else sums.min(-2, keepdims=True)
    else:
        raise ValueError(f"matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}")
    return out if keepdims else out.reshape(x.shape[:-2])
