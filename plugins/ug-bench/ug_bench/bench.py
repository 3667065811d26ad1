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
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Collection

import numpy as np

import ug_core as ug

from . import peers
from .peers import PeerLacks
from .spectral import SPECTRAL
from .training import TRAININGS, run_training

# numpy's OpenBLAS keeps its threads spinning for 2^OPENBLAS_THREAD_TIMEOUT cycles (default 2^28,
# about 0.1 s) after each call. On a 2-core machine that halves the speed of whatever threaded
# code runs next: a 1024^3 matmul, by ug or by torch, took 21-23 ms right after numpy's and
# 11-13 ms after anything else, while numpy after ug or torch was unaffected. Round-robin timing
# puts an implementation right after numpy in every round, so `ug bench` runs with OpenBLAS's
# threads going to sleep as soon as they are idle (the variable is read when OpenBLAS loads:
# the command restarts itself with it set; --blas-spin keeps the default).
BLAS_SPIN_ENV = "OPENBLAS_THREAD_TIMEOUT"
BLAS_SPIN_QUIET = "4"


@dataclass
class Workload:
    name: str
    title: Callable[[list[np.ndarray]], str]   # the title, with the sizes of the inputs (which --scale shrinks)
    make_inputs: Callable[[np.random.Generator, int], list[np.ndarray]]   # (rng, scale divisor)
    fn: Callable[..., Any]              # the same code for ug tensors, numpy and torch (xp given)
    bytes_moved: Callable[[list[np.ndarray]], float] | None = None
    flops: Callable[[list[np.ndarray]], float] | None = None
    tiny: bool = False                  # report µs per call
    jit: bool = True                    # ug runs it under ug.jit (not a data-dependent shape)
    # what is compared with the float64 reference (of the inputs and an output): the output itself,
    # or e.g. the values an argsort orders (equal values may come in any order)
    canon: Callable[[list[np.ndarray], np.ndarray], np.ndarray] | None = None
    rtol: float = 1e-4
    atol: float = 1e-5


# --- the computations, written once for ug, numpy, torch, JAX and tinygrad ---------------------
# `xp` is "ug" or "tinygrad" (both spelled with tensor methods: x.exp(), x.softmax(axis)), numpy or
# jax.numpy (numpy's spelling: `_numpy_like`), or torch. A computation a peer lacks raises
# PeerLacks, and the row says so instead of timing it.

TINYGRAD = "tinygrad"
METHODS = ("ug", TINYGRAD)   # the namespaces spelled with tensor methods


def _numpy_like(xp: Any) -> bool:
    """numpy, or jax.numpy (which follows numpy's names and keywords)."""
    return xp is np or getattr(xp, "__name__", "") == "jax.numpy"


# tinygrad's cumsum, argsort, scatter_reduce and masked_select are built of one-hot comparisons
# and reductions, whose work grows with the product of two sizes: measured on 2 cores (0.14,
# CPU:LLVM), cumsum 64K/128K/256K took 5.5/19/89 ms, argsort 4K/8K 46/260 ms, x[x > 0] 64K/128K/256K
# 0.44/1.9/6.7 s, scatter_add of 16K/32K/64K into 64K 0.26/0.57/0.72 s: at the full sizes a call
# would take minutes to hours. Its sort (and topk, built on it) is a bitonic network whose stages
# are kept in memory: sorting 16M float32 held over 16 GB of shared memory, and the kernel's OOM
# killer ended the run. Above these sizes tinygrad is skipped on those rows, saying why.
TINYGRAD_LIMITS = {"cumsum": 2**20, "argsort": 2**16, "scatter_reduce": 2**18, "masked_select": 2**18,
                   "sort": 2**20, "topk": 2**20}
_WHY = {"sort": "is a bitonic network held in memory (16M took > 16 GB)",
        "topk": "is a bitonic sort held in memory (16M took > 16 GB)"}


def _tinygrad_within(op: str, n: int) -> None:
    """Raise PeerLacks when tinygrad's `op` over `n` elements is past TINYGRAD_LIMITS."""
    if n > TINYGRAD_LIMITS[op]:
        why = _WHY.get(op, "grows as n^2 (one-hot)")
        raise PeerLacks(f"tinygrad's {op} {why}: {_count(n)} elements > {_count(TINYGRAD_LIMITS[op])}")


def _exp(xp: Any, x: Any) -> Any:
    return x.exp() if xp in METHODS else xp.exp(x)


def _tanh(xp: Any, x: Any) -> Any:
    return x.tanh() if xp in METHODS else xp.tanh(x)


def _softmax(xp: Any, x: Any, axis: int = -1) -> Any:
    if xp in METHODS:
        return x.softmax(axis)
    m = x.max(axis, keepdims=True) if _numpy_like(xp) else x.amax(axis, keepdim=True)
    e = xp.exp(x - m)
    return e / (e.sum(axis, keepdims=True) if _numpy_like(xp) else e.sum(axis, keepdim=True))


def w1(xp: Any, x: Any) -> Any:
    return (x.exp() * x.sin() if xp in METHODS else xp.exp(x) * xp.sin(x)) + x * x


def w2(xp: Any, x: Any) -> Any:
    return 0.5 * x * (1 + _tanh(xp, math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))


def w3(xp: Any, x: Any) -> Any:
    return _softmax(xp, x)


def w4(xp: Any, x: Any, w: Any, b: Any) -> Any:
    keep = {"keepdims": True} if xp == "ug" or _numpy_like(xp) else {"keepdim": True}
    mu = x.mean(-1, **keep)
    xc = x - mu
    var = (xc * xc).mean(-1, **keep)
    inv = (var + 1e-5).sqrt().reciprocal() if xp in METHODS else 1 / xp.sqrt(var + 1e-5)
    return xc * inv * w + b


def w5a(xp: Any, x: Any) -> Any:
    return x.sum()


def w5b(xp: Any, x: Any) -> Any:
    return x.sum(0)


def w6(xp: Any, a: Any, b: Any) -> Any:
    return a @ b


def w7(xp: Any, q: Any, k: Any, v: Any) -> Any:
    kt = k.transpose(0, 2, 1) if _numpy_like(xp) else k.permute(0, 2, 1)
    return _softmax(xp, (q @ kt) * (1 / math.sqrt(q.shape[-1]))) @ v


def w8a(xp: Any, a: Any, b: Any) -> Any:
    return a + b


def w8b(xp: Any, a: Any, b: Any) -> Any:
    y = a + b
    for i in range(9):
        y = y * 1.0001 + b if i % 2 else y - a * 0.5
    return y


# Array API workloads (issue 13): ug's namespace is `ug`, numpy's `np` (and jax.numpy); torch and
# tinygrad spell a few differently (padding, clamp, dim=)


def _ns(xp: Any) -> Any:
    return ug if xp == "ug" else xp


STENCIL = ((1, 2, 1), (2, 4, 2), (1, 2, 1))   # a 3x3 blur, weights / 16


def w9(xp: Any, x: Any) -> Any:
    """pad by 1 (zeros), then a 3x3 stencil: the padded image is never stored (one kernel)."""
    if xp == "ug" or _numpy_like(xp):
        p = _ns(xp).pad(x, 1)
    elif xp == TINYGRAD:
        p = x.pad(((1, 1), (1, 1)))
    else:
        p = xp.nn.functional.pad(x, (1, 1, 1, 1))
    h, w = x.shape
    out = None
    for i, row in enumerate(STENCIL):
        for j, weight in enumerate(row):
            term = p[i:i + h, j:j + w] * (weight / 16)
            out = term if out is None else out + term
    return out


def w10(xp: Any, *xs: Any) -> Any:
    """concat along the rows' axis, then a row softmax over the joined rows."""
    if xp == TINYGRAD:
        joined = xs[0].cat(*xs[1:], dim=-1)
    else:
        joined = _ns(xp).concat(xs, axis=-1) if xp == "ug" or _numpy_like(xp) else xp.cat(xs, dim=-1)
    return _softmax(xp, joined)


def w11(xp: Any, x: Any) -> Any:
    if xp == "ug":
        return ug.cumulative_sum(x)
    if xp == TINYGRAD:
        _tinygrad_within("cumsum", x.numel())
        return x.cumsum(0)
    return xp.cumsum(x) if _numpy_like(xp) else xp.cumsum(x, 0)


def w12(xp: Any, x: Any) -> Any:
    if xp == "ug" or _numpy_like(xp):
        return _ns(xp).var(x, axis=0)
    return x.var(axis=0, correction=0) if xp == TINYGRAD else xp.var(x, dim=0, correction=0)


def w13(xp: Any, x: Any) -> Any:
    """int8-range quantization, as floats: clip(round(x * s), -128, 127) (round: half to even, in all)."""
    if xp == TINYGRAD:
        return (x * 20.0).round().clip(-128, 127)
    q = _ns(xp).round(x * 20.0)
    return _ns(xp).clip(q, -128, 127) if xp == "ug" or _numpy_like(xp) else xp.clamp(q, -128, 127)


def w14(xp: Any, x: Any) -> Any:
    if xp == "ug" or _numpy_like(xp):
        return _ns(xp).argmax(x, axis=1)
    return x.argmax(axis=1) if xp == TINYGRAD else xp.argmax(x, dim=1)


def w15(xp: Any, table: Any, ids: Any) -> Any:
    """an embedding lookup and a scale: the gather fuses into the multiply (one kernel)."""
    return table[ids] * 0.5


def w16(xp: Any, x: Any) -> Any:
    if xp == "ug" or _numpy_like(xp):
        return _ns(xp).sort(x)
    if xp == TINYGRAD:
        _tinygrad_within("sort", x.numel())
        return x.sort()[0]
    return xp.sort(x).values


def w17(xp: Any, x: Any) -> Any:
    if xp == "ug" or _numpy_like(xp):
        return _ns(xp).argsort(x)
    if xp == TINYGRAD:
        _tinygrad_within("argsort", x.numel())
        return x.argsort()
    return xp.argsort(x)


def w18(xp: Any, x: Any) -> Any:
    """the 16 largest of each row, largest first (values)."""
    if xp == "ug":
        return ug.topk(x, 16)[0]
    if xp is np:
        return np.sort(np.partition(x, -16, axis=1)[:, -16:], axis=1)[:, ::-1]
    if _numpy_like(xp):   # jax.numpy: its top_k is in jax.lax
        import jax
        return jax.lax.top_k(x, 16)[0]
    if xp == TINYGRAD:
        _tinygrad_within("topk", x.numel())
        return x.topk(16)[0]
    return xp.topk(x, 16).values


def w19(xp: Any, x: Any) -> Any:
    if xp == TINYGRAD:
        raise PeerLacks("tinygrad has no bincount")
    return _ns(xp).bincount(x) if xp == "ug" or _numpy_like(xp) else xp.bincount(x)


def w20(xp: Any, x: Any, idx: Any, src: Any) -> Any:
    if xp == "ug":
        return ug.scatter_add(x, 0, idx, src)
    if xp is np:
        out = x.copy()
        np.add.at(out, idx, src)
        return out
    if _numpy_like(xp):   # jax.numpy: an indexed update
        return x.at[idx].add(src)
    if xp == TINYGRAD:
        _tinygrad_within("scatter_reduce", idx.numel())
        return x.scatter_reduce(0, idx, src, "sum")
    return x.scatter_add(0, idx, src)


def w21(xp: Any, x: Any) -> Any:
    if xp == TINYGRAD:
        _tinygrad_within("masked_select", x.numel())
        return x.masked_select(x > 0)
    return x[x > 0]


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)


def _bytes(inputs: list[np.ndarray], out_elems: int | None = None) -> float:
    total = sum(a.nbytes for a in inputs)
    return float(total + (out_elems if out_elems is not None else inputs[0].size) * 4)


def _count(n: int) -> str:
    """An element count as a label: 16777216 -> '16M', 262144 -> '256K', 100 -> '100'."""
    for unit, size in (("M", 2**20), ("K", 2**10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def _dims(a: np.ndarray) -> str:
    return "x".join(map(str, a.shape))


def _matmul_title(i: list[np.ndarray]) -> str:
    m, k, n = i[0].shape[0], i[0].shape[1], i[1].shape[1]
    return f"matmul {m}^3" if m == k == n else f"matmul {m}x{k}x{n}"


# titles are functions of the inputs: `--scale` shrinks them, and the label says what really ran
WORKLOADS = [
    Workload("W1", lambda i: f"exp(x)*sin(x)+x*x, {_count(i[0].size)}", lambda r, s: [_rand(r, 16 * 2**20 // s)], w1, _bytes),
    Workload("W2", lambda i: f"GELU(tanh), {_count(i[0].size)}", lambda r, s: [_rand(r, 16 * 2**20 // s)], w2, _bytes),
    Workload("W3", lambda i: f"row softmax {_dims(i[0])}", lambda r, s: [_rand(r, 4096 // s, 4096) * 4], w3, _bytes),
    Workload("W4", lambda i: f"layernorm {_dims(i[0])} (+w,b)",
             lambda r, s: [_rand(r, 8192 // s, 1024), _rand(r, 1024), _rand(r, 1024)], w4, lambda i: _bytes(i[:1]) + 8192.0),
    Workload("W5a", lambda i: f"sum of {_count(i[0].size)}", lambda r, s: [_rand(r, 32 * 2**20 // s)], w5a,
             lambda i: _bytes(i, 1), rtol=1e-4, atol=1e-2),
    Workload("W5b", lambda i: f"column sum {_dims(i[0])}", lambda r, s: [_rand(r, 4096 // s, 4096)], w5b,
             lambda i: _bytes(i, 4096), atol=1e-3),
    Workload("W6a", _matmul_title, lambda r, s: [_rand(r, 1024 // s, 1024), _rand(r, 1024, 1024)], w6,
             flops=lambda i: 2.0 * i[0].shape[0] * i[0].shape[1] * i[1].shape[1], rtol=1e-3, atol=1e-3),
    Workload("W6b", _matmul_title, lambda r, s: [_rand(r, 2048 // s, 2048), _rand(r, 2048, 2048)], w6,
             flops=lambda i: 2.0 * i[0].shape[0] * i[0].shape[1] * i[1].shape[1], rtol=1e-3, atol=1e-3),
    Workload("W7", lambda i: f"attention {i[0].shape[0]}h x {i[0].shape[1]} x {i[0].shape[2]}",
             lambda r, s: [_rand(r, 16, 1024 // s, 64), _rand(r, 16, 1024 // s, 64), _rand(r, 16, 1024 // s, 64)],
             w7, flops=lambda i: 4.0 * i[0].shape[0] * i[0].shape[1] * i[1].shape[1] * i[0].shape[2], rtol=1e-3, atol=1e-4),
    Workload("W8a", lambda i: f"tiny add ({i[0].size} el.)", lambda r, s: [_rand(r, 64), _rand(r, 64)], w8a, tiny=True),
    Workload("W8b", lambda i: "chain of 10 tiny ops", lambda r, s: [_rand(r, 64), _rand(r, 64)], w8b, tiny=True),
    Workload("W9", lambda i: f"pad + 3x3 stencil {_dims(i[0])}", lambda r, s: [_rand(r, 4096 // s, 4096)], w9, _bytes),
    Workload("W10", lambda i: f"concat {len(i)} x {_dims(i[0])} + row softmax",
             lambda r, s: [_rand(r, 2048 // s, 512) for _ in range(8)], w10, _bytes),
    Workload("W11", lambda i: f"cumulative_sum of {_count(i[0].size)}", lambda r, s: [_rand(r, 16 * 2**20 // s)], w11,
             _bytes, rtol=1e-3, atol=1.0),
    Workload("W12", lambda i: f"var(axis=0) {_dims(i[0])}", lambda r, s: [_rand(r, 4096 // s, 4096)], w12,
             lambda i: _bytes(i, i[0].shape[1]), atol=1e-4),
    Workload("W13", lambda i: f"clip(round(x*s)) quantize {_count(i[0].size)}", lambda r, s: [_rand(r, 16 * 2**20 // s)],
             w13, _bytes, atol=0.2),
    Workload("W14", lambda i: f"argmax over rows {_dims(i[0])}", lambda r, s: [_rand(r, 4096 // s, 4096)], w14,
             lambda i: _bytes(i, i[0].shape[0])),
    Workload("W15", lambda i: f"emb[ids]*s {_dims(i[0])}, {_count(i[1].size)} ids",
             lambda r, s: [_rand(r, 50000, 512), r.integers(0, 50000, 65536 // s)], w15,
             lambda i: float(i[1].nbytes + 2 * i[1].size * i[0].shape[1] * 4)),
    Workload("W16", lambda i: f"sort of {_count(i[0].size)}", lambda r, s: [_rand(r, 16 * 2**20 // s)], w16, _bytes),
    Workload("W17", lambda i: f"argsort of {_count(i[0].size)}", lambda r, s: [_rand(r, 2**20 // s)], w17,
             lambda i: _bytes(i, 2 * i[0].size), canon=lambda i, order: i[0][order.astype(np.int64)]),
    Workload("W18", lambda i: f"topk(16) of rows {_dims(i[0])}", lambda r, s: [_rand(r, 4096 // s, 4096)], w18,
             lambda i: _bytes(i, 16 * i[0].shape[0])),
    Workload("W19", lambda i: f"bincount of {_count(i[0].size)} into 1024", lambda r, s: [r.integers(0, 1024, 16 * 2**20 // s)],
             w19, lambda i: float(i[0].nbytes), jit=False),
    Workload("W20", lambda i: f"scatter_add {_count(i[2].size)} into {_count(i[0].size)}",
             lambda r, s: [np.zeros(2**16, np.float32), r.integers(0, 2**16, 4 * 2**20 // s), _rand(r, 4 * 2**20 // s)],
             w20, lambda i: float(i[1].nbytes + i[2].nbytes), rtol=1e-4, atol=1e-3),
    Workload("W21", lambda i: f"x[x > 0] of {_count(i[0].size)}", lambda r, s: [_rand(r, 16 * 2**20 // s)], w21,
             lambda i: float(i[0].nbytes * 1.5), jit=False),
]


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
