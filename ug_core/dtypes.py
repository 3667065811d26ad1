"""Dtypes: which numpy dtypes ug supports and how results are typed.

numpy is the oracle for type promotion: the result dtype of an op on tensors is what
the numpy ufunc returns for empty arrays of the same dtypes. Scalars follow numpy 2 (NEP 50):
Python bools, ints and floats are "weak": they take the tensor's dtype when their kind fits,
exactly (a float64 tensor's 0.1 is float64's 0.1), and an int that dtype cannot hold is an
OverflowError; numpy scalars (np.int64(3), np.float32(0.5), a 0-d array) are typed: they
promote with the tensor's dtype as a 0-d array of theirs would (`operand`). A scalar written
into a tensor (`x[i] = v`, `full`, `pad`'s value, a scatter's values) must fit its dtype
(`written`).

Complex: complex64 and complex128 (pairs of float32 / float64, the real part first, as numpy
lays them out). Tensors promote as numpy's (float32 + complex64 is complex64, float64 +
complex64 complex128, an integer tensor + complex64 numpy's complex64 or complex128). A Python
complex is weak like a float: it takes a complex tensor's dtype, makes a float tensor's the
complex dtype of its width (float32 * 1j is complex64), and next to an int or bool tensor is
ug's default complex, complex64 (the complex of ug's default float, float32, where numpy 2
gives complex128, as it gives float64 for int * 1.0).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

SUPPORTED: tuple[np.dtype, ...] = tuple(
    np.dtype(name) for name in ("float32", "float64", "float16", "int8", "int16", "int32", "int64",
                                "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128")
)
_SUPPORTED_SET = frozenset(SUPPORTED)  # membership by hash: `in` on the tuple compares one by one
BOOL = np.dtype(bool)
# dtype.name runs numpy Python code (several us); kernel keys and schedule descriptions name
# the dtype of every expression node
_NAMES = {d: d.name for d in SUPPORTED}
# (min, max) of each integer dtype: np.iinfo takes about a microsecond, and comparing an int
# tensor with a Python int asks for it (beyond_range)
_INT_RANGES = {d: (int(np.iinfo(d).min), int(np.iinfo(d).max)) for d in SUPPORTED if d.kind in "iu"}
_FLOAT_MAX = {d: float(np.finfo(d).max) for d in SUPPORTED if d.kind == "f"}
COMPLEX64, COMPLEX128 = np.dtype(np.complex64), np.dtype(np.complex128)
DEFAULT_COMPLEX = COMPLEX64
# each complex dtype's part dtype (its real and imaginary parts), and back
_PART: dict[np.dtype, np.dtype] = {COMPLEX64: np.dtype(np.float32), COMPLEX128: np.dtype(np.float64)}
_COMPLEX_OF: dict[np.dtype, np.dtype] = {np.dtype(np.float16): COMPLEX64, np.dtype(np.float32): COMPLEX64, np.dtype(np.float64): COMPLEX128}


def is_complex(dt: np.dtype) -> bool:
    """Whether `dt` is complex64 or complex128."""
    return dt.kind == "c"


def part_dtype(dt: np.dtype) -> np.dtype:
    """The real dtype of a complex dtype's parts (complex64: float32); a real dtype itself."""
    return _PART.get(dt, dt)


def complex_of(dt: np.dtype) -> np.dtype:
    """The complex dtype whose parts are the float dtype `dt` (float16's is complex64, numpy's);
    a complex dtype itself; the default complex for ints and bools (ug's, see the module doc)."""
    if dt.kind == "c":
        return dt
    return _COMPLEX_OF.get(dt, DEFAULT_COMPLEX)


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


def is_weak(value: Any) -> bool:
    """Whether `value` is a Python bool, int, float or complex: a weak scalar. A numpy scalar is
    typed, np.float64 and np.complex128 too (subclasses of float and complex)."""
    return isinstance(value, (bool, int, float, complex)) and not isinstance(value, np.generic)


def scalar_dtype(value: Any, tensor_dtype: np.dtype) -> np.dtype:
    """The dtype an op of a tensor of `tensor_dtype` and the scalar `value` computes in (before
    the op's own rule, e.g. true_divide's float for ints). A Python scalar is weak: it takes the
    tensor's dtype when its kind fits, else the default dtype of its kind (an int next to bools:
    int64; a float next to ints: float32, ug's default float). A numpy scalar is typed (NEP 50):
    the two dtypes promote, as for a 0-d array (int8 + np.int64(300) is int64 [301 ...])."""
    if isinstance(value, np.generic):
        return promote(tensor_dtype, to_dtype(value.dtype))
    if isinstance(value, (bool, np.bool_)):
        return tensor_dtype
    if isinstance(value, (int, np.integer)):
        return tensor_dtype if tensor_dtype != BOOL else np.dtype(np.int64)
    if isinstance(value, (float, np.floating)):
        return tensor_dtype if tensor_dtype.kind in "fc" else np.dtype(np.float32)
    if isinstance(value, complex):
        return complex_of(tensor_dtype)
    raise TypeError(f"unsupported scalar {value!r} of type {type(value).__name__}")


def iinfo_range(dtype: np.dtype) -> tuple[int, int]:
    """(min, max) of the integer dtype `dtype`, as Python ints."""
    return _INT_RANGES[dtype]


def _check_int_range(value: int, dtype: np.dtype) -> None:
    low, high = _INT_RANGES[dtype]
    if not low <= value <= high:
        # numpy 2's message (np.int16(-32769), `a_int16[0] = -32769`, `a_uint8 + 300`)
        raise OverflowError(f"Python integer {value} out of bounds for {dtype.name}")


def operand(value: Any, dtype: np.dtype) -> np.generic:
    """The scalar `value` (a Python or numpy one) as a numpy scalar of `dtype`, the dtype an op
    computes in (`scalar_dtype`): exact wherever `dtype` holds the value (a Python float is not
    rounded to float32 on its way into float64 work, an int above 2**63 fits uint64); a Python
    int outside an integer dtype is numpy 2's OverflowError; a float beyond a float dtype's range
    is inf (no warning: ug raises no floating-point warnings)."""
    if dtype.kind in "iu" and isinstance(value, int) and not isinstance(value, (bool, np.generic)):
        _check_int_range(value, dtype)
    return _converted(value, dtype)


def _converted(value: Any, dtype: np.dtype) -> np.generic:
    """dtype.type(value), without numpy's overflow warning for a float beyond dtype's range (inf);
    the warning state is set only for such values (it costs more than the conversion)."""
    if dtype.kind == "c":
        if isinstance(value, (complex, np.complexfloating)):   # each part rounds on its own
            part = _PART[dtype]
            return dtype.type(complex(_converted(value.real, part), _converted(value.imag, part)))
        return dtype.type(_converted(value, _PART[dtype]))
    if dtype.kind != "f" or isinstance(value, (bool, np.bool_)):
        return dtype.type(value)
    # as a Python number (abs of int64's min wraps; a numpy float would convert the bound to its
    # own dtype, NEP 50, and overflow itself)
    if abs(int(value) if isinstance(value, np.integer) else float(value) if isinstance(value, np.floating) else value) \
            > _FLOAT_MAX[dtype]:
        with np.errstate(all="ignore"):
            return dtype.type(value)
    return dtype.type(value)


def written(value: Any, dtype: np.dtype) -> np.generic:
    """The scalar `value` (a Python or numpy one) as the element of `dtype` a write stores for it
    (`x[i] = v`, `assign`, `full`, `pad`'s value, a scatter's values): numpy's `a[i] = v`. An
    integer, Python's or numpy's, must fit an integer dtype (OverflowError, where numpy's `full`
    and mask writes would wrap a numpy int silently); a float written to an integer dtype is
    truncated toward zero and must then fit (NaN: ValueError, inf: OverflowError, as Python's
    int()); a bool dtype stores the value's truth; floats round to the dtype (beyond its range:
    inf); a complex value is written into a complex dtype only (numpy's TypeError for a real one).
    An array (not a scalar) is cast instead, as numpy casts one (wrapping)."""
    if isinstance(value, (complex, np.complexfloating)) and dtype.kind != "c":
        raise TypeError(f"cannot write the complex value {value!r} into a {dtype.name} tensor (numpy's rule: "
                        f"take its .real or .imag)")
    if dtype == BOOL:
        return np.bool_(bool(value))
    if dtype.kind in "iu" and not isinstance(value, (bool, np.bool_)):
        if not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"cannot write {value!r} of type {type(value).__name__} into a {dtype.name} tensor")
        number = int(value)   # floats toward zero; raises for NaN (ValueError) and inf (OverflowError)
        _check_int_range(number, dtype)
        return dtype.type(number)
    return _converted(value, dtype)


def beyond_range(value: Any, dtype: np.dtype) -> int:
    """1 (-1) if `value` is a Python int above (below) the range of the int dtype `dtype`, else 0
    (numpy 2 refuses such a weak scalar in arithmetic, an OverflowError, but compares by value)."""
    if type(value) is not int or dtype.kind not in "iu":
        return 0
    low, high = _INT_RANGES[dtype]
    return 1 if value > high else -1 if value < low else 0


def default_dtype(value: Any) -> np.dtype:
    """dtype for a bare scalar or nested list turned into a tensor: a numpy scalar's own (it is
    typed), else ug's defaults (bool, int64, float32)."""
    if isinstance(value, np.generic):
        return to_dtype(value.dtype)
    if isinstance(value, (bool, np.bool_)):
        return BOOL
    if isinstance(value, (int, np.integer)):
        return np.dtype(np.int64)
    if isinstance(value, (float, np.floating)):
        return np.dtype(np.float32)
    if isinstance(value, complex):
        return DEFAULT_COMPLEX
    raise TypeError(f"unsupported scalar {value!r} of type {type(value).__name__}")


def is_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, complex, np.bool_, np.integer, np.floating, np.complexfloating))


def identity(reduce_name: str, dtype: np.dtype) -> Any:
    """The starting value of a reduction accumulator."""
    if reduce_name == "sum":
        return dtype.type(0)
    if reduce_name == "prod":
        return dtype.type(1)
    if dtype.kind == "c":
        raise TypeError(f"{reduce_name} is not defined on {dtype.name} (complex numbers are not ordered)")
    if dtype.kind == "f":
        return dtype.type(-np.inf if reduce_name == "max" else np.inf)
    if dtype == BOOL:
        return reduce_name != "max"
    low, high = _INT_RANGES[dtype]
    return dtype.type(low if reduce_name == "max" else high)
