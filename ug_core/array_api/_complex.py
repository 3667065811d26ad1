"""Complex tensors as pairs of real ones: the frontend's constructor and destructor.

complex64 / complex128 are dtypes of the graph (buffers, views, gathers, concatenations move
complex values as they are), but complex *arithmetic* is built, when the op is built, from real
ops on the parts: REAL(z) and IMAG(z) take a complex tensor apart, COMPLEX(re, im) puts one
together (ug_core.ops). An expression such as `z * w` is then COMPLEX(a c - b d, a d + b c)
over REAL / IMAG nodes, which the scheduler fuses as it fuses any real expression, and which
autodiff, ug.jit and every backend handle without knowing about complex numbers.

`parts` and `combine` are what the complex math (complex_math.py: exp, log, sqrt, trig, ...)
and the operators build on.
"""

from __future__ import annotations

from .. import dtypes, graph
from ..ops import Op
from ..tensor import Tensor, _broadcast, _broadcast_shape, _make, full

__all__ = ["parts", "combine"]


def parts(z: Tensor) -> tuple[Tensor, Tensor]:
    """(real part, imaginary part) of `z` as real tensors of its part dtype (complex64: float32).
    Of a real tensor: (z itself, zeros of its dtype)."""
    if not isinstance(z, Tensor):
        raise TypeError(f"parts: expected a ug Tensor, got {type(z).__name__}")
    if not dtypes.is_complex(z.dtype):
        return z, full(z.shape, 0, z.dtype, z.device)
    part = dtypes.part_dtype(z.dtype)
    return (_make(graph.alu(Op.REAL, (z.node,), part)), _make(graph.alu(Op.IMAG, (z.node,), part)))


def combine(re: Tensor, im: Tensor) -> Tensor:
    """The complex tensor re + im j, its parts exactly `re` and `im` (-0.0, inf and NaN parts
    kept). The parts broadcast together and promote to one float dtype (ints and bools become
    ug's default float, float32; float16 computes as float32), whose complex dtype is the
    result's: float32 parts give complex64, float64 parts complex128."""
    if not isinstance(re, Tensor) or not isinstance(im, Tensor):
        raise TypeError(f"combine: expected two ug Tensors, got {type(re).__name__} and {type(im).__name__}")
    if dtypes.is_complex(re.dtype) or dtypes.is_complex(im.dtype):
        raise TypeError(f"combine: the parts must be real, got {re.dtype.name} and {im.dtype.name}")
    if re.device != im.device:
        raise ValueError(f"combine: the parts are on different devices: {re.device!r} and {im.device!r}")
    common = dtypes.promote(re.dtype, im.dtype)
    out = dtypes.complex_of(common)
    part = dtypes.part_dtype(out)
    shape = _broadcast_shape(re.shape, im.shape)
    a = _broadcast(graph.cast(re.node, part), shape)
    b = _broadcast(graph.cast(im.node, part), shape)
    return _make(graph.alu(Op.COMPLEX, (a, b), out))

