"""Scans in the core, without a device: the lowering (run in the loop IR interpreter for every
target configuration), the scheduler's kernels, the blocked form of long scans, ops.SCANS."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ug_core as ug
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Reduction, Store
from ug_core.lower import LowerOptions, lower
from ug_core.loop_ir import Opc
from ug_core.ops import SCANS, Op
from ug_core.array_api.scans import SPLIT_MIN_LENGTH
from ug_core.blocked_scan import block_length
from ug_core.testing.lowering_cases import F32, F64, I32, I64, Case, c, rand

sys.path.insert(0, os.path.dirname(__file__))
from test_lowering import CONFIGS, run_case  # noqa: E402

NUMPY_SCAN = {Op.SUM: np.cumsum, Op.PROD: np.cumprod, Op.RMAX: np.maximum.accumulate, Op.RMIN: np.minimum.accumulate}


def scan_case(rng, shape: tuple[int, ...], axis: int, op: Op, dtype: np.dtype = F32) -> Case:
    """out = scan of x along `axis`, in `dtype` (x is float32 or int32 data)."""
    eb = ExprBuilder()
    src = F32 if dtype.kind == "f" else I32
    x = eb.cast(eb.load(0, (c(shape),), src), dtype)
    outer = tuple(1 if d == axis else s for d, s in enumerate(shape))
    size = int(np.prod(shape))
    k = Kernel("scan", (BufferArg(src, size, False), BufferArg(dtype, size, True)), outer, (axis,), (),
               (Store(1, shape, c(shape), x, scan=op),))
    if src == F32:
        a = (1 + rng.uniform(-1, 1, shape) / 64).astype(F32) if op is Op.PROD else rand(rng, *shape)
    else:
        a = rng.integers(-2**31, 2**31, size=shape).astype(I32)
    if dtype.kind != "f":
        return Case(k, {0: a}, {1: NUMPY_SCAN[op](a.astype(dtype), axis=axis)})
    # float: against the exact running values (float64); a gpu workgroup's scan adds in another
    # order than numpy's sequential float32 loop (both a few ulp of the running magnitude off)
    want = NUMPY_SCAN[op](a.astype(np.float64), axis=axis)
    return Case(k, {0: a}, {1: want}, rtol=1e-5, atol=max(1e-5, 2e-6 * float(np.abs(want).max(initial=0))))


def scan_after_row_max(rng, r: int, n: int) -> Case:
    """cumsum(x - max(x, row)) along rows: a reduction, then a scan reading it."""
    eb = ExprBuilder()
    x = eb.load(0, (c((r, n)),), F32)
    shifted = eb.alu(Op.SUB, (x, eb.acc(0, F32)), F32)
    k = Kernel("scan_max", (BufferArg(F32, r * n, False), BufferArg(F32, r * n, True), BufferArg(F32, r, True)),
               (r, 1), (1,), (Reduction(Op.RMAX, (r, n), x, F32),),
               (Store(1, (r, n), c((r, n)), shifted, scan=Op.SUM), Store(2, (r, 1), c((r, 1)), eb.acc(0, F32))))
    a = rand(rng, r, n)
    m = a.max(axis=1, keepdims=True)
    return Case(k, {0: a}, {1: np.cumsum(a - m, axis=1), 2: m}, rtol=1e-5, atol=1e-5)


CASES = {
    "rows": lambda rng: scan_case(rng, (3, 50), 1, Op.SUM),
    "columns": lambda rng: scan_case(rng, (40, 7), 0, Op.SUM),
    "middle": lambda rng: scan_case(rng, (2, 9, 3), 1, Op.PROD),
    "long": lambda rng: scan_case(rng, (3000,), 0, Op.SUM),
    "one": lambda rng: scan_case(rng, (4, 1), 1, Op.SUM),
    "empty-axis": lambda rng: scan_case(rng, (4, 0), 1, Op.PROD),
    "float64": lambda rng: scan_case(rng, (5, 20), 1, Op.PROD, F64),
    "int32-wraps": lambda rng: scan_case(rng, (30, 6), 0, Op.SUM, I32),
    "int64-prod": lambda rng: scan_case(rng, (6, 30), 1, Op.PROD, I64),
    "after-a-reduction": lambda rng: scan_after_row_max(rng, 4, 33),
    # long enough (GPU_SCAN_MIN) for a gpu workgroup per row: chunks, totals in shared memory
    "long-rows-max": lambda rng: scan_case(rng, (3, 700), 1, Op.RMAX),
    "long-columns-min": lambda rng: scan_case(rng, (600, 3), 0, Op.RMIN, I32),
    "long-float64-prod": lambda rng: scan_case(rng, (2, 1000), 1, Op.PROD, F64),
    "long-int32-wraps": lambda rng: scan_case(rng, (2, 513), 1, Op.SUM, I32),
}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", list(CASES))
def test_scan_lowering(rng, name, config):
    run_case(CASES[name](rng), CONFIGS[config])


def test_scan_is_one_tight_loop_per_row():
    """cpu: a global id per row, one loop along the axis: a load, the update, the store."""
    program = lower(scan_case(np.random.default_rng(0), (8, 100), 1, Op.SUM).kernel, LowerOptions("cpu"))
    assert program.global_size == (8,)
    body = program.instructions[[i.opc for i in program.instructions].index(Opc.RANGE) + 1:-1]
    assert [i.opc for i in body if i.opc not in (Opc.ALU, Opc.CONST)] == [
        Opc.LOAD, Opc.ACC_UPDATE, Opc.ACC_READ, Opc.STORE]


def test_gpu_runs_a_short_scan_one_thread_per_row():
    """Below GPU_SCAN_MIN, even past gpu_serial_max_extent: a thread runs a row's scan in order."""
    program = lower(scan_case(np.random.default_rng(0), (8, 100), 1, Op.SUM).kernel, LowerOptions("gpu"))
    assert Opc.BARRIER not in {i.opc for i in program.instructions}


def test_gpu_shares_a_long_scan_among_a_workgroup():
    """A row of GPU_SCAN_MIN values or more: a workgroup per row (about sqrt(n) threads, each a
    chunk), the chunks' totals scanned in shared memory between barriers."""
    program = lower(scan_case(np.random.default_rng(0), (8, 4096), 1, Op.SUM).kernel, LowerOptions("gpu"))
    assert program.global_size == (8,) and program.local_size == (64,)
    assert Opc.BARRIER in {i.opc for i in program.instructions}


def test_kernel_text_names_the_scan():
    k = scan_case(np.random.default_rng(0), (2, 3), 1, Op.PROD).kernel
    assert "scan prod" in str(k) and "scan prod" in k.key()


# --- the scheduler ----------------------------------------------------------------------------


def _tensor(shape):
    return ug.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32), device="ref")


def test_consumers_load_the_scan():
    x = _tensor((4, 5))
    s = ug.schedule(ug.cumulative_sum(x * 2, axis=1) + 1)
    assert [k.kernel.stores[0].scan for k in s.kernels] == [Op.SUM, None]
    assert s.kernels[0].kernel.name.startswith("s")


def test_a_scan_read_twice_is_computed_once():
    x = _tensor((4, 5))
    y = ug.cumulative_prod(x, axis=0)
    assert len(ug.schedule(y + 1, y.reshape(20) * 2).kernels) == 3  # the scan, and one per reader shape


def test_a_scan_and_a_reduction_over_the_same_rows_share_a_kernel():
    x = _tensor((4, 5))
    a, b = ug.cumulative_sum(x, axis=1), x.sum(axis=1)
    s = ug.schedule(a, b)
    assert len(s.kernels) == 1
    ug.realize(a, b)
    np.testing.assert_allclose(a.numpy(), np.cumsum(x.numpy(), axis=1), rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), x.numpy().sum(axis=1), rtol=1e-6)


@pytest.mark.parametrize("n, kernels", [(2 * SPLIT_MIN_LENGTH, 3), (2 * SPLIT_MIN_LENGTH + 1, 4),
                                        (SPLIT_MIN_LENGTH - 1, 1)])
def test_long_scans_are_blocked(n, kernels):
    """Block totals, their prefix and the seeded blocks' scans; stored straight into the result
    when the blocks cover it exactly, else copied out of a padded one."""
    x = _tensor((n,))
    y = ug.cumulative_sum(x)
    s = ug.schedule(y)
    assert len(s.kernels) == kernels
    assert s.kernels[-1].outputs[0] is y.node
    np.testing.assert_allclose(y.numpy(), np.cumsum(x.numpy().astype(np.float64)), rtol=1e-4, atol=1e-3)


def test_many_rows_are_never_blocked():
    x = _tensor((64, SPLIT_MIN_LENGTH))
    assert len(ug.schedule(ug.cumulative_sum(x, axis=1)).kernels) == 1


@pytest.mark.parametrize("n", [SPLIT_MIN_LENGTH, 100000, 2**24, 1000003, 2**20 * 3])
def test_block_length(n):
    b = block_length(n)
    assert b & (b - 1) == 0 or n % b == 0
    assert np.sqrt(n) / 4 <= b <= 2 * np.sqrt(n)


def test_ops_meaning():
    """The ref device's meaning: the first value itself, float32 accumulated in float64."""
    a = np.array([-0.0, 1e8, 1.0, -1e8], np.float32)
    got = SCANS[Op.SUM](a, 0, a.dtype)
    assert np.signbit(got[0]) and got.dtype == np.float32
    assert got[-1] == 1.0  # float32 sequentially gives 0
    i = np.array([2**62, 2**62], np.int64)
    assert SCANS[Op.SUM](i, 0, i.dtype)[-1] == -2**63  # wraps
