"""jit.Jit.load compiles outside the engine's lock: a module compiling in one thread (the tiers'
background gemm or attention module) does not hold up another thread's load, and two threads
loading the same module compile it once."""

import threading
import uuid

import pytest

import ug_llvm.jit as jitmod


def _module(symbol: str, value: int) -> str:
    j = jitmod.get_jit()
    return (f'target triple = "{j.triple}"\ntarget datalayout = "{j.data_layout}"\n'
            f"define i64 @{symbol}() {{\n  ret i64 {value}\n}}\n")


@pytest.fixture
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("UG_LLVM_DISK_CACHE", "0")


def _blocking_compile(monkeypatch, blocked_symbol: str) -> tuple[threading.Event, threading.Event]:
    """Make the compile of `blocked_symbol` wait for an event (the others compile as before);
    (started, release)."""
    j = jitmod.get_jit()
    started, release = threading.Event(), threading.Event()
    real = j.compiler.load

    def load(source, name, loader):
        if name == blocked_symbol:
            started.set()
            assert release.wait(30), "the blocked compile was never released"
        return real(source, name, loader)
    monkeypatch.setattr(j.compiler, "load", load)
    return started, release


def test_a_load_in_progress_does_not_block_another_modules_load(no_disk_cache, monkeypatch):
    j = jitmod.get_jit()
    slow, fast = f"ug_test_slow_{uuid.uuid4().hex}", f"ug_test_fast_{uuid.uuid4().hex}"
    started, release = _blocking_compile(monkeypatch, slow)
    got: dict[str, int] = {}
    thread = threading.Thread(target=lambda: got.setdefault("slow", j.load(_module(slow, 7), slow)))
    thread.start()
    try:
        assert started.wait(30)
        done = threading.Event()

        def other() -> None:
            got["fast"] = j.load(_module(fast, 11), fast)
            done.set()
        threading.Thread(target=other, daemon=True).start()
        # (before: the slow load held the engine's lock for its whole compile, and this waited)
        assert done.wait(30), "a second module's load waited for the first one's compile"
    finally:
        release.set()
        thread.join(30)
    import ctypes
    assert ctypes.CFUNCTYPE(ctypes.c_int64)(got["fast"])() == 11
    assert ctypes.CFUNCTYPE(ctypes.c_int64)(got["slow"])() == 7


def test_two_threads_loading_one_module_compile_it_once(no_disk_cache, monkeypatch):
    j = jitmod.get_jit()
    symbol = f"ug_test_once_{uuid.uuid4().hex}"
    started, release = _blocking_compile(monkeypatch, symbol)
    before = j.compiler.stats["compiled"]
    addrs: list[int] = []
    first = threading.Thread(target=lambda: addrs.append(j.load(_module(symbol, 5), symbol)))
    first.start()
    assert started.wait(30)
    second = threading.Thread(target=lambda: addrs.append(j.load(_module(symbol, 5), symbol)))
    second.start()
    release.set()
    first.join(30)
    second.join(30)
    assert len(addrs) == 2 and addrs[0] == addrs[1] != 0
    assert j.compiler.stats["compiled"] - before == 1


def test_a_failed_load_lets_a_later_one_try_again(no_disk_cache):
    j = jitmod.get_jit()
    symbol = f"ug_test_bad_{uuid.uuid4().hex}"
    with pytest.raises(jitmod.CompileError):
        j.load(f"define i64 @{symbol}() {{\n  ret i32 0\n}}\n", symbol)
    assert symbol not in j._loading
    import ctypes
    assert ctypes.CFUNCTYPE(ctypes.c_int64)(j.load(_module(symbol, 3), symbol))() == 3
