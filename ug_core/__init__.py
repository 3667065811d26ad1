"""ug: numpy-like lazy tensors, fused into kernels and compiled by pluggable backends.

    import numpy as np, ug_core as ug
    x = ug.tensor(np.random.rand(4, 8).astype(np.float32))
    y = (x - x.max(axis=1, keepdims=True)).exp()
    print(ug.schedule(y))      # what will run
    print(y.numpy())           # runs it
"""

from .api import devices, realize, schedule
from .device import Buffer, CompileError, Device, DeviceSpec, MatmulSpec, Program
from .env import ConfigError
from .hookspecs import hookimpl
from .jit import RetraceWarning, TracerValueError, jit
from .memory import memory_stats, reset_peak_memory_stats
from .plugins import DeviceUnavailableError, registry
from .schedule import ScheduleError
from .tensor import Tensor, arange, custom, full, matmul, maximum, minimum, ones, tensor, where, zeros

__version__ = "0.1.0"

__all__ = [
    "Buffer", "CompileError", "ConfigError", "Device", "DeviceSpec", "DeviceUnavailableError", "MatmulSpec", "Program",
    "RetraceWarning", "ScheduleError", "Tensor", "TracerValueError",
    "arange", "custom", "devices", "full", "hookimpl", "jit", "matmul", "maximum", "memory_stats", "minimum", "ones",
    "realize", "registry", "reset_peak_memory_stats", "schedule", "tensor", "where", "zeros", "__version__",
]
