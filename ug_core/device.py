"""The device protocol the runtime talks to, and device buffers.

`Device` is internal: the scheduler and the runtime call its methods directly on the hot path (no
hook dispatch per kernel: allocate/free, copy in/out, compile, run, launchers, matmul, sort, fft,
synchronize, memory usage), and they change with the core. Backends are written to the backend
kit (`ug_core.kit`), whose `KitDevice` implements this protocol; `ref` (ref.py), the built-in
interpreter of kernel IR, is the one device that implements it directly. Plugins register a
`DeviceSpec` through the `ug_register_devices` hook (see hookspecs.py); the spec's factory creates
the device the first time it is used.
"""

from __future__ import annotations

import abc
import functools
import signal
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .specs import AttentionSpec, FftSpec, MatmulSpec, SortSpec

if TYPE_CHECKING:
    from .kernel_ir import Kernel
    from .loop_ir import LoopProgram


class RenderError(Exception):
    """A program holds something the device cannot spell: an (op, dtype) pair ug_core.ops does
    not define (the core's legalization says so), or a dtype or feature the target lacks (its
    renderer says so). The device turns it into a CompileError carrying the program."""


class CompileError(RuntimeError):
    """A backend failed to compile a kernel; the message carries the generated source."""

    def __init__(self, message: str, source: str):
        super().__init__(f"{message}\n--- generated source ---\n{source}")
        self.source = source


@dataclass
class Program:
    """A compiled kernel, ready to run. `handle` is whatever the backend needs to launch it."""

    name: str
    handle: Any
    source: str = ""
    global_size: tuple[int, ...] = ()
    local_size: tuple[int, ...] = ()


_host_fallbacks: dict[str, Callable[[np.ndarray, np.ndarray, Any], None]] = {}
"""The host computations Device's defaults run on copies of a device's buffers, by name: "sort"
(kit.hostsort's sort_rows(keys, out, spec)) and "fft" (kit.hostfft's run_numpy in float64).
The kit registers them when imported (the registry imports it, with ref, before it makes any
device); the kit is built on this module, so this module cannot import it."""


def register_host_fallback(name: str, run: Callable[[np.ndarray, np.ndarray, Any], None]) -> None:
    """The kit's call when imported (see _host_fallbacks)."""
    _host_fallbacks[name] = run


class Device(abc.ABC):
    """One compute device, as the runtime sees it (the internal protocol: see the module
    docstring). A backend subclasses ug_core.kit.KitDevice, not this; the core never imports
    backend code. A device written to it directly before the kit (tests/legacy) still works:
    what it does not override the core does without it (sort and fft through the host)."""

    name: str = "?"
    version: str = "0"
    dtypes: frozenset[np.dtype] = frozenset()
    description: str = ""  # e.g. the hardware's name; `ug devices` shows it next to "usable"
    # the most buffers (arguments, outputs included) one kernel may take, where the device has
    # such a limit (Vulkan: maxPerStageDescriptorStorageBuffers); the scheduler gives fused
    # intermediates buffers of their own to stay under it. None: no limit.
    max_kernel_buffers: int | None = None
    # the most loop iterations one thread of a kernel may run, where the device has such a limit
    # (lavapipe's loop limiter ends an invocation's loops after 65535 trips in all, silently);
    # the scheduler's device pass (schedule.device_pass) keeps the serial loops it makes (a
    # scan's rows, a scatter's parts) under it. None: no limit.
    max_loop_iterations: int | None = None

    @abc.abstractmethod
    def allocate(self, nbytes: int) -> Any: ...

    @abc.abstractmethod
    def free(self, handle: Any) -> None: ...

    def handle_allocator(self, nbytes: int) -> tuple[Callable[[], Any], Callable[[], Any], Callable[[Any], None]]:
        """(take, allocate, free) for allocations of `nbytes` bytes, for a hot path that makes one
        size over and over (a ug.jit replay's output): a device can work out the size class once,
        here, and hand out cheaper functions than `allocate`/`free` (C-level ones, ideally: they
        run on every replay, `free` from the buffer's __del__). take() returns a handle, from a
        pool of freed ones where the device keeps one, and may raise IndexError when that pool
        is empty; allocate() then makes a new one. The default: `allocate(nbytes)` for both, and
        `free`."""
        allocate = functools.partial(self.allocate, nbytes)
        return allocate, allocate, self.free

    @abc.abstractmethod
    def copy_in(self, handle: Any, src: np.ndarray) -> None:
        """Copy the contiguous host array `src` into the allocation."""

    @abc.abstractmethod
    def copy_out(self, handle: Any, dst: np.ndarray) -> None:
        """Copy the allocation into the contiguous host array `dst` (same byte size)."""

    @abc.abstractmethod
    def compile(self, kernel: "Kernel") -> Program:
        """Compile one kernel. Raise CompileError (with the source) on failure."""

    @abc.abstractmethod
    def run(self, program: Program, buffers: list["Buffer"]) -> None:
        """Launch `program` on buffers in the kernel's argument order."""

    def launcher(self, program: Program) -> Callable[[list["Buffer"]], None]:
        """A function that launches `program` on buffers, like `run(program, buffers)`.

        The runtime asks for it once per compiled step and calls it on every run (and every
        `ug.jit` replay), so a backend can move per-program work (argument layout, entry
        point lookup) out of the per-call path. The default just calls `run`.
        """
        run = self.run
        return lambda buffers: run(program, buffers)

    def handle_launcher(self, program: Program) -> tuple[Callable[..., Any] | None, Callable[..., None]] | None:
        """Optional, one level below `launcher`: (pack, call), where `call(pack(*handles))`
        launches `program` on buffers given by their handles (`buffer.handle`), in the kernel's
        argument order (two functions rather than one: each can be a C-level callable, so the
        launch costs no Python frame); or (None, call): `call(*handles)`, one native call. The caller guarantees that a buffer the kernel writes is
        passed in no other position (inputs may repeat: they are only read), so the device need
        not check for aliasing. `ug.jit` keeps the handle list between replays of a
        single-kernel function and patches only the inputs and the output, so the per-call work
        is a few list stores and the launch. None (the default): the runtime uses `launcher`."""
        return None

    @abc.abstractmethod
    def matmul(self, out: "Buffer", a: "Buffer", b: "Buffer", spec: MatmulSpec) -> None: ...

    def matmul_epilogue(self, out: "Buffer", a: "Buffer", b: "Buffer", spec: MatmulSpec, program: Program,
                        buffers: list["Buffer"]) -> bool:
        """Optional: `matmul(out, a, b, spec)` and then `run(program, buffers)` as one launch, for
        an elementwise kernel that consumes the product (a bias, an activation): the device may
        run the kernel on each block of C's rows as soon as the block is final, while it is still
        in cache, instead of reading C back from memory afterwards.

        The runtime offers this only when the kernel has no reductions, iterates over exactly
        `out`'s elements (its index space has out's size) and reads `out` only at the element it
        is computing, through the identity view, so any split of the iteration into ranges of
        C's elements, in row-major order, is safe; its other inputs are ready and it writes no
        operand of the matmul. Return False when not done (nothing ran): the runtime then calls
        `matmul` and `run`. The default: False."""
        return False

    def sort(self, out: "Buffer", src: "Buffer", spec: SortSpec) -> None:
        """Sort rows of `src` into `out` as `spec` says (a schedule item of its own, as matmul
        is). The default copies the source to the host, sorts its rows there with numpy
        (ug_core.kit.hostsort) and copies the result in; the kit's devices sort in their own
        memory (kit.hostsort on host memory, kit.gpusort on a gpu target)."""
        self._through_host(out, src, "sort", lambda x, y: _host_fallbacks["sort"](
            x[: spec.rows * spec.n].reshape(spec.rows, spec.n), y[: spec.rows * spec.k].reshape(spec.rows, spec.k), spec))

    def fft(self, out: "Buffer", src: "Buffer", spec: FftSpec) -> None:
        """A discrete Fourier transform as `spec` says, from `src` into `out` (a schedule item of
        its own, as sort is). The default copies the source to the host, runs numpy's pocketfft
        there (in float64, rounded to the output's precision) and copies the result in; the
        kit's devices run it in their own memory (ug_core.kit.hostfft, ug_core.kit.gpufft)."""
        self._through_host(out, src, "fft", lambda x, y: _host_fallbacks["fft"](x, y, spec))

    def _through_host(self, out: "Buffer", src: "Buffer", name: str,
                      run: Callable[[np.ndarray, np.ndarray], None]) -> None:
        """`run(x, y)` on a host copy x of `src` into a host array y, copied into `out` (the
        defaults of sort and fft: the host computation `name` of _host_fallbacks)."""
        if name not in _host_fallbacks:
            raise RuntimeError(f"Device.{name}: no host {name} is registered (ug_core.kit registers it when "
                               "imported, as the device registry does)")
        x = np.empty(src.size, src.dtype)
        if src.size:
            self.copy_out(src.handle, x)
        y = np.empty(out.size, out.dtype)
        run(x, y)
        if out.size:
            self.copy_in(out.handle, y)

    def attention(self, out: "Buffer", q: "Buffer", k: "Buffer", v: "Buffer", mask: "Buffer | None",
                  spec: AttentionSpec) -> None:
        """Optional: fused attention as `spec` says, one schedule item (as matmul is), the scores
        never stored. A device without it (the default), or whose `attends(spec)` is False, gets
        the composite graph (two matmuls and a softmax kernel, ug_core.nn.attention)."""
        raise NotImplementedError(f"device {self.name!r} has no fused attention")

    def attends(self, dtype: np.dtype) -> bool:
        """Whether `attention` works here for operands of `dtype` (the default: False)."""
        return False

    def reads_split_operands(self) -> bool:
        """Whether `matmul` (and `matmul_epilogue`) take split operands (MatmulSpec.a_split /
        b_split > 1; the default: False, and the scheduler then realizes such an operand as a
        matrix first)."""
        return False

    def synchronize(self) -> None:
        """Wait for queued work; devices that run synchronously need not override this."""

    def memory_usage(self) -> int:
        """Bytes currently allocated."""
        return 0

    def pool_bytes(self) -> int:
        """Bytes the device holds in its buffer pool: freed allocations kept for reuse, in use
        by no buffer (ug.memory_stats reports them as `pool_bytes`). The default: 0, for a
        device that keeps no pool."""
        return 0

    def host_view(self, handle: Any, nbytes: int) -> np.ndarray | None:
        """The first `nbytes` of an allocation as a numpy uint8 array sharing its memory, for a
        device whose memory is host memory (DLPack export without a copy); None (the default)
        where the memory is not the host's."""
        return None

    def wrap_host(self, array: np.ndarray) -> Any | None:
        """A handle over the memory of a C-contiguous host array, without a copy (keeping
        `array` alive), which kernels may read and write: DLPack import and asarray(copy=False)
        without a copy. The array may be read-only (`flags.writeable` False, even memory mapped
        without write access): the core then never writes it (LentBuffer.writable), so the
        handle need not be writable. None (the default) where the device cannot run kernels on
        that memory (not host memory, or not aligned as its kernels need)."""
        return None

    def after_fork(self, parent: int) -> bool:
        """In a child process that os.fork() made after this device object was created (in
        process `parent`), before anything else runs there (ug_core.faults). Reset what does
        not survive a fork (worker threads, locks another thread may have held) and return
        True if this object works in the child (host memory: its buffers are the child's
        copies). Otherwise make every later use of it raise ug.DeviceUnavailableError saying
        why (faults.Refusing, faults.forked_message) and return False: the registry then
        forgets it, so the device's name makes a new one in the child (the factory runs again;
        it may raise, saying why the device cannot work there), and tensors made before the
        fork raise that error when used. The default: True (nothing to reset)."""
        return True

    def lower(self, kernel: "Kernel") -> "LoopProgram | None":
        """The loop program this device renders for a kernel, as its renderer gets it (legalized),
        for UG_DEBUG=2; None for a device that does not lower kernels (ref interprets them)."""
        return None

    def render(self, kernel: "Kernel") -> str:
        """Source code for a kernel, for UG_DEBUG=3; devices without text source return the IR."""
        return str(kernel)


@dataclass
class DeviceSpec:
    """What a plugin registers: a device name and how to make it.

    `factory` is called once, on first use; it raises to say the device is unusable
    (no driver, no GPU), and `ug devices` shows the exception's message as the reason.
    Lower `priority` sorts first in `ug.devices()`.

    `probe`, optional, is a cheap check that touches no hardware (the driver library loads,
    the settings are valid); it raises to say the device is unusable. With a probe,
    `ug.devices()` lists the device when the probe passes and leaves creating it (the
    factory) to its first use; without one, `ug.devices()` has to call the factory to know.
    """

    name: str
    factory: Callable[[], Device]
    plugin: str = "?"
    version: str = "?"
    priority: int = 100
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    probe: Callable[[], None] | None = None


class SizedCount:
    """Buffers of one byte size made by ug.jit's single-kernel replay (`jit.fast_replay._output_maker`), which
    counts them with one increment each way (`made` when it makes one, `freed` in its __del__):
    such a replay takes about 2 us, and the full bookkeeping of MemoryCounter.add would add ~15%."""

    __slots__ = ("nbytes", "made", "freed")

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.made = 0
        self.freed = 0


class MemoryCounter:
    """What one device's Buffers hold, for ug.memory_stats. A Buffer adds itself when its
    allocation succeeds and takes itself off in its __del__; ug.jit's fast-path buffers count
    in a SizedCount per byte size (`sized`), summed in when the totals are read.

    Plain attribute arithmetic, no lock: buffers made or dropped on several threads at once may
    miscount (ug runs schedules on one thread). The peak is checked when a Buffer is allocated
    and when the stats are read; a fast-path buffer (one SizedCount increment) checks none, so
    its bytes reach the peak at the next allocation of another buffer or the next read."""

    __slots__ = ("live_bytes", "peak_bytes", "allocations", "live_buffers", "sized")

    def __init__(self) -> None:
        self.live_bytes = 0     # bytes (size * itemsize) of the live Buffers, fast-path ones not included
        self.peak_bytes = 0     # the most the live bytes (all of them) have been since the last reset
        self.allocations = 0    # Buffers made, ever (fast-path ones not included)
        self.live_buffers = 0
        self.sized: dict[int, SizedCount] = {}  # fast-path buffers by byte size

    def add(self, nbytes: int) -> None:
        """Count a new Buffer of `nbytes` bytes."""
        self.live_bytes += nbytes
        self.allocations += 1
        self.live_buffers += 1
        live = self.live_bytes
        for count in self.sized.values():
            live += (count.made - count.freed) * count.nbytes
        if live > self.peak_bytes:
            self.peak_bytes = live

    def sized_count(self, nbytes: int) -> SizedCount:
        """The counter for fast-path buffers of `nbytes` bytes (one per size, shared by the
        replays that make that size)."""
        count = self.sized.get(nbytes)
        if count is None:
            count = self.sized[nbytes] = SizedCount(nbytes)
        return count

    def stats(self) -> dict[str, int]:
        """live_bytes, peak_bytes, allocations and live_buffers, fast-path buffers included (the
        peak is brought up to the live bytes first)."""
        live_bytes, live_buffers, allocations = self.live_bytes, self.live_buffers, self.allocations
        for count in list(self.sized.values()):
            live = count.made - count.freed
            live_buffers += live
            live_bytes += live * count.nbytes
            allocations += count.made
        if live_bytes > self.peak_bytes:
            self.peak_bytes = live_bytes
        return {"live_bytes": live_bytes, "peak_bytes": self.peak_bytes, "allocations": allocations,
                "live_buffers": live_buffers}

    def reset_peak(self) -> None:
        """Start the peak again from the bytes live now."""
        self.peak_bytes = 0
        self.peak_bytes = self.stats()["live_bytes"]


def memory_counter(device: Device) -> MemoryCounter:
    """The device's MemoryCounter, made on first use (kept on the device object)."""
    counter = getattr(device, "_ug_memory", None)
    if counter is None:
        counter = MemoryCounter()
        try:
            device._ug_memory = counter  # type: ignore[attr-defined]
        except AttributeError:  # an object that takes no new attributes: its buffers go uncounted
            pass
    return counter


def is_exposed(buffer: "Buffer | None") -> bool:
    """Whether code outside ug may write the buffer's memory (see Buffer.exposed)."""
    return getattr(buffer, "exposed", False)


def is_writable(buffer: "Buffer | None") -> bool:
    """Whether ug may write into the buffer's memory (not read-only memory it was lent)."""
    return getattr(buffer, "writable", True)


class Buffer:
    """`size` elements of `dtype` on a device. Freed when the last reference goes."""

    # memory: the device's MemoryCounter this buffer counts in (a SizedCount for a _SizedBuffer);
    # unset for one made without __init__ that owns no allocation of ug's (foreign memory).
    # exposed: set (True) once code outside ug may write this memory whenever it likes: a lent
    # buffer (another library's memory), or one whose memory a DLPack export handed out; unset
    # (read with `exposed`) for the others. A copy of such a buffer's value must be made at once
    # to be a snapshot (see sharing.snapshot).
    __slots__ = ("device", "size", "dtype", "handle", "memory", "exposed", "__weakref__")
    exposed: bool

    def __init__(self, device: Device, size: int, dtype: np.dtype):
        self.device = device
        self.size = size
        self.dtype = dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        self.handle = device.allocate((size if size > 0 else 1) * dtype.itemsize)
        memory = self.memory = getattr(device, "_ug_memory", None) or memory_counter(device)
        memory.add(size * dtype.itemsize)

    @property
    def device_name(self) -> str:
        return self.device.name

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def copy_in(self, array: np.ndarray) -> "Buffer":
        array = np.ascontiguousarray(array, dtype=self.dtype).reshape(-1)
        assert array.size == self.size, (array.size, self.size)
        if self.size:
            self.device.copy_in(self.handle, array)
        return self

    def numpy(self) -> np.ndarray:
        out = np.empty(self.size, dtype=self.dtype)
        if self.size:
            self.device.copy_out(self.handle, out)
        return out

    def __del__(self) -> None:
        try:
            try:
                self.device.free(self.handle)
            except Exception:  # no handle (allocate raised), or interpreter shutdown: the device may be gone
                pass
            try:
                memory = self.memory
            except AttributeError:  # never counted (allocate raised, or a foreign allocation)
                return
            memory.live_bytes -= self.size * self.dtype.itemsize
            memory.live_buffers -= 1
        except KeyboardInterrupt:
            _interrupt_again()

    def __repr__(self) -> str:
        return f"<Buffer {self.device.name} {self.size}x{self.dtype.name}>"


class LentBuffer(Buffer):
    """A Buffer over memory another library owns (Device.wrap_host): ug neither counts nor frees
    it, nor pools it for reuse; the handle keeps the owner alive. Its owner may write it at any
    time (it is `exposed`). Memory the owner marked read-only (a numpy array with
    `flags.writeable` False: `setflags(write=False)`, `np.frombuffer` of `bytes`, a read-only
    `np.memmap`) is not `writable`: ug never writes it (a write to such a tensor goes into a new
    buffer, see schedule.assign._in_place_assigns)."""

    __slots__ = ("writable",)

    def __init__(self, device: Device, size: int, dtype: np.dtype, handle: Any, writable: bool = True):
        self.device, self.size, self.dtype, self.handle = device, size, np.dtype(dtype), handle
        self.exposed = True
        self.writable = writable

    def __del__(self) -> None:
        """Nothing to give back: the memory is its owner's (the handle's reference to it goes)."""


class _SizedBuffer(Buffer):
    """A Buffer whose handle comes from the device's `handle_allocator` for its size, and goes
    back through that allocator's `free`, which is cheaper than `device.free`: ug.jit replay
    outputs (made by `jit.fast_replay._output_maker`, which sets every attribute and counts it in its
    SizedCount, `memory`)."""

    __slots__ = ("release",)
    release: Callable[[Any], None]
    memory: SizedCount  # a cheaper counter than Buffer's MemoryCounter
    # calling the class skips Buffer.__init__ (and is cheaper than object.__new__(_SizedBuffer))
    __init__ = object.__init__

    def __del__(self) -> None:
        try:
            self.release(self.handle)
            self.memory.freed += 1
        except KeyboardInterrupt:
            _interrupt_again()
        except Exception:  # as in Buffer.__del__ (and then it was never counted)
            pass


def _interrupt_again() -> None:
    """Ctrl-C came while a buffer was being freed (a __del__, which runs wherever the last
    reference went): raised from __del__, KeyboardInterrupt is only printed ("Exception ignored")
    and the interrupt is lost. So send SIGINT to the main thread again, 20 ms later from another
    thread (sent now, its handler would run at the next bytecode, still in this __del__, which
    takes microseconds); a signal, not _thread.interrupt_main, so that it also ends a wait the
    main thread is in by then (time.sleep, a lock). Best effort: a main thread kept off the
    CPU for those 20 ms still loses it, as every __del__ does."""
    try:
        timer = threading.Timer(0.02, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
        timer.daemon = True
        timer.start()
    except (RuntimeError, KeyboardInterrupt):  # interpreter shutdown (no new threads); a second Ctrl-C
        pass
