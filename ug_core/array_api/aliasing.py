"""numpy's aliasing rule at the namespace's edge: which functions return views.

A function numpy documents as returning a view of its argument returns a `TensorView` (see
tensor.TensorView: later writes to either side show through the other). Every other function of
the namespace returns a new value, whatever path it took inside: its implementation may end in a
view of its input (a zero-width `pad`, a `roll` by the length, a `tile` of size-1 axes, a sort of
a 0-d tensor) or return the input itself (a shortcut), and `new_value` turns such a result into a
tensor of its own, so that a later write to the input (or to the result) does not reach the other.
Applied once, in ug_core/__init__.py, to the whole namespace: a new function follows the rule
without doing anything, and a new view function must be named here.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from ..tensor import Tensor, TensorView

VIEW_FUNCTIONS = frozenset({
    # manipulation (numpy: views)
    "permute_dims", "expand_dims", "squeeze", "broadcast_to", "broadcast_arrays", "flip", "moveaxis", "unstack",
    "reshape",          # a view where one strided window does it; its copy= argument says the rest
    "matrix_transpose", "diagonal", "transpose",
    "split", "array_split",   # lists of views (numpy's; ug.nn.split, torch's, too)
    # may return the argument itself, as numpy's do: asarray(x), astype(x, x.dtype, copy=False)
    "asarray", "from_dlpack", "astype",
})


def _inputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    found = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, Tensor))
    return found


def _passed(t: Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether `t` is one of the arguments (or in a list or tuple of them), as _inputs finds them."""
    for value in (*args, *kwargs.values()) if kwargs else args:
        if value is t or (isinstance(value, (list, tuple)) and any(v is t for v in value)):
            return True
    return False


def _own(result: Any, inputs: list[Any]) -> Any:
    if isinstance(result, TensorView) or (isinstance(result, Tensor) and any(result is t for t in inputs)):
        return Tensor(result.node)
    if isinstance(result, tuple) and any(isinstance(r, Tensor) for r in result):
        return type(result)(*(_own(r, inputs) for r in result)) if hasattr(result, "_fields") \
            else tuple(_own(r, inputs) for r in result)
    if isinstance(result, list):
        return [_own(r, inputs) for r in result]
    return result


def new_value(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, returning tensors that alias none of its arguments (see the module doc)."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        out = kwargs.get("out")
        if out is not None and result is out:
            return result   # numpy's out=: the result is written into that tensor, which is returned
        if type(result) is Tensor and not _passed(result, args, kwargs):
            return result   # (the common case, a new plain tensor: what _own would return)
        return _own(result, _inputs(args, kwargs))
    return call


def apply(namespace: dict[str, Any], names: list[str]) -> None:
    """Wrap every function of `names` in `namespace` but the view functions with new_value."""
    for name in names:
        fn = namespace.get(name)
        if name not in VIEW_FUNCTIONS and callable(fn) and not isinstance(fn, type) and not name.startswith("__"):
            namespace[name] = new_value(fn)


VALUE_METHODS = ("sum", "prod", "max", "min", "argmax", "argmin", "mean", "var", "std", "cumsum", "cumprod", "any",
                 "all", "round", "softmax", "log_softmax", "relu", "sigmoid", "gelu", "silu", "reciprocal")
"""Tensor's methods that compute (the others are views, writes, reads, or make a new node
directly): built from other ops, they may end in a view of a temporary or of `self`."""


def apply_methods(cls: type) -> None:
    """Wrap Tensor's computing methods with new_value (the view methods are views by design)."""
    for name in VALUE_METHODS:
        setattr(cls, name, new_value(getattr(cls, name)))
