"""Floor division, remainder, rounding, bitwise ops, shifts, signbit, copysign and nextafter:
what needs no device (the kit's ug_core/testing/test_int_ops.py runs them on each device).

* the core's expansions (ug_core.mathlib division.py, bits.py), which every device gets, run in
  the loop IR interpreter against numpy, bit for bit;
* the frontend: result dtypes (numpy's promotion, weak scalars), TypeErrors naming the dtypes,
  and fusion (`clip(floor(x / s)) * s` is one kernel);
* every renderer spells every op ug_core.ops defines, or fails at import.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ug_core as ug
from ug_core import mathlib
from ug_core.array_api import elementwise as ew
from ug_core.device import RenderError
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Store
from ug_core.kit.renderer import check_alu_tables
from ug_core.legalize import NATIVE_F16, NATIVE_MATH, legalize, rendered
from ug_core.loop_ir import LoopProgram, Opc
from ug_core.lower import LowerOptions, lower
from ug_core.ops import ALU, BOOL_KIND, FLOAT, INT, OPERAND_KINDS, Op, defined_on
from ug_core.testing.test_int_ops import float_edges, int_edges, pairs, wide_floats
from ug_core.testing.test_semantics import assert_same
from ug_core.view import View

sys.path.insert(0, os.path.dirname(__file__))
import loop_interp  # noqa: E402

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(bool)
EVERY_DTYPE = (F16, F32, F64, I32, I64, BOOL)
DEVICE = "ref"


def _kernel(op: Op, inputs: list[np.ndarray]) -> Kernel:
    n = inputs[0].size
    out = BOOL if ALU[op].returns_bool else inputs[0].dtype
    eb = ExprBuilder()
    view = (View.contiguous((n,)),)
    loads = tuple(eb.load(i + 1, view, a.dtype) for i, a in enumerate(inputs))
    args = (BufferArg(out, n, True),) + tuple(BufferArg(a.dtype, n, False) for a in inputs)
    return Kernel(f"exact_{op.name}", args, (n,), (), (), (Store(0, (n,), view[0], eb.alu(op, loads, out)),))


def _interpreted(program: LoopProgram, kernel: Kernel, inputs: list[np.ndarray]) -> np.ndarray:
    out = np.zeros(kernel.args[0].size, kernel.args[0].dtype)
    with np.errstate(all="ignore"):
        loop_interp.run(program, [out, *inputs])
    return out


# with the target's fmod: the core's exact fmod is a loop that reads the accumulator it updates,
# which the interpreter does not run (the device suite checks it on vulkan, which has no NATIVE_MATH)
CAPABILITIES = [frozenset({NATIVE_MATH}), frozenset({NATIVE_MATH, NATIVE_F16})]


@pytest.mark.parametrize("capabilities", CAPABILITIES, ids=lambda c: ",".join(sorted(c)))
@pytest.mark.parametrize("dt", [F16, F32, F64, I32, I64], ids=str)
@pytest.mark.parametrize("op", [Op.FLOORDIV, Op.MOD], ids=lambda o: o.name)
def test_division_expansions_compute_numpys_results(op, dt, capabilities, rng):
    if dt.kind == "f":
        edges = pairs(float_edges(dt), dt)
        a, b = (np.concatenate([e, w]) for e, w in zip(edges, wide_floats(dt, rng)))
    else:
        a, b = pairs(int_edges(dt), dt)
    kernel = _kernel(op, [a, b])
    program = legalize(lower(kernel, LowerOptions("cpu")), capabilities, EVERY_DTYPE)
    assert not any(i.opc is Opc.ALU and i.arg in mathlib.EXACT_OPS for i in program.instructions)
    with np.errstate(all="ignore"):
        expected = ALU[op].numpy(a, b)
    assert_same(_interpreted(program, kernel, [a, b]), expected, (a, b))


@pytest.mark.parametrize("capabilities", CAPABILITIES, ids=lambda c: ",".join(sorted(c)))
@pytest.mark.parametrize("dt", [F16, F32, F64], ids=str)
def test_bit_expansions_compute_numpys_results(dt, capabilities, rng):
    info = np.finfo(dt)
    a, b = pairs(float_edges(dt) + [float(info.smallest_normal) * (1 - float(info.eps) / 2), 2.0, 1024.0], dt)
    wide = wide_floats(dt, rng)
    a, b = np.concatenate([a, wide[0]]), np.concatenate([b, wide[1]])
    for op, inputs in ((Op.NEXTAFTER, [a, b]), (Op.SIGNBIT, [a])):
        kernel = _kernel(op, inputs)
        program = legalize(lower(kernel, LowerOptions("cpu")), capabilities, EVERY_DTYPE)
        assert any(i.opc is Opc.BITCAST for i in program.instructions)
        with np.errstate(all="ignore"):
            expected = ALU[op].numpy(*inputs)
        assert_same(_interpreted(program, kernel, inputs), expected, tuple(inputs))


def test_float64_bits_need_int64_on_the_target():
    x = np.array([1.0, -0.0])
    program = lower(_kernel(Op.SIGNBIT, [x]), LowerOptions("gpu", local_size=8))
    with pytest.raises(RenderError, match="SIGNBIT on float64 needs int64"):
        legalize(program, (), (F32, F64, I32, BOOL))
    # floor division needs no bits: a target without int64 has it
    legalize(lower(_kernel(Op.FLOORDIV, [x, x]), LowerOptions("gpu", local_size=8)), (), (F32, F64, I32, BOOL))


def test_programs_without_them_are_left_as_they_are():
    program = lower(_kernel(Op.ADD, [np.ones(4, np.float32)] * 2), LowerOptions("cpu"))
    assert mathlib.expand_exact(program, int64=True) is program


# --- the ops table and the renderers -----------------------------------------------------------

def test_meaning_is_numpys():
    assert ALU[Op.FLOORDIV].numpy is np.floor_divide and ALU[Op.MOD].numpy is np.remainder
    assert ALU[Op.FMOD].numpy is np.fmod
    # numpy's nextafter, but y where x == y for float16 too (numpy >= 2.5 does; before, x)
    assert ALU[Op.NEXTAFTER].numpy(np.float16(0.0), np.float16(-0.0)) == 0 and np.signbit(
        ALU[Op.NEXTAFTER].numpy(np.float16(0.0), np.float16(-0.0)))
    assert ALU[Op.RINT].numpy is np.rint and ALU[Op.SIGNBIT].returns_bool
    assert Op.SHL in defined_on(INT) and Op.SHL not in defined_on(BOOL_KIND) and Op.AND in defined_on(BOOL_KIND)
    assert Op.FLOOR in defined_on(FLOAT) and Op.FLOOR not in defined_on(INT)
    # what renderers spell: all that is defined, but the core's exact expansions
    assert Op.FLOORDIV not in rendered(INT) and Op.FMOD in rendered(FLOAT) and Op.DIV in rendered(INT)


def test_a_renderer_missing_an_op_fails_at_import():
    complete = {kind: rendered(kind) | {Op.WHERE} for kind in OPERAND_KINDS}
    check_alu_tables(complete, "complete")
    with pytest.raises(NotImplementedError, match="does not handle ops: SHR"):
        check_alu_tables({**complete, INT: complete[INT] - {Op.SHR}}, "lacks shr")
    with pytest.raises(NotImplementedError, match="no ALU ops for operand kinds"):
        check_alu_tables({FLOAT: complete[FLOAT]}, "floats only")


# --- the frontend --------------------------------------------------------------------------------

def _t(values, dtype) -> ug.Tensor:
    return ug.tensor(np.array(values, dtype), device=DEVICE)


def test_result_dtypes_follow_numpy():
    i32, i64, f16, f32, b = _t([1], I32), _t([1], I64), _t([1], F16), _t([1], F32), _t([True], BOOL)
    assert (i32 // i32).dtype == I32 and (i32 % i64).dtype == I64 and (f16 // f16).dtype == F16
    assert (i32 // 2).dtype == I32 and (i32 % 2.5).dtype == F32 and (3 // i64).dtype == I64
    assert (b & b).dtype == BOOL and (b | True).dtype == BOOL and (b ^ 1).dtype == I64 and (i32 & b).dtype == I32
    assert (~b).dtype == BOOL and (~i32).dtype == I32 and (b << 1).dtype == I64 and (1 << i32).dtype == I32
    assert ew.floor(f16).dtype == F16 and ew.round(i64).dtype == I64 and ew.signbit(f32).dtype == BOOL
    assert ew.nextafter(f16, 1.0).dtype == F16 and ew.copysign(f32, -1.0).dtype == F32


@pytest.mark.parametrize("fn", [lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y,
                                lambda x, y: x << y, lambda x, y: x >> y], ids=["and", "or", "xor", "shl", "shr"])
def test_bitwise_ops_of_floats_are_type_errors_naming_the_dtypes(fn):
    f, i = _t([1.0], F32), _t([1], I32)
    with pytest.raises(TypeError, match="got float32 and int32"):
        fn(f, i)
    with pytest.raises(TypeError, match="got int32 and float"):
        fn(i, 1.5)
    with pytest.raises(TypeError, match="got float and int32"):
        fn(1.5, i)
    with pytest.raises(TypeError, match="float32"):
        ~f


def test_shifts_of_bools_are_type_errors():
    b = _t([True], BOOL)
    with pytest.raises(TypeError, match="integer operands, got bool and bool"):
        b << b
    with pytest.raises(TypeError, match="needs a numeric tensor"):
        ew.floor(b)


def test_functions_and_operators_are_one_thing():
    x, y = _t([7, -7, 3], I32), _t([2, 2, -2], I32)
    for fn, op in ((ew.floor_divide, "__floordiv__"), (ew.remainder, "__mod__"), (ew.bitwise_and, "__and__"),
                   (ew.bitwise_or, "__or__"), (ew.bitwise_xor, "__xor__"), (ew.bitwise_left_shift, "__lshift__"),
                   (ew.bitwise_right_shift, "__rshift__")):
        assert_same(fn(x, y).numpy(), getattr(x, op)(y).numpy())
        assert_same(fn(5, y).numpy(), getattr(np.array([5], np.int32), op)(np.array([2, 2, -2], np.int32)))
    assert_same(ew.bitwise_invert(x).numpy(), np.invert(np.array([7, -7, 3], np.int32)))


def test_in_place_operators_give_the_tensor_a_new_value():
    """`x //= y` is `x.assign(x // y)`: the same tensor object holds the new value, and tensors
    made from x before keep theirs (ug's values, unlike numpy's views); the result must keep x's
    shape and a dtype x holds (numpy's same_kind rule)."""
    x = _t([7, -7], I32)
    same, before = x, x + 0
    x //= 2
    x %= 3
    x <<= 1
    x |= 1
    assert x is same
    assert_same(x.numpy(), np.array([1, 5], np.int32))
    assert_same(before.numpy(), np.array([7, -7], np.int32))
    f = ug.tensor(np.array([1.5, 2.5], np.float32), device=DEVICE)
    f *= ug.tensor(np.array([2.0, 2.0]), device=DEVICE)     # float64 into float32: same kind
    assert f.dtype == np.float32
    assert_same(f.numpy(), np.array([3.0, 5.0], np.float32))
    with pytest.raises(TypeError, match="same_kind"):
        x /= 2                                               # int32 / int -> float64
    with pytest.raises(ValueError, match="shape"):
        x += _t([[1, 2], [3, 4]], I32)                       # the result would broadcast x


def test_quantizer_fuses_into_one_kernel():
    x = ug.tensor(np.linspace(-3, 3, 64, dtype=np.float32), device=DEVICE)
    q = ew.clip(ew.floor(x / 0.25), -8, 7) * 0.25
    assert len(ug.schedule(q).kernels) == 1
    assert_same(q.numpy(), np.clip(np.floor(np.linspace(-3, 3, 64, dtype=np.float32) / np.float32(0.25)), -8, 7)
                * np.float32(0.25))
    i = ug.tensor(np.arange(-20, 20, dtype=np.int32), device=DEVICE)
    bits = ((i // 3) % 5 & 6) << 1 | ~i >> 2
    assert len(ug.schedule(bits).kernels) == 1
    a = np.arange(-20, 20, dtype=np.int32)
    assert_same(bits.numpy(), ((a // 3) % 5 & 6) << 1 | ~a >> 2)
