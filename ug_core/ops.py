"""The ops: each op's name, arity, dtype rule and numpy meaning, in one table.

Adding an op means adding it to `Op` and to exactly one of the tables below; every
consumer that dispatches on ops (the ref device, the lowering, each backend's renderer)
calls `check_exhaustive`, so a missing case fails loudly at import time instead of
falling into a silent default.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np


class Op(enum.Enum):
    # members are singletons compared by identity; Enum's own __hash__ (of the name) is Python
    # code, and the scheduler and the kernel builders hash ops in every dict lookup
    __hash__ = object.__hash__

    # elementwise, one operand
    NEG = enum.auto()
    RECIP = enum.auto()
    EXP = enum.auto()
    LOG = enum.auto()
    SQRT = enum.auto()
    SIN = enum.auto()
    COS = enum.auto()
    TANH = enum.auto()
    ABS = enum.auto()
    NOT = enum.auto()
    FLOOR = enum.auto()
    CEIL = enum.auto()
    TRUNC = enum.auto()
    RINT = enum.auto()
    INVERT = enum.auto()
    SIGNBIT = enum.auto()
    # elementwise, two operands
    ADD = enum.auto()
    SUB = enum.auto()
    MUL = enum.auto()
    DIV = enum.auto()
    POW = enum.auto()
    MAX = enum.auto()
    MIN = enum.auto()
    FLOORDIV = enum.auto()
    MOD = enum.auto()
    FMOD = enum.auto()
    AND = enum.auto()
    OR = enum.auto()
    XOR = enum.auto()
    SHL = enum.auto()
    SHR = enum.auto()
    NEXTAFTER = enum.auto()
    ATAN2 = enum.auto()
    CMPLT = enum.auto()
    CMPLE = enum.auto()
    CMPEQ = enum.auto()
    CMPNE = enum.auto()
    # complex numbers: a complex value's parts (complex -> its part dtype), and two parts of one
    # float dtype made a complex value (see "Complex numbers" below)
    REAL = enum.auto()
    IMAG = enum.auto()
    COMPLEX = enum.auto()
    # elementwise, three operands
    WHERE = enum.auto()
    # dtype conversion (arg: target dtype)
    CAST = enum.auto()
    # the same bits seen as another dtype of the same size (arg: target dtype): float32 <-> int32,
    # float64 <-> int64 (every renderer has these: the core's math library uses them)
    BITCAST = enum.auto()
    # reductions (kept dims have size 1)
    SUM = enum.auto()
    RMAX = enum.auto()
    RMIN = enum.auto()
    PROD = enum.auto()
    # a constant (arg: Python scalar); shape () in the graph, broadcast through a VIEW
    CONST = enum.auto()
    # an index vector: the element at flat (row-major) position p is p, cast to the dtype;
    # no memory. In the graph a leaf of any shape (arg None), read through views like a
    # buffer; in a kernel a leaf whose arg is the ViewChain from the phase's index space
    # (it lowers to the chain's index expression; 0 where a mask rejects the index)
    IOTA = enum.auto()
    # graph-only ops (never appear inside a kernel expression)
    BUFFER = enum.auto()   # an input that is already on a device
    VIEW = enum.auto()     # arg: View over the source's contiguous layout
    REDUCE = enum.auto()   # arg: (reduce op, axes)
    SCAN = enum.auto()     # arg: (reduce op SUM or PROD, axis): the inclusive scan along one axis (SCANS)
    MATMUL = enum.auto()   # srcs (a, b) with shapes (..., M, K), (..., K, N)
    CUSTOM = enum.auto()   # arg: host function fn(out, *inputs)
    COPY = enum.auto()     # srcs (x,) on another device
    SORT = enum.auto()     # srcs (x (rows, n),); arg: specs.SortSpec; the rows sorted (a device's own sort)
    ATTENTION = enum.auto()  # srcs (q, k, v[, mask]); arg: (scale, causal); a device's fused attention (specs.AttentionSpec)
    FFT = enum.auto()      # srcs (x,); arg: specs.FftSpec; a discrete Fourier transform along one axis (a device's own)
    ASSIGN = enum.auto()   # srcs (target, value); arg: region View into target or None
    # a read at a computed element, in the graph and in kernel IR (INDEXED):
    # graph: srcs (x, index), arg: axis; out[i] = x[i with i[axis] replaced by index[i]] (numpy's
    #   take_along_axis without broadcasting: one rank, equal sizes off `axis`); shape: index's.
    #   An index is wrapped once if negative (i + n for -n <= i < 0) and clamped into [0, n):
    #   the frontend raises IndexError where it knows the index, a lazy one is clamped, and
    #   nothing is ever read outside x.
    # kernel IR: srcs (element index, int64), arg: buffer argument index.
    GATHER = enum.auto()
    # a combine of values into computed slots (INDEXED), deterministic: each part of the values
    # is combined in order into a row of its own, the rows are combined after (by the frontend).
    # graph: srcs (values (N,), slots (N,) ints), arg: (reduce op, slots, parts); shape (parts,
    #   slots): row p is the op's identity combined, in order, with values[j] at slot slots[j] for
    #   j in part p's positions [p * N / parts, (p + 1) * N / parts) (N is a multiple of parts).
    #   A slot out of [0, slots) is clamped into it (the frontend checks what it knows).
    # kernel IR: the root of a store's expression, srcs (slot, int64 in range; value), arg:
    #   (reduce op, slots, identity); the kernel's outer index p fills row p of the output (rows
    #   of `slots` elements) with the identity, then runs the store's axis in order:
    #   row[slot] = combine(row[slot], value).
    SCATTER = enum.auto()
    # kernel-expression leaves (only inside kernel IR)
    LOAD = enum.auto()     # arg: (buffer argument index, ViewChain from the phase's index space)
    ACC = enum.auto()      # arg: index of a reduction already finished for the current outer index


@dataclass(frozen=True)
class Alu:
    """An elementwise op: how many operands, what numpy computes, how it prints, and its
    derivative (`vjp`, see "Derivatives" below: required, so a new op without one fails here)."""

    arity: int
    numpy: Callable[..., Any]
    symbol: str
    vjp: "Vjp"
    returns_bool: bool = False


# --- derivatives ---------------------------------------------------------------------------
#
# Each op's vector-Jacobian product sits next to its meaning: `vjp(d, g, out, *srcs)` gets the
# cotangent g of the op's output (a lazy Tensor of the output's shape and dtype), the output
# `out` and the operands `srcs` as Tensors, and returns one cotangent per operand (None: no
# gradient flows to it). `d` is ug_core.autodiff.rules, the rules' helpers (where, sign, ...): this
# module imports no tensor code. Gradients flow through float values only: an op with an
# integer or bool output (comparisons, bitwise ops, argmax's indices) has none (NO_GRADIENT),
# and the float ops that are piecewise constant (floor, ceil, trunc, rint, floor division)
# have a zero one (ZERO_GRADIENT: JAX's and torch's rule). Where an op is not
# differentiable at a point, the rule picks torch's one-sided value (documented per rule);
# ties of max / min split the gradient equally between the equal operands.
Vjp = Callable[..., "tuple[Any, ...]"]


def NO_GRADIENT(d: Any, g: Any, out: Any, *srcs: Any) -> tuple[Any, ...]:
    """The rule of an op whose output is never a float (nothing to differentiate)."""
    return (None,) * len(srcs)


def ZERO_GRADIENT(d: Any, g: Any, out: Any, *srcs: Any) -> tuple[Any, ...]:
    """The rule of a piecewise-constant float op: its derivative is 0 wherever it exists."""
    return (None,) * len(srcs)


def _max_vjp(d: Any, g: Any, out: Any, a: Any, b: Any) -> tuple[Any, ...]:
    """maximum: the larger operand gets g; equal operands get g / 2 each (torch's and JAX's
    rule); a NaN operand (out is NaN) gets g."""
    return g * d.where(a == b, 0.5, d.where(out == a, 1.0, 0.0)), g * d.where(a == b, 0.5, d.where(out == b, 1.0, 0.0))


def _pow_vjp(d: Any, g: Any, out: Any, a: Any, b: Any) -> tuple[Any, ...]:
    """a ** b: b a^(b-1) (0 where b == 0, as torch: 0 ** 0's), and out log(a) (0 where a == 0
    and b >= 0, as torch)."""
    da = d.where(b == 0, 0.0, g * b * a ** (b - 1))
    db = d.where((a == 0) & (b >= 0), 0.0, g * out * a.log())
    return da, db


# --- what each op means, per dtype kind ----------------------------------------------------
#
# The `numpy` function of an op is its definition: the ref device computes it, and every
# backend must give the same result (tests/test_semantics.py checks the edge cases on every
# device). Kinds: float (float16 is computed in float32 and rounded once, as numpy does),
# int (int8 ... int64: two's complement, wrapping on overflow), uint (uint8 ... uint64: modulo
# 2**bits; where its meaning differs from int's the comment says "uint"), bool. An op on a kind that the frontend never builds (numpy refuses it or promotes it
# first: bool NEG/SUB/POW, int EXP/LOG/..., which are cast to float) is marked so; a renderer
# may refuse it (a CompileError), but where it computes it, it follows the meaning below.


def _float_zero_pick(a: np.ndarray, b: np.ndarray, out: np.ndarray, want_negative: bool) -> np.ndarray:
    """`out` with the sign of zero fixed where a == b == 0 (IEEE 754-2019 maximum/minimum)."""
    both_zero = (a == 0) & (b == 0)
    if not np.any(both_zero):
        return out
    a, b = np.broadcast_arrays(a, b)
    signed = np.where(np.signbit(a) == want_negative, a, b)
    return np.where(both_zero, signed, out)


def maximum(a: Any, b: Any) -> Any:
    """MAX. float: IEEE 754-2019 maximum: NaN if either is NaN, and -0.0 < +0.0, so
    maximum(0.0, -0.0) == maximum(-0.0, 0.0) == +0.0 (numpy leaves the zero's sign to its
    SIMD loops: the second operand for float32/64, the first for float16 here). Commutative,
    so a reduction's order never shows. int: the larger. bool: or."""
    out = np.maximum(a, b)
    if np.asarray(out).dtype.kind == "f":
        return _float_zero_pick(np.asarray(a), np.asarray(b), out, want_negative=False)
    return out


def minimum(a: Any, b: Any) -> Any:
    """MIN. float: IEEE 754-2019 minimum (NaN if either is NaN; minimum(0.0, -0.0) == -0.0).
    int: the smaller. bool: and."""
    out = np.minimum(a, b)
    if np.asarray(out).dtype.kind == "f":
        return _float_zero_pick(np.asarray(a), np.asarray(b), out, want_negative=True)
    return out


def divide(a: Any, b: Any) -> Any:
    """DIV. float: IEEE division (x/0 = +-inf, 0/0 = NaN). int: floor division, numpy's
    floor_divide: x // 0 == 0 and INT_MIN // -1 == INT_MIN; uint: the unsigned quotient, x // 0
    == 0 (the frontend never builds it: `/` on ints is true division in float64, and `//` is
    FLOORDIV, which the core's legalization turns into this on ints). bool: never built."""
    if np.result_type(a, b).kind in "iu":
        with np.errstate(divide="ignore", over="ignore"):
            return np.floor_divide(a, b)
    return np.true_divide(a, b)


def nextafter(a: Any, b: Any) -> Any:
    """np.nextafter, but y where x == y for float16 too (numpy < 2.5 kept x there)."""
    out = np.nextafter(a, b)
    return np.where(np.asarray(a) == np.asarray(b), b, out).astype(out.dtype, copy=False)


def arctan2(a: Any, b: Any) -> Any:
    """np.arctan2, float16 / float32 computed in float64 and rounded once (numpy's own float32
    loop, SIMD on some machines, was off by up to 3 ulp: ref is the oracle)."""
    a, b = np.asarray(a), np.asarray(b)
    dt = np.result_type(a, b)
    if dt.kind == "f" and dt.itemsize < 8:
        return np.arctan2(a.astype(np.float64), b.astype(np.float64)).astype(dt)
    return np.arctan2(a, b)


def power(a: Any, b: Any) -> Any:
    """POW. float: C99 / numpy pow: pow(x, 0) == 1 and pow(1, y) == 1 even for NaN,
    pow(-1, +-inf) == 1, a negative base with a non-integer exponent is NaN, pow(+-0, y < 0)
    is +inf, or -inf for an odd integer y and -0; but a constant exponent 0.5 (one value, as a
    Python scalar exponent is) is sqrt, as numpy's `x ** 0.5` is for float32/64: sqrt(-0.0) is
    -0.0 and sqrt(-inf) NaN where pow gives +0.0 and +inf.
    int: wrapping power by squaring; a negative exponent, which numpy refuses, gives the
    truncated 1 / a**-b: 1 for a == 1, +-1 for a == -1, else 0 (0 for a == 0 too, as int
    division by zero gives 0). The frontend raises numpy's ValueError when the exponent is a
    known negative integer (a Python int, an array), so only a tensor exponent reaches a kernel
    with one. uint: wrapping power by squaring. bool: never built (numpy gives int8)."""
    if np.result_type(a, b).kind not in "iu":
        if np.ndim(b) == 0 and b == 0.5:  # (numpy's float16 pow has no such fast path)
            return np.sqrt(a)
        return np.power(a, b)
    a, b = np.asarray(a), np.asarray(b)
    negative = b < 0
    out = np.power(a, np.where(negative, 0, b).astype(b.dtype))
    if not np.any(negative):
        return out
    one_over = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 1, -1, 1), 0)).astype(out.dtype)
    return np.where(negative, one_over, out)


def real_part(z: Any) -> Any:
    """REAL: the real part of a complex value, in its part dtype (complex64: float32)."""
    return np.real(z)


def imag_part(z: Any) -> Any:
    """IMAG: the imaginary part of a complex value, in its part dtype."""
    return np.imag(z)


def make_complex(re: Any, im: Any) -> Any:
    """COMPLEX: the complex value re + im j, its parts exactly `re` and `im` (bit for bit: -0.0,
    inf and NaN parts are kept, which `re + 1j * im` would not: 1j * inf has a NaN real part)."""
    re, im = np.broadcast_arrays(np.asarray(re), np.asarray(im))
    out = np.empty(re.shape, dtype=np.result_type(re.dtype, np.complex64))
    out.real, out.imag = re, im
    return out


ALU: dict[Op, Alu] = {
    # float: -x (flips the sign of 0 and NaN). int: wraps (-INT_MIN == INT_MIN). uint: 2**bits - x
    # (wraps: -0 == 0, -1 == max). bool: never built.
    Op.NEG: Alu(1, np.negative, "neg", lambda d, g, out, x: (-g,)),
    # float: 1/x. int: numpy's reciprocal: 1 / x truncated (1, -1, else 0) and INT_MIN for
    # x == 0 (the frontend never builds it: reciprocal() of ints is float64). uint, bool: never
    # built.
    Op.RECIP: Alu(1, np.reciprocal, "recip", lambda d, g, out, x: (-(g * out * out),)),
    # EXP ... TANH: float only (ints and bools are cast to float first, numpy's rule). numpy's
    # results, to a few ulp (tests/test_ulp.py: <= 4 ulp in float32 on every device); exp
    # overflows to inf and underflows through the subnormals to 0; log(0) == -inf, log(x < 0)
    # and log(-inf) are NaN; sin/cos(+-inf) are NaN; sqrt is correctly rounded, sqrt(-0) == -0.
    Op.EXP: Alu(1, np.exp, "exp", lambda d, g, out, x: (g * out,)),
    Op.LOG: Alu(1, np.log, "log", lambda d, g, out, x: (g / x,)),
    Op.SQRT: Alu(1, np.sqrt, "sqrt", lambda d, g, out, x: (g * 0.5 / out,)),
    Op.SIN: Alu(1, np.sin, "sin", lambda d, g, out, x: (g * x.cos(),)),
    Op.COS: Alu(1, np.cos, "cos", lambda d, g, out, x: (-(g * x.sin()),)),
    Op.TANH: Alu(1, np.tanh, "tanh", lambda d, g, out, x: (g * (1 - out * out),)),
    # float: |x| (clears the sign of -0 and NaN). int: wraps (|INT_MIN| == INT_MIN). uint, bool: x.
    Op.ABS: Alu(1, np.abs, "abs", lambda d, g, out, x: (g * d.sign(x),)),
    # x == 0 (NaN is not zero, so NOT NaN is False), for every kind.
    Op.NOT: Alu(1, np.logical_not, "not", NO_GRADIENT, returns_bool=True),
    # FLOOR ... RINT: float only, exact: the integer below, above, toward zero, nearest (ties to
    # even: the Array API's `round`); -0.0, +-inf and NaN are kept (ceil(-0.5) == -0.0). Of ints
    # and bools the frontend returns the input itself (numpy's floor would give float64).
    Op.FLOOR: Alu(1, np.floor, "floor", ZERO_GRADIENT),
    Op.CEIL: Alu(1, np.ceil, "ceil", ZERO_GRADIENT),
    Op.TRUNC: Alu(1, np.trunc, "trunc", ZERO_GRADIENT),
    Op.RINT: Alu(1, np.rint, "rint", ZERO_GRADIENT),
    # int: ~x (-x - 1). uint: max - x. bool: never built (`~` of bools is NOT).
    Op.INVERT: Alu(1, np.invert, "~", NO_GRADIENT),
    # float: the sign bit is set: True for -0.0 and for a NaN with its sign bit set. int, bool:
    # never built (the frontend compares with 0).
    Op.SIGNBIT: Alu(1, np.signbit, "signbit", NO_GRADIENT, returns_bool=True),
    # float: IEEE, no contraction into fma. int: wraps. bool: ADD is or, MUL is and (numpy);
    # SUB is never built (numpy refuses bool subtraction).
    Op.ADD: Alu(2, np.add, "+", lambda d, g, out, a, b: (g, g)),
    Op.SUB: Alu(2, np.subtract, "-", lambda d, g, out, a, b: (g, -g)),
    Op.MUL: Alu(2, np.multiply, "*", lambda d, g, out, a, b: (g * b, g * a)),
    Op.DIV: Alu(2, divide, "/", lambda d, g, out, a, b: (g / b, -(g * out) / b)),
    Op.POW: Alu(2, power, "**", _pow_vjp),
    Op.MAX: Alu(2, maximum, "max", _max_vjp),
    Op.MIN: Alu(2, minimum, "min", _max_vjp),
    # numpy's floor_divide and remainder (Python's // and %: the remainder has the divisor's
    # sign). int: x // 0 == x % 0 == 0, INT_MIN // -1 == INT_MIN, INT_MIN % -1 == 0. uint: the
    # unsigned quotient and remainder, x // 0 == x % 0 == 0. float:
    # numpy's npy_divmod exactly: fmod, then corrected: x // 0 == x / 0 and x % 0 is NaN; a
    # zero quotient or remainder has the sign of x / y or of y (-0.0 // 1 == -0.0, 0.0 % -3
    # == -0.0); -1 // inf == -1 and -1 % inf == inf; inf // y and inf % y are NaN. bool: never
    # built (numpy gives int8).
    Op.FLOORDIV: Alu(2, np.floor_divide, "//", ZERO_GRADIENT),
    Op.MOD: Alu(2, np.remainder, "%", lambda d, g, out, a, b: (g, -(g * (a // b)))),
    # float: C's fmod, exact: x - n y for n = trunc(x / y) computed exactly, with x's sign;
    # fmod(x, 0) and fmod(+-inf, y) are NaN, fmod(x, +-inf) == x. The frontend does not build
    # it (no Array API function): the core's expansion of FLOORDIV and MOD computes from it.
    Op.FMOD: Alu(2, np.fmod, "fmod", lambda d, g, out, a, b: (g, -(g * d.trunc(a / b)))),
    # AND, OR, XOR: int, uint: bitwise (two's complement). bool: logical.
    Op.AND: Alu(2, np.bitwise_and, "&", NO_GRADIENT),
    Op.OR: Alu(2, np.bitwise_or, "|", NO_GRADIENT),
    Op.XOR: Alu(2, np.bitwise_xor, "^", NO_GRADIENT),
    # ints and uints only, numpy's rule for counts outside [0, bits): x << n wraps, and is 0 for
    # n < 0 or n >= bits; x >> n is arithmetic (rounds toward -inf), and for such n it is 0, or
    # -1 for a negative x. uint: x >> n is logical; both are 0 for n >= bits.
    Op.SHL: Alu(2, np.left_shift, "<<", NO_GRADIENT),
    Op.SHR: Alu(2, np.right_shift, ">>", NO_GRADIENT),
    # float: the next representable value after x toward y (numpy's, of the operands' dtype:
    # float16 steps are float16's); y if x == y, for every dtype (C's rule: nextafter(0.0, -0.0)
    # == -0.0; numpy before 2.5 returned x for float16), the smallest subnormal with y's sign
    # from a zero, +-inf past the largest finite value and back, NaN if either is NaN.
    # Its derivative: 1 in x (one ulp from x: the identity, as finite differences see it), 0 in y.
    Op.NEXTAFTER: Alu(2, nextafter, "nextafter", lambda d, g, out, x, y: (g, None)),
    # float: the angle of the point (x2, x1) in [-pi, pi], numpy's (C99's) arctan2 to a few ulp
    # (the core computes it on every device: ug_core.mathlib.atan2), with every special case:
    # the sign of a zero x1 is kept, atan2(+-0, -0) == +-pi, atan2(+-0, +0) == +-0,
    # atan2(+-inf, -inf) == +-3pi/4, atan2(+-inf, +inf) == +-pi/4, NaN if either is NaN.
    Op.ATAN2: Alu(2, arctan2, "atan2", lambda d, g, out, y, x: (g * x / (x * x + y * y), -(g * y) / (x * x + y * y))),
    # float: ordered comparisons (False with a NaN), but CMPNE, which is True with a NaN;
    # -0.0 == 0.0. int: signed. uint: unsigned. bool: False < True.
    Op.CMPLT: Alu(2, np.less, "<", NO_GRADIENT, returns_bool=True),
    Op.CMPLE: Alu(2, np.less_equal, "<=", NO_GRADIENT, returns_bool=True),
    Op.CMPEQ: Alu(2, np.equal, "==", NO_GRADIENT, returns_bool=True),
    Op.CMPNE: Alu(2, np.not_equal, "!=", NO_GRADIENT, returns_bool=True),
    # Complex numbers. complex64 / complex128 are a value kind of their own (COMPLEX_KIND); the
    # frontend expands complex arithmetic and functions into real ops on the parts
    # (ug_core.array_api._complex), which these three ops connect to the complex values, and the
    # core's legalization splits what is left complex in a kernel into pairs of real values. So
    # complex kernels need nothing of a renderer. The derivatives treat a complex value as the
    # pair (re, im) of reals: the cotangent of a complex value z is g = dL/dre + i dL/dim (for a
    # real loss L: torch's convention for a complex input's .grad; JAX's is its conjugate).
    Op.REAL: Alu(1, real_part, "real", lambda d, g, out, z: (d.make_complex(g, d.zeros_like(g)),)),
    Op.IMAG: Alu(1, imag_part, "imag", lambda d, g, out, z: (d.make_complex(d.zeros_like(g), g),)),
    Op.COMPLEX: Alu(2, make_complex, "complex", lambda d, g, out, re, im: (d.real(g), d.imag(g))),
    # cond ? a : b, for every kind of a and b (cond is bool).
    Op.WHERE: Alu(3, np.where, "where", lambda d, g, out, c, a, b: (None, d.where(c, g, 0.0), d.where(c, 0.0, g))),
}

FLOAT, INT, UINT, BOOL_KIND, COMPLEX_KIND = "f", "i", "u", "b", "c"
OPERAND_KINDS = (FLOAT, INT, UINT, BOOL_KIND, COMPLEX_KIND)
_INTS = frozenset({INT, UINT})
_NUMBERS = frozenset({FLOAT, INT, UINT})
_REAL_KINDS = frozenset({FLOAT, INT, UINT, BOOL_KIND})
_INT_AND_BOOL = frozenset({INT, UINT, BOOL_KIND})
KINDS: dict[Op, frozenset[str]] = {
    **{op: frozenset({FLOAT}) for op in (Op.EXP, Op.LOG, Op.SQRT, Op.SIN, Op.COS, Op.TANH, Op.ATAN2)},
    **{op: frozenset({FLOAT}) for op in (Op.FLOOR, Op.CEIL, Op.TRUNC, Op.RINT, Op.SIGNBIT, Op.FMOD, Op.NEXTAFTER)},
    **{op: _INTS for op in (Op.INVERT, Op.SHL, Op.SHR)},
    Op.RECIP: frozenset({FLOAT, INT}),
    **{op: _INT_AND_BOOL for op in (Op.AND, Op.OR, Op.XOR)},
    **{op: _NUMBERS for op in (Op.NEG, Op.SUB, Op.DIV, Op.POW, Op.FLOORDIV, Op.MOD)},
    **{op: _REAL_KINDS for op in (Op.ABS, Op.NOT, Op.MUL, Op.MAX, Op.MIN, Op.CMPLT, Op.CMPLE)},
    # complex values in a kernel: selected, compared for equality, taken apart, and added (the
    # lowering's SUM accumulators, gpu tree reductions and scatter sums combine with ADD); the
    # frontend builds no other op on them (it expands complex arithmetic into real ops)
    **{op: _REAL_KINDS | {COMPLEX_KIND} for op in (Op.ADD, Op.CMPEQ, Op.CMPNE, Op.WHERE)},
    Op.REAL: frozenset({COMPLEX_KIND}),
    Op.IMAG: frozenset({COMPLEX_KIND}),
    Op.COMPLEX: frozenset({FLOAT}),
}
"""The operand dtype kinds (numpy's dtype.kind: FLOAT, INT, UINT, BOOL_KIND, COMPLEX_KIND) each
ALU op is defined on, as the comments above say: the pairs the frontend never builds (bool NEG,
int EXP, uint RECIP, complex MUL, ...) are not. The core's legalization (ug_core.legalize)
refuses the rest, the same on every device, so a renderer spells exactly these pairs (and no
complex one: the legalization splits those into real ops first). WHERE's kind is its value
operands'."""

def kind(dtype: np.dtype) -> str:
    return np.dtype(dtype).kind


def defined(op: Op, operand: np.dtype) -> bool:
    """Whether ALU op `op` is defined on operands of dtype `operand`."""
    return kind(operand) in KINDS[op]


def defined_on(operand_kind: str) -> frozenset[Op]:
    """The ALU ops defined on operands of this dtype kind (one of OPERAND_KINDS)."""
    return frozenset(op for op, kinds in KINDS.items() if operand_kind in kinds)


_COMPLEX_PARTS: dict[np.dtype, np.dtype] = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}


def alu_result(op: Op, operand: np.dtype) -> np.dtype | None:
    """The dtype of ALU op `op` on operands of dtype `operand` (WHERE's: its value operands'):
    bool for a comparison, the part dtype for REAL / IMAG, the complex dtype of float32 /
    float64 parts for COMPLEX, else the operand's; None where the op is not defined on it (a
    COMPLEX of float16 parts: there is no complex32)."""
    operand = np.dtype(operand)
    if not defined(op, operand):
        return None
    if ALU[op].returns_bool:
        return np.dtype(bool)
    if op in (Op.REAL, Op.IMAG):
        return _COMPLEX_PARTS[operand]
    if op is Op.COMPLEX:
        return next((c for c, part in _COMPLEX_PARTS.items() if part == operand), None)
    return operand


TRANSCENDENTAL = frozenset({Op.EXP, Op.LOG, Op.SQRT, Op.SIN, Op.COS, Op.TANH})
"""Unary ops that only make sense on floats: integer inputs are cast first (numpy's rule)."""


@dataclass(frozen=True)
class Reduce:
    """A reduction: its name (also the accumulator identity's key), its meaning
    (numpy(values, axis, keepdims, dtype)) and combine op."""

    name: str
    numpy: Callable[..., Any]
    combine: Op
    # vjp(d, g, out, x, axes): the cotangent of x (shape x's) from g and out (both broadcast to
    # x's shape), as Alu.vjp
    vjp: Callable[..., Any]


def _reduce_wide(ufunc: np.ufunc, values: np.ndarray, axis: tuple[int, ...], keepdims: bool,
                 dtype: np.dtype) -> np.ndarray:
    """The sum (product). float16 / float32 ones accumulate in float64 and round once (numpy sums
    pairwise along a contiguous last axis only: its float32 sum over a strided axis of 1M values
    was 3e-5 off), so the ref device is as accurate as the devices must be, whatever the layout,
    without copying the values (a broadcast input stays a view). ints wrap."""
    if np.dtype(dtype).kind == "f" and np.dtype(dtype).itemsize < 8:
        wide = ufunc.reduce(values, axis=axis, keepdims=keepdims, dtype=np.float64)
        return wide.astype(dtype)
    if np.dtype(dtype) == np.complex64:   # (each part as a float32 sum)
        return ufunc.reduce(values, axis=axis, keepdims=keepdims, dtype=np.complex128).astype(dtype)
    return ufunc.reduce(values, axis=axis, keepdims=keepdims, dtype=dtype)


def _reduce_extreme(values: np.ndarray, axis: Any, keepdims: bool, dtype: np.dtype, largest: bool) -> np.ndarray:
    """The MAX (MIN) of the values: NaN if any is NaN; a zero result is +0.0 (-0.0) if any
    value is +0.0 (-0.0), whatever the order (maximum/minimum are commutative)."""
    ufunc = np.maximum if largest else np.minimum
    out = ufunc.reduce(values, axis=axis, keepdims=keepdims, dtype=dtype)  # type: ignore[call-overload]
    if out.dtype.kind != "f" or not np.any(out == 0):
        return out
    preferred = (values == 0) & (np.signbit(values) != largest)
    has = np.logical_or.reduce(preferred, axis=axis, keepdims=keepdims)  # type: ignore[call-overload]
    zero = np.where(has == largest, out.dtype.type(0.0), out.dtype.type(-0.0))
    return np.where(out == 0, zero, out)


REDUCE: dict[Op, Reduce] = {
    Op.SUM: Reduce("sum", lambda v, axis, keepdims, dtype: _reduce_wide(np.add, v, axis, keepdims, dtype), Op.ADD,
                   lambda d, g, out, x, axes: g),
    # max / min: the gradient goes to the elements equal to the result, split equally between
    # ties (JAX's and torch.amax's rule); where the result is NaN, to the NaN elements
    Op.RMAX: Reduce("max", lambda v, axis, keepdims, dtype: _reduce_extreme(v, axis, keepdims, dtype, True), Op.MAX,
                    lambda d, g, out, x, axes: d.extreme_vjp(g, out, x, axes)),
    Op.RMIN: Reduce("min", lambda v, axis, keepdims, dtype: _reduce_extreme(v, axis, keepdims, dtype, False), Op.MIN,
                    lambda d, g, out, x, axes: d.extreme_vjp(g, out, x, axes)),
    # prod: the product of the other elements, exact with zeros in the row (no division by 0)
    Op.PROD: Reduce("prod", lambda v, axis, keepdims, dtype: _reduce_wide(np.multiply, v, axis, keepdims, dtype), Op.MUL,
                    lambda d, g, out, x, axes: d.prod_vjp(g, out, x, axes)),
}


def _scan_wide(ufunc: np.ufunc, values: np.ndarray, axis: int, dtype: np.dtype) -> np.ndarray:
    """The running sum (product) along `axis`; float16 / float32 ones accumulate in float64 and
    round each output once (as _reduce_wide does for reductions). ints wrap; bool: or (and)."""
    if np.dtype(dtype).kind == "f" and np.dtype(dtype).itemsize < 8:
        return ufunc.accumulate(values, axis=axis, dtype=np.float64).astype(dtype)
    if np.dtype(dtype) == np.complex64:
        return ufunc.accumulate(values, axis=axis, dtype=np.complex128).astype(dtype)
    return ufunc.accumulate(values, axis=axis, dtype=dtype)


def _scan_extreme(values: np.ndarray, axis: int, dtype: np.dtype, largest: bool) -> np.ndarray:
    """The running max (min) along `axis`, by ug's maximum (minimum): NaN wins, -0.0 < 0.0."""
    out = np.moveaxis(np.array(values, dtype=dtype), axis, 0)
    pick = maximum if largest else minimum
    for i in range(1, out.shape[0]):
        out[i] = pick(out[i - 1], out[i])
    return np.moveaxis(out, 0, axis)


SCANS: dict[Op, Callable[[np.ndarray, int, np.dtype], np.ndarray]] = {
    Op.SUM: lambda v, axis, dtype: _scan_wide(np.add, v, axis, dtype),
    Op.PROD: lambda v, axis, dtype: _scan_wide(np.multiply, v, axis, dtype),
    Op.RMAX: lambda v, axis, dtype: _scan_extreme(v, axis, dtype, True),
    Op.RMIN: lambda v, axis, dtype: _scan_extreme(v, axis, dtype, False),
}
"""The scans (Op.SCAN, the Array API's cumulative_sum / cumulative_prod, ug's cumulative_max /
cumulative_min; numpy's cumsum / cumprod / maximum.accumulate): element i along the axis is the
REDUCE[op].combine of the elements 0..i (max and min exact, by maximum / minimum's rules), numpy(values,
axis, dtype) on the ref device. ints wrap; bool (dtype=bool) is or / and. Floats: the first
element is the value itself (the running sum starts from -0.0, the product from 1: identities
that keep -0.0 and NaN), and each element is the exact running sum (product) rounded to the
dtype, up to the rounding error of the order a device adds in. float16 runs in float32 and
rounds each output once (numpy rounds its running float16 value at every step: 5000 x 0.1 sum
to 256 there). A device runs each row sequentially along the axis (an error of at most
n eps max |prefix|, in practice about sqrt(n) eps max |prefix|, as numpy's float32 cumsum); a
long scan over few rows is blocked (ug_core.array_api.scans: block totals, their prefix, then a scan per
block seeded with it: about (blocks + block length) eps max |prefix| at most). The tests allow
4 sqrt(n) eps max |prefix|. A blocked scan, or one with include_initial (the identity put in
front as a first value), may give +0.0 where the whole prefix is -0.0."""

SCAN_VJP: dict[Op, Callable[..., Any]] = {
    # vjp(d, g, out, x, axis): the cotangent of x. cumsum's is the reverse cumsum of g;
    # cumprod's the products of the others (exact with zeros); cummax / cummin's goes to the
    # element each running extreme was taken from (the last of equal ones, as torch's cummax)
    Op.SUM: lambda d, g, out, x, axis: d.reverse_cumsum(g, axis),
    Op.PROD: lambda d, g, out, x, axis: d.cumprod_vjp(g, out, x, axis),
    Op.RMAX: lambda d, g, out, x, axis: d.cumextreme_vjp(g, out, x, axis),
    Op.RMIN: lambda d, g, out, x, axis: d.cumextreme_vjp(g, out, x, axis),
}

GRAPH_ONLY = frozenset({Op.BUFFER, Op.VIEW, Op.REDUCE, Op.SCAN, Op.MATMUL, Op.CUSTOM, Op.COPY, Op.SORT, Op.ATTENTION,
                        Op.FFT, Op.ASSIGN})
LEAVES = frozenset({Op.CONST, Op.IOTA, Op.LOAD, Op.ACC})
INDEXED = frozenset({Op.GATHER, Op.SCATTER})


def check_exhaustive(handled: Iterable[Op], required: Iterable[Op], who: str) -> None:
    """Raise at import time if `who` does not handle every op in `required`."""
    missing = set(required) - set(handled)
    if missing:
        names = ", ".join(sorted(op.name for op in missing))
        raise NotImplementedError(f"{who} does not handle ops: {names}")


# every op lives in exactly one group
CONVERSIONS = frozenset({Op.CAST, Op.BITCAST})
"""CAST (to the node's dtype) is numpy's astype: ints wrap to a narrower int and extend by their
sign (uints by zeros); ints and floats to a float round to nearest; anything to bool is != 0 (a
complex value: either part); a complex value to a real dtype is its real part. A float to an int
truncates toward zero where the result fits; NaN, +-inf and values out of range, which numpy
leaves to the hardware, are ug's rule on every device (ug-llvm's; numpy's on x86-64 but for
uint32 and uint64 out of range, where its loops differ between builds, and `ref` gives numpy's):
the float becomes an int32 (an int64 for 64-bit and uint32 results), INT_MIN of that type where
the value is NaN or out of its range, and the result is its low bits; a uint64 takes [2**63,
2**64) unsigned. BITCAST reads the bits as another dtype of the same width (no bool)."""
check_exhaustive(set(ALU) | CONVERSIONS | set(REDUCE) | GRAPH_ONLY | LEAVES | INDEXED, Op, "ops tables")
check_exhaustive(KINDS, ALU, "ops.KINDS")
check_exhaustive(SCAN_VJP, SCANS, "ops.SCAN_VJP")

STRUCTURAL_VJP: dict[Op, Vjp] = {
    # vjp(d, g, out, srcs, arg) for the ops that are not ALU ops: srcs and out are Tensors, arg
    # the node's arg (see the ops' comments at the top). The helpers are ug_core.autodiff.rules'.
    Op.CAST: lambda d, g, out, srcs, arg: (d.cast_vjp(g, srcs[0]),),   # float -> float only
    Op.VIEW: lambda d, g, out, srcs, arg: (d.view_vjp(g, srcs[0].shape, arg),),
    Op.REDUCE: lambda d, g, out, srcs, arg: (d.reduce_vjp(g, out, srcs[0], arg),),
    Op.SCAN: lambda d, g, out, srcs, arg: (SCAN_VJP[arg[0]](d, g, out, srcs[0], arg[1]),),
    Op.MATMUL: lambda d, g, out, srcs, arg: d.matmul_vjp(g, *srcs),
    Op.GATHER: lambda d, g, out, srcs, arg: (d.gather_vjp(g, srcs[0], srcs[1], arg), None),
    Op.SCATTER: lambda d, g, out, srcs, arg: (d.scatter_vjp(g, out, srcs[0], srcs[1], arg), None),
    Op.SORT: lambda d, g, out, srcs, arg: (d.sort_vjp(g, srcs[0], arg),),
    Op.ATTENTION: lambda d, g, out, srcs, arg: d.attention_vjp(g, srcs, arg),
    # a transform's is the transform the other way (the adjoint of a DFT matrix W is conj(W),
    # the other sign), the same scale, its length cut or padded back to the source's; a half
    # spectrum's counts its inner bins twice (see array_api.fft.fft_vjp)
    Op.FFT: lambda d, g, out, srcs, arg: (d.fft_vjp(g, srcs[0], arg),),
    Op.ASSIGN: lambda d, g, out, srcs, arg: d.assign_vjp(g, srcs[0], srcs[1], arg),
    Op.COPY: lambda d, g, out, srcs, arg: (d.copy_vjp(g, srcs[0]),),
    Op.CUSTOM: lambda d, g, out, srcs, arg: d.custom_vjp(g, out, srcs, arg),
}
"""The derivatives of the graph's other ops (ALU ops carry theirs in ALU, reductions in
REDUCE, scans in SCAN_VJP)."""

NO_DERIVATIVE = frozenset({Op.CONST, Op.IOTA, Op.BUFFER, Op.BITCAST, Op.LOAD, Op.ACC})
"""Ops no gradient flows through: the graph's leaves (constants, index vectors, buffers: a
gradient stops there), BITCAST (bits seen as another dtype: not a function of the value), and
the kernel-IR-only leaves."""
check_exhaustive(set(ALU) | set(STRUCTURAL_VJP) | NO_DERIVATIVE | set(REDUCE), Op, "the derivative rules (ops.*VJP)")
