"""ug_core.mathlib's float64 functions and pow, as loop IR run by the test interpreter, against
numpy (whose float64 functions are within 1 ulp): ulp bounds over a sweep of normal, tiny,
subnormal and huge arguments, and every special value exactly. (float32: tests/test_ulp.py.)

Measured against mpmath at 200 bits (the limits below add numpy's own error): exp 0.94 ulp,
log 0.53, tanh 2.2, sin 0.92, cos 0.83 (|x| < 1e6); pow: float64 3.4 ulp for |y log x| up to
~740 (0.94 below 30), float32 / float16 correctly rounded in every case tried."""
from __future__ import annotations

import itertools
import os
import sys

import numpy as np
import pytest

from ug_core import mathlib
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Store
from ug_core.lower import LowerOptions, lower
from ug_core.ops import Op
from ug_core.view import View

sys.path.insert(0, os.path.dirname(__file__))
import loop_interp  # noqa: E402

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
MAX_ULP_F64 = {"exp": 2.0, "log": 1.5, "tanh": 3.0, "sin": 2.0, "cos": 2.0}
POW_MAX_ULP = {F64: 4.5, F32: 1.0, F16: 1.0}
SPECIALS = [0.0, -0.0, 5e-324, -5e-324, 1e-310, -1e-310, 2.2250738585072014e-308, 1e-300, -1e-300, 1e-20, -1e-20,
            1.0, -1.0, 0.5, 700.0, 709.78, 709.79, 710.0, -708.0, -740.0, -745.0, -745.2, -746.0, -800.0, 1e6, -1e6,
            1.6e6, 1.7976931348623157e308, np.inf, -np.inf, np.nan, 19.0, 19.1, 22.0, 1e-9, 3e-8, 0.625, np.pi / 2, np.pi]


def run(op: Op, dt: np.dtype, *args: np.ndarray, which: frozenset | None = None) -> np.ndarray:
    """op on args (flat arrays of dtype dt), lowered, expanded by mathlib, interpreted."""
    n = args[0].size
    eb = ExprBuilder()
    view = View.contiguous((n,))
    expr = eb.alu(op, tuple(eb.load(1 + i, (view,), dt) for i in range(len(args))), dt)
    kernel = Kernel(f"mathlib_{op.name}", (BufferArg(dt, n, True),) + tuple(BufferArg(dt, n, False) for _ in args),
                    (n,), (), (), (Store(0, (n,), view, expr),))
    program = lower(kernel, LowerOptions(target="cpu"))
    expanded = mathlib.expand(program, mathlib.targets(float64=True) if which is None else which)
    out = np.empty(n, dt)
    with np.errstate(all="ignore"):
        loop_interp.run(expanded, [out] + [a.astype(dt) for a in args])
    return out


def ulps(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in ulps of ref (finite refs only; the rest is checked exactly)."""
    with np.errstate(all="ignore"):
        spacing = np.maximum(np.spacing(np.abs(ref)), np.finfo(ref.dtype).smallest_subnormal).astype(np.float64)
        err = np.abs(got.astype(np.float64) - ref.astype(np.float64)) / spacing
    err[got == ref] = 0.0
    return err


def same(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Equal, with the sign of zero; NaN equals NaN."""
    return ((got == ref) & (np.signbit(got) == np.signbit(ref))) | (np.isnan(got) & np.isnan(ref))


def sweep64(name: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    tiny = 10.0 ** rng.uniform(-300, -1, 500) * np.where(rng.random(500) < 0.5, -1, 1)
    return np.concatenate({
        "exp": [rng.uniform(-745, 709.7, 3000), rng.uniform(-1, 1, 1000), tiny],
        "log": [10.0 ** rng.uniform(-307, 308, 3000), rng.uniform(0.9, 1.1, 1000), 5e-324 * rng.integers(1, 2 ** 50, 300)],
        "tanh": [rng.uniform(-20, 20, 2000), rng.uniform(-1.5, 1.5, 1500), tiny],
        "sin": [rng.uniform(-10, 10, 2000), rng.uniform(-1e6, 1e6, 1000), tiny, np.arange(-100, 100) * (np.pi / 2)],
    }["sin" if name == "cos" else name])


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sin", "cos"])
def test_float64_functions(name):
    x = sweep64(name)
    got = run(Op[name.upper()], F64, x)
    err = ulps(got, getattr(np, name)(x))
    worst = int(np.argmax(err))
    assert err[worst] <= MAX_ULP_F64[name], f"{name}: {err[worst]:.3g} ulp at {x[worst]!r}"


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sin", "cos"])
def test_float64_special_values(name):
    x = np.array(SPECIALS)
    got = run(Op[name.upper()], F64, x)
    with np.errstate(all="ignore"):
        ref = getattr(np, name)(x)
    if name in ("sin", "cos"):   # the Cody-Waite reduction degrades above 2**20 (see float64.py)
        huge = np.abs(x) > 2.0 ** 20
        assert np.all(np.abs(got[huge & np.isfinite(x)]) <= 1)
        got, ref, x = got[~huge], ref[~huge], x[~huge]
    exact = same(got, ref)
    close = ulps(got, ref) <= MAX_ULP_F64[name]
    assert np.all(exact | (close & np.isfinite(ref) & (ref != 0))), [(x[i], got[i], ref[i]) for i in np.nonzero(~exact & ~close)[0]]


_POW_EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5, np.inf, -np.inf, np.nan, 5e-324, 1e-310,
              2.0 ** 52 + 1, -(2.0 ** 52 + 1), 2.0 ** 53, -(2.0 ** 53), 1e300, -1e300, 0.37, 1 - 2.0 ** -53, 7.0, -7.0,
              65504.0, 1e-5, 2.0 ** 24 + 2, -(2.0 ** 23 + 1)]


@pytest.mark.parametrize("dt, float64", [(F64, True), (F32, True), (F32, False), (F16, True), (F16, False)],
                         ids=["float64", "float32", "float32-no-float64", "float16", "float16-no-float64"])
def test_pow_edge_cases(dt, float64):
    """Every pair of edge values: numpy's result exactly where it is 0, inf or NaN (signs
    too), within the ulp bound elsewhere. Without float64 the target's pow (here numpy's,
    by the interpreter) computes the magnitude inside mathlib's edge cases."""
    with np.errstate(all="ignore"):
        v = np.array(_POW_EDGES, dt)
    x, y = (np.array(t, dt) for t in zip(*itertools.product(v, v)))
    got = run(Op.POW, dt, x, y, which=mathlib.targets(float64=float64))
    with np.errstate(all="ignore"):
        ref = np.power(x, y)
    special = ~np.isfinite(ref) | (ref == 0) | (ref == 1)
    assert np.all(same(got, ref)[special]), [(x[i], y[i], got[i], ref[i]) for i in np.nonzero(special & ~same(got, ref))[0]]
    assert ulps(got, ref)[~special].max(initial=0) <= POW_MAX_ULP[dt]


@pytest.mark.parametrize("dt", [F64, F32, F16], ids=str)
def test_pow_accuracy(dt):
    """Random bases and exponents whose y log x spans the whole range of results."""
    rng = np.random.default_rng(3)
    fi = np.finfo(dt)
    x = np.concatenate([rng.uniform(0, 30, 1500), 10.0 ** rng.uniform(np.log10(fi.tiny), np.log10(fi.max), 1500),
                        rng.uniform(0.5, 2, 1000), -np.floor(rng.uniform(1, 30, 300))]).astype(dt)
    ly = np.log(np.abs(x.astype(np.float64)))
    target = rng.uniform(np.log(fi.tiny) * 1.01, np.log(fi.max) * 0.99, x.size)
    with np.errstate(all="ignore"):
        y = np.where(np.abs(ly) > 1e-3, target / ly, rng.uniform(-100, 100, x.size))
    y[-300:] = np.round(rng.uniform(-20, 20, 300))
    y = y.astype(dt)
    got = run(Op.POW, dt, x, y)
    ref = np.power(x.astype(np.float64), y.astype(np.float64))
    with np.errstate(all="ignore"):
        err = ulps(got, ref.astype(dt)) if dt != F64 else ulps(got, np.power(x, y))
        finite = np.isfinite(ref.astype(dt))
    worst = int(np.argmax(np.where(finite, err, 0)))
    assert err[worst] <= POW_MAX_ULP[dt], f"pow: {err[worst]:.3g} ulp at {x[worst]!r} ** {y[worst]!r}"


def test_targets():
    full = mathlib.targets(float64=True, int64=True)
    every = mathlib.EXPANDED_OPS | mathlib.POWER_OPS | mathlib.FMOD_OPS
    assert {(op, dt) for op in every for dt in (F16, F32, F64)} == full
    no_f64 = mathlib.targets(float64=False, int64=True)
    assert not any(dt == F64 for _, dt in no_f64)
    assert not any(op in (Op.SIN, Op.COS) for op, _ in no_f64)
    assert (Op.POW, F32) in no_f64 and (Op.EXP, F16) in no_f64   # pow: around the target's own
    no_i64 = mathlib.targets(float64=True, int64=False)
    assert not any(dt == F64 for _, dt in no_i64) and (Op.SIN, F32) in no_i64
    assert mathlib.targets(float64=True, dtypes=[F32]) == {p for p in full if p[1] == F32}


def test_expand_leaves_its_input_alone():
    x = np.array([1.0, 2.0])
    eb = ExprBuilder()
    view = View.contiguous((2,))
    expr = eb.alu(Op.POW, (eb.load(1, (view,), F64), eb.load(2, (view,), F64)), F64)
    kernel = Kernel("k", (BufferArg(F64, 2, True), BufferArg(F64, 2, False), BufferArg(F64, 2, False)),
                    (2,), (), (), (Store(0, (2,), view, expr),))
    program = lower(kernel, LowerOptions(target="cpu"))
    before = str(program)
    expanded = mathlib.expand(program, mathlib.targets(float64=True))
    assert str(program) == before and expanded is not program
    assert not any(i.arg is Op.POW for i in expanded.instructions)
    assert np.array_equal(run(Op.POW, F64, x, x), [1.0, 4.0])
    with pytest.raises(ValueError, match="cannot expand"):
        mathlib.expand(program, frozenset({(Op.POW, F64), (Op.SQRT, F64)}))
