"""Tiered execution (ug_core.tiers): a new kernel on a host-memory device runs on numpy while a
background thread compiles it, then on the compiled program. The kit checks the values of both
tiers on every device (``--ug-tier 0`` and the default, compiled); these tests check the
mechanism: which tier runs when, the switch, the caches, the background thread, UG_DEBUG.

They run on "counting", a ref device under another name (ref's buffers are host memory, and
the ref device itself never tiers) whose compile counts and can be held, and on cpu (LLVM)."""

import threading

import numpy as np
import pytest

import ug_core as ug
from ug_core import runtime, tiers
from ug_core.ref import RefDevice


class Counting(RefDevice):
    """The ref device, with its compiles counted and held while `gate` is clear."""

    name = "counting"

    def __init__(self) -> None:
        super().__init__()
        self.compiled: list[str] = []
        self.ran: list[str] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail = False

    def compile(self, kernel):
        self.gate.wait(10)
        if self.fail:
            raise RuntimeError("no compiler here")
        self.compiled.append(kernel.name)
        return super().compile(kernel)

    def run(self, program, buffers):
        self.ran.append(program.name)
        super().run(program, buffers)


@pytest.fixture
def counting(compile_cache):
    spec = ug.DeviceSpec(name="counting", factory=Counting, plugin="test", version="1")
    ug.registry.register(spec)
    with tiers.forced("auto"):
        yield ug.registry.get("counting")
    assert tiers.wait(10)
    ug.registry.unregister_device("counting")


def _graph(x, c):
    return ((x * c).exp() + 1).sum(axis=1)


def _expected(a, c):
    return (np.exp(a * np.float32(c)) + 1).sum(axis=1)


def test_first_run_is_numpy_then_compiled_in_the_background(counting, close):
    a = np.random.default_rng(1).standard_normal((6, 5)).astype(np.float32)
    close(_graph(ug.tensor(a, device="counting"), 0.5), _expected(a, 0.5))
    assert counting.compiled == [] and counting.ran == []   # run 1: numpy, nothing compiled
    close(_graph(ug.tensor(a + 1, device="counting"), 0.5), _expected(a + 1, 0.5))
    assert tiers.wait(10)
    assert len(counting.compiled) == 1 and counting.ran == []   # run 2: numpy; the compile started
    close(_graph(ug.tensor(a + 2, device="counting"), 0.5), _expected(a + 2, 0.5))
    assert len(counting.ran) == 1   # run 3: the compiled program
    close(_graph(ug.tensor(a + 3, device="counting"), 0.5), _expected(a + 3, 0.5))
    assert len(counting.ran) == 2 and len(counting.compiled) == 1


def test_a_background_compile_never_blocks_the_caller(counting, close):
    counting.gate.clear()   # every compile waits
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for k in range(3):   # the second run queues the compile, which hangs; the runs go on, on numpy
        close(_graph(ug.tensor(a + k, device="counting"), 0.25), _expected(a + k, 0.25))
    assert tiers.stats()["pending"] == 1
    # another thread realizes meanwhile too (graph_lock is not held by the compile)
    out = []
    t = threading.Thread(target=lambda: out.append(_graph(ug.tensor(a, device="counting"), 0.75).numpy()))
    t.start()
    t.join(10)
    np.testing.assert_allclose(out[0], _expected(a, 0.75), rtol=1e-6)
    assert counting.ran == []
    counting.gate.set()
    assert tiers.wait(10)
    close(_graph(ug.tensor(a, device="counting"), 0.25), _expected(a, 0.25))
    assert len(counting.ran) == 1


def test_a_large_kernel_compiles_at_its_first_run(counting, monkeypatch, close):
    monkeypatch.setattr(tiers, "COMPILE_AT_ONCE_ELEMENTS", 16)
    a = np.ones((4, 8), np.float32)
    close(_graph(ug.tensor(a, device="counting"), 2.0), _expected(a, 2.0))   # numpy; compile queued
    assert tiers.wait(10) and len(counting.compiled) == 1
    monkeypatch.setattr(tiers, "MAX_ELEMENTS", 16)   # too big for numpy: compiled before it runs
    close(_graph(ug.tensor(a, device="counting"), 3.0), _expected(a, 3.0))
    assert len(counting.compiled) == 2 and len(counting.ran) == 1


def test_forced_tiers(counting, close):
    a = np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5)
    with tiers.forced("0"):
        for k in range(4):
            close(_graph(ug.tensor(a, device="counting"), 1.5), _expected(a, 1.5))
        assert tiers.wait(10) and counting.compiled == [] and counting.ran == []
    with tiers.forced("1"):
        close(_graph(ug.tensor(a, device="counting"), 1.5), _expected(a, 1.5))
        assert len(counting.compiled) == 1 and len(counting.ran) == 1


def test_tier0_in_place_writes_scans_and_views(counting, close):
    with tiers.forced("0"):
        a = np.arange(24, dtype=np.float32).reshape(4, 6)
        x = ug.tensor(a.copy(), device="counting")
        x[1:3, ::2] = x[1:3, ::2] * 10
        b = a.copy()
        b[1:3, ::2] *= 10
        close(x, b)
        close(x.cumsum(axis=1), np.cumsum(b, axis=1))
        close(x.T[::-1].max(axis=0), b.T[::-1].max(axis=0))
        assert counting.compiled == [] and counting.ran == []


def test_a_failed_background_compile_warns_and_stays_on_numpy(counting, close):
    counting.fail = True
    a = np.full((2, 3), 0.5, np.float32)
    for _ in range(2):
        close(_graph(ug.tensor(a, device="counting"), 1.25), _expected(a, 1.25))
    assert tiers.wait(10)
    with pytest.warns(RuntimeWarning, match="keeps running on numpy"):
        close(_graph(ug.tensor(a, device="counting"), 1.25), _expected(a, 1.25))
    close(_graph(ug.tensor(a, device="counting"), 1.25), _expected(a, 1.25))
    assert counting.ran == []


def test_debug_says_which_tier_ran(counting, monkeypatch, capsys):
    monkeypatch.setenv("UG_DEBUG", "1")
    a = np.ones((3, 3), np.float32)
    for _ in range(2):
        _graph(ug.tensor(a, device="counting"), 0.125).numpy()
    assert tiers.wait(10)
    _graph(ug.tensor(a, device="counting"), 0.125).numpy()
    err = capsys.readouterr().err
    assert err.count("tier 0 (numpy)") == 2 and "compiling in the background" in err
    assert "tier compile" in err
    last = err[err.rindex("schedule:"):]   # the third run: compiled
    assert "[tier 1: compiled]" in last and "tier 0" not in last


def test_jit_traces_start_on_tier0_and_compile_from_their_second_run(counting, close):
    # (the trace's move to compiled steps and its fast replay: tests/test_jit_tiers.py)
    f = ug.jit(lambda x: (x * 0.375).exp() + 1)
    a = np.ones(5, np.float32)
    x, want = ug.tensor(a, device="counting"), np.exp(a * np.float32(0.375)) + 1
    close(f(x), want)
    assert counting.compiled == [] and counting.ran == []
    close(f(x), want)
    assert tiers.wait(10)
    close(f(x), want)
    assert len(counting.compiled) == 1 and len(counting.ran) == 1
    with tiers.forced("1"):   # compiled before the first run
        g = ug.jit(lambda x: (x + 2).log())
        close(g(x), np.log(a + 2))
        assert len(counting.compiled) == 2 and len(counting.ran) == 2


def test_on_cpu_both_tiers_agree():
    if "cpu" not in ug.devices():
        pytest.skip("no cpu device (ug-llvm) here")
    rng = np.random.default_rng(7)
    a = rng.standard_normal((33, 17)).astype(np.float32)
    c = float(rng.uniform(0.1, 0.9))   # a constant no other test compiled

    def f(x):
        return (x * c).softmax(1).cumsum(1) + x.max(0)

    with tiers.forced("auto"):
        first = f(ug.tensor(a, device="cpu")).numpy()
        misses = runtime.compile_cache.misses
        f(ug.tensor(a, device="cpu")).numpy()   # run 2 queues the compiles
        assert tiers.wait(60)
        assert runtime.compile_cache.misses == misses   # (the background compile counts no second miss)
        compiled = f(ug.tensor(a, device="cpu")).numpy()
    with tiers.forced("1"):
        reference = f(ug.tensor(a, device="cpu")).numpy()
    np.testing.assert_allclose(first, reference, rtol=2e-6, atol=2e-6)
    np.testing.assert_array_equal(compiled, reference)


def _cpu():
    if "cpu" not in ug.devices():
        pytest.skip("no cpu device (ug-llvm) here")
    return ug.registry.get("cpu")


def test_on_cpu_a_matmul_epilogue_is_fused_once_compiled(monkeypatch, compile_cache):
    dev = _cpu()
    calls = []
    real = dev.matmul_epilogue
    monkeypatch.setattr(dev, "matmul_epilogue", lambda *args: calls.append(real(*args)) or calls[-1])
    rng = np.random.default_rng(11)
    a, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((200, 48), (48, 64), (64,)))
    c = float(rng.uniform(1, 2))   # a kernel no other test compiled

    def f():
        return (ug.tensor(a, device="cpu") @ ug.tensor(w, device="cpu") + ug.tensor(b, device="cpu")) * c

    with tiers.forced("auto"):
        for _ in range(2):   # numpy epilogue after the gemm; no replay kept, the compile queued
            np.testing.assert_allclose(f().numpy(), (a @ w + b) * np.float32(c), rtol=1e-4, atol=1e-4)
        assert calls == [] and len(compile_cache.schedules) == 0
        assert tiers.wait(60)
        np.testing.assert_allclose(f().numpy(), (a @ w + b) * np.float32(c), rtol=1e-4, atol=1e-4)
        assert calls == [True] and len(compile_cache.schedules) == 1   # fused, and kept


def test_on_cpu_a_small_matmul_kernel_is_tiered_and_cached():
    _cpu()
    rng = np.random.default_rng(12)
    k = int(rng.integers(20, 40))   # a shape no other test compiled
    a, b = rng.standard_normal((6, k)), rng.standard_normal((k, 5))
    with tiers.forced("auto"):
        programs = len(runtime.compile_cache.programs)
        for _ in range(2):
            np.testing.assert_allclose((ug.tensor(a, device="cpu") @ ug.tensor(b, device="cpu")).numpy(), a @ b,
                                       rtol=1e-12)
        assert tiers.wait(60)
        assert len(runtime.compile_cache.programs) == programs + 1   # compiled in the background, into the cache
        np.testing.assert_allclose((ug.tensor(a, device="cpu") @ ug.tensor(b, device="cpu")).numpy(), a @ b,
                                   rtol=1e-12)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_fork_waits_for_the_compile_in_progress_and_the_child_runs(counting):
    import os
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    counting.gate.clear()   # the parent's compile hangs until the timer below
    for _ in range(2):
        _graph(ug.tensor(a, device="counting"), 0.625).numpy()
    threading.Timer(0.2, counting.gate.set).start()   # (the fork waits for the compile in progress)
    pid = os.fork()
    if pid == 0:   # the child: a new worker (none started), LLVM's lock not held by a lost thread
        ok = False
        try:
            for _ in range(3):
                got = _graph(ug.tensor(a, device="counting"), 0.625).numpy()
            ok = tiers.wait(10) and np.allclose(got, _expected(a, 0.625))
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert tiers.wait(10)
