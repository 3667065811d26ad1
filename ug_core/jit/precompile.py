"""`ug.precompile(fn, *example_args)` and `ug.jit(fn).lower(*example_args)`: compile everything a
call would run, without running it, so that a serving process or a CI image finds it compiled.

The function runs lazily on the example arguments (as a call of it would, or as ug.jit's trace
does: nothing is computed), what its results need is scheduled, and every kernel of the
schedule is compiled (`CompiledSchedule`, the runtime's compile cache); a device that compiles
code of its own for an item (the cpu device's packed gemm, its small-matmul kernels, its
attention module) compiles it through its `precompile_item(item)`, where it has one. The
backends' disk caches keep what was compiled, so a fresh process with the same cache directory
(`UG_LLVM_CACHE_DIR` for cpu, see each plugin's README) loads it instead of compiling again.

What is scheduled is all of the function's results together, as ug.jit or
`ug.realize(*results)` runs them; realizing a lazy call's results one at a time (`.numpy()` on
each) schedules each on its own, which may fuse differently and run other kernels.

What is compiled depends only on what the example arguments stand for: their shapes, dtypes and
devices, and the values of non-tensor arguments. A call with other shapes compiles its own
kernels (the cpu device's gemm excepted: one module serves every shape of a dtype and tile).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from ..graph import graph_lock
from ..plugins import registry
from ..runtime import CompiledSchedule, compile_cache
from ..steps import KernelLaunch
from ..schedule import Schedule, create_schedule
from ..tensor import Tensor
from .pytree import _flatten_output


@dataclass(frozen=True)
class Precompiled:
    """What `precompile` did: the schedule a call with such arguments runs, how many program
    lookups it made and how many of those compiled (or loaded from a disk cache) rather than
    finding the program in this process's compile cache, the device items it prepared, and
    the seconds it took."""

    schedule: Schedule | None
    programs: int
    new_programs: int
    items_prepared: int
    seconds: float

    def __str__(self) -> str:
        kernels = len(self.schedule.kernels) if self.schedule is not None else 0
        return (f"precompiled {kernels} kernel(s), {self.items_prepared} device item(s): "
                f"{self.new_programs} of {self.programs} program(s) new, {self.seconds:.3f} s")


def precompile(fn: Callable[..., Any], *example_args: Any, **example_kwargs: Any) -> Precompiled:
    """Compile every kernel a call `fn(*example_args, **example_kwargs)` would run, without
    running it (see the module docstring). `fn` may be a `ug.jit` function (its Python function
    is traced) or a plain one; tensor arguments should be realized, as at the call being
    prepared for (a lazy argument's graph would be compiled into the kernels, and a call with a
    realized tensor runs other kernels). A function that reads a value into Python (`.item()`,
    `.numpy()`) runs what that value needs, as a lazy call would. Returns a `Precompiled`."""
    if not callable(fn):
        raise TypeError(f"ug.precompile needs a function, got {type(fn).__name__}")
    target = getattr(fn, "__ug_jit_fn__", fn)
    start = time.perf_counter()
    lookups = compile_cache.hits + compile_cache.misses
    misses = compile_cache.misses
    leaves: list[Tensor] = []
    _flatten_output(target(*example_args, **example_kwargs), leaves)
    roots = [t._node for t in leaves if t._node.buffer is None]
    schedule = None
    prepared = 0
    if roots:
        with graph_lock:   # (schedules the graph as a realize does)
            schedule = create_schedule(roots)
            if schedule.items:
                compiled = CompiledSchedule(schedule)   # compiles (or loads) every kernel; runs nothing
                for step in compiled.steps:
                    if step.kernel is not None:
                        _variant(step.kernel, compiled.slots)
                for item in schedule.items:
                    prepared += _prepare(item)
    return Precompiled(schedule, compile_cache.hits + compile_cache.misses - lookups, compile_cache.misses - misses,
                       prepared, time.perf_counter() - start)


def _variant(launch: KernelLaunch, slots: list[Any]) -> None:
    """A kit device compiles a kernel's variant for one buffer passed twice when a launch first
    does that (ug_core.kit: Loaded.entry_for): compile it now where the launch will do so (a
    node passed twice, two nodes on one buffer, an in-place write's output and its source)."""
    into = {dst: src for src, dst in launch.aliases}

    def buffer_key(slot: int) -> int:
        node = slots[into.get(slot, slot)]
        return id(node.buffer) if node.buffer is not None else id(node)
    keys = [buffer_key(slot) for slot in launch.args]
    variant = getattr(launch.program.handle, "variant", None)
    if variant is not None and len(set(keys)) < len(keys):
        variant.get()


def _prepare(item: Any) -> int:
    """Let the device of a non-kernel item compile what it compiles for it at its first run
    (`precompile_item`, optional); 1 where it did."""
    out = getattr(item, "out", None)
    if out is None:
        return 0
    device = registry.get(out.device)
    hook = getattr(device, "precompile_item", None)
    return 1 if hook is not None and hook(item) else 0
