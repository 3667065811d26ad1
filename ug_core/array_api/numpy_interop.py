"""numpy functions called on ug tensors: `np.exp(t)`, `np.sum(t, axis=0)`, `np.concatenate([t, u])`.

numpy hands a call whose arguments include a Tensor to `Tensor.__array_ufunc__` (ufuncs) or
`Tensor.__array_function__` (the other functions, NEP 18). Where ug's namespace has the function,
the call runs it: the result is a lazy ug tensor, fused with what follows, on the device of the
tensor arguments (numpy arrays and scalars among the arguments are taken as constants there).

Functions that write are honoured, never ignored: a ufunc's `out=` (a ug tensor is given the
result with `assign`, numpy's casting rule checked; a numpy array is written), `np.add.at` (a ug
scatter, `index_add`), `np.copyto` (an assign) and, through numpy's own implementation, any other
function that writes into a tensor argument (`np.fill_diagonal`, `np.put`, `np.place`,
`np.putmask`, `np.put_along_axis`, `out=` of the others, other `ufunc.at`): numpy writes a host
copy of the tensor, which the tensor is then given.

What ug does not cover (`np.linalg.eig(t)`, a ufunc's `accumulate` ...) runs in numpy on the
tensors' values, as numpy runs any object with `__array__`, and returns what numpy returns
(numpy arrays): a host round trip, but no call that worked before fails.

NEP 35's `like=` (`np.asarray(x, like=t)`, `np.zeros(3, like=t)`: dask calls them) makes a ug
tensor on t's device: numpy dispatches such a call with the public function itself (it has no
`_implementation`), which runs numpy's function, the result then moved to ug.

This module maps the ufuncs (`array_ufunc`); numpy_functions.py the other functions
(`array_function`); numpy_host.py holds what both need (ug's namespace, found when a function
runs, and numpy's own implementation run on the tensors' values).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from .. import dtypes
from ..tensor import Tensor
from .numpy_functions import array_function
from .numpy_host import Casting, _as_tensor, _device_of, _host_call, _ug, xp

__all__ = ["array_ufunc", "array_function"]

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


def _outputs(kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """A ufunc call's `out` as a tuple (numpy passes it as one; None entries: no output given)."""
    out = kwargs.get("out")
    if out is None:
        return ()
    return out if isinstance(out, tuple) else (out,)


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Tensor.__array_ufunc__: ug's function of that name for a plain call or a reduce (its
    result written into `out` where one is given), ug's scatter for np.add.at, numpy's own
    implementation on the values otherwise (writes into tensors kept, see _HostCall)."""
    outs = _outputs(kwargs)
    device = _device_of(inputs) or _device_of(outs)
    assert device is not None  # numpy calls this only when a tensor is among the operands
    name = _UFUNC_NAMES.get(ufunc.__name__, ufunc.__name__)
    rest = {k: v for k, v in kwargs.items() if k not in ("out", "where")}
    where = kwargs.get("where", True)
    if method == "at":
        if _add_at(ufunc, inputs, kwargs, device):
            return None
        return _host_call(getattr(ufunc, method), inputs, kwargs, device)
    fn: Callable[..., Any] | None = None
    single_out = len(outs) == 1 and isinstance(outs[0], (Tensor, np.ndarray))
    if _device_of(inputs) is None:   # only an output is a tensor: numpy computes, the tensor is written
        return _host_call(getattr(ufunc, method), inputs, kwargs, device)
    if (not outs or single_out) and (where is True or (outs and method == "__call__")):
        if method == "__call__" and not rest and len(inputs) == ufunc.nin and ufunc.nout == 1:
            fn = getattr(xp, name, None)
        elif (method == "__call__" and set(rest) == {"dtype"} and where is True and len(inputs) == ufunc.nin
              and ufunc.nout == 1):   # (dask's matmul sums its blocks' products with np.add(..., dtype=))
            fn = _with_loop_dtype(ufunc, name, rest["dtype"], inputs)
        elif method == "reduce" and ufunc.__name__ in _REDUCTIONS and set(rest) <= {"axis", "dtype", "keepdims"}:
            fn = functools.partial(_reduce, _REDUCTIONS[ufunc.__name__], rest)
    if fn is None:
        return _host_call(getattr(ufunc, method), inputs, kwargs, device)
    result = fn(*[_as_tensor(v, device) for v in inputs])
    if not outs:
        return result
    # numpy's casting of a result into `out`: same_kind for a call, unsafe for a reduction
    return _write_out(ufunc, result, outs[0], where, "same_kind" if method == "__call__" else "unsafe")


def _with_loop_dtype(ufunc: np.ufunc, name: str, dtype: Any, inputs: tuple[Any, ...]) -> Callable[..., Any] | None:
    """`ufunc(*inputs, dtype=D)` (dask passes it) as ug's function of the inputs cast to D, where
    numpy's loop for D's is D's and each input casts to D as numpy's same_kind rule allows;
    None (numpy's own) otherwise."""
    fn = getattr(xp, name, None)
    try:
        dt = dtypes.to_dtype(dtype)
    except TypeError:
        return None
    if fn is None or dtypes.ufunc_result(ufunc, *(dt,) * ufunc.nin) != dt:
        return None
    for v in inputs:
        if isinstance(v, (Tensor, np.ndarray)) and not np.can_cast(v.dtype, dt, "same_kind"):
            return None
    return lambda *args: fn(*(a.astype(dt) if isinstance(a, Tensor) and a.dtype != dt else a for a in args))


def _write_out(ufunc: np.ufunc, result: Tensor, out: Any, where: Any, casting: Casting) -> Any:
    """`result` written into `out` (a tensor: assigned; a numpy array: copied into) where
    `where` holds, as numpy writes a ufunc's output; returns `out`."""
    if isinstance(out, np.ndarray):
        np.copyto(out, result.numpy(), casting=casting, where=where.numpy() if isinstance(where, Tensor) else where)
        return out
    if result.dtype != out.dtype and not np.can_cast(result.dtype, out.dtype, casting):
        raise TypeError(f"Cannot cast ufunc {ufunc.__name__!r} output from {result.dtype!r} to {out.dtype!r} "
                        f"with casting rule {casting!r}")
    if result.ndim > out.ndim or not all(a == 1 or a == b for a, b in zip(result.shape[::-1], out.shape[::-1])):
        raise ValueError(f"non-broadcastable output operand with shape {out.shape} doesn't match the "
                         f"broadcast shape {result.shape}")
    value = result.astype(out.dtype) if result.dtype != out.dtype else result
    if where is not True:
        value = xp.where(_as_tensor(where, out.device) if isinstance(where, np.ndarray) else where, value, out)
    out.assign(value)
    return out


def _add_at(ufunc: np.ufunc, inputs: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> bool:
    """np.add.at(a, index, b) into a ug tensor `a` along its first axis as ug's index_add (a
    deterministic scatter, lazy), where b needs no conversion numpy would round differently (its
    dtype, with a's, promotes to a's) and index is one 1-d integer array; False otherwise."""
    if ufunc is not np.add or kwargs or len(inputs) != 3 or not isinstance(inputs[0], Tensor):
        return False
    a, index, b = inputs
    if a.ndim == 0 or a.dtype == dtypes.BOOL or not isinstance(index, (list, np.ndarray, Tensor)):
        return False   # (numpy's add of bools is a logical or)
    if isinstance(index, Tensor):
        if index.ndim != 1 or index.dtype.kind not in "iu" or index.device != device:
            return False
    else:
        index = np.asarray(index)
        if index.ndim != 1 or index.dtype.kind not in "iu":
            return False
    if isinstance(b, Tensor):
        if b.device != device or xp.result_type(a.dtype, b.dtype) != a.dtype:
            return False
    elif type(b) in (bool, int, float):
        if np.result_type(a.dtype, b) != a.dtype or (a.dtype.kind in "iu" and type(b) is int and
                                                    not np.iinfo(a.dtype).min <= b <= np.iinfo(a.dtype).max):
            return False
    else:
        b = np.asarray(b)
        if b.dtype.kind not in "biuf" or np.result_type(a.dtype, b.dtype) != a.dtype:
            return False
        b = xp.asarray(b, device=device)
    shape = (index.shape[0],) + a.shape[1:]
    source = xp.full(shape, b, dtype=a.dtype, device=device) if not isinstance(b, Tensor) else xp.broadcast_to(b, shape)
    a.assign(xp.index_add(a, 0, index, source))
    return True


def _reduce(name: str, kwargs: dict[str, Any], x: Tensor) -> Tensor:
    axis = kwargs.get("axis", 0)
    options: dict[str, Any] = {"axis": axis, "keepdims": bool(kwargs.get("keepdims", False))}
    if kwargs.get("dtype") is not None:
        if name not in ("sum", "prod"):
            raise TypeError(f"ug's {name} takes no dtype")
        options["dtype"] = kwargs["dtype"]
    return _ug(name)(x, **options)
