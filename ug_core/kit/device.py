"""A device assembled from kit parts: the core runs lower -> legalize -> render -> compile -> load -> launch.

A backend supplies a `DeviceInfo`, a `Renderer`, a `Compiler`, an `Allocator` and a `Runtime`
(binary -> loaded program; program + buffers -> run) and subclasses nothing else; `KitDevice`
is the `ug_core.device.Device` (the runtime's internal protocol) the scheduler and runtime talk
to. The pipeline is the kit's alone, once: `lower_kernel` / `prepare` (lowering, legalization),
`render_entry` (rendering and entry point naming), `KitDevice.compile_program` (the disk cache,
loading, the no-alias variant), `KitDevice.launcher` (the runtime's fast path, the variant where
a launch passes one buffer twice), the buffer pool with its out-of-memory retry, and a program
cache (`KitDevice.cached`). A backend overrides a few hooks (`lower_options`, `lower_loop`,
`renderer_for`) and, to go faster, `matmul`, `matmul_epilogue` and the like; everything else
(the default matmul, sorts and FFTs, empty launches, UG_DEBUG output, compile errors with the
source) is the core's.
"""

from __future__ import annotations

import abc
import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Hashable, TypeVar

import numpy as np

from ..cache import Cache, declare
from ..device import Buffer, CompileError, Device, Program, RenderError
from ..specs import FftSpec, MatmulSpec, SortSpec
from ..kernel_ir import Kernel
from ..loop_ir import LoopProgram, Opc
from ..legalize import legalize
from ..opset import op_set
from ..lower import LowerOptions, lower
from .allocator import Allocator, CachingAllocator
from .compiler import CachedCompiler, Compiler
from . import gpufft, gpusort
from .hostfft import HostFft
from .hostsort import HostSort, SortKernels
from .matmul import matmul_kernel
from .renderer import Renderer, renderer_class


T = TypeVar("T")


@dataclass(frozen=True)
class DeviceInfo:
    """What the core needs to know about a device to lower for it and to schedule for it."""

    name: str                                  # the device name users pass (`device="c"`)
    dtypes: frozenset[np.dtype]                # the dtypes its buffers and kernels take
    lower_options: LowerOptions = LowerOptions()   # target "cpu" or "gpu", workgroup size, ...
    version: str = "0"                         # the backend's version: part of compile-cache keys
    description: str = ""                      # e.g. the hardware's or compiler's name (`ug devices`)
    max_kernel_buffers: int | None = None      # most buffers one kernel may take (None: no limit)
    # what the target does itself, which the core's legalization would otherwise do for it:
    # ug_core.legalize.NATIVE_F16 (float16 ops rounded once), NATIVE_MATH (accurate exp/log/...)
    capabilities: frozenset[str] = field(default_factory=frozenset)


class Runtime(abc.ABC):
    """What a backend supplies to run binaries."""

    # what `load` raises for a binary that does not load (a linker's error): the kit reports it
    # as a CompileError carrying the source
    load_errors: ClassVar[tuple[type[Exception], ...]] = ()

    @abc.abstractmethod
    def load(self, binary: bytes, program: LoopProgram, name: str) -> Any:
        """The loaded entry point `name` of `binary` (what `launch` gets)."""

    @abc.abstractmethod
    def launch(self, loaded: Any, program: LoopProgram, handles: list[Any]) -> None:
        """Run a loaded program on allocations (Allocator handles) in argument order.
        Never called for an empty program (global size 0): the core skips those. It may return
        before the work is done (queued on a stream) if `synchronize` waits for it."""

    def synchronize(self) -> None:
        """Wait for launched work (a runtime that runs synchronously need not override this: the
        kit then copies out without waiting)."""

    def launcher(self, loaded: Any, program: LoopProgram) -> tuple[Callable[..., Any], Callable[[Any], None]] | None:
        """Optional fast path, made once per program: (pack, call), where `call(pack(*handles))`
        launches `loaded` as `launch` would (two functions, so that each can be a C-level
        callable: ug.jit's replays pay for every Python frame). None (the default): the kit calls
        `launch`."""
        return None

    def direct_launcher(self, loaded: Any, program: LoopProgram) -> Callable[..., None] | None:
        """Optional, one call where `launcher` takes two: `launch(*handles)` launches `loaded` as
        `launch` would (ug.jit's single-kernel replays use it, see Device.handle_launcher), for
        the programs where the runtime has one (the cpu's tiny kernels). None (the default):
        `launcher`'s."""
        return None


class Loaded:
    """A kit Program's handle: the legalized loop program, the runtime's loaded entry (None for
    an empty program) and, where the renderer promised distinct buffers (Renderer.noalias), the
    variant without that promise, compiled on the first launch that passes one buffer twice."""

    __slots__ = ("program", "entry", "variant", "launch")

    def __init__(self, program: LoopProgram, entry: Any, variant: "_Variant | None"):
        self.program, self.entry, self.variant = program, entry, variant
        self.launch: Callable[[list[Buffer]], None] | None = None   # KitDevice.launcher's, made once

    def entry_for(self, handles: list[Any]) -> Any:
        """The entry to launch on `handles`: the variant where one allocation is passed twice."""
        if self.variant is None or len(set(handles)) == len(handles):
            return self.entry
        return self.variant.get()


class _Variant:
    """The no-alias variant of a loaded program, made on first use. (What a launcher closes over:
    not the Loaded, which holds the launcher: that would be a reference cycle.)"""

    __slots__ = ("make", "entry")

    def __init__(self, make: Callable[[], Any]):
        self.make, self.entry = make, None

    def get(self) -> Any:
        if self.entry is None:
            self.entry = self.make()
        return self.entry


ENTRY = "ug_kernel"
"""The name a renderer whose entry names are hashes (Renderer.entry_names) renders under, before
the kit renames the entry to the hash of that source."""


def prepare(program: LoopProgram, info: DeviceInfo, renderer: Callable[[], Renderer] | None = None) -> LoopProgram:
    """`program` legalized for a device (ug_core.legalize: its capabilities and dtypes, and its
    renderer's op-set version and the semantics the renderer guards itself; `renderer`: the
    device's renderer class or factory, None for a renderer declaring nothing): exactly what its
    renderer gets. Raises CompileError naming the device and the program."""
    written_for = Renderer if renderer is None else renderer_class(renderer)
    return legalized(program, info.name, frozenset(info.capabilities) | written_for.capabilities, info.dtypes,
                     written_for.op_set_version)


def legalized(program: LoopProgram, device: str, capabilities: frozenset[str], dtypes: frozenset[np.dtype],
              op_set_version: int) -> LoopProgram:
    """`program` legalized (see prepare); a RenderError becomes a CompileError naming `device`."""
    try:
        return legalize(program, capabilities, dtypes, op_set_version)
    except RenderError as e:
        raise CompileError(f"{device}: cannot compile {program.name}: {e}", str(program)) from None


def lower_kernel(kernel: Kernel, info: DeviceInfo, options: LowerOptions | None = None,
                 renderer: Callable[[], Renderer] | None = None) -> LoopProgram:
    """`kernel` lowered for a device (`options`, default `info.lower_options`) and legalized for
    it and its `renderer` (see prepare): the loop program its renderer gets, with no device
    object needed (compile-only tools)."""
    return prepare(lower(kernel, info.lower_options if options is None else options), info, renderer)


def render_entry(renderer: Renderer, program: LoopProgram, device: str = "?") -> tuple[Any, str]:
    """(source, entry point name) of `program`: the entry is named after the kernel (`c_name`), or,
    for a renderer with `entry_names = "hash"`, after a hash of its source. Raises CompileError."""
    try:
        if renderer.entry_names == "hash":
            text = renderer.render(program, ENTRY)
            name = "ug_" + hashlib.sha256(text.encode()).hexdigest()[:24]
            return renderer.rename_entry(text, ENTRY, name), name
        name = c_name(program.name)
        return renderer.render(program, name), name
    except RenderError as e:
        raise CompileError(f"{device}: cannot render {program.name}: {e}", str(program)) from None


PROGRAM_CACHE_SIZE = 256
"""Entries of a KitDevice's program cache (KitDevice.cached): past it, the least recently used
goes."""
_PROGRAMS = declare("kit.programs", PROGRAM_CACHE_SIZE)   # (one per device, made with it)


class KitDevice(Device):
    """A Device built from kit parts (see the module docstring)."""

    def __init__(self, info: DeviceInfo, renderer: Callable[[], Renderer], compiler: Compiler | CachedCompiler,
                 allocator: Allocator, runtime: Runtime):
        """compiler: a Compiler, which the core puts behind its disk cache, or a CachedCompiler the
        backend shares with other parts of its own."""
        self.info = info
        self.name = info.name
        self.version = info.version
        self.dtypes = frozenset(np.dtype(d) for d in info.dtypes)
        self.description = info.description
        self.max_kernel_buffers = info.max_kernel_buffers
        self.make_renderer = renderer
        # what the core hands the renderer: the op set of the version it was written for
        # (ug_core.opset), with guards around the semantics it does not declare (ug_core.legalize)
        written_for = renderer_class(renderer)
        self.op_set_version = written_for.op_set_version
        ops = op_set(self.op_set_version)
        lacking = sorted(dt.name for dt in self.dtypes if not ops.allows(dt))
        if lacking:
            raise ValueError(f"device {info.name!r}: its renderer is written for op-set version {ops.version}, "
                             f"which has no dtype {', '.join(lacking)} (ug_core.opset)")
        if info.lower_options.atomic_int_bits and Opc.ATOMIC not in ops.opcodes:
            raise ValueError(f"device {info.name!r}: LowerOptions.atomic_int_bits asks for ATOMIC, which its "
                             f"renderer's op-set version {ops.version} does not have (ug_core.opset)")
        self.capabilities = frozenset(info.capabilities) | written_for.capabilities
        self.compiler = compiler if isinstance(compiler, CachedCompiler) else CachedCompiler(compiler)
        self.memory = CachingAllocator(allocator)
        self.raw = allocator
        self.runtime = runtime
        self.programs: Cache[Hashable, Any] = Cache.of(_PROGRAMS)   # the program cache (cached)
        # every Buffer calls allocate, and free from its __del__, and ug.jit's callers synchronize
        # after each tiny replay: the pool's and the runtime's own methods, one call less each,
        # unless a subclass overrides them; a runtime that runs synchronously (no synchronize of
        # its own) has nothing to wait for before a copy out
        synchronous = type(runtime).synchronize is Runtime.synchronize
        for method, direct in (("allocate", self.memory.allocate), ("free", self.memory.free),
                               ("synchronize", runtime.synchronize),
                               ("copy_out", allocator.copy_out if synchronous else None)):
            if direct is not None and getattr(type(self), method) is getattr(KitDevice, method):
                setattr(self, method, direct)

    # -- memory: the core's pool around the backend's allocator
    def allocate(self, nbytes: int) -> Any:
        return self.memory.allocate(nbytes)

    def free(self, handle: Any) -> None:
        self.memory.free(handle)

    def handle_allocator(self, nbytes: int) -> tuple[Callable[[], Any], Callable[[], Any], Callable[[Any], None]]:
        return self.memory.handle_allocator(nbytes)

    def copy_in(self, handle: Any, src: np.ndarray) -> None:
        self.raw.copy_in(handle, src)

    def copy_out(self, handle: Any, dst: np.ndarray) -> None:
        self.synchronize()
        self.raw.copy_out(handle, dst)

    def memory_usage(self) -> int:
        return self.memory.memory_usage()

    def host_view(self, handle: Any, nbytes: int) -> np.ndarray | None:
        return self.raw.host_view(handle, nbytes)

    # -- sort: on host memory, numpy's in place (kit.hostsort); a gpu target's, a bitonic sort in
    # shared memory and global steps (kit.gpusort); else Device's round trip through the host
    sort_threads = 1

    def _sorts_on_host(self) -> bool:
        return type(self.raw).host_view is not Allocator.host_view

    def sort(self, out: Buffer, src: Buffer, spec: SortSpec) -> None:
        if self._sorts_on_host():
            self._host_sort_rows(out, src, spec)
        elif self.info.lower_options.target == "gpu":
            self._gpu_sort(out, src, spec)
        else:
            super().sort(out, src, spec)   # (a round trip through the host)

    def _host_sort_rows(self, out: Buffer, src: Buffer, spec: SortSpec) -> None:
        if self._host_sort is None:
            self._host_sort = HostSort(self.sort_threads, self.sort_kernels)
        self.synchronize()
        keys = self.host_view(src.handle, src.nbytes)
        result = self.host_view(out.handle, out.nbytes)
        assert keys is not None and result is not None
        self._host_sort.run(keys.view(src.dtype)[: spec.rows * spec.n].reshape(spec.rows, spec.n),
                            result.view(out.dtype)[: spec.rows * spec.k].reshape(spec.rows, spec.k), spec)

    _host_sort: HostSort | None = None
    sort_kernels: SortKernels | None = None   # native helpers for the host sort's long rows (kit.hostsort)

    def _gpu_sort(self, out: Buffer, src: Buffer, spec: SortSpec) -> None:
        """kit.gpusort's programs, compiled once per shape; each launch gets its step (log2 j,
        log2 block) in a small buffer of its own, written once per shape too."""
        opts = self.info.lower_options
        plan = gpusort.plan(spec, src.dtype, out.dtype, opts.local_size, opts.max_global_size)

        def prepare_sort() -> list[tuple[Loaded, Buffer]]:
            programs = [self.compile_program(self.legalize(p), p.name) for p in gpusort.programs(plan)]
            launches = gpusort.launches(plan)
            steps = {step: Buffer(self, 2, np.dtype(np.int32)).copy_in(np.array(step, np.int32))
                     for step in dict.fromkeys(step for _, step in launches)}
            return [(programs[which].handle, steps[step]) for which, step in launches]
        prepared = self.cached(("sort", plan), prepare_sort)
        size = spec.rows * plan.m
        keys, order = self.memory.allocate(max(1, size * plan.key_dtype.itemsize)), self.memory.allocate(max(1, size * 4))
        try:
            for loaded, step in prepared:
                if loaded.entry is not None:
                    self.runtime.launch(loaded.entry, loaded.program, [keys, order, src.handle, out.handle, step.handle])
            self.synchronize()   # (before the scratch goes back to the pool)
        finally:
            self.memory.free(keys)
            self.memory.free(order)

    # -- fft: on host memory, pocketfft in place (kit.hostfft, over sort_threads threads); a gpu
    # target's, Stockham / Bluestein passes (kit.gpufft); else the default's host round trip
    def fft(self, out: Buffer, src: Buffer, spec: FftSpec) -> None:
        if self._sorts_on_host():
            if self._host_fft is None:
                self._host_fft = HostFft(self.sort_threads)
            self.synchronize()
            x, y = self.host_view(src.handle, src.nbytes), self.host_view(out.handle, out.nbytes)
            assert x is not None and y is not None
            self._host_fft.run(x, y, spec)
        elif self.info.lower_options.target == "gpu":
            self._gpu_fft(out, src, spec)
        else:
            super().fft(out, src, spec)

    _host_fft: HostFft | None = None
    # the shared memory (bytes per workgroup) a gpu transform's rows may take to run all their
    # passes in one program (kit.gpufft.plan); a backend that knows its limit sets it
    fft_shared_bytes = gpufft.SHARED_BYTES

    def _gpu_fft(self, out: Buffer, src: Buffer, spec: FftSpec) -> None:
        """kit.gpufft's passes, compiled once per shape, with the shape's table (twiddles, chirp)
        in a buffer kept with them."""
        if spec.rows == 0:
            return
        opts = self.info.lower_options
        plan = gpufft.plan(spec, opts.local_size, opts.max_global_size, self.fft_shared_bytes)

        def prepare_fft() -> tuple[list[Loaded], Buffer]:
            programs = [self.compile_program(self.legalize(p), p.name).handle for p in gpufft.programs(plan)]
            table = gpufft.table(plan)
            return programs, Buffer(self, table.size, table.dtype).copy_in(table)
        programs, table_buffer = self.cached(("fft", plan), prepare_fft)
        nbytes = plan.scratch_size * spec.dtype.itemsize
        used = plan.scratch_buffers()
        scratch = [self.memory.allocate(nbytes if i < used else 16) for i in range(2)]
        try:
            handles = [scratch[0], scratch[1], src.handle, out.handle, table_buffer.handle]
            for loaded in programs:
                if loaded.entry is not None:
                    self.runtime.launch(loaded.entry, loaded.program, handles)
            self.synchronize()   # (before the scratch goes back to the pool)
        finally:
            for handle in scratch:
                self.memory.free(handle)

    def wrap_host(self, array: np.ndarray) -> Any | None:
        return self.raw.wrap_host(array)

    def after_fork(self, parent: int) -> bool:
        """The pool's lock is new (another thread may have held it at the fork); a backend whose
        memory or runtime does not survive a fork overrides this (see Device.after_fork)."""
        self.memory.after_fork()
        if self._host_sort is not None:
            self._host_sort.after_fork()
        if self._host_fft is not None:
            self._host_fft.after_fork()
        return True

    def pool_bytes(self) -> int:
        return self.memory.pool_bytes()

    def synchronize(self) -> None:
        self.runtime.synchronize()

    # -- compiling: lower, legalize, render, compile (disk cache), load
    def lower_options(self, kernel: Kernel) -> LowerOptions:
        """How to lower `kernel` (a backend may choose per kernel: block sizes, vector widths)."""
        return self.info.lower_options

    def lower_loop(self, kernel: Kernel) -> LoopProgram:
        """`kernel` as loop IR, before legalization (a backend whose limits depend on what the
        lowering produced, such as shared memory, lowers again here)."""
        return lower(kernel, self.lower_options(kernel))

    def legalize(self, program: LoopProgram) -> LoopProgram:
        """`program` as the renderer gets it: legalized (ug_core.legalize) for the device's and the
        renderer's capabilities, the device's dtypes and the renderer's op-set version."""
        return legalized(program, self.name, self.capabilities, self.dtypes, self.op_set_version)

    def lower(self, kernel: Kernel) -> LoopProgram:
        """The loop program the renderer gets: lowered for this target, then legalized for its
        capabilities and op-set version (ug_core.legalize)."""
        return self.legalize(self.lower_loop(kernel))

    def renderer_for(self, program: LoopProgram) -> Renderer:
        """A new renderer for `program` (a backend may choose its settings per program: `cpu`
        prefers narrower vectors for tiny kernels)."""
        return self.make_renderer()

    def render_entry(self, program: LoopProgram, noalias: bool = True) -> tuple[Any, str]:
        """(source, entry point name) of `program` (see kit.render_entry); `noalias=False`: the
        variant for launches that pass one buffer twice, where the renderer promises otherwise."""
        renderer = self.renderer_for(program)
        if not noalias:
            renderer.noalias = False
        return render_entry(renderer, program, self.name)

    def render_program(self, program: LoopProgram) -> Any:
        """The renderer's output for `program`: source text, or what the backend's compiler takes."""
        return self.render_entry(program)[0]

    def render(self, kernel: Kernel) -> str:
        return str(self.render_program(self.lower(kernel)))

    def compile(self, kernel: Kernel) -> Program:
        return self.compile_program(self.lower(kernel), kernel.name)

    def compile_program(self, program: LoopProgram, name: str) -> Program:
        """A Program running a legalized loop program (a kernel's, or one the backend built)."""
        if program.is_empty:
            return Program(name, Loaded(program, None, None), str(program), program.global_size, program.local_size)
        renderer = self.renderer_for(program)
        source, entry_name = render_entry(renderer, program, self.name)
        entry = self._load(program, source, entry_name)
        # a renderer that promised distinct buffers: the variant without, made when first needed
        variant = _Variant(functools.partial(self._load_variant, program)) if renderer.noalias else None
        text = source if isinstance(source, str) else str(program)   # what a CompileError or UG_DEBUG shows
        return Program(name, Loaded(program, entry, variant), text, program.global_size, program.local_size)

    def _load(self, program: LoopProgram, source: Any, entry_name: str) -> Any:
        """The runtime's entry for `source`: its binary from the disk cache or compiled, loaded."""
        runtime = self.runtime
        try:
            return self.compiler.load(source, entry_name, lambda binary: runtime.load(binary, program, entry_name))
        except runtime.load_errors as e:
            raise CompileError(f"{self.name}: could not load {entry_name}: {e}",
                               source if isinstance(source, str) else str(program)) from None

    def _load_variant(self, program: LoopProgram) -> Any:
        return self._load(program, *self.render_entry(program, noalias=False))

    def cached(self, key: Hashable, make: Callable[[], T]) -> T:
        """The program cache: `make()` once per key (programs a backend builds itself, with what
        their launches need: a matmul's, the kit's sort and fft passes), the least recently used
        entry dropped past PROGRAM_CACHE_SIZE. Keys of different kinds must differ (("sort", plan), ...)."""
        found = self.programs.get(key)
        if found is None:
            found = make()
            self.programs[key] = found
        return found

    # -- launching: the runtime's fast path where it has one, the no-alias variant where needed
    def run(self, program: Program, buffers: list[Buffer]) -> None:
        (program.handle.launch or self.launcher(program))(buffers)

    def launcher(self, program: Program) -> Callable[[list[Buffer]], None]:
        loaded: Loaded = program.handle
        if loaded.launch is None:
            loaded.launch = self._launcher(loaded)
        return loaded.launch

    def _launcher(self, loaded: Loaded) -> Callable[[list[Buffer]], None]:
        entry, lp, variant = loaded.entry, loaded.program, loaded.variant
        if entry is None:
            return _launch_nothing
        pack: Callable[..., Any]
        run: Callable[[Any], None]
        fast = self.runtime.launcher(entry, lp)
        if fast is None:
            launch = self.runtime.launch
            if variant is None:
                return lambda buffers: launch(entry, lp, [b.handle for b in buffers])
            pack, run = _handle_list, functools.partial(launch, entry, lp)
        else:
            pack, run = fast
            if variant is None:
                return lambda buffers: run(pack(*[b.handle for b in buffers]))
        aliased: Callable[[list[Any]], None] | None = None   # the variant's, made on the first launch that needs it
        on_handles = self._on_handles

        def launch_checked(buffers: list[Buffer]) -> None:
            nonlocal aliased
            handles = [b.handle for b in buffers]
            if len(set(handles)) == len(handles):
                run(pack(*handles))
                return
            if aliased is None:
                aliased = on_handles(variant.get(), lp)
            aliased(handles)
        return launch_checked

    def _on_handles(self, entry: Any, lp: LoopProgram) -> Callable[[list[Any]], None]:
        """A launch of `entry` on a list of handles."""
        fast = self.runtime.launcher(entry, lp)
        if fast is None:
            return functools.partial(self.runtime.launch, entry, lp)
        pack, run = fast
        return lambda handles: run(pack(*handles))

    def handle_launcher(self, program: Program) -> tuple[Callable[..., Any] | None, Callable[..., None]]:
        """The runtime's direct launch (Runtime.direct_launcher: pack None), else its fast path
        (Runtime.launcher), else its `launch` on a list of the handles.
        The caller guarantees that the buffers written are passed nowhere else: the entry with the
        renderer's no-alias promise is right."""
        loaded: Loaded = program.handle
        if loaded.entry is None:
            return _handle_list, _launch_nothing
        direct = self.runtime.direct_launcher(loaded.entry, loaded.program)
        if direct is not None:
            return None, direct
        fast = self.runtime.launcher(loaded.entry, loaded.program)
        return fast if fast is not None else (_handle_list, functools.partial(self.runtime.launch, loaded.entry, loaded.program))

    def kernel_launcher(self, kernel: Kernel) -> Callable[[list[Buffer]], None]:
        """A launch of a kernel the backend runs itself (a small matmul's reduction kernel)
        through the core's compile cache, one program per kernel, and its tiers: on host memory,
        a kernel not compiled yet runs on numpy while it compiles in the background (ug_core.tiers)."""
        from ..runtime import compile_cache  # (the runtime imports the device layer)

        return compile_cache.launcher(self, kernel)

    # -- matmul: a kernel of the core's (a backend with a faster one overrides this)
    def matmul(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec) -> None:
        from ..runtime import compile_cache  # (the runtime imports the device layer)

        program = compile_cache.get(self, matmul_kernel(spec, a.size, b.size))
        self.run(program, [out, a, b])


def _launch_nothing(buffers: list[Buffer]) -> None:
    """The launch of an empty program."""


def _handle_list(*handles: Any) -> list[Any]:
    return list(handles)


def c_name(name: str) -> str:
    """The entry point's name for a kernel name: an identifier for a kernel name (letters, digits, underscores; not starting with a digit)."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "kernel"
    return out if not out[0].isdigit() else "k_" + out
