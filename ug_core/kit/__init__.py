"""The backend kit: the one API a backend is written against, and the core pipeline that runs it.

A backend is a `DeviceInfo`, a `Renderer` (loop IR -> source; `CStyleRenderer` for the C
family), a `Compiler` (source -> binary; the core caches binaries on disk), an `Allocator`
(device memory; the core pools it) and a `Runtime` (binary -> loaded program -> launch),
assembled into a `KitDevice`, registered from a plugin with `ug_core.hookimpl` and a
`DeviceSpec`. A backend imports from `ug_core.kit` alone (and `ug_core` for the hook marker):
everything it needs is here, and nothing else of the core is a backend's contract. See
CONTRIBUTING.md ("Writing a backend") and plugins/ug-c, the worked example.

What is exported, by what it is for:

- **The parts a backend supplies, and the device they make**: `DeviceInfo`, `KitDevice`,
  `Renderer`, `CStyleRenderer` (and, from `ug_core.kit.cstyle`, the C dialect's tables and
  helpers: `C_HELPERS`, `C_INT_HELPERS`, `C_SOFT_HALF`, `INT_CTYPES`, `INT_WRAP`, `c_helpers`,
  `int_helpers`, `int_types`, `wrap_types`), `check_alu_tables`, `Compiler`, `CachedCompiler`,
  `Allocator`, `NumpyAllocator`, `CachingAllocator`, `Runtime`, `Loaded` (a kit Program's
  handle), `SharedLibraryRuntime` (host kernels in shared libraries), `NATIVE_F16`, `NATIVE_MATH`
  (DeviceInfo.capabilities), and the op-set contract's guards a renderer may declare it does
  itself (`Renderer.capabilities`: `SAFE_INT_DIVISION`, `SAFE_INT_POW`, `SAFE_SHIFTS`,
  `SAFE_FLOAT_TO_INT`; `Renderer.op_set_version`, see CONTRIBUTING "The op set and its versions").
- **The pipeline, for tools that compile without a device**: `lower_kernel`, `prepare`
  (legalization), `render_entry` (rendering and entry naming: `c_name`, `ENTRY`), `lower`,
  `legalize`, `LowerOptions`, `matmul_kernel` (the default matmul as a kernel).
- **The IRs**: kernel IR (`Kernel`, `BufferArg`, `ExprBuilder`, `Reduction`, `Store`, `View`,
  `chain_push`, `contiguous_strides`, `prod`), loop IR (`LoopProgram`, `Inst`, `Opc`, `Special`,
  `ParamSpec`, `INDEX`, `BOOL`, `OPENS`, `CLOSES`, `index_bound`, `LoopBuilder`), the ops and
  their kinds (`Op`, `ALU`, `FLOAT`, `INT`, `UINT`, `BOOL_KIND`), `SUPPORTED` (every dtype ug has)
  and `mathlib` (the core's math library: its polynomials, for a backend with its own math).
- **What the runtime hands a device, and the errors**: `Buffer`, `Program`, `MatmulSpec`,
  `AttentionSpec`, `SortSpec`, `FftSpec`, `Device` (the internal protocol a KitDevice implements),
  `DeviceSpec`, `CompileError`, `RenderError`, `DeviceUnavailableError`, `registry`.
- **The process around it**: settings (`env_int`, `env_flag`, `env_choice`, `env_set`,
  `env_check`, `ConfigError`), Ctrl-C and fork safety (`defer_interrupts`, `after_fork_in_child`,
  `Refusing`, `forked_message`), the disk cache's checks of a binary (`ElfKind`, `elf_kind`,
  `elf_problem`, `native_elf_kind`, `CUBIN`, `ptx_problem`), and `node_over` (the graph node
  of a Buffer of the backend's, memory of another library: `ug_core.Tensor(node_over(buffer,
  shape))` is a ug tensor over it, for interop), and the tiers (ug_core.tiers) for a device's
  own compiled code: `tier_mode` ("auto", "0" or "1") and `compile_in_background`.
"""

from .. import mathlib
from ..device import Buffer, CompileError, Device, DeviceSpec, Program, RenderError
from ..specs import AttentionSpec, FftSpec, MatmulSpec, SortSpec
from ..diskcache import CUBIN, ElfKind, elf_kind, elf_problem, ptx_problem
from ..dtypes import SUPPORTED
from ..env import ConfigError, env_choice, env_flag, env_int, env_set
from ..env import check as env_check
from ..faults import Refusing, after_fork_in_child, defer_interrupts, forked_message
from ..graph import from_buffer as node_over
from ..kernel_ir import BufferArg, ExprBuilder, Kernel, Reduction, Store
from ..legalize import NATIVE_F16, NATIVE_MATH, legalize
from ..loop_builder import LoopBuilder
from ..loop_ir import BOOL, CLOSES, INDEX, OPENS, Inst, LoopProgram, Opc, ParamSpec, Special, index_bound
from ..lower import LowerOptions, lower
from ..ops import ALU, BOOL_KIND, FLOAT, INT, UINT, Op
from ..plugins import DeviceUnavailableError, registry
from ..view import View, chain_push, contiguous_strides, prod
from .allocator import Allocator, CachingAllocator, NumpyAllocator
from .compiler import CachedCompiler, Compiler
from .cstyle import (C_HELPERS, C_INT_HELPERS, C_SOFT_HALF, INT_CTYPES, INT_WRAP, CStyleRenderer, c_helpers,
                     int_helpers, int_types, wrap_types)
from .device import ENTRY, DeviceInfo, KitDevice, Loaded, Runtime, c_name, lower_kernel, prepare, render_entry
from .host import SharedLibraryRuntime, native_elf_kind
from ..opset import SAFE_FLOAT_TO_INT, SAFE_INT_DIVISION, SAFE_INT_POW, SAFE_SHIFTS
from .matmul import matmul_kernel
from .renderer import Renderer, check_alu_tables
from typing import Any, Callable


def tier_mode() -> str:
    """The tier mode (ug_core.tiers.mode: "auto", "0" or "1"), for a device's own compiled code."""
    from ..tiers import mode   # (tiers imports the ref device, which imports the kit)
    return mode()


def compile_in_background(label: str, run: "Callable[[], object]", debug: int = 0) -> Any:
    """Queue a device's own compile on the tiers' background thread (ug_core.tiers.in_background);
    the task's `done` and `error` say how it went."""
    from ..tiers import in_background
    return in_background(label, run, debug)

__all__ = [
    # the parts and the device
    "Allocator", "CachedCompiler", "CachingAllocator", "Compiler", "CStyleRenderer", "DeviceInfo", "KitDevice",
    "Loaded", "NATIVE_F16", "NATIVE_MATH", "NumpyAllocator", "Renderer", "Runtime", "SharedLibraryRuntime",
    "check_alu_tables", "C_HELPERS", "C_INT_HELPERS", "C_SOFT_HALF", "INT_CTYPES", "INT_WRAP", "c_helpers",
    "int_helpers", "int_types", "wrap_types",
    # the op-set contract: the semantics a renderer may declare it guards itself (Renderer.capabilities)
    "SAFE_FLOAT_TO_INT", "SAFE_INT_DIVISION", "SAFE_INT_POW", "SAFE_SHIFTS",
    # the pipeline
    "ENTRY", "LowerOptions", "c_name", "legalize", "lower", "lower_kernel", "matmul_kernel", "prepare", "render_entry",
    # the IRs
    "ALU", "BOOL", "BOOL_KIND", "BufferArg", "CLOSES", "ExprBuilder", "FLOAT", "INDEX", "INT", "Inst", "Kernel",
    "LoopBuilder", "LoopProgram", "OPENS", "Op", "Opc", "ParamSpec", "Reduction", "SUPPORTED", "Special", "Store",
    "UINT", "View", "chain_push", "contiguous_strides", "index_bound", "mathlib", "prod",
    # what the runtime hands a device, and the errors
    "AttentionSpec", "Buffer", "CompileError", "Device", "DeviceSpec", "DeviceUnavailableError", "FftSpec",
    "MatmulSpec", "Program", "RenderError", "SortSpec", "registry",
    # the process around it
    "CUBIN", "ConfigError", "ElfKind", "Refusing", "after_fork_in_child", "defer_interrupts", "elf_kind", "elf_problem",
    "env_check", "env_choice", "env_flag", "env_int", "env_set", "forked_message", "native_elf_kind", "ptx_problem",
    "node_over", "tier_mode", "compile_in_background",
]
