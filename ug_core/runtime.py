"""Compiling a schedule: each item's program through the compile cache (and the tiers), its
buffers allocated and its launch bound, as steps (ug_core.steps); execute.py runs them.

A `CompiledSchedule` is a list of steps over numbered buffer slots, so it can be run
again on other buffers: `ug.jit` replays one with new inputs without scheduling again.
A matmul followed by the elementwise kernel that consumes its product (a bias, an activation)
becomes one step, which a device may run as one launch (`Device.matmul_epilogue`).
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Hashable

import numpy as np

from . import profiler as _prof
from . import steps as _steps
from . import tiers
from .cache import Cache
from .device import Buffer, CompileError, Device, Program
from .env import env_int
from .faults import register_core_cache
from .graph import Node
from .kernel_ir import Kernel, toposort
from .ops import Op
from .plugins import registry
from .schedule import AttentionItem, CopyItem, CustomItem, FftItem, KernelItem, MatmulItem, Schedule, SortItem
from .steps import KernelLaunch, MatmulLaunch, Replay, Step, last_uses, runner
from .view import View, contiguous_strides, prod


def debug_level() -> int:
    """$UG_DEBUG as an int (0 when unset or not a number). Read on every realize: the parse of
    the last value seen is kept, so a realize pays one environment lookup."""
    global _debug
    raw = _environ_get(_DEBUG_KEY)
    seen, level = _debug
    if raw is seen or raw == seen:
        return level
    try:
        level = int(os.environ.get("UG_DEBUG", "0") or 0)
    except ValueError:
        level = 0
    _debug = (raw, level)
    return level


# os.environ's own mapping, read directly: os.environ.get of an unset name raises and catches a
# KeyError inside (about 1 us); its _data is what os.environ[...] = and monkeypatch.setenv
# write, under encodekey's key (elsewhere than CPython's os module: os.environ.get itself)
_environ_data = getattr(os.environ, "_data", None)
_encodekey = getattr(os.environ, "encodekey", None)
_environ_get: Callable[[Any], Any]
if isinstance(_environ_data, dict) and _encodekey is not None:
    _environ_get, _DEBUG_KEY = _environ_data.get, _encodekey("UG_DEBUG")
else:
    _environ_get, _DEBUG_KEY = os.environ.get, "UG_DEBUG"
_debug: tuple[Any, int] = (None, 0)


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
        self.schedules: Cache[Hashable, Replay] = Cache("runtime.schedules", max_entries=MAX_CACHED_SCHEDULES)

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

    def keep_schedule(self, key: Hashable, replay: Replay) -> None:
        self.schedules.put(key, replay)


compile_cache = CompileCache()
register_core_cache(compile_cache)   # (a forked child resets it: see faults)
tiers.on_mode_change(compile_cache.schedules.clear)   # (kept schedules ran in the tiers of the mode before)


class CompiledSchedule:
    """A schedule with its kernels compiled, runnable on any buffers for its slots."""

    def __init__(self, schedule: Schedule, tiered: bool = False):
        """tiered: kernels not compiled yet may start on numpy while they compile (ug_core.tiers;
        realize does this, and ug.jit for a trace's first calls, see jit/trace.py)."""
        self.schedule = schedule
        self.tiered = tiered
        # a matmul's epilogue kernel runs tiered, unfused: realize keeps no replay of this
        # schedule, so that a later realize fuses it once it is compiled (_tiers_epilogue)
        self.provisional = False
        self.slots: list[Node] = []
        self._slot_of: dict[int, int] = {}
        self.steps: list[Step] = []
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
        self.last_use = last_uses(self.steps, len(self.slots))
        # what `run` does, as one callable: ug.jit replays call this directly, and most traced
        # functions fuse into a single kernel, whose step function then is the whole run. It
        # holds the steps, not `self`: a bound method stored on self is a reference cycle, which
        # only the cyclic GC frees, and until then the slots keep every node of the schedule
        # (and so every intermediate buffer) alive.
        self.runner: Callable[[list[Buffer | None]], object] = runner(self.steps, self.debug)

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
                 tiered: bool | None = None) -> Step:
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
                return Step(run_tiered, item.describe() + (" [tiered: numpy until compiled]" if self.debug else ""), tuple(idx),
                             tuple(dst for _, dst in aliases) + tuple(f[0] for f in fresh),
                             None, overwrites=tuple(src for src, _ in aliases))
            launch = device.launcher(program)

            def run_kernel(bufs: list[Buffer | None]) -> None:
                bind(bufs)
                launch(gather(bufs))
            # (UG_DEBUG: the tier that runs it; a tiered one's runs log theirs, tiers.TieredKernel)
            describe = item.describe() + (" [tier 1: compiled]" if self.debug and tiered else "")
            return Step(run_kernel, describe, tuple(idx), tuple(dst for _, dst in aliases) + tuple(f[0] for f in fresh),
                         data, overwrites=tuple(src for src, _ in aliases))
        if isinstance(item, MatmulItem):
            device = registry.get(item.out.device)
            alloc = self._allocator(item.out)
            spec = item.spec

            def run_matmul(bufs: list[Buffer | None]) -> None:
                alloc(bufs)
                device.matmul(bufs[idx[0]], bufs[idx[1]], bufs[idx[2]], spec)  # type: ignore[arg-type]
            return Step(run_matmul, item.describe(), tuple(idx), (idx[0],), matmul=MatmulLaunch(device, spec, *idx))
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
            return Step(run_custom, item.describe(), tuple(idx), (idx[0],))
        if isinstance(item, SortItem):
            alloc = self._allocator(item.out)
            sort, sort_spec = registry.get(item.out.device).sort, item.spec

            def run_sort(bufs: list[Buffer | None]) -> None:
                alloc(bufs)
                sort(bufs[idx[0]], bufs[idx[1]], sort_spec)  # type: ignore[arg-type]
            return Step(run_sort, item.describe(), tuple(idx), (idx[0],))
        if isinstance(item, FftItem):
            alloc = self._allocator(item.out)
            fft, fft_spec = registry.get(item.out.device).fft, item.spec

            def run_fft(bufs: list[Buffer | None]) -> None:
                alloc(bufs)
                fft(bufs[idx[0]], bufs[idx[1]], fft_spec)  # type: ignore[arg-type]
            return Step(run_fft, item.describe(), tuple(idx), (idx[0],))
        if isinstance(item, AttentionItem):
            alloc = self._allocator(item.out)
            attention, attention_spec = registry.get(item.out.device).attention, item.spec
            has_mask = attention_spec.mask_view is not None

            def run_attention(bufs: list[Buffer | None]) -> None:
                alloc(bufs)
                attention(bufs[idx[0]], bufs[idx[1]], bufs[idx[2]], bufs[idx[3]],  # type: ignore[arg-type]
                          bufs[idx[4]] if has_mask else None, attention_spec)
            return Step(run_attention, item.describe(), tuple(idx), (idx[0],))
        if isinstance(item, CopyItem):
            alloc = self._allocator(item.out)

            def run_copy(bufs: list[Buffer | None]) -> None:
                alloc(bufs)
                bufs[idx[1]].device.synchronize()  # type: ignore[union-attr]
                bufs[idx[0]].copy_in(bufs[idx[1]].numpy())  # type: ignore[union-attr]
            return Step(run_copy, item.describe(), tuple(idx), (idx[0],))
        raise AssertionError(item)

    def _compile_with_epilogue(self, mm: MatmulItem, item: KernelItem) -> Step:
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
        return Step(run_fused, f"{matmul_step.describe} + epilogue {kernel_step.describe}",
                     matmul_step.uses + kernel_step.uses, matmul_step.outputs + kernel_step.outputs,
                     overwrites=kernel_step.overwrites)

    def run(self, bufs: list[Buffer | None], drop: frozenset[int] = frozenset(), done: list[int] | None = None
            ) -> list[Buffer | None]:
        """Run the steps on `bufs` (one per slot), letting go of the slots in `drop` after
        their last use, counting the steps that ran in done[0] (see execute._run_on)."""
        if self.debug >= 1 or _prof.active:
            _steps.run_timed([step.run for step in self.steps], self.infos, "realize", bufs, self.last_use, drop, done)
            return bufs
        _steps.run_dropping([step.run for step in self.steps], self.last_use, bufs, drop, done)
        return bufs

    def run_all(self, bufs: list[Buffer | None]) -> None:
        """`runner`, or the timed path while a profile records (ug.jit's first run)."""
        _steps.run_steps(self.runner, self.steps, bufs, "ug.jit first run")

    @property
    def effects(self) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """Per step, the slots it gives values and the slots whose buffers it overwrites (execute._run_on)."""
        return [(step.outputs, step.overwrites) for step in self.steps]


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


def compile_schedule(schedule: Schedule, tiered: bool = False) -> CompiledSchedule:
    """CompiledSchedule(schedule, tiered), as one compile phase: a schedule whose new kernels
    take long to compile shows progress on stderr, and a profile records the phase
    (ug_core.profiler)."""
    with _prof.compile_phase(len(schedule.kernels)):
        return CompiledSchedule(schedule, tiered=tiered)

