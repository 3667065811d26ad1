"""The `cpu` device: kernels compiled to native code by LLVM (llvmlite MCJIT), run on a thread pool.

Assembled from the backend kit (ug_core.kit) like any backend, and compiled by the kit's
pipeline: the renderer (render.LLVMRenderer, loop IR -> LLVM IR; its entries are named by the hash
of the module, as one LLVM engine holds every kernel of the process, and it promises `noalias`
buffers, so the kit compiles the variant without on first need), the compiler (jit.ObjectCompiler,
LLVM IR -> object code, cached on disk by the kit), the allocator (memory.HostAllocator, 64-byte
aligned host blocks, pooled by the kit) and the runtime (launch.CPURuntime: launches split over
the threads, the kit's fast path). What it chooses or adds:
* lower_options: column reductions with wide outputs get wide outer blocks (settings.WIDE_OUTER_BLOCK);
* renderer_for: tiny kernels prefer 128-bit vectors;
* matmul / matmul_epilogue: the packed gemm, small products as kernels, numpy (matmul.py);
* attention: one pass over the keys per block of queries (attention.py);
* sort_threads, sort_kernels: the kit's host sort (host memory) runs its row blocks on every
  core, and splits or merges a long row with native helpers (sortkernels.py).
"""

from __future__ import annotations

import functools
from typing import Any

import llvmlite
import numpy as np

from ug_core.kit import (NATIVE_F16, NATIVE_MATH, SUPPORTED, AttentionSpec, Buffer, DeviceInfo, Kernel, KitDevice,
                         LoopProgram, LowerOptions, MatmulSpec, Program, prod)

from . import __version__, settings
from .attention import DTYPES as ATTENTION_DTYPES, HostAttention
from .cores import usable_cores
from .sortkernels import SortKernels
from .jit import get_jit, llvm_version
from .launch import HOLD_GIL_WORK, CPURuntime, kernel_work
from .matmul import HostMatmul
from .memory import HostAllocator
from .render import LLVMRenderer, LLVMTarget

# vectors for tiny kernels (below HOLD_GIL_WORK): 128-bit. Wider multiplies and FMAs put an
# AVX-512 machine's core into a lower clock for a while (its "AVX license"), which costs the
# Python code around a tiny kernel far more than the wider vectors save in it (a ug.jit replay
# of 64 elements and ten ops: about 10% slower with 256-bit vectors)
TINY_VECTOR_BITS = 128

# LLVM's pipeline level for tiny kernels (below HOLD_GIL_WORK; the rest: jit.OPT_LEVEL, 3).
# Measured in one process, O3 against O2 alternating (compile: best of 4; run: median of 9
# rounds of 20000 launches): softmax 8 x 64 compiled in 95 -> 60 ms and ran 3.9 -> 3.2 us,
# layernorm 8 x 64 87 -> 48 ms and 3.0 -> 1.7 us; a 64-element add, a chain of ten ops, exp*sin
# of 64, a sum of 1000, a where of 500: the same within noise. O1 (no vectorizers) compiled
# faster still but ran up to 7x slower (softmax 8 x 64). Kernels above: O2 saved nothing
# measurable in compile time (chains, softmax and layernorm of 1024 x 1024 and 4M elements).
TINY_PIPELINE = 2


def backend_version() -> str:
    return f"{__version__}+llvmlite{llvmlite.__version__}.llvm{llvm_version()}"


class CPUDevice(KitDevice):
    runtime: CPURuntime

    def __init__(self) -> None:
        self.jit = jit = get_jit()
        threads = min(usable_cores(), settings.THREADS or usable_cores())
        # the renderer keeps float16 ops in float16 rounding and brings its own vectorizable math
        info = DeviceInfo("cpu", frozenset(SUPPORTED), LowerOptions(target="cpu", outer_block=settings.OUTER_BLOCK),
                          backend_version(), f"{jit.cpu}, {threads} threads",
                          capabilities=frozenset({NATIVE_F16, NATIVE_MATH}))
        self.target = LLVMTarget(jit.triple, jit.data_layout, jit.cpu, jit.features)
        # the compiler is the engine's, which the gemm's and the pool's modules use too
        super().__init__(info, functools.partial(LLVMRenderer, self.target), jit.compiler, HostAllocator(),
                         CPURuntime(jit, threads))
        self.wide_lower_options = LowerOptions(target="cpu", outer_block=settings.WIDE_OUTER_BLOCK)
        self.matmuls = HostMatmul(self)
        self.attentions = HostAttention(self)
        self.sort_threads = threads   # the kit's host sort (ug_core.kit.hostsort) over the threads
        self.sort_kernels = SortKernels(jit)   # ...with native merge and partition (sortkernels.py)

    @property
    def threads(self) -> int:
        return self.runtime.threads

    # -- compile
    def lower_options(self, kernel: Kernel) -> LowerOptions:
        wide = kernel.outer[-1] >= settings.WIDE_OUTER_BLOCK * self.threads if kernel.outer else False
        return self.wide_lower_options if wide else self.info.lower_options

    def renderer_for(self, program: LoopProgram) -> LLVMRenderer:
        if kernel_work(program) < HOLD_GIL_WORK:
            return LLVMRenderer(self.target, vector_bits=TINY_VECTOR_BITS, pipeline=TINY_PIPELINE)
        return LLVMRenderer(self.target)

    # -- run
    def run_threads(self, program: Program, buffers: list[Buffer], threads: int) -> None:
        """Run with exactly `threads` chunks (tests: threads must give the same bits as one)."""
        handles = [b.handle for b in buffers]
        self.runtime.run_threads(program.handle.entry_for(handles), handles, threads)

    # -- matmul
    def matmul(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec) -> None:
        self.matmuls.run(out, a, b, spec)

    def matmul_epilogue(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec, program: Program,
                        buffers: list[Buffer]) -> bool:
        return self.matmuls.epilogue(out, a, b, spec, program, buffers)

    def precompile_item(self, item: Any) -> bool:
        """ug.precompile: compile what a matmul or attention item's first run would (the packed
        gemm, a small matmul's kernel, the attention module), running nothing; whether it did."""
        kind = getattr(item, "kind", None)   # (schedule items: the kit does not export their classes)
        if kind == "matmul":
            nodes = (item.out, item.a, item.b)
            # the sizes of the buffers the run gets: a realized node's own, else a new one's
            sizes = tuple(n.buffer.size if n.buffer is not None else prod(n.shape) for n in nodes)
            same_ab = item.a is item.b or (item.a.buffer is not None and item.a.buffer is item.b.buffer)
            return self.matmuls.prepare(item.spec, sizes, tuple(np.dtype(n.dtype) for n in nodes),  # type: ignore[arg-type]
                                        same_ab)
        if kind == "attention":
            return self.attentions.prepare(item.spec)
        return False

    # -- attention: one pass over the keys per block of queries, the packed gemm's micro-kernel
    # for both products (attention.py)
    def attention(self, out: Buffer, q: Buffer, k: Buffer, v: Buffer, mask: Buffer | None,
                  spec: AttentionSpec) -> None:
        self.attentions.run(out, q, k, v, mask, spec)

    def attends(self, dtype: np.dtype) -> bool:
        return dtype in ATTENTION_DTYPES

    def reads_split_operands(self) -> bool:
        return True   # the packed gemm reads a split operand's rows from a table (gemm.Problem)

    def synchronize(self) -> None:
        """Nothing to wait for: a launch returns when its work is done. (A method of the class:
        ug.jit's callers synchronize after every tiny replay, and the runtime's bound method,
        set on the instance, took half as long again to call.)"""

    def after_fork(self, parent: int) -> bool:
        """Host memory and the process's LLVM engine work in a forked child; the worker threads
        are gone (new ones start on the next parallel launch) and the locks are new."""
        if self.runtime.pool is not None:
            self.runtime.pool.after_fork()
        self.matmuls.after_fork()
        return super().after_fork(parent)
