"""What a process does to ug from outside: Ctrl-C in the middle of its work, and os.fork().

Interrupts. Python raises KeyboardInterrupt in the main thread at whichever bytecode runs when
SIGINT arrives, so without care it can cut in two a step that must be whole: between a kernel
that wrote a tensor's buffer in place and the node that records it (a later read computes the
write again), between a Vulkan submission and the wait for its fence (a later wait returns at
once, before the work), between posting work to the cpu device's threads and waiting for them (a
buffer goes back to the pool while they still write it). `defer_interrupts` makes such a step a
critical section: on the main thread, SIGINT received inside is held and its handler called (so
KeyboardInterrupt raised) when the outermost section ends, or earlier at a `checkpoint()` that the
outermost section reaches between steps (a realize checks after each kernel, so Ctrl-C still stops
a long one between its kernels). Other threads never get KeyboardInterrupt from a signal, so
there a section costs one comparison. The handler is swapped with the C module's functions
(`_signal`): `signal.signal` and `signal.getsignal` convert enums and cost 2-8 us a call.

Fork. A child made by os.fork() has only the forking thread: locks another thread held stay
held, worker threads are gone, and a GPU driver's state (Vulkan's queue thread, a CUDA context)
does not work there. The handlers registered here (`os.register_at_fork`) make a child start
from a whole state: before the fork the graph lock is taken (no realize or write is half done in
the child), and in the child each created device's `Device.after_fork` runs (a device keeps
working, or refuses with ForkedDeviceError, and the registry makes a new one on its next use;
ug.jit traces made for the old one trace again) and the core's other locks are new. The safe way
is still multiprocessing's 'spawn' start method, which starts a fresh interpreter (README.md,
docs/array-api.md).
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any, Callable, Protocol

try:
    import _signal as _sig  # type: ignore[import-not-found]  # CPython's C module behind `signal` (see above)
except ImportError:  # other implementations
    _sig = signal

from _thread import get_ident

from . import cache
from .plugins import DeviceUnavailableError

_SIGINT = int(signal.SIGINT)

# per process: the main thread (the only one signal handlers run on; the forking thread in a
# forked child), how many critical sections it is in, the SIGINT handler the outermost one
# replaced (None: it did not replace one), and the signal held meanwhile (signum, frame)
_main = threading.main_thread().ident
_depth = 0
_saved: Any = None
_pending: tuple[int, Any] | None = None


def _hold(signum: int, frame: Any) -> None:
    """The SIGINT handler inside a critical section: remember the signal for its end."""
    global _pending
    _pending = (signum, frame)


class _Deferral:
    """The context manager behind `defer_interrupts` (reentrant; a no-op off the main thread)."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _depth, _saved, _pending
        if get_ident() != _main:
            return
        if not _depth:
            handler = _sig.getsignal(_SIGINT)
            # only a Python handler raises KeyboardInterrupt (the default one) or runs user code:
            # SIG_DFL ends the process, SIG_IGN does nothing, None is a handler set from C
            if callable(handler):
                _pending = None   # (one recorded after an earlier section's end is stale)
                try:
                    _sig.signal(_SIGINT, _hold)
                except ValueError:  # not the main interpreter: its signals are not ours to hold
                    handler = None
                _saved = handler if callable(handler) else None
        _depth += 1

    def __exit__(self, *exc: object) -> None:
        global _depth, _saved, _pending
        if get_ident() != _main:
            return
        _depth -= 1
        if _depth or _saved is None:
            return
        saved, _saved = _saved, None
        if _sig.getsignal(_SIGINT) is _hold:   # (unless code inside installed a handler of its own)
            _sig.signal(_SIGINT, saved)
        pending, _pending = _pending, None
        if pending is not None:
            saved(*pending)   # the default handler raises KeyboardInterrupt here, after the section


defer_interrupts = _Deferral()
"""`with defer_interrupts:` runs its body whole: SIGINT received inside raises KeyboardInterrupt
at its end (or at an outermost-level `checkpoint()`). See the module docstring."""


def checkpoint() -> None:
    """Inside the outermost critical section, at a point where the state is whole (between two
    steps of a realize): call the handler of a SIGINT held so far (raise KeyboardInterrupt)."""
    global _pending
    if _pending is None or _depth != 1 or _saved is None or get_ident() != _main:
        return
    pending, _pending = _pending, None
    _saved(*pending)


def interrupt_pending() -> bool:
    """Whether a SIGINT is held (a critical section will raise KeyboardInterrupt at its end)."""
    return _pending is not None


# --- fork ----------------------------------------------------------------------------------

class ForkedDeviceError(DeviceUnavailableError):
    """A device object made before os.fork() used in the child, where it does not work. It
    refuses before doing anything, so what raised it may run again on the device the registry
    makes anew for the name: ug.jit traces again (a trace holds the objects it was compiled for)."""


class Refusing:
    """A stand-in for a lock (or any object used in `with`) that raises ForkedDeviceError with
    `message` instead: a device object that cannot work in a forked child puts one where its
    entry points take their lock (or its driver module is), so every later use says why, at
    no cost before."""

    __slots__ = ("message",)

    def __init__(self, message: str):
        self.message = message

    def __enter__(self) -> None:
        raise ForkedDeviceError(self.message)

    def __exit__(self, *exc: object) -> None:
        pass

    def __getattr__(self, name: str) -> Any:   # (a driver module's stand-in: ctx.drv.cuLaunchKernel)
        if name.startswith("__"):
            raise AttributeError(name)
        raise ForkedDeviceError(self.message)


def forked_message(device: str, parent: int, what: str) -> str:
    """The error a device object made before a fork gives in the child."""
    return (f"the {device} device object was created in process {parent} before os.fork(); {what} "
            f"(start worker processes with multiprocessing's 'spawn' start method, "
            f"multiprocessing.set_start_method('spawn') or get_context('spawn'), to avoid this)")


def _graph_lock() -> Any:
    from .graph import graph_lock
    return graph_lock


_parent = os.getpid()     # the pid before the latest fork (what a child's messages name)
_held_for_fork = False


def _before_fork() -> None:
    """No realize or tensor write is half done in the child: wait for the one running, if any.
    (Not when this thread is the main one inside a critical section that holds it: the lock is
    reentrant, taking it again is immediate.)"""
    global _parent, _held_for_fork
    _parent = os.getpid()
    _held_for_fork = _graph_lock().acquire()


def _after_fork_in_parent() -> None:
    global _held_for_fork
    if _held_for_fork:
        _held_for_fork = False
        _graph_lock().release()


def _after_fork_in_child() -> None:
    global _main, _depth, _saved, _pending, _held_for_fork
    forked_from_main = get_ident() == _main
    _main = get_ident()
    if not forked_from_main:
        # the main thread's critical sections do not exist here: put its SIGINT handler back
        if _saved is not None and _sig.getsignal(_SIGINT) is _hold:
            _sig.signal(_SIGINT, _saved)
        _depth, _saved, _pending = 0, None, None
    if _held_for_fork:   # this thread took it in _before_fork and is this thread still
        _held_for_fork = False
        _graph_lock().release()
    from .plugins import registry
    registry._lock = threading.RLock()   # (another thread may have held these at the fork)
    cache.after_fork()   # (every cache's lock)
    for name, device in list(registry.devices.items()):
        try:
            keeps = device.after_fork(_parent)
        except Exception:   # a backend's bug: it cannot be trusted here, make a new one
            keeps = False
        if not keeps:
            registry.forget_created(name)
            for core_cache in _core_caches:
                core_cache.forget_device(name)
    for fn in list(_child_hooks):
        fn()


class ForkAwareCache(Protocol):
    """A core cache a forked child keeps in its own way (runtime's compile cache)."""

    def forget_device(self, name: str) -> None:
        """What it holds for the device `name`, which the child makes anew."""


_core_caches: list[ForkAwareCache] = []


def register_core_cache(cache: ForkAwareCache) -> None:
    """In every forked child, drop what `cache` holds of each device made anew there (its lock is
    renewed with every cache's: cache.after_fork). runtime registers its compile cache: it imports this module (its critical sections),
    so this module cannot import it."""
    _core_caches.append(cache)


_child_hooks: list[Callable[[], None]] = []


def after_fork_in_child(fn: Callable[[], None]) -> Callable[[], None]:
    """Run `fn()` in every forked child after the core's own fork handling (for a plugin's
    module-level state, such as locks and process-wide engines); returns `fn` (a decorator)."""
    _child_hooks.append(fn)
    return fn


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
