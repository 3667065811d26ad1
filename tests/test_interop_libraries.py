"""dask.array and xarray running on ug tensors, as their users write it, against the same calls on
numpy arrays (issue 23: "Interop that real libraries call"). Each library's tests are skipped
where it is not installed (CI installs `dask`, `xarray` and, with scikit-learn, `scipy`).

- dask: chunks that are ug tensors (`da.from_array(ug_tensor, chunks=...)` or
  `.map_blocks(ug.asarray)`): reductions with dtype= (sum, mean, std, var, prod, cumsum), argmax
  and argmin (NEP 35 `np.asarray(x, like=chunk)`, `chunk.ravel()`), nan-reductions, topk,
  tensordot and einsum, indexing, concatenation; the results stay ug tensors.
- xarray: `xr.DataArray(ug_tensor)` reductions (NaN skipped by default: numpy's nan-functions,
  lazy ug ones), rolling windows (`xp.pad(..., constant_values=)`,
  `xp.lib.stride_tricks.sliding_window_view`), where/fillna (`xp.result_type(scalar)`),
  quantile, round(decimals), polyfit (`xp.any(..., out=None)`).
- scipy (SCIPY_ARRAY_API=1): scipy.fft's transforms and scipy.signal.fftconvolve on ug tensors run
  ug.fft (issue 25), ug results.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ug_core as ug

DEVICES = [d for d in ("ref", "cpu") if d in ug.devices()]
RNG = np.random.default_rng(23)
A = RNG.random((8, 6)).astype(np.float32)
A_NAN = A.copy()
A_NAN[1, 2] = A_NAN[5, 0] = np.nan
INTS = RNG.integers(0, 10, (8, 6))


@pytest.fixture(params=DEVICES)
def dev(request):
    return request.param


def _host(value):
    return value.numpy() if isinstance(value, ug.Tensor) else np.asarray(value)


def _same(got, want, rtol=1e-5):
    values = _host(got)
    want = np.asarray(want)
    assert values.shape == want.shape and values.dtype == want.dtype, (values.shape, values.dtype, want.shape, want.dtype)
    np.testing.assert_allclose(values, want, rtol=rtol, atol=1e-6, equal_nan=True)


# --------------------------------------------------------------------- dask.array
DASK_CASES = {
    "sum": lambda x, i: x.sum(),
    "sum axis dtype": lambda x, i: x.sum(axis=0, dtype=np.float64),
    "sum int dtype": lambda x, i: i.sum(axis=1, dtype=np.int32),
    "mean": lambda x, i: x.mean(),
    "mean axis": lambda x, i: x.mean(axis=1),
    "mean int": lambda x, i: i.mean(axis=0),
    "mean split_every": lambda x, i: x.mean(axis=0, split_every=2),
    "std": lambda x, i: x.std(),
    "std ddof": lambda x, i: i.std(axis=0, ddof=1),
    "var": lambda x, i: x.var(axis=0),
    "moment": lambda x, i: x.moment(3, axis=0),
    "prod": lambda x, i: (i % 3 + 1).prod(axis=0),
    "cumsum": lambda x, i: x.cumsum(axis=0),
    "cumprod": lambda x, i: (i % 3 + 1).cumprod(axis=1),
    "max min": lambda x, i: x.max(axis=1) - x.min(axis=1),
    "argmax": lambda x, i: x.argmax(),
    "argmax axis": lambda x, i: x.argmax(axis=0),
    "argmin axis": lambda x, i: x.argmin(axis=1),
    "any all": lambda x, i: (x > 0.5).any(axis=0) & (x > 0.1).all(axis=0),
    "nanmean": lambda x, i: np.nanmean(x, axis=0),
    "nanstd": lambda x, i: np.nanstd(x),
    "nanmax": lambda x, i: np.nanmax(x, axis=1),
    "nanargmax": lambda x, i: np.nanargmax(x, axis=0),
    "topk": lambda x, i: i.topk(3, axis=0),
    "tensordot": lambda x, i: np.tensordot(np.nan_to_num(x), np.nan_to_num(x), axes=([1], [1])),
    "matmul": lambda x, i: np.nan_to_num(x).T @ np.nan_to_num(x),
    "elementwise": lambda x, i: np.exp(x) * 2 + i,
    "where": lambda x, i: np.where(x > 0.5, x, 0),
    "slicing": lambda x, i: x[::2, 1:],
    "fancy indexing": lambda x, i: x[[0, 3, 5]],
    "concatenate": lambda x, i: np.concatenate([x, x], axis=0),
    "pad": lambda x, i: np.pad(i, 1, constant_values=3),
    "bincount": lambda x, i: np.bincount(i.ravel()),
}


@pytest.mark.parametrize("chunks_from", ["from_array", "map_blocks"])
@pytest.mark.parametrize("name", list(DASK_CASES))
def test_dask_array_with_ug_chunks(dev, chunks_from, name):
    da = pytest.importorskip("dask.array")
    import dask

    fn = DASK_CASES[name]
    source = A_NAN if name.startswith("nan") else A
    if chunks_from == "from_array":
        x = da.from_array(ug.asarray(source, device=dev), chunks=(4, 3))
        i = da.from_array(ug.asarray(INTS, device=dev), chunks=(4, 3))
    else:
        x = da.from_array(source, chunks=(4, 3)).map_blocks(ug.asarray, device=dev)
        i = da.from_array(INTS, chunks=(4, 3)).map_blocks(ug.asarray, device=dev)
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = fn(x, i).compute()
        want = fn(da.from_array(source, chunks=(4, 3)), da.from_array(INTS, chunks=(4, 3))).compute()
    assert isinstance(got, ug.Tensor), type(got)   # the chunks' type all the way through
    assert got.device == dev
    _same(got, want)


# --------------------------------------------------------------------- xarray
XARRAY_CASES = {
    "mean": lambda d: d.mean(),
    "mean dim": lambda d: d.mean("x"),
    "mean skipna=False": lambda d: d.mean("y", skipna=False),
    "std": lambda d: d.std("y"),
    "std ddof": lambda d: d.std("x", ddof=1),
    "var": lambda d: d.var(),
    "sum": lambda d: d.sum("x"),
    "prod": lambda d: d.prod("x"),
    "max": lambda d: d.max("y"),
    "min": lambda d: d.min(),
    "count": lambda d: d.count("x"),
    "argmax": lambda d: d.argmax("x"),
    "argmin": lambda d: d.argmin("y"),
    "median": lambda d: d.median("x"),
    "quantile": lambda d: d.quantile(0.5, dim="x"),
    "cumsum": lambda d: d.cumsum("x"),
    "cumprod": lambda d: d.cumprod("y"),
    "rolling mean": lambda d: d.rolling(x=3).mean(),
    "rolling mean center": lambda d: d.rolling(x=3, center=True).mean(),
    "rolling sum": lambda d: d.rolling(y=2).sum(),
    "rolling max min_periods": lambda d: d.rolling(x=3, min_periods=1).max(),
    "rolling std": lambda d: d.rolling(x=3).std(),
    "rolling var center": lambda d: d.rolling(y=2, center=True).var(),
    "rolling construct": lambda d: d.rolling(x=2).construct("w"),
    "coarsen": lambda d: d.coarsen(x=2).mean(),
    "groupby": lambda d: d.groupby("x").mean(),
    "arithmetic": lambda d: d * 2 + 1,
    "where": lambda d: d.where(d > 0.5),
    "fillna": lambda d: d.where(d > 0.5).fillna(0),
    "isel": lambda d: d.isel(x=slice(1, 3)),
    "diff": lambda d: d.diff("x"),
    "shift": lambda d: d.shift(x=1),
    "pad": lambda d: d.pad(x=(1, 2), constant_values=0),
    "pad reflect": lambda d: d.pad(x=1, mode="reflect"),
    "roll": lambda d: d.roll(x=2),
    "concat": lambda d: __import__("xarray").concat([d, d], "x"),
    "transpose": lambda d: d.T,
    "round": lambda d: d.round(2),
    "clip": lambda d: d.clip(0.2, 0.7),
    "polyfit": lambda d: d.polyfit("x", 1).polyfit_coefficients,
    "any": lambda d: (d > 0.5).any("x"),
}


@pytest.mark.parametrize("name", list(XARRAY_CASES))
def test_xarray_wrapping_ug(name):
    """On the default device: xarray makes its fill values with `xp.asarray(0)`, without a
    device, and ug does not move a 0-d tensor between devices implicitly (where, arithmetic)."""
    xr = pytest.importorskip("xarray")
    fn = XARRAY_CASES[name]
    coords = {"x": np.arange(A_NAN.shape[0])}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = fn(xr.DataArray(ug.asarray(A_NAN), dims=("x", "y"), coords=coords))
        want = fn(xr.DataArray(A_NAN, dims=("x", "y"), coords=coords))
    assert got.dims == want.dims
    _same(got.data, want.values)
    if name not in ("polyfit",):   # (polyfit solves with numpy's lstsq: a numpy result)
        assert isinstance(got.data, ug.Tensor), type(got.data)


SCIPY_ON_UG = r"""
import numpy as np, ug_core as ug
import scipy.fft as sf, scipy.signal as ss
rng = np.random.default_rng(0)
a = rng.standard_normal((4, 64)).astype(np.float32)
x = ug.tensor(a, device=DEVICE)
checks = {
    "rfft": (sf.rfft(x), np.fft.rfft(a)),
    "fft axis 0 of complex": (sf.fft(x.astype(ug.complex64), axis=0), np.fft.fft(a.astype(np.complex64), axis=0)),
    "irfft(rfft)": (sf.irfft(sf.rfft(x), n=64), a),
    "fftshift": (sf.fftshift(x), np.fft.fftshift(a)),
    "fftconvolve": (ss.fftconvolve(x[0], x[1]), np.convolve(a[0], a[1])),
}
for name, (got, want) in checks.items():
    assert isinstance(got, ug.Tensor) and got.device == DEVICE, (name, type(got))
    assert np.allclose(np.asarray(got), want, atol=1e-4), name
print("ok")
"""


@pytest.mark.parametrize("dev", DEVICES)
def test_scipy_fft_and_signal_on_ug_tensors(dev):
    """SciPy's array API mode (SCIPY_ARRAY_API=1, read when scipy is imported: a fresh process)
    runs scipy.fft and scipy.signal.fftconvolve on ug tensors through ug.fft: ug results."""
    pytest.importorskip("scipy")
    import os
    import subprocess
    import sys
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    done = subprocess.run([sys.executable, "-c", f"DEVICE = {dev!r}\n" + SCIPY_ON_UG], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
