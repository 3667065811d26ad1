"""ug.precompile and ug.jit(fn).lower: compile a call's kernels without running it, warming the
compile cache and the disk cache so that a fresh process with that cache compiles nothing."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ug_core as ug

pytest.importorskip("ug_llvm")

# a model-like function on the cpu device: a packed-gemm matmul with a fused epilogue, a small
# matmul of a tensor with itself (the kernel's variant for one buffer passed twice), a row
# reduction, fused attention, and a layernorm over a matmul (3 matmuls, 2 kernels, 1 attention)
PROGRAM = textwrap.dedent("""
    import json, sys
    import numpy as np
    import ug_core as ug
    from ug_llvm.jit import get_jit

    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in
              [(96, 64), (64, 72), (5, 5), (2, 3, 40, 16), (2, 3, 40, 16), (2, 3, 40, 16)]]
    x, w, s, q, k, v = [ug.tensor(a, device="cpu") for a in arrays]

    def f(x, w, s, q, k, v):
        h = (x @ w + 0.5).softmax(axis=-1)
        small = (s @ s).sum(axis=0)
        att = ug.nn.scaled_dot_product_attention(q, k, v)
        y = x @ w
        norm = (y - y.mean(axis=-1, keepdims=True)) / (y.var(axis=-1, keepdims=True) + 1e-5).sqrt()
        return h, small, att, norm

    mode = sys.argv[1]
    stats = get_jit().compiler.stats
    before = dict(stats)
    if mode == "precompile":
        report = ug.precompile(f, x, w, s, q, k, v)
        print(json.dumps({"kernels": len(report.schedule.kernels), "prepared": report.items_prepared,
                          "new": report.new_programs}))
    elif mode == "lower":
        report = ug.jit(f).lower(x, w, s, q, k, v)
        print(json.dumps({"kernels": len(report.schedule.kernels), "prepared": report.items_prepared,
                          "new": report.new_programs}))
    else:
        fn = ug.jit(f) if mode == "jit" else f
        results = fn(x, w, s, q, k, v)
        ug.realize(*results)   # (lazily: the results scheduled together, as precompile does)
        outs = [o.numpy() for o in results]
        xa, wa, sa, qa, ka, va = arrays
        y = xa @ wa
        e = np.exp(y + 0.5 - (y + 0.5).max(-1, keepdims=True))
        sc = qa @ ka.swapaxes(-1, -2) / np.sqrt(16)
        p = np.exp(sc - sc.max(-1, keepdims=True))
        want = [e / e.sum(-1, keepdims=True), (sa @ sa).sum(0), (p / p.sum(-1, keepdims=True)) @ va,
                (y - y.mean(-1, keepdims=True)) / np.sqrt(y.var(-1, keepdims=True) + 1e-5)]
        ok = all(np.allclose(o, r, rtol=1e-4, atol=1e-4) for o, r in zip(outs, want))
        ug.tiers.wait()   # (a first run on tier 0 compiles the gemm and attention modules in the background)
        print(json.dumps({"compiled": stats["compiled"] - before["compiled"], "ok": ok}))
""")


def _run(tmp_path, cache, mode):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, UG_LLVM_CACHE_DIR=str(cache), UG_LLVM_DISK_CACHE="1")
    run = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("warm, call", [("precompile", "lazy"), ("lower", "jit"), ("precompile", "jit")])
def test_a_fresh_process_after_precompile_compiles_nothing(tmp_path, warm, call):
    cache = tmp_path / "cache"
    cold = _run(tmp_path, cache / "cold", call)   # the same call with an empty cache compiles
    assert cold["ok"] and cold["compiled"] > 0
    report = _run(tmp_path, cache / "warm", warm)
    assert report["kernels"] >= 2 and report["prepared"] >= 4 and report["new"] == report["kernels"]
    after = _run(tmp_path, cache / "warm", call)
    assert after == {"compiled": 0, "ok": True}


def test_precompile_runs_nothing_and_compiles_once():
    calls = []

    def host(out, a):
        calls.append(1)
        out[...] = a * 2

    a = ug.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="cpu")
    b = ug.tensor(np.ones((4, 9), np.float32), device="cpu")

    def f(a, b):
        return ug.custom(host, [a @ b], (3, 9), np.float32).exp() + 1.0

    report = ug.precompile(f, a, b)
    assert calls == [] and report.schedule is not None and len(report.schedule.items) >= 2
    assert "precompiled" in str(report)
    again = ug.precompile(f, a, b)
    assert again.new_programs == 0 and again.programs == report.programs
    want = np.exp((np.arange(12, dtype=np.float32).reshape(3, 4) @ np.ones((4, 9), np.float32)) * 2) + 1
    np.testing.assert_allclose(f(a, b).numpy(), want, rtol=1e-6)
    assert calls == [1]


def test_precompile_of_realized_results_and_bad_input():
    a = ug.tensor(np.ones(4, np.float32), device="cpu")
    report = ug.precompile(lambda t: (t, 3), a)   # nothing lazy: nothing to compile
    assert report.schedule is None and report.programs == 0
    with pytest.raises(TypeError, match="needs a function"):
        ug.precompile(42, a)
