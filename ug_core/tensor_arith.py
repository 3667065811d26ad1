"""The Tensor's arithmetic: its operators (+, *, <, &, @, +=, ~, ...), elementwise functions
(exp, sqrt, abs, reciprocal, the activations), and the functions of two or three tensors they
share (where, maximum, minimum, matmul). Operands follow numpy 2's rules: tensors and numpy
scalars are typed and promote, a Python scalar is weak (it takes the tensor's dtype where its
kind fits), shapes broadcast.

A complex tensor is a pair of real ones (`parts`, `combine`: the REAL / IMAG / COMPLEX nodes); its
arithmetic is array_api._complex's, reached through the Tensor's `_complex_binary` and
`_complex_unary` (bound in array_api/methods.py with everything here)."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from . import dtypes, graph, scalars
from .graph import Node
from .ops import ALU, Op
from .shapes import broadcast_node, broadcast_pair, broadcast_shape
from .tensor import Tensor, checked_tensor, full, graph_scalar, tensor
from .view import View

COMPARISONS = frozenset({Op.CMPLT, Op.CMPLE, Op.CMPEQ, Op.CMPNE})


# --- operands --------------------------------------------------------------------------------


def _operands(self: Tensor, other: Any) -> tuple[Node, Node, np.dtype]:
    """(self node, other node, common dtype) for a binary op; scalars are weak."""
    if isinstance(other, Tensor):
        a, b = self._node, other._node
        if a.device != b.device:
            raise ValueError(f"tensors are on different devices: {a.device!r} and {b.device!r}; "
                             f"move one with .to(device)")
        return a, b, dtypes.promote(a.dtype, b.dtype)
    if dtypes.is_scalar(other):
        # a Python scalar is weak: it takes the tensor's dtype when its kind fits (exactly;
        # an int it cannot hold is an OverflowError), else the default dtype of its kind (a
        # float scalar with an int tensor computes in float32); a numpy scalar is typed and
        # promotes (NEP 50: int8 + np.int64(300) is int64)
        dt = dtypes.scalar_dtype(other, self.dtype)
        return self._node, graph.const(dtypes.operand(other, dt).item(), dt, self.device), dt
    if isinstance(other, (np.ndarray, list, tuple)):
        return _operands(self, tensor(other, device=self.device))
    raise TypeError(f"unsupported operand type {type(other).__name__} for a tensor op")


def _binary(self: Tensor, op: Op, other: Any, reverse: bool = False, ufunc: Callable[..., Any] | None = None) -> Tensor:
    side = dtypes.beyond_range(other, self.dtype) if op in COMPARISONS else 0
    if side:   # (numpy 2: uint8 < 300 is True, uint8 == -1 False: one answer for every element)
        answer = op is Op.CMPNE if op in (Op.CMPEQ, Op.CMPNE) else (side > 0) != reverse
        return full(self.shape, answer, dtypes.BOOL, self.device)
    a, b, common = _operands(self, other)
    if common.kind == "c":
        return self._complex_binary(op, other, reverse, common)
    if ufunc is not None:  # numpy decides the compute dtype (e.g. int / int -> float64)
        common = dtypes.ufunc_result(ufunc, common, common)
    a, b = graph.cast(a, common), graph.cast(b, common)
    if dtypes.is_scalar(other) and not (op is Op.POW and not reverse and _exponent_folds(b.arg)):
        # a user's scalar (a constant of the op's dtype by now): a kernel argument, unless
        # it changes the code (scalars.folds), so that a new value reuses the kernel
        b = scalars.parameter(b)
    if reverse:
        a, b = b, a
    shape = broadcast_pair(a.shape, b.shape)
    out_dtype = dtypes.BOOL if op in COMPARISONS else common
    return checked_tensor(graph.alu(op, (broadcast_node(a, shape), broadcast_node(b, shape)), out_dtype))


POW_FOLDED_EXPONENTS = 64
"""`x ** e` keeps a scalar exponent e in the code when 2e is an integer of at most twice this
size: a backend may compute such powers with multiplies and a square root. Other exponents are
kernel arguments, like any other scalar of the user's."""


def check_integer_exponent(base_dtype: np.dtype, exponent: Any) -> None:
    """numpy's ValueError for an integer power with a negative exponent whose value is known
    here (a scalar, an array or a list); a tensor exponent's negative entries give ops.power's
    documented result instead."""
    if isinstance(exponent, Tensor) or isinstance(exponent, (bool, np.bool_)):
        return
    if dtypes.is_scalar(exponent):
        if not isinstance(exponent, (int, np.integer)) or exponent >= 0:
            return
        exponent_dtype = dtypes.scalar_dtype(exponent, base_dtype)
    elif isinstance(exponent, (np.ndarray, list, tuple)):
        values = np.asarray(exponent)
        if values.dtype.kind not in "iu" or not np.any(values < 0):
            return
        exponent_dtype = values.dtype
    else:
        return
    if dtypes.ufunc_result(np.power, dtypes.promote(base_dtype, exponent_dtype), exponent_dtype).kind in "iu":
        raise ValueError("Integers to negative integer powers are not allowed.")


def _exponent_folds(exponent: Any) -> bool:
    if isinstance(exponent, bool):
        return True
    if isinstance(exponent, int):
        return -POW_FOLDED_EXPONENTS <= exponent <= POW_FOLDED_EXPONENTS
    if isinstance(exponent, float):
        return math.isfinite(exponent) and (2 * exponent).is_integer() and math.fabs(exponent) <= POW_FOLDED_EXPONENTS
    raise TypeError(f"unexpected exponent {exponent!r} of type {type(exponent).__name__}")


# --- the operators (Tensor.__add__ and the others are these functions) ------------------------


def __add__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.ADD, o, ufunc=np.add)
def __radd__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.ADD, o, True, ufunc=np.add)
def __sub__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.SUB, o, ufunc=np.subtract)
def __rsub__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.SUB, o, True, ufunc=np.subtract)
def __mul__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.MUL, o, ufunc=np.multiply)
def __rmul__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.MUL, o, True, ufunc=np.multiply)
def __truediv__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.DIV, o, ufunc=np.true_divide)
def __rtruediv__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.DIV, o, True, ufunc=np.true_divide)


def __pow__(self: Tensor, o: Any) -> Tensor:
    check_integer_exponent(self.dtype, o)
    return _binary(self, Op.POW, o, ufunc=np.power)


def __rpow__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.POW, o, True, ufunc=np.power)
def __lt__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.CMPLT, o)
def __le__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.CMPLE, o)
def __gt__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.CMPLT, o, True)
def __ge__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.CMPLE, o, True)
def __eq__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.CMPEQ, o)
def __ne__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.CMPNE, o)
def __matmul__(self: Tensor, o: Any) -> Tensor: return matmul(self, o)
def __rmatmul__(self: Tensor, o: Any) -> Tensor: return matmul(o, self)
def __floordiv__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.FLOORDIV, o, ufunc=np.floor_divide)
def __rfloordiv__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.FLOORDIV, o, True, ufunc=np.floor_divide)
def __mod__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.MOD, o, ufunc=np.remainder)
def __rmod__(self: Tensor, o: Any) -> Tensor: return _binary(self, Op.MOD, o, True, ufunc=np.remainder)


def _bitwise(self: Tensor, op: Op, other: Any, reverse: bool = False) -> Tensor:
    """`&`, `|`, `^` (bitwise of ints, logical of bools), `<<` and `>>` (of ints only), in the
    operands' common dtype; other dtypes (floats) are a TypeError naming them."""
    if not (dtypes.is_scalar(other) or isinstance(other, Tensor)):
        other = as_tensor(other, self)
    other_dtype = dtypes.scalar_dtype(other, self.dtype) if dtypes.is_scalar(other) else other.dtype
    allowed = "iu" if op in (Op.SHL, Op.SHR) else "iub"
    if dtypes.promote(self.dtype, other_dtype).kind not in allowed:
        names = [self.dtype.name, other.dtype.name if isinstance(other, Tensor) else type(other).__name__]
        first, second = names[::-1] if reverse else names
        kinds = "integer" if allowed == "iu" else "integer or bool"
        raise TypeError(f"operator {ALU[op].symbol} is defined on {kinds} operands, got {first} and {second}")
    return _binary(self, op, other, reverse)


def __and__(self: Tensor, o: Any) -> Tensor: return _bitwise(self, Op.AND, o)
def __rand__(self: Tensor, o: Any) -> Tensor: return _bitwise(self, Op.AND, o, True)
def __or__(self: Tensor, o: Any) -> Tensor: return _bitwise(self, Op.OR, o)
def __ror__(self: Tensor, o: Any) -> Tensor: return _bitwise(self, Op.OR, o, True)
def __xor__(self: Tensor, o: Any) -> Tensor: return _bitwise(self, Op.XOR, o)
def __rxor__(self: Tensor, o: Any) -> Tensor: return _bitwise(self, Op.XOR, o, True)
def __lshift__(self: Tensor, o: Any) -> Tensor: return _bitwise(self, Op.SHL, o)
def __rlshift__(self: Tensor, o: Any) -> Tensor: return _bitwise(self, Op.SHL, o, True)
def __rshift__(self: Tensor, o: Any) -> Tensor: return _bitwise(self, Op.SHR, o)
def __rrshift__(self: Tensor, o: Any) -> Tensor: return _bitwise(self, Op.SHR, o, True)


# in place: `x op= y` gives x the value of `x op y` (assign: tensors made from x before keep
# their values), which must keep x's shape and a dtype x can hold (numpy's same_kind rule:
# float32 += float64 is float32, int += float raises)
def _in_place(self: Tensor, result: Tensor, symbol: str) -> Tensor:
    if result.shape != self.shape:
        raise ValueError(f"{symbol}=: the result's shape {result.shape} is not the tensor's {self.shape}")
    if result.dtype != self.dtype and not np.can_cast(result.dtype, self.dtype, "same_kind"):
        raise TypeError(f"{symbol}=: the result's dtype {result.dtype.name} cannot be held by the tensor's "
                        f"{self.dtype.name} (numpy's same_kind casting)")
    return self.assign(result)


def __iadd__(self: Tensor, o: Any) -> Tensor: return _in_place(self, self + o, "+")
def __isub__(self: Tensor, o: Any) -> Tensor: return _in_place(self, self - o, "-")
def __imul__(self: Tensor, o: Any) -> Tensor: return _in_place(self, self * o, "*")
def __itruediv__(self: Tensor, o: Any) -> Tensor: return _in_place(self, self / o, "/")
def __ifloordiv__(self: Tensor, o: Any) -> Tensor: return _in_place(self, self // o, "//")
def __imod__(self: Tensor, o: Any) -> Tensor: return _in_place(self, self % o, "%")
def __ipow__(self: Tensor, o: Any) -> Tensor: return _in_place(self, self ** o, "**")
def __imatmul__(self: Tensor, o: Any) -> Tensor: return _in_place(self, self @ o, "@")
def __iand__(self: Tensor, o: Any) -> Tensor: return _in_place(self, self & o, "&")
def __ior__(self: Tensor, o: Any) -> Tensor: return _in_place(self, self | o, "|")
def __ixor__(self: Tensor, o: Any) -> Tensor: return _in_place(self, self ^ o, "^")
def __ilshift__(self: Tensor, o: Any) -> Tensor: return _in_place(self, self << o, "<<")
def __irshift__(self: Tensor, o: Any) -> Tensor: return _in_place(self, self >> o, ">>")


# --- elementwise functions -------------------------------------------------------------------


def __invert__(self: Tensor) -> Tensor:
    """`~`: not of bools, bitwise not of ints (numpy's invert); floats are a TypeError."""
    if self.dtype.kind not in "iub":
        raise TypeError(f"operator ~ is defined on integer or bool operands, got {self.dtype.name}")
    return checked_tensor(graph.alu(Op.NOT if self.dtype == dtypes.BOOL else Op.INVERT, (self._node,), self.dtype))


def _unary(self: Tensor, op: Op, ufunc: Callable[..., Any]) -> Tensor:
    if self.dtype.kind == "c":   # built from real ops on the parts (array_api._complex)
        return self._complex_unary(op)
    dt = dtypes.ufunc_result(ufunc, self.dtype)
    return checked_tensor(graph.alu(op, (graph.cast(self._node, dt),), dt))


def __neg__(self: Tensor) -> Tensor: return _unary(self, Op.NEG, np.negative)
def __pos__(self: Tensor) -> Tensor: return Tensor(self._node)
def __abs__(self: Tensor) -> Tensor: return self.abs()
def exp(self: Tensor) -> Tensor: return _unary(self, Op.EXP, np.exp)
def log(self: Tensor) -> Tensor: return _unary(self, Op.LOG, np.log)
def sqrt(self: Tensor) -> Tensor: return _unary(self, Op.SQRT, np.sqrt)
def sin(self: Tensor) -> Tensor: return _unary(self, Op.SIN, np.sin)
def cos(self: Tensor) -> Tensor: return _unary(self, Op.COS, np.cos)
def tanh(self: Tensor) -> Tensor: return _unary(self, Op.TANH, np.tanh)
def abs(self: Tensor) -> Tensor: return _unary(self, Op.ABS, np.abs)


def reciprocal(self: Tensor) -> Tensor:
    if self.dtype.kind == "c":
        return _unary(self, Op.RECIP, np.reciprocal)
    dt = dtypes.ufunc_result(np.true_divide, self.dtype, self.dtype)
    return checked_tensor(graph.alu(Op.RECIP, (graph.cast(self._node, dt),), dt))


def _float(self: Tensor) -> Tensor:
    return self if self.dtype.kind == "f" else self.astype(dtypes.ufunc_result(np.exp, self.dtype))


def relu(self: Tensor) -> Tensor:
    """max(x, 0), NaN kept; its gradient at 0 is 0 (torch's and JAX's), where maximum's
    would split it."""
    return where(self <= 0, 0, self)


def sigmoid(self: Tensor) -> Tensor:
    """1 / (1 + exp(-x)), as e / (1 + e) with e = exp(x) for x < 0: exp(-x) overflows
    there, which gave 0 where the result is a (subnormal or small normal) number."""
    x = _float(self)
    # -|x| spelled with the branch's sign, the same value: abs's derivative at 0 is 0, which
    # gave sigmoid'(0) == 0 (not 1/4) to ug.grad
    e = where(x >= 0, -x, x).exp()
    r = (1 + e).reciprocal()
    return where(x >= 0, r, e * r)


def _times_sigmoid(self: Tensor, half_z: Tensor) -> Tensor:
    """self * sigmoid(2 half_z), accurate where it is tiny: with h = exp(-|half_z|) (no
    overflow), self * h * h for z < 0 rounds once into the subnormals, where self * exp(z)
    multiplied an already rounded subnormal (or 0) by self."""
    h = where(half_z >= 0, -half_z, half_z).exp()   # -|half_z|, differentiable at 0 (sigmoid's)
    r = (1 + h * h).reciprocal()
    return where(half_z >= 0, self * r, self * h * h * r)


def gelu(self: Tensor) -> Tensor:
    """GELU, tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
    computed as x sigmoid(2u) (the same function): 1 + tanh(u) cancelled to -0 for x < -5."""
    x = _float(self)
    # the coefficients as the library's constants, folded into the code (a user's scalar
    # would be a kernel argument): 0.5 and 1 fold anyway
    c1, c3 = (graph_scalar(c, x.dtype, x.device) for c in (math.sqrt(2 / math.pi), 0.044715))
    return _times_sigmoid(x, c1 * (x + c3 * x * x * x))


def silu(self: Tensor) -> Tensor:
    """x sigmoid(x), accurate where it is subnormal (see _times_sigmoid)."""
    x = _float(self)
    return _times_sigmoid(x, x * 0.5)


# --- functions of several tensors ------------------------------------------------------------


def as_tensor(x: Any, like: Tensor | None) -> Tensor:
    """x as a tensor: a scalar as a constant of like's dtype where its kind fits (weak, as an
    operand), an array or list on like's device (of the default device without `like`)."""
    if isinstance(x, Tensor):
        return x
    if like is not None:
        if dtypes.is_scalar(x):
            dt = dtypes.scalar_dtype(x, like.dtype)
            return Tensor(graph.const(dtypes.operand(x, dt).item(), dt, like.device))
        return tensor(x, device=like.device)
    return tensor(x)


def maximum(a: Any, b: Any) -> Tensor:
    if not isinstance(a, Tensor):
        return as_tensor(b, None)._binary(Op.MAX, a, True, ufunc=np.maximum)
    return a._binary(Op.MAX, b, ufunc=np.maximum)


def minimum(a: Any, b: Any) -> Tensor:
    if not isinstance(a, Tensor):
        return as_tensor(b, None)._binary(Op.MIN, a, True, ufunc=np.minimum)
    return a._binary(Op.MIN, b, ufunc=np.minimum)


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """a where cond, else b, in their common dtype (numpy 2's): tensors, arrays and numpy scalars
    are typed and promote; a Python scalar is weak, it takes that dtype (exactly; an int it
    cannot hold is an OverflowError, where numpy's where wraps it); of two Python scalars, the
    default dtype of the higher kind (bool, int64, float32)."""
    like = next((t for t in (cond, a, b) if isinstance(t, Tensor)), None)
    if like is None:
        like = tensor(cond)
    c = Tensor(graph.const(bool(cond), dtypes.BOOL, like.device)) if dtypes.is_scalar(cond) else as_tensor(cond, like)
    # a scalar branch stays a value until the dtype is known; an array is a typed tensor
    x, y = (v if dtypes.is_scalar(v) else as_tensor(v, like) for v in (a, b))
    typed = [v.dtype if isinstance(v, Tensor) else dtypes.to_dtype(v.dtype) for v in (x, y) if not dtypes.is_weak(v)]
    dt = dtypes.promote(*typed) if len(typed) == 2 else typed[0] if typed else dtypes.BOOL
    for v in (x, y):
        if dtypes.is_weak(v):
            dt = dtypes.scalar_dtype(v, dt)
    devices = {t.device for t in (c, x, y) if isinstance(t, Tensor)}
    if len(devices) > 1:
        raise ValueError(f"where: tensors are on different devices: {sorted(devices)}")
    branches = []
    for v in (x, y):
        # a scalar: a kernel argument unless it folds (see scalars)
        branches.append(scalars.scalar(v, dt, like.device) if not isinstance(v, Tensor) else graph.cast(v._node, dt))
    shape = broadcast_shape(c.shape, *(n.shape for n in branches))
    srcs = (broadcast_node(graph.cast(c._node, dtypes.BOOL), shape), *(broadcast_node(n, shape) for n in branches))
    return checked_tensor(graph.alu(Op.WHERE, srcs, dt))


def matmul(a: Any, b: Any) -> Tensor:
    """numpy.matmul semantics: 1-D operands are promoted and the added dim removed; batch dims broadcast."""
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    a, b = as_tensor(a, like), as_tensor(b, like)
    if a.device != b.device:
        raise ValueError(f"matmul: tensors are on different devices: {a.device!r} and {b.device!r}")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: operands must have at least one dimension, got shapes {a.shape} and {b.shape}")
    a2 = a.reshape(1, a.shape[0]) if a.ndim == 1 else a
    b2 = b.reshape(b.shape[0], 1) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ValueError(f"matmul: inner dimensions do not match: {a.shape} @ {b.shape} "
                         f"({a2.shape[-1]} != {b2.shape[-2]})")
    batch = broadcast_shape(a2.shape[:-2], b2.shape[:-2])
    dt = dtypes.ufunc_result(np.matmul, a.dtype, b.dtype)
    if dt.kind == "c":   # real matmuls of the parts (4, or 2 where an operand is real)
        part = dtypes.part_dtype(dt)
        (ar, ai), (br, bi) = ((p.astype(part) for p in parts(x)) if x.dtype.kind == "c" else (x.astype(part), None)
                              for x in (a, b))
        if ai is None:
            return combine(matmul(ar, br), matmul(ar, bi))
        if bi is None:
            return combine(matmul(ar, br), matmul(ai, br))
        return combine(matmul(ar, br) - matmul(ai, bi), matmul(ar, bi) + matmul(ai, br))
    an = broadcast_node(a2._node, batch + a2.shape[-2:])
    bn = broadcast_node(b2._node, batch + b2.shape[-2:])
    out = checked_tensor(graph.matmul(an, bn, dt))
    shape = batch + ((a2.shape[-2],) if a.ndim > 1 else ()) + ((b2.shape[-1],) if b.ndim > 1 else ())
    return Tensor(graph.view(out._node, View.contiguous(shape))) if shape != out.shape else out


# --- complex values as pairs of real ones --------------------------------------------------------


def parts(z: Tensor) -> tuple[Tensor, Tensor]:
    """(real part, imaginary part) of `z` as real tensors of its part dtype (complex64: float32).
    Of a real tensor: (z itself, zeros of its dtype). Of a lazy combine(re, im): re and im
    themselves (no REAL / IMAG nodes: chains of complex ops stay as small as their real parts)."""
    if not isinstance(z, Tensor):
        raise TypeError(f"parts: expected a ug Tensor, got {type(z).__name__}")
    if not dtypes.is_complex(z.dtype):
        return z, full(z.shape, 0, z.dtype, z.device)
    node = z.node
    if node.op is Op.COMPLEX and not node.realized:   # the parts a combine() was built from
        return Tensor(node.srcs[0]), Tensor(node.srcs[1])
    part = dtypes.part_dtype(z.dtype)
    return (checked_tensor(graph.alu(Op.REAL, (z.node,), part)), checked_tensor(graph.alu(Op.IMAG, (z.node,), part)))


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
    shape = broadcast_shape(re.shape, im.shape)
    a = broadcast_node(graph.cast(re.node, part), shape)
    b = broadcast_node(graph.cast(im.node, part), shape)
    return checked_tensor(graph.alu(Op.COMPLEX, (a, b), out))
