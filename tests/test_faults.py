"""ug_core.faults: critical sections that Ctrl-C cannot cut (defer_interrupts, checkpoint), and
the fork handlers (the graph lock taken over a fork, Device.after_fork, the registry making a
new device in the child). What they protect is tested on every device in
ug_core/testing/test_faults.py; these test the mechanisms themselves, on the ref device."""

from __future__ import annotations

import _thread
import os
import pickle
import signal
import threading
import time
from typing import Any, Callable

import numpy as np
import pytest

import ug_core as ug
from ug_core import faults
from ug_core.graph import graph_lock
from ug_core.plugins import registry
from ug_core.ref import RefDevice
from ug_core.runtime import compile_cache


@pytest.fixture
def default_sigint():
    """SIGINT's handler is Python's (KeyboardInterrupt), as in a program run from a terminal."""
    assert threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _bytecodes() -> int:
    """Some Python work: a signal's handler runs between two of its bytecodes."""
    total = 0
    for i in range(2000):
        total += i
    return total


def test_an_interrupt_inside_is_raised_at_the_end(default_sigint):
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with faults.defer_interrupts:
            _thread.interrupt_main()   # SIGINT, as a terminal sends it
            _bytecodes()
            reached.append("the end of the section")
    assert reached == ["the end of the section"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert not faults.interrupt_pending()


def test_sections_nest_and_only_the_outermost_raises(default_sigint):
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with faults.defer_interrupts:
            with faults.defer_interrupts:
                _thread.interrupt_main()
                _bytecodes()
            reached.append("after the inner section")
            faults.checkpoint()   # the outermost level: raises here
            reached.append("after the checkpoint")
    assert reached == ["after the inner section"]


def test_a_checkpoint_inside_a_nested_section_does_not_raise(default_sigint):
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with faults.defer_interrupts:
            with faults.defer_interrupts:
                _thread.interrupt_main()
                _bytecodes()
                faults.checkpoint()   # (would cut the outer section in two)
                reached.append("past the inner checkpoint")
            reached.append("end")
    assert reached == ["past the inner checkpoint", "end"]


def test_no_interrupt_no_exception_and_the_handler_is_put_back(default_sigint):
    with faults.defer_interrupts:
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        faults.checkpoint()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_users_handler_is_called_once_after_the_section(default_sigint):
    calls: list[str] = []

    def handler(signum: int, frame: Any) -> None:
        calls.append(f"handled {signum}")

    signal.signal(signal.SIGINT, handler)
    with faults.defer_interrupts:
        _thread.interrupt_main()
        _bytecodes()
        assert calls == []
    assert calls == [f"handled {int(signal.SIGINT)}"]
    assert signal.getsignal(signal.SIGINT) is handler


def test_an_ignored_sigint_stays_ignored(default_sigint):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with faults.defer_interrupts:
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        _thread.interrupt_main()   # (does nothing: SIGINT is ignored)
        _bytecodes()
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def test_other_threads_leave_the_handler_alone(default_sigint):
    seen: list[Any] = []

    def other() -> None:
        with faults.defer_interrupts:
            seen.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == [signal.default_int_handler]


def test_ctrl_c_while_a_buffer_is_freed_is_not_lost(default_sigint):
    """An exception raised in __del__ is only printed: Buffer.__del__ delivers SIGINT again."""
    device = registry.get("ref")

    class Freeing:
        def allocate(self, nbytes: int) -> Any:
            return device.allocate(nbytes)

        def free(self, handle: Any) -> None:
            raise KeyboardInterrupt   # (as if SIGINT's handler ran here)

    buffer = ug.Buffer(device, 4, np.dtype(np.float32))
    buffer.device = Freeing()  # type: ignore[assignment]
    with pytest.raises(KeyboardInterrupt):
        del buffer
        time.sleep(5)   # (the GIL for the thread that delivers it again; the interrupt ends the wait)


# --- fork ----------------------------------------------------------------------------------

def _fork(work: Callable[[], Any], timeout: float = 60.0) -> Any:
    """work() in a forked child; its result (pickled through a pipe). Fails on a hang."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            try:
                result: Any = ("value", work())
            except BaseException as e:
                result = ("raised", f"{type(e).__name__}: {e}")
            os.write(write, pickle.dumps(result))
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    deadline = time.monotonic() + timeout
    while os.waitpid(pid, os.WNOHANG)[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"the forked child hung for {timeout} s")
        time.sleep(0.005)
    with os.fdopen(read, "rb") as pipe:
        kind, result = pickle.loads(pipe.read())
    assert kind == "value", result
    return result


def test_a_device_that_does_not_survive_a_fork_is_made_again_in_the_child():
    made: list[int] = []

    class Unforkable(RefDevice):
        def __init__(self) -> None:
            super().__init__()
            made.append(os.getpid())

        def after_fork(self, parent: int) -> bool:
            self.forked_from = parent
            return False

    registry.register(ug.DeviceSpec(name="unforkable", factory=Unforkable, plugin="test"))
    try:
        x = (ug.tensor(np.arange(3, dtype=np.float32), device="unforkable") * 2).realize()
        parent_device, generation = registry.get("unforkable"), registry.generation
        assert any(key[0] == "unforkable" for key in compile_cache.programs)

        def child() -> tuple[bool, int, bool, bool, list[float]]:
            new = registry.get("unforkable")
            return (new is parent_device, parent_device.forked_from, registry.generation > generation,
                    any(key[0] == "unforkable" for key in compile_cache.programs),
                    (ug.tensor(np.arange(3, dtype=np.float32), device="unforkable") + 1).numpy().tolist())

        same, forked_from, bumped, programs_kept, value = _fork(child)
        assert not same and forked_from == os.getpid() and bumped and not programs_kept
        assert value == [1.0, 2.0, 3.0]
        assert registry.get("unforkable") is parent_device   # the parent's is untouched
        np.testing.assert_array_equal(x.numpy(), [0, 2, 4])
    finally:
        registry.unregister_device("unforkable")


def test_a_fork_waits_for_a_realize_in_another_thread():
    """The graph lock is taken before a fork: the child never starts with a realize (or a
    write) half done by a thread it does not have, and the lock is free there."""
    held, release = threading.Event(), threading.Event()

    def realizing() -> None:
        with graph_lock:
            held.set()
            release.wait(10)

    t = threading.Thread(target=realizing)
    t.start()
    held.wait(10)
    threading.Timer(0.3, release.set).start()
    start = time.monotonic()
    free_in_child = _fork(lambda: graph_lock.acquire(timeout=5))
    waited = time.monotonic() - start
    t.join()
    assert free_in_child and waited >= 0.25, waited
