"""The Array API's transcendental functions (ug_core.array_api.transcendental: log1p ... hypot)
and the core's atan2 (ug_core.mathlib.atan2) they are built on.

Accuracy is measured in ulps of the result, against the functions in numpy's long double (x86's
80-bit extended: 11 bits more than float64), over wide random sweeps; special values (zeros of
both signs, infinities, NaN, the edges of each domain) must be numpy's exactly where numpy's
result is 0, inf or NaN, and within the bound elsewhere. logaddexp is measured in ulps of
max(|x1|, |x2|, |result|): near its zero it is ill-conditioned (numpy's own result is as far
off there). The bounds below hold on every device (measured: see MAX_ULP); float16 results are
numpy's (which computes them in float32 too) to 1 ulp of float16.

Each function is one fused kernel (`test_fuses_into_one_kernel`), and no renderer sees ATAN2:
legalization expands it on every device (`test_atan2_is_expanded_for_every_device`)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import ug_core as ug
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Store
from ug_core.legalize import legalize, rendered
from ug_core.loop_ir import Opc
from ug_core.lower import LowerOptions, lower
from ug_core.ops import FLOAT, Op
from ug_core.view import View

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
LONG = np.longdouble
EXACT_REFERENCE = np.finfo(LONG).nmant > 52     # else the reference is float64's own (within 1 ulp)

# name -> (numpy function, number of operands)
FUNCTIONS = {
    "log1p": (np.log1p, 1), "expm1": (np.expm1, 1), "log2": (np.log2, 1), "log10": (np.log10, 1),
    "logaddexp": (np.logaddexp, 2), "tan": (np.tan, 1), "atan": (np.arctan, 1), "atan2": (np.arctan2, 2),
    "asin": (np.arcsin, 1), "acos": (np.arccos, 1), "sinh": (np.sinh, 1), "cosh": (np.cosh, 1),
    "asinh": (np.arcsinh, 1), "acosh": (np.arccosh, 1), "atanh": (np.arctanh, 1), "hypot": (np.hypot, 2),
}
# the largest error measured over the sweeps below on ref, cpu, c and vulkan, plus a margin: on
# cpu, c and vulkan (ug's own exp and log, or libm's) every float32 one is below 2.6 ulp; ref's
# float32 exp and log are numpy's SIMD ones, less accurate, whence the larger float32 bounds
MAX_ULP = {
    F32: {"acos": 2.25, "acosh": 3.5, "asin": 2.5, "asinh": 3.5, "atan": 1.25, "atan2": 1.75, "atanh": 3.5,
          "cosh": 3.25, "expm1": 4.25, "hypot": 2.25, "log10": 4.5, "log1p": 3.25, "log2": 3.75, "logaddexp": 3,
          "sinh": 3.5, "tan": 3},
    F64: {"acos": 2, "acosh": 3, "asin": 2, "asinh": 3, "atan": 1, "atan2": 1.5, "atanh": 2.75, "cosh": 2.25,
          "expm1": 2.25, "hypot": 2.25, "log10": 2, "log1p": 2, "log2": 2, "logaddexp": 2.25, "sinh": 2.5,
          "tan": 2.75},
}
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 1e-40, -1e-40, 5e-324, 3.0,
            1e300, -1e300, 3e38, -3e38, 1 - 2.0 ** -24, -1 + 2.0 ** -24, 1 + 2.0 ** -23, 100.0, -100.0, 710.0]


def _sweep(name: str, dt: np.dtype) -> list[np.ndarray]:
    """The arguments (one array per operand) at which `name` is measured in `dt`."""
    rng = np.random.default_rng(sum(map(ord, name)) + dt.itemsize)
    fi = np.finfo(dt)
    top = int(np.log10(fi.max)) - 1                 # 10**top is finite, and so is its square root
    n = 6000

    def wide(lo: float = -top, hi: float = top) -> np.ndarray:
        return 10.0 ** rng.uniform(lo, hi, n) * np.where(rng.random(n) < 0.5, -1, 1)

    def uniform(lo: float, hi: float) -> np.ndarray:
        return rng.uniform(lo, hi, n)

    below_one = 1 - 10.0 ** rng.uniform(np.log10(fi.eps) - 0.3, 0, n)    # (0, 1), near 1 too
    log_max = float(np.log(fi.max))
    args: dict[str, list[list[np.ndarray]]] = {
        "log1p": [[np.abs(wide())], [-below_one], [uniform(-1, 4)]],
        "expm1": [[uniform(-log_max * 1.05, log_max)], [wide(-top, 0)], [uniform(-2, 2)]],
        "log2": [[np.abs(wide())], [uniform(0.5, 2)], [2.0 ** rng.integers(-100, 100, n)]],
        "logaddexp": [[uniform(-100, 100), uniform(-100, 100)], [wide(-3, 3), wide(-3, 3)], [wide(), wide()]],
        "tan": [[uniform(-10, 10)], [uniform(-1e4, 1e4)], [wide(-top, 0)]],
        "atan": [[wide()], [uniform(-2, 2)]],
        "atan2": [[wide(), wide()], [uniform(-2, 2), uniform(-2, 2)], [wide(-3, 3), wide(-3, 3)]],
        "asin": [[uniform(-1, 1)], [below_one * np.sign(uniform(-1, 1))], [wide(-top, 0)]],
        "sinh": [[uniform(-25, 25)], [uniform(-log_max - 0.6, log_max + 0.6)], [wide(-top, 0)]],
        "asinh": [[wide()], [uniform(-3, 3)]],
        "acosh": [[1 + np.abs(wide(np.log10(fi.eps), top))], [uniform(1, 3)]],
        "atanh": [[uniform(-1, 1)], [below_one * np.sign(uniform(-1, 1))], [wide(-top, 0)]],
        "hypot": [[wide(), wide()], [uniform(-2, 2), uniform(-2, 2)], [wide(top - 3, top) * 5, wide(-top, 0)]],
    }[{"log10": "log2", "acos": "asin", "cosh": "sinh"}.get(name, name)]
    with np.errstate(over="ignore"):
        return [np.concatenate(parts).astype(dt) for parts in zip(*args)]


def _reference(name: str, args: list[np.ndarray]) -> np.ndarray:
    """numpy's function in long double (near-exact for float64 arguments)."""
    with np.errstate(all="ignore"):
        return FUNCTIONS[name][0](*(a.astype(LONG) for a in args))


def _ulps(name: str, got: np.ndarray, exact: np.ndarray, args: list[np.ndarray]) -> np.ndarray:
    """|got - exact| in ulps of the result's dtype (of max(|x1|, |x2|, |result|) for logaddexp);
    0 where got is the correctly rounded value, inf where exactly one is NaN or infinite."""
    dt = got.dtype
    with np.errstate(all="ignore"):
        rounded = exact.astype(dt)
        scale = np.abs(rounded)
        if name == "logaddexp":
            scale = np.maximum(scale, np.maximum(np.abs(args[0]), np.abs(args[1])))
        spacing = np.maximum(np.spacing(scale), np.finfo(dt).smallest_subnormal).astype(LONG)
        err = np.abs(got.astype(LONG) - exact) / spacing
    special = ~np.isfinite(rounded) | ~np.isfinite(got)
    err[special] = np.where(_same(got, rounded), 0.0, np.inf)[special]
    return err.astype(np.float64)


def _same(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Equal, with the sign of zero; NaN equals NaN."""
    return ((got == ref) & (np.signbit(got) == np.signbit(ref))) | (np.isnan(got) & np.isnan(ref))


def _run(name: str, device: str, args: list[np.ndarray]) -> np.ndarray:
    return getattr(ug, name)(*(ug.tensor(a, device=device) for a in args)).numpy()


@pytest.mark.parametrize("dt", [F32, F64], ids=str)
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_accuracy(device, require_dtype, name, dt):
    require_dtype(dt)
    args = _sweep(name, dt)
    got = _run(name, device, args)
    assert got.dtype == dt
    err = _ulps(name, got, _reference(name, args), args)
    bound = MAX_ULP[dt][name] + (0 if EXACT_REFERENCE or dt != F64 else 1)
    worst = int(np.argmax(err))
    assert err[worst] <= bound, (f"{name} {dt}: {err[worst]:.3g} ulp at {tuple(a[worst] for a in args)}: "
                                 f"got {got[worst]!r}, exact {_reference(name, [a[worst:worst + 1] for a in args])}")


@pytest.mark.parametrize("dt", [F16, F32, F64], ids=str)
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_special_values(device, require_dtype, name, dt):
    """Every special value (and every pair of them): numpy's result exactly where it is 0, inf
    or NaN (signs included), within the bound (float16: 1 ulp) elsewhere."""
    require_dtype(dt)
    with np.errstate(all="ignore"):
        values = np.array(SPECIALS, dt)
    if name == "tan" and dt == F64:   # the core's float64 sin and cos are not reduced exactly above 2**20
        values = values[~(np.abs(values) > 2.0 ** 20) | np.isinf(values)]
    args = [values] if FUNCTIONS[name][1] == 1 else [np.array(t, dt) for t in zip(*itertools.product(values, values))]
    got = _run(name, device, args)
    with np.errstate(all="ignore"):
        ref = FUNCTIONS[name][0](*args)
    special = ~np.isfinite(ref) | (ref == 0)
    wrong = special & ~_same(got, ref)
    assert not wrong.any(), [(tuple(a[i] for a in args), got[i], ref[i]) for i in np.nonzero(wrong)[0]]
    exact = _reference(name, args)
    if dt == F16:   # numpy's float16 results: computed in float32, rounded once
        exact = exact.astype(dt).astype(LONG)
    err = _ulps(name, got, exact, args)
    bound = 1.0 if dt == F16 else MAX_ULP[dt][name]
    far = ~special & (err > bound)
    assert not far.any(), [(tuple(a[i] for a in args), got[i], ref[i]) for i in np.nonzero(far)[0]]


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_float16_and_integers_follow_numpy(device, rng, name):
    """float16 is computed in float32 and rounded once (numpy's results to 1 ulp); ints are
    promoted as numpy's ufuncs promote them (int32 -> float64)."""
    fn, arity = FUNCTIONS[name]
    x = [rng.uniform(-3, 3, 200).astype(F16) for _ in range(arity)]
    got = _run(name, device, x)
    with np.errstate(all="ignore"):
        ref = fn(*x)
        err = np.abs(got.astype(F64) - ref.astype(F64)) / np.spacing(np.abs(ref)).astype(F64)
    assert got.dtype == F16 and np.all(_same(got, ref) | (err <= 1.0))
    ints = [np.arange(1, 6, dtype=np.int32)] * arity
    got = _run(name, device, ints)
    with np.errstate(all="ignore"):
        ref = fn(*ints)
    assert got.dtype == ref.dtype
    np.testing.assert_allclose(got, ref, rtol=1e-13)


def test_fuses_into_one_kernel():
    x = ug.tensor(np.linspace(-0.9, 0.9, 64, dtype=np.float32), device="ref")
    y = ug.tensor(np.linspace(-2, 2, 64, dtype=np.float32), device="ref")
    assert len(ug.schedule(ug.atan2(y, x) + ug.log1p(x)).kernels) == 1
    for name, (_, arity) in FUNCTIONS.items():
        assert len(ug.schedule(getattr(ug, name)(*[x, y][:arity]) * 2).kernels) == 1, name


def _atan2_program(dt: np.dtype, n: int):
    eb = ExprBuilder()
    view = View.contiguous((n,))
    expr = eb.alu(Op.ATAN2, (eb.load(1, (view,), dt), eb.load(2, (view,), dt)), dt)
    kernel = Kernel("atan2", (BufferArg(dt, n, True), BufferArg(dt, n, False), BufferArg(dt, n, False)),
                    (n,), (), (), (Store(0, (n,), view, expr),))
    return lower(kernel, LowerOptions(target="cpu"))


@pytest.mark.parametrize("capabilities", [(), ("native_math", "native_f16")])
@pytest.mark.parametrize("dt", [F16, F32, F64], ids=str)
def test_atan2_is_expanded_for_every_device(dt, capabilities):
    """The core computes atan2 (float arithmetic only: no float64 or int64 needed), whatever the
    device claims; so no renderer spells it."""
    program = legalize(_atan2_program(dt, 4), capabilities, [dt, F32])
    assert not any(i.opc is Opc.ALU and i.arg is Op.ATAN2 for i in program.instructions)
    assert not any(i.opc is Opc.BITCAST for i in program.instructions)
    assert Op.ATAN2 not in rendered(FLOAT)
