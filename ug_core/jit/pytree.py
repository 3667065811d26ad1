"""ug.jit's arguments and results as pytrees (tuples, lists, dicts, namedtuples of tensors and
Python values): the trace key of a call, views passed as arguments, the structure of a result."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from ..graph import Node
from ..tensor import Tensor, TensorView
from .records import PY


# --- arguments and results as pytrees -----------------------------------------------------

_TREE_TYPES = (Tensor, tuple, list, dict)   # a positional argument of one of these takes the pytree path


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def _tree_key(value: Any, leaves: list[Tensor]) -> Any:
    """The trace key of an argument tree; appends its tensors to `leaves` (lazy ones are
    realized: a replay reads input buffers). A tensor is its (shape, dtype, device), a container
    its type and items (a dict's keys included), anything else `_static_key`."""
    if isinstance(value, Tensor):
        node = value._node
        if node.buffer is None:
            value.realize()
        leaves.append(value)
        return node.sig
    kind = type(value)
    if kind is tuple or kind is list or _is_namedtuple(value):
        return (kind, tuple([_tree_key(v, leaves) for v in value]))
    if kind is dict or kind is OrderedDict:
        return (kind, tuple([(_static_key(k), _tree_key(v, leaves)) for k, v in value.items()]))
    return (PY, _static_key(value))


def _map_tensors(value: Any, fn: Callable[[Tensor], Tensor]) -> Any:
    """A pytree (tuples, lists, namedtuples, dicts) with each tensor t in it replaced by fn(t)."""
    if isinstance(value, Tensor):
        return fn(value)
    kind = type(value)
    if kind is tuple or kind is list:
        return kind(_map_tensors(v, fn) for v in value)
    if _is_namedtuple(value):
        return kind(*(_map_tensors(v, fn) for v in value))
    if kind is dict or kind is OrderedDict:
        return kind((k, _map_tensors(v, fn)) for k, v in value.items())
    return value


def _stand_in(value: Any, stand_ins: list[tuple[TensorView, Tensor, Node]]) -> Any:
    """`value` (an argument tree) with each view (TensorView) replaced by a plain tensor of its
    value, noted in `stand_ins` with its node: the trace and its replays take that tensor as the
    argument (its own input buffer, and its writes are the argument's writes), and _write_back
    then writes what it holds into the view, that is into the view's base, as a call would."""
    def stand_for(t: Tensor) -> Tensor:
        if not isinstance(t, TensorView):
            return t
        stand = Tensor(t.realize()._node)
        stand_ins.append((t, stand, stand._node))
        return stand
    return _map_tensors(value, stand_for)


def _write_back(result: Any, stand_ins: list[tuple[TensorView, Tensor, Node]]) -> Any:
    """After a call with views among its arguments (see _stand_in): the written stand-ins' values
    written into their views, and the result with each stand-in it returns replaced by its view."""
    for view, stand, before in stand_ins:
        if stand._node is not before:
            view._replace_node(stand._node)
    of: dict[int, Tensor] = {id(stand): view for view, stand, _ in stand_ins}
    return _map_tensors(result, lambda t: of.get(id(t), t))


def _views_as_values(value: Any) -> Any:
    """A result tree with each view (TensorView) in it as a plain tensor of its value."""
    return _map_tensors(value, lambda t: Tensor(t._node) if isinstance(t, TensorView) else t)


def _flatten_output(value: Any, leaves: list[Tensor]) -> Any:
    """The structure of a return value (tensors, tuples, lists, dicts, namedtuples and other
    Python values); appends its tensors to `leaves`."""
    if isinstance(value, Tensor):
        leaves.append(value)
        return "T"
    kind = type(value)
    if kind is tuple or kind is list or _is_namedtuple(value):
        return (kind, [_flatten_output(v, leaves) for v in value])
    if kind is dict or kind is OrderedDict:
        return (kind, [(k, _flatten_output(v, leaves)) for k, v in value.items()])
    return (PY, value)


def _static_key(value: Any) -> Any:
    """A non-tensor argument, as part of the key: with its type, so that values that compare
    equal but trace differently (1, 1.0 and True give different dtypes) get traces of their own;
    floats by repr (0.0 and -0.0 differ; a nan equals itself); tuples and lists item by item;
    numpy arrays by dtype, shape and bytes (their repr elides the middle of a big one);
    anything else unhashable by repr."""
    kind = type(value)
    if kind is tuple or kind is list:
        return (kind, tuple(_static_key(v) for v in value))
    if isinstance(value, (float, complex, np.floating, np.complexfloating)):
        return (kind, repr(value))
    if isinstance(value, np.ndarray):
        return (kind, value.dtype.str, value.shape, value.tobytes())
    try:
        hash(value)
    except TypeError:
        return (kind, repr(value))
    return (kind, value)


def _repeats(tensors: list[Tensor]) -> tuple[tuple[int, int], ...]:
    """For each tensor argument, the positions of the first one with the same node and of the
    first one that is the same tensor; () when their nodes all differ. (A trace reads one
    buffer for tensors of one node, and writes a tensor passed twice once.)"""
    first_node: dict[int, int] = {}
    first_tensor: dict[int, int] = {}
    where = tuple((first_node.setdefault(id(t._node), i), first_tensor.setdefault(id(t), i)) for i, t in enumerate(tensors))
    return where if len(first_node) < len(tensors) else ()
