"""`ug bench --compile`: the cold compile of each workload, for ug, JAX (jax.jit), torch.compile
and tinygrad (TinyJit): what a user's first call costs over a warm one, in a fresh process whose
compilation caches are all empty.

Each (workload, implementation) runs in a new Python process (`python -m ug_bench.coldstart`)
with its own new temporary directory as every cache's home: ug's disk cache ($XDG_CACHE_HOME, with
any $UG_*_CACHE_DIR removed), torch.compile's ($TORCHINDUCTOR_CACHE_DIR), tinygrad's ($CACHEDB),
and JAX's persistent compilation cache turned off. The child imports everything and makes its
inputs first (not timed), then times its first call, its second, and the median of three warm
calls, and checks the result against numpy in float64. The cold compile is first call - warm
call. ug's first calls may run on tier 0 (numpy) while LLVM compiles in the background
(ug_core.tiers): its warm calls are timed after those compiles are done (tiers.wait), so that
they are the compiled code's. With --repeat N each pair runs in N fresh processes, round-robin, and the median is given.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Collection

import numpy as np

COLD_PEERS = ("jax", "torch.compile", "tinygrad")
CHILD_TIMEOUT_S = 900


def fresh_cache_env(home: str) -> dict[str, str]:
    """The environment of a child whose compilation caches all live (empty) under `home`."""
    from .bench import BLAS_SPIN_ENV, BLAS_SPIN_QUIET

    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("UG_") and k.endswith("_CACHE_DIR")) and k != "JAX_COMPILATION_CACHE_DIR"}
    env.update({
        "XDG_CACHE_HOME": home,                                   # ug's disk caches (ug_core.diskcache)
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(home, "inductor"),  # torch.compile's FX graph and code caches
        "TRITON_CACHE_DIR": os.path.join(home, "triton"),
        "CACHEDB": os.path.join(home, "tinygrad", "cache.db"),    # tinygrad's compiled kernels
        "JAX_ENABLE_COMPILATION_CACHE": "false",                 # JAX's persistent cache (off unless a dir is set)
    })
    env.setdefault(BLAS_SPIN_ENV, BLAS_SPIN_QUIET)
    return env


def _child_runner(impl: str, name: str, scale: int) -> tuple[Callable[[], Any], Callable[[Any], np.ndarray], Any]:
    """(run, to_numpy, workload) of one implementation of one workload, built but not yet called."""
    from . import peers
    from .bench import WORKLOADS, _torch_runners, _ug_runner

    w = next(w for w in WORKLOADS if w.name == name)
    inputs = w.make_inputs(np.random.default_rng(0), scale)
    if impl.startswith("ug:"):
        run, _ = _ug_runner(w, inputs, impl.split(":", 1)[1])
        return run, lambda out: np.asarray(out.numpy()), (w, inputs)
    if impl == "jax":
        return peers.jax_runner(w.fn, inputs, jit=w.jit), np.asarray, (w, inputs)
    if impl == "tinygrad":
        return peers.tinygrad_runner(w.fn, inputs, jit=w.jit), peers.tinygrad_numpy, (w, inputs)
    if impl == "torch.compile":
        # its compiler's modules load on the first compiled call: loaded here, not timed (as the
        # other implementations' imports are not)
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
        run = dict(_torch_runners(w, inputs, compile_too=True))["torch.compile"]
        return run, lambda out: out.detach().numpy(), (w, inputs)
    raise ValueError(f"unknown implementation {impl!r}: ug:DEVICE or one of {COLD_PEERS}")


def child(impl: str, name: str, scale: int) -> dict[str, Any]:
    """Run in the fresh process: time the first call, the second and three warm ones; check the result."""
    from .bench import _check

    run, to_numpy, (w, inputs) = _child_runner(impl, name, scale)
    times = []
    out = None
    for i in range(5):
        if i == 2 and impl.startswith("ug:"):
            from ug_core import tiers
            tiers.wait()   # (the warm calls: compiled, not tier 0; see the module docstring)
        start = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - start)
    want = np.asarray(w.fn(np, *[a.astype(np.float64) if a.dtype.kind == "f" else a for a in inputs]))
    ok = _check(to_numpy(out), want, w, inputs)
    return {"first": times[0], "second": times[1], "warm": statistics.median(times[2:]), "ok": ok}


def _measure(impl: str, name: str, scale: int) -> dict[str, Any]:
    """One fresh process with empty caches; {'first', 'second', 'warm', 'ok'} or {'error'}."""
    home = tempfile.mkdtemp(prefix="ug-bench-cold-")
    try:
        done = subprocess.run([sys.executable, "-m", "ug_bench.coldstart", "--impl", impl, "--workload", name,
                               "--scale", str(scale)], env=fresh_cache_env(home), capture_output=True, text=True,
                              timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {CHILD_TIMEOUT_S} s"}
    finally:
        shutil.rmtree(home, ignore_errors=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": tail[:100]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def run_cold(devices: list[str], names: list[str], scale: int, repeat: int, peer_names: Collection[str],
             out: Callable[[str], None] = print) -> int:
    """Print the cold-compile table of the workloads `names`: ug on each device and the peers of
    COLD_PEERS in `peer_names`. Returns 1 when a ug result disagrees with numpy, else 0."""
    from . import peers
    from .bench import WORKLOADS

    impls = [p for p in COLD_PEERS if p in peer_names] + [f"ug:{d}" for d in devices]
    notes: dict[str, str] = {}
    for p in ("jax", "tinygrad"):
        if p in impls:
            try:
                peers.jax_numpy() if p == "jax" else peers.tinygrad()
            except peers.Unavailable as e:
                notes[p] = f"skipped: {e}"
    if "torch.compile" in impls:
        try:
            import torch  # noqa: F401
        except ImportError as e:
            notes["torch.compile"] = f"skipped: torch not installed ({e})"
    out(f"cold compile: each run in a fresh process with empty caches, {repeat} run(s) each, median; "
        "cold = first call - warm call")
    out("| W    | workload                     | impl           |   first call |  second call |     warm call "
        "|  cold compile | ug / best peer         | check")
    bad = []
    for w in [w for w in WORKLOADS if w.name in names or w.name.rstrip("ab") in names]:
        samples: dict[str, list[dict[str, Any]]] = {i: [] for i in impls if i not in notes}
        for _ in range(max(1, repeat)):
            for impl in samples:
                samples[impl].append(_measure(impl, w.name, scale))
        title = w.title(w.make_inputs(np.random.default_rng(0), scale))
        rows: dict[str, dict[str, Any]] = {}
        for impl, runs in samples.items():
            good = [r for r in runs if "error" not in r]
            if not good:
                rows[impl] = {"note": f"failed: {runs[0]['error']}"}
                continue
            row = {k: statistics.median(r[k] for r in good) for k in ("first", "second", "warm")}
            row["cold"] = statistics.median(r["first"] - r["warm"] for r in good)
            row["ok"] = all(r["ok"] for r in good)
            rows[impl] = row
        ran = {i: r for i, r in rows.items() if not i.startswith("ug:") and r.get("ok")}
        best = min(ran.items(), key=lambda kv: kv[1]["cold"]) if ran else None
        for impl in impls:
            row = rows.get(impl, {"note": notes.get(impl, "")})
            if "cold" not in row:
                out(f"| {w.name:4} | {title:28} | {impl:14} | {'-':>12} | {'-':>12} | {'-':>13} | {'-':>13} | {'':22} | {row['note']}")
                continue
            ratio = f"{row['cold'] / best[1]['cold']:.2f}x vs {best[0]}" if impl.startswith("ug:") and best else ""
            if not row["ok"]:
                bad.append((w.name, impl))
            out(f"| {w.name:4} | {title:28} | {impl:14} | {row['first']:10.3f} s | {row['second']:10.3f} s | "
                f"{row['warm'] * 1e3:10.3f} ms | {row['cold']:11.3f} s | {ratio:22} | {'ok' if row['ok'] else 'MISMATCH'}")
    ug_bad = [b for b in bad if b[1].startswith("ug:")]
    if bad:
        out(f"MISMATCH against numpy: {bad}")
    return 1 if ug_bad else 0


def main(argv: list[str] | None = None) -> int:
    """The child: `python -m ug_bench.coldstart --impl IMPL --workload W --scale S` prints one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m ug_bench.coldstart", description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", required=True, help="ug:DEVICE, jax, torch.compile or tinygrad")
    parser.add_argument("--workload", required=True)
    parser.add_argument("--scale", type=int, default=1)
    args = parser.parse_args(argv)
    print(json.dumps(child(args.impl, args.workload, args.scale)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
