"""A device assembled from kit parts: the core runs lower -> render -> compile -> load -> launch.

A backend supplies a `DeviceInfo`, a `Renderer`, a `Compiler`, an `Allocator` and a `Runtime`
(binary -> loaded program; program + buffers -> run) and subclasses nothing else; `KitDevice`
is the `ug_core.device.Device` the scheduler and runtime talk to. A backend that wants its own
matmul, fast launch paths or epilogues overrides those methods of KitDevice, as it would on
Device; everything else (the buffer pool, the disk cache, the default matmul, empty launches,
UG_DEBUG output, compile errors with the source) is the core's.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..cache import Cache, declare
from ..device import Buffer, CompileError, Device, FftSpec, MatmulSpec, Program, RenderError, SortSpec
from ..kernel_ir import Kernel
from ..loop_ir import LoopProgram, Opc
from ..legalize import legalize
from ..opset import op_set
from ..lower import LowerOptions, lower
from .allocator import Allocator, CachingAllocator
from .compiler import CachedCompiler, Compiler
from . import gpufft, gpusort
from .hostfft import HostFft
from .hostsort import HostSort
from .matmul import matmul_kernel
from .renderer import Renderer, renderer_class

# the compiled gpu sort and fft passes by shape: a cache per device, made on first use
_GPU_SORTS, _GPU_FFTS = declare("kit.gpu_sorts", 64), declare("kit.gpu_ffts", 64)


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

    @abc.abstractmethod
    def load(self, binary: bytes, program: LoopProgram, name: str) -> Any:
        """The loaded entry point `name` of `binary` (what `launch` gets)."""

    @abc.abstractmethod
    def launch(self, loaded: Any, program: LoopProgram, handles: list[Any]) -> None:
        """Run a loaded program on allocations (Allocator handles) in argument order.
        Never called for an empty program (global size 0): the core skips those."""

    def synchronize(self) -> None:
        """Wait for launched work (a runtime that runs synchronously need not override this)."""


@dataclass
class _Loaded:
    program: LoopProgram
    entry: Any


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
        # every Buffer calls allocate, and free from its __del__, and ug.jit's callers synchronize
        # after each tiny replay: the pool's and the runtime's own methods, one call less each,
        # unless a subclass overrides them
        for method, direct in (("allocate", self.memory.allocate), ("free", self.memory.free),
                               ("synchronize", runtime.synchronize)):
            if getattr(type(self), method) is getattr(KitDevice, method):
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
    # shared memory and global steps (kit.gpusort); else the core's bitonic kernels
    sort_threads = 1

    def sorts(self) -> bool:
        return self._sorts_on_host() or self.info.lower_options.target == "gpu"

    def _sorts_on_host(self) -> bool:
        return type(self.raw).host_view is not Allocator.host_view

    def sort(self, out: Buffer, src: Buffer, spec: SortSpec) -> None:
        if self._sorts_on_host():
            self._host_sort_rows(out, src, spec)
        elif self.info.lower_options.target == "gpu":
            self._gpu_sort(out, src, spec)
        else:
            raise NotImplementedError(f"device {self.name!r} has no sort of its own (its memory is not the host's)")

    def _host_sort_rows(self, out: Buffer, src: Buffer, spec: SortSpec) -> None:
        if self._host_sort is None:
            self._host_sort = HostSort(self.sort_threads)
        self.synchronize()
        keys = self.host_view(src.handle, src.nbytes)
        result = self.host_view(out.handle, out.nbytes)
        assert keys is not None and result is not None
        self._host_sort.run(keys.view(src.dtype)[: spec.rows * spec.n].reshape(spec.rows, spec.n),
                            result.view(out.dtype)[: spec.rows * spec.k].reshape(spec.rows, spec.k), spec)

    _host_sort: HostSort | None = None

    def _gpu_sort(self, out: Buffer, src: Buffer, spec: SortSpec) -> None:
        """kit.gpusort's programs, compiled once per shape; each launch gets its step (log2 j,
        log2 block) in a small buffer of its own, written once per shape too."""
        opts = self.info.lower_options
        plan = gpusort.plan(spec, src.dtype, out.dtype, opts.local_size, opts.max_global_size)
        if self._gpu_sorts is None:
            self._gpu_sorts = Cache.of(_GPU_SORTS)
        prepared = self._gpu_sorts.get(plan)
        if prepared is None:
            programs = [self.compile_program(self.legalize(p), p.name)
                        for p in gpusort.programs(plan)]
            launches = gpusort.launches(plan)
            steps = {step: Buffer(self, 2, np.dtype(np.int32)).copy_in(np.array(step, np.int32))
                     for step in dict.fromkeys(step for _, step in launches)}
            prepared = self._gpu_sorts[plan] = [(programs[which].handle, steps[step]) for which, step in launches]
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

    _gpu_sorts: Cache[gpusort.SortPlan, list[tuple[Any, Buffer]]] | None = None

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
        if self._gpu_ffts is None:
            self._gpu_ffts = Cache.of(_GPU_FFTS)
        prepared = self._gpu_ffts.get(plan)
        if prepared is None:
            programs = [self.compile_program(self.legalize(p), p.name).handle
                        for p in gpufft.programs(plan)]
            table = gpufft.table(plan)
            prepared = self._gpu_ffts[plan] = (programs, Buffer(self, table.size, table.dtype).copy_in(table))
        programs, table_buffer = prepared
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

    _gpu_ffts: Cache[gpufft.FftPlan, tuple[list[Any], Buffer]] | None = None

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
        return legalize(program, self.capabilities, self.dtypes, self.op_set_version)

    def lower(self, kernel: Kernel) -> LoopProgram:
        """The loop program the renderer gets: lowered for this target, then legalized for its
        capabilities and op-set version (ug_core.legalize)."""
        program = self.lower_loop(kernel)
        try:
            return self.legalize(program)
        except RenderError as e:
            raise CompileError(f"{self.name}: cannot compile {program.name}: {e}", str(program)) from None

    def render_program(self, program: LoopProgram) -> Any:
        """The renderer's output for `program`: source text, or what the backend's compiler takes."""
        try:
            return self.make_renderer().render(program, c_name(program.name))
        except RenderError as e:
            raise CompileError(f"{self.name}: cannot render {program.name}: {e}", str(program)) from None

    def render(self, kernel: Kernel) -> str:
        return str(self.render_program(self.lower(kernel)))

    def compile(self, kernel: Kernel) -> Program:
        return self.compile_program(self.lower(kernel), kernel.name)

    def compile_program(self, program: LoopProgram, name: str) -> Program:
        """A Program running a legalized loop program (a kernel's, or one the backend built)."""
        if program.is_empty:
            return Program(name, _Loaded(program, None), str(program), program.global_size, program.local_size)
        source = self.render_program(program)
        entry_name = c_name(program.name)
        # a cached binary the runtime refuses to load is dropped and compiled again (CachedCompiler.load)
        entry = self.compiler.load(source, entry_name, lambda binary: self.runtime.load(binary, program, entry_name))
        text = source if isinstance(source, str) else str(program)   # what a CompileError or UG_DEBUG shows
        return Program(name, _Loaded(program, entry), text, program.global_size, program.local_size)

    def run(self, program: Program, buffers: list[Buffer]) -> None:
        loaded: _Loaded = program.handle
        if loaded.entry is not None:
            self.runtime.launch(loaded.entry, loaded.program, [b.handle for b in buffers])

    def launcher(self, program: Program) -> Callable[[list[Buffer]], None]:
        loaded: _Loaded = program.handle
        if loaded.entry is None:
            return lambda buffers: None
        launch, entry, lp = self.runtime.launch, loaded.entry, loaded.program
        return lambda buffers: launch(entry, lp, [b.handle for b in buffers])

    # -- matmul: a kernel of the core's (a backend with a faster one overrides this)
    def matmul(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec) -> None:
        from ..runtime import compile_cache  # (the runtime imports the device layer)

        program = compile_cache.get(self, matmul_kernel(spec, a.size, b.size))
        self.run(program, [out, a, b])


def c_name(name: str) -> str:
    """The entry point's name for a kernel name: an identifier for a kernel name (letters, digits, underscores; not starting with a digit)."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "kernel"
    return out if not out[0].isdigit() else "k_" + out
