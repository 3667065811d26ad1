"""Kernel IR -> loop IR (the kit's GPU lowering and legalization) -> CUDA C -> NVRTC, without a
driver: the settings the device uses (`Config`), and compiling for any arch on a machine with no
GPU, through the kit's pipeline functions (what the device runs, without the device)."""

from __future__ import annotations

from dataclasses import dataclass

from ug_core.kit import (NATIVE_F16, NATIVE_MATH, SUPPORTED, CachedCompiler, CompileError, DeviceInfo, Kernel,
                         LoopProgram, LowerOptions, c_name, lower_kernel, render_entry)

from . import nvrtc
from .render import PRELUDE, CUDARenderer, RenderOptions, render, render_function

LOCAL_SIZE = 256
# CUDA's grid limits: x up to 2^31 - 1 blocks, y and z up to 65535
MAX_GRID = (2**31 - 1, 65535, 65535)
# what the target does itself (ug_core.legalize): the renderer computes float16 ops in float32,
# rounding each result once, and CUDA's expf & co are accurate; and the semantics its renderer
# guards (CStyleRenderer's)
CAPABILITIES = frozenset({NATIVE_F16, NATIVE_MATH}) | CUDARenderer.capabilities


@dataclass(frozen=True)
class Config:
    local_size: int = LOCAL_SIZE
    fast_math: bool = False
    restrict: bool = True

    def lower_options(self) -> LowerOptions:
        return LowerOptions(target="gpu", local_size=self.local_size, max_global_size=MAX_GRID, atomic_int_bits=(32, 64))

    def device_info(self) -> DeviceInfo:
        """What the device tells the kit (its version and description are the GPU's)."""
        return DeviceInfo("cuda", frozenset(SUPPORTED), self.lower_options(), capabilities=CAPABILITIES)

    def render_options(self) -> RenderOptions:
        return RenderOptions(fast_math=self.fast_math, restrict=self.restrict)

    def nvrtc_options(self) -> tuple[str, ...]:
        # --fmad=false: a * b + c rounds twice, as ops.py defines it (NVRTC contracts it into an fma
        # by default, and fast math on top of that, when asked for, changes results anyway)
        return ("--use_fast_math",) if self.fast_math else ("--fmad=false",)


@dataclass(frozen=True)
class Rendered:
    program: LoopProgram
    source: str
    function: str   # the __global__ function's name


def render_kernel(kernel: Kernel, config: Config = Config()) -> Rendered:
    """The kernel as the device lowers, legalizes and renders it."""
    program = lower_kernel(kernel, config.device_info())
    source, name = render_entry(CUDARenderer(config.render_options()), program, "cuda")
    return Rendered(program, source, name)


def compile_only(kernel: Kernel, arch: str = "sm_90", config: Config = Config(), use_cache: bool = False) -> bytes:
    """Render and compile a kernel for `arch` ("sm_XY" -> CUBIN, "compute_XY" -> PTX) without a
    driver or GPU; returns the image (through the disk cache with `use_cache`). Raises
    ug_core.CompileError with NVRTC's log and the source."""
    compiler = nvrtc.NVRTCCompiler(arch, config.nvrtc_options())
    rendered = render_kernel(kernel, config)
    return (CachedCompiler(compiler) if use_cache else compiler.compile)(rendered.source, rendered.function)


def compile_many(programs: list[LoopProgram], arch: str, config: Config = Config(), options: tuple[str, ...] = ()) -> None:
    """Compile many programs as one NVRTC translation unit (for checks: one NVRTC call instead of
    one per kernel). On failure, the failing kernel is compiled alone so that the CompileError
    names it with its own source."""
    if not programs:
        return
    parts = [PRELUDE]
    for i, p in enumerate(programs):
        parts.append(render_function(p, f"k{i}_{c_name(p.name)}", config.render_options()))
    try:
        nvrtc.compile_source("\n".join(parts) + "\n", arch, config.nvrtc_options() + options, "batch.cu")
    except CompileError:
        for p in programs:
            nvrtc.compile_source(render(p, None, config.render_options()), arch, config.nvrtc_options() + options,
                                 f"{p.name}.cu")
        raise
