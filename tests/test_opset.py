"""The op-set contract (ug_core.opset): a renderer gets the ops of the version it declares, and
no operand its undeclared semantics would trap or go undefined on.

The legalization into an older version must compute the bits the current program computes: both
run in the loop IR interpreter (tests/loop_interp.py), on the values where ops differ (zeros,
halves, extremes, NaN, infinities). The guards are checked by a strict interpreter that raises on
each operand C leaves undefined (an integer division by 0, a shift past the width, a float -> int
conversion out of range...).
"""
from __future__ import annotations

import dataclasses
import os
import sys
import warnings

import numpy as np
import pytest

from ug_core import legalize as legalize_module
from ug_core import opset
from ug_core.device import RenderError
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Reduction, Store
from ug_core.kit import NATIVE_MATH, DeviceInfo, KitDevice, NumpyAllocator, Renderer
from ug_core.kit.renderer import check_alu_tables
from ug_core.legalize import ALWAYS_EXPANDED, OLDER_VERSIONS, legalize, rendered
from ug_core.legalize_opset import _outside, float_to_int_parts, guard
from ug_core.loop_ir import Opc
from ug_core.lower import LowerOptions, lower
from ug_core.ops import ALU, INT, Op, defined
from ug_core.view import View

sys.path.insert(0, os.path.dirname(__file__))
import loop_interp  # noqa: E402

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(bool)
U32 = np.dtype(np.uint32)
V1_DTYPES = (F16, F32, F64, I32, I64, BOOL)
TARGETS = [LowerOptions("cpu"), LowerOptions("gpu", local_size=8, gpu_serial_max_extent=0)]
TARGET_IDS = ["cpu", "gpu"]


def c(shape):
    return View.contiguous(tuple(shape))


# --- the table --------------------------------------------------------------------------------

def test_versions_only_grow_and_the_default_is_pinned():
    versions = [opset.VERSIONS[v] for v in sorted(opset.VERSIONS)]
    assert [s.version for s in versions] == list(range(1, opset.CURRENT + 1))
    for old, new in zip(versions, versions[1:]):
        assert old.opcodes <= new.opcodes and old.alu <= new.alu and old.dtypes <= new.dtypes
        assert old.acc_combine <= new.acc_combine and (old.opcodes, old.alu, old.dtypes, old.acc_combine) != \
            (new.opcodes, new.alu, new.dtypes, new.acc_combine)
    assert opset.DEFAULT == 3 <= opset.CURRENT   # (a constant: a later version does not move it)
    assert Renderer.op_set_version == opset.DEFAULT
    # version 1 is the loop IR the kit was released with on 2026-11-23 (git show b89acb1:ug_core/loop_ir.py)
    assert len(opset.VERSIONS[1].opcodes) == 21 and len(opset.VERSIONS[1].alu) == 22
    assert Opc.GATED_LOAD not in opset.VERSIONS[1].opcodes and Op.AND not in opset.VERSIONS[1].alu


def test_every_alu_op_is_in_the_current_version_or_expanded_on_every_device():
    current = opset.VERSIONS[opset.CURRENT]
    assert set(ALU) == current.alu | ALWAYS_EXPANDED and not current.alu & ALWAYS_EXPANDED
    for kind in ("f", "i", "u", "b"):
        assert rendered(kind) == rendered(kind, opset.CURRENT)
    assert rendered("u", 1) == frozenset() and Op.FLOOR not in rendered("f", 1) and Op.DIV in rendered(INT, 1)


def test_every_op_a_version_added_has_a_legalization_into_the_earlier_ones():
    current = opset.VERSIONS[opset.CURRENT]
    for version, ops in opset.VERSIONS.items():
        assert current.alu - ops.alu <= OLDER_VERSIONS["alu"], version
        assert current.opcodes - ops.opcodes - set(opset.ASKED_FOR) <= OLDER_VERSIONS["opcodes"], version
        assert current.acc_combine - ops.acc_combine <= OLDER_VERSIONS["acc_combine"], version


def test_a_new_op_without_a_legalization_fails(monkeypatch):
    """The rule of CONTRIBUTING.md: an op added to a new version ships with its legalization for the
    older ones; the core fails at import (the check below) until it does."""
    current = opset.VERSIONS[opset.CURRENT]
    grown = dataclasses.replace(current, version=opset.CURRENT + 1, alu=current.alu | {Op.NEXTAFTER})
    monkeypatch.setattr(legalize_module, "VERSIONS", {**opset.VERSIONS, grown.version: grown})
    monkeypatch.setattr(legalize_module, "CURRENT", grown.version)
    with pytest.raises(NotImplementedError, match="no legalization into op-set version 1 of the alu.*NEXTAFTER"):
        legalize_module._check_older_versions()
    # with its legalization (here a stand-in), the check passes
    monkeypatch.setitem(legalize_module.OLDER_VERSIONS, "alu", OLDER_VERSIONS["alu"] | {Op.NEXTAFTER})
    legalize_module._check_older_versions()


# --- the renderer and device declarations ------------------------------------------------------

def test_a_renderer_is_checked_against_the_opcodes_of_its_version():
    v1 = opset.VERSIONS[1].opcodes
    methods = {f"op_{opc.name.lower()}": lambda self, inst: None for opc in v1}
    old = type("OldRenderer", (Renderer,), {"op_set_version": 1, **methods})   # no op_gated_load, op_atomic
    assert set(old.dispatch) == set(v1)
    with pytest.raises(TypeError, match="op_gated_load, op_atomic"):
        type("Current", (Renderer,), methods)
    with pytest.raises(ValueError, match="unknown op-set version 9"):
        type("Future", (Renderer,), {"op_set_version": 9, **methods})
    with pytest.raises(ValueError, match="unknown capabilities"):
        type("Boasting", (Renderer,), {"op_set_version": 1, "capabilities": frozenset({"fast"}), **methods})


def test_alu_tables_are_checked_against_the_version():
    v1 = {kind: rendered(kind, 1) for kind in ("f", "i", "b")}
    check_alu_tables(v1, "a version-1 renderer", version=1)
    with pytest.raises(NotImplementedError, match="operand kinds \\['u'\\]"):
        check_alu_tables(v1, "a version-1 renderer claiming today's ops")
    with pytest.raises(NotImplementedError, match="FLOOR"):
        check_alu_tables({**v1, "u": rendered("u")}, "a version-1 renderer claiming today's ops")


def _v1_renderer():
    methods = {f"op_{opc.name.lower()}": lambda self, inst: None for opc in opset.VERSIONS[1].opcodes}
    return type("V1", (Renderer,), {"op_set_version": 1, **methods})


def test_a_device_holds_only_the_dtypes_and_asks_only_for_the_ops_of_its_version():
    renderer = _v1_renderer()
    with pytest.raises(ValueError, match="op-set version 1, which has no dtype uint32"):
        KitDevice(DeviceInfo("old", frozenset({F32, U32})), renderer, None, NumpyAllocator(), None)  # type: ignore[arg-type]
    gpu = LowerOptions("gpu", atomic_int_bits=(32,))
    with pytest.raises(ValueError, match="atomic_int_bits asks for ATOMIC"):
        KitDevice(DeviceInfo("old", frozenset({F32}), gpu), renderer, None, NumpyAllocator(), None)  # type: ignore[arg-type]


# --- older versions compute the same bits -------------------------------------------------------

def _edges(dt: np.dtype, n: int, rng: np.random.Generator) -> np.ndarray:
    if dt == BOOL:
        return rng.random(n) < 0.5
    if dt.kind == "i":
        info = np.iinfo(dt)
        special = [0, 1, -1, 2, -2, 3, 7, -7, 31, 32, 33, 63, 64, -64, info.max, info.min, info.max - 1, info.min + 1]
        values = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        values[: len(special)] = special
        return rng.permutation(values)
    special = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997, 1e-30, -1e-30, 2.0 ** 23 - 0.5,
               2.0 ** 23 + 1, 2.0 ** 52 - 0.5, 2.0 ** 52, 2.0 ** 53 + 2, 1e300, np.inf, -np.inf, np.nan, -np.nan,
               65504.0, 6e-8, -7.75, 3.0]
    with np.errstate(all="ignore"):
        values = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 6, n)).astype(dt)
        values[: len(special)] = np.array(special).astype(dt)
    return rng.permutation(values)


def _elementwise(op: Op, dt: np.dtype, n: int) -> Kernel:
    arity = ALU[op].arity
    eb = ExprBuilder()
    loads = tuple(eb.load(i, (c((n,)),), dt) for i in range(arity))
    out = BOOL if ALU[op].returns_bool else dt
    return Kernel(f"v_{op.name}_{dt}", tuple(BufferArg(dt, n, False) for _ in range(arity)) + (BufferArg(out, n, True),),
                  (n,), (), (), (Store(arity, (n,), c((n,)), eb.alu(op, loads, out)),))


def _run(program, kernel: Kernel, inputs: list[np.ndarray], interp=loop_interp._Interp) -> list[np.ndarray]:
    buffers = [np.array(inputs[i]) if not a.output else np.zeros(a.size, a.dtype)
               for i, a in enumerate(kernel.args)]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        interp(program, buffers).run()
    return [b for b, a in zip(buffers, kernel.args) if a.output]


def _same_bits(kernel: Kernel, inputs: list[np.ndarray], opts: LowerOptions, version: int,
               capabilities=frozenset({NATIVE_MATH})) -> None:
    program = lower(kernel, opts)
    legal = legalize(program, capabilities, V1_DTYPES, version)
    for inst in legal.instructions:   # (to_version refuses to return anything else)
        assert _outside(inst, opset.VERSIONS[version]) is None, inst
    want = _run(legalize(program, capabilities, V1_DTYPES), kernel, inputs)
    for w, g in zip(want, _run(legal, kernel, inputs)):
        assert_same(g, w, f"{legal}")


def assert_same(got: np.ndarray, want: np.ndarray, msg: str = "") -> None:
    """The same values bit for bit, but a NaN's sign and payload (the math library's fmod, which
    version 1 gets, makes a NaN of its own, as it does on every device without native math)."""
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=msg)
        return
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=msg)
    np.testing.assert_array_equal(got[~nan].view(np.uint8), want[~nan].view(np.uint8), err_msg=msg)


NEWER_ALU = sorted(opset.VERSIONS[opset.CURRENT].alu - opset.VERSIONS[1].alu, key=lambda op: op.name)


@pytest.mark.parametrize("opts", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("op", NEWER_ALU, ids=lambda op: op.name)
def test_ops_version_1_lacks_compute_the_same_bits_in_it(op, opts):
    rng = np.random.default_rng(len(op.name))
    for dt in (F32, F64, F16, I32, I64, BOOL):
        if not defined(op, dt):
            continue
        n = 700 if ALU[op].arity == 2 else 90
        inputs = [_edges(dt, n, rng) for _ in range(ALU[op].arity)]
        if op in (Op.SHL, Op.SHR):   # counts around the width (and past it, both ways)
            inputs[1] = rng.integers(-70, 70, n).astype(dt)
        _same_bits(_elementwise(op, dt, n), inputs, opts, 1)


@pytest.mark.parametrize("opts", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("dt", [F32, F64, I32, I64, BOOL], ids=str)
def test_products_and_gated_loads_compute_the_same_bits_in_version_1(dt, opts):
    """A PROD reduction (MUL accumulators) of a padded view (GATED_LOAD: zeros outside the mask,
    so rows with padding multiply to 0, the others keep their signs, NaNs and infinities)."""
    rng = np.random.default_rng(5)
    r, n = 6, 9
    eb = ExprBuilder()
    padded = c((r, n - 2)).pad(((0, 0), (1, 1)))   # columns 0 and n - 1 read as 0
    plain = c((r, n))
    x = eb.load(0, (padded,), dt)
    y = eb.load(1, (plain,), dt)
    value = eb.alu(Op.ADD if dt != BOOL else Op.MAX, (x, y), dt)
    kernel = Kernel(f"prod_{dt}", (BufferArg(dt, r * (n - 2), False), BufferArg(dt, r * n, False), BufferArg(dt, r, True),
                                   BufferArg(dt, r * n, True)),
                    (r, 1), (1,), (Reduction(Op.PROD, (r, n), value, dt),),
                    (Store(2, (r, 1), c((r, 1)), eb.acc(0, dt)), Store(3, (r, n), c((r, n)), x)))
    a = _edges(dt, r * (n - 2), rng)
    b = _edges(dt, r * n, rng) if dt.kind != "f" else rng.choice([1.0, -1.0, 2.0, -0.0, 0.5, np.nan, np.inf], r * n).astype(dt)
    _same_bits(kernel, [a, b], opts, 1)
    _same_bits(kernel, [a, b], opts, 2)


def test_float16_gated_loads_and_rounding_stay_exact_in_version_1():
    rng = np.random.default_rng(16)
    n = 50
    eb = ExprBuilder()
    x = eb.load(0, (c((n - 4,)).pad(((2, 2),)),), F16)
    kernel = Kernel("f16", (BufferArg(F16, n - 4, False), BufferArg(F16, n, True), BufferArg(F16, n, True)), (n,), (), (),
                    (Store(1, (n,), c((n,)), x), Store(2, (n,), c((n,)), eb.alu(Op.FLOOR, (x,), F16))))
    for opts in TARGETS:
        _same_bits(kernel, [_edges(F16, n - 4, rng)], opts, 1)


# --- guards -------------------------------------------------------------------------------------

class Trap(AssertionError):
    pass


class StrictInterp(loop_interp._Interp):
    """The interpreter, raising Trap on every operand whose result C leaves undefined or traps on."""

    def _alu(self, inst, ctx):
        args = [np.asarray(self.get(s, ctx)) for s in inst.srcs]
        dt = inst.srcs[0].dtype
        if dt.kind in "iu":
            bits = 8 * dt.itemsize
            if inst.arg is Op.DIV and (np.any(args[1] == 0) or (dt.kind == "i" and np.any(
                    (args[0] == np.iinfo(dt).min) & (args[1] == -1)))):
                raise Trap(f"%{inst.id}: integer division by 0 or INT_MIN / -1")
            if inst.arg is Op.RECIP and np.any(args[0] == 0):
                raise Trap(f"%{inst.id}: integer reciprocal of 0")
            if inst.arg is Op.POW and np.any(args[1] < 0):
                raise Trap(f"%{inst.id}: integer power with a negative exponent")
            if inst.arg in (Op.SHL, Op.SHR) and np.any((args[1] < 0) | (args[1] >= bits)):
                raise Trap(f"%{inst.id}: shift past the width")
        super()._alu(inst, ctx)

    def _cast(self, inst, ctx):
        x = np.asarray(self.get(inst.srcs[0], ctx)).astype(F64)   # (the bounds below are exact in float64)
        if inst.srcs[0].dtype.kind == "f" and inst.dtype.kind in "iu":
            info = np.iinfo(inst.dtype)
            t = np.trunc(x)   # (float(info.max) + 1 is 2**bits exactly, as are the other bounds)
            with np.errstate(invalid="ignore"):
                if not np.all((t >= float(info.min)) & (t < float(info.max) + 1)):
                    raise Trap(f"%{inst.id}: float -> {inst.dtype} of a value out of range (or NaN)")
        super()._cast(inst, ctx)

    _HANDLERS = {**loop_interp._Interp._HANDLERS, Opc.ALU: _alu, Opc.CAST: _cast}


def _hazards(dt: np.dtype, n: int) -> tuple[Kernel, list[np.ndarray]]:
    """One kernel with every hazard on `dt` ints: x // y, x % y (zeros and -1 among y, INT_MIN
    among x), 1 / x, x ** y (negative y), x << y and x >> y (counts past the width), and the
    conversion of floats (NaN, infinities, out of range) to `dt`."""
    eb = ExprBuilder()
    x, y = eb.load(0, (c((n,)),), dt), eb.load(1, (c((n,)),), dt)
    f = eb.load(2, (c((n,)),), F64)
    ops = [Op.DIV, Op.FLOORDIV, Op.MOD, Op.POW, Op.SHL, Op.SHR]
    exprs = [eb.alu(op, (x, y), dt) for op in ops] + [eb.alu(Op.RECIP, (x,), dt), eb.cast(f, dt),
                                                       eb.cast(eb.cast(f, F32), dt)]
    args = (BufferArg(dt, n, False), BufferArg(dt, n, False), BufferArg(F64, n, False))
    args += tuple(BufferArg(dt, n, True) for _ in exprs)
    stores = tuple(Store(3 + i, (n,), c((n,)), e) for i, e in enumerate(exprs))
    rng = np.random.default_rng(7)
    info = np.iinfo(dt)
    a = rng.integers(-100, 100, n).astype(dt)
    a[:4] = [info.min, info.max, 0, -1]
    b = rng.integers(-3, 4, n).astype(dt)
    b[:6] = [-1, 0, 0, -1, 200, -200]
    floats = rng.standard_normal(n) * 1e10
    floats[:7] = [np.nan, np.inf, -np.inf, 2.0 ** 63, -2.0 ** 64, 3e9, -3e9]
    return Kernel(f"hazards_{dt}", args, (n,), (), (), stores), [a, b, floats]


@pytest.mark.parametrize("version", sorted(opset.VERSIONS))
@pytest.mark.parametrize("dt", [I32, I64], ids=str)
def test_no_undefined_operand_reaches_a_renderer_that_guards_nothing(dt, version):
    kernel, inputs = _hazards(dt, 64)
    program = lower(kernel, LowerOptions("cpu"))
    guarded = legalize(program, {NATIVE_MATH}, V1_DTYPES, version)
    unguarded = legalize(program, {NATIVE_MATH} | opset.GUARDS, V1_DTYPES, version)
    got = _run(guarded, kernel, inputs, StrictInterp)
    with pytest.raises(Trap):   # (the strict interpreter sees them where nothing guards)
        _run(unguarded, kernel, inputs, StrictInterp)
    want = _run(unguarded, kernel, inputs)
    for g, w in zip(got[:-2], want[:-2]):   # ops.py's values (the interpreter computes them with numpy)
        np.testing.assert_array_equal(g, w)
    with np.errstate(over="ignore"):        # ops.CONVERSIONS' values, of the float64 and float32 values
        np.testing.assert_array_equal(got[-2], _conversion(inputs[2], dt))
        np.testing.assert_array_equal(got[-1], _conversion(inputs[2].astype(F32).astype(F64), dt))


def _conversion(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """ops.CONVERSIONS' float -> int of float64 values."""
    wide, bits = float_to_int_parts(dt)
    inside = (x >= -(2.0 ** (bits - 1))) & (x < 2.0 ** (bits - 1))
    value = np.where(inside, np.trunc(np.where(inside, x, 0.0)), 0).astype(wide)
    return np.where(inside, value, np.iinfo(wide).min).astype(dt)


def test_declared_semantics_leave_the_program_as_it_is():
    """A renderer that guards everything itself (ug-llvm) gets the lowering's program, unchanged."""
    kernel, _ = _hazards(I32, 16)
    program = legalize(lower(kernel, LowerOptions("cpu")), {NATIVE_MATH} | opset.GUARDS, V1_DTYPES)
    assert guard(program, opset.GUARDS) is program
    guarded = guard(program, opset.GUARDS - {opset.SAFE_SHIFTS})
    changed = {(i.opc, i.arg) for i in guarded.instructions} - {(i.opc, i.arg) for i in program.instructions}
    assert changed <= {(Opc.ALU, Op.CMPLT), (Opc.ALU, Op.CMPLE), (Opc.ALU, Op.MUL), (Opc.ALU, Op.WHERE), (Opc.CONST, 32),
                       (Opc.CONST, 31), (Opc.CONST, 0)}, changed


def test_an_atomic_never_reaches_an_older_version():
    from ug_core.testing.lowering_cases import scatter
    case = scatter(np.random.default_rng(0), Op.SUM, I32)
    program = lower(case.kernel, LowerOptions("gpu", local_size=8, atomic_int_bits=(32, 64)))
    assert any(i.opc is Opc.ATOMIC for i in program.instructions)
    with pytest.raises(RenderError, match="no opcode ATOMIC .*atomic_int_bits"):
        legalize(program, {NATIVE_MATH}, V1_DTYPES, 2)
