"""SPIR-V emission without a GPU: every module the renderer makes passes spirv-val, for the
full feature set and for each fallback (no int64, no 8-bit storage, no float controls)."""
from __future__ import annotations

import numpy as np
import pytest

from ug_core.specs import MatmulSpec
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Reduction, Store
from ug_core.lower import LowerOptions, lower
from ug_core.ops import ALU, Op, alu_result
from ug_core.view import View
from ug_vulkan import matmul as mm
from ug_core.kit import Renderer, RenderError
from ug_core.legalize import NATIVE_F16, legalize
from ug_core.loop_ir import LoopProgram, Opc
from ug_vulkan.codegen import Caps, SpirvRenderer, spirv_module
from ug_vulkan.spirv_tools import spirv_val_path, validate_spirv
from ug_vulkan.spirv import MAGIC

F32, F64, F16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)
I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(bool)

CAPS = {
    "full": Caps(preserve_widths=(16, 32, 64)),
    "no-int64": Caps(int64=False),
    "no-8bit": Caps(int8_storage=False, int8=False),
    "minimal": Caps(int64=False, float64=False, float16=False, int8_storage=False, int8=False),
}
CAPABILITIES = frozenset({NATIVE_F16})   # ug_vulkan.device's: the renderer gets legalized programs
needs_val = pytest.mark.skipif(spirv_val_path() is None, reason="spirv-val (spirv-tools) not installed")


def c(shape):
    return View.contiguous(tuple(shape))


def elementwise(op: Op, dt: np.dtype, n: int = 37) -> Kernel:
    eb = ExprBuilder()
    arity = ALU[op].arity
    out_dt = alu_result(op, dt)
    assert out_dt is not None, (op, dt)
    srcs = []
    for i in range(arity):
        if op is Op.WHERE and i == 0:
            srcs.append(eb.load(1, (c((n,)),), BOOL))
        else:
            srcs.append(eb.load(1 + i, (c((n,)),), dt))
    args = [BufferArg(out_dt, n, True)] + [BufferArg(s.dtype, n, False) for s in srcs]
    expr = eb.alu(op, tuple(srcs), out_dt)
    return Kernel(f"E_{op.name}", tuple(args), (n,), (), (), (Store(0, (n,), c((n,)), expr),))


def softmax_like(dt: np.dtype, rows: int = 3, cols: int = 300) -> Kernel:
    eb = ExprBuilder()
    shape = (rows, cols)
    x = eb.load(1, (c(shape),), dt)
    red = (Reduction(Op.RMAX, shape, x, dt),)
    e = eb.alu(Op.EXP, (eb.alu(Op.SUB, (x, eb.acc(0, dt)), dt),), dt)
    red += (Reduction(Op.SUM, shape, e, dt),)
    out = eb.alu(Op.DIV, (e, eb.acc(1, dt)), dt)
    args = (BufferArg(dt, rows * cols, True), BufferArg(dt, rows * cols, False))
    return Kernel("softmax", args, (rows, 1), (1,), red, (Store(0, shape, c(shape), out),))


def _kernels(caps: Caps):
    dts = _dtypes(caps)
    for op in ALU:
        for dt in dts:
            if alu_result(op, dt) is None:   # (legalization refuses it: the frontend never builds it)
                continue
            if dt == F64 and op in F64_MATH and not caps.int64:
                continue   # test_float64_math_needs_int64
            yield elementwise(op, dt)
    for dt in [d for d in dts if d.kind == "f" and (d != F64 or caps.int64)]:
        yield softmax_like(dt)


F64_MATH = (Op.EXP, Op.LOG, Op.SIN, Op.COS, Op.TANH, Op.POW, Op.SIGNBIT, Op.NEXTAFTER)


def _dtypes(caps: Caps) -> list[np.dtype]:
    return [F32, I32, BOOL] + ([I64] if caps.int64 else []) + ([F64] if caps.float64 else []) + ([F16] if caps.float16 else [])


def legalized(program: LoopProgram, caps: Caps) -> LoopProgram:
    """What the device's `lower` gives its renderer: exp, log, ... pow expanded by ug_core.mathlib."""
    return legalize(program, CAPABILITIES, _dtypes(caps))


def _check(binary: bytes) -> None:
    assert int.from_bytes(binary[:4], "little") == MAGIC and len(binary) % 4 == 0
    if spirv_val_path() is not None:
        problem = validate_spirv(binary)
        assert problem is None, problem


@pytest.mark.parametrize("caps", list(CAPS), ids=str)
@pytest.mark.parametrize("local", [1, 7, 64])
def test_lowered_kernels_validate(caps, local):
    opts = LowerOptions("gpu", local_size=local, gpu_serial_max_extent=0 if local > 1 else 16)
    for kernel in _kernels(CAPS[caps]):
        _check(spirv_module(legalized(lower(kernel, opts), CAPS[caps]), CAPS[caps]))


@pytest.mark.parametrize("caps", list(CAPS), ids=str)
@pytest.mark.parametrize("dt", [F32, I32, BOOL, F64, F16, I64], ids=str)
def test_matmul_module_validates(caps, dt):
    cp = CAPS[caps]
    if (dt == F64 and not cp.float64) or (dt == F16 and not cp.float16) or (dt == I64 and not cp.int64):
        pytest.skip("dtype not offered with these caps")
    a = View((2, 5, 3, 7), (0, 1, 35, 5), 4)   # broadcast batch, transposed inner dims, offset
    b = View((2, 5, 7, 9), (63, 0, 9, 1), 0)
    spec = MatmulSpec(a, b, (2, 5, 3, 9), dt)
    _check(spirv_module(mm.build(spec, 16, (65535, 65535, 3)), cp))


def test_the_renderer_is_a_complete_kit_renderer():
    assert issubclass(SpirvRenderer, Renderer) and SpirvRenderer.complete
    assert set(SpirvRenderer.dispatch) == set(Opc)


@pytest.mark.parametrize("op", [Op.EXP, Op.POW])
def test_unexpanded_math_is_a_render_error(op):
    """The renderer spells no float64 (or float32 with float64) math of its own: a program
    that skipped legalization says so."""
    with pytest.raises(RenderError, match="ug_core.mathlib"):
        spirv_module(lower(elementwise(op, F64), LowerOptions("gpu")), Caps())


def test_without_float64_sin_cos_and_pow_are_the_targets():
    """No float64: float32 sin / cos stay GLSL's, and pow is GLSL's Pow inside mathlib's edge
    cases; exp, log and tanh are still the core's (no ExtInst for them)."""
    caps = CAPS["minimal"]
    for op in (Op.SIN, Op.COS, Op.POW, Op.EXP, Op.LOG, Op.TANH):
        program = legalized(lower(elementwise(op, F32), LowerOptions("gpu")), caps)
        left = {i.arg for i in program.instructions if i.opc is Opc.ALU and i.arg in (Op.SIN, Op.COS, Op.POW, Op.EXP, Op.LOG, Op.TANH)}
        assert left == ({op} if op in (Op.SIN, Op.COS, Op.POW) else set()), (op, left)
        _check(spirv_module(program, caps))


def test_float64_math_needs_int64():
    """ug_core.mathlib takes float64 apart through int64 bits: without shaderInt64 the float64
    functions are not expanded, and the renderer, which has none of its own, says so."""
    caps = CAPS["no-int64"]
    program = legalized(lower(elementwise(Op.EXP, F64), LowerOptions("gpu")), caps)
    with pytest.raises(RenderError, match="int64"):
        spirv_module(program, caps)


def test_missing_feature_is_a_render_error():
    with pytest.raises(RenderError, match="float64"):
        spirv_module(lower(elementwise(Op.ADD, F64), LowerOptions("gpu")), Caps(float64=False))


def test_32bit_index_math_refuses_huge_buffers():
    k = elementwise(Op.ADD, F32, n=2**31 + 5)
    with pytest.raises(RenderError, match="int64"):
        spirv_module(lower(k, LowerOptions("gpu")), Caps(int64=False))


@needs_val
def test_spirv_val_catches_a_broken_module():
    good = spirv_module(lower(elementwise(Op.ADD, F32), LowerOptions("gpu")), Caps())
    bad = good[:-8]  # drop OpFunctionEnd and more
    assert validate_spirv(bad) is not None
