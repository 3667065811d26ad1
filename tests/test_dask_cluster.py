"""ug chunks on a real multi-process cluster on this machine (issue 28), small sizes (the full ones:
examples/scale_out.py):
- a dask.distributed LocalCluster of 2 worker processes (one thread each): the example's pipelines
  (moments of a virtual array, chunked matmul, map_overlap stencil, sort/unique groupby) on ug
  chunks give numpy chunks' results; the chunks on the workers are ug tensors, they travel
  between the processes pickled (lazy ones realized), and ug.jit traces once per shape per worker;
- the kernel disk cache the workers share stays sound: after the cluster's concurrent compiles
  every entry reads back whole, and several processes writing, reading and trimming the same
  entries at once never read a torn or corrupt one;
- cubed's processes executor with ug as its backend gives numpy's results (each backend in a
  process of its own: cubed reads its backend when imported)."""
from __future__ import annotations

import importlib.util
import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ug_core as ug
from ug_core.diskcache import DiskCache

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "scale_out.py"
SIZES = {"side": 512, "chunk": 128, "small": 256, "small_chunk": 128}


def _example():
    spec = importlib.util.spec_from_file_location("scale_out", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("shared-kernel-cache")


@pytest.fixture(scope="module")
def client(cache_dir):
    distributed = pytest.importorskip("distributed")
    pytest.importorskip("ug_core.dask")   # (before the cluster: its nannies give the workers ug's settings)
    saved = {k: os.environ.get(k) for k in ("UG_LLVM_CACHE_DIR", "UG_C_CACHE_DIR")}
    # the workers (spawned processes) inherit the environment: one fresh cache directory for all
    os.environ["UG_LLVM_CACHE_DIR"] = os.environ["UG_C_CACHE_DIR"] = str(cache_dir)
    try:
        with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, memory_limit="1GiB",
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as c:
            yield c
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _host(value):
    if isinstance(value, tuple):
        return tuple(_host(v) for v in value)
    return value.numpy() if isinstance(value, ug.Tensor) else np.asarray(value)


@pytest.mark.parametrize("pipeline", ["moments", "matmul", "stencil", "groupby"])
def test_pipelines_on_ug_chunks_match_numpy_chunks(client, pipeline):
    example = _example()
    want = example.dask_pipelines("numpy", SIZES)[pipeline]()
    got = example.dask_pipelines("ug", SIZES)[pipeline]()
    if pipeline in ("matmul", "stencil"):
        assert isinstance(got, ug.Tensor)     # ug chunks all the way, gathered to the client
    for w, g in zip(*((want, got) if isinstance(want, tuple) else ((want,), (got,)))):
        w, g = _host(w), _host(g)
        assert w.shape == g.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def _where(block):
    """A (1, 1) block saying which process computed it and whether its input was a ug tensor."""
    return ug.asarray([[os.getpid() * (1 if isinstance(block, ug.Tensor) else -1)]], dtype="int64",
                      device=block.device if isinstance(block, ug.Tensor) else None)


def test_chunks_are_ug_tensors_on_both_workers_and_travel_pickled(client):
    import dask.array as da
    import ug_core.dask as ugd

    x = ugd.from_array(np.arange(64 * 64, dtype=np.float32).reshape(64, 64), chunks=16) * 2
    pids = ugd.map_blocks(_where, x, dtype=np.int64, chunks=((1,) * 4, (1,) * 4)).compute()
    pids = pids.numpy()
    workers = {p for p in client.run(os.getpid).values()}
    assert (pids > 0).all() and set(pids.ravel()) == workers   # ug chunks, on both processes
    # a rechunk and a transpose-matmul need chunks from the other worker: values equal numpy's
    y = (x.rechunk((64, 8)) @ x.T).sum(axis=0)
    n = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) * 2
    np.testing.assert_allclose(y.compute().numpy(), (n @ n.T).sum(axis=0), rtol=1e-5)
    # a lazy tensor scattered to a worker is realized when pickled, and lands on the same device
    lazy = ug.asarray(n, device="cpu" if "cpu" in ug.devices() else "ref")[::2] + 1
    future = client.scatter(lazy)
    kind, device, total = client.submit(lambda t: (type(t).__name__, t.device, float(t.sum())), future).result()
    assert kind.startswith("Tensor") and device == lazy.device and total == pytest.approx(float(_host(lazy).sum()))
    assert isinstance(da.from_array(lazy, chunks=8)._meta, ug.Tensor)


def _traces():
    import ug_core.dask as ugd
    return {token: fn.trace_count for token, fn in ugd._jitted.items()}


def test_the_jit_setting_traces_once_per_shape_on_each_worker(client):
    import ug_core.dask as ugd

    x = ugd.from_array(np.ones((128, 32), dtype=np.float32), chunks=(16, 32))

    def f(b):
        return ug.exp(b) * b - 1

    y = ugd.map_blocks(f, x, dtype=np.float32, jit=True)
    np.testing.assert_allclose(y.compute().numpy(), np.full((128, 32), np.e - 1, np.float32), rtol=1e-6)
    token = next(t for t in (getattr(v, "token", None) for v in _functions(y)) if t)
    per_worker = [traces.get(token) for traces in client.run(_traces).values()]
    ran = [n for n in per_worker if n is not None]
    assert ran and all(n == 1 for n in ran), per_worker   # 8 chunks of one shape: one trace per worker


def _functions(arr):
    from dask._task_spec import Task, convert_legacy_graph
    return [t.func for t in convert_legacy_graph(dict(arr.__dask_graph__())).values() if isinstance(t, Task)]


def test_the_shared_disk_cache_is_sound_after_the_cluster(client, cache_dir):
    # the workers compiled the tests' kernels above into one directory, concurrently
    entries = [p for p in cache_dir.iterdir() if not p.name.startswith(".tmp-")]
    assert entries, "the workers wrote no kernels to the shared cache"
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(".tmp-")]
    for path in entries:
        backend = "llvm" if path.read_bytes().startswith(b"ug-llvm\n") else "c"
        reader = DiskCache(backend, "UNUSED_DIR", "UNUSED_ON", path.name.rsplit(".", 1)[1],
                           f"ug-{backend}\n".encode(), validate=lambda payload: None)
        reader.dir_env = "UG_TEST_SHARED_CACHE"
        os.environ["UG_TEST_SHARED_CACHE"] = str(cache_dir)
        try:
            assert reader.read(path.name.rsplit(".", 1)[0]).status == "hit", path
        finally:
            os.environ.pop("UG_TEST_SHARED_CACHE")


# --- the disk cache under concurrent writers (no cluster) -----------------------------------------------


def _payload(key: int) -> bytes:
    return (f"entry {key} ".encode() * (50 + key * 7))[: 400 + key * 37]


def _hammer(directory: str, seed: int, rounds: int) -> dict[str, int]:
    """Write, read and trim entries that the other processes write too; count what was read."""
    import random

    os.environ["UG_TEST_CONCURRENT_CACHE"] = directory
    cache = DiskCache("concurrent", "UG_TEST_CONCURRENT_CACHE", "UG_TEST_CONCURRENT_ON", "bin", b"ug-test\n",
                      validate=lambda payload: None if payload.startswith(b"entry ") else "not an entry",
                      max_bytes=12_000)   # small: trims (evictions) run while others write
    rng = random.Random(seed)
    seen = {"hit": 0, "miss": 0, "wrong": 0}
    for _ in range(rounds):
        key = rng.randrange(24)
        name = cache.key(str(key))
        if rng.random() < 0.5:
            cache.write(name, _payload(key))
        found = cache.read(name)
        if found.status == "hit":
            seen["hit" if found.payload == _payload(key) else "wrong"] += 1
        else:
            seen[found.status] = seen.get(found.status, 0) + 1
    return seen


def test_the_disk_cache_is_safe_under_concurrent_writers(tmp_path):
    directory = tmp_path / "cache"
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.starmap(_hammer, [(str(directory), seed, 400) for seed in range(4)])
    totals = {k: sum(r.get(k, 0) for r in results) for k in {k for r in results for k in r}}
    # every read is the entry written under its key, or a miss (evicted meanwhile): never torn,
    # corrupt or another key's
    assert totals.get("wrong", 0) == 0 and totals.get("corrupt", 0) == 0 and totals.get("unsafe", 0) == 0, totals
    assert totals["hit"] > 100, totals
    names = [p.name for p in directory.iterdir()]
    assert not [n for n in names if n.startswith(".tmp-")], names   # no writer left a temporary file
    assert sum((directory / n).stat().st_size for n in names) <= 12_000 * 1.2   # bounded (one last write over)


# --- cubed ------------------------------------------------------------------------------------------------


def test_cubed_processes_executor_on_ug_matches_numpy(tmp_path):
    pytest.importorskip("cubed")
    env = dict(os.environ, UG_LLVM_CACHE_DIR=str(tmp_path / "kernels"))
    done = subprocess.run([sys.executable, str(EXAMPLE), "cubed", "--gib", "0.001", "--repeat", "0",
                           "--allowed-mem", "200MB", "--pipelines", "moments", "matmul", "stencil", "groupby"],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    verdicts = {r["pipeline"]: r["equal"] for r in rows if "equal" in r}
    assert verdicts == {"moments": True, "matmul": True, "stencil": True, "groupby": True}, rows
    backends = {(r["pipeline"], r["backend"]) for r in rows if "backend" in r}
    assert len(backends) == 8
    # each task stayed within cubed's allowed_mem (its own measure of the task's peak)
    peaks = [r["task_peak_mem_mb"] for r in rows if "task_peak_mem_mb" in r]
    assert len(peaks) == 8 and all(0 < p <= 200 for p in peaks), rows


def _ug_settings():
    from ug_core.plugins import registry
    return os.environ.get("UG_LLVM_THREADS"), os.environ.get("UG_TIER"), \
        registry.get("cpu").threads if "cpu" in ug.devices() else None


def test_workers_run_ug_on_one_thread_each_and_compiled(client):
    # ug_core.dask put them in the nannies' environment (dask's OMP_NUM_THREADS=1 for BLAS):
    # two worker processes on the cores do not each start a pool of ug threads over all of them
    for threads_env, tier, threads in client.run(_ug_settings).values():
        assert threads_env == "1" and tier == "1"
        assert threads in (None, 1)
