"""Running a schedule: compile (through the cache), allocate, launch; UG_DEBUG output and the
profiler's timed path (ug_core.profiler).

A `CompiledSchedule` is a list of steps over numbered buffer slots, so it can be run
again on other buffers: `ug.jit` replays one with new inputs without scheduling again.
A matmul followed by the elementwise kernel that consumes its product (a bias, an activation)
becomes one step, which a device may run as one launch (`Device.matmul_epilogue`).
"""

from __future__ import annotations

import functools
import operator
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable, Hashable

import numpy as np

from . import profiler as _prof
from . import tiers
from .cache import Cache
from .device import Buffer, CompileError, Device, Program
from .specs import MatmulSpec
from .env import env_int
from .faults import checkpoint, defer_interrupts, interrupt_pending, register_core_cache
from .graph import Node, graph_lock, new_node
from .kernel_ir import Kernel, toposort
from .ops import Op
from .plugins import registry
from .schedule import (AttentionItem, CopyItem, CustomItem, FftItem, KernelItem, MatmulItem, Schedule, SortItem, create_schedule,
                       unrealized, walk)
from .structure import graph_key
from .view import View, contiguous_strides, prod


def debug_level() -> int:
    try:
        return int(os.environ.get("UG_DEBUG", "0") or 0)
    except ValueError:
        return 0


_log = _prof.log


# graphs whose compiled steps are kept (a program that builds ever new graphs, e.g. with a
# new constant each time, would otherwise grow the cache without end); an entry is a few
# closures, no buffers
MAX_CACHED_SCHEDULES = 512


class CompileCache:
    """Compiled programs by (device, backend version, normalized kernel). In memory; backends
    may add a disk cache under their `compile`.

    It also keeps the compiled steps of recently realized graphs by their structure
    (`schedules`, see realize_nodes), so that realizing a graph like one realized before skips
    the scheduler and the lookups of its programs; such a reuse counts as a hit for each
    program it reuses. Both are `cache.Cache`s (least recently used out first): at most
    `$UG_MAX_CACHED_PROGRAMS` programs (a program that compiles ever new kernels must not grow
    it without end; kept schedules and ug.jit traces still hold the programs they use) and
    MAX_CACHED_SCHEDULES graphs."""

    def __init__(self) -> None:
        self.programs: Cache[tuple[str, str, str], Program] = Cache(
            "runtime.programs", max_entries=env_int("UG_MAX_CACHED_PROGRAMS", 1024, minimum=1))
        self.schedules: Cache[Hashable, _Replay] = Cache("runtime.schedules", max_entries=MAX_CACHED_SCHEDULES)

    @property
    def hits(self) -> int:
        """Program lookups that found the program (a kept schedule's reuse counts each of its programs)."""
        return self.programs.hits

    @hits.setter
    def hits(self, value: int) -> None:
        self.programs.hits = value

    @property
    def misses(self) -> int:
        """Program lookups that compiled."""
        return self.programs.misses

    @staticmethod
    def key(device: Device, kernel: Kernel) -> tuple[str, str, str]:
        """The key of a kernel's program on a device."""
        return (device.name, device.version, kernel.key())

    def get(self, device: Device, kernel: Kernel) -> Program:
        key = self.key(device, kernel)
        program = self.programs.get(key)
        if program is not None:
            return program
        return self.compile(device, kernel, key)

    def compile(self, device: Device, kernel: Kernel, key: tuple[str, str, str]) -> Program:
        """Compile a kernel (UG_DEBUG output, a backend's failure as a CompileError with the
        source) and keep its program under `key`. Thread-safe (tiers' background compiles):
        it touches only the cache's put, which takes its lock."""
        level = debug_level()
        if level >= 2:
            _log(f"--- kernel IR ({device.name}) ---\n{kernel}")
            loop = device.lower(kernel)
            if loop is not None:
                _log(f"--- loop IR ({device.name}, as its renderer gets it) ---\n{loop}")
        if level >= 3:
            _log(f"--- {device.name} source ---\n{device.render(kernel)}")
        start = _prof.compile_begin()
        try:
            program = device.compile(kernel)
        except CompileError:
            raise
        except Exception as e:  # a backend bug or limit: still show what it was asked to compile
            try:
                source = device.render(kernel)
            except Exception:
                source = str(kernel)
            raise CompileError(f"{device.name} failed to compile kernel {kernel.name}: {type(e).__name__}: {e}", source) from e
        _prof.kernel_compiled(kernel.name, device.name, program, start, level)   # (UG_DEBUG's line, the profile)
        self.programs.put(key, program)
        return program

    def tiered(self, device: Device, kernel: Kernel, debug: int = 0) -> tuple[Program, "tiers.TieredKernel | None"]:
        """The kernel's program and None; or, for a kernel not compiled yet that may start on
        numpy (tiers.tiered), a placeholder program and its tiered launch, which compiles it in
        the background. Forced tier 0 (tiers.mode() "0") keeps its numpy launches here beside the
        programs, as a program of their own (hits and misses count as a compiled kernel's
        would; they never compile). The lookup counts a hit or a miss as `get` does."""
        key = self.key(device, kernel)
        compile = functools.partial(self.compile, device, kernel, key)
        if tiers.mode() == "0" and tiers.qualifies(device, kernel, True):
            zero_key = (key[0], key[1] + "+tier0", key[2])
            found = self.programs.get(zero_key)
            if found is None:
                found = Program(kernel.name, tiers.TieredKernel(device, kernel, key, self.programs, compile, debug,
                                                                automatic=False))
                self.programs.put(zero_key, found)
            return Program(kernel.name, None), found.handle
        program = self.programs.get(key)
        if program is not None:
            return program, None
        tier = tiers.tiered(device, kernel, key, self.programs, compile, debug)
        if tier is not None:
            return Program(kernel.name, None), tier
        return compile(), None

    def launcher(self, device: Device, kernel: Kernel) -> Callable[[list[Buffer]], None]:
        """A launch of a kernel that a device runs outside a schedule (a small matmul's
        reduction kernel): tiered as a schedule's kernels are (see `tiered`), else the
        compiled program's launcher."""
        program, tier = self.tiered(device, kernel, debug_level())
        if tier is None:
            return device.launcher(program)
        return lambda buffers: tier.launch(buffers)

    def clear(self) -> None:
        self.programs.clear()
        self.schedules.clear()

    def forget_device(self, name: str) -> None:
        """Drop the programs compiled for device `name` and every kept schedule (they hold the
        device object): the registry made way for a new device of that name (faults)."""
        for key in [k for k in self.programs.keys() if k[0] == name]:
            self.programs.pop(key)
        self.schedules.clear()

    def keep_schedule(self, key: Hashable, replay: "_Replay") -> None:
        self.schedules.put(key, replay)


compile_cache = CompileCache()
register_core_cache(compile_cache)   # (a forked child resets it: see faults)
tiers.on_mode_change(compile_cache.schedules.clear)   # (kept schedules ran in the tiers of the mode before)


@dataclass
class KernelLaunch:
    """What a kernel step does, as data: ug.jit builds its single-kernel fast path from it."""

    device: Device
    program: Program
    args: list[int]                                   # slot of each kernel argument
    aliases: list[tuple[int, int]]                    # (source slot, output slot): assign in place
    fresh: list[tuple[int, Device, int, np.dtype]]    # (slot, device, size, dtype): new output buffers

    def bind_outputs(self, bufs: list[Buffer | None]) -> None:
        """Give the outputs their buffers: an assign's target, or a new one."""
        for src, dst in self.aliases:
            bufs[dst] = bufs[src]
        for i, out_device, size, dtype in self.fresh:
            if bufs[i] is None:
                bufs[i] = Buffer(out_device, size, dtype)

    def gatherer(self) -> Callable[[list[Buffer | None]], list[Buffer]]:
        """bufs -> the kernel's argument buffers, without a Python-level loop (itemgetter of one
        index returns the item itself, hence the second form)."""
        if len(self.args) > 1:
            take = operator.itemgetter(*self.args)
            return lambda bufs: list(take(bufs))
        first = self.args[0]
        return lambda bufs: [bufs[first]]  # type: ignore[list-item]


@dataclass
class MatmulLaunch:
    """What a matmul step does, as data (ug.jit's single-matmul fast path)."""

    device: Device
    spec: MatmulSpec
    out: int                                          # slots of the product and the operands
    a: int
    b: int


@dataclass
class _Step:
    run: Callable[[list[Buffer | None]], None]
    describe: str
    uses: tuple[int, ...]  # the slots it reads or writes
    outputs: tuple[int, ...]  # the slots it gives their values (a realize cut short records those of the steps that ran)
    kernel: KernelLaunch | None = None
    matmul: MatmulLaunch | None = None
    overwrites: tuple[int, ...] = ()  # the slots whose buffers it writes in place (an assign's target)
    info: _prof.StepInfo | None = None  # what the profiler records of it (CompiledSchedule._describe_step)


class CompiledSchedule:
    """A schedule with its kernels compiled, runnable on any buffers for its slots."""

    def __init__(self, schedule: Schedule, tiered: bool = False):
        """tiered: kernels not compiled yet may start on numpy while they compile (ug_core.tiers;
        realize does this, ug.jit traces do not: a traced function is meant to be hot)."""
        self.schedule = schedule
        self.tiered = tiered
        # a matmul's epilogue kernel runs tiered, unfused: realize keeps no replay of this
        # schedule, so that a later realize fuses it once it is compiled (_tiers_epilogue)
        self.provisional = False
        self.slots: list[Node] = []
        self._slot_of: dict[int, int] = {}
        self.steps: list[_Step] = []
        self.debug = debug_level()  # read once: replays (ug.jit) must not pay for os.environ
        items = schedule.items
        i = 0
        while i < len(items):
            item = items[i]
            after = items[i + 1] if i + 1 < len(items) else None
            if isinstance(item, MatmulItem) and isinstance(after, KernelItem) and _is_epilogue(item, after):
                if not self._tiers_epilogue(after):
                    self.steps.append(self._compile_with_epilogue(item, after))
                    self._describe_step(item, after)
                    i += 2
                    continue
                self.provisional = tiers.mode() == "auto"
            self.steps.append(self._compile(item))
            self._describe_step(item)
            i += 1
        self.infos = [step.info for step in self.steps if step.info is not None]   # (each has one)
        # slots of lazy nodes whose buffer an in-place assign overwrote (Schedule.clobbered):
        # they stay lazy instead of getting a buffer that holds another value
        self.clobbered = frozenset(self._slot_of[id(n)] for n in schedule.clobbered if id(n) in self._slot_of)
        self.last_use = _last_uses(self.steps, len(self.slots))
        # what `run` does, as one callable: ug.jit replays call this directly, and most traced
        # functions fuse into a single kernel, whose step function then is the whole run. It
        # holds the steps, not `self`: a bound method stored on self is a reference cycle, which
        # only the cyclic GC frees, and until then the slots keep every node of the schedule
        # (and so every intermediate buffer) alive.
        self.runner: Callable[[list[Buffer | None]], object] = _runner(self.steps, self.debug)

    def slot(self, node: Node) -> int:
        i = self._slot_of.get(id(node))
        if i is None:
            i = self._slot_of[id(node)] = len(self.slots)
            self.slots.append(node)
        return i

    def _describe_step(self, item: KernelItem | MatmulItem | CustomItem | CopyItem | SortItem | FftItem | AttentionItem,
                       epilogue: KernelItem | None = None) -> None:
        """Give the step just compiled from `item` (and its epilogue) its StepInfo."""
        step = self.steps[-1]
        out = item.outputs[0] if isinstance(item, KernelItem) else item.out
        devices = tuple({id(d): d for d in (registry.get(n.device) for n in item.buffers)}.values())
        name, flops, program = item.kind, 0, 0
        if isinstance(item, KernelItem):
            name = item.kernel.name
            program = id(step.kernel.program) if step.kernel is not None else 0
        elif isinstance(item, MatmulItem):
            flops = 2 * prod(item.spec.out_shape) * item.spec.a_view.shape[-1]
            if epilogue is not None:
                name = f"matmul + {epilogue.kernel.name}"
                device = registry.get(out.device)   # (the epilogue's program, without counting a lookup)
                found = compile_cache.programs.peek((device.name, device.version, epilogue.kernel.key()))
                program = id(found) if found is not None else 0
        elif isinstance(item, AttentionItem):
            spec = item.spec
            flops = 2 * prod(spec.out_shape[:-1]) * spec.k_view.shape[-2] * (spec.k_view.shape[-1] + spec.out_shape[-1])
        elif isinstance(item, CustomItem):
            name = _fn_name(item.fn).strip("'")
        step.info = _prof.StepInfo(item.kind, name, out.device, devices, step.uses, flops, step.describe, program)

    def _allocator(self, node: Node) -> Callable[[list[Buffer | None]], None]:
        i = self.slot(node)
        device = registry.get(node.device)
        size, dtype = prod(node.shape), node.dtype

        def ensure(bufs: list[Buffer | None]) -> None:
            if bufs[i] is None:
                bufs[i] = Buffer(device, size, dtype)
        return ensure

    def _tiers_epilogue(self, item: KernelItem) -> bool:
        """Whether a matmul's epilogue kernel runs as a step of its own, tiered: it is not
        compiled and may start on numpy (the fused launch needs its program; the two steps
        are what the fused launch does where the device declines it)."""
        if not self.tiered or tiers.mode() == "1":
            return False
        device = registry.get(item.outputs[0].device)
        return (tiers.qualifies(device, item.kernel, tiers.mode() == "0")
                and compile_cache.programs.peek(compile_cache.key(device, item.kernel)) is None)

    def _program(self, device: Device, kernel: Kernel, tiered: bool) -> tuple[Program, tiers.TieredKernel | None]:
        """A kernel's program (compile_cache.get), or tiered, compile_cache.tiered's."""
        if not tiered:
            return compile_cache.get(device, kernel), None
        return compile_cache.tiered(device, kernel, self.debug)

    def _compile(self, item: KernelItem | MatmulItem | CustomItem | CopyItem | SortItem | FftItem | AttentionItem,
                 tiered: bool | None = None) -> _Step:
        """The step of one item; tiered: whether a kernel item may start on numpy (self.tiered)."""
        if tiered is None:
            tiered = self.tiered
        idx = [self.slot(n) for n in item.buffers]
        if isinstance(item, KernelItem):
            device = registry.get(item.outputs[0].device)
            program, tier = self._program(device, item.kernel, tiered)
            # outputs that write into another slot's buffer (assign) and outputs that need a
            # fresh buffer, as plain tuples: this closure is the whole per-kernel cost of a replay
            aliases: list[tuple[int, int]] = []
            fresh: list[tuple[int, Device, int, np.dtype]] = []
            for out in item.outputs:
                if out in item.alias:
                    aliases.append((self.slot(item.alias[out]), self.slot(out)))
                else:
                    fresh.append((self.slot(out), registry.get(out.device), prod(out.shape), out.dtype))
            data = KernelLaunch(device, program, idx, aliases, fresh)
            bind, gather = data.bind_outputs, data.gatherer()
            if tier is not None:
                def run_tiered(bufs: list[Buffer | None]) -> None:
                    bind(bufs)
                    tier.launch(gather(bufs))   # (numpy, then the compiled program: tiers.TieredKernel)
                return _Step(run_tiered, item.describe() + (" [tiered: numpy until compiled]" if self.debug else ""), tuple(idx),
                             tuple(dst for _, dst in aliases) + tuple(f[0] for f in fresh),
                             None, overwrites=tuple(src for src, _ in aliases))
            launch = device.launcher(program)

            def run_kernel(bufs: list[Buffer | None]) -> None:
                bind(bufs)
                launch(gather(bufs))
            # (UG_DEBUG: the tier that runs it; a tiered one's runs log theirs, tiers.TieredKernel)
            describe = item.describe() + (" [tier 1: compiled]" if self.debug and tiered else "")
            return _Step(run_kernel, describe, tuple(idx), tuple(dst for _, dst in aliases) + tuple(f[0] for f in fresh),
                         data, overwrites=tuple(src for src, _ in aliases))
        if isinstance(item, MatmulItem):
            device = registry.get(item.out.device)
            alloc = self._allocator(item.out)
            spec = item.spec

            def run_matmul(bufs: list[Buffer | None]) -> None:
                alloc(bufs)
                device.matmul(bufs[idx[0]], bufs[idx[1]], bufs[idx[2]], spec)  # type: ignore[arg-type]
            return _Step(run_matmul, item.describe(), tuple(idx), (idx[0],), matmul=MatmulLaunch(device, spec, *idx))
        if isinstance(item, CustomItem):
            alloc = self._allocator(item.out)
            shapes = [n.shape for n in item.inputs]
            out_shape, fn = item.out.shape, item.fn

            def run_custom(bufs: list[Buffer | None]) -> None:
                alloc(bufs)
                arrays = [bufs[i].numpy().reshape(s) for i, s in zip(idx[1:], shapes)]  # type: ignore[union-attr]
                out_dtype = bufs[idx[0]].dtype  # type: ignore[union-attr]
                out = np.zeros(out_shape, dtype=out_dtype)
                result = fn(out, *arrays)
                # what is copied back is `out`: a returned array would be dropped (the result
                # silently zeros), and a resized one would not fit the buffer; returning `out`
                # itself is fine (numpy's `np.add(a, b, out=out)` does)
                if result is not None and result is not out:
                    raise TypeError(f"custom op {_fn_name(fn)} returned a {type(result).__name__}; it must fill "
                                    f"`out` in place (out[...] = ...) and return None (or `out`)")
                if out.shape != out_shape or out.dtype != out_dtype:
                    raise ValueError(f"custom op {_fn_name(fn)} changed `out` from shape {out_shape} {out_dtype} to "
                                     f"shape {out.shape} {out.dtype}; it must fill `out` in place (out[...] = ...), "
                                     f"not resize, reshape or replace it")
                bufs[idx[0]].copy_in(out)  # type: ignore[union-attr]
            return _Step(run_custom, item.describe(), tuple(idx), (idx[0],))
        if isinstance(item, SortItem):
            alloc = self._allocator(item.out)
            sort, sort_spec = registry.get(item.out.device).sort, item.spec

            def run_sort(bufs: list[Buffer | None]) -> None:
                alloc(bufs)
                sort(bufs[idx[0]], bufs[idx[1]], sort_spec)  # type: ignore[arg-type]
            return _Step(run_sort, item.describe(), tuple(idx), (idx[0],))
        if isinstance(item, FftItem):
            alloc = self._allocator(item.out)
            fft, fft_spec = registry.get(item.out.device).fft, item.spec

            def run_fft(bufs: list[Buffer | None]) -> None:
                alloc(bufs)
                fft(bufs[idx[0]], bufs[idx[1]], fft_spec)  # type: ignore[arg-type]
            return _Step(run_fft, item.describe(), tuple(idx), (idx[0],))
        if isinstance(item, AttentionItem):
            alloc = self._allocator(item.out)
            attention, attention_spec = registry.get(item.out.device).attention, item.spec
            has_mask = attention_spec.mask_view is not None

            def run_attention(bufs: list[Buffer | None]) -> None:
                alloc(bufs)
                attention(bufs[idx[0]], bufs[idx[1]], bufs[idx[2]], bufs[idx[3]],  # type: ignore[arg-type]
                          bufs[idx[4]] if has_mask else None, attention_spec)
            return _Step(run_attention, item.describe(), tuple(idx), (idx[0],))
        if isinstance(item, CopyItem):
            alloc = self._allocator(item.out)

            def run_copy(bufs: list[Buffer | None]) -> None:
                alloc(bufs)
                bufs[idx[1]].device.synchronize()  # type: ignore[union-attr]
                bufs[idx[0]].copy_in(bufs[idx[1]].numpy())  # type: ignore[union-attr]
            return _Step(run_copy, item.describe(), tuple(idx), (idx[0],))
        raise AssertionError(item)

    def _compile_with_epilogue(self, mm: MatmulItem, item: KernelItem) -> _Step:
        """A matmul and the elementwise kernel right after it that consumes its product, as one
        step: `Device.matmul_epilogue` where the device takes it, else the two steps."""
        matmul_step, kernel_step = self._compile(mm), self._compile(item, tiered=False)   # (needs the program)
        launch, product = kernel_step.kernel, matmul_step.matmul
        assert launch is not None and product is not None
        device, program, spec = launch.device, launch.program, product.spec
        out, a, b = product.out, product.a, product.b
        alloc = self._allocator(mm.out)
        bind, gather = launch.bind_outputs, launch.gatherer()

        def run_fused(bufs: list[Buffer | None]) -> None:
            alloc(bufs)
            bind(bufs)
            if not device.matmul_epilogue(bufs[out], bufs[a], bufs[b], spec, program, gather(bufs)):  # type: ignore[arg-type]
                matmul_step.run(bufs)
                kernel_step.run(bufs)
        return _Step(run_fused, f"{matmul_step.describe} + epilogue {kernel_step.describe}",
                     matmul_step.uses + kernel_step.uses, matmul_step.outputs + kernel_step.outputs,
                     overwrites=kernel_step.overwrites)

    def run(self, bufs: list[Buffer | None], drop: frozenset[int] = frozenset(), done: list[int] | None = None
            ) -> list[Buffer | None]:
        """Run the steps on `bufs` (one per slot), letting go of the slots in `drop` after
        their last use, counting the steps that ran in done[0] (see _run_on)."""
        if self.debug >= 1 or _prof.active:
            _run_timed([step.run for step in self.steps], self.infos, "realize", bufs, self.last_use, drop, done)
            return bufs
        _run_dropping([step.run for step in self.steps], self.last_use, bufs, drop, done)
        return bufs

    def run_all(self, bufs: list[Buffer | None]) -> None:
        """`runner`, or the timed path while a profile records (ug.jit's first run)."""
        run_steps(self.runner, self.steps, bufs, "ug.jit first run")

    @property
    def effects(self) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """Per step, the slots it gives values and the slots whose buffers it overwrites (_run_on)."""
        return [(step.outputs, step.overwrites) for step in self.steps]


def _runner(steps: list[_Step], debug: int) -> Callable[[list[Buffer | None]], object]:
    """CompiledSchedule.run as a function of the steps (see CompiledSchedule.runner); with
    UG_DEBUG, one that prints the table of each run."""
    if debug >= 1:
        runs, infos = [step.run for step in steps], [step.info for step in steps]

        def run_logged(bufs: list[Buffer | None]) -> list[Buffer | None]:
            with _prof.Profile(thread_only=True) as p:
                _run_timed(runs, infos, "ug.jit replay", bufs)  # type: ignore[arg-type]
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


def _last_uses(steps: list[_Step], n_slots: int) -> list[tuple[int, ...]]:
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


def _run_dropping(runs: list[Callable[[list[Buffer | None]], None]], last_use: list[tuple[int, ...]],
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


def _run_timed(runs: list[Callable[[list[Buffer | None]], None]], infos: list[_prof.StepInfo], label: str,
               bufs: list[Buffer | None], last_use: list[tuple[int, ...]] | None = None,
               drop: frozenset[int] = frozenset(), done: list[int] | None = None) -> None:
    """_run_dropping's timed twin (UG_DEBUG >= 1, or a profile recording): run the steps one by
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


def run_steps(runner: Callable[[list[Buffer | None]], object], steps: list[_Step], bufs: list[Buffer | None],
              label: str = "ug.jit replay") -> None:
    """runner(bufs), the compiled steps' run; while a profile records, the timed path (which
    records them) instead: ug.jit's replays and first run."""
    if _prof.active:
        _run_timed([step.run for step in steps], [step.info for step in steps], label, bufs)  # type: ignore[misc]
    else:
        runner(bufs)


def _fn_name(fn: Callable[..., object]) -> str:
    """A custom op's function as its errors name it: 'module.qualname', else its repr."""
    name = getattr(fn, "__qualname__", None)
    module = getattr(fn, "__module__", None)
    return f"'{module}.{name}'" if name and module else repr(fn)


def _is_epilogue(mm: MatmulItem, item: KernelItem) -> bool:
    """Whether `item` may run as `mm`'s epilogue (see Device.matmul_epilogue): it comes right
    after the matmul (so its other inputs are ready), on the same device whose class offers
    the hook, has no reductions, iterates over the product's elements and reads the product
    only through the identity view, and writes no operand of the matmul in place."""
    device = registry.get(mm.out.device)
    if type(device).matmul_epilogue is Device.matmul_epilogue or item.outputs[0].device != mm.out.device:
        return False
    kernel = item.kernel
    if kernel.reductions or kernel.axes or prod(kernel.outer) != prod(mm.out.shape):
        return False
    if any(target is mm.a or target is mm.b for target in item.alias.values()):
        return False
    product = {j for j, node in enumerate(item.buffers) if node is mm.out}
    if not product:
        return False
    identity = (View(kernel.outer, contiguous_strides(kernel.outer), 0),)
    for store in kernel.stores:
        for expr in toposort(store.expr):
            if expr.op is Op.LOAD and expr.arg[0] in product and tuple(expr.arg[1]) != identity:
                return False
            if expr.op is Op.GATHER and expr.arg in product:  # reads the product anywhere
                return False
    return True


def run_schedule(schedule: Schedule) -> CompiledSchedule | None:
    """Compile and run a schedule, then give every produced node its buffer; the compiled
    schedule (None when there was nothing to run)."""
    if not schedule.items:
        return None
    if debug_level() < 1:
        compiled = compile_schedule(schedule, tiered=True)
        _run_on(compiled.run, compiled.slots, compiled.clobbered, schedule.targets, compiled.effects)
        schedule.adopt_stand_ins()
        return compiled
    _log(str(schedule))
    # UG_DEBUG's table is a profile's, of this thread's compiles and runs of this schedule
    with _prof.Profile(thread_only=True) as p:
        compiled = compile_schedule(schedule, tiered=True)
        _run_on(compiled.run, compiled.slots, compiled.clobbered, schedule.targets, compiled.effects)
    schedule.adopt_stand_ins()
    _log(str(p.table(per_run=True)))
    return compiled


def compile_schedule(schedule: Schedule, tiered: bool = False) -> CompiledSchedule:
    """CompiledSchedule(schedule, tiered), as one compile phase: a schedule whose new kernels
    take long to compile shows progress on stderr, and a profile records the phase
    (ug_core.profiler)."""
    with _prof.compile_phase(len(schedule.kernels)):
        return CompiledSchedule(schedule, tiered=tiered)


def _intermediates(slots: list[Node], bufs: list[Buffer | None], clobbered: frozenset[int],
                   targets: list[Node]) -> frozenset[int]:
    """The slots whose buffers may go after their last use (see _run_on): computed here, no
    target, held by no tensor, and read only by nodes that have a buffer or get one in this
    run. (A reader that stays lazy, e.g. fused into a kernel but held by a tensor, would compute
    it again from its sources later, and an in-place write may have overwritten those since.)"""
    computed = {id(n) for i, (n, b) in enumerate(zip(slots, bufs)) if b is None and i not in clobbered}
    keep = {id(t) for t in targets}
    drop = []
    for i, (node, buf) in enumerate(zip(slots, bufs)):
        if buf is not None or i in clobbered or node._creator or id(node) in keep:
            continue
        if all(type(r) is Node and (r.buffer is not None or id(r) in computed) for r in node.readers()):
            drop.append(i)
    return frozenset(drop)


@dataclass(frozen=True)
class Scratch:
    """A replay's slot for a node the scheduler's device pass built (schedule.device_pass), which
    no graph of the structure has: a fresh placeholder per replay holds its buffer."""

    sig: tuple[tuple[int, ...], np.dtype, str]

    def node(self) -> Node:
        return new_node(Op.BUFFER, (), None, self.sig)


@dataclass
class _Replay:
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

    def run(self, bufs: list[Buffer | None], drop: frozenset[int] = frozenset(), done: list[int] | None = None) -> None:
        _run_dropping(self.steps, self.last_use, bufs, drop, done)

    def run_timed(self, bufs: list[Buffer | None], drop: frozenset[int] = frozenset(), done: list[int] | None = None
                  ) -> None:
        """`run` while a profile records."""
        _run_timed(self.steps, self.infos, "realize (replay)", bufs, self.last_use, drop, done)


def realize_nodes(targets: list[Node]) -> None:
    """Compute the targets' values and give them (and every node the schedule realizes on the
    way) their buffers: ug.realize and Tensor.realize.

    A graph with the structure of one realized before (structure.graph_key: the same ops,
    shapes, dtypes and constants, reading other buffers) runs that one's compiled steps on its
    own buffers, without scheduling again: for a small graph, scheduling and looking up its
    programs cost far more than running them. UG_DEBUG >= 1 always schedules, to show it.

    It holds graph_lock throughout: a realize in another thread would otherwise walk this
    graph while this one records its buffers (and drops the nodes' sources), or run the same
    in-place write a second time on the buffer this one already wrote."""
    with graph_lock:
        _realize_nodes(targets)


def _realize_nodes(targets: list[Node]) -> None:
    targets = unrealized(targets)
    if not targets:
        return
    nodes = walk(targets)
    structure = graph_key(nodes, targets) if debug_level() < 1 else None
    # (kept steps hold device objects: a device registered again under its name is another one)
    key = None if structure is None else (registry.generation, structure)
    cache = compile_cache
    try:
        replay = cache.schedules.get(key) if key is not None else None
    except TypeError:  # an unhashable argument (a custom op's callable)
        key = replay = None
    if replay is not None:
        cache.programs.hits += replay.programs   # (each program it reuses counts as a hit)
        slot_nodes = [nodes[i] if isinstance(i, int) else i.node() if isinstance(i, Scratch) else i for i in replay.slots]
        _run_on(replay.run if not _prof.active else replay.run_timed, slot_nodes, replay.clobbered, targets,
                replay.effects)
        return
    looked_up = cache.hits + cache.misses
    schedule = create_schedule(targets, nodes)   # (the walk above: the graph is walked once)
    position = {id(n): i for i, n in enumerate(nodes)}
    built: set[int] = set()   # the device pass's nodes: a replay makes a scratch node for each
    if schedule.replaced:
        built = {id(n) for n in walk(schedule.targets)} - position.keys()
        for original, stand_in in schedule.replaced.items():   # (its buffer goes to the original)
            if id(original) in position:
                position[id(stand_in)] = position[id(original)]
    compiled = run_schedule(schedule)
    if compiled is None:
        return
    slots = [position.get(id(n), Scratch(n.sig) if id(n) in built else n if n.realized else None)
             for n in compiled.slots]
    if key is not None and None not in slots and not compiled.provisional:
        steps = [step.run for step in compiled.steps]
        cache.keep_schedule(key, _Replay(steps, slots, cache.hits + cache.misses - looked_up,  # type: ignore[arg-type]
                                         compiled.last_use, compiled.clobbered, compiled.effects,
                                         compiled.infos))


def _run_on(run: Callable[[list[Buffer | None], frozenset[int], list[int]], object], slots: list[Node],
            clobbered: frozenset[int], targets: list[Node],
            effects: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> None:
    """Run compiled steps on the buffers of these slot nodes, then give each node that had
    none the buffer the steps produced for it (but the clobbered ones, see Schedule.clobbered).

    An intermediate's buffer is let go after the last step that uses it, so a chain of k
    matmuls holds two or three products at a time, not k (see _intermediates for which).

    A run cut short (Ctrl-C between two steps, or an error such as a custom op's) still gives
    the nodes of the steps that ran their buffers: `effects` says per step which slots it
    gives values (a slot that several steps write, a partial write's copy of the old value
    and then the write, is done when the last one ran) and which slots' buffers it writes in
    place. A node whose step ran but whose buffer a step that ran overwrote is left out (in a
    whole run these are `clobbered`). Why: a step that wrote a buffer in place has overwritten
    the value its node's sources read, so left lazy, that node would compute the write again
    on the written value; and a lazy target whose buffer a later write would take keeps its
    own value while that write has not run. The nodes of the steps that did not run stay lazy
    and compute later from sources nothing has overwritten (_order runs every reader of an old
    value before the write that overwrites it, and an overwritten node is one nothing observes
    after). The run and this record are one critical section (faults.defer_interrupts),
    interrupted only between two steps."""
    bufs: list[Buffer | None] = [n.buffer for n in slots]
    drop = _intermediates(slots, bufs, clobbered, targets)
    done = [0]
    with defer_interrupts:
        try:
            run(bufs, drop, done)
        except BaseException:
            ran = done[0]
            last: dict[int, int] = {}   # slot -> the last step giving it its value (a partial write
            for k, (made, _) in enumerate(effects):   # into a fresh buffer is a copy, then the write)
                for slot in made:
                    last[slot] = k
            overwritten = {slot for _, written in effects[:ran] for slot in written}
            for i, k in last.items():
                node, buf = slots[i], bufs[i]
                if k < ran and i not in overwritten and not node.realized and buf is not None:
                    node.set_buffer(buf)
            raise
        for i, (node, buf) in enumerate(zip(slots, bufs)):
            if not node.realized and buf is not None and i not in clobbered:
                node.set_buffer(buf)
