"""A value's derivative given by the user or the library rather than by its graph: `ug.custom`
(a host function as a graph op, differentiated by the `vjp` given with it) and `define_vjp` (a
composite value with a rule of its own). Both are recorded here, beside the nodes, and read by
the gradient walk (autodiff), which is built on everything that uses them."""

from __future__ import annotations

import weakref
from typing import Any, Callable, Iterable, Sequence

from . import dtypes, graph
from .graph import Node
from .shapes import shape_arg
from .tensor import Tensor, check_supported, resolve_device

custom_vjps: "weakref.WeakKeyDictionary[Node, Callable[..., Any]]" = weakref.WeakKeyDictionary()
"""The user's VJP of each live ug.custom node (`custom` registers it, autodiff reads it)."""


def custom(fn: Callable[..., Any], inputs: Iterable[Tensor], shape: Any, dtype: Any,
           vjp: Callable[..., Any] | None = None) -> Tensor:
    """A host function as a graph op: fn(out_ndarray, *input_ndarrays) fills `out` in place.
    `vjp(g, out, *inputs)`, built from ug ops, returns one cotangent (or None) per input: how
    ug.grad differentiates through it (without one, differentiating it is a TypeError)."""
    if not callable(fn):
        raise TypeError(f"custom: fn must be callable, got {fn!r}")
    inputs = list(inputs)
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"custom: inputs must be tensors, got {type(t).__name__}")
    devices = {t.device for t in inputs}
    if len(devices) > 1:
        raise ValueError(f"custom: inputs are on different devices: {sorted(devices)}")
    device = devices.pop() if devices else resolve_device(None)
    dt = check_supported(dtypes.to_dtype(dtype), device)
    if vjp is not None and not callable(vjp):
        raise TypeError(f"custom: vjp must be callable, got {vjp!r}")
    node = graph.custom(fn, tuple(t._node for t in inputs), shape_arg(shape), dt, device)
    if vjp is not None:
        custom_vjps[node] = vjp
    return Tensor(node)


def define_vjp(value: Tensor, inputs: Sequence[Tensor], rule: Callable[..., Any]) -> Tensor:
    """`value` (computed from `inputs`) with its own derivative: rule(g, out, *inputs) returns one
    cotangent (or None) per input, built from ug ops (so it differentiates again). The gradient
    takes it instead of going through the graph that computes `value`: for numerically careful
    formulas (expm1, log1p, the elu family) whose unused `where` branches would give NaN
    gradients, or whose derivative has a simpler exact form (JAX's custom_vjp)."""
    node = graph.name(value.node)
    graph.derivatives[node] = (tuple(t.node for t in inputs), rule)
    return Tensor(node)
