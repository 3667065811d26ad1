"""Compiled steps over numbered buffer slots, and how they run: what a CompiledSchedule
(runtime) is made of, what ug.jit and a realize of a known graph structure replay (Replay).

A step reads and writes slots of one list of buffers, so the same steps run again on other
buffers. Run plainly, a buffer no later step uses goes back to its pool as soon as it may
(run_dropping); while a profile records or UG_DEBUG asks, each step is timed and waited for
(run_timed, ug_core.profiler).
"""

from __future__ import annotations

import functools
import operator
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import profiler as _prof
from .device import Buffer, Device, Program, _SizedBuffer, memory_counter
from .faults import checkpoint, interrupt_pending
from .graph import Node, new_node
from .ops import Op
from .specs import MatmulSpec

_log = _prof.log


@dataclass
class KernelLaunch:
    """What a kernel step does, as data: ug.jit builds its single-kernel fast path from it."""

    device: Device
    program: Program
    args: list[int]                                   # slot of each kernel argument
    aliases: list[tuple[int, int]]                    # (source slot, output slot): assign in place
    fresh: list[tuple[int, Device, int, np.dtype]]    # (slot, device, size, dtype): new output buffers
    # per fresh output, its slot and what makes its buffer (small_buffer_maker's, or Buffer's)
    makers: list[tuple[int, Callable[[], Buffer]]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.makers = [(i, small_buffer_maker(out_device, size, dtype) if size * dtype.itemsize <= SMALL_OUTPUT_BYTES
                        else functools.partial(Buffer, out_device, size, dtype))
                       for i, out_device, size, dtype in self.fresh]

    def bind_outputs(self, bufs: list[Buffer | None]) -> None:
        """Give the outputs their buffers: an assign's target, or a new one."""
        for src, dst in self.aliases:
            bufs[dst] = bufs[src]
        for i, make in self.makers:
            if bufs[i] is None:
                bufs[i] = make()

    def gatherer(self) -> Callable[[list[Buffer | None]], list[Buffer]]:
        """bufs -> the kernel's argument buffers, without a Python-level loop (itemgetter of one
        index returns the item itself, hence the second form)."""
        if len(self.args) > 1:
            take = operator.itemgetter(*self.args)
            return lambda bufs: list(take(bufs))
        first = self.args[0]
        return lambda bufs: [bufs[first]]  # type: ignore[list-item]


SMALL_OUTPUT_BYTES = 64
"""A kernel output of at most this many bytes (a scalar: a reduction to one value, what float()
and bool() read) gets its buffer from small_buffer_maker."""


def small_buffer_maker(device: Device, size: int, dtype: np.dtype) -> Callable[[], Buffer]:
    """A function making a buffer of `size` elements on `device` the way ug.jit's single-kernel
    replay makes its output (jit.fast_replay._output_maker): the handle from the device's
    `handle_allocator` for this size, a _SizedBuffer without __init__, counted in one SizedCount.
    About a quarter of Buffer(...)'s cost with its free, which a small realize pays per output.
    Its allocations count in peak_bytes when another Buffer is made or the stats are read
    (MemoryCounter.add): for outputs of a few bytes only (SMALL_OUTPUT_BYTES)."""
    dtype = np.dtype(dtype)
    take, allocate, release = device.handle_allocator((size if size > 0 else 1) * dtype.itemsize)
    memory = memory_counter(device).sized_count(size * dtype.itemsize)

    def make_buffer() -> Buffer:
        buffer = _SizedBuffer()
        buffer.device = device
        buffer.size = size
        buffer.dtype = dtype
        buffer.release = release
        try:
            buffer.handle = take()
        except IndexError:  # no freed one to reuse
            buffer.handle = allocate()
        buffer.memory = memory
        memory.made += 1
        return buffer
    return make_buffer


@dataclass
class MatmulLaunch:
    """What a matmul step does, as data (ug.jit's single-matmul fast path)."""

    device: Device
    spec: MatmulSpec
    out: int                                          # slots of the product and the operands
    a: int
    b: int


@dataclass
class Step:
    run: Callable[[list[Buffer | None]], None]
    describe: str
    uses: tuple[int, ...]  # the slots it reads or writes
    outputs: tuple[int, ...]  # the slots it gives their values (a realize cut short records those of the steps that ran)
    kernel: KernelLaunch | None = None
    matmul: MatmulLaunch | None = None
    overwrites: tuple[int, ...] = ()  # the slots whose buffers it writes in place (an assign's target)
    info: _prof.StepInfo | None = None  # what the profiler records of it (CompiledSchedule._describe_step)


def runner(steps: list[Step], debug: int) -> Callable[[list[Buffer | None]], object]:
    """CompiledSchedule.run as a function of the steps (see CompiledSchedule.runner); with
    UG_DEBUG, one that prints the table of each run."""
    if debug >= 1:
        runs, infos = [step.run for step in steps], [step.info for step in steps]

        def run_logged(bufs: list[Buffer | None]) -> list[Buffer | None]:
            with _prof.Profile(thread_only=True) as p:
                run_timed(runs, infos, "ug.jit replay", bufs)  # type: ignore[arg-type]
            _log(str(p.table(per_run=True)))
            return bufs
        return run_logged
    if len(steps) == 1:
        return steps[0].run
    runs = [step.run for step in steps]

    def run_steps(bufs: list[Buffer | None]) -> list[Buffer | None]:
        for run in runs:
            run(bufs)
        return bufs
    return run_steps


def last_uses(steps: list[Step], n_slots: int) -> list[tuple[int, ...]]:
    """Per step, the slots no later step uses."""
    last = [-1] * n_slots
    for k, step in enumerate(steps):
        for slot in step.uses:
            last[slot] = k
    per_step: list[list[int]] = [[] for _ in steps]
    for slot, k in enumerate(last):
        if k >= 0:
            per_step[k].append(slot)
    return [tuple(x) for x in per_step]


def run_dropping(runs: list[Callable[[list[Buffer | None]], None]], last_use: list[tuple[int, ...]],
                  bufs: list[Buffer | None], drop: frozenset[int], done: list[int] | None = None) -> None:
    """Run the steps; done[0] counts those that ran, and between two steps a held Ctrl-C is
    raised (faults.checkpoint: _run_on runs this as a critical section)."""
    if done is None:
        done = [0]
    for k, run in enumerate(runs):
        run(bufs)
        done[0] = k + 1
        if drop:
            for slot in last_use[k]:
                if slot in drop:
                    bufs[slot] = None  # its buffer goes back to the device's pool for the next steps
        if interrupt_pending():
            checkpoint()


def run_timed(runs: list[Callable[[list[Buffer | None]], None]], infos: list[_prof.StepInfo], label: str,
               bufs: list[Buffer | None], last_use: list[tuple[int, ...]] | None = None,
               drop: frozenset[int] = frozenset(), done: list[int] | None = None) -> None:
    """run_dropping's timed twin (UG_DEBUG >= 1, or a profile recording): run the steps one by
    one, waiting for their devices after each, and give each item run, then the whole run (a
    "schedule" event named `label`), to the active profiles (ug_core.profiler)."""
    thread = threading.get_ident()
    perf_ns, record = time.perf_counter_ns, _prof.record
    first = perf_ns()
    for k, (run, info) in enumerate(zip(runs, infos)):
        outer = _prof.begin_item()
        start = perf_ns()
        try:
            run(bufs)
            for device in info.devices:
                device.synchronize()
        finally:
            compile_ns = _prof.end_item(outer)
        end = perf_ns()
        held = {id(b): b for b in (bufs[slot] for slot in info.uses) if b is not None}
        nbytes = sum(b.size * b.dtype.itemsize for b in held.values())
        record(_prof.Event(info.kind, info.name, info.device, start, end, thread, nbytes, info.flops, compile_ns,
                           info.detail, info.program))
        if done is not None:
            done[0] = k + 1
        if drop and last_use is not None:
            for slot in last_use[k]:
                if slot in drop:
                    bufs[slot] = None
        if interrupt_pending():
            checkpoint()
    record(_prof.Event("schedule", label, "", first, perf_ns(), thread, detail=f"{len(runs)} items"))


def run_steps(runner: Callable[[list[Buffer | None]], object], steps: list[Step], bufs: list[Buffer | None],
              label: str = "ug.jit replay") -> None:
    """runner(bufs), the compiled steps' run; while a profile records, the timed path (which
    records them) instead: ug.jit's replays and first run."""
    if _prof.active:
        run_timed([step.run for step in steps], [step.info for step in steps], label, bufs)  # type: ignore[misc]
    else:
        runner(bufs)


@dataclass(frozen=True)
class Scratch:
    """A replay's slot for a node the scheduler's device pass built (schedule.device_pass), which
    no graph of the structure has: a fresh placeholder per replay holds its buffer."""

    sig: tuple[tuple[int, ...], np.dtype, str]

    def node(self) -> Node:
        return new_node(Op.BUFFER, (), None, self.sig)


@dataclass
class Replay:
    """The compiled steps of a realized graph, to run on another graph of the same structure
    (CompileCache.schedules). It holds no node and no buffer of the graph it was made for
    (only constants it reads whatever the graph, such as kernel_params' offsets)."""

    steps: list[Callable[[list[Buffer | None]], None]]
    # per buffer slot of the steps: the position of its node in the walk, or a realized node
    # that the schedule added, which every graph of this structure reads (kernel_params' offsets),
    # or a Scratch for a node the device pass built
    slots: list["int | Node | Scratch"]
    programs: int         # compiled programs the steps use (each reuse counts that many hits)
    last_use: list[tuple[int, ...]]   # CompiledSchedule.last_use
    clobbered: frozenset[int]         # CompiledSchedule.clobbered
    effects: list[tuple[tuple[int, ...], tuple[int, ...]]]   # CompiledSchedule.effects
    infos: list[_prof.StepInfo]       # CompiledSchedule.infos (run_timed)
    # the walk positions of the assigns the steps write in place, and of the nodes the schedule
    # computed into buffers: a graph of this structure replays them only where writing in place
    # is still allowed (execute._in_place_allowed)
    in_place: tuple[int, ...] = ()
    computed: frozenset[int] = frozenset()

    def run(self, bufs: list[Buffer | None], drop: frozenset[int] = frozenset(), done: list[int] | None = None) -> None:
        steps = self.steps
        if len(steps) == 1 and done is not None:
            # (the common small realize: nothing to let go between steps, and a Ctrl-C held
            # meanwhile is raised at the end of the caller's critical section)
            steps[0](bufs)
            done[0] = 1
            return
        run_dropping(steps, self.last_use, bufs, drop, done)

    def run_timed(self, bufs: list[Buffer | None], drop: frozenset[int] = frozenset(), done: list[int] | None = None
                  ) -> None:
        """`run` while a profile records."""
        run_timed(self.steps, self.infos, "realize (replay)", bufs, self.last_use, drop, done)
