"""The LLVM renderer on the backend kit, its integer division, and the math library's share of
the core's constants."""

import re

import numpy as np
import pytest

from ug_core import kit, ops
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Store
from ug_core.lower import LowerOptions, lower
from ug_core.ops import Op
from ug_core.testing.test_semantics import run_alu
from ug_core.view import View
from ug_llvm.llvm_math_sincos import inv_pio2_table
from ug_llvm.render import LLVMRenderer, LLVMTarget, RenderError, render


def _program(op: Op, dtypes_in: list[np.dtype], out: np.dtype, n: int = 64):
    eb = ExprBuilder()
    view = View.contiguous((n,))
    loads = tuple(eb.load(i + 1, (view,), dt) for i, dt in enumerate(dtypes_in))
    args = (BufferArg(out, n, True),) + tuple(BufferArg(dt, n, False) for dt in dtypes_in)
    kernel = Kernel(f"k_{op.name}", args, (n,), (), (), (Store(0, (n,), view, eb.alu(op, loads, out)),))
    return lower(kernel, LowerOptions(target="cpu"))


def test_the_renderer_is_a_kit_renderer_and_its_error_the_kits():
    assert issubclass(LLVMRenderer, kit.Renderer) and RenderError is kit.RenderError
    i32 = np.dtype(np.int32)
    with pytest.raises(kit.RenderError, match="exp on i32"):
        render(_program(Op.EXP, [i32], i32), "k")
    text = LLVMRenderer(LLVMTarget(triple="x86_64-unknown-linux-gnu")).render(_program(Op.ADD, [i32, i32], i32), "k")
    assert text.startswith('target triple = "x86_64-unknown-linux-gnu"') and "define void @k.all(ptr %args)" in text


@pytest.mark.parametrize("dt", [np.int32, np.int64], ids=str)
def test_int_division_never_divides_by_zero_or_overflows(dt):
    """sdiv and srem by 0, or of INT_MIN by -1, are undefined in LLVM (x86 traps): the divisor
    they get is a select that replaced those two cases."""
    ty = {np.int32: "i32", np.int64: "i64"}[dt]
    text = render(_program(Op.DIV, [np.dtype(dt)] * 2, np.dtype(dt)), "k")
    divisions = re.findall(rf"= s(?:div|rem) {ty} \S+, (%t\d+)", text)
    assert len(divisions) == 2
    for divisor in divisions:
        assert re.search(rf"{divisor} = select i1 %t\d+, {ty} 1, {ty} ", text), divisor


@pytest.mark.parametrize("dt", [np.int32, np.int64], ids=str)
def test_int_division_is_floor_division_in_every_vector_lane(dt):
    """ops.divide's meaning (floor; x // 0 == 0; INT_MIN // -1 == INT_MIN) in long vectorized
    loops, with the edge cases at every position."""
    rng = np.random.default_rng(12)
    info = np.iinfo(dt)
    n = 1037
    a = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    b = rng.integers(-9, 10, n).astype(dt)
    edges = rng.random(n) < 0.2
    a[edges] = rng.choice([info.min, info.max, -7, 7, 0], int(edges.sum()))
    b[edges] = rng.choice([0, -1, 1, info.min, -2], int(edges.sum()))
    got = run_alu("cpu", Op.DIV, [a, b], np.dtype(dt))
    with np.errstate(all="ignore"):
        expected = ops.divide(a, b)
    assert ((b == 0) & (got == 0)).sum() == (b == 0).sum() > 0
    np.testing.assert_array_equal(got, expected)


def test_payne_hanek_table_holds_the_bits_of_2_over_pi():
    """The float32 sin/cos table is built from the core's bits of 2/pi (ug_core.mathlib): the
    windows are 32 bits moving by 8, checked against fdlibm's 24-bit chunks of 2/pi."""
    fdlibm = [0xA2F983, 0x6E4E44, 0x1529FC, 0x2757D1, 0xF534DD, 0xC0DB62, 0x95993C, 0x439041]
    bits = int("".join(f"{chunk:06X}" for chunk in fdlibm), 16)   # floor(2/pi * 2**192)
    table = inv_pio2_table()
    assert table == [(bits >> (184 - 8 * i)) & 0xFFFFFFFF for i in range(24)]
    assert table[3] == 0xA2F9836E



def test_a_scans_running_value_keeps_the_sign_of_zero():
    """A reduction's float accumulator may ignore the sign of zero (ACC_FAST's nsz); a scan's
    stores every step, so its update has no nsz: with it, LLVM folded the -0.0 the running sum
    starts from plus cumulative_sum's +0.0 initial value to -0.0."""
    import ug_core as ug
    x = ug.tensor(np.ones(8, np.float32), device="ref")
    adds = []
    for item in ug.schedule(ug.cumulative_sum(x, include_initial=True), x.sum()).kernels:
        text = render(lower(item.kernel, LowerOptions(target="cpu")), "k")
        adds += [line.split("=", 1)[1].split(" float ")[0].strip() for line in text.splitlines() if " fadd " in line]
    assert sorted(adds) == ["fadd reassoc contract", "fadd reassoc contract nsz"], adds   # (the scan's, the sum's)
