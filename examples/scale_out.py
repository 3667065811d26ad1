"""ug as the chunk engine of dask.array and cubed, on a real multi-process cluster on this machine
(issue 28): the same pipelines on ug chunks and on numpy chunks, results compared, timings side by
side.

    python examples/scale_out.py dask  --gib 16 --workers 2 --memory-limit 3GiB
    python examples/scale_out.py cubed --gib 16 --workers 2 --allowed-mem 1GB
    python examples/scale_out.py dask --gib 0.05 --repeat 1      # a quick check (what the tests run)

The pipelines, each written once against the Array API (`array_namespace` of the chunk: numpy or
ug_core), so that the two runs differ only in the chunks' library:
- moments: the mean and standard deviation of a float32 array of --gib GiB made chunk by chunk
  where it is computed (a "virtual" array: never stored anywhere, larger than any worker's memory);
- matmul: a chunked (n, k) @ (k, n) product of two generated arrays (chunks travel between workers);
- stencil: a 5-point Laplacian with map_overlap (each chunk with a halo of its neighbours);
- groupby: per-group counts and sums of labelled values, per chunk by sort, unique_counts and
  segment sums, then summed across chunks.

dask: a `dask.distributed.LocalCluster` of --workers worker processes (one thread each, a memory
limit each); ug chunks travel pickled by value (ug_core.plugins.unpickle_device: onto the same
device name in the receiving worker). cubed: its "processes" executor, bounded by --allowed-mem per
task; cubed reads its backend library from CUBED_BACKEND_ARRAY_API_MODULE when it is imported,
so each backend runs in a process of its own (this script, re-run with --backend).

Prints one JSON line per pipeline and backend (result summary, seconds, peak memory per worker)
and, per pipeline, the ratio ug/numpy of the median times.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

GROUPS = 16


# --- the chunk functions (numpy or ug_core, whichever the chunk is) -------------------------------


def _xp(x: Any) -> Any:
    namespace = getattr(x, "__array_namespace__", None)
    return namespace() if namespace is not None else np


def lib(name: str) -> Any:
    """The array library of a backend name ("numpy" or "ug")."""
    if name == "numpy":
        return np
    import ug_core
    return ug_core


def field(xp: Any, start: tuple[int, int], shape: tuple[int, int], seed: float = 0.0) -> Any:
    """The generated array's block at `start` of `shape` (float32): smooth waves, a few
    transcendental functions an element, the same values in numpy and ug."""
    rows = xp.astype(xp.arange(start[0], start[0] + shape[0]), xp.float32)[:, None]
    cols = xp.astype(xp.arange(start[1], start[1] + shape[1]), xp.float32)[None, :]
    return xp.sin(rows * 1e-3 + seed) * xp.cos(cols * 7e-4) + 0.5 * xp.sin(rows * 3e-4 + cols * 5e-4)


def labels_of(xp: Any, start: tuple[int, int], shape: tuple[int, int]) -> Any:
    """Group labels in [0, GROUPS) of the block at `start`."""
    rows = xp.arange(start[0], start[0] + shape[0])[:, None]
    cols = xp.arange(start[1], start[1] + shape[1])[None, :]
    return xp.astype((rows * 7 + cols * 13 + (rows // 3) * cols) % GROUPS, xp.int32)


def laplacian(block: Any) -> Any:
    """The 5-point Laplacian of a block with a halo of 1 (the halo rows and columns come out as
    they go in; map_overlap trims them)."""
    xp = _xp(block)
    inner = (block[:-2, 1:-1] + block[2:, 1:-1] + block[1:-1, :-2] + block[1:-1, 2:]) - 4 * block[1:-1, 1:-1]
    return xp.concat([block[:1], xp.concat([block[1:-1, :1], inner, block[1:-1, -1:]], axis=1), block[-1:]])


def group_sums(labels: Any, values: Any) -> Any:
    """A (1, 2 * GROUPS) block: each group's count, then each group's sum, in this chunk, by sort + unique_counts +
    segment sums (what a groupby does within a chunk)."""
    xp = _xp(values)
    labels, values = xp.reshape(labels, (-1,)), xp.reshape(values, (-1,))
    order = xp.argsort(labels, stable=True)
    uniq, counts = xp.unique_counts(xp.take(labels, order))
    ends = xp.cumulative_sum(counts) - 1
    running = xp.take(xp.cumulative_sum(xp.astype(xp.take(values, order), xp.float64)), ends)
    segment = xp.concat([running[:1], running[1:] - running[:-1]])
    out = xp.zeros((2, GROUPS), dtype=xp.float64)
    out[0, uniq] = xp.astype(counts, xp.float64)
    out[1, uniq] = segment
    return xp.reshape(out, (1, 2 * GROUPS))


def shapes(gib: float) -> dict[str, Any]:
    """The pipelines' sizes for --gib (the moments array's size; the others scale with it)."""
    side = int(math.sqrt(gib * (1 << 30) / 4))
    chunk = min(4096, side)
    side = max(chunk, side // chunk * chunk)
    small = max(256, min(4096, int(side ** 0.5) * 16) // 256 * 256)  # matmul, stencil, groupby
    return {"side": side, "chunk": chunk, "small": small, "small_chunk": small // 2}


# --- dask -----------------------------------------------------------------------------------------


def _dask_block(name: str, kind: str, seed: float, block_info: Any = None) -> Any:
    location = block_info[None]["array-location"]
    start = tuple(int(lo) for lo, _ in location)
    shape = tuple(int(hi - lo) for lo, hi in location)
    xp = lib(name)
    if name == "ug":
        import ug_core.dask  # noqa: F401  (in the worker too: dask's sizeof of ug chunks, the dispatch functions)
    return labels_of(xp, start, shape) if kind == "labels" else field(xp, start, shape, seed)


def dask_pipelines(name: str, sizes: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    """The pipelines as dask arrays of `name` chunks: {pipeline: a function computing it}."""
    import dask.array as da

    xp = lib(name)
    if name == "ug":
        import ug_core.dask  # noqa: F401  (registers ug's Tensor with dask.array)

    def generated(n: int, m: int, chunk: int, kind: str = "field", seed: float = 0.0) -> Any:
        dtype = np.int32 if kind == "labels" else np.float32
        meta = xp.empty((0, 0), dtype=dtype)
        return da.map_blocks(_dask_block, name, kind, seed, dtype=dtype, chunks=da.core.normalize_chunks(
            (chunk, chunk), (n, m)), meta=meta)

    side, chunk, small, small_chunk = sizes["side"], sizes["chunk"], sizes["small"], sizes["small_chunk"]

    def moments() -> Any:
        x = generated(side, side, chunk)
        return da.compute(x.mean(dtype=np.float64), x.std(dtype=np.float64))

    def matmul() -> Any:
        a = generated(small, 2 * small, small_chunk)
        b = generated(2 * small, small, small_chunk, seed=1.0)
        return (a @ b).compute()

    def stencil() -> Any:
        x = generated(small, small, small_chunk)
        return x.map_overlap(laplacian, depth=1, boundary="none", dtype=np.float32).compute()

    def groupby() -> Any:
        values = generated(small, small, small_chunk)
        labels = generated(small, small, small_chunk, kind="labels")
        # a (1, 2 * GROUPS) block per chunk, summed over the rows of chunks, then over the columns
        per_chunk = da.map_blocks(group_sums, labels, values, dtype=np.float64,
                                  chunks=((1,) * labels.numblocks[0], (2 * GROUPS,) * labels.numblocks[1]),
                                  meta=xp.empty((0, 0), dtype=np.float64))
        return _host(per_chunk.sum(axis=0).compute()).reshape(-1, 2, GROUPS).sum(axis=0)

    return {"moments": moments, "matmul": matmul, "stencil": stencil, "groupby": groupby}


def run_dask(args: argparse.Namespace) -> list[dict[str, Any]]:
    import ug_core.dask  # noqa: F401  (before the cluster: its nannies give the workers ug's settings, see register())
    from dask.distributed import Client, LocalCluster

    sizes = shapes(args.gib)
    rows: list[dict[str, Any]] = []
    with LocalCluster(n_workers=args.workers, processes=True, threads_per_worker=1,
                      memory_limit=args.memory_limit, dashboard_address=None) as cluster, Client(cluster) as client:
        results: dict[tuple[str, str], Any] = {}
        times: dict[tuple[str, str], list[float]] = {}
        cpu: dict[tuple[str, str], list[float]] = {}
        for rep in range(args.warmup + args.repeat):  # the first --warmup rounds warm each worker's caches
            for pipeline in args.pipelines:
                for name in (("ug", "numpy") if rep % 2 else ("numpy", "ug")):   # alternating
                    run = dask_pipelines(name, sizes)[pipeline]
                    cpu0 = sum(client.run(_cpu_seconds).values())
                    t0 = time.perf_counter()
                    out = run()
                    dt = time.perf_counter() - t0
                    results[name, pipeline] = out
                    if rep >= args.warmup:
                        times.setdefault((name, pipeline), []).append(dt)
                        cpu.setdefault((name, pipeline), []).append(sum(client.run(_cpu_seconds).values()) - cpu0)
        peaks = client.run(_peak_rss_mb)
        for pipeline in args.pipelines:
            for name in ("numpy", "ug"):
                taken = times.get((name, pipeline), [])
                rows.append({"engine": "dask", "pipeline": pipeline, "backend": name, "sizes": sizes,
                             "summary": summary(results[name, pipeline]), "median_s": _median(taken), "times_s": taken,
                             "worker_cpu_s": _median(cpu.get((name, pipeline), [])),
                             "worker_peak_rss_mb": sorted(peaks.values())})
            rows.append(compare(pipeline, results["numpy", pipeline], results["ug", pipeline], rows[-2], rows[-1]))
    return rows


def _cpu_seconds() -> float:
    """This process's CPU time (user + system): the workers' work, whatever the machine's load."""
    times = os.times()
    return times.user + times.system


def _median(times: list[float]) -> float | None:
    return statistics.median(times) if times else None   # (--repeat 0: a check, nothing timed)


def _ratio(ug_row: dict[str, Any], numpy_row: dict[str, Any]) -> float | None:
    if ug_row["median_s"] is None or numpy_row["median_s"] is None:
        return None
    return float(ug_row["median_s"] / numpy_row["median_s"])


def _peak_rss_mb() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def summary(value: Any) -> Any:
    """A JSON-able summary of a result: scalars as they are, arrays by shape, sum and a corner."""
    if isinstance(value, tuple):
        return [summary(v) for v in value]
    host = np.asarray(value.numpy() if hasattr(value, "numpy") and not isinstance(value, np.ndarray) else value)
    if host.ndim == 0:
        return float(host)
    return {"shape": list(host.shape), "sum": float(host.astype(np.float64).sum()),
            "first": host.ravel()[:3].astype(np.float64).tolist()}


def _host(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_host(v) for v in value)
    return np.asarray(value.numpy() if hasattr(value, "numpy") and not isinstance(value, np.ndarray) else value)


def compare(pipeline: str, want: Any, got: Any, numpy_row: dict[str, Any], ug_row: dict[str, Any]) -> dict[str, Any]:
    """Whether ug's result equals numpy's (float32 sums: rtol 1e-4), and the ratio of the medians."""
    pairs = zip(_host(want), _host(got)) if isinstance(want, tuple) else [(_host(want), _host(got))]
    equal = all(np.allclose(w, g, rtol=1e-4, atol=1e-3) for w, g in pairs)
    out = {"pipeline": pipeline, "engine": ug_row["engine"], "equal": bool(equal),
           "ratio_ug_over_numpy": _ratio(ug_row, numpy_row)}
    if ug_row.get("worker_cpu_s") and numpy_row.get("worker_cpu_s"):
        out["cpu_ratio_ug_over_numpy"] = ug_row["worker_cpu_s"] / numpy_row["worker_cpu_s"]
    return out


# --- cubed ----------------------------------------------------------------------------------------


def cubed_pipelines(sizes: dict[str, Any], spec: Any, callbacks: list[Any]) -> dict[str, Callable[[], Any]]:
    """The pipelines as cubed arrays (their chunks: the backend library cubed was imported with);
    `callbacks` see every task."""
    import cubed
    import cubed.array_api as cxp
    from cubed.backend_array_api import namespace as xp

    def generated(n: int, m: int, chunk: int, kind: str = "field", seed: float = 0.0) -> Any:
        def block(_empty: Any, block_id: Any = None) -> Any:   # (cubed passes an empty block first)
            start = (block_id[0] * chunk, block_id[1] * chunk)
            shape = (min(chunk, n - start[0]), min(chunk, m - start[1]))
            return labels_of(xp, start, shape) if kind == "labels" else field(xp, start, shape, seed)
        dtype = np.int32 if kind == "labels" else np.float32
        return cubed.map_blocks(block, dtype=dtype, chunks=((chunk,) * (n // chunk), (chunk,) * (m // chunk)),
                                spec=spec)

    side, chunk, small, small_chunk = sizes["side"], sizes["chunk"], sizes["small"], sizes["small_chunk"]

    def moments() -> Any:
        x = generated(side, side, chunk)
        return tuple(np.asarray(v) for v in cubed.compute(cxp.mean(x), cxp.std(x), callbacks=callbacks))

    def matmul() -> Any:
        a = generated(small, 2 * small, small_chunk)
        b = generated(2 * small, small, small_chunk, seed=1.0)
        return np.asarray(cxp.matmul(a, b).compute(callbacks=callbacks))

    def stencil() -> Any:
        from cubed.array.overlap import map_overlap
        x = generated(small, small, small_chunk)
        return np.asarray(map_overlap(laplacian, x, dtype=np.float32, chunks=x.chunks, depth=1,
                                      boundary=0).compute(callbacks=callbacks))

    def groupby() -> Any:
        values = generated(small, small, small_chunk)
        labels = generated(small, small, small_chunk, kind="labels")
        per_chunk = cubed.map_blocks(group_sums, labels, values, dtype=np.float64, chunks=(labels.chunks[0], (2 * GROUPS,) *
                                                                       labels.numblocks[1]))
        return np.asarray(cxp.sum(per_chunk, axis=0).compute(callbacks=callbacks)).reshape(-1, 2, GROUPS).sum(axis=0)

    return {"moments": moments, "matmul": matmul, "stencil": stencil, "groupby": groupby}


def run_cubed_backend(args: argparse.Namespace) -> list[dict[str, Any]]:
    """This process's runs: cubed was (or is now) imported with --backend as its array library."""
    import cubed
    from cubed.runtime.types import Callback

    class Peak(Callback):
        peak = 0
        by_op: dict[str, int] = {}   # each operation's largest task peak (cubed's peak_measured_mem_end)

        def on_task_end(self, event: Any) -> None:
            if event.peak_measured_mem_end is not None:
                Peak.peak = max(Peak.peak, event.peak_measured_mem_end)
                Peak.by_op[event.name] = max(Peak.by_op.get(event.name, 0), event.peak_measured_mem_end)

    sizes = shapes(args.gib)
    spec = cubed.Spec(work_dir=args.work_dir, allowed_mem=args.allowed_mem, executor_name="processes",
                      executor_options={"max_workers": args.workers})
    rows = []
    for pipeline in args.pipelines:
        run = cubed_pipelines(sizes, spec, [Peak()])[pipeline]
        Peak.peak, Peak.by_op = 0, {}
        times, out = [], None
        for rep in range(args.warmup + args.repeat):  # the first --warmup runs warm the caches (not timed)
            t0 = time.perf_counter()
            out = run()
            if rep >= args.warmup:
                times.append(time.perf_counter() - t0)
        rows.append({"engine": "cubed", "pipeline": pipeline, "backend": args.backend, "sizes": sizes,
                     "summary": summary(out), "median_s": _median(times), "times_s": times,
                     "task_peak_mem_mb": Peak.peak / 1e6, "allowed_mem": args.allowed_mem,
                     "op_peak_mem_mb": {op: round(v / 1e6, 1) for op, v in sorted(Peak.by_op.items())},
                     "value": [v.tolist() for v in out] if isinstance(out, tuple) else None})
        np.save(os.path.join(args.work_dir, f"{pipeline}-{args.backend}.npy"),
                np.asarray(out if not isinstance(out, tuple) else np.stack(out)))
    return rows


def run_cubed(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each backend in a process of its own (cubed fixes its backend when imported), then the
    comparison."""
    import tempfile
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ug-cubed-") as work_dir:
        for name in ("numpy", "ug"):
            env = dict(os.environ)
            env.pop("CUBED_BACKEND_ARRAY_API_MODULE", None)
            # cubed's task processes share the cores, one task each at a time: one thread of BLAS
            # and of ug each (as dask's nannies set). (Not UG_TIER=1 as in dask's workers: cubed
            # starts new processes for every compute, whose first runs of small kernels are
            # cheaper on tier 0 than loading each from the disk cache: measured slower with it.)
            env.setdefault("OMP_NUM_THREADS", "1")
            if name == "ug":
                env["CUBED_BACKEND_ARRAY_API_MODULE"] = "ug_core.cubed"   # (reductions realized: see ug_core/cubed.py)
                env.setdefault("UG_LLVM_THREADS", env["OMP_NUM_THREADS"])
            cmd = [sys.executable, os.path.abspath(__file__), "cubed", "--backend", name, "--work-dir", work_dir,
                   "--gib", str(args.gib), "--workers", str(args.workers), "--allowed-mem", args.allowed_mem,
                   "--repeat", str(args.repeat), "--warmup", str(args.warmup), "--pipelines", *args.pipelines]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"cubed on {name} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
            rows.extend(json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))
        for pipeline in args.pipelines:
            numpy_row, ug_row = (next(r for r in rows if r["pipeline"] == pipeline and r.get("backend") == b)
                                 for b in ("numpy", "ug"))
            want = np.load(os.path.join(work_dir, f"{pipeline}-numpy.npy"))
            got = np.load(os.path.join(work_dir, f"{pipeline}-ug.npy"))
            rows.append({"pipeline": pipeline, "engine": "cubed", "equal": bool(np.allclose(want, got, rtol=1e-4,
                                                                                              atol=1e-3)),
                         "ratio_ug_over_numpy": _ratio(ug_row, numpy_row)})
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=("dask", "cubed"))
    parser.add_argument("--gib", type=float, default=16.0, help="size of the moments' virtual array")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="3GiB", help="dask: each worker's memory limit")
    parser.add_argument("--allowed-mem", default="1GB", help="cubed: each task's memory bound")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per pipeline and backend")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs first (each worker's caches)")
    parser.add_argument("--pipelines", nargs="+", default=["moments", "matmul", "stencil", "groupby"],
                        choices=["moments", "matmul", "stencil", "groupby"])
    parser.add_argument("--backend", choices=("numpy", "ug"), help=argparse.SUPPRESS)
    parser.add_argument("--work-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.engine == "dask":
        rows = run_dask(args)
    elif args.backend:
        rows = run_cubed_backend(args)
    else:
        rows = run_cubed(args)
    for row in rows:
        print(json.dumps(row), flush=True)
    return rows


if __name__ == "__main__":
    main()
