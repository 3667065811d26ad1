"""A transformer block forward pass in ug, checked against numpy, with its schedule and timings."""

from __future__ import annotations

import math
import time

import numpy as np

import ug_core as ug


def _layernorm(x, w, b, xp=None, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(-1, keepdims=True) + eps
    return xc / (np.sqrt(var) if xp is np else var.sqrt()) * w + b


def block(x, p, heads: int, xp=None):
    """One pre-norm transformer block. Works for ug tensors and (with xp=np) numpy arrays."""
    seq, dim = x.shape
    hd = dim // heads
    h = _layernorm(x, p["ln1_w"], p["ln1_b"], xp)
    qkv = h @ p["w_qkv"]                                          # (seq, 3*dim)
    q, k, v = (qkv[:, i * dim:(i + 1) * dim].reshape(seq, heads, hd).transpose(1, 0, 2) for i in range(3))
    scores = (q @ k.transpose(0, 2, 1)) * (1.0 / math.sqrt(hd))   # (heads, seq, seq)
    if xp is np:
        e = np.exp(scores - scores.max(-1, keepdims=True))
        att = e / e.sum(-1, keepdims=True)
    else:
        att = scores.softmax(-1)
    o = (att @ v).transpose(1, 0, 2).reshape(seq, dim)
    x = x + o @ p["w_o"]
    h = _layernorm(x, p["ln2_w"], p["ln2_b"], xp)
    u = h @ p["w_1"]
    if xp is np:
        g = 0.5 * u * (1 + np.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))
    else:
        g = u.gelu()
    return x + g @ p["w_2"]


def main(device: str | None = None, seq: int = 128, dim: int = 256, heads: int = 4) -> int:
    rng = np.random.default_rng(0)
    f32 = np.float32
    params = {
        "ln1_w": 1 + 0.1 * rng.standard_normal(dim).astype(f32), "ln1_b": 0.1 * rng.standard_normal(dim).astype(f32),
        "w_qkv": (rng.standard_normal((dim, 3 * dim)) / math.sqrt(dim)).astype(f32),
        "w_o": (rng.standard_normal((dim, dim)) / math.sqrt(dim)).astype(f32),
        "ln2_w": 1 + 0.1 * rng.standard_normal(dim).astype(f32), "ln2_b": 0.1 * rng.standard_normal(dim).astype(f32),
        "w_1": (rng.standard_normal((dim, 4 * dim)) / math.sqrt(dim)).astype(f32),
        "w_2": (rng.standard_normal((4 * dim, dim)) / math.sqrt(4 * dim)).astype(f32),
    }
    x_np = rng.standard_normal((seq, dim)).astype(f32)
    device = device or ug.registry.preferred()  # the first usable device that starts
    print(f"ug demo: transformer block, seq={seq} dim={dim} heads={heads}, device={device!r} (of {ug.devices()})")
    p = {k: ug.tensor(v, device=device) for k, v in params.items()}
    x = ug.tensor(x_np, device=device)
    out = block(x, p, heads)
    sched = ug.schedule(out)
    print(sched)
    times = []
    for _ in range(3):
        out = block(x, p, heads)
        start = time.perf_counter()
        got = out.numpy()
        times.append(time.perf_counter() - start)
    # the same block through ug.jit: scheduled once, then each call replays the compiled kernels
    # (the lazy path above builds the whole graph on every call and looks its compiled steps up
    # by the graph's structure)
    jitted = ug.jit(lambda x, *weights: block(x, dict(zip(p, weights)), heads))
    jit_times = []
    for _ in range(4):
        start = time.perf_counter()
        jit_got = jitted(x, *p.values()).numpy()
        jit_times.append(time.perf_counter() - start)
    want = block(x_np, params, heads, xp=np)
    err = max(float(np.max(np.abs(g - want)) / (np.max(np.abs(want)) + 1e-12)) for g in (got, jit_got))
    np_times = []
    for _ in range(3):
        start = time.perf_counter()
        block(x_np, params, heads, xp=np)
        np_times.append(time.perf_counter() - start)
    print(f"ug ({device}): {min(times) * 1e3:.2f} ms lazy, {min(jit_times[1:]) * 1e3:.2f} ms via ug.jit   "
          f"numpy: {min(np_times) * 1e3:.2f} ms   max rel error vs numpy: {err:.2e}")
    ok = err < 1e-4
    print("OK: matches numpy" if ok else "MISMATCH against numpy")
    return 0 if ok else 1
