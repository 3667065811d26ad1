"""Tiered execution: a new kernel runs at once with numpy while LLVM compiles it in the background.

Compiling a kernel costs tens of milliseconds of LLVM; a library built on the array API
(scikit-learn, SciPy) issues many small, differently shaped ops, each run once or a few times,
so compiling each before its first run costs far more than running it. On a device whose
memory is host memory (cpu, c), a kernel's runs start on tier 0: the `ref` device's vectorized
numpy evaluation of the same kernel IR (ug_core.ref.run_kernel), on the device's own buffers
seen as numpy arrays without a copy (Device.host_view). From its second run on (at once for a
kernel of many elements) a background thread compiles it; the first run after the compile
finished switches the kernel to tier 1, the compiled program, for good. The ref device is the
oracle of the conformance kit, so both tiers compute the same values (numpy's own math
functions may differ from the backend's in the last bits, within the kit's tolerances).

What stays compiled before its first run (tier 1 at once): kernels on a device without host
memory, kernels of more than MAX_ELEMENTS elements (numpy would take as long as the compile),
scatter kernels of more than MAX_SCATTER_ELEMENTS (ref combines them row by row in Python),
and the kernels of a `ug.jit` trace whose buffers are large (jit/trace.py: a tiered trace
keeps its schedule until its kernels are compiled, then moves to its fast replay). A device's
own compiled code may start on numpy too (`in_background`: the cpu device's gemm and
attention modules).

`UG_TIER` (or `set_mode`/`forced`) chooses: "auto" (the default, as above), "0" (every kernel
that qualifies runs on numpy and is never compiled: the conformance kit's check of tier 0)
or "1" (compile before the first run, as without tiers). `UG_DEBUG=1` logs the tier of every
tiered kernel run and the background compiles.

The background thread never takes graph_lock and writes only the compile cache (a cache.Cache,
whose put takes its own lock) and its task's result; the caller never waits for it. (LLVM runs
one module at a time in a process, llvmlite's lock: a caller compiling something of its own
meanwhile, a matmul's gemm, waits for the module being compiled, not for the queue.)
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import warnings
import weakref
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Hashable, Iterator

from .cache import Cache
from .device import Buffer, Device, Program
from .kernel_ir import Kernel
from .ref import run_kernel as run_on_numpy
from .view import prod

MODES = ("auto", "0", "1")

# a kernel of more elements than this waits for its compile (numpy's passes over them would
# take about as long as LLVM)
MAX_ELEMENTS = 1 << 22
# ref runs a scatter row by row in Python
MAX_SCATTER_ELEMENTS = 1 << 12
# a kernel starts compiling on its COMPILE_AFTER-th run (a kernel run once, as most of a test
# suite's are, never costs a compile), or on its first when it has this many elements (numpy
# is slow enough on it that the compiled program pays back soon)
COMPILE_AFTER = 2
COMPILE_AT_ONCE_ELEMENTS = 1 << 16

_forced: str | None = None
# called when set_mode changes the mode: the runtime drops its kept schedules (registered by the
# runtime, which imports this module)
_on_change: list[Callable[[], None]] = []


def on_mode_change(fn: Callable[[], None]) -> None:
    """Call fn() whenever set_mode changes the mode."""
    _on_change.append(fn)


def mode() -> str:
    """The tier mode: set_mode's, else $UG_TIER's ("auto" when unset)."""
    if _forced is not None:
        return _forced
    value = os.environ.get("UG_TIER", "").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"UG_TIER={value!r}: expected one of {', '.join(MODES)}")
    return value


def set_mode(value: str | None) -> None:
    """Force the tier mode ("auto", "0" or "1"; None: $UG_TIER again). Graphs realized before
    keep their steps (compile cache's schedules) in the tier they chose: those are dropped."""
    global _forced
    if value is not None and value not in MODES:
        raise ValueError(f"tier mode {value!r}: expected one of {', '.join(MODES)}")
    _forced = value
    for fn in _on_change:
        fn()


@contextmanager
def forced(value: str) -> Iterator[None]:
    """set_mode(value) for a `with` block, then the mode before it."""
    before = _forced
    set_mode(value)
    try:
        yield
    finally:
        set_mode(before)


def elements(kernel: Kernel) -> int:
    """The elements a kernel's largest phase iterates over."""
    return max((prod(shape) for _, shape, _ in kernel.phases()), default=0)


# devices whose host_view said None (a kit device over an allocator of device memory): their
# kernels compile before they run from then on
_not_host: "weakref.WeakSet[Device]" = weakref.WeakSet()


def qualifies(device: Device, kernel: Kernel, forced_zero: bool) -> bool:
    """Whether the kernel may run on tier 0 on this device (see the module docstring)."""
    if device.name == "ref" or type(device).host_view is Device.host_view or device in _not_host:
        return False
    if forced_zero:
        return True
    n = elements(kernel)
    if n > MAX_ELEMENTS:
        return False
    return n <= MAX_SCATTER_ELEMENTS or all(s.scatter is None for s in kernel.stores)


def run_numpy(device: Device, kernel: Kernel, buffers: list[Buffer]) -> bool:
    """Run the kernel with the ref device's numpy evaluator on the buffers' host memory;
    False (nothing ran) where a buffer's memory is not host memory."""
    arrays = []
    for b in buffers:
        view = device.host_view(b.handle, b.nbytes)
        if view is None:
            _not_host.add(device)
            return False
        arrays.append(view.view(b.dtype))
    device.synchronize()   # (the writes of a launch before this one)
    run_on_numpy(kernel, arrays)
    return True


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class TieredKernel:
    """A kernel's launch that starts on numpy and moves to the compiled program: the step calls
    `launch(buffers)`, which is `_numpy` until the program is there, then the device's launcher
    (so a compiled step costs one attribute lookup more than an untiered one)."""

    def __init__(self, device: Device, kernel: Kernel, key: Hashable, programs: Cache[Any, Program],
                 compile: Callable[[], Program], debug: int, automatic: bool = True):
        """automatic: compile in the background when due (False: tier 0 for good, mode "0")."""
        self.device, self.kernel, self.key, self.programs = device, kernel, key, programs
        self.compile = compile
        self.automatic = automatic
        self.debug = debug
        self.calls = 0
        self.task: _Task | None = None
        self.failed: BaseException | None = None
        n = elements(kernel)
        self.compile_after = 1 if n >= COMPILE_AT_ONCE_ELEMENTS else COMPILE_AFTER
        self.launch: Callable[[list[Buffer]], None] = self._numpy

    @property
    def compiled(self) -> bool:
        return self.launch != self._numpy

    def _numpy(self, buffers: list[Buffer]) -> None:
        if self.automatic:
            program = self.programs.peek(self.key)   # (compiled in the background, or by another caller)
            if program is not None:
                self._switch(program, buffers)
                return
            self.calls += 1
            task = self.task
            if task is None and self.failed is None and self.calls >= self.compile_after:
                self.task = _submit(self)
            elif task is not None and task.error is not None and self.failed is None:
                self.failed = task.error
                warnings.warn(f"ug: compiling kernel {self.kernel.name} on {self.device.name} in the background "
                              f"failed ({type(task.error).__name__}: {task.error}); it keeps running on numpy",
                              RuntimeWarning, stacklevel=2)
        start = time.perf_counter() if self.debug else 0.0
        if not run_numpy(self.device, self.kernel, buffers):
            # (not host memory after all: compile here and now, as a kernel that does not qualify)
            self._switch(self.compile(), buffers)
            return
        if self.debug:
            state = ("compiling in the background" if self.task is not None and not self.task.done
                     else "never compiled (UG_TIER=0)" if not self.automatic else
                     f"compiles from run {self.compile_after}")
            _log(f"  tier 0 (numpy) {self.kernel.name} on {self.device.name}: "
                 f"{(time.perf_counter() - start) * 1e3:.3f} ms, run {self.calls}; {state}")

    def _switch(self, program: Program, buffers: list[Buffer]) -> None:
        launch = self.device.launcher(program)
        self.launch = launch
        _forget(self)
        if self.debug:
            _log(f"  tier 1 (compiled) {self.kernel.name} on {self.device.name} from run {self.calls + 1}")
        launch(buffers)


# the tiered kernels not yet compiled, by compile-cache key: schedules of one kernel share one
# (bounded: a program making ever new kernels; one dropped here still works, on its own)
_tiered: Cache[Hashable, TieredKernel] = Cache("tiers.kernels", max_entries=4096)


def tiered(device: Device, kernel: Kernel, key: Hashable, programs: Cache[Any, Program],
           compile: Callable[[], Program], debug: int) -> TieredKernel | None:
    """In mode "auto", the tiered launch of a kernel not compiled yet, or None where it must be
    compiled before its first run (it does not qualify; mode "0" is the runtime's). `compile()` compiles it and puts the program
    in `programs` under `key` (called by the background thread)."""
    if mode() != "auto" or not qualifies(device, kernel, False):
        return None
    found = _tiered.peek(key)
    if found is None or found.device is not device:
        found = TieredKernel(device, kernel, key, programs, compile, debug)
        _tiered.put(key, found)
    return found


def _forget(kernel: TieredKernel) -> None:
    if _tiered.peek(kernel.key) is kernel:
        _tiered.pop(kernel.key)


class _Task:
    """A compile queued for the background thread: a tiered kernel's, or a device's own
    (in_background: the cpu device's gemm and attention modules)."""

    __slots__ = ("kernel", "done", "error", "seconds", "run", "label", "debug")

    def __init__(self, kernel: TieredKernel | None, run: Callable[[], object] | None = None, label: str = "",
                 debug: int = 0):
        self.kernel = kernel
        self.run: Callable[[], object] = run if run is not None else kernel.compile  # type: ignore[union-attr]
        self.label = label or (f"{kernel.kernel.name} on {kernel.device.name}" if kernel is not None else "?")
        self.debug = kernel.debug if kernel is not None else debug
        self.done = False
        self.error: BaseException | None = None
        self.seconds = 0.0


class _Worker:
    """The background compiler: one thread taking tasks in order (LLVM compiles one module at a
    time in a process anyway), started on the first task, stopped at exit after the compile
    in progress (the queue is dropped)."""

    def __init__(self) -> None:
        self.queue: deque[_Task] = deque()
        self.wake = threading.Condition(threading.Lock())
        self.busy = threading.Lock()   # held around each compile: a fork waits for it (see _before_fork)
        self.thread: threading.Thread | None = None
        self.stopping = False
        self.compiled = 0

    def submit(self, task: _Task) -> None:
        with self.wake:
            self.queue.append(task)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="ug-tier-compile", daemon=True)
                self.thread.start()
            self.wake.notify()

    def _loop(self) -> None:
        while True:
            with self.wake:
                while not self.queue and not self.stopping:
                    self.wake.wait()
                if self.stopping:
                    return
                task = self.queue.popleft()
            with self.busy:
                if self.stopping:
                    return
                start = time.perf_counter()
                try:
                    task.run()
                except BaseException as e:   # (kept for the caller's warning; the kernel stays on numpy)
                    task.error = e
                task.seconds = time.perf_counter() - start
                task.done = True
                self.compiled += 1
                if task.debug:
                    _log(f"  tier compile {task.label} in the background: "
                         f"{task.seconds * 1e3:.2f} ms ({len(self.queue)} queued)")

    def pending(self) -> int:
        with self.wake:
            return len(self.queue) + (1 if self.busy.locked() else 0)

    def stop(self) -> None:
        with self.wake:
            self.stopping = True
            self.queue.clear()
            self.wake.notify_all()
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)


_worker = _Worker()


def _submit(kernel: TieredKernel) -> _Task:
    task = _Task(kernel)
    _worker.submit(task)
    return task


def in_background(label: str, run: Callable[[], object], debug: int = 0) -> _Task:
    """Queue `run()` (a device's compile of its own: the cpu device's gemm or attention module,
    which its tier 0 runs on numpy meanwhile) for the background thread; the task says when it
    is `done` (and its `error`). A task queued in a process that then forked is lost in the
    child (never done): the device drops its tasks in its after_fork."""
    task = _Task(None, run, label, debug)
    _worker.submit(task)
    return task


def wait(timeout: float | None = None) -> bool:
    """Wait until the background compiles queued so far are done (tests, benchmarks); whether
    they are."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while _worker.pending():
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def stats() -> dict[str, int]:
    """Background compiles done and still to do, and tiered kernels not compiled yet."""
    return {"compiled": _worker.compiled, "pending": _worker.pending(), "waiting": len(_tiered)}


atexit.register(_worker.stop)


def _before_fork() -> None:
    _worker.busy.acquire()   # (a child must not inherit LLVM's lock held by a compile in progress)


def _after_fork_in_parent() -> None:
    _worker.busy.release()


def _after_fork_in_child() -> None:
    """The worker thread is gone: a new worker; the kernels whose compile had not run compile
    again when next due (their task is dropped)."""
    global _worker
    lost = list(_worker.queue)
    _worker = _Worker()
    for task in lost:
        if task.kernel is not None and task.kernel.task is task:
            task.kernel.task = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
