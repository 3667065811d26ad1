"""The rules for scalars, checked where no device runs: the dtypes numpy 2 (NEP 50) gives for
ops of tensors with Python scalars (weak) and numpy scalars (typed), the conversions of
ug_core.dtypes (`operand`, `written`), and the errors raised when an op is built. Graphs are
built on the built-in `ref` device and not realized (the kit's test_scalar_semantics.py checks
the values on every device)."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import ug_core as ug
from ug_core import dtypes

DEVICE = "ref"
ALL = list(dtypes.SUPPORTED)
INTS = [d for d in ALL if d.kind in "iu"]


def _tensor(dt: np.dtype) -> ug.Tensor:
    return ug.tensor(np.zeros(3, dt), device=DEVICE)


def test_operand_is_exact_in_the_ops_dtype():
    f64, u64, i64 = np.dtype(np.float64), np.dtype(np.uint64), np.dtype(np.int64)
    v = 0.1 + 2**-40
    assert dtypes.operand(v, f64) == v and dtypes.operand(v, f64).dtype == f64
    assert dtypes.operand(2**64 - 1, u64) == 2**64 - 1
    assert dtypes.operand(-(2**63), i64) == -(2**63)
    assert dtypes.operand(np.int8(-5), i64) == -5   # a numpy scalar is cast into the promoted dtype
    with np.errstate(all="raise"):   # (no warning: float overflow is inf)
        assert dtypes.operand(1e300, np.dtype(np.float32)) == np.inf
        assert dtypes.operand(1e6, np.dtype(np.float16)) == np.inf
    for value, dt in ((2**64, u64), (-1, u64), (2**63, i64), (300, np.dtype(np.int8)), (-32769, np.dtype(np.int16))):
        with pytest.raises(OverflowError, match=f"Python integer {value} out of bounds for {dt.name}"):
            dtypes.operand(value, dt)


def test_written_is_numpys_item_assignment():
    i8, u8, b = np.dtype(np.int8), np.dtype(np.uint8), dtypes.BOOL
    assert dtypes.written(1.9, i8) == 1 and dtypes.written(-1.9, i8) == -1 and dtypes.written(-0.5, u8) == 0
    assert dtypes.written(np.float64(127.9), i8) == 127
    assert dtypes.written(5, b) == np.True_ and dtypes.written(0.0, b) == np.False_ and dtypes.written(np.nan, b)
    assert dtypes.written(2**64 - 1, np.dtype(np.uint64)) == 2**64 - 1
    assert dtypes.written(0.1 + 2**-40, np.dtype(np.float64)) == 0.1 + 2**-40
    for value, error in ((128, OverflowError), (np.int64(300), OverflowError), (np.uint64(2**63), OverflowError),
                         (-129.5, OverflowError), (float("nan"), ValueError), (float("inf"), OverflowError)):
        with pytest.raises(error):
            dtypes.written(value, i8)
    # and what numpy does for `a[0] = v` (its full and mask writes would wrap a numpy int instead)
    a = np.zeros(1, i8)
    for value in (128, np.int64(300), -129.5):
        with pytest.raises(OverflowError):
            a[0] = value


_OPS = {"+": operator.add, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv, "<": operator.lt,
        "**": operator.pow, "&": operator.and_, "<<": operator.lshift,
        "maximum": (ug.maximum, np.maximum), "r-": lambda a, b: b - a}


_UNORDERED = ("<", "//", "maximum")   # not defined on complex numbers (a TypeError)


@pytest.mark.parametrize("op", list(_OPS))
def test_result_dtypes_with_numpy_scalars_are_numpys(op):
    """Every pair of a tensor dtype and a numpy scalar's dtype: numpy 2's result dtype, or its
    exception (bool and float shifts, float bitwise ops)."""
    ug_fn, np_fn = _OPS[op] if isinstance(_OPS[op], tuple) else (_OPS[op], _OPS[op])
    for x_dt in ALL:
        for s_dt in ALL:
            s = s_dt.type(1)
            if op in _UNORDERED and "c" in (x_dt.kind, s_dt.kind):
                with pytest.raises(TypeError, match="not defined on complex"):   # (the standard's; numpy orders them)
                    ug_fn(_tensor(x_dt), s)
                continue
            try:
                with np.errstate(all="ignore"):
                    want = np.asarray(np_fn(np.zeros(3, x_dt), s)).dtype
            except TypeError:
                with pytest.raises(TypeError):
                    ug_fn(_tensor(x_dt), s)
                continue
            if op == "<<" and x_dt == s_dt == dtypes.BOOL:
                continue   # (numpy shifts bools as int8; ug's shifts, the standard's, take ints: a TypeError)
            assert ug_fn(_tensor(x_dt), s).dtype == want, f"{x_dt.name} {op} np.{s_dt.name}"


@pytest.mark.parametrize("op", ["+", "*", "<", "//", "maximum"])
def test_result_dtypes_with_python_scalars_are_weak(op):
    """A Python scalar takes the tensor's dtype when its kind fits (numpy 2's); a float next to
    ints is float32 (ug's default float, where numpy's is float64), an int next to bools int64;
    a float next to complex numbers their dtype."""
    ug_fn, np_fn = _OPS[op] if isinstance(_OPS[op], tuple) else (_OPS[op], _OPS[op])
    for x_dt in ALL:
        for s in (True, 3, 2.5):
            if op in _UNORDERED and x_dt.kind == "c":
                with pytest.raises(TypeError, match="not defined on complex"):
                    ug_fn(_tensor(x_dt), s)
                continue
            want = np.asarray(np_fn(np.zeros(3, x_dt), s)).dtype
            if isinstance(s, float) and x_dt.kind not in "fc":
                want = ug_fn(_tensor(np.dtype(np.float32)), 1.0).dtype   # (float32's result for the op)
            assert ug_fn(_tensor(x_dt), s).dtype == want, f"{x_dt.name} {op} {s!r}"


def test_where_dtypes():
    """where's branches: tensors, arrays and numpy scalars promote; a Python scalar takes their
    dtype; of two Python scalars, the default dtype of the higher kind (numpy's, with ug's float32)."""
    m = ug.tensor(np.array([True, False, True]), device=DEVICE)
    mn = np.array([True, False, True])
    cases = [(np.int32(1), np.int32(3)), (1, np.int8(3)), (np.int8(1), np.int16(3)), (np.float16(1), 2),
             (np.float32(1), np.float64(2)), (np.uint64(1), np.int64(2)), (True, np.uint8(2)), (1, 3), (True, False)]
    for a, b in cases:
        assert ug.where(m, a, b).dtype == np.where(mn, a, b).dtype, (a, b)
    assert ug.where(m, 1.5, 3).dtype == np.float32 and ug.where(m, 1.5, True).dtype == np.float32
    for dt in ALL:
        assert ug.where(m, _tensor(dt), 1).dtype == (dt if dt != dtypes.BOOL else np.int64)
        assert ug.where(m, np.zeros(3, dt), dt.type(1)).dtype == dt


def test_result_type_takes_numpy_scalars_as_typed():
    assert ug.result_type(ug.int8, np.int64(3)) == np.int64
    assert ug.result_type(ug.int8, 3) == np.int8
    assert ug.result_type(np.float32(1), 1.0) == np.float32
    assert ug.result_type(ug.float16, np.float32(1), 2.0) == np.float32
    with pytest.raises(ValueError):
        ug.result_type(1, 2.0)


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_out_of_range_ints_raise_when_built(dt):
    """Each entry point refuses an int its tensor's dtype cannot hold when it is called (numpy
    2's OverflowError, naming the value and the dtype), before anything runs."""
    info = np.iinfo(dt)
    mask = np.array([True, False, True])
    for v in (int(info.max) + 1, int(info.min) - 1):
        builds = {
            "x + v": lambda x: x + v, "v - x": lambda x: v - x, "x * v": lambda x: x * v, "x & v": lambda x: x & v,
            "maximum": lambda x: ug.maximum(x, v), "x[0] = v": lambda x: x.__setitem__(0, v),
            "x[[0]] = v": lambda x: x.__setitem__([0], v), "x[mask] = v": lambda x: x.__setitem__(mask, v),
            "x.assign(v)": lambda x: x.assign(v), "where": lambda x: ug.where(mask, v, x),
            "full": lambda x: ug.full(2, v, dt, device=DEVICE), "full_like": lambda x: ug.full_like(x, v),
            "pad": lambda x: ug.pad(x, 1, constant_value=v), "scatter_add": lambda x: ug.scatter_add(x, 0, [1], v),
            "index_add": lambda x: ug.index_add(x, 0, [1], v), "x += v": lambda x: x.__iadd__(v),
        }
        for name, build in builds.items():
            x = _tensor(dt)
            node = x.node
            with pytest.raises(OverflowError, match=f"Python integer {v} out of bounds for {dt.name}"):
                build(x)
            assert x.node is node, f"{name}: x was written"


def test_clip_bounds_beyond_the_dtype():
    """numpy 2's clip: an int bound beyond the dtype that limits nothing is ignored, one that
    would replace every element by a value the dtype cannot hold is an OverflowError (numpy
    integers too: clip's result has x's dtype)."""
    x = _tensor(np.dtype(np.uint8))
    assert ug.clip(x, -5, 300).dtype == np.uint8 and ug.clip(x, np.int64(-5), np.int64(300)).dtype == np.uint8
    for low, high in ((300, None), (None, -1), (np.int64(300), None), (None, np.int16(-1))):
        with pytest.raises(OverflowError):
            ug.clip(x, low, high)
