"""The core's legalization (ug_core.legalize): what every kit renderer gets.

A legalized program must compute what the lowering's program computes (run both in the loop
IR interpreter, tests/loop_interp.py: bit for bit, but for the math library's few-ulp
functions), and hold only what the renderers spell: no float16 arithmetic, no (op, dtype)
pair that ug_core.ops leaves undefined.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import ug_core as ug
from ug_core.device import CompileError, RenderError
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Reduction, Store
from ug_core.legalize import NATIVE_F16, NATIVE_MATH, legalize
from ug_core.loop_ir import Opc
from ug_core.lower import LowerOptions, lower
from ug_core.ops import ALU, KINDS, Op, defined
from ug_core.testing.lowering_cases import c, initial_buffers, Case

sys.path.insert(0, os.path.dirname(__file__))
import loop_interp  # noqa: E402

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(bool)
TARGETS = [LowerOptions("cpu"), LowerOptions("cpu", sum_block=4), LowerOptions("gpu", local_size=8, gpu_serial_max_extent=0)]
EVERY_DTYPE = (F16, F32, F64, I32, I64, BOOL)


def f16_elementwise(n: int = 67) -> Kernel:
    """Every float16 ALU op, comparisons and WHERE, on loaded values and constants."""
    eb = ExprBuilder()
    a, b = eb.load(0, (c((n,)),), F16), eb.load(1, (c((n,)),), F16)
    x = a
    for op in (Op.ADD, Op.MUL, Op.SUB, Op.DIV, Op.MAX, Op.MIN, Op.POW):
        x = eb.alu(op, (x, b), F16)
    for op in (Op.NEG, Op.ABS, Op.SQRT, Op.EXP, Op.LOG, Op.TANH, Op.SIN, Op.COS, Op.RECIP):
        x = eb.alu(op, (eb.alu(Op.ADD, (x, eb.const(0.5, F16)), F16),), F16)
    picked = eb.alu(Op.WHERE, (eb.alu(Op.CMPLT, (a, b), BOOL), x, a), F16)
    flag = eb.alu(Op.NOT, (eb.alu(Op.CMPNE, (picked, eb.const(0.0, F16)), BOOL),), BOOL)
    return Kernel("f16_ops", (BufferArg(F16, n, False), BufferArg(F16, n, False), BufferArg(F16, n, True),
                              BufferArg(BOOL, n, True)), (n,), (), (),
                  (Store(2, (n,), c((n,)), picked), Store(3, (n,), c((n,)), flag)))


def f16_reductions(op: Op, r: int = 5, n: int = 37) -> Kernel:
    eb = ExprBuilder()
    x = eb.alu(Op.MUL, (eb.load(0, (c((r, n)),), F16), eb.const(3.0, F16)), F16)
    return Kernel(f"f16_{op.name.lower()}", (BufferArg(F16, r * n, False), BufferArg(F16, r, True)), (r, 1), (1,),
                  (Reduction(op, (r, n), x, F16),), (Store(1, (r, 1), c((r, 1)), eb.acc(0, F16)),))


def f16_casts(n: int = 29) -> Kernel:
    """Casts into float16 from every dtype and out of it to every dtype."""
    eb = ExprBuilder()
    args, stores = [], []
    for i, src in enumerate(EVERY_DTYPE):
        args.append(BufferArg(src, n, False))
    for src_index, src in enumerate(EVERY_DTYPE):
        args.append(BufferArg(F16, n, True))
        stores.append(Store(len(args) - 1, (n,), c((n,)), eb.cast(eb.load(src_index, (c((n,)),), src), F16)))
    half = eb.load(0, (c((n,)),), F16)
    for dst in EVERY_DTYPE:
        args.append(BufferArg(dst, n, True))
        stores.append(Store(len(args) - 1, (n,), c((n,)), eb.cast(half, dst)))
    return Kernel("f16_casts", tuple(args), (n,), (), (), tuple(stores))


def inputs_for(kernel: Kernel, rng: np.random.Generator) -> list[np.ndarray]:
    buffers = initial_buffers(Case(kernel, {}, {}))
    for arg, buf in zip(kernel.args, buffers):
        if arg.output:
            continue
        if arg.dtype.kind == "f":
            values = rng.standard_normal(arg.size) * 4
            special = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 7e4, 1e-6, 65519.9]
            values[: len(special) * 3: 3] = special[: len(values[: len(special) * 3: 3])]
            with np.errstate(over="ignore"):
                buf[...] = values.astype(arg.dtype)
        elif arg.dtype == BOOL:
            buf[...] = rng.random(arg.size) < 0.5
        else:
            buf[...] = rng.integers(-70000, 70000, arg.size)
    return buffers


def run(program, kernel: Kernel, rng_seed: int) -> list[np.ndarray]:
    buffers = inputs_for(kernel, np.random.default_rng(rng_seed))
    with np.errstate(all="ignore"):
        loop_interp.run(program, buffers)
    return buffers


KERNELS = {"elementwise": f16_elementwise, "sum": lambda: f16_reductions(Op.SUM),
           "max": lambda: f16_reductions(Op.RMAX), "min": lambda: f16_reductions(Op.RMIN), "casts": f16_casts}


@pytest.mark.parametrize("opts", TARGETS, ids=lambda o: f"{o.target}-{o.sum_block}-{o.local_size}")
@pytest.mark.parametrize("name", list(KERNELS))
def test_float16_in_float32_computes_the_same_bits(name, opts):
    kernel = KERNELS[name]()
    program = lower(kernel, opts)
    legal = legalize(program, {NATIVE_MATH}, EVERY_DTYPE)
    assert legal is not program
    for want, got in zip(run(program, kernel, 1), run(legal, kernel, 1)):
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=f"{legal}")


@pytest.mark.parametrize("name", list(KERNELS))
def test_legalized_programs_hold_no_float16_arithmetic(name):
    legal = legalize(lower(KERNELS[name](), LowerOptions("cpu")), (), EVERY_DTYPE)
    for inst in legal.instructions:
        dtypes = {inst.dtype, *(s.dtype for s in inst.srcs)}
        if inst.opc is Opc.CAST and inst.dtype == F16:
            assert inst.srcs[0].dtype in (F32, F64), inst   # the renderer's correctly rounded casts
        elif inst.opc is Opc.CAST and inst.srcs[0].dtype == F16:
            assert inst.dtype == F32, inst
        elif F16 in dtypes:
            assert inst.opc in (Opc.CONST, Opc.PARAM, Opc.LOAD, Opc.STORE, Opc.DEFINE_LOCAL, Opc.LOCAL_LOAD,
                                Opc.LOCAL_STORE), inst
        if inst.opc is Opc.ALU:
            assert inst.arg not in (Op.EXP, Op.LOG, Op.TANH, Op.SIN, Op.COS), "the math library expands these"


def test_native_float16_and_math_are_left_to_the_target():
    program = lower(f16_elementwise(), LowerOptions("cpu"))
    assert legalize(program, {NATIVE_F16, NATIVE_MATH}, EVERY_DTYPE) is program


def test_math_library_results_stay_within_a_few_ulp():
    kernel = f16_elementwise()
    program = lower(kernel, LowerOptions("cpu"))
    want = run(program, kernel, 2)
    got = run(legalize(program, (), EVERY_DTYPE), kernel, 2)
    np.testing.assert_allclose(got[2].astype(np.float64), want[2].astype(np.float64), rtol=2e-3, atol=1e-3, equal_nan=True)


def test_every_alu_op_has_kinds_and_undefined_pairs_are_refused():
    assert set(KINDS) == set(ALU)
    assert defined(Op.DIV, I32) and defined(Op.NOT, BOOL) and not defined(Op.NEG, BOOL) and not defined(Op.EXP, I64)
    eb = ExprBuilder()
    x = eb.alu(Op.NEG, (eb.load(0, (c((4,)),), BOOL),), BOOL)
    kernel = Kernel("bool_neg", (BufferArg(BOOL, 4, False), BufferArg(BOOL, 4, True)), (4,), (), (), (Store(1, (4,), c((4,)), x),))
    with pytest.raises(RenderError, match="NEG on bool is not defined"):
        legalize(lower(kernel), (), EVERY_DTYPE)
    with pytest.raises(CompileError, match="NEG on bool"):   # the same on every kit device
        ug.registry.get("c").compile(kernel) if "c" in ug.devices() else legalize(lower(kernel), (), ())


def test_unknown_capabilities_are_a_value_error():
    with pytest.raises(ValueError, match="unknown capabilities"):
        legalize(lower(f16_casts()), {"f16_math"}, EVERY_DTYPE)


def test_debug_level_2_shows_the_loop_ir_the_device_renders(tmp_path):
    """UG_DEBUG=2 prints the legalized program of the device at hand (float16 computed in
    float32 on c), not a cpu lowering made up for the log."""
    if "c" not in ug.devices():
        pytest.skip("needs the c device (a C compiler)")
    script = "import numpy as np, ug_core as ug\nx = ug.tensor(np.ones(8, np.float16), device='c')\nprint((x * x).numpy())"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env={**os.environ, "UG_DEBUG": "2"})
    assert done.returncode == 0, done.stderr
    log = done.stdout + done.stderr
    assert "--- loop IR (c, as its renderer gets it) ---" in log, log
    program = log.split("--- loop IR (c, as its renderer gets it) ---")[1]
    assert "mul" in program and ": float32" in program and "cast" in program, program
