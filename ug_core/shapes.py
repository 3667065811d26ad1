"""Shapes and axes: the checks and arithmetic every frontend function shares (broadcasting,
axis normalization, shape arguments), and the broadcast of a graph node to a shape. Nothing
here knows about tensors: the Tensor (tensor.py) and the namespace (array_api/) build on it."""

from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from . import graph
from .graph import Node
from .view import View


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape the shapes broadcast to (numpy's rule); ValueError naming them where they do not."""
    ndim = max(len(s) for s in shapes)
    out = []
    for d in range(ndim):
        sizes = {s[len(s) - ndim + d] for s in shapes if len(s) - ndim + d >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {' and '.join(str(s) for s in shapes)} cannot be broadcast together")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_pair(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """broadcast_shape(a, b), answering the common cases (equal shapes, a scalar) at once."""
    if a == b or not b:
        return a
    if not a:
        return b
    return broadcast_shape(a, b)


def normalize_axis(axis: int, ndim: int) -> int:
    """`axis` of a rank-`ndim` shape as 0 .. ndim - 1 (negative ones count from the end): TypeError
    for a non-integer, numpy's AxisError (an IndexError and a ValueError) out of range."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(int(axis), ndim)
    return int(axis) % ndim if ndim else 0


def normalize_axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """An axis, a sequence of axes or None (every axis) as normalized axes; a repeated one is a
    ValueError."""
    if axis is None:
        return tuple(range(ndim))
    items = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(normalize_axis(a, ndim) for a in items)
    if len(set(axes)) != len(axes):
        raise ValueError(f"duplicate value in axis {axis!r}")
    return axes


def shape_arg(shape: Any) -> tuple[int, ...]:
    """A shape argument (an int or a sequence of ints) as a tuple: TypeError for anything else,
    ValueError for a negative dimension."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        out = tuple(operator.index(s) for s in shape)
    except TypeError as e:
        raise TypeError(f"shape must be a tuple of ints, got {shape!r}") from e
    if any(s < 0 for s in out):
        raise ValueError(f"negative dimension in shape {out}")
    return out


def broadcast_node(node: Node, shape: tuple[int, ...]) -> Node:
    """`node` read as `shape` (numpy's broadcasting: a view, no copy)."""
    if node.shape == shape:
        return node
    if not node.shape:  # a scalar (a constant, mostly): every index reads its one element
        return graph.view(node, View(shape, (0,) * len(shape)))
    pad = (1,) * (len(shape) - len(node.shape))
    v = View.contiguous(pad + node.shape).expand(shape)
    return graph.view(node, v)
