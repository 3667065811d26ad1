"""The backend kit: what a backend supplies, and the core pipeline that runs it.

A backend is a `DeviceInfo`, a `Renderer` (loop IR -> source; `CStyleRenderer` for the C
family), a `Compiler` (source -> binary; the core caches binaries on disk), an `Allocator`
(device memory; the core pools it) and a `Runtime` (binary -> loaded program -> launch),
assembled into a `KitDevice`. See CONTRIBUTING.md ("Writing a backend") and plugins/ug-c, the
worked example.
"""

from .allocator import Allocator, CachingAllocator, NumpyAllocator
from .compiler import CachedCompiler, Compiler
from .cstyle import C_HELPERS, C_SOFT_HALF, CStyleRenderer
from .device import DeviceInfo, KitDevice, Runtime
from ..legalize import NATIVE_F16, NATIVE_MATH
from ..opset import SAFE_FLOAT_TO_INT, SAFE_INT_DIVISION, SAFE_INT_POW, SAFE_SHIFTS
from .matmul import matmul_kernel
from .renderer import Renderer, RenderError

__all__ = ["Allocator", "CachingAllocator", "CachedCompiler", "Compiler", "C_HELPERS", "C_SOFT_HALF", "CStyleRenderer",
           "DeviceInfo", "KitDevice", "NATIVE_F16", "NATIVE_MATH", "NumpyAllocator",
           "SAFE_FLOAT_TO_INT", "SAFE_INT_DIVISION", "SAFE_INT_POW", "SAFE_SHIFTS", "Runtime", "matmul_kernel", "Renderer", "RenderError"]
