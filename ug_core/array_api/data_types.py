"""Data types of the Array API standard: the dtype objects, `astype`, `can_cast`, `result_type`,
`finfo`, `iinfo`, `isdtype`.

ug's dtypes are numpy dtype objects (complex64 and complex128 included: see ug_core.dtypes for
how complex values are promoted and ug_core.array_api._complex for how they are computed). Promotion follows the standard's table (numpy 2's, which
agrees with it wherever the standard specifies a result; across kinds it is numpy's answer) and
never looks at values; Python scalars are "weak": they take the other operand's dtype when their
kind fits (`dtypes.scalar_dtype`), and numpy scalars are typed, as 0-d arrays (NEP 50)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes
from ..tensor import Tensor, snapshot
from .creation import asarray

bool_ = np.dtype("bool")
int8, int16, int32, int64 = map(np.dtype, ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = map(np.dtype, ("uint8", "uint16", "uint32", "uint64"))
float16, float32, float64 = map(np.dtype, ("float16", "float32", "float64"))
complex64, complex128 = map(np.dtype, ("complex64", "complex128"))


def _dtype_of(x: Any, what: str) -> np.dtype:
    """The dtype of an array or a dtype argument (a supported one: TypeError otherwise)."""
    if isinstance(x, Tensor):
        return x.dtype
    if isinstance(x, np.ndarray):
        return dtypes.to_dtype(x.dtype)
    if dtypes.is_scalar(x) or isinstance(x, complex) or x is None:
        raise TypeError(f"{what}: expected an array or a dtype, got {x!r}")
    return dtypes.to_dtype(x)


def astype(x: Tensor, dtype: Any, /, *, copy: bool = True, device: str | None = None) -> Tensor:
    """x converted to `dtype` (and moved to `device`): a new value (a snapshot, as ug.tensor:
    later writes to memory x shares with another library do not show in it), or with copy=False
    and nothing to convert, x itself (numpy's astype)."""
    if isinstance(x, (np.ndarray, np.generic)):
        # (xarray converts a numpy scalar fill value with xp.astype): a tensor of it, converted
        return asarray(x, dtype=dtype, device=device)
    if not isinstance(x, Tensor):
        raise TypeError(f"astype: expected a ug Tensor, got {type(x).__name__}")
    out = x if dtypes.to_dtype(dtype) == x.dtype else x.astype(dtype)
    if device is not None:
        out = out.to_device(device)
    if copy:
        return snapshot(out)
    return out


def can_cast(from_: Any, to: Any, /) -> bool:
    """Whether `from_` (a dtype or an array) converts to `to` without losing values: numpy's
    "safe" casting, which agrees with the standard's promotion table within a kind."""
    return bool(np.can_cast(_dtype_of(from_, "can_cast"), _dtype_of(to, "can_cast"), "safe"))


class _ScalarsOnly(ValueError, TypeError):
    """result_type of Python scalars alone: a ValueError (the standard needs an array or a dtype),
    and a TypeError too, which is what xarray takes for "no dtype numpy would promote" when it
    asks for each value's type one at a time (xarray.core.dtypes.should_promote_to_object)."""


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """The dtype of an op on these arrays, dtypes and scalars: the promotion of the arrays, dtypes
    and numpy scalars (typed, NEP 50), then each Python scalar taken weakly (it needs at least
    one array, dtype or numpy scalar)."""
    def python_scalar(x: Any) -> bool:
        return dtypes.is_weak(x) or isinstance(x, complex)

    def typed_dtype(x: Any) -> np.dtype:
        return dtypes.to_dtype(x.dtype) if isinstance(x, np.generic) else _dtype_of(x, "result_type")

    scalars = [x for x in arrays_and_dtypes if python_scalar(x)]
    typed = [typed_dtype(x) for x in arrays_and_dtypes if not python_scalar(x)]
    if not typed:
        raise _ScalarsOnly("result_type needs at least one array or dtype (Python scalars alone have no dtype)")
    out = typed[0]
    for dt in typed[1:]:
        out = dtypes.promote(out, dt)
    for value in scalars:
        out = dtypes.scalar_dtype(value, out)
    return out


@dataclass(frozen=True)
class finfo_object:
    """Limits of a floating dtype, as Python numbers (the standard's finfo object)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: np.dtype


@dataclass(frozen=True)
class iinfo_object:
    """Limits of an integer dtype, as Python ints (the standard's iinfo object)."""

    bits: int
    max: int
    min: int
    dtype: np.dtype


def finfo(type: Any, /) -> finfo_object:
    """The limits of a floating dtype; of a complex one, those of its parts' dtype (the
    standard's: finfo(complex64) is float32's, its `dtype` float32)."""
    dt = _dtype_of(type, "finfo")
    if dt.kind not in "fc":
        raise ValueError(f"finfo needs a floating dtype, got {dt.name}")
    dt = dtypes.part_dtype(dt)
    info = np.finfo(dt)
    return finfo_object(int(info.bits), float(info.eps), float(info.max), float(info.min),
                        float(info.smallest_normal), dt)


def iinfo(type: Any, /) -> iinfo_object:
    dt = _dtype_of(type, "iinfo")
    if dt.kind not in "iu":
        raise ValueError(f"iinfo needs an integer dtype, got {dt.name}")
    info = np.iinfo(dt)
    return iinfo_object(int(info.bits), int(info.max), int(info.min), dt)


_KINDS = {
    "bool": "b",
    "signed integer": "i",
    "unsigned integer": "u",
    "integral": "iu",
    "real floating": "f",
    "complex floating": "c",
    "numeric": "iufc",
}


def isdtype(dtype: Any, kind: Any) -> bool:
    """Whether `dtype` is of `kind`: a dtype, one of the standard's kind names, or a tuple of them."""
    if not isinstance(dtype, np.dtype):
        raise TypeError(f"isdtype: expected a dtype, got {dtype!r}")
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}; kinds are {', '.join(map(repr, _KINDS))}")
        return dtype.kind in _KINDS[kind]
    if isinstance(kind, np.dtype):
        return dtype == kind
    raise TypeError(f"isdtype: kind must be a dtype, a kind name or a tuple of them, got {kind!r}")


__all__ = ["astype", "bool_", "can_cast", "complex64", "complex128", "finfo", "float16", "float32", "float64", "iinfo", "int8", "int16", "int32",
           "int64", "isdtype", "result_type", "uint8", "uint16", "uint32", "uint64"]
