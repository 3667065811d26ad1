"""Complex arithmetic on tensors as pairs of real ones.

complex64 / complex128 are dtypes of the graph (buffers, views, gathers, concatenations move
complex values as they are), but complex *arithmetic* is built, when the op is built, from real
ops on the parts: REAL(z) and IMAG(z) take a complex tensor apart, COMPLEX(re, im) puts one
together (ug_core.ops). An expression such as `z * w` is then COMPLEX(a c - b d, a d + b c)
over REAL / IMAG nodes, which the scheduler fuses as it fuses any real expression, and which
autodiff, ug.jit and every backend handle without knowing about complex numbers.

`parts` and `combine` (tensor_arith's: the frontend's destructor and constructor) are what this
module, the complex math (complex_math/: exp, log, sqrt, trig, ...) and the operators build on.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Callable, cast

import numpy as np

from .. import dtypes, graph
from ..graph import Node
from ..ops import Op
from ..shapes import broadcast_node
from ..tensor import Tensor, checked_tensor, full
from ..tensor_arith import combine, parts, where
from ..view import View

_math: ModuleType | None = None
"""complex_math (exp, log, sqrt, ... of complex numbers, and |z|), which registers itself here when
imported (array_api/__init__ imports it). It is built on the real functions of elementwise and
transcendental, which hand their complex arguments to this module: so this module cannot import
it, and finds it here when a function runs."""


def register_math(module: ModuleType) -> None:
    """complex_math's call, when imported (see _math)."""
    global _math
    _math = module


def _complex_math() -> ModuleType:
    if _math is None:
        raise RuntimeError("ug_core.array_api.complex_math was not imported (ug_core.array_api imports it)")
    return _math


# --- arithmetic -------------------------------------------------------------------------------
#
# Each operand is a complex tensor, or a real tensor of the result's part dtype where the user's
# operand was real: C99 Annex G's rule for a real operand, which takes part componentwise
# ((a + b j) * u = a u + b u j, (a + b j) / u = a / u + b / u j), so an infinite or NaN part
# does not spill into the other one as it does where numpy promotes u to u + 0j first
# ((1 + inf j) * 2 is 2 + inf j here, nan + inf j in numpy).


def _k(like: Tensor, value: float) -> Tensor:
    """A constant of like's (real) dtype, folded into the kernel's code."""
    return Tensor(graph.const(value, like.dtype, like.device))


def _isnan(x: Tensor) -> Tensor:
    return x != x


def _isinf(x: Tensor) -> Tensor:
    return x.abs() == _k(x, math.inf)


def _signbit(v: Tensor) -> Tensor:
    return checked_tensor(graph.alu(Op.SIGNBIT, (v.node,), dtypes.BOOL))


def _infinite(t: Tensor, sign: Tensor | None = None) -> Tensor:
    """inf * t (times sign's sign: copysign(inf, sign) * t), as a selection, not a product: NaN
    for a zero or NaN t, else an infinity of the product's sign. A product with a constant
    infinity would make the derivative of every branch a where() leaves unselected 0 * inf =
    NaN (the recovered values are constants to ug.grad)."""
    negative = _signbit(t) if sign is None else _signbit(t) != _signbit(sign)
    return where(_isnan(t) | (t == 0), _k(t, math.nan), where(negative, _k(t, -math.inf), _k(t, math.inf)))


def multiply(x: Tensor, y: Tensor) -> Tensor:
    """x * y (at least one complex; a real one of the result's part dtype): (a c - b d) +
    (a d + b c) j, numpy's formula, and where both parts come out NaN, C99 Annex G's recovery
    of the infinities (an infinite operand times a nonzero one is an infinity: (inf + inf j) *
    (1 + 0j) is inf + inf j, where numpy gives nan + nan j)."""
    if not dtypes.is_complex(y.dtype):
        a, b = parts(x)
        return combine(a * y, b * y)
    if not dtypes.is_complex(x.dtype):
        c, d = parts(y)
        return combine(x * c, x * d)
    a, b = parts(x)
    c, d = parts(y)
    ac, bd, ad, bc = a * c, b * d, a * d, b * c
    re, im = ac - bd, ad + bc
    big = _k(a, math.inf)
    inf = [v.abs() == big for v in (a, b, c, d)]
    inf_z, inf_w = inf[0] | inf[1], inf[2] | inf[3]
    # neither operand infinite, but a product overflowed
    over = ~(inf_z | inf_w) & (_isinf(ac) | _isinf(bd) | _isinf(ad) | _isinf(bc))
    # Annex G's operands for the recomputation: an infinite operand's parts boxed (+-1 for an
    # infinity, +-0 else); NaN parts of the other operand (of both, after an overflow) zeros
    a3, b3, c3, d3 = (_recovered(v, v_inf, own, other)
                      for v, v_inf, own, other in ((a, inf[0], inf_z, inf_w | over), (b, inf[1], inf_z, inf_w | over),
                                                   (c, inf[2], inf_w, inf_z | over), (d, inf[3], inf_w, inf_z | over)))
    fix = _isnan(re) & _isnan(im) & (inf_z | inf_w | over)
    return combine(where(fix, _infinite(a3 * c3 - b3 * d3), re), where(fix, _infinite(a3 * d3 + b3 * c3), im))


def _recovered(v: Tensor, v_inf: Tensor, boxed: Tensor, zeroed: Tensor) -> Tensor:
    """Annex G's value of the part v for the recomputation: boxed (where `boxed`: +-1 for +-inf,
    +-0 else, v's sign), a NaN made a zero of its sign (where `zeroed`), else v."""
    zero = where(_signbit(v), _k(v, -0.0), _k(v, 0.0))
    return where(boxed, _boxed(v, v_inf), where(zeroed & _isnan(v), zero, v))


def divide(x: Tensor, y: Tensor) -> Tensor:
    """x / y (at least one complex; a real one of the result's part dtype). By a complex y:
    Smith's algorithm exactly as numpy computes it (no overflow or underflow of c^2 + d^2:
    the ratio of the smaller part of y to the larger; a / |c| + b / |c| j for y == 0), and
    where both parts come out NaN, C99 Annex G's recovery: an infinite x over a finite y is an
    infinity, a finite x over an infinite y a zero, a nonzero x over 0 an infinity."""
    if not dtypes.is_complex(y.dtype):
        a, b = parts(x)
        return combine(a / y, b / y)
    if not dtypes.is_complex(x.dtype):
        x = combine(x, _k(x, 0.0))   # (a real x over a complex y: x + 0j)
    a, b = parts(x)
    c, d = parts(y)
    mag = [v.abs() for v in (a, b, c, d)]
    big_c = mag[2] >= mag[3]            # (False where c or d is NaN: numpy's second branch)
    p, q = where(big_c, c, d), where(big_c, d, c)
    rat = q / p
    scl = _k(p, 1.0) / (p + q * rat)
    re = where(big_c, a + b * rat, a * rat + b) * scl
    im = where(big_c, b - a * rat, b * rat - a) * scl
    zero = (c == 0) & (d == 0)
    re = where(zero, a / mag[2], re)
    im = where(zero, b / mag[2], im)
    # Annex G, where both parts are NaN (each part's |v| == inf and |v| < inf computed once)
    inf = _k(re, math.inf)
    is_inf = [m == inf for m in mag]
    finite = [m < inf for m in mag]
    both_nan = _isnan(re) & _isnan(im)
    over_zero = both_nan & zero & ~(_isnan(a) & _isnan(b))
    inf_x = both_nan & ~zero & (is_inf[0] | is_inf[1]) & finite[2] & finite[3]
    inf_y = both_nan & ~zero & (is_inf[2] | is_inf[3]) & finite[0] & finite[1]
    ab, bb, cb, db = (_boxed(v, v_inf) for v, v_inf in zip((a, b, c, d), is_inf))
    zero_k = _k(re, 0.0)
    re = where(over_zero, _infinite(a, c), where(inf_x, _infinite(ab * c + bb * d),
                                                  where(inf_y, zero_k * (a * cb + b * db), re)))
    im = where(over_zero, _infinite(b, c), where(inf_x, _infinite(bb * c - ab * d),
                                                  where(inf_y, zero_k * (b * cb - a * db), im)))
    return combine(re, im)


def _boxed(v: Tensor, v_inf: Tensor) -> Tensor:
    """Annex G's box of v given whether it is infinite: +-1 for +-inf, +-0 else (v's sign)."""
    negative = _signbit(v)
    return where(v_inf, where(negative, _k(v, -1.0), _k(v, 1.0)), where(negative, _k(v, -0.0), _k(v, 0.0)))


def negative(z: Tensor) -> Tensor:
    a, b = parts(z)
    return combine(-a, -b)


def conjugate(z: Tensor) -> Tensor:
    """re - im j (the sign of a zero imaginary part flips too, as numpy's conj)."""
    a, b = parts(z)
    return combine(a, -b)


def sign(z: Tensor) -> Tensor:
    """z / |z|, and 0 for z == 0 (the standard's sign of complex numbers; NaN parts give NaN):
    complex_math.sign (the parts divided by the larger first: sign(1e30 + 1e30j) in complex64
    is not 0 + 0j)."""
    return math_function("sign")(z)


def isnan(z: Tensor) -> Tensor:
    a, b = parts(z)
    return _isnan(a) | _isnan(b)


def isinf(z: Tensor) -> Tensor:
    a, b = parts(z)
    return _isinf(a) | _isinf(b)


def isfinite(z: Tensor) -> Tensor:
    a, b = parts(z)
    inf = _k(a, math.inf)
    return (a.abs() < inf) & (b.abs() < inf)


_REFUSED = {Op.MAX: "maximum", Op.MIN: "minimum", Op.FLOORDIV: "floor_divide (//)", Op.MOD: "remainder (%)",
            Op.CMPLT: "ordering comparison (<, <=, >, >=)", Op.CMPLE: "ordering comparison (<, <=, >, >=)",
            Op.AND: "&", Op.OR: "|", Op.XOR: "^", Op.SHL: "<<", Op.SHR: ">>", Op.NEXTAFTER: "nextafter",
            Op.ATAN2: "atan2", Op.FMOD: "fmod"}


def refused(what: str, dtype: np.dtype) -> TypeError:
    """The TypeError of an op the standard does not define on complex numbers."""
    return TypeError(f"{what} is not defined on complex numbers (got {dtype.name}): they are not ordered; take "
                     f"their real part, imaginary part or abs() first")


def binary(op: Op, x: Tensor, y: Tensor) -> Tensor:
    """A binary operator of the Tensor with a complex result dtype: x and y broadcast to one
    shape, each complex or a real tensor of the result's part dtype (see above)."""
    if op is Op.ADD or op is Op.SUB:
        (a, b), (c, d) = parts(x), parts(y)
        return combine(a + c, b + d) if op is Op.ADD else combine(a - c, b - d)
    if op is Op.MUL:
        return multiply(x, y)
    if op is Op.DIV:
        return divide(x, y)
    if op is Op.CMPEQ or op is Op.CMPNE:
        if not dtypes.is_complex(x.dtype) or not dtypes.is_complex(y.dtype):
            (a, b), (c, d) = parts(x), parts(y)
            return ((a == c) & (b == d)) if op is Op.CMPEQ else ((a != c) | (b != d))
        return checked_tensor(graph.alu(op, (x.node, y.node), dtypes.BOOL))
    if op is Op.POW:
        return power(x, y)
    what = _REFUSED.get(op, op.name.lower())
    raise refused(what, x.dtype if dtypes.is_complex(x.dtype) else y.dtype)


def small_integer(value: object) -> bool:
    """Whether `value` is a real scalar exponent that `integer_power` takes (an integer of at
    most 100 in magnitude, numpy's bound for its multiplies; a complex one with a zero imaginary
    part too)."""
    if not dtypes.is_scalar(value):   # (a bool is 0 or 1)
        return False
    number = complex(cast(complex, value))
    return number.imag == 0 and number.real.is_integer() and abs(number.real) <= 100


def integer_power(z: Tensor, n: int) -> Tensor:
    """z ** n for an integer n, by multiplies (binary powering, numpy's method for |n| < 100):
    z ** 0 is 1, z ** -n is 1 / z ** n."""
    if n == 0:
        return combine(full(z.shape, 1.0, dtypes.part_dtype(z.dtype), z.device), _k(parts(z)[0], 0.0))
    result: Tensor | None = None
    base, k = z, abs(n)
    while k:
        if k & 1:
            result = base if result is None else multiply(result, base)
        k >>= 1
        if k:
            base = multiply(base, base)
    assert result is not None
    return result if n > 0 else divide(full(z.shape, 1.0, dtypes.part_dtype(z.dtype), z.device), result)


def power(x: Tensor, y: Tensor) -> Tensor:
    """x ** y of complex numbers: the complex math's pow (exp(y log x))."""
    fn = math_function("pow")
    return fn(x if dtypes.is_complex(x.dtype) else combine(x, _k(x, 0.0)),
              y if dtypes.is_complex(y.dtype) else combine(y, _k(y, 0.0)))


def math_function(name: str) -> Callable[..., Tensor]:
    """The complex math's function `name` (ug_core.array_api.complex_math: exp, log, sqrt, ...)
    on complex tensors: complex_math's functions take and return the parts (pairs of real
    tensors), so the arguments are taken apart and the result put together here."""
    fn = getattr(_complex_math(), name, None)
    if fn is None:
        raise TypeError(f"{name} of complex numbers is not available (ug_core.array_api.complex_math has no {name})")
    pair_fn = cast(Callable[..., tuple[Tensor, Tensor]], fn)

    def on_complex(*zs: Tensor) -> Tensor:
        return combine(*pair_fn(*(p for z in zs for p in parts(z))))
    on_complex.__name__ = on_complex.__qualname__ = name
    return on_complex


_UNARY_MATH = {Op.EXP: "exp", Op.LOG: "log", Op.SQRT: "sqrt", Op.SIN: "sin", Op.COS: "cos", Op.TANH: "tanh"}


def unary(op: Op, z: Tensor) -> Tensor:
    """A unary op of the Tensor on a complex tensor."""
    if op is Op.NEG:
        return negative(z)
    if op is Op.ABS:
        return cast(Tensor, _complex_math().absolute(z))
    if op is Op.RECIP:
        return divide(full(z.shape, 1.0, dtypes.part_dtype(z.dtype), z.device), z)
    if op in _UNARY_MATH:
        return math_function(_UNARY_MATH[op])(z)
    raise refused({Op.FLOOR: "floor", Op.CEIL: "ceil", Op.TRUNC: "trunc", Op.RINT: "round",
                   Op.SIGNBIT: "signbit", Op.INVERT: "~", Op.NOT: "logical not"}.get(op, op.name.lower()), z.dtype)


# --- products ---------------------------------------------------------------------------------
#
# A complex product has no componentwise accumulator (each step mixes the parts), so the
# products are built from elementwise complex multiplies: a tree for prod, a doubling scan for
# cumulative_prod. Each level reads the previous one through gathers, which the scheduler gives
# a buffer (a level read through strided views would be fused into the next one, doubling the
# loads per level: one kernel of n loads per output).

PROD_FAN_IN = 4
"""Values each level of prod's tree multiplies (log4(n) kernels; a kernel of 3 multiplies)."""


def _one(like: Tensor) -> Tensor:
    """A complex 1 of like's dtype (0-d)."""
    part = dtypes.part_dtype(like.dtype)
    return combine(Tensor(graph.const(1.0, part, like.device)), Tensor(graph.const(0.0, part, like.device)))


def _column(m: int, scale: int, offset: int, rows: int, device: str) -> Node:
    """The int64 index scale * j + offset of each (row, j), shape (rows, m)."""
    i64 = np.dtype(np.int64)
    j = graph.iota((1, m), i64, device)
    col = graph.alu(Op.MUL, (j, broadcast_node(graph.const(scale, i64, device), (1, m))), i64) if scale != 1 else j
    if offset:
        col = graph.alu(Op.ADD, (col, broadcast_node(graph.const(offset, i64, device), (1, m))), i64)
    return broadcast_node(col, (rows, m))


def prod_rows(z: Tensor) -> Tensor:
    """The product of each row of the complex (rows, n) tensor z, shape (rows,): a tree of
    elementwise multiplies (`multiply`, with Annex G's infinities), PROD_FAN_IN values a level,
    in order (z0 z1 z2 z3 ..., which numpy multiplies left to right: the same value up to
    rounding, as for a float prod); 1 for n == 0."""
    rows, n = z.shape
    if n == 0:
        return _one(z).broadcast_to((rows,))
    full_n = 1
    while full_n < n:
        full_n *= PROD_FAN_IN
    if full_n != n:   # padded with ones, once, to a power of the fan-in
        pad = View.contiguous(z.shape).pad(((0, 0), (0, full_n - n)))
        valid = Tensor(graph.view(graph.const(True, dtypes.BOOL, z.device, z.shape), pad))
        z, n = where(valid, Tensor(graph.view(z.node, pad)), _one(z)), full_n
    while n > 1:
        m = n // PROD_FAN_IN
        picks = [checked_tensor(graph.gather(z.node, _column(m, PROD_FAN_IN, k, rows, z.device), 1)) for k in range(PROD_FAN_IN)]
        while len(picks) > 1:   # pairwise, in order
            picks = [multiply(picks[i], picks[i + 1]) if i + 1 < len(picks) else picks[i] for i in range(0, len(picks), 2)]
        z, n = picks[0], m
    return z.reshape(rows)


def cumprod_rows(z: Tensor) -> Tensor:
    """The running products along the last axis of the complex (rows, n) tensor z: a doubling
    scan (Hillis and Steele's: after the level of step s, element i holds the product of
    elements i - 2s + 1 .. i), log2(n) kernels of n multiplies."""
    rows, n = z.shape
    step = 1
    while step < n:
        i = _column(n, 1, 0, rows, z.device)
        earlier = graph.alu(Op.MAX, (graph.alu(Op.SUB, (i, broadcast_node(graph.const(step, np.dtype(np.int64),
                                                                                      z.device), (rows, n))),
                                               np.dtype(np.int64)),
                                     broadcast_node(graph.const(0, np.dtype(np.int64), z.device), (rows, n))),
                            np.dtype(np.int64))
        here = checked_tensor(graph.gather(z.node, i, 1))
        before = checked_tensor(graph.gather(z.node, earlier, 1))
        has = Tensor(graph.alu(Op.CMPLE, (broadcast_node(graph.const(step, np.dtype(np.int64), z.device), (rows, n)), i),
                               dtypes.BOOL))
        z = where(has, multiply(before, here), here)
        step *= 2
    return z
