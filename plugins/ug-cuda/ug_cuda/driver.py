"""The `cuda` device: CUDA driver API through cuda-bindings (no CUDA runtime, no toolkit).

One primary context and one stream per device. Work is queued on the stream; `copy_out`
and `synchronize` wait for it. Memory comes from a caching allocator: freed blocks are kept
by (rounded) size and reused; `empty_cache()` returns them to the driver, which also happens
once before an allocation fails for lack of memory.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any

import numpy as np

from ug_core.device import Buffer, CompileError, Device, MatmulSpec, Program
from ug_core.dtypes import SUPPORTED
from ug_core.env import env_flag, env_int
from ug_core.kernel_ir import Kernel

from . import __version__, nvrtc
from .compiler import Config, render_kernel

_LIBCUDA = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


class CudaError(RuntimeError):
    pass


def _import_driver():
    try:
        ctypes.CDLL(_LIBCUDA)
    except OSError as e:
        raise RuntimeError(f"CUDA driver not found ({_LIBCUDA}): {e}") from None
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise RuntimeError(f"cuda-bindings is not installed ({e})") from None
    return driver


def _check(result: Any, what: str) -> Any:
    """cuda-bindings returns (err, *values): raise CudaError on failure, return the values."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        from cuda.bindings import driver
        try:
            _, name = driver.cuGetErrorName(err)
            _, text = driver.cuGetErrorString(err)
            msg = f"{name.decode()}: {text.decode()}"
        except Exception:
            msg = repr(err)
        raise CudaError(f"{what} failed: {msg}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


class Allocation:
    """A device allocation (the Buffer handle). `ptr` is the device address as an int."""

    __slots__ = ("ptr", "nbytes", "capacity", "owner")

    def __init__(self, ptr: int, nbytes: int, capacity: int, owner: Any = None):
        self.ptr = ptr
        self.nbytes = nbytes
        self.capacity = capacity  # 0: foreign memory (wrapped, never freed by us)
        self.owner = owner        # keeps foreign memory alive

    def __repr__(self) -> str:
        return f"<Allocation {self.ptr:#x} {self.nbytes}B>"


def _round_size(n: int) -> int:
    """Size class: multiples of 512 B up to 64 KiB, then 8 classes per power of two (<= 12.5% slack)."""
    n = max(n, 1)
    if n <= 65536:
        return (n + 511) & ~511
    step = 1 << (n.bit_length() - 4)
    return (n + step - 1) // step * step


class _Kernel:
    """A loaded kernel: module + function + launch geometry, and a lazily built variant without
    __restrict__ for launches where one buffer is passed as two arguments (in-place updates)."""

    __slots__ = ("function", "module", "grid", "block", "nargs", "rendered", "aliased")

    def __init__(self, function: Any, module: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                 nargs: int, rendered: Any):
        self.function, self.module, self.grid, self.block = function, module, grid, block
        self.nargs, self.rendered, self.aliased = nargs, rendered, None


def _pad3(t: tuple[int, ...]) -> tuple[int, int, int]:
    t = tuple(t) + (1,) * (3 - len(t))
    return (int(t[0]), int(t[1]), int(t[2]))


class CudaDevice(Device):
    name = "cuda"
    version = __version__
    dtypes = frozenset(SUPPORTED)

    def __init__(self, ordinal: int | None = None, config: Config | None = None):
        self.drv = drv = _import_driver()
        try:
            _check(drv.cuInit(0), "cuInit")
        except CudaError as e:
            if "NO_DEVICE" in str(e):
                raise RuntimeError(f"no CUDA GPU ({e})") from None
            raise RuntimeError(f"CUDA driver unusable ({e})") from None
        count = _check(drv.cuDeviceGetCount(), "cuDeviceGetCount")
        if count == 0:
            raise RuntimeError("no CUDA GPU (cuDeviceGetCount = 0)")
        self.ordinal = env_int("UG_CUDA_DEVICE", 0, minimum=0) if ordinal is None else ordinal
        if not 0 <= self.ordinal < count:
            raise RuntimeError(f"CUDA device {self.ordinal} requested, {count} present")
        self.cu_device = _check(drv.cuDeviceGet(self.ordinal), "cuDeviceGet")
        attr = drv.CUdevice_attribute
        self.cc = (_check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.cu_device), "attr"),
                   _check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.cu_device), "attr"))
        self.gpu_name = _check(drv.cuDeviceGetName(256, self.cu_device), "cuDeviceGetName").split(b"\0")[0].decode()
        v = _check(drv.cuDriverGetVersion(), "cuDriverGetVersion")
        self.driver_version = f"{v // 1000}.{v % 1000 // 10}"
        self.total_memory = _check(drv.cuDeviceTotalMem(self.cu_device), "cuDeviceTotalMem")
        self.context = _check(drv.cuDevicePrimaryCtxRetain(self.cu_device), "cuDevicePrimaryCtxRetain")
        _check(drv.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.stream = _check(drv.cuStreamCreate(int(drv.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate")
        self.stream_handle = int(self.stream)
        self.config = config or Config(fast_math=env_flag("UG_CUDA_FAST_MATH", False))
        self.target = nvrtc.target_for(*self.cc)   # sm_XY (CUBIN) or compute_XY (PTX, JIT by the driver)
        self.description = (f"{self.gpu_name}, compute capability {self.cc[0]}.{self.cc[1]}, driver CUDA "
                            f"{self.driver_version}, NVRTC {'%d.%d' % nvrtc.version()} -> {self.target}")
        # the version is part of the compile cache key: the same kernel compiles differently per GPU
        self.version = f"{__version__} ({self.gpu_name}, sm_{self.cc[0]}{self.cc[1]}, driver {self.driver_version})"
        self._lock = threading.RLock()
        self._free: dict[int, list[int]] = {}
        self._in_use = 0
        self._cached = 0
        self._blas: Any = None
        self._matmul_kernels: dict[Any, Any] = {}

    def __repr__(self) -> str:
        return f"<CudaDevice {self.description}>"

    def _current(self) -> None:
        _check(self.drv.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    # --- memory -------------------------------------------------------------------------------
    def allocate(self, nbytes: int) -> Allocation:
        size = _round_size(nbytes)
        with self._lock:
            blocks = self._free.get(size)
            if blocks:
                ptr = blocks.pop()
                self._cached -= size
            else:
                ptr = self._cu_alloc(size)
            self._in_use += size
        return Allocation(ptr, nbytes, size)

    def _cu_alloc(self, size: int) -> int:
        self._current()
        err, ptr = self.drv.cuMemAlloc(size)
        if int(err) == int(self.drv.CUresult.CUDA_ERROR_OUT_OF_MEMORY):
            self.empty_cache()
            err, ptr = self.drv.cuMemAlloc(size)
            if int(err) == int(self.drv.CUresult.CUDA_ERROR_OUT_OF_MEMORY):
                raise MemoryError(f"CUDA out of memory allocating {size} bytes on {self.gpu_name} "
                                  f"({self._in_use} bytes in use by ug)")
        _check((err,), "cuMemAlloc")
        return int(ptr)

    def free(self, handle: Allocation) -> None:
        if handle.capacity == 0:  # foreign memory
            handle.owner = None
            return
        with self._lock:
            # stream-ordered reuse: later work on this stream runs after the work that used it
            self._free.setdefault(handle.capacity, []).append(handle.ptr)
            self._in_use -= handle.capacity
            self._cached += handle.capacity
        handle.capacity = 0

    def empty_cache(self) -> None:
        """Give every cached free block back to the driver."""
        with self._lock:
            self.synchronize()
            for blocks in self._free.values():
                for ptr in blocks:
                    self.drv.cuMemFree(ptr)
            self._free.clear()
            self._cached = 0

    def memory_usage(self) -> int:
        return self._in_use

    def cached_memory(self) -> int:
        return self._cached

    def pool_bytes(self) -> int:
        """Bytes of freed device memory cached for reuse (ug.memory_stats)."""
        return self._cached

    def copy_in(self, handle: Allocation, src: np.ndarray) -> None:
        src = np.ascontiguousarray(src)
        self._current()
        # pageable source: the call returns once the data is staged, so `src` may go away after it
        _check(self.drv.cuMemcpyHtoDAsync(handle.ptr, src.ctypes.data, src.nbytes, self.stream), "cuMemcpyHtoDAsync")

    def copy_out(self, handle: Allocation, dst: np.ndarray) -> None:
        assert dst.flags.c_contiguous
        self._current()
        _check(self.drv.cuMemcpyDtoHAsync(dst.ctypes.data, handle.ptr, dst.nbytes, self.stream), "cuMemcpyDtoHAsync")
        self.synchronize()

    def copy_device(self, dst: int, src: int, nbytes: int) -> None:
        self._current()
        _check(self.drv.cuMemcpyDtoDAsync(dst, src, nbytes, self.stream), "cuMemcpyDtoDAsync")

    def synchronize(self) -> None:
        _check(self.drv.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    # --- kernels ------------------------------------------------------------------------------
    def render(self, kernel: Kernel) -> str:
        return render_kernel(kernel, self.config).source

    def compile(self, kernel: Kernel) -> Program:
        rendered = render_kernel(kernel, self.config)
        p = rendered.program
        if p.is_empty:
            return Program(kernel.name, None, rendered.source, p.global_size, p.local_size)
        handle = self._load(rendered, self.config)
        return Program(kernel.name, handle, rendered.source, p.global_size, p.local_size)

    def load_source(self, source: str, function: str, options: tuple[str, ...] = ()) -> tuple[Any, Any]:
        """Compile (disk-cached) and load CUDA C; returns (module, function). A cached image the
        driver refuses is dropped and recompiled."""
        self._current()
        for attempt in (0, 1):
            binary = nvrtc.compile_source(source, self.target, options, f"{function}.cu",
                                          use_cache=None if attempt == 0 else False)
            image = binary.image if binary.kind == "cubin" else binary.image.rstrip(b"\0") + b"\0"
            err, module = self.drv.cuModuleLoadData(image)
            if int(err) == 0:
                break
            nvrtc.invalidate(source, self.target, options)
            if attempt == 1:
                try:
                    _check((err,), "cuModuleLoadData")
                except CudaError as e:
                    raise CompileError(f"the CUDA driver ({self.driver_version}) could not load the "
                                       f"{binary.kind} for {self.target}: {e}", source) from None
        func = _check(self.drv.cuModuleGetFunction(module, function.encode()), "cuModuleGetFunction")
        return module, func

    def _load(self, rendered: Any, config: Config) -> _Kernel:
        module, func = self.load_source(rendered.source, rendered.function, config.nvrtc_options())
        p = rendered.program
        return _Kernel(func, module, _pad3(p.global_size), _pad3(p.local_size), len(p.params), rendered)

    def launch(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int], args: ctypes.Array | None,
               shared: int = 0) -> None:
        """cuLaunchKernel with `args` a ctypes array of void* (each pointing at one argument's value)."""
        self._current()
        _check(self.drv.cuLaunchKernel(function, *grid, *block, shared, self.stream,
                                       ctypes.addressof(args) if args is not None else 0, 0), "cuLaunchKernel")

    def run(self, program: Program, buffers: list[Buffer]) -> None:
        k: _Kernel | None = program.handle
        if k is None:
            return
        ptrs = [b.handle.ptr for b in buffers]
        if len(set(ptrs)) != len(ptrs):  # one buffer in two arguments: __restrict__ would be a lie
            if k.aliased is None:
                config = Config(self.config.local_size, self.config.fast_math, restrict=False)
                k.aliased = self._load(render_kernel(_kernel_of(k), config), config)
            k = k.aliased
        values = (ctypes.c_uint64 * len(ptrs))(*ptrs)
        base = ctypes.addressof(values)
        params = (ctypes.c_void_p * len(ptrs))(*[base + 8 * i for i in range(len(ptrs))])
        self.launch(k.function, k.grid, k.block, params)  # copies the argument values before returning

    # --- matmul -------------------------------------------------------------------------------
    def matmul(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec) -> None:
        from . import matmul

        matmul.run(self, out, a, b, spec)


def _kernel_of(k: _Kernel) -> Kernel:
    return k.rendered.kernel
