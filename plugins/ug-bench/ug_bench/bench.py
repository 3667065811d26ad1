"""`ug bench`: ug on each usable device against numpy, torch eager and torch.compile, in one run;
training steps (rows T1..., ug_bench.training) and complex / FFT rows (F1..., ug_bench.spectral)
against torch, torch.compile and JAX.

Every output is checked against numpy; the implementations of a workload are timed
round-robin (see `_interleaved_medians`); the table gives the median time, the achieved GB/s (memory
bound workloads) or GFLOP/s (matmul), and for each ug row the ratio ug / best peer (< 1 is faster).
ug is timed through `ug.jit`, as a user would run hot code: scheduling happens once, then each call
replays the compiled kernels.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Collection

import numpy as np

import ug_core as ug
from ug_core import tiers

from . import peers
from .peers import PeerLacks
from .spectral import SPECTRAL
from .training import TRAININGS, run_training
from .workloads import WORKLOADS, Workload

# numpy's OpenBLAS keeps its threads spinning for 2^OPENBLAS_THREAD_TIMEOUT cycles (default 2^28,
# about 0.1 s) after each call. On a 2-core machine that halves the speed of whatever threaded
# code runs next: a 1024^3 matmul, by ug or by torch, took 21-23 ms right after numpy's and
# 11-13 ms after anything else, while numpy after ug or torch was unaffected. Round-robin timing
# puts an implementation right after numpy in every round, so `ug bench` runs with OpenBLAS's
# threads going to sleep as soon as they are idle (the variable is read when OpenBLAS loads:
# the command restarts itself with it set; --blas-spin keeps the default).
BLAS_SPIN_ENV = "OPENBLAS_THREAD_TIMEOUT"
BLAS_SPIN_QUIET = "4"


# --- timing --------------------------------------------------------------------------------------


def _calls_per_sample(run: Callable[[], Any], min_time: float = 0.05) -> int:
    """Tiny calls are batched so that each timed sample lasts a measurable time."""
    run()
    start = time.perf_counter()
    run()
    once = time.perf_counter() - start
    return max(1, int(min_time / max(once, 1e-7))) if once < min_time / 10 else 1


# a pause before each timed sample: torch's OpenMP threads (libgomp) spin for a few ms after a
# call, and on 2 cores that slowed whatever threaded code ran next (ug's 32M sum: 7.3-7.6 ms
# after ug or numpy, 8.1-9.4 ms right after torch, 7.2 ms after torch and a 5 ms pause)
SETTLE_S = 0.01


def _interleaved_medians(runs: list[Callable[[], Any]], repeat: int) -> list[float]:
    """Median seconds per call of each run. The samples are taken round-robin (one sample of
    each run per round), so a slow spell of a shared machine hits every implementation alike
    instead of whichever happened to be timed during it; each sample starts after a short
    pause (SETTLE_S), so that no run pays for the threads the previous one left spinning."""
    inner = [_calls_per_sample(run) for run in runs]
    samples: list[list[float]] = [[] for _ in runs]
    for _ in range(repeat):
        for run, n, out in zip(runs, inner, samples):
            if len(runs) > 1:
                time.sleep(SETTLE_S)
            start = time.perf_counter()
            for _ in range(n):
                run()
            out.append((time.perf_counter() - start) / n)
    return [statistics.median(s) for s in samples]


@dataclass
class Row:
    workload: Workload
    impl: str
    seconds: float | None
    ok: bool
    note: str = ""

    def rate(self, inputs: list[np.ndarray]) -> str:
        if self.seconds is None:
            return ""
        if self.workload.flops is not None:
            return f"{self.workload.flops(inputs) / self.seconds / 1e9:.1f} GFLOP/s"
        if self.workload.bytes_moved is not None and not self.workload.tiny:
            return f"{self.workload.bytes_moved(inputs) / self.seconds / 1e9:.1f} GB/s"
        return ""


def _check(got: Any, want: np.ndarray, w: Workload, inputs: list[np.ndarray]) -> bool:
    if getattr(got, "is_cuda", False):   # a torch tensor on the GPU
        got = got.cpu()
    if not isinstance(got, np.ndarray) and hasattr(got, "numpy"):   # a torch or tinygrad tensor
        got = got.numpy()
    got = np.asarray(got)
    if w.canon is not None:
        got, want = w.canon(inputs, got), w.canon(inputs, want)
    got = np.asarray(got, dtype=np.float64).reshape(np.shape(want))
    return bool(np.allclose(got, want, rtol=w.rtol * 10, atol=w.atol * 10))


def _ug_runner(w: Workload, inputs: list[np.ndarray], device: str) -> tuple[Callable[[], Any], Callable[[], Any]]:
    tensors = [ug.tensor(a, device=device) for a in inputs]
    if w.jit:
        jitted = ug.jit(lambda *ts: w.fn("ug", *ts))
    else:   # a data-dependent shape: each call schedules (its kernels are cached)
        def jitted(*ts: Any) -> Any:
            out = w.fn("ug", *ts)
            ug.realize(out)
            return out
    dev = ug.registry.get(device)

    def run() -> Any:
        out = jitted(*tensors)
        dev.synchronize()
        return out
    return run, lambda: jitted(*tensors).numpy()


def _hot(run: Callable[[], Any]) -> None:
    """Run ug's call until it runs compiled, as hot code does: a kernel's first runs are on tier
    0 (numpy, ug_core.tiers) and compile in the background from its second run; a few timed
    samples of a tiny workload take milliseconds, less than those compiles, and would time
    tier 0 instead of the compiled replay (the cold start is `--compile`'s measure)."""
    for _ in range(3):
        run()
    tiers.wait()
    run()


def _torch_runners(w: Workload, inputs: list[np.ndarray], compile_too: bool, gpu: bool = False
                   ) -> list[tuple[str, Callable[[], Any]]]:
    """torch eager (and torch.compile) on the CPU; with `gpu` (a ug device `cuda` is benched and
    torch sees a GPU) also on the GPU, as `torch:cuda`, each call waiting for the GPU."""
    try:
        import torch
    except ImportError:
        return []
    places = [("", torch.device("cpu"))]
    if gpu and torch.cuda.is_available():
        places.append((":cuda", torch.device("cuda")))
    runners = []
    for suffix, place in places:
        ts = [torch.from_numpy(a).to(place) for a in inputs]
        wait = torch.cuda.synchronize if place.type == "cuda" else (lambda: None)
        runners.append((f"torch{suffix}", _waiting(functools.partial(w.fn, torch, *ts), wait)))
        if compile_too:
            torch._dynamo.reset()  # a fresh compile per workload (one shared lambda would hit the recompile limit)

            def traced(*xs: Any) -> Any:
                return w.fn(torch, *xs)
            compiled_fn = torch.compile(traced)
            runners.append((f"torch.compile{suffix}", _waiting(functools.partial(compiled_fn, *ts), wait)))
    return runners


def _waiting(run: Callable[[], Any], wait: Callable[[], Any]) -> Callable[[], Any]:
    def timed() -> Any:
        out = run()
        wait()
        return out
    return timed


PEERS = ("numpy", "torch", "torch.compile", "jax", "tinygrad")
# the kernels of issue 27's cold-start list: GELU, row softmax, layernorm, matmul 1024^3, attention,
# the chain of 10 tiny ops
COLD_WORKLOADS = ("W2", "W3", "W4", "W6a", "W7", "W8b")


def _optional_peers(w: Workload, inputs: list[np.ndarray], wanted: Collection[str]
                    ) -> tuple[list[tuple[str, Callable[[], Any]]], list[Row]]:
    """JAX and tinygrad runners of the workload (those in `wanted`), and a row with a note for
    each that cannot run it: not installed, not usable here, or lacking the operation."""
    runners: list[tuple[str, Callable[[], Any]]] = []
    skipped: list[Row] = []
    for name, make in (("jax", peers.jax_runner), ("tinygrad", peers.tinygrad_runner)):
        if name not in wanted:
            continue
        try:
            runners.append((name, make(w.fn, inputs, jit=w.jit)))
        except peers.Unavailable as e:
            skipped.append(Row(w, name, None, True, f"skipped: {e}"))
    return runners, skipped


def run_bench(devices: list[str], names: list[str] | None, scale: int, repeat: int, torch_compile: bool,
              out: Callable[[str], None] = print, peer_names: Collection[str] = PEERS
              ) -> list[tuple[Workload, list[Row], list[np.ndarray]]]:
    """Each workload (or those in `names`): ug on each device and every peer in `peer_names`
    (torch.compile only with `torch_compile`), each result checked against numpy's in float64; the
    implementations that agree are timed round-robin, one that does not is reported (MISMATCH)
    and not timed. Prints a row per implementation (`out`) and returns the rows."""
    rng = np.random.default_rng(0)
    wanted = set(peer_names) - (set() if torch_compile else {"torch.compile"})
    results = []
    for w in WORKLOADS:
        if names and w.name not in names and w.name.rstrip("ab") not in names:
            continue
        inputs = w.make_inputs(rng, scale)
        want = np.asarray(w.fn(np, *[a.astype(np.float64) if a.dtype.kind == "f" else a for a in inputs]))
        rows: list[Row] = []
        candidates: list[tuple[str, Callable[[], Any]]] = []
        if "numpy" in wanted:
            candidates.append(("numpy", functools.partial(w.fn, np, *inputs)))
        if wanted & {"torch", "torch.compile"}:
            try:
                candidates += [(name, run) for name, run in _torch_runners(w, inputs, "torch.compile" in wanted,
                                                                           gpu="cuda" in devices)
                               if name.split(":")[0] in wanted]
            except Exception as e:  # torch.compile may be unusable on a machine
                rows.append(Row(w, "torch", None, False, f"unavailable: {type(e).__name__}"))
        extra, skipped = _optional_peers(w, inputs, wanted)
        candidates += extra
        rows += skipped
        timed: list[tuple[Row, Callable[[], Any]]] = []   # rows that ran, agree with numpy and get a time
        for name, run in candidates:
            try:
                if _check(run(), want, w, inputs):
                    timed.append((Row(w, name, None, True), run))
                else:
                    rows.append(Row(w, name, None, False, "MISMATCH against numpy: not timed"))
            except PeerLacks as e:
                rows.append(Row(w, name, None, True, f"skipped: {e}"))
            except Exception as e:
                rows.append(Row(w, name, None, False, f"failed: {type(e).__name__}: {_first_line(e)[:60]}"))
        for device in devices:
            try:
                run, value = _ug_runner(w, inputs, device)
                ok = _check(value(), want, w, inputs)
                if ok:
                    _hot(run)
                    timed.append((Row(w, f"ug:{device}", None, True), run))
                else:
                    rows.append(Row(w, f"ug:{device}", None, False, "MISMATCH against numpy: not timed"))
            except Exception as e:
                rows.append(Row(w, f"ug:{device}", None, False, f"failed: {type(e).__name__}: {_first_line(e)[:80]}"))
        try:
            medians: list[float | None] = list(_interleaved_medians([run for _, run in timed], repeat))
        except Exception as e:  # a run that worked once and then failed
            medians = [None] * len(timed)
            for row, _ in timed:
                row.ok = False
                row.note = f"failed while timed: {type(e).__name__}: {_first_line(e)[:60]}"
        for (row, _), seconds in zip(timed, medians):
            row.seconds = seconds
        rows = [row for row, _ in timed] + rows
        rows.sort(key=lambda r: _order(r.impl))
        results.append((w, rows, inputs))
        _print_rows(w, rows, inputs, out)
        del timed, candidates, extra
        peers.release()
    return results


def _order(impl: str) -> int:
    """Rows print peers first (in PEERS' order), then ug's devices."""
    base = impl.split(":")[0]
    return PEERS.index(base) if base in PEERS else len(PEERS)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def _print_rows(w: Workload, rows: list[Row], inputs: list[np.ndarray], out: Callable[[str], None]) -> None:
    # the best peer: the fastest of those that ran and agree with numpy (numpy, torch eager,
    # torch.compile, JAX, tinygrad)
    ran = [r for r in rows if not r.impl.startswith("ug:") and r.seconds is not None and r.ok]
    # ug on a GPU is compared with the peers on that GPU (torch:cuda), where they ran
    gpu_peers = [r for r in ran if r.impl.endswith(":cuda")]
    cpu_peers = [r for r in ran if r not in gpu_peers]
    unit, mult = ("us", 1e6) if w.tiny else ("ms", 1e3)
    for r in rows:
        t = f"{r.seconds * mult:10.3f} {unit}" if r.seconds is not None else f"{'-':>13}"
        ratio = ""
        same_place = gpu_peers if r.impl == "ug:cuda" and gpu_peers else cpu_peers
        best = min(same_place, key=lambda p: p.seconds) if same_place else None  # type: ignore[arg-type,return-value]
        if r.impl.startswith("ug:") and best is not None and r.seconds is not None:
            ratio = f"{r.seconds / best.seconds:.2f}x vs {best.impl}"  # type: ignore[operator]
        check = "ok" if r.ok and r.seconds is not None else "MISMATCH" if r.note.startswith("MISMATCH") else ""
        out(f"| {w.name:4} | {w.title(inputs):28} | {r.impl:14} | {t} | {r.rate(inputs):>15} | {ratio:22} | {check:8} {r.note}")


def machine_line() -> str:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions = [f"numpy {np.__version__}"]
    try:
        import torch
        versions.append(f"torch {torch.__version__}")
    except ImportError:
        versions.append("torch not installed")
    versions += peers.versions()
    spin = os.environ.get(BLAS_SPIN_ENV, "unset")
    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {', '.join(versions)}, "
            f"{BLAS_SPIN_ENV}={spin}, ug devices {ug.devices()}")


def quiet_blas_command(argv: list[str]) -> list[str] | None:
    """The command line to restart `ug bench` with OpenBLAS's idle threads sleeping (see
    BLAS_SPIN_ENV), or None when that is already so or not wanted (--blas-spin)."""
    if "--blas-spin" in argv or BLAS_SPIN_ENV in os.environ:
        return None
    return [sys.executable, "-m", "ug_bench.bench", *argv]


def main_from_command_line(argv: list[str]) -> int:
    """`ug bench` / `python -m ug_bench.bench` from a command line: restarts the process once
    with BLAS_SPIN_ENV set (it must be set before numpy loads OpenBLAS), then runs main."""
    command = quiet_blas_command(argv)
    if command is not None:
        sys.stdout.flush()
        os.execve(sys.executable, command, {**os.environ, BLAS_SPIN_ENV: BLAS_SPIN_QUIET})
    return main(argv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ug bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", action="append", help="ug device to run (repeatable; default: every usable device except ref)")
    parser.add_argument("--workloads", help="comma-separated names, e.g. W1,W3,W6a,T1 (default: all)")
    parser.add_argument("--scale", type=int, default=1, help="divide problem sizes by this (quick runs)")
    parser.add_argument("--repeat", type=int, default=7, help="timed samples per implementation (median is reported)")
    parser.add_argument("--no-torch-compile", action="store_true", help="skip torch.compile (it compiles for a long time)")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help=f"comma-separated peers to run beside ug (default: all of {','.join(PEERS)}; "
                             "jax and tinygrad are skipped, with a note, where not installed)")
    parser.add_argument("--compile", action="store_true",
                        help="instead of warm times: cold-compile seconds (first call - warm call) of ug, JAX, "
                             "torch.compile and tinygrad per workload, each in a fresh process with empty caches "
                             f"(default workloads: {','.join(COLD_WORKLOADS)}; --repeat fresh processes each)")
    parser.add_argument("--blas-spin", action="store_true",
                        help=f"keep OpenBLAS's idle threads spinning (by default `ug bench` sets {BLAS_SPIN_ENV}={BLAS_SPIN_QUIET}: "
                             "their spinning halves the speed of the implementation timed after numpy)")
    args = parser.parse_args(argv)
    peer_names = [p for p in args.peers.split(",") if p]
    unknown = sorted(set(peer_names) - set(PEERS))
    if unknown:
        parser.error(f"unknown peers {unknown}: choose among {list(PEERS)}")
    if args.no_torch_compile:
        peer_names = [p for p in peer_names if p != "torch.compile"]
    # initialize=True: a device whose hardware fails to start is left out, not benchmarked
    devices = args.device or [d for d in ug.devices(initialize=True) if d != "ref"] or ["ref"]
    names = args.workloads.split(",") if args.workloads else None
    print(f"machine: {machine_line()}")
    print(f"command: ug bench {' '.join(argv) if argv else ''}".rstrip())
    if args.compile:
        from .coldstart import run_cold
        return run_cold(devices, names or list(COLD_WORKLOADS), args.scale, args.repeat, peer_names)
    print("| W    | workload                     | impl           |        median |            rate | ug / best peer         | check")
    results = run_bench(devices, names, args.scale, args.repeat, "torch.compile" in peer_names, peer_names=peer_names)
    checked = [(w.name, r.impl, r.ok) for w, rows, _ in results for r in rows if r.ok or r.note.startswith("MISMATCH")]
    for rows in (TRAININGS, SPECTRAL):
        checked += run_training(devices, names, args.scale, args.repeat, "torch.compile" in peer_names,
                                _interleaved_medians, rows=rows, peer_names=peer_names)
    # ug disagreeing with numpy (or failing) is an error; a peer that does is reported, not timed
    bad = [(name, impl) for name, impl, ok in checked if not ok]
    if [b for b in bad if b[1].startswith("ug:")]:
        print(f"MISMATCH against numpy: {bad}")
        return 1
    if bad:
        print(f"peers that disagree with numpy or failed (not timed): {bad}")
    return 0


if __name__ == "__main__":
    sys.exit(main_from_command_line(sys.argv[1:]))
