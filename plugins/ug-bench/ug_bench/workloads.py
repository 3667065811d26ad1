"""The workloads `ug bench` times (rows W1...): each computation written once for ug, numpy, torch,
JAX and tinygrad, with its inputs, its title and what it moves (bytes or flops) for the rate column.
The training rows (T...) are in ug_bench.training, the complex / FFT rows (F...) in ug_bench.spectral.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import ug_core as ug

from .peers import PeerLacks

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
