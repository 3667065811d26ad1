"""Complex dtypes where no device runs: the promotion table against numpy 2, Python complex
scalars (weak), the errors of ops the standard does not define on complex numbers (raised when
the op is built, naming the dtype), the legalization's split of complex loop values, and the
dtype helpers. Graphs are built on the `ref` device and not realized (ug_core/testing/
test_complex.py checks values on every device)."""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug
from ug_core import dtypes
from ug_core.device import RenderError
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Store
from ug_core.legalize import legalize, rendered, split_complex
from ug_core.lower import LowerOptions, lower
from ug_core.ops import COMPLEX_KIND, OPERAND_KINDS, Op
from ug_core.view import View

DEVICE = "ref"
C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
REAL = [d for d in dtypes.SUPPORTED if d.kind != "c"]


def _t(dt, shape=(3,)) -> ug.Tensor:
    return ug.tensor(np.zeros(shape, dt), device=DEVICE)


@pytest.mark.parametrize("other", list(dtypes.SUPPORTED), ids=str)
@pytest.mark.parametrize("cdt", [C64, C128], ids=str)
def test_promotion_of_tensors_is_numpys(cdt, other):
    """complex with every dtype, both orders, +, *, /, ==: numpy 2's result dtype (float32 +
    complex64 is complex64, float64 + complex64 complex128, int16 + complex64 complex64,
    int32 + complex64 complex128)."""
    for a, b in ((cdt, other), (other, cdt)):
        want = np.result_type(a, b)
        for fn in (lambda p, q: p + q, lambda p, q: p * q, lambda p, q: p / q):
            assert fn(_t(a), _t(b)).dtype == want, (a, b)
        assert (_t(a) == _t(b)).dtype == np.bool_
        assert ug.result_type(a, b) == want


@pytest.mark.parametrize("dt", list(dtypes.SUPPORTED), ids=str)
def test_python_complex_scalars_are_weak(dt):
    """A Python complex takes a complex tensor's dtype and makes a float tensor's the complex
    dtype of its width (numpy 2's); next to ints and bools it is ug's default complex,
    complex64 (as a Python float there is ug's float32, where numpy gives complex128)."""
    got = (_t(dt) * 1j).dtype
    if dt.kind in "fc":
        assert got == np.result_type(np.zeros(1, dt), 1j)
    else:
        assert got == C64
    assert ug.result_type(dt, 1j) == got
    assert (_t(dt) + 2.5j).dtype == got


def test_default_and_part_dtypes():
    assert ug.asarray(1j, device=DEVICE).dtype == C64
    assert ug.asarray([1j, 2], device=DEVICE).dtype == C64   # (a nested list: ug's defaults)
    assert ug.asarray(np.array([1j]), device=DEVICE).dtype == C128   # (an array keeps its dtype)
    assert ug.full((2,), 1 + 1j, device=DEVICE).dtype == C64
    assert dtypes.part_dtype(C64) == np.float32 and dtypes.part_dtype(C128) == np.float64
    assert dtypes.complex_of(np.dtype(np.float16)) == C64 and dtypes.complex_of(np.dtype(np.float64)) == C128
    assert ug.real(_t(C128)).dtype == np.float64 and ug.imag(_t(C64)).dtype == np.float32
    assert abs(_t(C128)).dtype == np.float64
    assert ug.isdtype(C64, "complex floating") and not ug.isdtype(C64, "real floating")
    assert ug.isdtype(C128, "numeric")
    assert ug.finfo(C64).eps == np.finfo(np.float32).eps and ug.finfo(C128).dtype == np.float64
    assert ug.can_cast(ug.float32, ug.complex64) and not ug.can_cast(ug.complex64, ug.float64)
    info = ug.__array_namespace_info__()
    assert info.default_dtypes(device=DEVICE)["complex floating"] == C64
    assert set(info.dtypes(device=DEVICE, kind="complex floating")) == {"complex64", "complex128"}


def test_written_complex_values():
    """A complex value goes into a complex tensor only (numpy's TypeError for a real one); each
    part rounds to the dtype (beyond its range: inf, no warning)."""
    with pytest.raises(TypeError, match="complex value"):
        dtypes.written(1j, np.dtype(np.float32))
    with pytest.raises(TypeError, match="complex value"):
        ug.full((2,), 1j, dtype=np.float32, device=DEVICE)
    x = _t(np.float32)
    with pytest.raises(TypeError, match="complex value"):
        x[0] = 1 + 2j
    with np.errstate(all="raise"):
        assert dtypes.written(complex(1e300, -1e300), C64) == complex(np.inf, -np.inf)
        assert dtypes.written(2, C64) == 2 + 0j


_UNORDERED = {
    "<": lambda z: z < z, ">=": lambda z: z >= z, "maximum": lambda z: ug.maximum(z, z), "max": lambda z: ug.max(z),
    "min": lambda z: z.min(), "argmax": lambda z: ug.argmax(z), "sort": lambda z: ug.sort(z),
    "argsort": lambda z: ug.argsort(z), "floor": lambda z: ug.floor(z), "ceil": lambda z: ug.ceil(z),
    "trunc": lambda z: ug.trunc(z), "//": lambda z: z // z, "%": lambda z: z % z, "clip": lambda z: ug.clip(z, 0, 1),
    "signbit": lambda z: ug.signbit(z), "cumulative_max": lambda z: ug.cumulative_max(z),
    "searchsorted": lambda z: ug.searchsorted(z, z), "copysign": lambda z: ug.copysign(z, z),
    "nextafter": lambda z: ug.nextafter(z, z), "atan2": lambda z: ug.atan2(z, z),
}


@pytest.mark.parametrize("name", list(_UNORDERED))
def test_ops_the_standard_leaves_undefined_raise_when_built(name):
    """Ordering, rounding and the float-only functions are a TypeError naming the dtype."""
    z = _t(C64)
    with pytest.raises(TypeError, match="complex64"):
        _UNORDERED[name](z)


@pytest.mark.parametrize("reduce", ["prod", "amax", "amin"])
def test_scatter_reduce_refuses_complex_products_and_extremes(reduce):
    with pytest.raises(TypeError, match="complex64"):
        ug.scatter_reduce(_t(C64), 0, [0, 1], ug.tensor(np.ones(2, C64), device=DEVICE), reduce)


def test_bitwise_ops_refuse_complex():
    z = _t(C128)
    for fn in (lambda: z & z, lambda: z << 1, lambda: ~z):
        with pytest.raises(TypeError, match="complex128"):
            fn()


def test_grad_needs_a_real_output():
    z = _t(C64)
    with pytest.raises(TypeError, match="complex"):
        ug.grad(lambda v: v.sum())(z)


def _kernel(build, out_dtype: np.dtype, in_dtypes: list[np.dtype], n: int = 8) -> Kernel:
    eb = ExprBuilder()
    view = (View.contiguous((n,)),)
    loads = [eb.load(i + 1, view, dt) for i, dt in enumerate(in_dtypes)]
    args = (BufferArg(out_dtype, n, True),) + tuple(BufferArg(dt, n, False) for dt in in_dtypes)
    return Kernel("k", args, (n,), (), (), (Store(0, (n,), View.contiguous((n,)), build(eb, *loads)),))


def test_split_complex_leaves_no_complex_value():
    """A kernel reading complex buffers, selecting, comparing and taking parts: after the
    legalization no instruction and no parameter is complex, a complex buffer is its part
    dtype at twice the size, and the program verifies."""
    def build(eb, z, w, m):
        sel = eb.alu(Op.WHERE, (eb.alu(Op.CMPNE, (z, w), np.dtype(bool)), z, eb.const(1 + 2j, C64)), C64)
        re = eb.alu(Op.REAL, (sel,), np.dtype(np.float32))
        return eb.alu(Op.COMPLEX, (re, eb.alu(Op.IMAG, (eb.cast(m, C64),), np.dtype(np.float32))), C64)
    program = lower(_kernel(build, C64, [C64, C64, np.dtype(np.float32)]), LowerOptions(target="cpu"))
    assert any(inst.dtype is not None and inst.dtype.kind == "c" for inst in program.instructions)
    legal = legalize(program, (), dtypes.SUPPORTED)
    assert not any(inst.dtype is not None and inst.dtype.kind == "c" for inst in legal.instructions)
    assert [(p.dtype, p.size) for p in legal.params] == [(np.dtype(np.float32), 16)] * 3 + [(np.dtype(np.float32), 8)]
    legal.verify()
    assert split_complex(legal) is legal   # (nothing complex left: the program itself)


def test_split_complex_refuses_what_it_cannot_split():
    """A complex op the frontend never builds at loop level (a complex MUL) is a RenderError
    naming it, on every device alike."""
    program = lower(_kernel(lambda eb, z: eb.alu(Op.MUL, (z, z), C64), C64, [C64]), LowerOptions(target="cpu"))
    with pytest.raises(RenderError, match="MUL"):
        legalize(program, (), dtypes.SUPPORTED)


def test_renderers_spell_no_complex_op():
    assert COMPLEX_KIND in OPERAND_KINDS and rendered(COMPLEX_KIND) == frozenset()
    for kind in OPERAND_KINDS:
        assert not {Op.REAL, Op.IMAG, Op.COMPLEX} & rendered(kind)
