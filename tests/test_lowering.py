"""Lowering kernel IR to loop IR, checked by running the loop IR in tests/loop_interp.py.

Each kernel is built directly in kernel IR, lowered for several targets / workgroup
sizes, interpreted with numpy and compared with a numpy reference.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import pytest

from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Reduction, Store
from ug_core.loop_ir import INDEX, Inst, LoopProgram, Opc, ParamSpec, Special
from ug_core.lower import LowerOptions, lower
from ug_core.ops import ALU, Op
from ug_core.view import View, chain_push

sys.path.insert(0, os.path.dirname(__file__))
import loop_interp  # noqa: E402

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
I32 = np.dtype(np.int32)
I64 = np.dtype(np.int64)
BOOL = np.dtype(bool)
RNG = np.random.default_rng(3)

CONFIGS = {
    "cpu": LowerOptions("cpu"),
    "cpu-block16": LowerOptions("cpu", sum_block=16),
    # outer-blocked: every kernel with a reduction, B outer indices per global id
    "cpu-outer5": LowerOptions("cpu", sum_block=16, outer_block=5, outer_block_always=True),
    "cpu-outer64": LowerOptions("cpu", outer_block=64, outer_block_always=True),
    "gpu-l1": LowerOptions("gpu", local_size=1, gpu_serial_max_extent=0),
    "gpu-l7": LowerOptions("gpu", local_size=7, gpu_serial_max_extent=0),
    "gpu-l32": LowerOptions("gpu", local_size=32, gpu_serial_max_extent=0),
    "gpu-l64": LowerOptions("gpu", local_size=64, gpu_serial_max_extent=0),
    "gpu-l256": LowerOptions("gpu", local_size=256, gpu_serial_max_extent=0),
    "gpu-default": LowerOptions("gpu"),
    "gpu-serial": LowerOptions("gpu", local_size=32, gpu_serial_max_extent=10**9),
    "gpu-grid-spill": LowerOptions("gpu", local_size=4, max_global_size=(3, 2, 65535), gpu_serial_max_extent=0),
    "gpu-serial-spill": LowerOptions("gpu", local_size=4, max_global_size=(2, 3, 65535)),
}


def c(shape):
    return View.contiguous(tuple(shape))


@dataclass
class Case:
    """A kernel with its inputs (by argument index) and expected outputs (flat, by argument index)."""

    kernel: Kernel
    inputs: dict[int, np.ndarray]
    expected: dict[int, np.ndarray]
    rtol: float = 1e-5
    atol: float = 1e-6
    initial: dict[int, np.ndarray] = field(default_factory=dict)  # starting contents of outputs


def run_case(case: Case, opts: LowerOptions) -> LoopProgram:
    program = lower(case.kernel, opts)
    buffers = []
    for i, arg in enumerate(case.kernel.args):
        if i in case.inputs:
            buffers.append(np.ascontiguousarray(case.inputs[i], dtype=arg.dtype).reshape(-1).copy())
        elif i in case.initial:
            buffers.append(case.initial[i].astype(arg.dtype).reshape(-1).copy())
        else:  # poison, so that elements never written show up
            buffers.append(np.full(arg.size, -7777 if arg.dtype.kind != "b" else True, arg.dtype))
    loop_interp.run(program, buffers)
    for i, want in case.expected.items():
        got = buffers[i]
        want = np.asarray(want).reshape(-1)
        assert got.shape == want.shape
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=f"buffer {i}\n{program}")
        else:
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=case.rtol,
                                       atol=case.atol, equal_nan=True, err_msg=f"buffer {i}")
    return program


def rand(*shape, dtype=F32):
    return RNG.standard_normal(shape).astype(dtype)


# --- kernels -------------------------------------------------------------------------------


def add_broadcast(r=4, n=5) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((r, n)),), F32)
    y = eb.load(1, (c((1, n)).expand((r, n)),), F32)
    k = Kernel("add_bcast", (BufferArg(F32, r * n, False), BufferArg(F32, n, False), BufferArg(F32, r * n, True)),
               (r, n), (), (), (Store(2, (r, n), c((r, n)), eb.alu(Op.ADD, (x, y), F32)),))
    a, b = rand(r, n), rand(n)
    return Case(k, {0: a, 1: b}, {2: a + b})


def transpose(r=5, n=4) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((r, n)).permute((1, 0)),), F32)
    k = Kernel("transpose", (BufferArg(F32, r * n, False), BufferArg(F32, r * n, True)), (n, r), (), (),
               (Store(1, (n, r), c((n, r)), eb.alu(Op.NEG, (x,), F32)),))
    a = rand(r, n)
    return Case(k, {0: a}, {1: -a.T})


def chained() -> Case:
    """x (4, 6) read as x.T.reshape(3, 8).T.reshape(2, 12): no single strided view does it."""
    v1 = c((4, 6)).permute((1, 0))               # (6, 4) -> buffer
    v2 = View((8, 3), (1, 8), 0)                 # (8, 3) -> contiguous (3, 8) == contiguous (6, 4)
    v3 = c((2, 12))                              # (2, 12) -> contiguous (8, 3)
    chain = chain_push(chain_push((v3,), v2), v1)
    assert len(chain) >= 2, chain
    eb = ExprBuilder()
    x = eb.load(0, chain, F32)
    k = Kernel("chain", (BufferArg(F32, 24, False), BufferArg(F32, 24, True)), (2, 12), (), (),
               (Store(1, (2, 12), c((2, 12)), x),))
    a = rand(4, 6)
    return Case(k, {0: a}, {1: a.T.reshape(3, 8).T.reshape(2, 12)})


def row_reduce(r, n, op=Op.SUM, dtype=F32) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((r, n)),), dtype)
    k = Kernel(f"row_{op.name.lower()}", (BufferArg(dtype, r * n, False), BufferArg(dtype, r, True)),
               (r, 1), (1,), (Reduction(op, (r, n), x, dtype),),
               (Store(1, (r, 1), c((r, 1)), eb.acc(0, dtype)),))
    a = rand(r, n, dtype=dtype) if dtype.kind == "f" else RNG.integers(-50, 50, (r, n)).astype(dtype)
    ref = {Op.SUM: np.sum, Op.RMAX: np.max, Op.RMIN: np.min}[op](a.astype(np.float64), axis=1)
    tol = (2e-3, 2e-2) if dtype == np.float16 else (1e-5, 1e-4)
    return Case(k, {0: a}, {1: ref.astype(dtype)}, rtol=tol[0], atol=tol[1])


def softmax(r, n) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((r, n)),), F32)
    shifted = eb.alu(Op.SUB, (x, eb.acc(0, F32)), F32)
    e = eb.alu(Op.EXP, (shifted,), F32)
    k = Kernel("softmax", (BufferArg(F32, r * n, False), BufferArg(F32, r * n, True)), (r, 1), (1,),
               (Reduction(Op.RMAX, (r, n), x, F32), Reduction(Op.SUM, (r, n), e, F32)),
               (Store(1, (r, n), c((r, n)), eb.alu(Op.DIV, (e, eb.acc(1, F32)), F32)),))
    a = rand(r, n) * 3
    ex = np.exp(a.astype(np.float64) - a.max(axis=1, keepdims=True))
    return Case(k, {0: a}, {1: ex / ex.sum(axis=1, keepdims=True)}, rtol=1e-4, atol=1e-7)


def layernorm(r, n, eps=1e-5) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((r, n)),), F32)
    w = eb.load(1, (c((1, n)).expand((r, n)),), F32)
    b = eb.load(2, (c((1, n)).expand((r, n)),), F32)
    inv_n = eb.const(1.0 / n, F32)
    mean = eb.alu(Op.MUL, (eb.acc(0, F32), inv_n), F32)
    centered = eb.alu(Op.SUB, (x, mean), F32)
    var = eb.alu(Op.MUL, (eb.acc(1, F32), inv_n), F32)
    rstd = eb.alu(Op.RECIP, (eb.alu(Op.SQRT, (eb.alu(Op.ADD, (var, eb.const(eps, F32)), F32),), F32),), F32)
    out = eb.alu(Op.ADD, (eb.alu(Op.MUL, (eb.alu(Op.MUL, (centered, rstd), F32), w), F32), b), F32)
    k = Kernel("layernorm", (BufferArg(F32, r * n, False), BufferArg(F32, n, False), BufferArg(F32, n, False),
                             BufferArg(F32, r * n, True)), (r, 1), (1,),
               (Reduction(Op.SUM, (r, n), x, F32),
                Reduction(Op.SUM, (r, n), eb.alu(Op.MUL, (centered, centered), F32), F32)),
               (Store(3, (r, n), c((r, n)), out),))
    a, wv, bv = rand(r, n) + 2, rand(n), rand(n)
    a64 = a.astype(np.float64)
    ref = (a64 - a64.mean(1, keepdims=True)) / np.sqrt(a64.var(1, keepdims=True) + eps) * wv + bv
    return Case(k, {0: a, 1: wv, 2: bv}, {3: ref}, rtol=1e-4, atol=1e-4)


def column_sum(n, cols) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((n, cols)),), F32)
    k = Kernel("colsum", (BufferArg(F32, n * cols, False), BufferArg(F32, cols, True)), (1, cols), (0,),
               (Reduction(Op.SUM, (n, cols), x, F32),), (Store(1, (1, cols), c((1, cols)), eb.acc(0, F32)),))
    a = rand(n, cols)
    return Case(k, {0: a}, {1: a.astype(np.float64).sum(0)}, rtol=1e-5, atol=1e-4)


def full_sum(a_dim, b_dim) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((a_dim, b_dim)),), F32)
    k = Kernel("fullsum", (BufferArg(F32, a_dim * b_dim, False), BufferArg(F32, 1, True)), (1, 1), (0, 1),
               (Reduction(Op.SUM, (a_dim, b_dim), x, F32),),
               (Store(1, (1, 1), c((1, 1)), eb.alu(Op.MUL, (eb.acc(0, F32), eb.const(2.0, F32)), F32)),))
    a = rand(a_dim, b_dim)
    return Case(k, {0: a}, {1: 2 * a.astype(np.float64).sum()}, rtol=1e-5, atol=1e-4)


def rank0() -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (View((), (), 0),), F32)
    out = eb.alu(Op.ADD, (eb.alu(Op.MUL, (x, eb.const(2.0, F32)), F32), eb.const(1.0, F32)), F32)
    k = Kernel("rank0", (BufferArg(F32, 1, False), BufferArg(F32, 1, True)), (), (), (),
               (Store(1, (), View((), (), 0), out),))
    return Case(k, {0: np.array([3.5], F32)}, {1: np.array([8.0])})


def strided_store() -> Case:
    """out (4, 10); write x into out[:, ::2] and leave the rest alone."""
    eb = ExprBuilder()
    x = eb.load(0, (c((4, 5)),), F32)
    k = Kernel("strided_store", (BufferArg(F32, 20, False), BufferArg(F32, 40, True)), (4, 5), (), (),
               (Store(1, (4, 5), View((4, 5), (10, 2), 0), x),))
    a = rand(4, 5)
    initial = np.full((4, 10), 5.0, F32)
    want = initial.copy()
    want[:, ::2] = a
    return Case(k, {0: a}, {1: want}, initial={1: initial})


def split_axes_sum() -> Case:
    """Reduce axes (0, 2) of (3, 4, 5), keep axis 1."""
    eb = ExprBuilder()
    x = eb.load(0, (c((3, 4, 5)),), F32)
    k = Kernel("sum_0_2", (BufferArg(F32, 60, False), BufferArg(F32, 4, True)), (1, 4, 1), (0, 2),
               (Reduction(Op.SUM, (3, 4, 5), x, F32),), (Store(1, (1, 4, 1), c((1, 4, 1)), eb.acc(0, F32)),))
    a = rand(3, 4, 5)
    return Case(k, {0: a}, {1: a.astype(np.float64).sum((0, 2))}, atol=1e-5)


def two_stores(r=3, n=40) -> Case:
    """Stores with different extents: the row max (extent 1) and x - max (extent n)."""
    eb = ExprBuilder()
    x = eb.load(0, (c((r, n)),), F32)
    m = eb.acc(0, F32)
    k = Kernel("two_stores", (BufferArg(F32, r * n, False), BufferArg(F32, r * n, True), BufferArg(F32, r, True)),
               (r, 1), (1,), (Reduction(Op.RMAX, (r, n), x, F32),),
               (Store(1, (r, n), c((r, n)), eb.alu(Op.SUB, (x, m), F32)), Store(2, (r, 1), c((r, 1)), m)))
    a = rand(r, n)
    return Case(k, {0: a}, {1: a - a.max(1, keepdims=True), 2: a.max(1)})


def chained_reduce(r=6, n=10) -> Case:
    """Row sums of a.T.reshape(r, n) for a buffer a (r, n): a chain of two views inside a
    reduction (the reshape of a transpose is not one strided view), accumulated in float64."""
    chain = (c((r, n)), View((n, r), (1, n), 0))  # (r, n) -> contiguous (n, r) -> a.T over the buffer
    eb = ExprBuilder()
    xd = eb.cast(eb.load(0, chain, F32), F64)
    k = Kernel("chained_reduce", (BufferArg(F32, r * n, False), BufferArg(F64, r, True)), (r, 1), (1,),
               (Reduction(Op.SUM, (r, n), xd, F64),), (Store(1, (r, 1), c((r, 1)), eb.acc(0, F64)),))
    a = rand(r, n)
    return Case(k, {0: a}, {1: a.T.reshape(r, n).astype(np.float64).sum(1)}, rtol=1e-12, atol=1e-12)


def int_reduce(op) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((5, 9)),), I32)
    k = Kernel("int_reduce", (BufferArg(I32, 45, False), BufferArg(I64, 5, True)), (5, 1), (1,),
               (Reduction(op, (5, 9), eb.cast(x, I64), I64),), (Store(1, (5, 1), c((5, 1)), eb.acc(0, I64)),))
    a = RNG.integers(-1000, 1000, (5, 9)).astype(I32)
    ref = {Op.SUM: np.sum, Op.RMAX: np.max, Op.RMIN: np.min}[op](a.astype(np.int64), axis=1)
    return Case(k, {0: a}, {1: ref})


def empty_axis(op) -> Case:
    """Reducing an empty axis gives the identity."""
    eb = ExprBuilder()
    z = View((3, 0), (0, 0), 0)
    x = eb.load(0, (z,), F32)
    k = Kernel("empty_axis", (BufferArg(F32, 0, False), BufferArg(F32, 3, True)), (3, 1), (1,),
               (Reduction(op, (3, 0), x, F32),), (Store(1, (3, 1), c((3, 1)), eb.acc(0, F32)),))
    ident = {Op.SUM: 0.0, Op.RMAX: -np.inf, Op.RMIN: np.inf}[op]
    return Case(k, {0: np.zeros(0, F32)}, {1: np.full(3, ident)})


def empty_outer() -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((0, 5)),), F32)
    k = Kernel("empty", (BufferArg(F32, 0, False), BufferArg(F32, 0, True)), (0, 5), (), (),
               (Store(1, (0, 5), c((0, 5)), x),))
    return Case(k, {0: np.zeros(0, F32)}, {1: np.zeros(0, F32)})


BASIC = {
    "add_broadcast": add_broadcast,
    "add_broadcast_big": lambda: add_broadcast(33, 70),
    "transpose": transpose,
    "chained_views": chained,
    "row_sum": lambda: row_reduce(4, 100),
    "row_max": lambda: row_reduce(4, 100, Op.RMAX),
    "row_min": lambda: row_reduce(4, 3, Op.RMIN),
    "row_sum_f16": lambda: row_reduce(3, 1000, Op.SUM, np.dtype(np.float16)),  # accumulates in float32
    "softmax": lambda: softmax(3, 50),
    "layernorm": lambda: layernorm(3, 64),
    "column_sum": lambda: column_sum(40, 6),
    "full_sum": lambda: full_sum(7, 13),
    "rank0": rank0,
    "strided_store": strided_store,
    "split_axes_sum": split_axes_sum,
    "two_stores": two_stores,
    "chained_reduce": chained_reduce,
    "int_sum": lambda: int_reduce(Op.SUM),
    "int_max": lambda: int_reduce(Op.RMAX),
    "empty_axis_sum": lambda: empty_axis(Op.SUM),
    "empty_axis_max": lambda: empty_axis(Op.RMAX),
    "empty_outer": empty_outer,
}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", list(BASIC))
def test_kernel(name, config):
    run_case(BASIC[name](), CONFIGS[config])


ROW_LENGTHS = [1, 7, 33, 255, 256, 257, 1000]


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("n", ROW_LENGTHS)
def test_row_lengths(n, config):
    run_case(softmax(3, n), CONFIGS[config])
    run_case(layernorm(2, n), CONFIGS[config])
    run_case(row_reduce(2, n, Op.RMIN), CONFIGS[config])


# --- properties of the generated code -------------------------------------------------------


def opcodes(program: LoopProgram) -> list[Opc]:
    return [i.opc for i in program.instructions]


def test_print_shows_structure():
    gpu = str(lower(softmax(4, 300).kernel, LowerOptions("gpu", local_size=64)))
    for word in ("range", "endrange", "barrier", "define_local [64]", "local_load", "special group_id.0",
                 "special local_id.0", "acc_update.max", "acc_update.add", "exp"):
        assert word in gpu, gpu
    cpu = str(lower(softmax(4, 3000).kernel, LowerOptions("cpu")))
    assert "special global_id.0" in cpu and "barrier" not in cpu and "define_acc" in cpu, cpu
    # the inner loop body is indented more than its loop
    lines = cpu.splitlines()
    loop = next(i for i, line in enumerate(lines) if " = range " in line)
    indent = lambda s: len(s) - len(s.lstrip())  # noqa: E731
    assert indent(lines[loop + 1]) > indent(lines[loop])


def test_index_math_is_simple():
    # contiguous elementwise: the buffer index is the global index, no div/mod
    prog = lower(add_broadcast(8, 16).kernel, LowerOptions("cpu"))
    ops = opcodes(prog)
    assert ops.count(Opc.IDIV) == 0 and ops.count(Opc.MOD) == 1  # gidx % 16 for the broadcast row only
    eb = ExprBuilder()
    x = eb.load(0, (c((8, 16)),), F32)
    k = Kernel("copy", (BufferArg(F32, 128, False), BufferArg(F32, 128, True)), (8, 16), (), (),
               (Store(1, (8, 16), c((8, 16)), x),))
    ops = opcodes(lower(k, LowerOptions("cpu")))
    assert Opc.IDIV not in ops and Opc.MOD not in ops and Opc.ALU not in ops, ops
    # chains need div/mod
    assert Opc.MOD in opcodes(lower(chained().kernel, LowerOptions("cpu")))


def test_loop_invariant_index_is_hoisted_and_shared():
    prog = lower(softmax(4, 300).kernel, LowerOptions("cpu"))
    insts = prog.instructions
    first_range = next(i for i in insts if i.opc is Opc.RANGE)
    row_base = [i for i in insts if i.opc is Opc.ALU and i.arg is Op.MUL and i.dtype == INDEX]
    assert len(row_base) == 1, prog  # gidx * 300, computed once for the three phases
    assert row_base[0].id < first_range.id


def test_cpu_sum_blocked_accuracy():
    n = 3_000_000
    a = RNG.random(n, dtype=np.float32)
    eb = ExprBuilder()
    x = eb.load(0, (c((n,)),), F32)
    k = Kernel("big_sum", (BufferArg(F32, n, False), BufferArg(F32, 1, True)), (1,), (0,),
               (Reduction(Op.SUM, (n,), x, F32),), (Store(1, (1,), c((1,)), eb.acc(0, F32)),))
    prog = lower(k, LowerOptions("cpu"))
    out = np.zeros(1, F32)
    t = time.perf_counter()
    loop_interp.run(prog, [a, out])
    elapsed = time.perf_counter() - t
    exact = a.astype(np.float64).sum()
    assert abs(float(out[0]) - exact) / exact < 1e-4
    assert elapsed < 10
    # the interpreter really accumulates in float32: a plain sequential float32 loop is worse
    seq = np.add.accumulate(a)[-1]
    assert abs(float(seq) - exact) > abs(float(out[0]) - exact)


# --- the outer-blocked cpu strategy ----------------------------------------------------------


def column_softmax(r, n) -> Case:
    """softmax over axis 0 of (r, n): two reductions reading x with stride n, then a store."""
    eb = ExprBuilder()
    x = eb.load(0, (c((r, n)),), F32)
    e = eb.alu(Op.EXP, (eb.alu(Op.SUB, (x, eb.acc(0, F32)), F32),), F32)
    k = Kernel("col_softmax", (BufferArg(F32, r * n, False), BufferArg(F32, r * n, True)), (1, n), (0,),
               (Reduction(Op.RMAX, (r, n), x, F32), Reduction(Op.SUM, (r, n), e, F32)),
               (Store(1, (r, n), c((r, n)), eb.alu(Op.DIV, (e, eb.acc(1, F32)), F32)),))
    a = rand(r, n) * 3
    ex = np.exp(a.astype(np.float64) - a.max(axis=0, keepdims=True))
    return Case(k, {0: a}, {1: ex / ex.sum(axis=0, keepdims=True)}, rtol=1e-4, atol=1e-7)


def middle_mean_max(b, r, n) -> Case:
    """(b, r, n) reduced over axis 1: the mean and the max, stored to two outputs."""
    eb = ExprBuilder()
    x = eb.load(0, (c((b, r, n)),), F32)
    out = (b, 1, n)
    mean = eb.alu(Op.MUL, (eb.acc(0, F32), eb.const(1.0 / r, F32)), F32)
    k = Kernel("mid_reduce", (BufferArg(F32, b * r * n, False), BufferArg(F32, b * n, True), BufferArg(F32, b * n, True)),
               out, (1,), (Reduction(Op.SUM, (b, r, n), x, F32), Reduction(Op.RMAX, (b, r, n), x, F32)),
               (Store(1, out, c(out), mean), Store(2, out, c(out), eb.acc(1, F32))))
    a = rand(b, r, n)
    return Case(k, {0: a}, {1: a.astype(np.float64).mean(1), 2: a.max(1)}, rtol=1e-5, atol=1e-5)


OUTER_BLOCKS = [1, 3, 8, 16, 64]


@pytest.mark.parametrize("block", OUTER_BLOCKS)
@pytest.mark.parametrize("sum_block", [16, 1024])
def test_outer_blocked(block, sum_block):
    opts = LowerOptions("cpu", sum_block=sum_block, outer_block=block)
    cases = [column_sum(37, 50), column_sum(40, 64), column_sum(3, 1), column_softmax(21, 19),
             column_softmax(5, 128), middle_mean_max(3, 17, 11), middle_mean_max(2, 33, 16)]
    for case in cases:
        prog = run_case(case, opts)
        blocked = Opc.DEFINE_LOCAL in opcodes(prog)
        n_outer = int(np.prod(case.kernel.outer))
        assert blocked == (block > 1 and n_outer > 1), prog
        if blocked:
            assert prog.global_size == (-(-n_outer // block),)


def test_outer_blocked_is_chosen_only_when_it_pays():
    opts = LowerOptions("cpu", outer_block=16)
    blocked = lambda case: Opc.DEFINE_LOCAL in opcodes(lower(case.kernel, opts))  # noqa: E731
    assert blocked(column_sum(100, 100)) and blocked(column_softmax(10, 50)) and blocked(middle_mean_max(2, 9, 40))
    # row reductions read the reduced index contiguously: the serial loop vectorizes
    assert not blocked(row_reduce(8, 100)) and not blocked(softmax(8, 100)) and not blocked(layernorm(4, 64))
    assert not blocked(full_sum(7, 13)) and not blocked(add_broadcast(33, 70))
    # the lane loop is innermost: it reads x[i, o + lane], the loop over rows encloses it
    prog = lower(column_sum(100, 100).kernel, opts)
    loads = [i for i in prog.instructions if i.opc is Opc.LOAD]
    assert len(loads) == 1 and loads[0].srcs[1].opc is Opc.ALU
    assert prog.global_size == (7,)


def test_outer_blocked_sum_accuracy():
    # per column: 1024 blocks of 16 rows; float32 as a sequential loop would drift
    r, n = 16384, 3
    a = RNG.random((r, n), dtype=np.float32)
    case = column_sum(r, n)
    case.inputs[0] = a
    case.expected[1] = a.astype(np.float64).sum(0)
    case.rtol, case.atol = 1e-5, 0
    run_case(case, LowerOptions("cpu", sum_block=16, outer_block=4))


def test_interpreter_runs_shared_memory_updates_in_order():
    # for i in 0..4: local[0] += 1 (a loop-carried update): must give 4, not 1
    out = Inst(Opc.PARAM, F32, (), 0)
    zero, four = Inst(Opc.CONST, INDEX, (), 0), Inst(Opc.CONST, INDEX, (), 4)
    one = Inst(Opc.CONST, F32, (), 1.0)
    local = Inst(Opc.DEFINE_LOCAL, F32, (), 1)
    init = Inst(Opc.LOCAL_STORE, None, (local, zero, Inst(Opc.CONST, F32, (), 0.0)))
    loop = Inst(Opc.RANGE, INDEX, (zero, four), 1)
    cur = Inst(Opc.LOCAL_LOAD, F32, (local, zero))
    new = Inst(Opc.ALU, F32, (cur, one), Op.ADD)
    body = [loop, cur, new, Inst(Opc.LOCAL_STORE, None, (local, zero, new)), Inst(Opc.ENDRANGE, None, (loop,))]
    final = Inst(Opc.LOCAL_LOAD, F32, (local, zero))
    insts = [out, zero, four, one, local, init.srcs[2], init] + body + [final, Inst(Opc.STORE, None, (out, zero, final))]
    prog = _program(insts, 1)
    prog.verify()
    buf = np.zeros(1, F32)
    loop_interp.run(prog, [buf])
    assert buf[0] == 4


UNARY_INPUT = {Op.LOG: "pos", Op.SQRT: "pos", Op.RECIP: "nonzero"}


def alu_case(op: Op) -> Case:
    arity = ALU[op].arity
    eb = ExprBuilder()
    n = 37
    if op is Op.NOT:
        dtypes_in, out_dtype = [BOOL], BOOL
    elif op is Op.WHERE:
        dtypes_in, out_dtype = [BOOL, F32, F32], F32
    else:
        dtypes_in, out_dtype = [F32] * arity, (BOOL if ALU[op].returns_bool else F32)
    inputs = {}
    for i, dt in enumerate(dtypes_in):
        if dt == BOOL:
            inputs[i] = RNG.random(n) < 0.5
        elif op in (Op.LOG, Op.SQRT, Op.POW) and i == 0:
            inputs[i] = RNG.random(n).astype(F32) + 0.1
        else:
            inputs[i] = rand(n)
    if op in (Op.CMPEQ, Op.CMPNE, Op.CMPLE, Op.MAX, Op.MIN):
        inputs[1][::3] = inputs[0][::3]  # some ties
    loads = tuple(eb.load(i, (c((n,)),), dt) for i, dt in enumerate(dtypes_in))
    k = Kernel(f"alu_{op.name}", tuple(BufferArg(dt, n, False) for dt in dtypes_in) + (BufferArg(out_dtype, n, True),),
               (n,), (), (), (Store(arity, (n,), c((n,)), eb.alu(op, loads, out_dtype)),))
    with np.errstate(all="ignore"):
        want = np.asarray(ALU[op].numpy(*(inputs[i] for i in range(arity)))).astype(out_dtype)
    return Case(k, inputs, {arity: want}, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", ["cpu", "gpu"])
@pytest.mark.parametrize("op", list(ALU), ids=lambda op: op.name)
def test_every_alu_op_lowers(op, target):
    prog = run_case(alu_case(op), LowerOptions(target, local_size=16))
    assert any(i.opc is Opc.ALU and i.arg is op for i in prog.instructions)


@pytest.mark.parametrize("target", ["cpu", "gpu"])
@pytest.mark.parametrize("src,dst", [(F32, I32), (I32, F64), (BOOL, F32), (F32, np.dtype(np.float16)),
                                     (I64, BOOL), (F64, F32)])
def test_cast_lowers(src, dst, target):
    n = 11
    eb = ExprBuilder()
    x = eb.load(0, (c((n,)),), src)
    k = Kernel("cast", (BufferArg(src, n, False), BufferArg(dst, n, True)), (n,), (), (),
               (Store(1, (n,), c((n,)), eb.cast(x, dst)),))
    a = (rand(n) * 10).astype(src) if src != BOOL else RNG.random(n) < 0.5
    prog = run_case(Case(k, {0: a}, {1: a.astype(dst)}), LowerOptions(target))
    assert any(i.opc is Opc.CAST for i in prog.instructions)


def test_empty_kernel_is_empty_program():
    prog = lower(empty_outer().kernel, LowerOptions("gpu"))
    assert prog.is_empty and prog.instructions == []
    assert prog.params == (ParamSpec(F32, False, 0), ParamSpec(F32, True, 0))


def test_gpu_strategies_and_geometry():
    k = softmax(5, 1000).kernel
    coop = lower(k, LowerOptions("gpu", local_size=128))
    assert coop.global_size == (5,) and coop.local_size == (128,)
    assert Opc.BARRIER in opcodes(coop)
    short = lower(softmax(1024, 8).kernel, LowerOptions("gpu", local_size=128))
    assert short.global_size == (8,) and short.local_size == (128,)  # one thread per row
    assert Opc.BARRIER not in opcodes(short) and Opc.IF not in opcodes(short)
    ragged = lower(softmax(1000, 8).kernel, LowerOptions("gpu", local_size=128))
    assert ragged.global_size == (8,) and opcodes(ragged).count(Opc.IF) == 1  # bounds check
    spill = lower(k, LowerOptions("gpu", local_size=64, max_global_size=(2, 2, 2)))
    assert spill.global_size == (2, 2, 2) and spill.local_size == (64, 1, 1)
    with pytest.raises(ValueError):
        lower(softmax(9, 100).kernel, LowerOptions("gpu", max_global_size=(2, 2, 2), gpu_serial_max_extent=0))
    cpu = lower(softmax(5, 1000).kernel, LowerOptions("cpu"))
    assert cpu.global_size == (5,) and cpu.local_size == (1,)


def test_lowering_is_fast():
    kernel = layernorm(64, 4096).kernel
    t = time.perf_counter()
    for _ in range(20):
        lower(kernel, LowerOptions("gpu"))
        lower(kernel, LowerOptions("cpu"))
    assert time.perf_counter() - t < 2


# --- the interpreter's own checks -------------------------------------------------------------


def _program(insts: list[Inst], local: int) -> LoopProgram:
    for pos, inst in enumerate(insts):
        inst.id = pos
    return LoopProgram("hand", "gpu", (ParamSpec(F32, True, local),), (1,), (local,), insts)


def _shared_exchange(with_barrier: bool) -> LoopProgram:
    out = Inst(Opc.PARAM, F32, (), 0)
    smem = Inst(Opc.DEFINE_LOCAL, F32, (), 4)
    lid = Inst(Opc.SPECIAL, INDEX, (), (Special.LOCAL_ID, 0))
    val = Inst(Opc.CAST, F32, (lid,))
    store = Inst(Opc.LOCAL_STORE, None, (smem, lid, val))
    one = Inst(Opc.CONST, INDEX, (), 1)
    four = Inst(Opc.CONST, INDEX, (), 4)
    nxt = Inst(Opc.MOD, INDEX, (Inst(Opc.ALU, INDEX, (lid, one), Op.ADD), four))
    insts = [out, smem, lid, val, store, one, four, nxt.srcs[0], nxt]
    if with_barrier:
        insts.append(Inst(Opc.BARRIER, None))
    load = Inst(Opc.LOCAL_LOAD, F32, (smem, nxt))
    insts += [load, Inst(Opc.STORE, None, (out, lid, load))]
    return _program(insts, 4)


def test_interpreter_detects_shared_memory_race():
    ok = _shared_exchange(with_barrier=True)
    ok.verify()
    buf = np.zeros(4, F32)
    loop_interp.run(ok, [buf])
    np.testing.assert_array_equal(buf, [1, 2, 3, 0])
    with pytest.raises(loop_interp.InterpError, match="since the last barrier"):
        loop_interp.run(_shared_exchange(with_barrier=False), [np.zeros(4, F32)])


def test_verify_rejects_bad_programs():
    out = Inst(Opc.PARAM, F32, (), 0)
    zero = Inst(Opc.CONST, INDEX, (), 0)
    end = Inst(Opc.CONST, INDEX, (), 4)
    loop = Inst(Opc.RANGE, INDEX, (zero, end), 1)
    barrier = Inst(Opc.BARRIER, None)
    close = Inst(Opc.ENDRANGE, None, (loop,))
    with pytest.raises(AssertionError, match="barrier inside a loop"):
        _program([out, zero, end, loop, barrier, close], 4).verify()
    # the loop counter is not visible after the loop
    val = Inst(Opc.CONST, F32, (), 1.0)
    use = Inst(Opc.STORE, None, (out, loop, val))
    with pytest.raises(AssertionError, match="not visible"):
        _program([out, zero, end, loop, Inst(Opc.ENDRANGE, None, (loop,)), val, use], 4).verify()


# --- random kernels ---------------------------------------------------------------------------


def _random_read(rng, shape: tuple[int, ...], buf: int, eb: ExprBuilder):
    """A load of `shape` from a fresh buffer through a random layout: plain, permuted,
    broadcast, or a chain (a permuted array reshaped). Returns (expr, buffer data, value of shape)."""
    n = len(shape)
    kind = rng.integers(4) if n else 0
    if kind == 0:
        data = rand(*shape)
        return eb.load(buf, (c(shape),), F32), data, data.astype(np.float64)
    if kind == 1:  # permuted buffer
        perm = tuple(rng.permutation(n))
        inv = tuple(np.argsort(perm))
        data = rand(*(shape[p] for p in perm))
        return eb.load(buf, (c(data.shape).permute(inv),), F32), data, data.transpose(inv).astype(np.float64)
    if kind == 2:  # broadcast some dims
        small = tuple(1 if rng.random() < 0.5 else s for s in shape)
        data = rand(*small)
        return (eb.load(buf, (c(small).expand(shape),), F32), data,
                np.broadcast_to(data, shape).astype(np.float64))
    # chain: data (B) --permute--> S --reshape--> shape
    total = int(np.prod(shape))
    s_shape = (2, total // 2) if total % 2 == 0 and total > 2 else (total,)
    data = rand(*s_shape[::-1])
    chain = chain_push((c(shape),), c(data.shape).permute(tuple(range(len(s_shape)))[::-1]))
    return eb.load(buf, chain, F32), data, data.T.reshape(shape).astype(np.float64)


def random_case(seed: int) -> Case:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 4))
    shape = tuple(int(rng.choice([1, 2, 3, 5, 8, 40])) for _ in range(n))
    axes = tuple(d for d in range(n) if rng.random() < 0.5)
    outer = tuple(1 if d in axes else s for d, s in enumerate(shape))
    eb = ExprBuilder()
    x0, d0, v0 = _random_read(rng, shape, 0, eb)
    x1, d1, v1 = _random_read(rng, shape, 1, eb)
    y, d2, v2 = _random_read(rng, outer, 2, eb)  # read in the extent-1 store phase
    acc0, acc1 = eb.acc(0, F32), eb.acc(1, F32)
    sub = eb.alu(Op.SUB, (x0, acc0), F32)
    store_a = eb.alu(Op.ADD, (x0, eb.alu(Op.MUL, (acc0, acc1), F32)), F32)
    store_b = eb.alu(Op.MUL, (eb.alu(Op.SUB, (acc0, acc1), F32), y), F32)
    size, osize = int(np.prod(shape)), int(np.prod(outer))
    # store a through a permuted output layout
    perm = tuple(rng.permutation(n))
    inv = tuple(np.argsort(perm))
    out_a_shape = tuple(shape[p] for p in perm)
    k = Kernel(f"random{seed}",
               (BufferArg(F32, d0.size, False), BufferArg(F32, d1.size, False), BufferArg(F32, d2.size, False),
                BufferArg(F32, size, True), BufferArg(F32, osize, True)),
               outer, axes,
               (Reduction(Op.SUM, shape, eb.alu(Op.MUL, (x0, x1), F32), F32), Reduction(Op.RMAX, shape, sub, F32)),
               (Store(3, shape, c(out_a_shape).permute(inv), store_a), Store(4, outer, c(outer), store_b)))
    a0 = (v0 * v1).sum(axis=axes, keepdims=True)
    a1 = (v0 - a0).max(axis=axes, keepdims=True)
    want_a = (v0 + a0 * a1).transpose(perm)
    want_b = (a0 - a1) * v2
    return Case(k, {0: d0, 1: d1, 2: d2}, {3: want_a, 4: want_b}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_random_kernels(config):
    for seed in range(40):
        case = random_case(seed)
        try:
            run_case(case, CONFIGS[config])
        except Exception as e:
            raise AssertionError(f"seed {seed}:\n{case.kernel}") from e
