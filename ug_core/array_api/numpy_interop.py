"""numpy functions called on ug tensors: `np.exp(t)`, `np.sum(t, axis=0)`, `np.concatenate([t, u])`.

numpy hands a call whose arguments include a Tensor to `Tensor.__array_ufunc__` (ufuncs) or
`Tensor.__array_function__` (the other functions, NEP 18). Where ug's namespace has the function,
the call runs it: the result is a lazy ug tensor, fused with what follows, on the device of the
tensor arguments (numpy arrays and scalars among the arguments are taken as constants there).

What ug does not cover (`np.linalg.eig(t)`, a ufunc with `out=`, a ufunc's `accumulate` ...)
runs in numpy on the tensors' values, as numpy runs any object with `__array__`, and returns
what numpy returns (numpy arrays): a host round trip, but no call that worked before fails.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

import ug_core as xp  # the namespace (imported when numpy first calls a tensor's hook)
from ..tensor import Tensor

# numpy ufunc name -> ug function name, where they differ (the others keep their names)
_UFUNC_NAMES = {
    "absolute": "abs", "true_divide": "divide", "power": "pow", "mod": "remainder", "conjugate": "conj",
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "arctan2": "atan2", "arcsinh": "asinh",
    "arccosh": "acosh", "arctanh": "atanh", "invert": "bitwise_invert", "left_shift": "bitwise_left_shift",
    "right_shift": "bitwise_right_shift", "rint": "round",
}

# ufunc.reduce -> the reduction it is (numpy's default axis for reduce is 0)
_REDUCTIONS = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
               "logical_and": "all", "logical_or": "any"}


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


def _host(value: Any) -> Any:
    """A tensor among the arguments as its numpy value (for numpy's own implementation)."""
    if isinstance(value, Tensor):
        return value.numpy()
    if isinstance(value, (list, tuple)):
        return type(value)(_host(v) for v in value)
    if isinstance(value, dict):
        return {k: _host(v) for k, v in value.items()}
    return value


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Tensor.__array_ufunc__: ug's function of that name for a plain call or a reduce."""
    device = _device_of(inputs)
    assert device is not None  # numpy calls this only when a tensor is among the inputs
    name = _UFUNC_NAMES.get(ufunc.__name__, ufunc.__name__)
    fn: Callable[..., Any] | None = None
    if "out" not in kwargs and kwargs.get("where", True) is True:
        kwargs = {k: v for k, v in kwargs.items() if k != "where"}
        if method == "__call__" and not kwargs and len(inputs) == ufunc.nin:
            fn = getattr(xp, name, None)
        elif method == "reduce" and ufunc.__name__ in _REDUCTIONS and set(kwargs) <= {"axis", "dtype", "keepdims"}:
            fn = functools.partial(_reduce, _REDUCTIONS[ufunc.__name__], kwargs)
            kwargs = {}
    if fn is None:
        return getattr(ufunc, method)(*_host(inputs), **_host(kwargs))
    return fn(*[_as_tensor(v, device) for v in inputs])


def _reduce(name: str, kwargs: dict[str, Any], x: Tensor) -> Tensor:
    axis = kwargs.get("axis", 0)
    options: dict[str, Any] = {"axis": axis, "keepdims": bool(kwargs.get("keepdims", False))}
    if kwargs.get("dtype") is not None:
        if name not in ("sum", "prod"):
            raise TypeError(f"ug's {name} takes no dtype")
        options["dtype"] = kwargs["dtype"]
    return _ug(name)(x, **options)


def _reduction(name: str) -> Callable[..., Any]:
    """np.sum(a, axis=None, dtype=None, out=None, keepdims=False, ...) as ug's `name`."""
    def call(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
             **rest: Any) -> Any:
        if out is not None or rest:
            return NotImplemented
        options: dict[str, Any] = {"axis": axis, "keepdims": keepdims}
        if dtype is not None:
            options["dtype"] = dtype
        return _ug(name)(a, **options)
    return call


def _arg_reduction(name: str) -> Callable[..., Any]:
    """np.argmax/np.argmin(a, axis=None, out=None, *, keepdims=False) as ug's `name`."""
    def call(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
        if out is not None:
            return NotImplemented
        return _ug(name)(a, axis=axis, keepdims=keepdims)
    return call


def _spread(name: str) -> Callable[..., Any]:
    """np.var/np.std(a, axis, dtype, out, ddof, keepdims) as ug's (ddof is the correction)."""
    def call(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
             keepdims: bool = False, **rest: Any) -> Any:
        if out is not None or dtype is not None or rest:
            return NotImplemented
        return _ug(name)(a, axis=axis, correction=ddof, keepdims=keepdims)
    return call


def _cumulative(name: str) -> Callable[..., Any]:
    """np.cumsum/np.cumprod(a, axis=None, dtype=None, out=None): numpy flattens for axis None."""
    def call(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        if out is not None:
            return NotImplemented
        if axis is None:
            a, axis = xp.reshape(a, (-1,)), 0
        return _ug(name)(a, axis=axis, dtype=dtype)
    return call


def _reshape(a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None, copy: Any = None) -> Any:
    if order != "C":
        return NotImplemented
    return xp.reshape(a, shape if shape is not None else newshape, copy=copy)


def _transpose(a: Any, axes: Any = None) -> Any:
    return xp.permute_dims(a, tuple(range(a.ndim))[::-1] if axes is None else tuple(axes))


def _clip(a: Any, a_min: Any = None, a_max: Any = None, out: Any = None, *, min: Any = None, max: Any = None,
          **rest: Any) -> Any:
    if out is not None or rest:
        return NotImplemented
    return xp.clip(a, min=a_min if a_min is not None else min, max=a_max if a_max is not None else max)


def _concatenate(arrays: Any, axis: Any = 0, out: Any = None, dtype: Any = None, **rest: Any) -> Any:
    if out is not None or dtype is not None or rest:
        return NotImplemented
    return _ug("concat")(list(arrays), axis=axis)


def _where(condition: Any, x: Any = None, y: Any = None) -> Any:
    if x is None or y is None:
        return NotImplemented  # the one-argument form is nonzero(): data-dependent
    return xp.where(condition, x, y)


def _like(name: str) -> Callable[..., Any]:
    def call(a: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None, **rest: Any) -> Any:
        if shape is not None or rest:
            return NotImplemented
        return _ug(name)(a, dtype=dtype)
    return call


def _full_like(a: Any, fill_value: Any, dtype: Any = None, order: str = "K", subok: bool = True,
               shape: Any = None, **rest: Any) -> Any:
    if shape is not None or rest:
        return NotImplemented
    return xp.full_like(a, fill_value, dtype=dtype)


def _same(name: str) -> Callable[..., Any]:
    """A numpy function whose arguments are ug's, by position and name."""
    return lambda *args, **kwargs: _ug(name)(*args, **kwargs)


_FUNCTIONS: dict[Callable[..., Any], Callable[..., Any]] = {
    np.sum: _reduction("sum"), np.prod: _reduction("prod"), np.mean: _reduction("mean"),
    np.max: _reduction("max"), np.min: _reduction("min"), np.amax: _reduction("max"), np.amin: _reduction("min"),
    np.all: _reduction("all"), np.any: _reduction("any"),
    np.argmax: _arg_reduction("argmax"), np.argmin: _arg_reduction("argmin"),
    np.var: _spread("var"), np.std: _spread("std"),
    np.cumsum: _cumulative("cumulative_sum"), np.cumprod: _cumulative("cumulative_prod"),
    np.reshape: _reshape, np.clip: _clip, np.concatenate: _concatenate,
    np.where: _where, np.zeros_like: _like("zeros_like"), np.ones_like: _like("ones_like"),
    np.empty_like: _like("empty_like"), np.full_like: _full_like,
    **{getattr(np, name): _same(name) for name in (
        "stack", "moveaxis", "expand_dims", "squeeze", "broadcast_to", "broadcast_arrays", "flip", "roll",
        "tile", "repeat", "tensordot", "count_nonzero", "diff", "tril", "triu", "meshgrid", "vecdot", "matrix_transpose", "astype")
       if hasattr(np, name)},
    np.transpose: _transpose,  # (after the names above: numpy 2's permute_dims is transpose)
}


def array_function(func: Any, types: tuple[type, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Tensor.__array_function__: ug's version of `func` where there is one, else numpy's own
    implementation on the tensors' values."""
    ours = _FUNCTIONS.get(func)
    device = _device_of(args) or _device_of(tuple(kwargs.values()))
    if ours is not None and device is not None and all(issubclass(t, (Tensor, np.ndarray)) for t in types):
        try:
            out = ours(*[_as_tensor(a, device) for a in args], **{k: _as_tensor(v, device) for k, v in kwargs.items()})
        except _Missing:
            out = NotImplemented
        if out is not NotImplemented:
            return out
    return func._implementation(*_host(args), **_host(kwargs))
