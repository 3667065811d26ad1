"""Scalars and dtypes on every device, against numpy 2 (NEP 50).

A Python bool, int or float is weak: it takes the tensor's dtype, exactly (a float64 tensor's
0.1 is float64's 0.1, not float32's; an int above 2**63 fits uint64), in every entry point that
takes one: operators, comparisons, where, full, clip, pad's value, setitem (basic, integer-array
and mask writes), assign, scatter_add / index_add values, in-place operators. An int the dtype
cannot hold is an OverflowError when the op is built (numpy 2's), and the tensor written keeps
its value. numpy scalars (and 0-d arrays) are typed: they promote as arrays of their dtype do.
Also: searchsorted compares in the promoted dtype, cumulative_sum's initial value is +0.0, and
float16 mean / var / std accumulate and divide in float32."""
from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np
import pytest

import ug_core as ug
from ug_core import dtypes
from ug_core.testing.fixtures import supports
from ug_core.testing.test_semantics import same_values

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
INTS = [np.dtype(n) for n in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")]
ALL = [d for d in dtypes.SUPPORTED if d.kind != "c"]   # (complex scalars: test_complex.py)


def assert_same(got: Any, expected: np.ndarray, what: str = "") -> None:
    """Same shape, dtype and values (the sign of zero included, NaN equal to NaN)."""
    got = got.numpy() if isinstance(got, ug.Tensor) else np.asarray(got)
    expected = np.asarray(expected)
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != numpy's {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != numpy's {expected.shape}"
    bad = ~same_values(got, expected)
    assert not bad.any(), f"{what}: got {got[bad][:5].tolist()} where numpy has {expected[bad][:5].tolist()}"


def extremes(dt: np.dtype) -> list[Any]:
    """Python scalars of dt's kind that a narrower dtype of the kind cannot hold, dt's extremes."""
    if dt == dtypes.BOOL:
        return [True, False]
    if dt.kind == "f":
        info = np.finfo(dt)
        values = [0.1, 1 / 3, float(info.max), float(info.smallest_subnormal), -float(info.tiny), -0.0]
        return values + ([0.1 + 2**-40, 1e300, 5e-324, -(2.0**-1060)] if dt == F64 else [])
    info = np.iinfo(dt)
    values = [int(info.max), int(info.min), int(info.max) - 1]
    if dt.itemsize == 8:
        values += [2**40 + 1, 2**53 + 1, 2**63 + 5] if dt.kind == "u" else [2**40 + 1, -(2**53) - 1, -(2**62) - 3]
    return values


def base(dt: np.dtype) -> np.ndarray:
    """A (2, 3) operand: small values of dt."""
    return (np.arange(6).reshape(2, 3) % 2 == 0) if dt == dtypes.BOOL else np.arange(6, dtype=dt).reshape(2, 3)


MASK = np.array([[True, False, True], [False, True, False]])
ROWS = np.array([False, True])
IDX = np.array([[2, 0], [1, 2]])   # scatter_add along axis 1: distinct slots per row


def _set(index: Any) -> tuple[Callable, Callable]:
    def ug_fn(x, v):
        x[ug.tensor(index, device=x.device) if isinstance(index, list) else index] = v
        return x

    def np_fn(a, v):
        a = a.copy()
        a[np.array(index) if isinstance(index, list) else index] = v
        return a
    return ug_fn, np_fn


def _np_scatter_add(a: np.ndarray, v: Any) -> np.ndarray:
    out = a.copy()
    for i in range(IDX.shape[0]):
        for j in range(IDX.shape[1]):
            out[i, IDX[i, j]] += v
    return out


def _np_index_add(a: np.ndarray, v: Any) -> np.ndarray:
    out = a.copy()
    out[:, [0, 2]] += v
    return out


def _iadd(x, v):
    x += v
    return x


def _np_iadd(a, v):
    a = a.copy()
    a += v
    return a


# name -> (ug(x, v), numpy(a, v)); each takes a (2, 3) tensor / array and a scalar
ENTRY_POINTS: dict[str, tuple[Callable, Callable]] = {
    "x + v": (operator.add, operator.add),
    "v + x": (lambda x, v: v + x, lambda a, v: v + a),
    "v - x": (lambda x, v: v - x, lambda a, v: v - a),
    "x == v": (operator.eq, operator.eq),
    "x < v": (operator.lt, operator.lt),
    "maximum": (ug.maximum, np.maximum),
    "x += v": (_iadd, _np_iadd),
    "x[1, 2] = v": _set((1, 2)),
    "x[:, 1:] = v": _set((slice(None), slice(1, None))),
    "x[0, :2] = [v, v]": (lambda x, v: _set((0, slice(None, 2)))[0](x, [v, v]),
                          lambda a, v: _set((0, slice(None, 2)))[1](a, [v, v])),
    "x[int array] = v": _set((np.array([1, 0, 1]), np.array([2, 0, 0]))),
    "x[int tensor] = v": _set([0, 1, 0]),
    "x[mask] = v": _set(MASK),
    "x[row mask] = v": _set(ROWS),
    "x.assign(v)": (lambda x, v: x.assign(v), lambda a, v: np.full_like(a, v)),
    "scatter_add": (lambda x, v: ug.scatter_add(x, 1, IDX, v), _np_scatter_add),
    "index_add": (lambda x, v: ug.index_add(x, 1, [0, 2], v), _np_index_add),
    "where(m, v, x)": (lambda x, v: ug.where(ug.asarray(MASK, device=x.device), v, x),
                       lambda a, v: np.where(MASK, v, a)),
    "where(m, x, v)": (lambda x, v: ug.where(ug.asarray(MASK, device=x.device), x, v),
                       lambda a, v: np.where(MASK, a, v)),
    "full": (lambda x, v: ug.full(x.shape, v, x.dtype, device=x.device), lambda a, v: np.full(a.shape, v, a.dtype)),
    "full_like": (lambda x, v: ug.full_like(x, v), lambda a, v: np.full_like(a, v)),
    "clip(x, v)": (lambda x, v: ug.clip(x, v, None), lambda a, v: np.clip(a, v, None)),
    "clip(x, None, v)": (lambda x, v: ug.clip(x, None, v), lambda a, v: np.clip(a, None, v)),
    "pad": (lambda x, v: ug.pad(x, 1, constant_value=v), lambda a, v: np.pad(a, 1, constant_values=v)),
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("dt", ALL, ids=lambda d: d.name)
def test_weak_scalars_are_exact(device, require_dtype, dt, entry):
    """Every entry point takes a Python scalar in the tensor's dtype, exactly: numpy's results,
    bit for bit, for values a narrower dtype (float32, int32, int64 for uint64) cannot hold;
    where numpy refuses (bool - bool), ug raises the same exception."""
    require_dtype(dt)
    ug_fn, np_fn = ENTRY_POINTS[entry]
    a = base(dt)
    for v in extremes(dt):
        if (entry == "maximum" or entry.startswith("clip")) and v == 0 and dt.kind == "f":
            continue   # (numpy's maximum(0.0, -0.0) is -0.0; ug's orders -0.0 < +0.0, IEEE 754-2019's)
        try:
            with np.errstate(all="ignore"):
                expected = np_fn(a, v)
        except (TypeError, ValueError) as e:
            with pytest.raises(type(e)):
                ug_fn(ug.tensor(a, device=device), v)
            continue
        assert_same(ug_fn(ug.tensor(a, device=device), v), expected, f"{entry} with {v!r} ({dt.name})")


def test_scatter_add_of_a_python_float_in_float64(device):
    """The issue's case: 0.001 added to float64 values is float64's 0.001 (it was float32's,
    0.0010000000474974513); a slot's values are summed first, then added (see ug_core.array_api.scatter)."""
    x = ug.exp(ug.tensor(np.zeros((2, 4)), device=device))
    got = ug.scatter_add(x, -1, np.array([[0, 3], [1, 1]]), 0.001).numpy()
    assert got[0, 0] == 1.0 + 0.001 and got[1, 1] == 1.0 + (0.001 + 0.001) and got[0, 1] == 1.0


# --- out-of-range Python ints ------------------------------------------------------------------

# name -> build(x, v) for an integer tensor x of shape (2, 3): each must raise OverflowError
OVERFLOWING: dict[str, Callable] = {
    name: fn for name, (fn, _) in ENTRY_POINTS.items()
    if name not in ("x == v", "x < v", "clip(x, v)", "clip(x, None, v)")   # (numpy compares by value; clip below)
}
OVERFLOWING.update({
    "x - v": operator.sub, "x * v": operator.mul, "x // v": operator.floordiv, "x & v": operator.and_,
    "minimum": ug.minimum,
})


@pytest.mark.parametrize("entry", list(OVERFLOWING))
@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_out_of_range_ints_raise(device, require_dtype, dt, entry):
    """numpy 2's OverflowError for a Python int the dtype cannot hold, in every entry point,
    raised at the call; a tensor being written keeps its value (`a_int16[i] = -32769` was
    stored wrapped, as 32767)."""
    require_dtype(dt)
    info = np.iinfo(dt)
    a = base(dt)
    for v in (int(info.max) + 1, int(info.min) - 1, 2**64, -(2**63) - 1):
        x = ug.tensor(a, device=device)
        # (numpy's own message for a list's int64: "Python int too large to convert to C long")
        with pytest.raises(OverflowError, match="out of bounds|too large"):
            OVERFLOWING[entry](x, v)
        assert_same(x, a, f"{entry} with {v} left x")


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_out_of_range_ints_compare_and_clip_as_numpy(device, require_dtype, dt):
    """numpy 2 compares a Python int beyond the dtype by value (uint8 < 300: all True) and clip
    ignores a bound beyond the range that limits nothing; one that would replace every element
    by a value the dtype cannot hold is an OverflowError."""
    require_dtype(dt)
    info = np.iinfo(dt)
    a = base(dt)
    x = ug.tensor(a, device=device)
    for v in (int(info.max) + 1, int(info.min) - 1, 2**70, -(2**70)):
        for name, op in (("<", operator.lt), ("<=", operator.le), (">", operator.gt), (">=", operator.ge),
                         ("==", operator.eq), ("!=", operator.ne)):
            assert_same(op(x, v), op(a, v), f"x {name} {v}")
            assert_same(op(v, x), op(v, a), f"{v} {name} x")
    above, below = int(info.max) + 1, int(info.min) - 1
    assert_same(ug.clip(x, below, above), np.clip(a, below, above), "clip beyond both ends")
    assert_same(ug.clip(x, 1, above), np.clip(a, 1, above), "clip(x, 1, above)")
    assert_same(ug.clip(x, below, 3), np.clip(a, below, 3), "clip(x, below, 3)")
    with pytest.raises(OverflowError):
        ug.clip(x, above, None)
    with pytest.raises(OverflowError):
        ug.clip(x, None, below)


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_written_numpy_scalars_must_fit(device, require_dtype, dt):
    """A numpy integer written into a narrower integer tensor must fit too (numpy's `a[i] = v`
    raises; its `full` and mask writes would wrap it silently): a write stores the value or
    refuses it. An array is cast, as numpy casts one."""
    require_dtype(dt)
    info = np.iinfo(dt)
    a = base(dt)
    big = np.uint64(int(info.max) + 1) if int(info.max) + 1 < 2**64 else None
    small = np.int64(int(info.min) - 1) if int(info.min) - 1 >= -(2**63) else None
    for v in (big, small):
        if v is None:
            continue
        for name in ("x[1, 2] = v", "x[int array] = v", "x[mask] = v", "full", "pad", "scatter_add", "x.assign(v)"):
            x = ug.tensor(a, device=device)
            with pytest.raises(OverflowError):
                ENTRY_POINTS[name][0](x, v)
            assert_same(x, a, f"{name} with {v!r} left x")
    x = ug.tensor(a, device=device)
    if dt.itemsize == 8 and dt.kind == "i" and not supports(device, np.uint64):
        return   # (the 0-d array written would be a uint64 one)
    if dt.itemsize < 8:
        wide = np.array(int(info.max) + 1, np.int64)
    else:
        wide = np.array(-1, np.int64) if dt.kind == "u" else np.array(2**64 - 1, np.uint64)
    x[0, 0] = wide   # an array, not a scalar: cast (wrapped), as numpy casts it
    expected = a.copy()
    expected[0, 0] = wide
    assert_same(x, expected, "a 0-d array written")


def test_written_floats_into_ints_as_numpy(device, require_dtype):
    """A float written into an integer tensor: truncated toward zero, then it must fit (numpy's
    `a[i] = v`); NaN is a ValueError, inf an OverflowError."""
    require_dtype(np.uint8)
    a = np.zeros(4, np.uint8)
    x = ug.tensor(a, device=device)
    x[0] = 1.9
    x[1] = -0.5
    x[np.array([2])] = 254.99
    assert_same(x, np.array([1, 0, 254, 0], np.uint8), "float writes")
    for v, error in ((-1.5, OverflowError), (256.0, OverflowError), (float("nan"), ValueError),
                     (float("inf"), OverflowError)):
        for write in (lambda t: t.__setitem__(3, v), lambda t: t.__setitem__(np.array([3]), v),
                      lambda t: ug.full(3, v, np.uint8, device=device)):
            with pytest.raises(error):
                write(x)
    assert_same(x, np.array([1, 0, 254, 0], np.uint8), "after refused writes")


# --- numpy scalars are typed ---------------------------------------------------------------------

_BINARY: dict[str, Callable] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow, "<": operator.lt, "==": operator.eq, "!=": operator.ne,
    "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "r+": lambda a, b: b + a, "r-": lambda a, b: b - a, "r<": lambda a, b: b < a, "r*": lambda a, b: b * a,
}
_FUNCTIONS: dict[str, tuple[Callable, Callable]] = {
    "maximum": (ug.maximum, np.maximum), "minimum": (ug.minimum, np.minimum),
    "where(m, x, s)": (lambda x, s: ug.where(ug.asarray(MASK[0], device=x.device), x, s),
                       lambda a, s: np.where(MASK[0], a, s)),
    "where(m, s, x)": (lambda x, s: ug.where(ug.asarray(MASK[0], device=x.device), s, x),
                       lambda a, s: np.where(MASK[0], s, a)),
}
# functions of floats (the standard's; numpy's take ints too, ug's refuse them)
_FLOAT_FUNCTIONS: dict[str, tuple[Callable, Callable]] = {
    "copysign": (ug.copysign, np.copysign), "atan2": (ug.atan2, np.arctan2), "hypot": (ug.hypot, np.hypot),
}


def _operand(dt: np.dtype) -> np.ndarray:
    return np.array([True, False, True]) if dt == dtypes.BOOL else np.array([0, 1, 5], dt)


def _numpy_scalar(dt: np.dtype) -> np.generic:
    return np.bool_(True) if dt == dtypes.BOOL else dt.type(3) if dt.kind in "iu" else dt.type(1.5)


def _compare_with_numpy(device: str, x_dtype: np.dtype, scalar: Any, what: str) -> None:
    """Every binary operator and function of an x_dtype tensor with `scalar` (a numpy scalar or
    a 0-d array): numpy's dtype and values, or numpy's exception type."""
    a = _operand(x_dtype)
    x = ug.tensor(a, device=device)
    cases = {name: (op, op) for name, op in _BINARY.items()} | _FUNCTIONS
    if x_dtype.kind == "f" and np.asarray(scalar).dtype.kind == "f":
        cases |= _FLOAT_FUNCTIONS
    built, expected = [], []
    for name, (ug_fn, np_fn) in cases.items():
        if name in ("<<", ">>") and x_dtype == dtypes.BOOL and np.asarray(scalar).dtype == dtypes.BOOL:
            with pytest.raises(TypeError):   # (numpy shifts bools as int8; ug's shifts, the standard's, take ints)
                ug_fn(x, scalar)
            continue
        try:
            with np.errstate(all="ignore"):
                want = np.asarray(np_fn(a, scalar))
        except (TypeError, ValueError, OverflowError) as e:
            with pytest.raises(type(e)):
                ug_fn(x, scalar)
            continue
        if not supports(device, want.dtype):   # (a result of a dtype the device lacks: the documented TypeError)
            with pytest.raises(TypeError, match="does not support dtype"):
                ug_fn(x, scalar)
            continue
        if name in ("copysign", "atan2", "hypot") and want.dtype == F16:
            # (numpy's float16 loop: in float32, rounded once)
            want = np.asarray(np_fn(a.astype(F32), np.asarray(scalar).astype(F32))).astype(F16)
        got = ug_fn(x, scalar)
        assert got.dtype == want.dtype, f"{a.dtype} {name} {what}: dtype {got.dtype}, numpy's {want.dtype}"
        built.append((name, got))
        expected.append(want)
    ug.realize(*(t for _, t in built))
    for (name, got), want in zip(built, expected):
        if name in ("atan2", "hypot") and want.dtype.kind == "f":   # (ug's own math: within a few ulp of numpy's)
            np.testing.assert_allclose(got.numpy(), want, rtol=4 * np.finfo(want.dtype).eps)
            continue
        assert_same(got, want, f"{a.dtype} {name} {what}")


@pytest.mark.parametrize("scalar_dtype", ALL, ids=lambda d: d.name)
@pytest.mark.parametrize("x_dtype", ALL, ids=lambda d: d.name)
def test_numpy_scalars_are_typed(device, require_dtype, x_dtype, scalar_dtype):
    """A numpy scalar promotes as an array of its dtype (NEP 50): every operator and function,
    every pair of dtypes, against numpy 2's dtypes and values."""
    require_dtype(x_dtype, scalar_dtype)
    _compare_with_numpy(device, x_dtype, _numpy_scalar(scalar_dtype), f"np.{scalar_dtype.name} scalar")


@pytest.mark.parametrize("x_dtype,scalar_dtype", [(np.dtype("int8"), np.dtype("int64")), (F32, F64),
                                                   (F16, F32), (np.dtype("uint8"), np.dtype("int16")),
                                                   (np.dtype("uint64"), np.dtype("int64")), (dtypes.BOOL, F16)],
                         ids=str)
def test_zero_d_arrays_are_typed(device, require_dtype, x_dtype, scalar_dtype):
    """A 0-d numpy array promotes as the numpy scalar of its dtype does."""
    require_dtype(x_dtype, scalar_dtype)
    _compare_with_numpy(device, x_dtype, np.array(_numpy_scalar(scalar_dtype)), f"0-d {scalar_dtype.name} array")


def test_issue_cases(device, require_dtype):
    """The issue's examples, with numpy's results."""
    require_dtype(np.int8, np.uint8, np.uint64)
    i8 = ug.tensor(np.array([1, 2], np.int8), device=device)
    assert_same(i8 < np.int64(1000), np.array([True, True]), "int8 < np.int64(1000)")
    assert_same(i8 + np.int64(300), np.array([301, 302], np.int64), "int8 + np.int64(300)")
    f32 = ug.tensor(np.array([1, 2], np.float32), device=device)
    assert_same(f32 * np.float64(0.1), np.array([1, 2], np.float32) * np.float64(0.1), "float32 * np.float64(0.1)")
    mask = ug.tensor(np.array([True, False]), device=device)
    assert_same(ug.where(mask, np.int32(1), np.int32(3)), np.array([1, 3], np.int32), "where of np.int32s")
    f16 = ug.tensor(np.array([1, 2], np.float16), device=device)
    assert_same(f16 + np.float32(1e-4), np.array([1, 2], np.float16) + np.float32(1e-4), "float16 + np.float32")
    assert_same(i8 + 300.0, np.array([301, 302], np.float32), "int8 + 300.0 (a weak float: ug's float32)")
    assert_same(ug.full(2, np.float64(0.1), device=device), np.full(2, 0.1), "full of np.float64")
    assert_same(ug.full(2, np.array(7, np.int8), device=device), np.full(2, 7, np.int8), "full of a 0-d array")
    assert_same(ug.asarray(np.float64(0.1), device=device), np.asarray(0.1), "asarray of np.float64")
    # two Python scalars: the default dtype of the higher kind
    assert_same(ug.where(mask, 1, 3), np.array([1, 3], np.int64), "where(m, 1, 3)")
    assert_same(ug.where(mask, 1.5, 3), np.array([1.5, 3], np.float32), "where(m, 1.5, 3)")
    assert_same(ug.where(mask, True, False), np.array([True, False]), "where(m, True, False)")
    assert_same(ug.where(mask, 7, np.int8(3)), np.array([7, 3], np.int8), "where(m, 7, np.int8(3))")
    with pytest.raises(OverflowError):
        ug.where(mask, 300, np.int8(3))


def test_numpy_numbers_as_arguments_are_not_operands(device):
    """A numpy number given as a function's parameter (a norm's order, var's correction, pad's
    value) is not an operand that promotes: the result keeps x's dtype, as numpy's does."""
    a = np.arange(5, dtype=np.float32)
    x = ug.tensor(a, device=device)
    for order in (np.float64(3), np.int64(3), np.float64(0.5)):
        got = ug.linalg.vector_norm(x, ord=order)
        assert got.dtype == F32, f"vector_norm ord={order!r}: {got.dtype}"
        np.testing.assert_allclose(got.numpy(), np.linalg.vector_norm(a, ord=order), rtol=1e-6)
    assert ug.var(x, correction=np.float64(1)).dtype == F32
    assert_same(ug.pad(x, 1, constant_value=np.float64(0.1)), np.pad(a, 1, constant_values=np.float64(0.1)), "pad")


def test_numpy_scalars_reuse_the_kernel(device, compile_cache):
    """A numpy scalar is a kernel argument like a Python one (ug_core.scalars): new values run
    the kernel compiled for the first, in operators, where, writes and scatters."""
    xn = np.linspace(-3, 3, 33)
    x = ug.tensor(xn, device=device)
    idx = np.array([0, 5, 5, 32])
    compiled = []
    for c in (0.3, 0.7, 1.9, 2.6):
        s = np.float64(c)
        assert_same(x * s + np.float32(c), xn * s + np.float32(c), "x * c + c")
        assert_same(ug.where(x > 0, s, x), np.where(xn > 0, s, xn), "where")
        y = ug.tensor(xn, device=device)
        y[idx] = s
        expected = xn.copy()
        expected[idx] = s
        assert_same(y, expected, "x[idx] = c")
        assert_same(ug.scatter_add(x, 0, idx[:3], s), _add_at(xn, idx[:3], s), "scatter_add")
        compiled.append(compile_cache.misses)
    assert compiled[-1] == compiled[0], f"kernels compiled after each value: {compiled}"


def _add_at(a: np.ndarray, idx: np.ndarray, v: Any) -> np.ndarray:
    out = a.copy()
    np.add.at(out, idx, v)
    return out


# --- searchsorted, cumulative_sum, float16 statistics --------------------------------------------

@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_compares_in_the_promoted_dtype(device, side):
    """The values are not cast to the sorted array's dtype first (int32 with [1.5, 2.5] was
    [0, 1]): numpy's results."""
    cases = [
        (np.array([1, 2, 3], np.int32), [1.5, 2.5]),
        (np.array([1, 2, 3], np.int32), 2.5),
        (np.array([1, 2, 3], np.int8), [1000, -1000, 2]),
        (np.array([0.1, 0.2, 0.3], np.float32), [0.1, 0.2]),
        (np.array([1, 2, 3], np.uint64), [-1, 2**64 - 1, 2]),
        (np.array([-5, 0, 2**40], np.int64), np.array([2**40, 1], np.int64)),
        (np.array([0.5, 1.5, np.nan], np.float16), [1.5, np.nan, 0.75]),
    ]
    for sorted_values, values in cases:
        if not supports(device, sorted_values.dtype):
            continue
        got = ug.searchsorted(ug.tensor(sorted_values, device=device), values, side=side)
        assert_same(got, np.searchsorted(sorted_values, values, side=side), f"{sorted_values.dtype} {values!r}")


@pytest.mark.parametrize("dt", [F32, F64, F16], ids=lambda d: d.name)
def test_cumulative_sum_starts_with_positive_zero(device, require_dtype, dt):
    """include_initial puts the standard's initial value, +0.0, first (cpu gave -0.0), along
    each axis, and for a long (blocked) scan; the running sums are numpy's (where a whole prefix
    is -0.0, either zero: ops.SCANS)."""
    require_dtype(dt)
    cases = [(np.array([1, -2, 3], dt), 0), (np.array([-0.0, -0.0], dt), 0),
             (np.array([[1, 2, -0.0], [-0.0, -0.0, 5]], dt), 0), (np.array([[1, 2, -0.0], [-0.0, -0.0, 5]], dt), 1),
             (np.ones((3, 70000), dt) * dt.type(0.25), 1)]
    for a, axis in cases:
        got = ug.cumulative_sum(ug.tensor(a, device=device), axis=axis, include_initial=True).numpy()
        want = np.cumulative_sum(a.astype(F64), axis=axis, include_initial=True).astype(dt)
        assert got.dtype == dt and got.shape == want.shape
        first = np.take(got, 0, axis=axis)
        assert not np.signbit(first).any() and (first == 0).all(), f"initial values {first}"
        np.testing.assert_array_equal(got, want, err_msg=f"cumulative_sum of {a.shape} along {axis}")


@pytest.mark.parametrize("axis", [None, 1])
def test_float16_statistics_accumulate_in_float32(device, require_dtype, axis):
    """mean / var / std of float16 sum and divide in float32 and round once: the count (70000)
    or a sum of squares beyond float16's 65504 gave inf (and a mean of 0)."""
    require_dtype(F16)
    cases = [np.full((2, 1000), 100.0, F16), np.ones((2, 70000), F16),
             (np.arange(2 * 3000) % 400).reshape(2, 3000).astype(F16)]
    for a in cases:
        x = ug.tensor(a, device=device)
        wide = a.astype(F32)
        for name, got, want in (("mean", ug.mean(x, axis=axis), wide.mean(axis=axis)),
                                ("var", ug.var(x, axis=axis), wide.var(axis=axis)),
                                ("std", ug.std(x, axis=axis), wide.std(axis=axis)),
                                ("var(correction=1)", ug.var(x, axis=axis, correction=1), wide.var(axis=axis, ddof=1)),
                                ("method mean", x.mean(axis), wide.mean(axis=axis))):
            want = np.asarray(want).astype(F16)
            assert got.dtype == F16, f"{name}: {got.dtype}"
            np.testing.assert_allclose(got.numpy().astype(F32), want.astype(F32), rtol=1e-3,
                                       err_msg=f"{name} of {a[0, :3]}")
    assert ug.mean(ug.full(1000, 100.0, F16, device=device)).item() == 100.0


@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "int32", "bool"])
def test_statistics_of_ints_are_float64(device, require_dtype, dt):
    """mean / var / std of ints and bools are float64, as numpy's."""
    require_dtype(dt)
    a = (np.arange(12) % 5 == 0) if dt == "bool" else (np.arange(12) * 7 % 11).astype(dt)
    x = ug.tensor(a, device=device)
    for name, got, want in (("mean", ug.mean(x), a.mean()), ("var", ug.var(x), a.var()), ("std", ug.std(x), a.std())):
        assert got.dtype == F64, f"{name}: {got.dtype}"
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, err_msg=name)
