"""Kernels built directly in kernel IR, each with its inputs and the expected outputs (numpy).

`tests/test_lowering.py` lowers them for many targets and workgroup sizes and runs the loop IR in
its reference interpreter (checking the lowering); the kit's `test_lowering_on_device.py` has
the device under test compile and run each one itself (checking its renderer and compiler on
kernels the frontend may never build in that form: chained views, strided stores, several
stores of different extents, empty axes, every ALU op and cast). Every builder takes the
numpy Generator its data come from.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ug_core.device import Buffer
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Reduction, Store
from ug_core.ops import ALU, Op, defined
from ug_core.plugins import registry
from ug_core.view import View, chain_push

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
I32 = np.dtype(np.int32)
I64 = np.dtype(np.int64)
BOOL = np.dtype(bool)


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


def rand(rng, *shape, dtype=F32):
    return rng.standard_normal(shape).astype(dtype)


# --- kernels -------------------------------------------------------------------------------


def add_broadcast(rng, r=4, n=5) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((r, n)),), F32)
    y = eb.load(1, (c((1, n)).expand((r, n)),), F32)
    k = Kernel("add_bcast", (BufferArg(F32, r * n, False), BufferArg(F32, n, False), BufferArg(F32, r * n, True)),
               (r, n), (), (), (Store(2, (r, n), c((r, n)), eb.alu(Op.ADD, (x, y), F32)),))
    a, b = rand(rng, r, n), rand(rng, n)
    return Case(k, {0: a, 1: b}, {2: a + b})


def transpose(rng, r=5, n=4) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((r, n)).permute((1, 0)),), F32)
    k = Kernel("transpose", (BufferArg(F32, r * n, False), BufferArg(F32, r * n, True)), (n, r), (), (),
               (Store(1, (n, r), c((n, r)), eb.alu(Op.NEG, (x,), F32)),))
    a = rand(rng, r, n)
    return Case(k, {0: a}, {1: -a.T})


def chained(rng) -> Case:
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
    a = rand(rng, 4, 6)
    return Case(k, {0: a}, {1: a.T.reshape(3, 8).T.reshape(2, 12)})


REDUCE_ORACLE: dict[Op, Callable[..., np.ndarray]] = {Op.SUM: np.sum, Op.RMAX: np.max, Op.RMIN: np.min,
                                                      Op.PROD: np.prod}


def row_reduce(rng, r, n, op=Op.SUM, dtype=F32) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((r, n)),), dtype)
    k = Kernel(f"row_{op.name.lower()}", (BufferArg(dtype, r * n, False), BufferArg(dtype, r, True)),
               (r, 1), (1,), (Reduction(op, (r, n), x, dtype),),
               (Store(1, (r, 1), c((r, 1)), eb.acc(0, dtype)),))
    a = rand(rng, r, n, dtype=dtype) if dtype.kind == "f" else rng.integers(-50, 50, (r, n)).astype(dtype)
    ref = REDUCE_ORACLE[op](a.astype(np.float64), axis=1)
    tol = (2e-3, 2e-2) if dtype == np.float16 else (1e-5, 1e-4)
    return Case(k, {0: a}, {1: ref.astype(dtype)}, rtol=tol[0], atol=tol[1])


def softmax(rng, r, n) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((r, n)),), F32)
    shifted = eb.alu(Op.SUB, (x, eb.acc(0, F32)), F32)
    e = eb.alu(Op.EXP, (shifted,), F32)
    k = Kernel("softmax", (BufferArg(F32, r * n, False), BufferArg(F32, r * n, True)), (r, 1), (1,),
               (Reduction(Op.RMAX, (r, n), x, F32), Reduction(Op.SUM, (r, n), e, F32)),
               (Store(1, (r, n), c((r, n)), eb.alu(Op.DIV, (e, eb.acc(1, F32)), F32)),))
    a = rand(rng, r, n) * 3
    ex = np.exp(a.astype(np.float64) - a.max(axis=1, keepdims=True))
    return Case(k, {0: a}, {1: ex / ex.sum(axis=1, keepdims=True)}, rtol=1e-4, atol=1e-7)


def layernorm(rng, r, n, eps=1e-5) -> Case:
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
    a, wv, bv = rand(rng, r, n) + 2, rand(rng, n), rand(rng, n)
    a64 = a.astype(np.float64)
    ref = (a64 - a64.mean(1, keepdims=True)) / np.sqrt(a64.var(1, keepdims=True) + eps) * wv + bv
    return Case(k, {0: a, 1: wv, 2: bv}, {3: ref}, rtol=1e-4, atol=1e-4)


def column_sum(rng, n, cols) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((n, cols)),), F32)
    k = Kernel("colsum", (BufferArg(F32, n * cols, False), BufferArg(F32, cols, True)), (1, cols), (0,),
               (Reduction(Op.SUM, (n, cols), x, F32),), (Store(1, (1, cols), c((1, cols)), eb.acc(0, F32)),))
    a = rand(rng, n, cols)
    return Case(k, {0: a}, {1: a.astype(np.float64).sum(0)}, rtol=1e-5, atol=1e-4)


def full_sum(rng, a_dim, b_dim) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((a_dim, b_dim)),), F32)
    k = Kernel("fullsum", (BufferArg(F32, a_dim * b_dim, False), BufferArg(F32, 1, True)), (1, 1), (0, 1),
               (Reduction(Op.SUM, (a_dim, b_dim), x, F32),),
               (Store(1, (1, 1), c((1, 1)), eb.alu(Op.MUL, (eb.acc(0, F32), eb.const(2.0, F32)), F32)),))
    a = rand(rng, a_dim, b_dim)
    return Case(k, {0: a}, {1: 2 * a.astype(np.float64).sum()}, rtol=1e-5, atol=1e-4)


def rank0() -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (View((), (), 0),), F32)
    out = eb.alu(Op.ADD, (eb.alu(Op.MUL, (x, eb.const(2.0, F32)), F32), eb.const(1.0, F32)), F32)
    k = Kernel("rank0", (BufferArg(F32, 1, False), BufferArg(F32, 1, True)), (), (), (),
               (Store(1, (), View((), (), 0), out),))
    return Case(k, {0: np.array([3.5], F32)}, {1: np.array([8.0])})


def strided_store(rng) -> Case:
    """out (4, 10); write x into out[:, ::2] and leave the rest alone."""
    eb = ExprBuilder()
    x = eb.load(0, (c((4, 5)),), F32)
    k = Kernel("strided_store", (BufferArg(F32, 20, False), BufferArg(F32, 40, True)), (4, 5), (), (),
               (Store(1, (4, 5), View((4, 5), (10, 2), 0), x),))
    a = rand(rng, 4, 5)
    initial = np.full((4, 10), 5.0, F32)
    want = initial.copy()
    want[:, ::2] = a
    return Case(k, {0: a}, {1: want}, initial={1: initial})


def split_axes_sum(rng) -> Case:
    """Reduce axes (0, 2) of (3, 4, 5), keep axis 1."""
    eb = ExprBuilder()
    x = eb.load(0, (c((3, 4, 5)),), F32)
    k = Kernel("sum_0_2", (BufferArg(F32, 60, False), BufferArg(F32, 4, True)), (1, 4, 1), (0, 2),
               (Reduction(Op.SUM, (3, 4, 5), x, F32),), (Store(1, (1, 4, 1), c((1, 4, 1)), eb.acc(0, F32)),))
    a = rand(rng, 3, 4, 5)
    return Case(k, {0: a}, {1: a.astype(np.float64).sum((0, 2))}, atol=1e-5)


def two_stores(rng, r=3, n=40) -> Case:
    """Stores with different extents: the row max (extent 1) and x - max (extent n)."""
    eb = ExprBuilder()
    x = eb.load(0, (c((r, n)),), F32)
    m = eb.acc(0, F32)
    k = Kernel("two_stores", (BufferArg(F32, r * n, False), BufferArg(F32, r * n, True), BufferArg(F32, r, True)),
               (r, 1), (1,), (Reduction(Op.RMAX, (r, n), x, F32),),
               (Store(1, (r, n), c((r, n)), eb.alu(Op.SUB, (x, m), F32)), Store(2, (r, 1), c((r, 1)), m)))
    a = rand(rng, r, n)
    return Case(k, {0: a}, {1: a - a.max(1, keepdims=True), 2: a.max(1)})


def chained_reduce(rng, r=6, n=10) -> Case:
    """Row sums of a.T.reshape(r, n) for a buffer a (r, n): a chain of two views inside a
    reduction (the reshape of a transpose is not one strided view), accumulated in float64."""
    chain = (c((r, n)), View((n, r), (1, n), 0))  # (r, n) -> contiguous (n, r) -> a.T over the buffer
    eb = ExprBuilder()
    xd = eb.cast(eb.load(0, chain, F32), F64)
    k = Kernel("chained_reduce", (BufferArg(F32, r * n, False), BufferArg(F64, r, True)), (r, 1), (1,),
               (Reduction(Op.SUM, (r, n), xd, F64),), (Store(1, (r, 1), c((r, 1)), eb.acc(0, F64)),))
    a = rand(rng, r, n)
    return Case(k, {0: a}, {1: a.T.reshape(r, n).astype(np.float64).sum(1)}, rtol=1e-12, atol=1e-12)


def int_reduce(rng, op) -> Case:
    eb = ExprBuilder()
    x = eb.load(0, (c((5, 9)),), I32)
    k = Kernel("int_reduce", (BufferArg(I32, 45, False), BufferArg(I64, 5, True)), (5, 1), (1,),
               (Reduction(op, (5, 9), eb.cast(x, I64), I64),), (Store(1, (5, 1), c((5, 1)), eb.acc(0, I64)),))
    a = rng.integers(-1000, 1000, (5, 9)).astype(I32)
    ref = REDUCE_ORACLE[op](a.astype(np.int64), axis=1)
    return Case(k, {0: a}, {1: ref})


def scatter(rng, rop: Op, dtype: np.dtype | type, parts: int = 3, chunk: int = 300, slots: int = 5) -> Case:
    """A scatter store (ops.Op.SCATTER): part p combines its `chunk` values, in order, into row
    p of `slots` slots (many hits per slot; on a gpu target with atomics for the dtype, the
    threads of a part's workgroup update the row atomically)."""
    dtype = np.dtype(dtype)
    phase = (parts, chunk)
    eb = ExprBuilder()
    value = eb.load(0, (c(phase),), dtype)
    slot = eb.load(1, (c(phase),), I64)
    combine, start = {Op.SUM: (np.add, 0), Op.RMAX: (np.maximum, np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf),
                      Op.RMIN: (np.minimum, np.iinfo(dtype).max if dtype.kind in "iu" else np.inf)}[rop]
    k = Kernel(f"scatter_{rop.name.lower()}", (BufferArg(dtype, parts * chunk, False), BufferArg(I64, parts * chunk, False),
                                            BufferArg(dtype, parts * slots, True)),
               (parts, 1), (1,), (), (Store(2, phase, c(phase), eb.scatter(rop, slot, value, slots, start)),))
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    values = (rng.integers(info.min, info.max, phase, dtype=dtype, endpoint=True) if info is not None
              else rand(rng, *phase, dtype=dtype))
    slot_of = rng.integers(0, slots, phase)
    rows = np.full((parts, slots), start, dtype)
    for p in range(parts):
        combine.at(rows[p], slot_of[p], values[p])   # (ints wrap, as the kernel's)
    return Case(k, {0: values, 1: slot_of}, {2: rows.reshape(-1)})


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


BASIC = {   # name -> builder(rng)
    "add_broadcast": add_broadcast,
    "add_broadcast_big": lambda rng: add_broadcast(rng, 33, 70),
    "transpose": transpose,
    "chained_views": chained,
    "row_sum": lambda rng: row_reduce(rng, 4, 100),
    "row_max": lambda rng: row_reduce(rng, 4, 100, Op.RMAX),
    "row_min": lambda rng: row_reduce(rng, 4, 3, Op.RMIN),
    "row_sum_f16": lambda rng: row_reduce(rng, 3, 1000, Op.SUM, np.dtype(np.float16)),  # accumulates in float32
    "softmax": lambda rng: softmax(rng, 3, 50),
    "layernorm": lambda rng: layernorm(rng, 3, 64),
    "column_sum": lambda rng: column_sum(rng, 40, 6),
    "full_sum": lambda rng: full_sum(rng, 7, 13),
    "rank0": lambda rng: rank0(),
    "strided_store": strided_store,
    "split_axes_sum": split_axes_sum,
    "two_stores": two_stores,
    "chained_reduce": chained_reduce,
    "int_sum": lambda rng: int_reduce(rng, Op.SUM),
    "int_max": lambda rng: int_reduce(rng, Op.RMAX),
    "empty_axis_sum": lambda rng: empty_axis(Op.SUM),
    "empty_axis_max": lambda rng: empty_axis(Op.RMAX),
    "empty_outer": lambda rng: empty_outer(),
    "scatter_sum_int32": lambda rng: scatter(rng, Op.SUM, I32),
    "scatter_sum_uint64": lambda rng: scatter(rng, Op.SUM, np.uint64),
    "scatter_max_int64": lambda rng: scatter(rng, Op.RMAX, I64),
    "scatter_max_uint32": lambda rng: scatter(rng, Op.RMAX, np.uint32),
    "scatter_min_int32": lambda rng: scatter(rng, Op.RMIN, I32),
    "scatter_min_uint64": lambda rng: scatter(rng, Op.RMIN, np.uint64, chunk=2000),
    "scatter_sum_float32": lambda rng: scatter(rng, Op.SUM, F32),   # (in order, by one thread)
}


ROW_LENGTHS = [1, 7, 33, 255, 256, 257, 1000]


def row_length_cases(rng, n) -> list[Case]:
    """The row-reduction kernels of test_row_lengths for rows of length n."""
    return [softmax(rng, 3, n), layernorm(rng, 2, n), row_reduce(rng, 2, n, Op.RMIN)]


def column_softmax(rng, r, n) -> Case:
    """softmax over axis 0 of (r, n): two reductions reading x with stride n, then a store."""
    eb = ExprBuilder()
    x = eb.load(0, (c((r, n)),), F32)
    e = eb.alu(Op.EXP, (eb.alu(Op.SUB, (x, eb.acc(0, F32)), F32),), F32)
    k = Kernel("col_softmax", (BufferArg(F32, r * n, False), BufferArg(F32, r * n, True)), (1, n), (0,),
               (Reduction(Op.RMAX, (r, n), x, F32), Reduction(Op.SUM, (r, n), e, F32)),
               (Store(1, (r, n), c((r, n)), eb.alu(Op.DIV, (e, eb.acc(1, F32)), F32)),))
    a = rand(rng, r, n) * 3
    ex = np.exp(a.astype(np.float64) - a.max(axis=0, keepdims=True))
    return Case(k, {0: a}, {1: ex / ex.sum(axis=0, keepdims=True)}, rtol=1e-4, atol=1e-7)


def middle_mean_max(rng, b, r, n) -> Case:
    """(b, r, n) reduced over axis 1: the mean and the max, stored to two outputs."""
    eb = ExprBuilder()
    x = eb.load(0, (c((b, r, n)),), F32)
    out = (b, 1, n)
    mean = eb.alu(Op.MUL, (eb.acc(0, F32), eb.const(1.0 / r, F32)), F32)
    k = Kernel("mid_reduce", (BufferArg(F32, b * r * n, False), BufferArg(F32, b * n, True), BufferArg(F32, b * n, True)),
               out, (1,), (Reduction(Op.SUM, (b, r, n), x, F32), Reduction(Op.RMAX, (b, r, n), x, F32)),
               (Store(1, out, c(out), mean), Store(2, out, c(out), eb.acc(1, F32))))
    a = rand(rng, b, r, n)
    return Case(k, {0: a}, {1: a.astype(np.float64).mean(1), 2: a.max(1)}, rtol=1e-5, atol=1e-5)


def outer_blocked_cases(rng) -> list[Case]:
    """The kernels of test_outer_blocked: column reductions (a strided reduced index)."""
    return [column_sum(rng, 37, 50), column_sum(rng, 40, 64), column_sum(rng, 3, 1), column_softmax(rng, 21, 19),
            column_softmax(rng, 5, 128), middle_mean_max(rng, 3, 17, 11), middle_mean_max(rng, 2, 33, 16)]


def column_sum_accuracy_case(rng, r=16384, n=3) -> Case:
    """Column sums of (16384, 3) in [0, 1): within 1e-5 relative (a sequential float32 loop drifts)."""
    a = rng.random((r, n), dtype=np.float32)
    case = column_sum(rng, r, n)
    case.inputs[0] = a
    case.expected[1] = a.astype(np.float64).sum(0)
    case.rtol, case.atol = 1e-5, 0
    return case


def big_sum_case(rng, n=3_000_000) -> Case:
    """The sum of 3M floats in [0, 1) to one element: within 1e-4 relative."""
    a = rng.random(n, dtype=np.float32)
    eb = ExprBuilder()
    x = eb.load(0, (c((n,)),), F32)
    k = Kernel("big_sum", (BufferArg(F32, n, False), BufferArg(F32, 1, True)), (1,), (0,),
               (Reduction(Op.SUM, (n,), x, F32),), (Store(1, (1,), c((1,)), eb.acc(0, F32)),))
    return Case(k, {0: a}, {1: np.array([a.astype(np.float64).sum()])}, rtol=1e-4, atol=0)


def alu_case(rng, op: Op) -> Case:
    arity = ALU[op].arity
    eb = ExprBuilder()
    n = 37
    dtypes_in: list[np.dtype]
    out_dtype: np.dtype
    if op is Op.NOT:
        dtypes_in, out_dtype = [BOOL], BOOL
    elif op is Op.WHERE:
        dtypes_in, out_dtype = [BOOL, F32, F32], F32
    elif op in (Op.REAL, Op.IMAG):   # complex64 -> float32
        dtypes_in, out_dtype = [np.dtype(np.complex64)], F32
    elif op is Op.COMPLEX:           # two float32 parts -> complex64
        dtypes_in, out_dtype = [F32, F32], np.dtype(np.complex64)
    else:
        operand = F32 if defined(op, F32) else I32   # bitwise ops and shifts: ints
        dtypes_in, out_dtype = [operand] * arity, (BOOL if ALU[op].returns_bool else operand)
    inputs = {}
    for i, dt in enumerate(dtypes_in):
        if dt == BOOL:
            inputs[i] = rng.random(n) < 0.5
        elif dt == I32:
            inputs[i] = rng.integers(-40, 1000, n).astype(I32)   # shift counts outside [0, 32) too
        elif dt.kind == "c":
            inputs[i] = (rand(rng, n) + 1j * rand(rng, n)).astype(dt)
        elif op in (Op.LOG, Op.SQRT, Op.POW) and i == 0:
            inputs[i] = rng.random(n).astype(F32) + 0.1
        else:
            inputs[i] = rand(rng, n)
    if op in (Op.CMPEQ, Op.CMPNE, Op.CMPLE, Op.MAX, Op.MIN):
        inputs[1][::3] = inputs[0][::3]  # some ties
    loads = tuple(eb.load(i, (c((n,)),), dt) for i, dt in enumerate(dtypes_in))
    k = Kernel(f"alu_{op.name}", tuple(BufferArg(dt, n, False) for dt in dtypes_in) + (BufferArg(out_dtype, n, True),),
               (n,), (), (), (Store(arity, (n,), c((n,)), eb.alu(op, loads, out_dtype)),))
    with np.errstate(all="ignore"):
        want = np.asarray(ALU[op].numpy(*(inputs[i] for i in range(arity)))).astype(out_dtype)
    return Case(k, inputs, {arity: want}, rtol=1e-6, atol=1e-6)


CASTS = [(F32, I32), (I32, F64), (BOOL, F32), (F32, np.dtype(np.float16)), (I64, BOOL), (F64, F32),
         (F32, np.dtype(np.complex64)), (np.dtype(np.complex64), np.dtype(np.complex128))]


def cast_case(rng, src: np.dtype, dst: np.dtype) -> Case:
    n = 11
    eb = ExprBuilder()
    x = eb.load(0, (c((n,)),), src)
    k = Kernel("cast", (BufferArg(src, n, False), BufferArg(dst, n, True)), (n,), (), (),
               (Store(1, (n,), c((n,)), eb.cast(x, dst)),))
    a = (rand(rng, n) * 10).astype(src) if src != BOOL else rng.random(n) < 0.5
    if src.kind == "c":
        a = (a + 1j * rand(rng, n) * 10).astype(src)
    return Case(k, {0: a}, {1: a.astype(dst)})


def _random_read(rng, shape: tuple[int, ...], buf: int, eb: ExprBuilder):
    """A load of `shape` from a fresh buffer through a random layout: plain, permuted,
    broadcast, or a chain (a permuted array reshaped). Returns (expr, buffer data, value of shape)."""
    n = len(shape)
    kind = rng.integers(4) if n else 0
    if kind == 0:
        data = rand(rng, *shape)
        return eb.load(buf, (c(shape),), F32), data, data.astype(np.float64)
    if kind == 1:  # permuted buffer
        perm = tuple(rng.permutation(n))
        inv = tuple(np.argsort(perm))
        data = rand(rng, *(shape[p] for p in perm))
        return eb.load(buf, (c(data.shape).permute(inv),), F32), data, data.transpose(inv).astype(np.float64)
    if kind == 2:  # broadcast some dims
        small = tuple(1 if rng.random() < 0.5 else s for s in shape)
        data = rand(rng, *small)
        return (eb.load(buf, (c(small).expand(shape),), F32), data,
                np.broadcast_to(data, shape).astype(np.float64))
    # chain: data (B) --permute--> S --reshape--> shape
    total = int(np.prod(shape))
    s_shape = (2, total // 2) if total % 2 == 0 and total > 2 else (total,)
    data = rand(rng, *s_shape[::-1])
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


# --- running a case -------------------------------------------------------------------------


def initial_buffers(case: Case) -> list[np.ndarray]:
    """The flat starting contents of every argument: the inputs, the outputs' `initial` contents,
    else poison (-7777, or True), so that elements never written show up."""
    buffers = []
    for i, arg in enumerate(case.kernel.args):
        if i in case.inputs:
            buffers.append(np.ascontiguousarray(case.inputs[i], dtype=arg.dtype).reshape(-1).copy())
        elif i in case.initial:
            buffers.append(case.initial[i].astype(arg.dtype).reshape(-1).copy())
        else:  # poison, so that elements never written show up
            poison = True if arg.dtype.kind == "b" else 7777 if arg.dtype.kind == "u" else -7777
            buffers.append(np.full(arg.size, poison, arg.dtype))
    return buffers


def check_outputs(case: Case, buffers: list[np.ndarray], context: object = "") -> None:
    """Compare the flat final contents of the arguments with `case.expected`."""
    for i, want in case.expected.items():
        got = buffers[i]
        want = np.asarray(want).reshape(-1)
        assert got.shape == want.shape, f"buffer {i}: shape {got.shape} != expected {want.shape}"
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=f"buffer {i}\n{context}")
        else:
            wide = np.complex128 if want.dtype.kind == "c" else np.float64
            np.testing.assert_allclose(got.astype(wide), want.astype(wide), rtol=case.rtol,
                                       atol=case.atol, equal_nan=True, err_msg=f"buffer {i}\n{context}")


def missing_dtypes(case: Case, device: str) -> set[np.dtype]:
    """The dtypes of the case's arguments that `device` does not offer."""
    return {arg.dtype for arg in case.kernel.args} - set(registry.get(device).dtypes)


def run_on_device(case: Case, device: str) -> None:
    """Compile the case's kernel with `device` itself (`Device.compile`, no cache), run it on
    buffers holding `initial_buffers(case)` and check what it wrote."""
    dev = registry.get(device)
    buffers = [Buffer(dev, arg.size, arg.dtype).copy_in(data) for arg, data in zip(case.kernel.args, initial_buffers(case))]
    program = dev.compile(case.kernel)
    dev.run(program, buffers)
    dev.synchronize()
    check_outputs(case, [b.numpy() for b in buffers], f"{device} program {program.name}:\n{case.kernel}")
