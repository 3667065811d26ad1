"""numpy functions called on ug tensors (array_api.numpy_interop): ug's lazy functions where the
namespace has them, numpy's own on the values where it does not."""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug

DEVICES = [d for d in ("ref", "cpu") if d in ug.devices()]


@pytest.fixture(params=DEVICES)
def dev(request):
    return request.param


X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
Y = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)

# (call, what numpy itself gives on arrays): each call gets ug tensors (or a mix) and must give
# a lazy ug tensor with numpy's values and dtype
LAZY = {
    "exp": lambda x, y: np.exp(x),
    "ufunc two args": lambda x, y: np.maximum(x, y),
    "ufunc scalar": lambda x, y: np.multiply(x, 2),
    "array + tensor": lambda x, y: np.asarray(Y) + x,
    "array < tensor": lambda x, y: np.asarray(Y) < x,
    "add.reduce": lambda x, y: np.add.reduce(x),
    "maximum.reduce keepdims": lambda x, y: np.maximum.reduce(x, axis=1, keepdims=True),
    "sum axis": lambda x, y: np.sum(x, axis=0),
    "sum dtype": lambda x, y: np.sum(x, dtype=np.float64),
    "prod": lambda x, y: np.prod(y, axis=1),
    "mean": lambda x, y: np.mean(x),
    "var ddof": lambda x, y: np.var(x, axis=1, ddof=1),
    "std": lambda x, y: np.std(x),
    "max": lambda x, y: np.max(x, axis=1),
    "amin": lambda x, y: np.amin(x),
    "reshape": lambda x, y: np.reshape(x, (4, 3)),
    "transpose": lambda x, y: np.transpose(x),
    "where": lambda x, y: np.where(x > 0, x, y),
    "clip": lambda x, y: np.clip(x, -1, 2),
    "stack": lambda x, y: np.stack([x, y]),
    "expand_dims": lambda x, y: np.expand_dims(x, 1),
    "matmul": lambda x, y: np.matmul(x, np.transpose(y)),
    "zeros_like": lambda x, y: np.zeros_like(x),
    "full_like": lambda x, y: np.full_like(x, 3.0),
    # numpy's positions and keywords, as libraries written for numpy pass them
    "flip axis by position": lambda x, y: np.flip(x, 0),
    "tril k by position": lambda x, y: np.tril(x, 1),
    "diff n, axis by position": lambda x, y: np.diff(x, 2, 0),
    "roll by position": lambda x, y: np.roll(x, 1, 1),
    "repeat by position": lambda x, y: np.repeat(x, 2, 0),
    "tile int": lambda x, y: np.tile(x, 2),
    "tensordot axes by position": lambda x, y: np.tensordot(x, y, ([1], [1])),
    "squeeze every size-1 axis": lambda x, y: np.squeeze(np.expand_dims(x, 0)),
    "stack axis by position": lambda x, y: np.stack([x, y], 1),
    "count_nonzero axis by position": lambda x, y: np.count_nonzero(x, 1),
    "mean dtype by position": lambda x, y: np.mean(x, 0, np.float64),
    "var dtype": lambda x, y: np.var(x, axis=1, dtype=np.float64, ddof=1),
    "max keepdims by position": lambda x, y: np.max(x, 1, None, True),
    "all keepdims by position": lambda x, y: np.all(x > 0, 0, None, True),
    "ufunc dtype": lambda x, y: np.add(x, y, dtype=np.float64),
    "nanmean": lambda x, y: np.nanmean(np.where(x > 0, x, np.nan), axis=0),
    "pad constant_values": lambda x, y: np.pad(x, ((1, 0), (2, 1)), constant_values=-1),
    "round decimals": lambda x, y: np.round(y, 1),
    "sliding_window_view": lambda x, y: np.lib.stride_tricks.sliding_window_view(x, 2, axis=1),
    # np.fft's functions (ug.fft's): numpy's positions and keywords
    "fft n, axis by position": lambda x, y: np.fft.fft(x, 6, 0),
    "ifft norm": lambda x, y: np.fft.ifft(x, norm="ortho"),
    "rfft": lambda x, y: np.fft.rfft(y),
    "irfft of an rfft": lambda x, y: np.fft.irfft(np.fft.rfft(x), 4),
    "hfft": lambda x, y: np.fft.hfft(x, 5),
    "ihfft": lambda x, y: np.fft.ihfft(y, axis=0),
    "fftn axes": lambda x, y: np.fft.fftn(x, axes=(0, 1)),
    "ifftn s": lambda x, y: np.fft.ifftn(x, s=(2, 5), axes=(0, 1)),
    "rfftn": lambda x, y: np.fft.rfftn(y),
    "irfftn": lambda x, y: np.fft.irfftn(np.fft.rfftn(x), s=(3, 4), axes=(0, 1)),
    "fftshift": lambda x, y: np.fft.fftshift(x),
    "ifftshift axes": lambda x, y: np.fft.ifftshift(x, axes=1),
}


def test_numpy_split_gives_lazy_views(dev):
    x = ug.tensor(X, device=dev)
    for got, want in ((np.split(x, 2, axis=1), np.split(X, 2, axis=1)), (np.split(x, [1, 2]), np.split(X, [1, 2])),
                      (np.array_split(x, 3, 1), np.array_split(X, 3, 1))):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            assert isinstance(g, ug.Tensor) and g.device == dev
            np.testing.assert_array_equal(g.numpy(), w)


@pytest.mark.parametrize("name", list(LAZY))
def test_numpy_calls_on_tensors_run_ug_functions(dev, name):
    fn = LAZY[name]
    want = np.asarray(fn(X, Y))
    got = fn(ug.tensor(X, device=dev), ug.tensor(Y, device=dev))
    assert isinstance(got, ug.Tensor), type(got)
    assert got.device == dev
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


def test_numpy_calls_fuse_into_one_kernel(dev):
    x = ug.tensor(X, device=dev)
    out = np.sum(np.exp(np.maximum(x, 0.0)) * 2.0, axis=1)
    assert isinstance(out, ug.Tensor)
    assert len(ug.schedule(out).kernels) == 1
    np.testing.assert_allclose(out.numpy(), np.sum(np.exp(np.maximum(X, 0.0)) * 2.0, axis=1), rtol=1e-6)


def test_what_ug_lacks_runs_in_numpy_on_the_values(dev):
    x = ug.tensor(X, device=dev)
    out = np.empty((3, 4), np.float32)
    got = np.add(x, 1, out=out)            # out= a numpy array: written, and returned
    assert got is out
    np.testing.assert_array_equal(out, X + 1)
    norm = np.linalg.norm(x)               # not in the namespace (yet): numpy's result, a numpy scalar
    assert isinstance(norm, (np.floating, float))
    assert np.isclose(norm, np.linalg.norm(X))
    acc = np.add.accumulate(x, axis=1)     # a ufunc method ug has no counterpart of: numpy's
    assert isinstance(acc, ug.Tensor) and acc.device == dev   # array, as a tensor on x's device
    np.testing.assert_allclose(acc.numpy(), np.add.accumulate(X, axis=1))
    values, counts = np.unique(x > 0, return_counts=True)   # tuples of arrays too
    assert isinstance(values, ug.Tensor) and isinstance(counts, ug.Tensor)
    assert counts.numpy().tolist() == [6, 6]
    eig = np.linalg.eigh(x[:, :3].T @ x[:, :3])             # (a named tuple stays one)
    assert isinstance(eig.eigenvalues, ug.Tensor)


def test_shape_queries_read_no_values(dev):
    t = ug.tensor(X, device=dev) * 2       # lazy
    assert (np.shape(t), np.ndim(t), np.size(t), np.size(t, 1)) == ((3, 4), 2, 12, 4)
    assert not t.node.realized


def test_numpy_writes_and_like_on_the_values(dev):
    """(the device kit's test_interop_semantics covers these on every device)"""
    x = ug.tensor(X, device=dev)
    y = ug.zeros((3, 4), device=dev)
    assert np.exp(x, out=y) is y
    np.testing.assert_allclose(y.numpy(), np.exp(X), rtol=1e-6)
    np.fill_diagonal(y, 0)
    want = np.exp(X)
    np.fill_diagonal(want, 0)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
    made = np.asarray([1, 2], like=x)
    assert isinstance(made, ug.Tensor) and made.device == dev


def test_np_diff_prepend_append_are_numpy_values():
    # numpy's diff makes prepend/append arrays: a Python 0 is an int64 one, which promotes float32
    a = np.arange(5.0, dtype=np.float32) ** 2
    t = ug.asarray(a, device="ref")
    for kw in (dict(prepend=0), dict(append=2.5), dict(prepend=np.float32(1)), dict(prepend=np.array([1.0]))):
        got, want = np.diff(t, **kw), np.diff(a, **kw)
        assert isinstance(got, ug.Tensor) and got.dtype == want.dtype, (kw, got.dtype, want.dtype)
        np.testing.assert_array_equal(got.numpy(), want)
    assert ug.diff(t, prepend=0).dtype == np.float32   # ug's own: a weak Python scalar
