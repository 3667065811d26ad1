"""ug: numpy-like lazy tensors, fused into kernels and compiled by pluggable backends.

    import numpy as np, ug_core as ug
    x = ug.tensor(np.random.rand(4, 8).astype(np.float32))
    y = (x - x.max(axis=1, keepdims=True)).exp()
    print(ug.schedule(y))      # what will run
    print(y.numpy())           # runs it
"""

from . import array_api  # (first: importing it binds the Tensor's methods, see array_api/methods.py)
from .api import devices, realize, schedule
from .cache import cache_stats
from .device import Buffer, CompileError, Device, DeviceSpec, Program
from .specs import MatmulSpec
from .env import ConfigError
from .hookspecs import hookimpl
from .jit import RetraceWarning, jit, precompile
from .autodiff import grad, gradients, jvp, keep_graph, stop_gradient, value_and_grad, vjp
from .memory import memory_stats, reset_peak_memory_stats
from .plugins import DeviceUnavailableError, registry
from .profiler import profile
from .schedule import ScheduleError
from .custom import custom
from .tensor import Tensor, TracerValueError, tensor
from .tensor_arith import where
from . import fft, linalg, nn, random
from .einsum import einsum
# the Array API namespace (arange, full, zeros, ... included), group by group (each lists its names)
from .array_api.creation import *  # noqa: F403
from .array_api.data_types import *  # noqa: F403
from .array_api.elementwise import *  # noqa: F403
from .array_api.extras import *  # noqa: F403
from .array_api.indexing import *  # noqa: F403
from .array_api.scatter import bincount, index_add, scatter, scatter_add, scatter_reduce
from .array_api.linalg import matmul, matrix_transpose, tensordot, vecdot
from .array_api.manipulation import *  # noqa: F403
from .array_api.numpy_names import *  # noqa: F403
from .array_api.searching import *  # noqa: F403
from .array_api.sets import *  # noqa: F403
from .array_api.sorting import *  # noqa: F403
from .array_api.statistical import *  # noqa: F403
from .array_api.transcendental import *  # noqa: F403
from .array_api.utility import *  # noqa: F403
from .array_api import e, inf, nan, newaxis, pi
from .array_api import __array_api_version__, __array_namespace_info__
from .array_api import bool_ as bool  # noqa: A001  (the standard's name for the bool dtype)

__version__ = "0.1.0"

__all__ = [
    "Buffer", "CompileError", "ConfigError", "Device", "DeviceSpec", "DeviceUnavailableError", "MatmulSpec", "Program",
    "RetraceWarning", "ScheduleError", "Tensor", "TracerValueError",
    "cache_stats", "custom", "devices", "hookimpl", "jit", "memory_stats", "precompile", "profile", "realize", "registry", "reset_peak_memory_stats",
    "schedule", "tensor", "where", "__version__",
    "grad", "gradients", "jvp", "keep_graph", "stop_gradient", "value_and_grad", "vjp",
    "bool", "einsum", "fft", "linalg", "nn", "random",
]
__all__ += array_api.__all__   # the Array API namespace (arange, full, matmul, maximum, minimum, ones, zeros...)
# numpy's aliasing rule: the namespace's view functions return views, every other function a
# value of its own (never its argument, nor a view of it; see array_api/aliasing.py)
from .array_api import aliasing as _aliasing  # noqa: E402
_aliasing.apply(globals(), array_api.__all__ + ["bincount", "custom", "einsum", "index_add", "scatter", "scatter_add", "scatter_reduce", "where"])
