"""The Tensor's methods, bound to the class here, in one place.

tensor.py defines the Tensor and declares these methods for type checkers; each is written
beside what it uses (tensor_arith, tensor_reduce, tensor_index, tensor_io, and below, the
methods that are the namespace's functions) and bound below. The modules it binds from are
below this one: none of them imports the namespace, and tensor.py imports none of them.
array_api/__init__ imports this module last, so every Tensor has its methods once
ug_core.array_api is imported (the package imports it first). mypy checks each binding
against the declaration in tensor.py (assigning to a method is what this module is for, so
that error code is off here)."""
# mypy: disable-error-code="method-assign"

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from .. import dtypes, graph, scalars, tensor_arith, tensor_index, tensor_io, tensor_reduce
from ..graph import Node
from ..ops import Op
from ..shapes import broadcast_node, broadcast_pair
from ..tensor import Tensor, TensorView, tensor, write_lock
from ..tensor_reduce import into
from ..view import prod
from . import _complex, aliasing, elementwise, indexing, info, numpy_interop, scatter, searching, statistical, utility

# --- numpy's protocols --------------------------------------------------------------------------


def __array_ufunc__(self: Tensor, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """numpy ufuncs on tensors (`np.exp(t)`, `np_array + t`) are ug's functions: lazy tensors
    (see array_api.numpy_interop)."""
    return numpy_interop.array_ufunc(ufunc, method, inputs, kwargs)


def __array_function__(self: Tensor, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    """numpy functions on tensors (`np.sum(t)`, `np.concatenate`) are ug's where it has them
    (see array_api.numpy_interop)."""
    return numpy_interop.array_function(func, types, args, kwargs, self)


def __array_namespace__(self: Tensor, api_version: str | None = None) -> Any:
    """The Array API namespace of ug tensors: the ug_core module itself (as numpy 2 does)."""
    return info.namespace(api_version)


# --- the namespace's functions as methods (numpy's signatures: out=, ddof, ...) ------------------


def real(self: Tensor) -> Tensor:
    """The real part (numpy's attribute): of a complex tensor, its part dtype's; of a real
    tensor, the tensor."""
    return elementwise.real(self)


def imag(self: Tensor) -> Tensor:
    """The imaginary part (numpy's attribute); zeros of a real tensor."""
    return elementwise.imag(self)


def conj(self: Tensor) -> Tensor:
    """The complex conjugate (numpy's method); a real tensor itself."""
    return elementwise.conj(self)


def argmax(self: Tensor, axis: int | None = None, keepdims: bool = False, *, out: Any = None) -> Tensor:
    return into(out, searching.argmax(self, axis=axis, keepdims=keepdims))


def argmin(self: Tensor, axis: int | None = None, keepdims: bool = False, *, out: Any = None) -> Tensor:
    return into(out, searching.argmin(self, axis=axis, keepdims=keepdims))


def var(self: Tensor, axis: Any = None, *, dtype: Any = None, out: Any = None, ddof: float = 0, keepdims: bool = False,
        correction: float | None = None) -> Tensor:
    """The variance (numpy's method: `ddof`, or the standard's name for it, `correction`)."""
    x = self if dtype is None else self.astype(dtype)
    correction = ddof if correction is None else correction
    return into(out, statistical.var(x, axis=axis, correction=correction, keepdims=keepdims))


def std(self: Tensor, axis: Any = None, *, dtype: Any = None, out: Any = None, ddof: float = 0, keepdims: bool = False,
        correction: float | None = None) -> Tensor:
    """The standard deviation (as var)."""
    return into(out, self.var(axis, dtype=dtype, ddof=ddof, keepdims=keepdims, correction=correction).sqrt())


def cumsum(self: Tensor, axis: int | None = None, dtype: Any = None, out: Any = None) -> Tensor:
    """numpy's cumsum method: the running sums along `axis`, of the flattened tensor for None."""
    x, axis = (self.reshape(-1), 0) if axis is None else (self, axis)
    return into(out, statistical.cumulative_sum(x, axis=axis, dtype=dtype))


def cumprod(self: Tensor, axis: int | None = None, dtype: Any = None, out: Any = None) -> Tensor:
    """numpy's cumprod method (as cumsum)."""
    x, axis = (self.reshape(-1), 0) if axis is None else (self, axis)
    return into(out, statistical.cumulative_prod(x, axis=axis, dtype=dtype))


def any(self: Tensor, axis: Any = None, *, out: Any = None, keepdims: bool = False) -> Tensor:
    return utility.any(self, axis=axis, keepdims=keepdims, out=out)


def all(self: Tensor, axis: Any = None, *, out: Any = None, keepdims: bool = False) -> Tensor:
    return utility.all(self, axis=axis, keepdims=keepdims, out=out)


def round(self: Tensor, decimals: int = 0, out: Any = None) -> Tensor:
    """numpy's round method (xarray calls it): ug_core.round(self, decimals)."""
    return into(out, elementwise.round(self, decimals))


# --- indexing: integer arrays and boolean masks are the namespace's (a gather, a scatter) -------

_ADVANCED = (Tensor, np.ndarray, list, bool, np.bool_)
"""Index items that make an index numpy's advanced indexing (integer arrays, boolean masks,
0-d ones such as True included): a gather or scatter, never a view."""


def _is_advanced(index: Any) -> bool:
    return isinstance(index, _ADVANCED) or (isinstance(index, tuple) and
                                            builtins.any(isinstance(i, _ADVANCED) for i in index))


def _advanced_items(index: Any) -> tuple[Any, ...]:
    """An advanced index as a tuple, a bool in it (x[True]) as the 0-d mask it is."""
    items = index if isinstance(index, tuple) else (index,)
    return tuple(np.asarray(i) if isinstance(i, (bool, np.bool_)) else i for i in items)


def __getitem__(self: Tensor, index: Any) -> Tensor:
    if isinstance(index, tuple) and builtins.any(isinstance(i, tuple) for i in index):
        # numpy: a tuple inside the index is a sequence, an integer array (dask's nanquantile
        # indexes with tuple(tensor))
        index = tuple(list(i) if isinstance(i, tuple) else i for i in index)
    if _is_advanced(index):   # integer arrays: a gather, a new value
        out = indexing.getitem(self, _advanced_items(index))
        return Tensor(out._node) if isinstance(out, TensorView) else out
    return tensor_index.basic_getitem(self, index)


def __setitem__(self: Tensor, index: Any, value: Any) -> None:
    if _is_advanced(index):   # integer arrays: a scatter (the last write wins)
        with write_lock:   # (the scatter's value is built on the tensor's current node)
            self._write(scatter.setitem(self, _advanced_items(index), value), None)
        return
    tensor_index.basic_setitem(self, index, value)


# --- complex arithmetic: real ops on the parts (array_api._complex) -----------------------------


def _complex_binary(self: Tensor, op: Op, other: Any, reverse: bool, common: np.dtype) -> Tensor:
    """A binary op whose operands promote to the complex dtype `common`: built from real ops
    on the parts (array_api._complex). An operand that is real (a real tensor, a Python
    int or float) stays real, in common's part dtype: Annex G's componentwise rule for it."""
    part = dtypes.part_dtype(common)
    if op is Op.POW and not reverse and _complex.small_integer(other):   # z ** n: multiplies, as numpy's
        return _complex.integer_power(self.astype(common), int(complex(other).real))

    def operand(v: Any) -> Node:
        if isinstance(v, Tensor):
            return graph.cast(v._node, common if v.dtype.kind == "c" else part)
        if not dtypes.is_scalar(v):
            return operand(tensor(v, device=self.device))
        dt = common if isinstance(v, (complex, np.complexfloating)) else part
        # a user's scalar: a kernel argument unless it folds (see scalars)
        return scalars.parameter(graph.const(dtypes.operand(v, dt).item(), dt, self.device))

    a, b = operand(self), operand(other)
    if reverse:
        a, b = b, a
    shape = broadcast_pair(a.shape, b.shape)
    return _complex.binary(op, Tensor(broadcast_node(a, shape)), Tensor(broadcast_node(b, shape)))


def _complex_unary(self: Tensor, op: Op) -> Tensor:
    """A unary op (Tensor._unary's) of a complex tensor."""
    return _complex.unary(op, self)


def _complex_reduce(self: Tensor, op: Op, axes: tuple[int, ...], keepdims: bool, dtype: np.dtype) -> Tensor:
    """A product of complex numbers (a tree of complex multiplies, array_api._complex);
    max and min are a TypeError (complex numbers are not ordered)."""
    if op is not Op.PROD:
        raise _complex.refused("max" if op is Op.RMAX else "min", dtype)
    x = self.astype(dtype)
    kept = [d for d in range(x.ndim) if d not in axes]
    rows = prod([x.shape[d] for d in kept])
    flat = x.permute(*kept, *axes).reshape(rows, prod([x.shape[d] for d in axes]))
    out = _complex.prod_rows(flat)
    shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape)) if keepdims else \
        tuple(x.shape[d] for d in kept)
    return out.reshape(shape)


# --- the bindings ---------------------------------------------------------------------------------

arith, reduce, index, io = tensor_arith, tensor_reduce, tensor_index, tensor_io

Tensor._binary = arith._binary
Tensor._unary = arith._unary
Tensor._float = arith._float
Tensor.__add__, Tensor.__radd__ = arith.__add__, arith.__radd__
Tensor.__sub__, Tensor.__rsub__ = arith.__sub__, arith.__rsub__
Tensor.__mul__, Tensor.__rmul__ = arith.__mul__, arith.__rmul__
Tensor.__truediv__, Tensor.__rtruediv__ = arith.__truediv__, arith.__rtruediv__
Tensor.__floordiv__, Tensor.__rfloordiv__ = arith.__floordiv__, arith.__rfloordiv__
Tensor.__mod__, Tensor.__rmod__ = arith.__mod__, arith.__rmod__
Tensor.__pow__, Tensor.__rpow__ = arith.__pow__, arith.__rpow__
Tensor.__matmul__, Tensor.__rmatmul__ = arith.__matmul__, arith.__rmatmul__
Tensor.__and__, Tensor.__rand__ = arith.__and__, arith.__rand__
# (mypy reads Tensor.__or__ as type.__or__, the `Tensor | None` of annotations)
Tensor.__or__ = arith.__or__  # type: ignore[assignment]
Tensor.__ror__ = arith.__ror__  # type: ignore[assignment]
Tensor.__xor__, Tensor.__rxor__ = arith.__xor__, arith.__rxor__
Tensor.__lshift__, Tensor.__rlshift__ = arith.__lshift__, arith.__rlshift__
Tensor.__rshift__, Tensor.__rrshift__ = arith.__rshift__, arith.__rrshift__
Tensor.__lt__, Tensor.__le__, Tensor.__gt__, Tensor.__ge__ = arith.__lt__, arith.__le__, arith.__gt__, arith.__ge__
Tensor.__eq__, Tensor.__ne__ = arith.__eq__, arith.__ne__
Tensor.__iadd__, Tensor.__isub__, Tensor.__imul__ = arith.__iadd__, arith.__isub__, arith.__imul__
Tensor.__itruediv__, Tensor.__ifloordiv__, Tensor.__imod__ = arith.__itruediv__, arith.__ifloordiv__, arith.__imod__
Tensor.__ipow__, Tensor.__imatmul__ = arith.__ipow__, arith.__imatmul__
Tensor.__iand__, Tensor.__ior__, Tensor.__ixor__ = arith.__iand__, arith.__ior__, arith.__ixor__
Tensor.__ilshift__, Tensor.__irshift__ = arith.__ilshift__, arith.__irshift__
Tensor.__neg__, Tensor.__pos__, Tensor.__abs__ = arith.__neg__, arith.__pos__, arith.__abs__
Tensor.__invert__ = arith.__invert__
Tensor.exp, Tensor.log, Tensor.sqrt = arith.exp, arith.log, arith.sqrt
Tensor.sin, Tensor.cos, Tensor.tanh, Tensor.abs = arith.sin, arith.cos, arith.tanh, arith.abs
Tensor.reciprocal = arith.reciprocal
Tensor.relu, Tensor.sigmoid, Tensor.gelu, Tensor.silu = arith.relu, arith.sigmoid, arith.gelu, arith.silu

Tensor._reduce = reduce._reduce
Tensor.sum, Tensor.prod, Tensor.mean = reduce.sum, reduce.prod, reduce.mean
Tensor.max, Tensor.min = reduce.max, reduce.min
Tensor.softmax, Tensor.log_softmax = reduce.softmax, reduce.log_softmax

Tensor.reshape, Tensor.permute, Tensor.transpose = index.reshape, index.permute, index.transpose
Tensor.broadcast_to, Tensor.squeeze = index.broadcast_to, index.squeeze
Tensor.expand_dims, Tensor.unsqueeze = index.expand_dims, index.unsqueeze
Tensor.flatten, Tensor.ravel = index.flatten, index.ravel
Tensor.assign = index.assign

Tensor.numpy, Tensor.__array__, Tensor.item = io.numpy, io.__array__, io.item
Tensor.__bool__, Tensor.__float__, Tensor.__int__ = io.__bool__, io.__float__, io.__int__
Tensor.__complex__, Tensor.__index__ = io.__complex__, io.__index__
Tensor.__dlpack__, Tensor.__dlpack_device__ = io.__dlpack__, io.__dlpack_device__
Tensor._host_memory = io._host_memory

Tensor.__array_ufunc__, Tensor.__array_function__ = __array_ufunc__, __array_function__
Tensor.__array_namespace__ = __array_namespace__
Tensor.argmax, Tensor.argmin = argmax, argmin
Tensor.var, Tensor.std = var, std
Tensor.cumsum, Tensor.cumprod = cumsum, cumprod
Tensor.any, Tensor.all = any, all
Tensor.round = round
Tensor.conj = Tensor.conjugate = conj
# (properties: setattr, which mypy does not check: test_imports checks every declared name is bound)
setattr(Tensor, "real", property(real))
setattr(Tensor, "imag", property(imag))
Tensor.__getitem__, Tensor.__setitem__ = __getitem__, __setitem__
Tensor._complex_binary, Tensor._complex_unary, Tensor._complex_reduce = _complex_binary, _complex_unary, \
    _complex_reduce

# numpy's aliasing rule for the methods that compute (see aliasing): wrapped once they are bound
aliasing.apply_methods(Tensor)
