"""numpy's functions (NEP 18's `__array_function__`, NEP 35's `like=`) on ug tensors: the table
of numpy function -> ug version (`_functions`), and `array_function`, which runs ug's version or
numpy's own implementation on the tensors' values (see numpy_interop.py)."""

from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np

from .. import dtypes
from ..tensor import Tensor
from .manipulation import _PAD_MODES
from .numpy_host import Casting, _Missing, _as_tensor, _device_of, _host_call, _ug, xp
from .numpy_names import sliding_window_view


def _reduction(name: str) -> Callable[..., Any]:
    """np.sum/np.prod/np.mean(a, axis=None, dtype=None, out=None, keepdims=False, ...) as ug's
    `name` (the tensor's method, with a dtype: ug's mean has none)."""
    def call(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
             **rest: Any) -> Any:
        if out is not None or rest:
            return NotImplemented
        if dtype is not None:
            return getattr(a, name)(axis, keepdims, dtype=dtype)
        return _ug(name)(a, axis=axis, keepdims=keepdims)
    return call


def _extreme(name: str) -> Callable[..., Any]:
    """np.max/np.min/np.all/np.any(a, axis=None, out=None, keepdims=False, ...) as ug's `name`."""
    def call(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **rest: Any) -> Any:
        if out is not None or rest:
            return NotImplemented
        return _ug(name)(a, axis=axis, keepdims=keepdims)
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
        if out is not None or rest:
            return NotImplemented
        if dtype is not None:
            return getattr(a, name)(axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
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
    items = list(arrays)
    device = _device_of(items)   # numpy pieces join the tensors' device (dask's percentile mixes them)
    return _ug("concat")([_as_tensor(a, device) for a in items] if device is not None else items, axis=axis)


def _where(condition: Any, x: Any = None, y: Any = None) -> Any:
    if x is None or y is None:
        return NotImplemented  # the one-argument form is nonzero(): data-dependent
    return xp.where(condition, x, y)


def _like(name: str) -> Callable[..., Any]:
    """np.zeros_like/ones_like/empty_like(a, dtype, order, subok, shape): a dtype ug lacks (a
    structured one, which dask tries first) is a TypeError, as CuPy's."""
    def call(a: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None, **rest: Any) -> Any:
        if rest:
            return NotImplemented
        if shape is not None:
            fill = {"zeros_like": 0, "ones_like": 1, "empty_like": 0}[name]
            return xp.full(shape, fill, dtype=a.dtype if dtype is None else dtype, device=a.device)
        return _ug(name)(a, dtype=dtype)
    return call


def _full_like(a: Any, fill_value: Any, dtype: Any = None, order: str = "K", subok: bool = True,
               shape: Any = None, **rest: Any) -> Any:
    if rest:
        return NotImplemented
    if shape is not None:
        return xp.full(shape, fill_value, dtype=a.dtype if dtype is None else dtype, device=a.device)
    return xp.full_like(a, fill_value, dtype=dtype)


def _copyto(dst: Any, src: Any, casting: Casting = "same_kind", where: Any = True) -> Any:
    """np.copyto into a ug tensor: an assign (of `where(where, src, dst)`), numpy's casting rule
    checked; into a numpy array: numpy's own."""
    if not isinstance(dst, Tensor):
        return NotImplemented
    if dtypes.is_scalar(src):
        np.copyto(np.empty((), dst.dtype), src, casting=casting)   # numpy's errors for the scalar
        value = xp.full(dst.shape, src, dtype=dst.dtype, device=dst.device)
    else:
        value = src if isinstance(src, Tensor) else xp.asarray(np.asarray(src), device=dst.device)
        if not np.can_cast(value.dtype, dst.dtype, casting):
            raise TypeError(f"Cannot cast array data from {value.dtype!r} to {dst.dtype!r} according to the rule "
                            f"{casting!r}")
        value = value.astype(dst.dtype)
    if where is not True:
        value = xp.where(where, value, dst)
    dst.assign(value)
    return None


def _pad(array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Any:
    """np.pad(array, pad_width, mode, constant_values=...) as ug's pad (numpy's keyword)."""
    if set(kwargs) - {"constant_values"} or mode not in _PAD_MODES:
        return NotImplemented
    return xp.pad(array, pad_width, mode=mode, **kwargs)


def _round(a: Any, decimals: int = 0, out: Any = None) -> Any:
    if out is not None:
        return NotImplemented
    return xp.round(a, decimals)


# numpy's nan-functions (xarray's reductions skip NaN through them), lazy: NaN read as the
# reduction's identity; an all-NaN slice's max, min, mean, var is NaN, as numpy's (without its
# warning); nanargmax/nanargmin raise for an all-NaN slice, which needs the values: numpy's own
def _filled(a: Tensor, fill: float) -> Tensor:
    return xp.where(xp.isnan(a), fill, a) if a.dtype.kind == "f" else a


def _nan_sum(name: str, fill: float) -> Callable[..., Any]:
    """np.nansum/np.nanprod(a, axis, dtype, out, keepdims)."""
    def call(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
             **rest: Any) -> Any:
        if out is not None or rest:
            return NotImplemented
        return getattr(_filled(a, fill), name)(axis, keepdims, dtype=dtype)
    return call


def _nan_extreme(name: str, fill: float) -> Callable[..., Any]:
    """np.nanmax/np.nanmin(a, axis, out, keepdims)."""
    def call(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **rest: Any) -> Any:
        if out is not None or rest:
            return NotImplemented
        if a.dtype.kind != "f":
            return getattr(a, name)(axis, keepdims)
        missing = xp.isnan(a)
        found = getattr(xp.where(missing, fill, a), name)(axis, keepdims)
        return xp.where(xp.all(missing, axis=axis, keepdims=keepdims), xp.nan, found)
    return call


def _nan_count(a: Tensor, axis: Any, keepdims: bool) -> Tensor:
    return xp.sum(~xp.isnan(a), axis=axis, keepdims=keepdims)


def _nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
             **rest: Any) -> Any:
    if out is not None or rest:
        return NotImplemented
    if a.dtype.kind != "f":
        return a.mean(axis, keepdims, dtype=dtype)
    total = _filled(a, 0).sum(axis, keepdims, dtype=dtype)
    return total / _nan_count(a, axis, keepdims).astype(total.dtype)


def _nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0, keepdims: bool = False,
            **rest: Any) -> Any:
    """np.nanvar: numpy's steps (the mean of the valid values, the squares of their distances
    from it, summed, over count - ddof), NaN where that is not positive."""
    if out is not None or rest:
        return NotImplemented
    if a.dtype.kind != "f":
        return a.var(axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
    x = a if dtype is None else a.astype(dtype)
    valid = ~xp.isnan(a)
    count = _nan_count(a, axis, True)
    mean = _filled(x, 0).sum(axis, True) / count.astype(x.dtype)
    centered = xp.where(valid, x - mean, 0)
    squares = (centered * centered).sum(axis, keepdims)
    dof = xp.reshape(count, squares.shape) - ddof
    return xp.where(dof > 0, squares / dof.astype(squares.dtype), xp.nan)


def _nanstd(a: Any, *args: Any, **kwargs: Any) -> Any:
    var = _nanvar(a, *args, **kwargs)
    return var if var is NotImplemented else xp.sqrt(var)


def _nan_cumulative(name: str, fill: float) -> Callable[..., Any]:
    """np.nancumsum/np.nancumprod(a, axis, dtype, out)."""
    def call(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        if out is not None:
            return NotImplemented
        return getattr(_filled(a, fill), name)(axis, dtype)
    return call


def _create(name: str, default_dtype: Any) -> Callable[..., Any]:
    """NEP 35: np.zeros/ones/empty(shape, dtype=float64, like=t) as ug's, on t's device."""
    def call(like: Tensor, shape: Any, dtype: Any = None, order: str = "C", **rest: Any) -> Any:
        if rest:
            return NotImplemented
        return _ug(name)(shape, dtype=np.dtype(default_dtype) if dtype is None else dtype, device=like.device)
    return call


def _as_array(copy_default: bool | None) -> Callable[..., Any]:
    """NEP 35: np.asarray/np.array(obj, dtype, ..., like=t) of a ug tensor as ug's asarray (lazy,
    on t's device); of anything else, numpy's array of it moved to ug."""
    def call(like: Tensor, obj: Any, dtype: Any = None, *args: Any, copy: bool | None = copy_default,
             ndmin: int = 0, **rest: Any) -> Any:
        if not isinstance(obj, Tensor) or args or set(rest) - {"order", "subok"}:
            return NotImplemented
        out = xp.asarray(obj, dtype=dtype, device=like.device, copy=copy)
        return out.reshape((1,) * (ndmin - out.ndim) + out.shape) if ndmin > out.ndim else out
    return call


_LIKE: dict[Callable[..., Any], Callable[..., Any]] = {
    np.asarray: _as_array(None), np.asanyarray: _as_array(None), np.ascontiguousarray: _as_array(None),
    np.array: _as_array(True), np.zeros: _create("zeros", np.float64), np.ones: _create("ones", np.float64),
    np.empty: _create("empty", np.float64),
}


def _created_like(func: Any, like: Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A NEP 35 call (`like=like`): ug's function where it has one, else numpy's (its arguments'
    tensors as their values) with the resulting arrays moved to like's device."""
    ours = _LIKE.get(func)
    if ours is not None:
        out = ours(like, *args, **kwargs)
        if out is not NotImplemented:
            return out
    return _host_call(func, args, kwargs, like.device)


def _typed(value: Any) -> Any:
    """A Python scalar as numpy's function makes it (np.asarray: int64, float64...); else as it is."""
    return np.asarray(value) if isinstance(value, (bool, int, float)) else value


def _numpy_args(np_func: Callable[..., Any], name: str, renames: dict[str, str] | None = None,
                convert: dict[str, Callable[[Any], Any]] | None = None) -> Callable[..., Any]:
    """numpy's function `np_func` as ug's `name`: the call's arguments bound by numpy's signature
    (numpy's positions: np.flip(t, 0), np.tril(t, 1), np.diff(t, 2, 0)), then given to ug's by
    name (`renames`: numpy's name -> ug's; `convert`: a value's conversion), its first one and
    its positional-only ones by position. An argument ug lacks with numpy's default value is
    dropped; with another value, numpy's own implementation runs (NotImplemented)."""
    np_signature = inspect.signature(np_func)
    ug_fn = _ug(name)
    ug_params = list(inspect.signature(ug_fn).parameters.values())
    renames, convert = renames or {}, convert or {}

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = np_signature.bind(*args, **kwargs)
        except TypeError:
            return NotImplemented
        items = list(bound.arguments.items())
        first, given = items[0][1], {}
        for np_name, value in items[1:]:
            ug_name = renames.get(np_name, np_name)
            if any(p.name == ug_name for p in ug_params):
                given[ug_name] = convert[np_name](value) if np_name in convert else value
                continue
            default = np_signature.parameters[np_name].default
            if value is not default and not (isinstance(value, (bool, int, str, type(None))) and value == default):
                return NotImplemented
        positional = [first]
        for param in ug_params[1:]:
            if param.kind is not inspect.Parameter.POSITIONAL_ONLY or param.name not in given:
                break
            positional.append(given.pop(param.name))
        return ug_fn(*positional, **given)
    return call


def _squeeze(a: Any, axis: Any = None) -> Any:
    """np.squeeze: every size-1 axis when axis is None (ug's takes the axes)."""
    if axis is None:
        axis = tuple(d for d, size in enumerate(a.shape) if size == 1)
    return xp.squeeze(a, axis)


def _meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> Any:
    """np.meshgrid: ug's (whose grids are values: `copy` changes nothing); sparse grids are numpy's."""
    if sparse:
        return NotImplemented
    return xp.meshgrid(*xi, indexing=indexing)


def _broadcast_arrays(*args: Any, subok: bool = False) -> Any:
    return xp.broadcast_arrays(*args)


def _reps(value: Any) -> tuple[int, ...]:
    return (int(value),) if isinstance(value, (int, np.integer)) else tuple(value)


def _fft(name: str) -> Callable[..., Any]:
    """np.fft.<name>(a, ...) as ug.fft.<name> (lazy, on a's device): numpy's arguments bound by
    its signature and given to ug's by name (the same names: n, axis, s, axes, norm); `out=`
    runs numpy's own."""
    np_fn = getattr(np.fft, name)
    signature = inspect.signature(np_fn)

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return NotImplemented
        arguments = dict(bound.arguments)
        if arguments.pop("out", None) is not None:
            return NotImplemented
        first = arguments.pop(next(iter(signature.parameters)))
        return getattr(xp.fft, name)(first, **arguments)
    return call


_FUNCTION_TABLE: dict[Callable[..., Any], Callable[..., Any]] = {}


def _functions() -> dict[Callable[..., Any], Callable[..., Any]]:
    """numpy's functions -> ug's versions: made on the first call (they look up and read the
    signatures of the namespace's functions, which is only whole once ug_core is imported)."""
    if not _FUNCTION_TABLE:
        _FUNCTION_TABLE.update(_function_table())
    return _FUNCTION_TABLE


def _function_table() -> dict[Callable[..., Any], Callable[..., Any]]:
    return {
        np.sum: _reduction("sum"), np.prod: _reduction("prod"), np.mean: _reduction("mean"),
        np.max: _extreme("max"), np.min: _extreme("min"), np.amax: _extreme("max"), np.amin: _extreme("min"),
        np.all: _extreme("all"), np.any: _extreme("any"),
        np.argmax: _arg_reduction("argmax"), np.argmin: _arg_reduction("argmin"),
        np.var: _spread("var"), np.std: _spread("std"),
        np.cumsum: _cumulative("cumulative_sum"), np.cumprod: _cumulative("cumulative_prod"),
        np.reshape: _reshape, np.clip: _clip, np.concatenate: _concatenate,
        np.where: _where, np.zeros_like: _like("zeros_like"), np.ones_like: _like("ones_like"),
        np.empty_like: _like("empty_like"), np.full_like: _full_like, np.copyto: _copyto, np.pad: _pad,
        np.round: _round, np.around: _round,
        np.nansum: _nan_sum("sum", 0), np.nanprod: _nan_sum("prod", 1), np.nanmax: _nan_extreme("max", -np.inf),
        np.nanmin: _nan_extreme("min", np.inf), np.nanmean: _nanmean, np.nanvar: _nanvar, np.nanstd: _nanstd,
        np.nancumsum: _nan_cumulative("cumsum", 0), np.nancumprod: _nan_cumulative("cumprod", 1),
        np.lib.stride_tricks.sliding_window_view: sliding_window_view,
        **{getattr(np, name): _numpy_args(getattr(np, name), name) for name in (
            "stack", "moveaxis", "expand_dims", "broadcast_to", "flip", "roll", "repeat", "count_nonzero",
            "tril", "triu", "matrix_transpose", "astype", "split", "array_split")},
        # (numpy's diff makes its prepend/append arrays: a Python 0 is an int64 one, which promotes)
        np.diff: _numpy_args(np.diff, "diff", convert={"prepend": _typed, "append": _typed}),
        np.tensordot: _numpy_args(np.tensordot, "tensordot", {"b": "x2"}),
        np.tile: _numpy_args(np.tile, "tile", {"reps": "repetitions"}, {"reps": _reps}),
        np.squeeze: _squeeze, np.meshgrid: _meshgrid, np.broadcast_arrays: _broadcast_arrays,
        # what needs no value (numpy's own would compute and copy the tensor first)
        np.shape: lambda a: a.shape, np.ndim: lambda a: a.ndim,
        np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
        np.transpose: _transpose,  # (after the names above: numpy 2's permute_dims is transpose)
        **{getattr(np.fft, name): _fft(name) for name in (
            "fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft", "fftshift",
            "ifftshift")},
    }


def array_function(func: Any, types: tuple[type, ...], args: tuple[Any, ...], kwargs: dict[str, Any],
                   like: Tensor | None = None) -> Any:
    """Tensor.__array_function__ (called on `like`): ug's version of `func` where there is one,
    else numpy's own implementation on the tensors' values (writes into tensors kept, see
    _HostCall). numpy dispatches a NEP 35 call (`like=`) with the public function, which has no
    `_implementation`: that makes ug tensors on like's device."""
    implementation = getattr(func, "_implementation", None)
    if implementation is None:
        assert like is not None
        return _created_like(func, like, args, kwargs)
    ours = _functions().get(func)
    device = _device_of(args) or _device_of(tuple(kwargs.values())) or (like.device if like is not None else None)
    if ours is not None and device is not None and all(issubclass(t, (Tensor, np.ndarray)) for t in types):
        try:
            if func is np.copyto:   # (its destination is written: a numpy one must stay itself)
                out = ours(*args, **kwargs)
            else:
                out = ours(*[_as_tensor(a, device) for a in args],
                           **{k: _as_tensor(v, device) for k, v in kwargs.items()})
        except _Missing:
            out = NotImplemented
        if out is not NotImplemented:
            return out
    return _host_call(implementation, args, kwargs, device or xp.__array_namespace_info__().default_device())
