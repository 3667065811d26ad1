"""Tier 0 of the cpu device's own compiled code (ug_core.tiers): a matmul whose packed gemm, or a
fused attention whose module, is not compiled yet runs on numpy while the module compiles on
the tiers' background thread (a gemm from its dtype's second product on), then on the compiled code; through ug.jit too, whose traces run
their kernels compiled but reach the device's matmul and attention as any call does. Tier mode
"1" compiles before the first run, "0" stays on numpy, and ug.precompile compiles ahead.

Each test gives the cpu device fresh matmul and attention state (nothing compiled), so that the
first run is a first run whatever ran before in the process."""

import numpy as np
import pytest

import ug_core as ug
from ug_core import tiers

ug_llvm = pytest.importorskip("ug_llvm")
from ug_llvm.attention import HostAttention  # noqa: E402
from ug_llvm.matmul import HostMatmul  # noqa: E402


@pytest.fixture
def cpu(monkeypatch):
    """The cpu device with a fresh HostMatmul and HostAttention (no gemm, no attention module)."""
    try:
        dev = ug.registry.get("cpu")
    except Exception as e:  # (no LLVM here)
        pytest.skip(f"no cpu device: {e}")
    monkeypatch.setattr(dev, "matmuls", HostMatmul(dev))
    monkeypatch.setattr(dev, "attentions", HostAttention(dev))
    yield dev
    assert tiers.wait(120)


def _product(rng, m, k, n, dtype=np.float32):
    a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def test_a_matmul_runs_on_numpy_until_its_gemm_is_compiled(cpu):
    a, b, want = _product(np.random.default_rng(1), 96, 80, 72)
    f = ug.jit(lambda x, y: x @ y)
    x, y = ug.tensor(a, device="cpu"), ug.tensor(b, device="cpu")
    with tiers.forced("auto"):
        np.testing.assert_allclose(f(x, y).numpy(), want, rtol=1e-4, atol=1e-4)
        assert not cpu.matmuls._background, "a product run once costs no compile"
        np.testing.assert_allclose(f(x, y).numpy(), want, rtol=1e-4, atol=1e-4)
        assert cpu.matmuls._background, "the second product of the dtype queues its gemm's compile"
        assert np.dtype(np.float32) not in cpu.matmuls._ready
        assert tiers.wait(120)
        for _ in range(2):
            np.testing.assert_allclose(f(x, y).numpy(), want, rtol=1e-4, atol=1e-4)
        assert cpu.matmuls._gemms and np.dtype(np.float32) in cpu.matmuls._ready   # the gemm from now on


def test_tier0_matmul_results_match_the_gemm_for_each_dtype_and_layout(cpu):
    rng = np.random.default_rng(2)
    cases = [(np.float32, False), (np.float64, False), (np.float16, False), (np.float32, True)]
    for dtype, transposed in cases:
        a, b, want = _product(rng, 40, 33, 24, dtype)
        bt = np.ascontiguousarray(b.T)

        def f(x, y):
            return x @ (y.T if transposed else y)
        args = (ug.tensor(a, device="cpu"), ug.tensor(bt if transposed else b, device="cpu"))
        tol = 2e-2 if dtype == np.float16 else 1e-4
        with tiers.forced("0"):
            zero = f(*args).numpy()
        with tiers.forced("1"):
            one = f(*args).numpy()
        assert zero.dtype == one.dtype == np.dtype(dtype)
        np.testing.assert_allclose(zero.astype(np.float64), want, rtol=tol, atol=tol)
        np.testing.assert_allclose(zero.astype(np.float64), one.astype(np.float64), rtol=tol, atol=tol)


def test_tier_modes_and_precompile_decide_when_the_gemm_compiles(cpu):
    a, b, want = _product(np.random.default_rng(3), 64, 64, 64)
    x, y = ug.tensor(a, device="cpu"), ug.tensor(b, device="cpu")
    with tiers.forced("0"):   # numpy for good: nothing compiled or queued
        for _ in range(2):
            np.testing.assert_allclose((x @ y).numpy(), want, rtol=1e-4, atol=1e-4)
        assert not cpu.matmuls._gemms and not cpu.matmuls._background
    with tiers.forced("1"):   # compiled before the first run, on the caller's thread
        np.testing.assert_allclose((x @ y).numpy(), want, rtol=1e-4, atol=1e-4)
        assert cpu.matmuls._gemms and not cpu.matmuls._background
    fresh = HostMatmul(cpu)
    cpu.matmuls = fresh
    with tiers.forced("auto"):
        report = ug.precompile(lambda p, q: p @ q, x, y)   # the gemm compiled ahead: no tier 0 after it
        assert report.items_prepared == 1 and fresh._gemms
        np.testing.assert_allclose((x @ y).numpy(), want, rtol=1e-4, atol=1e-4)
        assert not fresh._background


def test_a_matmul_epilogue_fuses_once_the_gemm_is_compiled(cpu, monkeypatch):
    rng = np.random.default_rng(4)
    a, w, bias = (rng.standard_normal(s).astype(np.float32) for s in ((120, 48), (48, 40), (40,)))
    want = np.maximum(a @ w + bias, 0)
    fused = []
    real = cpu.matmul_epilogue
    monkeypatch.setattr(cpu, "matmul_epilogue", lambda *args: fused.append(real(*args)) or fused[-1])
    f = ug.jit(lambda x, w, b: (x @ w + b).relu())
    args = [ug.tensor(v, device="cpu") for v in (a, w, bias)]
    with tiers.forced("auto"):
        for _ in range(2):
            np.testing.assert_allclose(f(*args).numpy(), want, rtol=1e-4, atol=1e-4)
        # numpy's product, then the epilogue kernel on tier 0 as a step of its own
        assert True not in fused and f.trace_count == 1
        assert tiers.wait(120)
        np.testing.assert_allclose(f(*args).numpy(), want, rtol=1e-4, atol=1e-4)
        assert fused[-1] is True   # the trace's steps compiled again, fused
        np.testing.assert_allclose(f(*args).numpy(), want, rtol=1e-4, atol=1e-4)
        assert fused[-1] is True and f.trace_count == 1


def _attention_reference(q, k, v, mask, causal, scale):
    s = q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2) * scale
    if mask is not None:
        s = s + mask
    if causal:
        s = np.where(np.triu(np.ones(s.shape[-2:], bool), 1), -np.inf, s)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)


@pytest.mark.parametrize("causal, masked", [(False, False), (True, False), (False, True)])
def test_attention_runs_on_numpy_until_its_module_is_compiled(cpu, monkeypatch, causal, masked):
    import ug_llvm.attention as attention
    on_numpy = []
    real = attention._numpy_attention
    monkeypatch.setattr(attention, "_numpy_attention", lambda *args: on_numpy.append(1) or real(*args))
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 3, 37, 16)).astype(np.float32) for _ in range(3))
    mask = rng.standard_normal((37, 37)).astype(np.float32) if masked else None
    if mask is not None:
        mask[4] = -np.inf   # a query that keeps no key: NaN on both tiers
    want = _attention_reference(q, k, v, mask, causal, 0.25)
    ts = [ug.tensor(x, device="cpu") for x in (q, k, v)]
    m = ug.tensor(mask, device="cpu") if mask is not None else None

    def f(q, k, v):
        return ug.nn.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal, scale=0.25)
    g = ug.jit(f)
    assert any(item.kind == "attention" for item in ug.schedule(f(*ts)).items)
    with tiers.forced("auto"):
        first = g(*ts).numpy()
        assert on_numpy == [1] and cpu.attentions._background
        assert tiers.wait(120)
        assert np.dtype(np.float32) in cpu.attentions._compiled
        second = g(*ts).numpy()
        assert on_numpy == [1]   # the module from now on
    for out in (first, second):
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
        assert np.isnan(out[..., 4, :]).all() == masked


def test_attention_tier_modes(cpu):
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((4, 50, 8)) for _ in range(3))   # float64
    ts = [ug.tensor(x, device="cpu") for x in (q, k, v)]
    want = _attention_reference(q, k, v, None, True, 8 ** -0.5)
    with tiers.forced("0"):
        np.testing.assert_allclose(ug.nn.scaled_dot_product_attention(*ts, is_causal=True).numpy(), want,
                                   rtol=1e-10, atol=1e-12)
        assert not cpu.attentions._compiled and not cpu.attentions._background
    with tiers.forced("1"):
        np.testing.assert_allclose(ug.nn.scaled_dot_product_attention(*ts, is_causal=True).numpy(), want,
                                   rtol=1e-10, atol=1e-12)
        assert np.dtype(np.float64) in cpu.attentions._compiled and not cpu.attentions._background


# --- a trace's kernels on tier 0 ------------------------------------------------------------


def _trace_of(f):
    (trace,) = [t for _, t in f.traces.items()]
    return trace


def _unique(rng):
    """A float no other test puts in a kernel (a kernel its own, not compiled yet)."""
    return float(rng.uniform(1.1, 1.9))


def test_a_trace_starts_on_tier0_and_gets_its_fast_replay_once_compiled(cpu):
    from ug_core.runtime import compile_cache
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 77)).astype(np.float32)
    c = _unique(rng)
    f = ug.jit(lambda x: (x * c).tanh() + x.sum(axis=1, keepdims=True) * 0.5)   # (one kernel)
    want = np.tanh(a * np.float32(c)) + a.sum(axis=1, keepdims=True) * 0.5
    x = ug.tensor(a, device="cpu")
    with tiers.forced("auto"):
        misses = compile_cache.misses
        np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-5, atol=1e-5)
        trace = _trace_of(f)
        assert trace.fast is None and trace.upgrade is not None   # tier 0: the general replay
        np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-5, atol=1e-5)   # (queues the compile)
        assert tiers.wait(120)
        assert compile_cache.misses > misses
        for _ in range(2):
            np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-5, atol=1e-5)
        assert trace.upgrade is None and trace.fast is not None and f.trace_count == 1


def test_tier1_precompile_and_large_traces_compile_before_the_first_run(cpu, monkeypatch):
    import importlib
    jit_trace = importlib.import_module("ug_core.jit.trace")   # (ug_core.jit the name is the function)
    rng = np.random.default_rng(8)
    a = rng.standard_normal((4, 50)).astype(np.float32)
    x = ug.tensor(a, device="cpu")
    c1, c2, c3 = (_unique(rng) for _ in range(3))
    with tiers.forced("1"):
        f = ug.jit(lambda x: (x * c1).sin() - 1)
        np.testing.assert_allclose(f(x).numpy(), np.sin(a * np.float32(c1)) - 1, rtol=1e-5, atol=1e-6)
        assert _trace_of(f).fast is not None and _trace_of(f).upgrade is None
    with tiers.forced("auto"):
        g = ug.jit(lambda x: (x * c2).cos() - 1)
        g.lower(x)   # ug.precompile: compiled ahead, so the first call runs compiled
        np.testing.assert_allclose(g(x).numpy(), np.cos(a * np.float32(c2)) - 1, rtol=1e-5, atol=1e-6)
        assert _trace_of(g).fast is not None and _trace_of(g).upgrade is None
        monkeypatch.setattr(jit_trace, "JIT_TIER_MAX_BYTES", 100)   # (the buffers here: 1600 bytes)
        h = ug.jit(lambda x: (x * c3).exp() - 1)
        np.testing.assert_allclose(h(x).numpy(), np.exp(a * np.float32(c3)) - 1, rtol=1e-5, atol=1e-6)
        assert _trace_of(h).fast is not None and _trace_of(h).upgrade is None


def test_a_tiered_trace_of_several_kernels_and_writes_keeps_its_values(cpu):
    rng = np.random.default_rng(9)
    a = rng.standard_normal((5, 40)).astype(np.float32)
    c = _unique(rng)
    state = ug.tensor(np.zeros(40, np.float32), device="cpu")

    def step(x):
        y = (x * c).exp()
        state.assign(state + y.sum(axis=0))   # a write to the enclosing scope
        return y / y.sum(axis=1, keepdims=True), y.max()
    f = ug.jit(step)
    x = ug.tensor(a, device="cpu")
    e = np.exp(a.astype(np.float64) * np.float32(c))
    total = np.zeros(40)
    with tiers.forced("auto"):
        for i in range(5):
            if i == 2:
                assert tiers.wait(120)
            soft, top = f(x)
            total += e.sum(axis=0)
            np.testing.assert_allclose(soft.numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5)
            np.testing.assert_allclose(top.numpy(), e.max(), rtol=1e-6)
            np.testing.assert_allclose(state.numpy(), total, rtol=1e-5)
        assert _trace_of(f).upgrade is None and f.trace_count == 1
