"""`ug bench`'s optional peers beside numpy and torch: JAX (`jax.jit`, XLA on the CPU) and
tinygrad (TinyJit on its CPU device). Each is imported only when a row asks for it; a peer that
is not installed, or cannot run on this machine, is skipped with a one-line note (`unavailable`).

tinygrad's CPU device compiles with clang (its command queue is C, whatever the kernels' backend)
and, for the kernels, with LLVM (CPU:LLVM, which needs libLLVM 16 or newer: it writes opaque
pointers) or clang (CPU:CLANG). `tinygrad()` picks CPU:LLVM, as issue 27 measured it, and falls back
to CPU:CLANG where LLVM does not work; $DEV, when set, is the user's choice and is kept.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable

import numpy as np

TINYGRAD_BACKENDS = ("CPU:LLVM", "CPU:CLANG")
_started: set[str] = set()   # the peers that ran here ('tinygrad' once its device computed)


class Unavailable(Exception):
    """A peer that is not installed or does not run here; the message says which and why."""


class PeerLacks(Exception):
    """A peer has no operation for a workload (e.g. tinygrad's bincount): the row is skipped, saying why."""


@functools.cache
def jax_numpy() -> Any:
    """jax.numpy on the CPU, or Unavailable. JAX's persistent compilation cache stays as the
    environment sets it (off by default); `ug bench --compile` turns it off for its measurements."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        raise Unavailable(f"jax not installed ({e})") from e
    jax.config.update("jax_platforms", "cpu")
    return jnp


@functools.cache
def tinygrad() -> tuple[Any, str]:
    """The tinygrad module and the CPU backend it runs on (e.g. 'CPU:LLVM'), or Unavailable.
    Each backend is tried on a small computation first: tinygrad reports a missing clang or an old
    libLLVM only when it compiles a kernel."""
    user = os.environ.get("DEV")
    if user is None:
        os.environ["DEV"] = TINYGRAD_BACKENDS[0]   # read when tinygrad loads
    try:
        import tinygrad as tg
        from tinygrad.helpers import DEV
    except ImportError as e:
        raise Unavailable(f"tinygrad not installed ({e})") from e
    errors = []
    for backend in [user] if user is not None else list(TINYGRAD_BACKENDS):
        DEV.value = backend
        try:
            probe = (tg.Tensor(np.arange(8, dtype=np.float32)) * 2).sum().numpy()
            if float(probe) != 56.0:
                raise RuntimeError(f"2 * arange(8) sums to {probe}")
            _started.add("tinygrad")
            return tg, backend
        except Exception as e:  # a compiler missing or too old: tinygrad raises what it met
            errors.append(f"{backend}: {type(e).__name__}: {str(e).strip().splitlines()[-1][:80] if str(e).strip() else ''}")
    raise Unavailable("tinygrad does not run here (" + "; ".join(errors) + ")")


def release() -> None:
    """Give back the memory the peers keep for reuse once a row is done with it: tinygrad's CPU
    allocator caches every freed buffer by size (shared memory mappings), so that what one row
    freed would stay mapped through all the others. A no-op where tinygrad was not loaded."""
    import gc

    gc.collect()   # the row's runners (TinyJit and its buffers) are garbage now; their buffers go to the cache
    if "tinygrad" in _started:
        from tinygrad import Device
        free_cache = getattr(Device[Device.DEFAULT].allocator, "free_cache", None)   # LRUAllocator's
        if free_cache is not None:
            free_cache()


def versions() -> list[str]:
    """'jax 0.x', 'tinygrad 0.y (CPU:LLVM)' or why each is missing, for the machine line."""
    out = []
    try:
        import jax
        out.append(f"jax {jax.__version__}")
    except ImportError:
        out.append("jax not installed")
    try:
        tg, backend = tinygrad()
        from importlib.metadata import version
        out.append(f"tinygrad {version('tinygrad')} ({backend})")
    except Unavailable as e:
        out.append(str(e))
    return out


def jax_runner(fn: Callable[..., Any], inputs: list[np.ndarray], jit: bool = True) -> Callable[[], Any]:
    """fn(jax.numpy, *inputs) under jax.jit (eagerly where `jit` is False: a data-dependent output
    shape, which jax.jit cannot trace), each call waiting for its result."""
    jnp = jax_numpy()   # Unavailable, with why, when JAX is not installed
    import jax

    arrays = [jnp.asarray(a) for a in inputs]
    call = jax.jit(lambda *xs: fn(jnp, *xs)) if jit else (lambda *xs: fn(jnp, *xs))

    def run() -> Any:
        return jax.block_until_ready(call(*arrays))
    return run


def tinygrad_runner(fn: Callable[..., Any], inputs: list[np.ndarray], jit: bool = True) -> Callable[[], Any]:
    """fn("tinygrad", *inputs) under TinyJit (which captures the kernels of its second call and
    replays them from the third; eagerly where `jit` is False), each call waiting for the device.
    Returns a numpy array when called with `result=True`."""
    tg, _ = tinygrad()
    from tinygrad import Device, TinyJit

    tensors = [tg.Tensor(a).realize() for a in inputs]
    step = (lambda *ts: fn("tinygrad", *ts).realize())
    call = TinyJit(step) if jit else step
    device = Device[Device.DEFAULT]

    def run() -> Any:
        out = call(*tensors)
        device.synchronize()
        return out
    return run


def tinygrad_numpy(out: Any) -> np.ndarray:
    """A tinygrad result as a numpy array (a TinyJit output's buffer is reused by its next call)."""
    return np.asarray(out.numpy())
