"""Helpers shared by the Array API modules: argument checks and index vectors (ops.Op.IOTA)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import graph
from ..plugins import registry
from ..tensor import Tensor


def check_tensor(x: Any, fn: str, name: str = "x") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: {name} must be a ug Tensor, got {type(x).__name__}")
    return x


def index_dtype(device: str) -> np.dtype:
    """int64 where the device has it, else int32."""
    have = registry.get(device).dtypes
    return np.dtype(np.int64) if np.dtype(np.int64) in have else np.dtype(np.int32)


def iota(n: int, device: str, dtype: np.dtype | None = None) -> Tensor:
    """The lazy vector 0, 1, ..., n-1 on `device` (an index vector: no memory, each element is
    its index, computed where it is read; `dtype` defaults to the index dtype)."""
    return Tensor(graph.iota((n,), index_dtype(device) if dtype is None else np.dtype(dtype), device))


def shape_tuple(shape: Any, fn: str) -> tuple[int, ...]:
    """A shape argument (an int or a sequence of ints) as a tuple."""
    import operator
    items = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        return tuple(operator.index(s) for s in items)
    except TypeError as e:
        raise TypeError(f"{fn}: shape must be an int or a tuple of ints, got {shape!r}") from e
