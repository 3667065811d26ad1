"""Faults from outside the program: Ctrl-C in the middle of a realize, os.fork(), threads.

After any of them a device must give right results or a clear error, never wrong ones:

* Ctrl-C: a timer thread sends SIGINT to the main thread at a random moment of a realize (or of
  a ug.jit replay that writes a tensor) of several kernels with in-place writes; the tensors must
  keep the values of the program (numpy's replay of it), whether the interrupt cut the realize or
  not. Before, an interrupt left a kernel's in-place write recorded nowhere (computed again later,
  on every device) and Vulkan's fence signalled (a later wait returned before the work ran).
* fork: a child made by a multiprocessing 'fork' pool, or by os.fork, gets a working device
  (ref, cpu, c, vulkan: a new one where the parent's does not survive the fork) or
  DeviceUnavailableError naming os.fork() and 'spawn'; a hang fails the test (a timeout), since
  before, the child waited for Vulkan's fence forever.
* threads: four threads writing their own rows of one tensor lose none of the writes; four
  threads realizing one lazy in-place write compute it once.
"""

from __future__ import annotations

import _thread
import gc
import multiprocessing
import os
import pickle
import random
import signal
import sys
import threading
import time
import traceback
from typing import Any, Callable

import numpy as np
import pytest

import ug_core as ug
from ug_core.plugins import registry

# --- Ctrl-C ---------------------------------------------------------------------------------

N = 1 << 14


def _interrupt_during(fn: Callable[[], Any], delay: float) -> tuple[bool, bool]:
    """Run fn() while a timer thread sends SIGINT to this (the main) thread after `delay` s.
    Returns (interrupted, cut): KeyboardInterrupt came, and it came before fn returned. The
    signal is waited for inside the `try`, so it never reaches the test runner."""
    main = threading.get_ident()
    fired = threading.Event()

    def fire() -> None:
        signal.pthread_kill(main, signal.SIGINT)
        fired.set()

    timer = threading.Timer(delay, fire)
    finished = False
    try:
        timer.start()
        fn()
        finished = True
        fired.wait()
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:   # the handler runs at the next bytecode: here
            time.sleep(0.0005)
    except KeyboardInterrupt:
        timer.join()
        return True, not finished
    timer.join()
    return False, False


def _start(device: str) -> tuple[ug.Tensor, ug.Tensor, np.ndarray, np.ndarray]:
    na = (np.arange(N) % 1021).astype(np.float32)
    nb = (np.arange(N) % 4099).astype(np.int32)
    return ug.tensor(na, device=device), ug.tensor(nb, device=device), na.copy(), nb.copy()


def _writes(a: Any, b: Any, xp: Any) -> None:
    """Several kernels of writes, in place where they can be (values stay exact in float32)."""
    a[...] = (a * 3 + 1) % 1021
    b[::2] = (b[::2] + xp.astype(a[::2], xp.int32)) % 4099
    s = xp.sum(a % 7)
    a[: N // 2] = (a[: N // 2] + s % 5) % 1021
    b[...] = (b + 1) % 4099


def _jit_writes(a: ug.Tensor) -> None:
    a.assign((a * 5 + 2) % 1021)


def _np_jit_writes(a: np.ndarray) -> np.ndarray:
    return ((a * 5 + 2) % 1021).astype(np.float32)


@pytest.mark.slow
def test_ctrl_c_during_a_realize_leaves_every_result_right(device, rng):
    assert threading.current_thread() is threading.main_thread(), "signals reach the main thread only"
    old = signal.signal(signal.SIGINT, signal.default_int_handler)   # (what Python installs: KeyboardInterrupt)
    # the timer thread needs the GIL to send the signal: by default the main thread lends it
    # every 5 ms, and the interrupts came after most realizes had ended
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    # no cyclic collections meanwhile: an interrupt landing in a gc callback (hypothesis
    # registers one) is only printed, and lost (ug makes no reference cycles to collect)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        a, b, na, nb = _start(device)
        step = ug.jit(_jit_writes)
        step(a)
        na = _np_jit_writes(na)
        # how long a realize of the writes takes here, warm: the interrupts land in that span
        # (the median of three, shortened for the timer thread's own start)
        spans = []
        for _ in range(4):
            _writes(a, b, ug)
            _writes(na, nb, np)
            start = time.perf_counter()
            ug.realize(a, b)
            spans.append(time.perf_counter() - start)
        span = 0.7 * sorted(spans[1:])[1]
        picks = random.Random(int(rng.integers(1 << 30)))
        cut = interrupted = 0
        fresh = rng.standard_normal(257).astype(np.float32)
        for it in range(40):
            _writes(a, b, ug)
            _writes(na, nb, np)
            got, was_cut = _interrupt_during(lambda: ug.realize(a, b), picks.uniform(0, span))
            interrupted += got
            cut += was_cut
            # a new computation is right at once (the check: 7 of 18 were wrong on vulkan)
            np.testing.assert_array_equal((ug.tensor(fresh, device=device) * 2).numpy(), fresh * 2)
            if it % 4 == 0:   # a replay that writes: done whole or not at all
                before, after = na, _np_jit_writes(na)
                got, was_cut = _interrupt_during(lambda: step(a), picks.uniform(0, span / 4))
                interrupted += got
                value = a.numpy()
                if not got:
                    np.testing.assert_array_equal(value, after)
                assert np.array_equal(value, after) or np.array_equal(value, before), \
                    f"iteration {it}: a ug.jit replay cut by Ctrl-C left part of its write"
                na = after if np.array_equal(value, after) else before
            if it % 8 == 0:
                np.testing.assert_array_equal(a.numpy(), na)
                np.testing.assert_array_equal(b.numpy(), nb)
        np.testing.assert_array_equal(a.numpy(), na)
        np.testing.assert_array_equal(b.numpy(), nb)
        # the test tested something: most interrupts came while a realize ran
        assert interrupted >= 40 and cut >= 10, f"{interrupted} interrupts raised of 50, {cut} while a realize ran"
    finally:
        if gc_was_enabled:
            gc.enable()
        sys.setswitchinterval(old_interval)
        signal.signal(signal.SIGINT, old)


def test_a_realize_cut_after_any_step_leaves_every_result_right(device, monkeypatch):
    """Ctrl-C at each step boundary in turn, as a terminal sends it (_thread.interrupt_main:
    SIGINT's handler, held by the realize's critical section and raised after that step), in a
    realize of both tensors and of `a` alone (while `b` still reads a's older values).
    Deterministic, where the timer's test above hits the boundaries by chance. A cut after an
    in-place write of `a` whose buffer the next write takes computed that write twice, on every
    device; a cut between a partial write's copy of the old value and the write itself took
    the copy for the written value."""
    steps = sys.modules["ug_core.steps"]
    real = steps.run_dropping
    cut_after: list[int] = [0]
    steps_seen: list[int] = [0]

    def cutting(runs: list[Any], last_use: Any, bufs: Any, drop: Any, *rest: Any) -> None:
        k = cut_after[0]
        steps_seen[0] = len(runs)
        if 1 <= k <= len(runs):
            def then_ctrl_c(bufs: Any, run: Any = runs[k - 1]) -> None:
                run(bufs)
                _thread.interrupt_main()
            runs = runs[:k - 1] + [then_ctrl_c] + runs[k:]
        real(runs, last_use, bufs, drop, *rest)

    monkeypatch.setattr(steps, "run_dropping", cutting)
    for both in (True, False):
        k = 1
        while True:
            a, b, na, nb = _start(device)
            cut_after[0] = 0
            _writes(a, b, ug)
            _writes(na, nb, np)
            ug.realize(a, b)
            _writes(a, b, ug)
            _writes(na, nb, np)
            targets = (a, b) if both else (a,)
            cut_after[0] = k
            with pytest.raises(KeyboardInterrupt):
                ug.realize(*targets)
            cut_after[0] = 0
            n_steps = steps_seen[0]
            what = f"after a realize of {'a and b' if both else 'a'} cut after step {k} of {n_steps}"
            np.testing.assert_array_equal(a.numpy(), na, err_msg=f"a {what}")
            np.testing.assert_array_equal(b.numpy(), nb, err_msg=f"b {what}")
            _writes(a, b, ug)
            _writes(na, nb, np)
            ug.realize(*targets)
            np.testing.assert_array_equal(a.numpy(), na, err_msg=f"a, one realize {what}")
            np.testing.assert_array_equal(b.numpy(), nb, err_msg=f"b, one realize {what}")
            if k >= n_steps:
                break
            k += 1
        assert n_steps >= 4, n_steps   # (the writes are several kernels: the cuts fell between them)


def test_an_error_after_an_in_place_write_keeps_the_write_recorded(device):
    """A realize cut short by an error (here a custom op's) records the steps that ran: x's write
    went in place into its buffer, and left lazy, x computed it again on the written value."""
    x = ug.tensor(np.arange(6.0, dtype=np.float32), device=device).realize()
    x.assign(x * 2 + 1)

    def fails(out: np.ndarray, a: np.ndarray) -> None:
        raise RuntimeError("a custom op's error")

    y = ug.custom(fails, [x], (6,), np.float32)
    with pytest.raises(RuntimeError, match="custom op's error"):
        ug.realize(x, y)
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0, dtype=np.float32) * 2 + 1)
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0, dtype=np.float32) * 2 + 1)


# --- fork -----------------------------------------------------------------------------------

# what a forked child reads from its parent (set before the fork, copied by it)
_INHERITED: dict[str, Any] = {}
CHILD_TIMEOUT = 120.0   # seconds: a child blocked (in vkWaitForFences, say) fails the test


def _outcome(fn: Callable[[], np.ndarray]) -> tuple[str, Any]:
    try:
        return "value", fn()
    except Exception as e:
        return "error", f"{type(e).__name__}: {e}"


def _child_work(seed: int) -> dict[str, tuple[str, Any]]:
    """In a forked child: new tensors on the device, the parent's tensors, and a jit function."""
    device = _INHERITED["device"]
    data = np.random.default_rng(seed).standard_normal(100).astype(np.float32)
    inherited = _INHERITED["tensor"]
    return {
        "new": _outcome(lambda: (ug.tensor(data, device=device) * 3 + 1).numpy()),
        "jit": _outcome(lambda: _INHERITED["jit"](ug.tensor(data, device=device)).numpy()),
        "inherited": _outcome(lambda: (inherited * 2).numpy()),
        "new again": _outcome(lambda: ug.sum(ug.tensor(data, device=device)).numpy()),
        # long enough for the host sort's threads (their pool is the parent's: a new one here)
        "sort": _outcome(lambda: ug.sort(ug.tensor(_INHERITED["long"], device=device)).numpy()),
    }


def _check_child(device: str, seed: int, results: dict[str, tuple[str, Any]]) -> None:
    data = np.random.default_rng(seed).standard_normal(100).astype(np.float32)
    expected = {"new": data * 3 + 1, "jit": data * 2 - 1, "inherited": _INHERITED["value"] * 2,
                "new again": data.sum(), "sort": np.sort(_INHERITED["long"])}
    for what, (kind, got) in results.items():
        if kind == "value":
            np.testing.assert_allclose(got, expected[what], rtol=1e-5, atol=1e-5, err_msg=f"{what} in a forked child")
            continue
        # the allowed error: clear, naming the cause and the way out
        assert got.startswith("DeviceUnavailableError") and "fork" in got and "spawn" in got, (what, got)
        # the built-in devices work in a child: the parent's tensors too where the memory is the host's
        if device in ("ref", "cpu", "c") or (device == "vulkan" and what != "inherited"):
            raise AssertionError(f"{what} failed in a forked child of {device}: {got}")


def _use_in_parent(device: str) -> None:
    x = ug.tensor(np.linspace(-1, 1, 100, dtype=np.float32), device=device)
    y = (x * 4).sum() + x          # several kernels, the device's queue and pool in use
    jitted = ug.jit(lambda t: t * 2 - 1)
    jitted(x).numpy()
    long = np.random.default_rng(5).standard_normal(1 << 17).astype(np.float32)
    np.testing.assert_array_equal(ug.sort(ug.tensor(long[::-1].copy(), device=device)).numpy(), np.sort(long))
    _INHERITED.update(device=device, tensor=y.realize(), value=y.numpy(), jit=jitted, long=long)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")   # (3.12: forking with threads)
def test_a_fork_pool_child_gets_a_working_device_or_a_clear_error(device):
    _use_in_parent(device)
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            results = pool.map_async(_child_work, [1, 2, 3]).get(timeout=CHILD_TIMEOUT)
        for seed, result in zip([1, 2, 3], results):
            _check_child(device, seed, result)
        # the parent's device is as it was
        np.testing.assert_allclose((_INHERITED["tensor"] * 2).numpy(), _INHERITED["value"] * 2, rtol=1e-6)
    finally:
        _INHERITED.clear()


def _in_forked_child(work: Callable[[], Any], what: str) -> Any:
    """work() in a child made by os.fork(), its result pickled back through a pipe. A child
    that has not ended after CHILD_TIMEOUT s is killed and the test fails (it never hangs the
    run); an exception in the child fails the test with its traceback."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: report through the pipe, never return into pytest
        code = 1
        try:
            os.close(read)
            try:
                result: Any = ("value", work())
            except BaseException:
                result = ("raised", traceback.format_exc())
            with os.fdopen(write, "wb") as out:
                pickle.dump(result, out)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    data = b""
    deadline = time.monotonic() + CHILD_TIMEOUT
    with os.fdopen(read, "rb") as pipe:
        os.set_blocking(pipe.fileno(), False)
        while True:
            data += pipe.read() or b""
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                data += pipe.read() or b""
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise AssertionError(f"a child forked after {what} hung for {CHILD_TIMEOUT} s")
            time.sleep(0.01)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"the child ended with status {status}"
    kind, result = pickle.loads(data)
    assert kind == "value", f"the forked child raised:\n{result}"
    return result


@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_a_bare_fork_child_gets_a_working_device_or_a_clear_error(device):
    _use_in_parent(device)
    try:
        _check_child(device, 7, _in_forked_child(lambda: _child_work(7), f"{device} was used"))
        np.testing.assert_allclose((_INHERITED["tensor"] * 2).numpy(), _INHERITED["value"] * 2, rtol=1e-6)
    finally:
        _INHERITED.clear()


@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_a_forked_childs_device_objects_are_new_or_the_same_working_ones(device):
    """After the fork hooks ran in a child, the registry's device for the name works: the
    parent's object where it survives a fork, else a new one (registry.forget_created)."""
    _use_in_parent(device)
    parent_device = registry.get(device)

    def work() -> tuple[bool, np.ndarray]:
        same = registry.get(device) is parent_device
        return same, (ug.tensor(np.arange(5, dtype=np.float32), device=device) + 1).numpy()
    try:
        same, value = _in_forked_child(work, f"{device} was used")
        np.testing.assert_array_equal(value, np.arange(5, dtype=np.float32) + 1)
        if device in ("ref", "cpu", "c"):
            assert same, f"the {device} device works across a fork: the child keeps its object"
        if device == "vulkan":
            assert not same, "the parent's Vulkan device does not work in a forked child: a new one is made"
    finally:
        _INHERITED.clear()


# --- threads --------------------------------------------------------------------------------

THREADS = 4


def _run_threads(target: Callable[[int], None]) -> None:
    """target(t) on THREADS threads started together, switching as often as CPython lets them
    (a race window of microseconds is hit within a few hundred writes); their errors re-raised."""
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def run(t: int) -> None:
        try:
            barrier.wait()
            target(t)
        except BaseException as e:
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(old)
    if errors:
        raise errors[0]


@pytest.mark.parametrize("also", ["reads", "in-place operators", "both"])
def test_threads_writing_their_own_rows_of_one_tensor_lose_no_write(device, also):
    # ("both": reads realizing x while other threads' `x[i] += 2` build on the node of x they just
    # read lost or doubled those writes when the realizes wrote in place: see graph.threads)
    rows, cols = 64, 8
    for trial in range(3):
        x = ug.zeros((rows, cols), dtype=np.float32, device=device)
        if trial == 1:
            x.realize()

        def write_rows(t: int) -> None:
            for i in range(t, rows, THREADS):
                x[i] = float(i + 1)
                if i % 3 == 0:
                    x[i, 1:3] = ug.full((2,), float(-i), device=device)
                if i % 5 == 0 and also != "in-place operators":   # a read (a realize) of the tensor the other threads write
                    row = x[i].numpy()
                    assert row[0] == i + 1 and row[-1] == i + 1, (i, row)
                    assert x.numpy()[i, 0] == i + 1
                if i % 7 == 0 and also != "reads":   # read-modify-writes of its own row
                    x[i] += 2.0
                    x[i] -= 2.0
        _run_threads(write_rows)
        want = np.repeat(np.arange(1, rows + 1, dtype=np.float32)[:, None], cols, 1)
        want[::3, 1:3] = -np.arange(0, rows, 3, dtype=np.float32)[:, None]
        np.testing.assert_array_equal(x.numpy(), want, err_msg=f"trial {trial}: writes from threads were lost")


def test_threads_realizing_one_in_place_write_compute_it_once(device):
    for trial in range(6):
        w = ug.tensor(np.zeros(1 << 12, np.float32), device=device).realize()
        for _ in range(3):
            w.assign(w + 1)   # lazy, and in place when realized: realized twice at once, it was added twice
        got: list[Any] = [None] * THREADS

        def read(t: int) -> None:
            own = ug.tensor(np.full(16, t, np.float32), device=device)
            for _ in range(4):
                own.assign(own * 2 + 1)
            got[t] = (w.numpy(), own.numpy())
        _run_threads(read)
        for t, (seen, own) in enumerate(got):
            np.testing.assert_array_equal(seen, np.full(1 << 12, 3, np.float32), err_msg=f"trial {trial}, thread {t}")
            np.testing.assert_array_equal(own, np.full(16, t * 16 + 15, np.float32))
        np.testing.assert_array_equal(w.numpy(), np.full(1 << 12, 3, np.float32))
