"""What numpy's two dispatches (numpy_interop.py's ufuncs, numpy_functions.py's functions) share:
ug's namespace, found when a function runs; the device of the tensor arguments; and numpy's own
implementation run on the tensors' values, the tensors it wrote given the written values."""

from __future__ import annotations

from typing import Any, Callable, Literal

import numpy as np

from .. import sharing
from ..plugins import registry
from ..tensor import Tensor
from . import info


class _Namespace:
    """ug's namespace, the ug_core module (info.namespace), found when a function runs: numpy's
    functions map onto all of it, ug.fft and ug.linalg included, which import this module (the
    package above them all imports it), so this module cannot import them."""

    def __getattr__(self, name: str) -> Any:
        return getattr(info.namespace(), name)


xp: Any = _Namespace()

Casting = Literal["no", "equiv", "safe", "same_kind", "unsafe"]


class _Missing(Exception):
    """ug's namespace has no function of that name (yet): numpy's implementation runs."""


def _ug(name: str) -> Callable[..., Any]:
    fn = getattr(xp, name, None)
    if fn is None:
        raise _Missing(name)
    return fn


def _device_of(values: Any) -> str | None:
    """The device of the first tensor among `values` (nested in lists and tuples)."""
    for v in values:
        if isinstance(v, Tensor):
            return v.device
        if isinstance(v, (list, tuple)):
            found = _device_of(v)
            if found is not None:
                return found
    return None


def _as_tensor(value: Any, device: str) -> Any:
    """A numpy array among the arguments as a ug tensor on `device`; anything else as it is."""
    if isinstance(value, np.ndarray):
        return xp.asarray(value, device=device)
    if isinstance(value, (list, tuple)) and any(isinstance(v, (Tensor, np.ndarray)) for v in value):
        return type(value)(_as_tensor(v, device) for v in value)
    return value


class _HostCall:
    """A call of numpy's own implementation on the tensors' values: each tensor among the
    arguments becomes a host copy of its value; afterwards a tensor whose copy numpy wrote
    (`out=`, np.copyto, np.fill_diagonal, ufunc.at...) is given the written value, and a copy
    numpy returns (its `out`) is returned as the tensor itself."""

    def __init__(self) -> None:
        self.copies: list[tuple[Tensor, np.ndarray]] = []

    def host(self, value: Any) -> Any:
        if isinstance(value, Tensor):
            array = value.numpy()   # a copy of its own (Buffer.numpy copies out)
            self.copies.append((value, array))
            return array
        if isinstance(value, (list, tuple)):
            return type(value)(self.host(v) for v in value)
        if isinstance(value, dict):
            return {k: self.host(v) for k, v in value.items()}
        return value

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> Any:
        given = _arrays(args, kwargs)   # the caller's own numpy arrays: what numpy returns of them stays
        result = fn(*self.host(args), **self.host(kwargs))
        for t, array in self.copies:   # (bits compared: a NaN written over a NaN is no change)
            if not np.array_equal(array.reshape(-1).view(np.uint8), t.numpy().reshape(-1).view(np.uint8)):
                t.assign(array)   # numpy wrote the copy: the tensor takes the written value
        return self._tensors(result, {id(a): t for t, a in self.copies}, given, device)

    def _tensors(self, result: Any, copies: dict[int, Tensor], given: set[int], device: str) -> Any:
        """numpy's result with ug's types: a tensor's copy is the tensor, a new array a tensor
        on `device` (where ug has its dtype), a tuple of them the tuple of those."""
        if id(result) in copies:
            return copies[id(result)]
        if isinstance(result, np.ndarray) and id(result) not in given:
            dt = sharing.host_array(result).dtype
            if dt in registry.get(device).dtypes:
                return xp.asarray(result, device=device)
            return result
        if isinstance(result, tuple):
            items = [self._tensors(r, copies, given, device) for r in result]
            return result._make(items) if hasattr(result, "_make") else tuple(items)
        return result


def _arrays(args: tuple[Any, ...], kwargs: dict[str, Any]) -> set[int]:
    """The ids of the numpy arrays among the arguments (in lists, tuples and dicts too)."""
    found: set[int] = set()
    stack: list[Any] = [args, kwargs]
    while stack:
        value = stack.pop()
        if isinstance(value, np.ndarray):
            found.add(id(value))
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
    return found


def _host_call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> Any:
    return _HostCall().call(fn, args, kwargs, device)
