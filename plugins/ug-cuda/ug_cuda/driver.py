"""The CUDA driver API through cuda-bindings (no CUDA runtime, no toolkit): finding it, its
errors, and the context of one GPU that the allocator and the runtime share.

One primary context and one stream per device: all of ug's work (copies, launches) is queued
on that stream, so it runs in the order it was queued; `synchronize` waits for it.
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
from typing import Any

from ug_core.kit import env_flag, env_int

LIBCUDA = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


class CudaError(RuntimeError):
    pass


FORKED_FROM: int | None = None
"""The pid of the parent, in a process forked after ug had initialized CUDA there (set by
CudaDevice.after_fork): CUDA cannot be initialized again in such a child (the driver's state
is the parent's), so a new Context says so rather than failing in cuInit."""


def check_settings() -> None:
    """Raise ConfigError naming the variable for a bad UG_CUDA_* value."""
    env_int("UG_CUDA_DEVICE", 0, minimum=0)
    env_flag("UG_CUDA_FAST_MATH", False)
    env_flag("UG_CUDA_CUBLAS", True)


def _load_libcuda() -> None:
    try:
        ctypes.CDLL(LIBCUDA)
    except OSError as e:
        raise RuntimeError(f"CUDA driver not found ({LIBCUDA}): {e}") from None


def probe() -> None:
    """Cheap (what `ug.devices()` asks): the UG_CUDA_* settings are valid, libcuda loads and
    cuda-bindings is installed. No cuInit, no context: the device does that on first use."""
    check_settings()
    _load_libcuda()
    try:
        found = importlib.util.find_spec("cuda.bindings") is not None
    except ImportError:  # no `cuda` package at all
        found = False
    if not found:
        raise RuntimeError("cuda-bindings is not installed (pip install cuda-bindings)")


def import_driver() -> Any:
    _load_libcuda()
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise RuntimeError(f"cuda-bindings is not installed ({e})") from None
    return driver


class Context:
    """One GPU (its attributes), its primary context and ug's stream on it. `driver` is the
    cuda.bindings.driver module (a test passes a stand-in)."""

    def __init__(self, ordinal: int, driver: Any = None):
        if FORKED_FROM is not None and driver is None:
            raise RuntimeError(f"CUDA cannot be used in a process forked (os.fork, multiprocessing's 'fork' start "
                               f"method) from process {FORKED_FROM}, where ug had initialized it: start worker "
                               f"processes with multiprocessing's 'spawn' start method")
        self.drv = drv = driver if driver is not None else import_driver()
        try:
            self.check(drv.cuInit(0), "cuInit")
        except CudaError as e:
            if "NO_DEVICE" in str(e):
                raise RuntimeError(f"no CUDA GPU ({e})") from None
            raise RuntimeError(f"CUDA driver unusable ({e})") from None
        count = self.check(drv.cuDeviceGetCount(), "cuDeviceGetCount")
        if count == 0:
            raise RuntimeError("no CUDA GPU (cuDeviceGetCount = 0)")
        if not 0 <= ordinal < count:
            raise RuntimeError(f"CUDA device {ordinal} requested, {count} present")
        self.ordinal = ordinal
        self.cu_device = self.check(drv.cuDeviceGet(ordinal), "cuDeviceGet")
        attr = drv.CUdevice_attribute
        self.cc = (self.check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.cu_device), "attr"),
                   self.check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.cu_device), "attr"))
        self.gpu_name = self.check(drv.cuDeviceGetName(256, self.cu_device), "cuDeviceGetName").split(b"\0")[0].decode()
        v = self.check(drv.cuDriverGetVersion(), "cuDriverGetVersion")
        self.driver_version = f"{v // 1000}.{v % 1000 // 10}"
        self.total_memory = self.check(drv.cuDeviceTotalMem(self.cu_device), "cuDeviceTotalMem")
        self.context = self.check(drv.cuDevicePrimaryCtxRetain(self.cu_device), "cuDevicePrimaryCtxRetain")
        self.current()
        self.stream = self.check(drv.cuStreamCreate(int(drv.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate")
        self.stream_handle = int(self.stream)

    def error(self, err: Any) -> str:
        try:
            _, name = self.drv.cuGetErrorName(err)
            _, text = self.drv.cuGetErrorString(err)
            return f"{name.decode()}: {text.decode()}"
        except Exception:
            return repr(err)

    def check(self, result: Any, what: str) -> Any:
        """cuda-bindings returns (err, *values): raise CudaError on failure, return the values."""
        err, *rest = result if isinstance(result, tuple) else (result,)
        if int(err) != 0:
            raise CudaError(f"{what} failed: {self.error(err)}")
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else tuple(rest)

    def current(self) -> None:
        self.check(self.drv.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def synchronize(self) -> None:
        self.check(self.drv.cuStreamSynchronize(self.stream), "cuStreamSynchronize")
