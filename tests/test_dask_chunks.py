"""dask.array with ug chunks through ug_core.dask (issue 28): each of dask's basic operations on
ug chunks gives numpy chunks' result, as a ug tensor on the chunks' device; the registrations
(dispatch tables, chunk type, metas), the helpers (from_array, generate, map_blocks/blockwise/
map_overlap with the jit setting, to_numpy), and that `import ug_core` alone does not import dask.
The multi-process runs are in test_dask_cluster.py."""
from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import ug_core as ug

da = pytest.importorskip("dask.array")
import dask  # noqa: E402

import ug_core.dask as ugd  # noqa: E402

DEVICES = [d for d in ("ref", "cpu") if d in ug.devices()]
RNG = np.random.default_rng(28)
A = RNG.random((8, 6)).astype(np.float32)
INTS = RNG.integers(0, 7, (8, 6))


def _stencil(b):
    return (np.roll(b, 1, 0) + np.roll(b, -1, 0) + np.roll(b, 1, 1) + np.roll(b, -1, 1)) / 4 - b


CASES = {
    "sum": lambda x, i: x.sum(),
    "mean axis": lambda x, i: x.mean(axis=0),
    "mean int": lambda x, i: i.mean(),
    "std": lambda x, i: x.std(),
    "var ddof": lambda x, i: x.var(axis=1, ddof=1),
    "min max": lambda x, i: x.min(axis=0) + x.max(axis=0),
    "argmax": lambda x, i: x.argmax(),
    "argmin axis": lambda x, i: x.argmin(axis=1),
    "nanmean": lambda x, i: da.nanmean(da.where(x > 0.8, np.nan, x), axis=0),
    "matmul": lambda x, i: x @ x.T,
    "tensordot": lambda x, i: da.tensordot(x, x, axes=([0], [0])),
    "einsum": lambda x, i: da.einsum("ij,ij->j", x, x),
    "einsum int": lambda x, i: da.einsum("ij->i", i),
    "blockwise": lambda x, i: da.blockwise(lambda a, b: a * b + 1, "ij", x, "ij", x, "ij", dtype=x.dtype),
    "map_overlap": lambda x, i: x.map_overlap(_stencil, depth=1, boundary="reflect"),
    "percentile": lambda x, i: da.percentile(x.ravel(), [10, 50, 90]),
    "take": lambda x, i: da.take(x, [0, 5, 7], axis=0),
    "concatenate": lambda x, i: da.concatenate([x, x], axis=1),
    "rechunk": lambda x, i: x.rechunk((8, 2)) * 2,
    "cumsum": lambda x, i: x.cumsum(axis=0),
    "unique": lambda x, i: da.unique(i),
    "sort per chunk": lambda x, i: x.map_blocks(lambda b: np.sort(b, axis=1)),
    "histogram": lambda x, i: da.histogram(x, bins=4, range=(0, 1))[0],
    "where": lambda x, i: da.where(x > 0.5, x, -x),
    "reshape": lambda x, i: x.reshape(48).sum(),
}


@pytest.fixture(params=DEVICES)
def dev(request):
    return request.param


def _run(expr):
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return expr.compute()


@pytest.mark.parametrize("name", list(CASES))
def test_basic_operations_match_numpy_chunks(dev, name):
    x, i = ugd.from_array(A, chunks=(4, 3), device=dev), ugd.from_array(INTS, chunks=(4, 3), device=dev)
    assert isinstance(x._meta, ug.Tensor) and x._meta.device == dev
    got = _run(CASES[name](x, i))
    want = _run(CASES[name](da.from_array(A, chunks=(4, 3)), da.from_array(INTS, chunks=(4, 3))))
    if name != "percentile":     # dask merges the chunks' percentiles on the host, as for numpy chunks
        assert isinstance(got, ug.Tensor) and got.device == dev, type(got)
    values = got.numpy() if isinstance(got, ug.Tensor) else got
    assert values.shape == want.shape and values.dtype == want.dtype, (values.dtype, want.dtype)
    np.testing.assert_allclose(values, want, rtol=1e-5, atol=1e-6)


def test_each_chunk_is_a_ug_tensor(dev):
    x = ugd.from_array(A, chunks=(4, 3), device=dev)
    y = (x * 2).map_overlap(_stencil, depth=1, boundary="none") @ x.T
    with dask.config.set(scheduler="synchronous"):
        blocks = dask.compute(*y.to_delayed().ravel())
    assert len(blocks) == 4
    for block in blocks:
        assert isinstance(block, ug.Tensor) and block.device == dev


def test_from_array_keeps_or_moves_a_tensors_device():
    t = ug.asarray(A, device=DEVICES[-1])
    assert ugd.from_array(t, chunks=4)._meta.device == DEVICES[-1]
    moved = ugd.from_array(t, chunks=4, device="ref")
    assert _run(moved.sum()).device == "ref"


def test_to_numpy_gives_numpy_chunks():
    x = ugd.to_numpy(ugd.from_array(A, chunks=(4, 3)) + 1)
    assert type(x._meta) is np.ndarray
    out = _run(x)
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, A + 1)


def test_generate_makes_each_chunk_where_it_is_computed(dev):
    def ramp(start, shape, device=None):
        rows = ug.arange(start[0], start[0] + shape[0], dtype="float32", device=device)[:, None]
        cols = ug.arange(start[1], start[1] + shape[1], dtype="float32", device=device)[None, :]
        return rows * 100 + cols

    x = ugd.generate(ramp, (10, 7), chunks=(4, 3), dtype="float32", device=dev)
    assert x.chunks == ((4, 4, 2), (3, 3, 1)) and x._meta.device == dev
    assert len(dict(x.__dask_graph__())) == 9    # a task per chunk, no data
    want = np.arange(10, dtype=np.float32)[:, None] * 100 + np.arange(7, dtype=np.float32)
    got = _run(x)
    assert got.device == dev
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_allclose(_run(x.std()).numpy(), want.std(), rtol=1e-5)


def test_the_jit_setting_traces_once_per_shape_and_replays(monkeypatch):
    monkeypatch.delenv(ugd.JIT_ENV, raising=False)
    x = ugd.from_array(np.arange(64, dtype=np.float32).reshape(8, 8), chunks=(4, 4))

    def f(b):
        return ug.exp(b * 0.01) * 2 - 1

    assert not ugd.jit_enabled()
    assert not any(isinstance(t, ugd.Jitted) for t in _functions(ugd.map_blocks(f, x, dtype=np.float32)))
    with ugd.jit():
        assert ugd.jit_enabled()
        y = ugd.map_blocks(f, x, dtype=np.float32)
    assert not ugd.jit_enabled()
    jitted = list({id(t): t for t in _functions(y) if isinstance(t, ugd.Jitted)}.values())
    assert len(jitted) == 1   # one function in the 4 tasks
    got = _run(y)
    np.testing.assert_allclose(got.numpy(), np.exp(np.arange(64, dtype=np.float32).reshape(8, 8) * 0.01) * 2 - 1,
                               rtol=1e-6)
    # 4 chunks of one shape: one trace, three replays
    assert ugd._jitted.get(jitted[0].token).trace_count == 1
    monkeypatch.setenv(ugd.JIT_ENV, "1")
    assert ugd.jit_enabled()
    z = ugd.blockwise(lambda a: a + 1, "ij", x, "ij", dtype=np.float32)
    assert any(isinstance(t, ugd.Jitted) for t in _functions(z))
    np.testing.assert_array_equal(_run(z).numpy(), np.arange(64, dtype=np.float32).reshape(8, 8) + 1)
    w = ugd.map_overlap(lambda b: b * 3, x, depth=1, boundary="none", dtype=np.float32, jit=False)
    assert not any(isinstance(t, ugd.Jitted) for t in _functions(w))


def _functions(arr):
    """The callables in a dask array's tasks."""
    from dask._task_spec import Task, convert_legacy_graph

    out = []
    for task in convert_legacy_graph(dict(arr.__dask_graph__())).values():
        if isinstance(task, Task):
            out.append(task.func)
            out.extend(v for v in task.kwargs.values() if callable(v))
    return out


def test_a_jitted_function_pickles_with_its_token():
    import pickle

    j = ugd.Jitted(np.negative)
    back = pickle.loads(pickle.dumps(j))
    assert back.token == j.token and back.func is np.negative
    np.testing.assert_array_equal(back(ug.asarray([1.0, 2.0])).numpy(), [-1.0, -2.0])


def test_registrations():
    from dask.array import dispatch
    from dask.array.chunk_types import is_valid_chunk_type

    t = ug.asarray(A, device=DEVICES[-1])
    assert is_valid_chunk_type(ug.Tensor)
    assert dispatch.concatenate_lookup.dispatch(type(t)) is ugd._concatenate
    assert dispatch.concatenate_lookup.dispatch(type(t[1:])) is ugd._concatenate   # views too
    count = dispatch.numel_lookup.dispatch(type(t))(t, axis=1, keepdims=True)
    assert isinstance(count, ug.Tensor) and count.shape == (8, 1) and float(count[0, 0]) == 6
    nan_count = dispatch.nannumel_lookup.dispatch(type(t))(ug.where(t > 0.5, np.nan, t), axis=0)
    np.testing.assert_array_equal(nan_count.numpy(), (A <= 0.5).sum(axis=0))
    host = dispatch.to_numpy_dispatch(t)
    assert type(host) is np.ndarray
    np.testing.assert_array_equal(host, A)
    with pytest.raises(TypeError, match="unexpected arguments"):
        ugd._einsum("ii", t[:6], bogus=1)


def test_importing_ug_core_does_not_import_dask():
    code = "import sys, ug_core; assert 'dask' not in sys.modules; import ug_core.dask; assert 'dask' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


XARRAY_CASES = {
    "dot": lambda d: __import__("xarray").dot(d, d, dim="y"),
    "rolling mean": lambda d: d.rolling(x=2).mean(),
    "rolling sum center": lambda d: d.rolling(y=3, center=True).sum(),
    "std": lambda d: d.std("x"),
    "where mean": lambda d: d.where(d > 3).mean("y"),
    "quantile": lambda d: d.quantile(0.5, dim="x"),
    "groupby": lambda d: d.groupby(__import__("xarray").DataArray([0, 1, 0, 1, 1], dims="x")).mean(),
}


@pytest.mark.parametrize("name", list(XARRAY_CASES))
def test_xarray_over_dask_over_ug(name):
    xr = pytest.importorskip("xarray")
    values = np.arange(20, dtype=np.float32).reshape(5, 4) % 7
    lazy = xr.DataArray(ugd.from_array(values, chunks=2), dims=("x", "y"))
    with dask.config.set(scheduler="synchronous"):
        got = XARRAY_CASES[name](lazy).compute()
    want = XARRAY_CASES[name](xr.DataArray(values, dims=("x", "y")))
    assert isinstance(got.data, ug.Tensor)
    np.testing.assert_allclose(got.data.numpy(), want.values, rtol=1e-5, equal_nan=True)


def test_dask_counts_a_tensors_bytes():
    from dask.sizeof import sizeof

    lazy = ug.asarray(np.ones((64, 32), dtype=np.float32)) * 2
    assert sizeof(lazy) == 64 * 32 * 4 and sizeof(lazy.astype("float64")) == 64 * 32 * 8


def test_every_task_hands_back_realized_tensors():
    import dask
    from dask.callbacks import Callback

    x = ugd.from_array(np.arange(64 * 64, dtype=np.float32).reshape(64, 64), chunks=16)
    y = ugd.map_blocks(lambda b: ug.exp(b * 1e-3) + 1, x, dtype=np.float32).sum(axis=0)
    seen = []

    def posttask(key, result, dsk, state, worker_id):
        for t in (result.values() if isinstance(result, dict) else result if isinstance(result, (tuple, list))
                  else (result,)):
            if isinstance(t, ug.Tensor):
                seen.append(t._node.realized)

    assert dask.config.get("array_optimize") is ugd.optimize
    with Callback(posttask=posttask), dask.config.set(scheduler="sync"):
        got = y.compute()
    np.testing.assert_allclose(got.numpy(), (np.exp(np.arange(64 * 64, dtype=np.float32).reshape(64, 64) * 1e-3)
                                             + 1).sum(axis=0), rtol=1e-5)
    assert seen and all(seen)
    # without it (dask's own optimization) the tasks' results stay lazy: the check can fail
    seen.clear()
    from dask.array.optimization import optimize
    with Callback(posttask=posttask), dask.config.set(scheduler="sync", array_optimize=optimize):
        ugd.map_blocks(lambda b: ug.exp(b * 1e-3) + 1, x, dtype=np.float32).sum(axis=0).compute()
    assert seen and not all(seen)


def test_matmul_sums_its_block_products_in_ug(monkeypatch):
    # dask's matmul adds the products of the k blocks with np.add(..., dtype=): ug's add (the
    # loop dtype's, numpy's rule), not numpy's on host copies of the chunks (which cost two copies
    # out, numpy's add and a copy back per pair: a third of the example's matmul run)
    from ug_core.array_api import numpy_interop

    hosted = []
    real = numpy_interop._host_call
    monkeypatch.setattr(numpy_interop, "_host_call", lambda fn, *a: hosted.append(fn) or real(fn, *a))
    a = RNG.random((8, 12)).astype(np.float32)
    x = ugd.from_array(a, chunks=4)
    got = _run(x @ x.T)
    assert isinstance(got, ug.Tensor) and not hosted, hosted
    np.testing.assert_allclose(got.numpy(), a @ a.T, rtol=1e-5)
    t = ug.asarray(a)
    assert np.add(t, t, dtype=np.float64).dtype == np.float64 and not hosted
    np.testing.assert_allclose(np.add(t, t, dtype=np.float64).numpy(), np.add(a, a, dtype=np.float64))
    with pytest.raises(TypeError):   # numpy's rule: float32 does not cast to int32 same_kind
        np.add(t, t, dtype=np.int32)


def test_distributed_sends_chunks_without_copying_them(dev, monkeypatch):
    # dask.distributed's serializer for tensors: numpy's frames over the buffer's memory (no copy out
    # of a realized whole tensor on a host-memory device), the device name in the header; a lazy
    # tensor is realized, a view sends its elements; what lands is a tensor on that device with the
    # value, which ug may compute on and write (a write does not reach the sender's memory)
    protocol = pytest.importorskip("distributed.protocol")
    a = RNG.random((64, 48)).astype(np.float32)
    t = ug.asarray(a, device=dev) + 0
    t.numpy()
    copies = []
    real = ug.Tensor.numpy
    monkeypatch.setattr(ug.Tensor, "numpy", lambda self: copies.append(self) or real(self))
    header, frames = protocol.serialize(t)
    assert header["serializer"] == "dask" and not copies
    monkeypatch.undo()
    got = protocol.deserialize(header, frames)
    assert type(got) is ug.Tensor and got.device == dev
    np.testing.assert_array_equal(got.numpy(), a)
    got[0, 0] = -1.0
    np.testing.assert_array_equal((got * 2).numpy()[0, :2], [-2.0, 2 * a[0, 1]])
    np.testing.assert_array_equal(t.numpy(), a)   # the sender's tensor kept its value
    for x, want in ((ug.asarray(a, device=dev) * 2, a * 2), (t[:, 3:5], a[:, 3:5]), (t[5], a[5])):
        back = protocol.deserialize(*protocol.serialize(x))
        assert isinstance(back, ug.Tensor) and back.device == dev and back.shape == want.shape
        np.testing.assert_array_equal(back.numpy(), want)


def test_nannies_started_here_give_workers_ug_settings():
    import dask
    environ = dask.config.get("distributed.nanny.pre-spawn-environ")
    assert str(environ["UG_LLVM_THREADS"]) == str(environ.get("OMP_NUM_THREADS", 1))
    assert environ["UG_TIER"] == "1"


def test_cubed_namespace_realizes_reductions_and_drops_their_inputs():
    import gc
    import weakref

    import ug_core.cubed as ucx

    assert ucx.asarray is ug.asarray and ucx.float32 == ug.float32 and "sum" in dir(ucx)

    def partial_reduce(xp):
        # cubed's _partial_reduce: chunk after chunk, reduce it, concatenate, reduce again
        alive, result = [], None
        for i in range(4):
            chunk = np.full((256, 256), float(i + 1), dtype=np.float32)
            alive.append(weakref.ref(chunk))
            reduced = xp.sum(xp.asarray(chunk), axis=(0, 1), keepdims=True)
            del chunk
            result = reduced if result is None else xp.sum(xp.concat([result, reduced]), axis=(0, 1), keepdims=True)
        gc.collect()
        kept = sum(r() is not None for r in alive)   # (before the result is read: that realizes it)
        return float(result.numpy().ravel()[0]), kept

    total, kept = partial_reduce(ucx)
    assert total == 256 * 256 * (1 + 2 + 3 + 4) and kept == 0
    lazy_total, lazy_kept = partial_reduce(ug)   # plain ug_core: the lazy running result holds the chunks
    assert lazy_total == total and lazy_kept > 0
