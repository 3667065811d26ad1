"""The Array API namespace (ug_core.array_api), function by function against numpy, on the ref
and cpu devices: values, dtypes, shapes, signatures' edge cases and errors.

The standard's own conformance suite (../shared/tools/array-api-tests) checks the same functions
with random inputs; these tests are the fast, named cases of it, and of ug's choices where the
standard leaves them open (float32 default, weak scalars, the error types)."""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import ug_core as ug
from ug_core import ops as ieee_ops

DEVICES = [d for d in ("ref", "cpu") if d in ug.devices()]


@pytest.fixture(params=DEVICES)
def dev(request):
    return request.param


def check(got, expected, rtol=1e-6, atol=1e-7, zero_signs=True):
    """got (a ug Tensor) equals expected (numpy): shape, dtype, values (NaNs, and the signs of
    zeros unless zero_signs=False: a matmul's sums leave them to the backend)."""
    expected = np.asarray(expected)
    assert isinstance(got, ug.Tensor), type(got)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    arr = got.numpy()
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(arr, expected, rtol=rtol, atol=atol, equal_nan=True)
        zeros = (expected == 0) & zero_signs
        np.testing.assert_array_equal(np.signbit(arr[zeros]), np.signbit(expected[zeros]))
    else:
        np.testing.assert_array_equal(arr, expected)


SPECIAL = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 3e-39, 7.0], np.float32)


# --- namespace and inspection -------------------------------------------------------------------

def test_namespace_is_the_module(dev):
    x = ug.asarray([1.0], device=dev)
    assert x.__array_namespace__() is ug
    assert x.__array_namespace__(api_version="2023.12") is ug
    with pytest.raises(ValueError, match="2030.12"):
        x.__array_namespace__(api_version="2030.12")
    assert ug.__array_api_version__ == "2024.12"


def test_inspection_info(dev):
    info = ug.__array_namespace_info__()
    caps = info.capabilities()
    assert caps["boolean indexing"] is True and caps["data-dependent shapes"] is True   # (realized on the host)
    assert "max dimensions" in caps
    assert info.default_device() in info.devices() and dev in info.devices()
    defaults = info.default_dtypes(device=dev)
    assert defaults["real floating"] == ug.float32 and defaults["integral"] == ug.int64
    assert defaults["indexing"] == ug.int64 and defaults["complex floating"] == ug.complex64
    ints = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
    assert set(info.dtypes(device=dev)) == {"bool", "float32", "float64", "complex64", "complex128"} | ints
    assert set(info.dtypes(device=dev, kind="complex floating")) == {"complex64", "complex128"}
    assert set(info.dtypes(device=dev, kind="integral")) == ints
    assert set(info.dtypes(device=dev, kind="unsigned integer")) == {d for d in ints if d.startswith("u")}
    assert set(info.dtypes(device=dev, kind=("bool", "real floating"))) == {"bool", "float32", "float64"}


def test_signatures_follow_the_standard():
    """Positional-only and keyword-only markers where the standard has them."""
    P, K = inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.KEYWORD_ONLY
    kinds = {name: p.kind for name, p in inspect.signature(ug.asarray).parameters.items()}
    assert kinds == {"obj": P, "dtype": K, "device": K, "copy": K}
    kinds = {name: p.kind for name, p in inspect.signature(ug.sum).parameters.items()}
    assert kinds == {"x": P, "axis": K, "dtype": K, "keepdims": K}
    assert inspect.signature(ug.add).parameters["x1"].kind == P
    assert inspect.signature(ug.arange).parameters["start"].kind == P
    assert ug.add.__name__ == "add"


# --- data types -----------------------------------------------------------------------------------

def test_dtype_objects():
    assert ug.float32 == np.dtype("float32") and ug.bool == np.dtype(bool) and ug.int64 == np.dtype("int64")


@pytest.mark.parametrize("args, want", [
    ((ug.int32, ug.int64), ug.int64),
    ((ug.float32, ug.float64), ug.float64),
    ((ug.bool, ug.bool), ug.bool),
    ((ug.float32, 1.5), ug.float32),
    ((ug.int32, 7), ug.int32),
    ((ug.bool, True), ug.bool),
    ((ug.int32, 2.0), ug.float32),
])
def test_result_type(args, want):
    assert ug.result_type(*args) == want


def test_result_type_of_arrays_and_errors(dev):
    assert ug.result_type(ug.zeros(2, dtype=ug.int32, device=dev), ug.float64) == ug.float64
    with pytest.raises(ValueError, match="at least one array or dtype"):
        ug.result_type(1, 2.0)
    assert ug.result_type(ug.float32, 1j) == ug.complex64 and ug.result_type(ug.float64, 1j) == ug.complex128
    assert ug.result_type(ug.int8, 1j) == ug.complex64   # (ug's default complex, as its default float)
    assert ug.result_type(ug.float32, ug.complex64) == ug.complex64
    assert ug.result_type(ug.float64, ug.complex64) == ug.complex128


def test_can_cast_finfo_iinfo_isdtype(dev):
    assert ug.can_cast(ug.int32, ug.int64) and not ug.can_cast(ug.int64, ug.int32)
    assert ug.can_cast(ug.float32, ug.float64) and not ug.can_cast(ug.float64, ug.float32)
    assert ug.can_cast(ug.zeros(1, dtype=ug.int32, device=dev), ug.int64)
    fi = ug.finfo(ug.float32)
    f32 = np.finfo(np.float32)
    assert (fi.bits, fi.eps, fi.max, fi.dtype) == (32, float(f32.eps), float(f32.max), ug.float32)
    assert isinstance(fi.smallest_normal, float)
    ii = ug.iinfo(ug.zeros(1, dtype=ug.int32, device=dev))
    assert (ii.bits, ii.min, ii.max) == (32, -2**31, 2**31 - 1)
    with pytest.raises(ValueError, match="floating"):
        ug.finfo(ug.int32)
    with pytest.raises(ValueError, match="integer"):
        ug.iinfo(ug.float64)
    assert ug.isdtype(ug.int32, "signed integer") and ug.isdtype(ug.int32, ("bool", "integral"))
    assert not ug.isdtype(ug.float32, "integral") and ug.isdtype(ug.float64, ug.float64)
    with pytest.raises(ValueError, match="unknown kind"):
        ug.isdtype(ug.float32, "floats")


def test_astype(dev):
    x = ug.asarray([1.7, -2.5], device=dev)
    check(ug.astype(x, ug.int32), np.array([1.7, -2.5], np.float32).astype(np.int32))
    same = ug.astype(x, ug.float32, copy=False)   # nothing to convert: x itself (numpy's)
    assert same is x
    copied = ug.astype(x, ug.float32)
    assert copied is not x and copied.dtype == ug.float32


# --- creation -----------------------------------------------------------------------------------

@pytest.mark.parametrize("args, kwargs", [
    ((5,), {}), ((2, 9), {}), ((9, 2, -2), {}), ((0, 1, 0.25), {}), ((1.5,), {}), ((3, 3), {}),
    ((10,), {"dtype": "float64"}), ((-3, 4), {"dtype": "int32"}), ((5, 0, -0.5), {}),
])
def test_arange(dev, args, kwargs):
    want = np.arange(*args, **kwargs)
    if "dtype" not in kwargs and want.dtype == np.float64:
        want = want.astype(np.float32)
    check(ug.arange(*args, **kwargs, device=dev), want)


@pytest.mark.parametrize("n", [1024, 1025, 70_000])
def test_arange_long_is_lazy_and_exact(dev, n):
    x = ug.arange(n, device=dev)
    assert not x.node.realized
    check(x, np.arange(n))


def test_arange_old_form_and_errors(dev):
    check(ug.arange(3, np.float32, device=dev), np.arange(3, dtype=np.float32))
    with pytest.raises(ValueError, match="step"):
        ug.arange(0, 5, 0, device=dev)


@pytest.mark.parametrize("args, kwargs", [
    ((0, 1, 5), {}), ((2, -3, 7), {}), ((0, 1, 4), {"endpoint": False}), ((1, 2, 1), {}), ((0, 1, 0), {}),
    ((0, 10, 11), {"dtype": "float64"}),
])
def test_linspace(dev, args, kwargs):
    want = np.linspace(*args, **kwargs)
    want = want.astype(kwargs.get("dtype", np.float32))
    got = ug.linspace(*args, **kwargs, device=dev)
    check(got, want)
    if args[2] > 1 and kwargs.get("endpoint", True):
        assert got.numpy()[-1] == args[1]


@pytest.mark.parametrize("shape, k", [((3,), 0), ((3, 5), 1), ((4, 2), -1), ((2, 3), 7), ((0,), 0), ((3, 2), 2**70),
                                      ((3, 2), -2**70)])
def test_eye(dev, shape, k):
    check(ug.eye(*shape, k=k, device=dev), np.eye(*shape, k=k, dtype=np.float32))
    check(ug.eye(*shape, k=k, dtype=ug.bool, device=dev), np.eye(*shape, k=k, dtype=bool))


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_tril_triu(dev, k):
    a = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) - 5
    x = ug.asarray(a, device=dev)
    check(ug.tril(x, k=k), np.tril(a, k=k))
    check(ug.triu(x, k=k), np.triu(a, k=k))
    with pytest.raises(ValueError, match="2 dimensions"):
        ug.tril(ug.asarray([1, 2], device=dev))


def test_full_zeros_ones_empty_like(dev):
    x = ug.asarray(np.ones((2, 3), np.int32), device=dev)
    check(ug.full((2, 2), 2.5, device=dev), np.full((2, 2), 2.5, np.float32))
    check(ug.full((2,), True, device=dev), np.full((2,), True))
    check(ug.zeros((2, 1), device=dev), np.zeros((2, 1), np.float32))
    check(ug.ones(3, dtype=ug.int64, device=dev), np.ones(3, np.int64))
    check(ug.empty((1, 2), dtype=ug.float64, device=dev), np.zeros((1, 2)))
    check(ug.zeros_like(x), np.zeros((2, 3), np.int32))
    check(ug.ones_like(x, dtype=ug.float32), np.ones((2, 3), np.float32))
    check(ug.full_like(x, 7), np.full((2, 3), 7, np.int32))
    check(ug.empty_like(x), np.zeros((2, 3), np.int32))
    assert ug.zeros_like(x, device="ref").device == "ref"
    check(ug.full((2,), 1j, device=dev), np.full((2,), 1j, np.complex64))
    check(ug.full((2,), 1 - 2j, dtype=ug.complex128, device=dev), np.full((2,), 1 - 2j))


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid(dev, indexing):
    a, b, c = np.arange(3.0, dtype=np.float32), np.arange(4.0, dtype=np.float32) * 2, np.ones(2, np.float32)
    got = ug.meshgrid(*(ug.asarray(v, device=dev) for v in (a, b, c)), indexing=indexing)
    for g, w in zip(got, np.meshgrid(a, b, c, indexing=indexing)):
        check(g, w)
    with pytest.raises(ValueError, match="indexing"):
        ug.meshgrid(ug.asarray(a, device=dev), indexing="yx")
    with pytest.raises(ValueError, match="1-d"):
        ug.meshgrid(ug.asarray(np.ones((2, 2)), device=dev))


def test_asarray_copy_semantics(dev):
    x = ug.asarray([1, 2, 3], device=dev)
    assert x.dtype == ug.int64 and ug.asarray(1.5, device=dev).dtype == ug.float32
    assert ug.asarray(x) is x
    assert ug.asarray(x, copy=False) is x
    y = ug.asarray(x, copy=True)
    assert y is not x
    y[0] = 9  # a copy: x keeps its value
    check(x, np.array([1, 2, 3]))
    check(ug.asarray(x, dtype=ug.float64), np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="needs a copy"):
        ug.asarray(x, dtype=ug.float64, copy=False)
    with pytest.raises(ValueError, match="copied"):
        ug.asarray(np.ones((2, 2))[:, 0], copy=False, device=dev)   # strided: not shareable (tests/test_dlpack.py)
    check(ug.asarray(1j, device=dev), np.asarray(1j, np.complex64))
    check(ug.asarray(np.float64(2.0), device=dev), np.array(2.0))
    check(ug.asarray(memoryview(np.arange(3, dtype=np.int32)), device=dev), np.arange(3, dtype=np.int32))


def test_dlpack_round_trip(dev):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = ug.asarray(a, device=dev)
    assert x.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(x), a)
    check(ug.from_dlpack(a, device=dev), a)
    check(ug.from_dlpack(x), a)
    # ref and cpu keep buffers in host memory: both directions share it (more in tests/test_dlpack.py)
    assert np.shares_memory(np.from_dlpack(x), a)
    x.__dlpack__(copy=False)   # (host memory: nothing to copy)
    assert np.shares_memory(np.from_dlpack(ug.from_dlpack(a, copy=False, device=dev)), a)


# --- manipulation -------------------------------------------------------------------------------

A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("fn, np_fn", [
    (lambda x: ug.permute_dims(x, (2, 0, 1)), lambda a: np.transpose(a, (2, 0, 1))),
    (lambda x: ug.expand_dims(x, axis=-1), lambda a: np.expand_dims(a, -1)),
    (lambda x: ug.expand_dims(x), lambda a: np.expand_dims(a, 0)),
    (lambda x: ug.squeeze(ug.expand_dims(x, axis=1), axis=1), lambda a: a),
    (lambda x: ug.broadcast_to(x[:, :1], (5, 2, 3, 4)), lambda a: np.broadcast_to(a[:, :1], (5, 2, 3, 4))),
    (lambda x: ug.reshape(x, (4, -1)), lambda a: a.reshape(4, -1)),
    (lambda x: ug.reshape(ug.permute_dims(x, (2, 1, 0)), (6, 4)), lambda a: a.T.reshape(6, 4)),
    (lambda x: ug.moveaxis(x, 0, -1), lambda a: np.moveaxis(a, 0, -1)),
    (lambda x: ug.moveaxis(x, (0, 1), (2, 0)), lambda a: np.moveaxis(a, (0, 1), (2, 0))),
    (lambda x: ug.tile(x, (2, 1, 3)), lambda a: np.tile(a, (2, 1, 3))),
    (lambda x: ug.tile(x, (2, 1, 1, 2)), lambda a: np.tile(a, (2, 1, 1, 2))),
    (lambda x: ug.tile(x, (2,)), lambda a: np.tile(a, (2,))),
    (lambda x: ug.repeat(x, 2, axis=1), lambda a: np.repeat(a, 2, axis=1)),
    (lambda x: ug.repeat(x, 3), lambda a: np.repeat(a, 3)),
    (lambda x: ug.repeat(x, 0, axis=-1), lambda a: np.repeat(a, 0, axis=-1)),
    (lambda x: ug.matrix_transpose(x), lambda a: np.swapaxes(a, -1, -2)),
    (lambda x: x.mT, lambda a: np.swapaxes(a, -1, -2)),
])
def test_manipulation(dev, fn, np_fn):
    check(fn(ug.asarray(A, device=dev)), np_fn(A))


def test_unstack_and_broadcast_arrays(dev):
    x = ug.asarray(A, device=dev)
    for axis in (0, 1, -1):
        got = ug.unstack(x, axis=axis)
        want = np.unstack(A, axis=axis) if hasattr(np, "unstack") else tuple(np.moveaxis(A, axis, 0))
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            check(g, w)
    a, b = ug.broadcast_arrays(ug.asarray(np.ones((3, 1), np.int32), device=dev), ug.asarray([1, 2], device=dev))
    assert a.shape == b.shape == (3, 2)
    check(b, np.broadcast_to(np.array([1, 2]), (3, 2)))


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
def test_stack(dev, axis):
    arrays = [A[0], A[1] * 2, A[0] - 7]
    got = ug.stack([ug.asarray(a, device=dev) for a in arrays], axis=axis)
    assert len(ug.schedule(got).items) == 1  # one fused kernel of selects
    check(got, np.stack(arrays, axis=axis))
    mixed = ug.stack((ug.asarray([1, 2], dtype=ug.int32, device=dev), ug.asarray([0.5, 1.5], device=dev)))
    check(mixed, np.stack([np.array([1, 2], np.int32), np.array([0.5, 1.5], np.float32)]))


def test_stack_errors(dev):
    with pytest.raises(ValueError, match="one shape"):
        ug.stack([ug.asarray([1, 2], device=dev), ug.asarray([1], device=dev)])
    with pytest.raises(ValueError, match="at least one"):
        ug.stack([])


def test_manipulation_errors(dev):
    x = ug.asarray(A, device=dev)
    with pytest.raises(ValueError, match="squeeze"):
        ug.squeeze(x, axis=0)
    with pytest.raises(np.exceptions.AxisError):
        ug.expand_dims(x, axis=5)
    with pytest.raises(ValueError, match="cannot broadcast"):
        ug.broadcast_to(x, (3, 3, 4))
    with pytest.raises(ValueError, match="non-negative"):
        ug.tile(x, (-1,))
    with pytest.raises(ValueError, match="length"):
        ug.moveaxis(x, (0, 1), 0)
    with pytest.raises(ValueError, match="repeated"):
        ug.moveaxis(x, (0, 0), (1, 2))
    with pytest.raises(ValueError, match="one per element"):   # (per-element counts: x's axis has 24)
        ug.repeat(x, ug.asarray([1, 2], device=dev))
    with pytest.raises(ValueError, match="0-d"):
        ug.unstack(ug.asarray(1.0, device=dev))


# --- elementwise --------------------------------------------------------------------------------

UNARY = [
    ("abs", np.abs), ("negative", np.negative), ("positive", np.positive), ("square", np.square),
    ("sqrt", np.sqrt), ("exp", np.exp), ("log", np.log), ("sin", np.sin), ("cos", np.cos), ("tanh", np.tanh),
    ("reciprocal", np.reciprocal), ("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite),
    ("sign", np.sign), ("signbit", np.signbit), ("logical_not", np.logical_not),
]


@pytest.mark.parametrize("name, np_fn", UNARY, ids=[u[0] for u in UNARY])
def test_unary_special_values(dev, name, np_fn):
    with np.errstate(all="ignore"):
        want = np_fn(SPECIAL)
    got = getattr(ug, name)(ug.asarray(SPECIAL, device=dev))
    check(got, want, rtol=4e-7 if name in ("exp", "log", "sin", "cos", "tanh") else 0, atol=0)


@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite", "sign", "signbit", "abs", "square"])
def test_unary_on_ints(dev, name):
    a = np.array([0, -3, 5, 2**31 - 1], np.int32)
    check(getattr(ug, name)(ug.asarray(a, device=dev)), getattr(np, name)(a))


BINARY = [
    ("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply), ("divide", np.divide),
    ("pow", np.power), ("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
    ("less_equal", np.less_equal), ("greater", np.greater), ("greater_equal", np.greater_equal),
    ("maximum", ieee_ops.maximum), ("minimum", ieee_ops.minimum),  # IEEE 754-2019: +0 > -0
    ("copysign", np.copysign), ("logaddexp", np.logaddexp),
]


@pytest.mark.parametrize("name, np_fn", BINARY, ids=[b[0] for b in BINARY])
def test_binary_function_forms(dev, name, np_fn):
    a = SPECIAL[:, None]
    b = SPECIAL[None, :]
    with np.errstate(all="ignore"):
        want = np_fn(a, b)
    got = getattr(ug, name)(ug.asarray(a, device=dev), ug.asarray(b, device=dev))
    check(got, want, rtol=2e-6 if name in ("pow", "logaddexp") else 0, atol=0)


def test_binary_scalars_and_operators_agree(dev):
    x = ug.asarray([1.0, -2.0, 4.0], device=dev)
    check(ug.subtract(10, x), 10 - np.array([1.0, -2.0, 4.0], np.float32))
    check(ug.less(0, x), np.array([True, False, True]))
    check(ug.pow(x, 2), np.array([1.0, 4.0, 16.0], np.float32))
    check(ug.divide(1, x), 1 / np.array([1.0, -2.0, 4.0], np.float32))
    for fn, op in ((ug.add, "__add__"), (ug.multiply, "__mul__"), (ug.greater, "__gt__")):
        check(fn(x, 2.0), getattr(x, op)(2.0).numpy())
    with pytest.raises(TypeError, match="at least one operand"):
        ug.add(1, 2)
    with pytest.raises(TypeError, match="ug Tensor"):
        ug.exp(np.ones(2))


def test_logaddexp_accuracy(dev):
    a = np.array([0.0, 0.0, 1e-8, -30.0, 100.0, -np.inf, np.inf, 20.0, -1e4], np.float64)
    b = np.array([-30.0, -80.0, 0.0, 0.0, 99.0, -np.inf, np.inf, -np.inf, -1e4 - 1], np.float64)
    got = ug.logaddexp(ug.asarray(a, device=dev), ug.asarray(b, device=dev))
    check(got, np.logaddexp(a, b), rtol=1e-14, atol=0)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    got32 = ug.logaddexp(ug.asarray(a32, device=dev), ug.asarray(b32, device=dev))
    check(got32, np.logaddexp(a32, b32), rtol=3e-7, atol=0)


def test_clip(dev):
    a = np.array([-5.0, -0.5, 0.0, 2.0, 9.0, np.nan], np.float32)
    x = ug.asarray(a, device=dev)
    check(ug.clip(x, min=-1, max=3), np.clip(a, -1, 3))
    check(ug.clip(x, max=0.5), np.minimum(a, np.float32(0.5)))
    check(ug.clip(x), a)
    lo = ug.asarray(np.zeros(6, np.float64), device=dev)
    assert ug.clip(x, min=lo).dtype == ug.float32
    i = ug.asarray(np.arange(-3, 4, dtype=np.int32), device=dev)
    check(ug.clip(i, min=-1, max=2), np.clip(np.arange(-3, 4, dtype=np.int32), -1, 2))


def test_logical(dev):
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    x, y = ug.asarray(a, device=dev), ug.asarray(b, device=dev)
    check(ug.logical_and(x, y), a & b)
    check(ug.logical_or(x, y), a | b)
    check(ug.logical_xor(x, y), a ^ b)
    check(ug.logical_not(x), ~a)
    check(ug.logical_and(ug.asarray([0.0, 2.0, np.nan], device=dev), ug.asarray([1, 1, 1], device=dev)),
          np.array([False, True, True]))


def test_bool_operators(dev):
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    x, y = ug.asarray(a, device=dev), ug.asarray(b, device=dev)
    check(x & y, a & b)
    check(x | y, a | b)
    check(x ^ y, a ^ b)
    check(~x, ~a)
    check(True & y, b)
    f = ug.asarray([1.0, 2.0], device=dev)
    for op in (lambda: f & f, lambda: f | 1, lambda: f ^ f, lambda: ~f):
        with pytest.raises(TypeError, match="integer or bool"):
            op()


def test_real_imag_conj(dev):
    a = np.array([1.5, -2.0], np.float32)
    x = ug.asarray(a, device=dev)
    check(ug.real(x), a)
    check(ug.conj(x), a)
    check(ug.imag(x), np.zeros(2, np.float32))


def test_elementwise_errors(dev):
    b = ug.asarray([True], device=dev)
    with pytest.raises(TypeError, match="numeric"):
        ug.sign(b)
    with pytest.raises(TypeError, match="floating"):
        ug.copysign(ug.asarray([1], device=dev), ug.asarray([1], device=dev))
    with pytest.raises(ValueError, match="negative integer powers"):
        ug.pow(ug.asarray([2], device=dev), -1)


# --- statistical and utility ---------------------------------------------------------------------

S = (np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5) * 0.37 - 4)


@pytest.mark.filterwarnings("ignore:Degrees of freedom", "ignore:invalid value")
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), ()])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(dev, axis, keepdims):
    x = ug.asarray(S, device=dev)
    for name in ("sum", "max", "min", "mean"):
        check(getattr(ug, name)(x, axis=axis, keepdims=keepdims), getattr(np, name)(S, axis=axis, keepdims=keepdims),
              rtol=1e-6, atol=1e-6)
    for correction in (0, 1, 1.5):
        check(ug.var(x, axis=axis, keepdims=keepdims, correction=correction),
              np.var(S, axis=axis, keepdims=keepdims, ddof=correction), rtol=1e-5, atol=1e-6)
        check(ug.std(x, axis=axis, keepdims=keepdims, correction=correction),
              np.std(S, axis=axis, keepdims=keepdims, ddof=correction), rtol=1e-5, atol=1e-6)


def test_sum_dtypes(dev):
    i32 = ug.asarray(np.array([2**31 - 1, 5], np.int32), device=dev)
    assert ug.sum(i32).dtype == ug.int64 and ug.sum(i32).item() == 2**31 + 4
    assert ug.sum(ug.asarray([True, True, False], device=dev)).dtype == ug.int64
    assert ug.sum(ug.asarray([1.5], device=dev)).dtype == ug.float32
    check(ug.sum(i32, dtype=ug.float64), np.array(2**31 + 4, np.float64))
    check(ug.sum(ug.asarray(S, device=dev), axis=1, dtype=ug.float64), S.sum(axis=1, dtype=np.float64), rtol=1e-6)
    check(ug.sum(i32, dtype=ug.int32), np.sum(np.array([2**31 - 1, 5], np.int32), dtype=np.int32))


@pytest.mark.filterwarnings("ignore:Degrees of freedom")
def test_var_more_correction_than_elements(dev):
    with np.errstate(all="ignore"):
        want = np.var(np.array([1.0, 2.0], np.float32), ddof=3)
    check(ug.var(ug.asarray([1.0, 2.0], device=dev), correction=3), want)
    with pytest.raises(ValueError, match="correction"):
        ug.var(ug.asarray([1.0], device=dev), correction=-1)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_all_any(dev, axis):
    a = np.array([[0.0, 1.0, np.nan], [2.0, 3.0, -1.0]], np.float32)
    for arr in (a, a != 0, np.zeros((2, 0)), np.array([[0, 0, 0], [1, 0, -2]], np.int32)):
        x = ug.asarray(arr, device=dev)
        check(ug.all(x, axis=axis), np.all(arr, axis=axis))
        check(ug.any(x, axis=axis, keepdims=True), np.any(arr, axis=axis, keepdims=True))


@pytest.mark.parametrize("n, axis", [(1, -1), (2, 0), (0, 1), (3, 1), (7, 1)])
def test_diff(dev, n, axis):
    a = (np.arange(20, dtype=np.int64) ** 2).reshape(4, 5)
    check(ug.diff(ug.asarray(a, device=dev), n=n, axis=axis), np.diff(a, n=n, axis=axis))
    b = a % 3 == 0
    check(ug.diff(ug.asarray(b, device=dev), axis=axis), np.diff(b, axis=axis))


@pytest.mark.parametrize("axis", [0, 1])
def test_diff_prepend_append(dev, axis):
    a = (np.arange(12, dtype=np.float32) ** 2).reshape(3, 4)
    x = ug.asarray(a, device=dev)
    edge = np.take(a, [0], axis=axis) - 1
    got = ug.diff(x, axis=axis, n=2, prepend=ug.asarray(edge, device=dev), append=7.0)
    assert len(ug.schedule(got).kernels) == 1
    check(got, np.diff(a, axis=axis, n=2, prepend=edge, append=np.float32(7)))


def test_diff_errors(dev):
    x = ug.asarray([1, 2], device=dev)
    with pytest.raises(ValueError, match="dimensions"):
        ug.diff(x, prepend=ug.asarray([[1]], device=dev))
    with pytest.raises(TypeError, match="prepend"):
        ug.diff(x, prepend="a")
    with pytest.raises(ValueError, match="n must"):
        ug.diff(x, n=-1)


# --- linalg -------------------------------------------------------------------------------------

M = (np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4) % 7) - 3


def test_linalg_products(dev):
    x = ug.asarray(M, device=dev)

    def check_products(got, want):
        check(got, want, zero_signs=False)

    y = ug.asarray(np.swapaxes(M, -1, -2) + 1, device=dev)
    check_products(ug.linalg.matmul(x, y), M @ (np.swapaxes(M, -1, -2) + 1))
    axes = ((1, 2), (0, 1))
    check_products(ug.tensordot(x, ug.asarray(M[0], device=dev), axes=axes), np.tensordot(M, M[0], axes=axes))
    check_products(ug.linalg.tensordot(x, x, axes=0), np.tensordot(M, M, axes=0))
    check_products(ug.tensordot(x, ug.asarray(M[0].T, device=dev), axes=1), np.tensordot(M, M[0].T, axes=1))
    check_products(ug.vecdot(x, ug.asarray(M[0], device=dev)), np.sum(M * M[0], axis=-1))
    check_products(ug.linalg.vecdot(x, x, axis=0), np.sum(M * M, axis=0))
    v = np.array([1.0, -2.0, 3.0])
    check_products(ug.linalg.outer(ug.asarray(v, device=dev), ug.asarray(v[:2], device=dev)), np.outer(v, v[:2]))
    with pytest.raises(ValueError, match="differ in size"):
        ug.tensordot(x, x, axes=((0,), (1,)))
    with pytest.raises(ValueError, match="differ in size"):
        ug.vecdot(x, ug.asarray(np.ones((3, 1)), device=dev))


@pytest.mark.parametrize("offset", [-2, -1, 0, 1, 3, 5])
def test_diagonal_trace(dev, offset):
    x = ug.asarray(M, device=dev)
    check(ug.linalg.diagonal(x, offset=offset), np.diagonal(M, offset=offset, axis1=-2, axis2=-1))
    check(ug.linalg.trace(x, offset=offset), np.trace(M, offset=offset, axis1=-2, axis2=-1))
    i = ug.asarray(M.astype(np.int32), device=dev)
    assert ug.linalg.trace(i, offset=offset).dtype == ug.int64


@pytest.mark.parametrize("ord", [2, 1, 0, math.inf, -math.inf, 3, -1.5])
@pytest.mark.parametrize("axis", [None, -1, (0, 2)])
def test_vector_norm(dev, ord, axis):
    with np.errstate(all="ignore"):
        want = np.linalg.vector_norm(M, ord=ord, axis=axis, keepdims=True)
    check(ug.linalg.vector_norm(ug.asarray(M, device=dev), ord=ord, axis=axis, keepdims=True), want, rtol=1e-12)


@pytest.mark.parametrize("ord", ["fro", 1, -1, math.inf, -math.inf, 2, -2, "nuc"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norm(dev, ord, keepdims):
    check(ug.linalg.matrix_norm(ug.asarray(M, device=dev), ord=ord, keepdims=keepdims),
          np.linalg.matrix_norm(M, ord=ord, keepdims=keepdims), rtol=1e-12)


SPD = M[..., :3] @ np.swapaxes(M[..., :3], -1, -2) + 5 * np.eye(3)  # (2, 3, 3), symmetric positive definite


@pytest.mark.parametrize("name, np_fn", [
    ("inv", np.linalg.inv), ("det", np.linalg.det), ("eigvalsh", np.linalg.eigvalsh), ("svdvals", np.linalg.svdvals),
    ("cholesky", np.linalg.cholesky), ("matrix_rank", np.linalg.matrix_rank), ("pinv", np.linalg.pinv),
])
def test_linalg_host_items(dev, name, np_fn):
    """Decompositions run numpy.linalg on the host at the call (inside ug.jit, as custom items
    the schedule shows)."""
    got = getattr(ug.linalg, name)(ug.asarray(SPD, device=dev) * 1)
    assert got.node.realized    # computed at the call: numpy's errors are raised there
    check(got, np_fn(SPD), rtol=1e-10, atol=1e-12)
    traced = ug.jit(lambda a: getattr(ug.linalg, name)(a) + 0)
    for _ in range(2):   # traced, replayed
        check(traced(ug.asarray(SPD, device=dev)), np_fn(SPD), rtol=1e-10, atol=1e-12)


def test_linalg_host_results(dev):
    x = ug.asarray(SPD, device=dev)
    for got, want in zip(ug.linalg.eigh(x), np.linalg.eigh(SPD)):
        check(got, want, rtol=1e-10, atol=1e-12)
    assert ug.linalg.eigh(x).eigenvalues.shape == (2, 3)
    for got, want in zip(ug.linalg.qr(ug.asarray(M, device=dev)), np.linalg.qr(M)):
        check(got, want, rtol=1e-10, atol=1e-12)
    svd = zip(ug.linalg.svd(ug.asarray(M, device=dev), full_matrices=False), np.linalg.svd(M, full_matrices=False))
    for got, want in svd:
        check(got.abs(), np.abs(want), rtol=1e-9, atol=1e-12)  # the signs of singular vectors are free
    sign, logabs = ug.linalg.slogdet(x)
    check(sign, np.linalg.slogdet(SPD).sign)
    check(logabs, np.linalg.slogdet(SPD).logabsdet, rtol=1e-12)
    b = np.array([1.0, 2.0, -1.0])
    check(ug.linalg.solve(x, ug.asarray(b, device=dev)), np.linalg.solve(SPD, b), rtol=1e-10)
    check(ug.linalg.solve(x, ug.asarray(SPD[0], device=dev)), np.linalg.solve(SPD, SPD[0]), rtol=1e-10, atol=1e-12)
    rtol = ug.asarray(np.array([0.5, 1e-9]), device=dev)
    check(ug.linalg.matrix_rank(x, rtol=rtol), np.linalg.matrix_rank(SPD, rtol=np.array([0.5, 1e-9])))
    with pytest.raises(ValueError, match="square"):
        ug.linalg.inv(ug.asarray(M, device=dev))
    with pytest.raises(ValueError, match="mode"):
        ug.linalg.qr(x, mode="r")


@pytest.mark.parametrize("n", [0, 1, 2, 5, -1, -3])
def test_matrix_power(dev, n):
    got = ug.linalg.matrix_power(ug.asarray(SPD / 5, device=dev), n)
    check(got, np.linalg.matrix_power(SPD / 5, n), rtol=1e-10, atol=1e-12, zero_signs=False)


@pytest.mark.parametrize("axis", [-1, 0])
def test_cross(dev, axis):
    a = np.moveaxis((np.arange(12.0) % 5 - 2).reshape(4, 3), -1, axis)
    b = np.moveaxis((np.arange(12.0) % 7 - 3).reshape(4, 3), -1, axis)
    check(ug.linalg.cross(ug.asarray(a, device=dev), ug.asarray(b, device=dev), axis=axis), np.cross(a, b, axis=axis))
    with pytest.raises(ValueError, match="size 3"):
        ug.linalg.cross(ug.asarray(np.ones((2, 2)), device=dev), ug.asarray(np.ones((2, 2)), device=dev))


# --- Tensor members -----------------------------------------------------------------------------

def test_tensor_scalar_conversions(dev):
    assert int(ug.asarray(7, device=dev)) == 7 and float(ug.asarray(2.5, device=dev)) == 2.5
    assert complex(ug.asarray(2.5, device=dev)) == 2.5 + 0j
    assert [10, 20, 30][ug.asarray(1, device=dev)] == 20
    assert bool(ug.asarray([0.0], device=dev)) is False
    two = ug.asarray([1, 2], device=dev)
    for conv in (int, float, complex):
        with pytest.raises(TypeError, match="one element"):
            conv(two)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(two)
    with pytest.raises(TypeError, match="integer"):
        [1, 2][ug.asarray(1.0, device=dev)]


def test_tensor_device_members(dev):
    x = ug.asarray([[1.0, 2.0]], device=dev)
    assert x.device == dev and x.to_device("ref").device == "ref"
    with pytest.raises(ValueError, match="stream"):
        x.to_device(dev, stream=1)
    assert (x.ndim, x.shape, x.size, x.dtype) == (2, (1, 2), 2, ug.float32)
    check(x.mT, np.array([[1.0], [2.0]], np.float32))
    with pytest.raises(ValueError, match="2 dimensions"):
        ug.asarray([1.0], device=dev).mT


def test_lazy_and_fused(dev):
    """The creation and composition functions build graphs: nothing runs until a value is read,
    and a composite like var(correction=1) or clip(eye) schedules few kernels."""
    x = ug.asarray(S, device=dev)
    v = ug.var(x, axis=0, correction=1)
    assert not v.node.realized
    y = ug.clip(ug.eye(64, device=dev) * 3 - 1, min=0, max=1) + ug.arange(64, dtype=ug.float32, device=dev)
    assert len(ug.schedule(y).items) == 1
    check(y, np.clip(np.eye(64, dtype=np.float32) * 3 - 1, 0, 1) + np.arange(64, dtype=np.float32))
