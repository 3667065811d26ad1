"""Dtypes: which numpy dtypes ug supports and how results are typed.

numpy is the oracle for type promotion: the result dtype of an op on tensors is what
the numpy ufunc returns for empty arrays of the same dtypes. Python scalars are
"weak": they take the tensor's dtype when their kind fits.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

SUPPORTED: tuple[np.dtype, ...] = tuple(
    np.dtype(name) for name in ("float32", "float64", "float16", "int8", "int16", "int32", "int64",
                                "uint8", "uint16", "uint32", "uint64", "bool")
)
_SUPPORTED_SET = frozenset(SUPPORTED)  # membership by hash: `in` on the tuple compares one by one
BOOL = np.dtype(bool)
# dtype.name runs numpy Python code (several us); kernel keys and schedule descriptions name
# the dtype of every expression node
_NAMES = {d: d.name for d in SUPPORTED}
# (min, max) of each integer dtype: np.iinfo takes about a microsecond, and comparing an int
# tensor with a Python int asks for it (beyond_range)
_INT_RANGES = {d: (int(np.iinfo(d).min), int(np.iinfo(d).max)) for d in SUPPORTED if d.kind in "iu"}


def name(dt: np.dtype) -> str:
    """dt.name, without its cost for the supported dtypes."""
    return _NAMES.get(dt) or dt.name


def to_dtype(dtype: Any) -> np.dtype:
    """Normalize a user-given dtype (np.float32, "float32", np.dtype) or raise TypeError."""
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"not a dtype: {dtype!r}") from e
    if not dt.isnative:  # (">f4", a big-endian array's dtype): ug's values are in the machine's order
        dt = dt.newbyteorder("=")
    if dt not in SUPPORTED:
        names = ", ".join(d.name for d in SUPPORTED)
        raise TypeError(f"unsupported dtype {dt.name}; ug supports {names}")
    return dt


def _checked(dt: np.dtype, what: Callable[[], str]) -> np.dtype:
    if dt not in _SUPPORTED_SET:
        raise TypeError(f"{what()} would produce unsupported dtype {dt.name}")
    return dt


# Every op asks for its result dtype, and asking numpy costs 10-30 us (an errstate, two empty
# arrays, a ufunc call; a dtype's .name alone is several us of numpy Python code), which was
# most of the time it took to build an op. The answers depend only on the ufunc and the dtypes,
# and there are few of those, so they are kept.
_UFUNC_RESULTS: dict[tuple[Any, ...], np.dtype] = {}
_PROMOTIONS: dict[tuple[np.dtype, np.dtype], np.dtype] = {}


def ufunc_result(ufunc: Callable[..., Any], *dtypes: np.dtype) -> np.dtype:
    """The dtype numpy gives for `ufunc` applied to arrays of these dtypes."""
    key = (ufunc, *dtypes)
    dt = _UFUNC_RESULTS.get(key)
    if dt is None:
        with np.errstate(all="ignore"):
            out = ufunc(*(np.empty(0, dtype=d) for d in dtypes))
        dt = _checked(np.asarray(out).dtype,
                      lambda: f"{getattr(ufunc, '__name__', ufunc)}{tuple(d.name for d in dtypes)}")
        _UFUNC_RESULTS[key] = dt
    return dt


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    dt = _PROMOTIONS.get((a, b))
    if dt is None:
        dt = _checked(np.promote_types(a, b), lambda: f"promoting {a.name} with {b.name}")
        _PROMOTIONS[a, b] = dt
    return dt


def scalar_dtype(value: Any, tensor_dtype: np.dtype) -> np.dtype:
    """The dtype a Python scalar takes next to a tensor of `tensor_dtype` (weak scalar rule)."""
    if isinstance(value, (bool, np.bool_)):
        return tensor_dtype
    if isinstance(value, (int, np.integer)):
        return tensor_dtype if tensor_dtype != BOOL else np.dtype(np.int64)
    if isinstance(value, (float, np.floating)):
        return tensor_dtype if tensor_dtype.kind == "f" else np.dtype(np.float32)
    raise TypeError(f"unsupported scalar {value!r} of type {type(value).__name__}")


def beyond_range(value: Any, dtype: np.dtype) -> int:
    """1 (-1) if `value` is a Python int above (below) the range of the int dtype `dtype`, else 0
    (numpy 2 refuses such a weak scalar in arithmetic, an OverflowError, but compares by value)."""
    if type(value) is not int or dtype.kind not in "iu":
        return 0
    low, high = _INT_RANGES[dtype]
    return 1 if value > high else -1 if value < low else 0


def default_dtype(value: Any) -> np.dtype:
    """dtype for a bare Python scalar or nested list turned into a tensor."""
    if isinstance(value, (bool, np.bool_)):
        return BOOL
    if isinstance(value, (int, np.integer)):
        return np.dtype(np.int64)
    if isinstance(value, (float, np.floating)):
        return np.dtype(np.float32)
    raise TypeError(f"unsupported scalar {value!r} of type {type(value).__name__}")


def is_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def identity(reduce_name: str, dtype: np.dtype) -> Any:
    """The starting value of a reduction accumulator."""
    if reduce_name == "sum":
        return dtype.type(0)
    if reduce_name == "prod":
        return dtype.type(1)
    if dtype.kind == "f":
        return dtype.type(-np.inf if reduce_name == "max" else np.inf)
    if dtype == BOOL:
        return reduce_name != "max"
    low, high = _INT_RANGES[dtype]
    return dtype.type(low if reduce_name == "max" else high)
