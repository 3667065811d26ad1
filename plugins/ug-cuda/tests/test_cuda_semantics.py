"""ug_core.ops semantics in the CUDA renderer, checked without a GPU: the C it emits for the ops
whose meaning differs from plain C (int DIV, RECIP, POW; float MAX / MIN) and the core's math
library (ug_core.mathlib: BITCAST, an IF with accumulators) compile with NVRTC. On a machine
with a GPU, tests/test_semantics.py and tests/test_ulp.py run them on the `cuda` device."""
from __future__ import annotations

import numpy as np
import pytest

from ug_core import mathlib
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Store
from ug_core.lower import LowerOptions, lower
from ug_core.loop_ir import Opc
from ug_core.ops import Op
from ug_core.view import View
from ug_cuda import nvrtc
from ug_cuda.compiler import compile_many
from ug_cuda.render import render, render_function

try:
    nvrtc.version()
    HAVE_NVRTC = True
except Exception:  # pragma: no cover
    HAVE_NVRTC = False

F16, F32, I32, I64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64)


def elementwise(op: Op, dt: np.dtype, arity: int, n: int = 64) -> Kernel:
    eb = ExprBuilder()
    view = View.contiguous((n,))
    loads = tuple(eb.load(i + 1, (view,), dt) for i in range(arity))
    args = (BufferArg(dt, n, True),) + tuple(BufferArg(dt, n, False) for _ in range(arity))
    return Kernel(f"sem_{op.name}_{dt.name}", args, (n,), (), (), (Store(0, (n,), view, eb.alu(op, loads, dt)),))


def gpu_program(kernel: Kernel):
    return lower(kernel, LowerOptions(target="gpu", local_size=64))


@pytest.mark.parametrize("op, dt, helper", [
    (Op.DIV, I32, "ug_floordiv_i32("), (Op.DIV, I64, "ug_floordiv_i64("),
    (Op.RECIP, I32, "ug_irecip_i32("), (Op.POW, I64, "ug_ipow_i64("),
    (Op.MAX, F32, "ug_max_f32("), (Op.MIN, F32, "ug_min_f32("),
])
def test_semantic_helpers_are_used(op, dt, helper):
    arity = 1 if op is Op.RECIP else 2
    source = render_function(gpu_program(elementwise(op, dt, arity)), "k")
    assert helper in source, source


@pytest.mark.skipif(not HAVE_NVRTC, reason="NVRTC not available")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_core_math_library_compiles(arch):
    # CUDA's own expf/logf/sinf/... are accurate (<= 2 ulp), so the device does not use the core's
    # library; but any backend may, so its loop IR (BITCAST, IF, accumulators) must render
    which = mathlib.targets(float64=True)
    programs = {}
    for op in sorted(mathlib.EXPANDED_OPS, key=lambda o: o.name):
        for dt in (F32, F16):
            program = mathlib.expand(gpu_program(elementwise(op, dt, 1)), which)
            assert any(i.opc is Opc.BITCAST or i.opc is Opc.IF for i in program.instructions)
            programs[op, dt] = program
    compile_many(list(programs.values()), arch)
    assert "__float_as_int(" in render(programs[Op.LOG, F32])   # the bits of the argument
    assert "if (" in render(programs[Op.SIN, F32])              # the exact reduction, where needed
