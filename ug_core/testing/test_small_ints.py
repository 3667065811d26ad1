"""The Array API's integer dtypes besides int32 and int64 (int8, int16, uint8, uint16, uint32,
uint64) on every device that claims them, against numpy: every ALU op at the edge values (0, 1,
max, min, -1, counts and divisors outside the usual range), casts to and from every dtype,
reductions and their accumulator dtypes, promotion with every other dtype and with Python
scalars, and fusion (a chain of them is still one kernel)."""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug
from ug_core import dtypes
from ug_core.array_api import elementwise as ew
from ug_core.testing.data import RNG
from ug_core.testing.test_semantics import assert_same

SMALL = [np.dtype(n) for n in ("int8", "int16", "uint8", "uint16", "uint32", "uint64")]
# every (source, target) of a cast with a new dtype on one side
CASTS = [(src, dst) for src in dtypes.SUPPORTED for dst in dtypes.SUPPORTED if src in SMALL or dst in SMALL]
name = lambda d: np.dtype(d).name  # noqa: E731


def edges(dt: np.dtype) -> list[int]:
    """0, 1, small values of both signs, and the dtype's extremes."""
    info = np.iinfo(dt)
    values = [0, 1, 2, 3, 5, 7, 8, 100, int(info.max), int(info.max) - 1, int(info.max) // 2, int(info.max) // 2 + 1]
    if dt.kind == "i":
        values += [-1, -2, -3, -7, -8, -100, int(info.min), int(info.min) + 1]
    return sorted({v for v in values if info.min <= v <= info.max})


def pairs(dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every (a, b) of the edge values, as two flat arrays."""
    column = np.array(edges(dt), dt)
    a, b = np.meshgrid(column, column, indexing="ij")
    return a.reshape(-1), b.reshape(-1)


def numpy(fn, *arrays):
    with np.errstate(all="ignore"):
        return fn(*arrays)


def run(device: str, fn, *arrays: np.ndarray) -> np.ndarray:
    return fn(*(ug.tensor(a, device=device) for a in arrays)).numpy()


BINARY = {
    "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
    "//": lambda x, y: x // y, "%": lambda x, y: x % y,
    "&": lambda x, y: x & y, "|": lambda x, y: x | y, "^": lambda x, y: x ^ y,
    "<<": lambda x, y: x << y, ">>": lambda x, y: x >> y,
    "max": lambda x, y: ew.maximum(x, y) if isinstance(x, ug.Tensor) else np.maximum(x, y),
    "min": lambda x, y: ew.minimum(x, y) if isinstance(x, ug.Tensor) else np.minimum(x, y),
    "<": lambda x, y: x < y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y, ">=": lambda x, y: x >= y,
    "==": lambda x, y: x == y, "!=": lambda x, y: x != y,
    "**": lambda x, y: x ** (y % 8),   # (numpy refuses negative exponents; y % 8 is 0 ... 7 for both kinds)
}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_binary_ops_at_the_edges(device, require_dtype, dt, op):
    """Wrapping arithmetic, x // 0 == x % 0 == 0, shifts by counts of bits and more (and negative
    ones), unsigned comparisons, division and logical right shifts."""
    require_dtype(dt)
    a, b = pairs(dt)
    got = run(device, BINARY[op], a, b)
    assert_same(got, numpy(BINARY[op], a, b), (a, b))


UNARY = {"-": lambda x: -x, "abs": abs, "~": lambda x: ~x, "+": lambda x: +x,
         "not": lambda x: ew.logical_not(x) if isinstance(x, ug.Tensor) else np.logical_not(x),
         "where": lambda x: ug.where(x > 3, x, x + x) if isinstance(x, ug.Tensor) else np.where(x > 3, x, x + x),
         "square": lambda x: x * x}


@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_unary_ops_at_the_edges(device, require_dtype, dt, op):
    """NEG wraps (-1 of a uint is its max), ABS of a uint is itself, ~ is max - x of a uint."""
    require_dtype(dt)
    x = np.array(edges(dt), dt)
    assert_same(run(device, UNARY[op], x), numpy(UNARY[op], x), (x,))


def _cast_sources(src: np.dtype, dst: np.dtype) -> np.ndarray:
    """Values of `src` whose conversion to `dst` numpy defines: all of them between ints and to
    floats and bools; from floats only those whose integer part `dst` holds (numpy leaves the
    rest to the hardware)."""
    if src == dtypes.BOOL:
        return np.array([True, False])
    if src.kind in "iu":
        return np.array(edges(src), src)
    floats = [0.0, -0.0, 0.5, 1.0, 1.75, -1.75, 2.5, 100.25, 127.0, -128.0, 255.0, 255.9, 32767.0, -32768.0,
              65535.0, 65504.0, 2.0 ** 31 - 128, 2.0 ** 32 - 256, -(2.0 ** 31), 2.0 ** 52 + 2, 2.0 ** 63, -(2.0 ** 63),
              2.0 ** 64 - 2.0 ** 40, 2.0 ** 64 - 2048.0]
    with np.errstate(all="ignore"):
        exact = [v for v in floats if float(src.type(v)) == v]
    if dst.kind in "iu":
        info = np.iinfo(dst)
        exact = [v for v in exact if info.min <= int(v) <= info.max]
    return np.array(exact, src)


@pytest.mark.parametrize("src, dst", CASTS, ids=lambda d: d.name)
def test_casts(device, require_dtype, src, dst):
    """astype to and from each new dtype: ints wrap (-1 is an unsigned max), extend by their
    sign, become the nearest float; floats truncate toward zero."""
    require_dtype(src, dst)
    x = _cast_sources(src, dst)
    got = ug.tensor(x, device=device).astype(dst)
    assert got.dtype == dst
    assert_same(got.numpy(), numpy(lambda v: v.astype(dst), x), (x,))


@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_numpy_round_trip_and_views(device, require_dtype, dt):
    require_dtype(dt)
    info = np.iinfo(dt)
    a = RNG.integers(int(info.min), int(info.max), size=(5, 6), endpoint=True, dtype=dt)
    x = ug.tensor(a, device=device)
    assert x.dtype == dt
    assert_same(x.numpy(), a)
    assert_same(x[1:, ::2].T.numpy(), a[1:, ::2].T)
    assert_same(ug.full((3,), int(info.max), dt, device=device).numpy(), np.full((3,), info.max, dt))
    assert_same(ug.zeros((2,), dt, device=device).numpy(), np.zeros((2,), dt))


@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_reductions(device, require_dtype, dt):
    """sum and prod accumulate in numpy's default dtype (int64 for signed ints, uint64 for
    unsigned ones), wrapping; max and min start from the dtype's extremes."""
    accumulator = np.dtype(np.int64 if dt.kind == "i" else np.uint64)
    require_dtype(dt, accumulator)
    info = np.iinfo(dt)
    a = RNG.integers(int(info.min), int(info.max), size=(7, 300), endpoint=True, dtype=dt)
    a[0, :3] = [info.min, info.max, 0]
    x = ug.tensor(a, device=device)
    for got, want in ((x.sum(), a.sum()), (x.sum(axis=1), a.sum(axis=1)), (x.sum(axis=0), a.sum(axis=0)),
                      (x.prod(axis=0), numpy(lambda v: v.prod(axis=0), a)), (x.max(), a.max()), (x.min(), a.min()),
                      (x.max(axis=1), a.max(axis=1)), (x.min(axis=0), a.min(axis=0)),
                      (ug.sum(x, axis=1, dtype=dt), numpy(lambda v: v.sum(axis=1, dtype=dt), a))):
        assert_same(got.numpy(), want)
    assert x.sum().dtype == accumulator
    empty = ug.tensor(np.zeros((0, 3), dt), device=device)
    assert_same(empty.sum(axis=0).numpy(), np.zeros((0, 3), dt).sum(axis=0))
    one = ug.tensor(np.full((1, 4), info.min, dt), device=device)   # the identity of max is never the answer
    assert_same(one.max(axis=1).numpy(), np.full((1,), info.min, dt))


@pytest.mark.parametrize("other", dtypes.SUPPORTED, ids=name)
@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_promotion_with_every_dtype(device, require_dtype, dt, other):
    """numpy 2's promotion: int8 + uint8 is int16, uint64 + int64 float64, int16 + float16
    float32, bool takes the other dtype."""
    want_dtype = np.result_type(dt, other)
    require_dtype(dt, other, want_dtype)
    a = np.array([0, 1, 2, 3, 5, 7], dt)
    b = np.array([1, 0, 1, 1, 0, 1] if other == dtypes.BOOL else [3, 2, 1, 0, 2, 1], other)
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    for fn in (lambda p, q: p + q, lambda p, q: q * p, lambda p, q: p < q):
        if other.kind == "c" and fn(1, 2) is True:   # (complex numbers are not ordered: the standard's TypeError)
            with pytest.raises(TypeError, match="not defined on complex"):
                fn(x, y)
            continue
        got = fn(x, y)
        want = fn(a, b)
        assert got.dtype == want.dtype
        assert_same(got.numpy(), want, (a, b))


@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_python_scalars_are_weak(device, require_dtype, dt):
    """A Python int keeps the tensor's dtype and must fit it (numpy 2's OverflowError for uint8 + 300
    and uint8 + -1), but is compared by its value (uint8 < 300 is True); a Python float gives
    float32 (ug's default float)."""
    require_dtype(dt)
    info = np.iinfo(dt)
    a = np.array([0, 1, 7, int(info.max)], dt)
    x = ug.tensor(a, device=device)
    for got, want in ((x + 1, a + 1), (2 * x, 2 * a), (x - 1, numpy(lambda v: v - 1, a)), (x // 3, a // 3),
                      (x % 5, a % 5), (x >> 1, a >> 1), (1 << (x & 3), 1 << (a & 3)), (x & 6, a & 6),
                      (x * True, a * True), (x ** 2, numpy(lambda v: v ** 2, a))):
        assert got.dtype == dt
        assert_same(got.numpy(), want)
    assert_same((x < 5).numpy(), a < 5)
    assert (x + 1.5).dtype == np.float32
    for outside in (int(info.max) + 1, int(info.min) - 1, 2**70, -(2**70)):
        with pytest.raises(OverflowError):
            x + outside
        with pytest.raises(OverflowError):
            np.add(a, outside)   # (numpy 2 agrees)
        for compare in (lambda p: p < outside, lambda p: p <= outside, lambda p: outside < p, lambda p: outside <= p,
                        lambda p: p == outside, lambda p: p != outside):   # but compares by value
            assert_same(compare(x).numpy(), compare(a))


def test_promotion_table_spot_checks():
    assert ug.result_type(ug.int8, ug.uint8) == np.int16
    assert ug.result_type(ug.uint64, ug.int64) == np.float64
    assert ug.result_type(ug.uint8, ug.uint32) == np.uint32
    assert ug.result_type(ug.int16, ug.float16) == np.float32
    assert ug.result_type(ug.uint8, 300) == np.uint8   # (values are not looked at)
    assert ug.can_cast(ug.uint8, ug.int16) and not ug.can_cast(ug.int8, ug.uint64)
    assert ug.iinfo(ug.uint64).max == 2**64 - 1 and ug.iinfo(ug.int8).min == -128
    assert ug.isdtype(ug.uint16, "unsigned integer") and not ug.isdtype(ug.uint16, "signed integer")


@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_chain_is_one_kernel(device, require_dtype, dt):
    """Casts, unsigned division and shifts fuse like any other op."""
    require_dtype(dt)
    a = np.arange(60, dtype=dt).reshape(6, 10)
    x = ug.tensor(a, device=device)
    y = (((x * 3 + 7) // 5 % 11) >> 1).astype(np.float32) + ew.maximum(x, x[::-1]).astype(np.float32)
    assert len(ug.schedule(y).kernels) == 1
    want = (((a * 3 + 7) // 5 % 11) >> 1).astype(np.float32) + np.maximum(a, a[::-1]).astype(np.float32)
    assert_same(y.numpy(), want)


def test_info_lists_the_device_dtypes(device):
    info = ug.__array_namespace_info__()
    have = info.dtypes(device=device)
    for dt in SMALL:
        try:
            ug.tensor(np.zeros(1, dt), device=device)
        except TypeError:
            assert dt.name not in have
        else:
            assert have[dt.name] == dt
    assert set(info.dtypes(device=device, kind="unsigned integer")) <= {"uint8", "uint16", "uint32", "uint64"}
