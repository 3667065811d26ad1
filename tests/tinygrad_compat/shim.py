"""A stand-in for the `tinygrad` package that runs tinygrad's API on ug.

This is the name translation a tinygrad user would write to run their code on ug: tinygrad's
`Tensor` method names and argument conventions (``keepdim``, ``dim``, torch-style flat pad tuples,
``shrink``, ``expand``...) mapped onto `ug_core` functions. It exists to measure ug against
tinygrad's own op tests (``scripts/tinygrad_ops.py``), so it deliberately computes nothing itself:

- every value is computed by ug (no host numpy on values; numpy only turns Python input data into
  arrays, as ``Tensor([1, 2])`` must);
- an op ug lacks raises `MissingOp` naming it, so that test fails and is counted as a missing op.
  Ops that other work adds to ug (``ug.nn``, ``ug.random``, ``ug.gradients``) are looked up when
  called, so the shim picks them up without changes;
- only rewrites of one ug op into another are allowed here (``rsqrt`` is ``1/sqrt``, ``shrink`` is
  a slice, ``gather`` is ``take_along_axis``), the translation any user would do.

`install()` puts this module (and the submodules test_ops imports: ``tinygrad.helpers``,
``tinygrad.tensor``, ``tinygrad.device``, ``tinygrad.dtype``) into ``sys.modules``.
"""
from __future__ import annotations

import contextlib
import math
import os
import sys
import types
import weakref
from typing import Any, Callable, Iterable, Sequence

import numpy as np

import ug_core as ug


class MissingOp(AttributeError):
    """Raised when a tinygrad op has no ug counterpart (yet); its `op` names the tinygrad op."""

    def __init__(self, op: str, detail: str = "") -> None:
        self.op = op
        super().__init__(f"ug has no op for tinygrad's {op}" + (f" ({detail})" if detail else ""))


# ---------------------------------------------------------------------------------------------
# helpers module (getenv, Context and the flags test_ops reads)

def getenv(key: str, default: Any = 0) -> Any:
    """tinygrad.helpers.getenv: the environment variable converted to the default's type (an int
    flag given as a word, as CI systems set CI=true: true/yes/on 1, false/no/off/empty 0)."""
    value = os.getenv(key)
    if value is None:
        return default
    if isinstance(default, int) and not isinstance(default, bool):
        words = {"true": 1, "yes": 1, "on": 1, "false": 0, "no": 0, "off": 0, "": 0}
        if value.strip().lower() in words:
            return words[value.strip().lower()]
    return type(default)(value)


class _Flag(int):
    """A ContextVar-like int flag (``IMAGE``, ``CPU_LLVM``...): compares and reads as an int."""

    @property
    def value(self) -> int:
        return int(self)


@contextlib.contextmanager
def Context(**kwargs: Any) -> Any:  # noqa: N802 - tinygrad's name
    """tinygrad's Context sets compiler flags (NOOPT, DEVECTORIZE...); none applies to ug."""
    yield


DEBUG, IMAGE, CI, CPU_LLVM, AMD_LLVM, EMULATE = (_Flag(getenv(k, 0)) for k in ("DEBUG", "IMAGE", "CI", "CPU_LLVM_", "AMD_LLVM_", "EMULATE_"))


# ---------------------------------------------------------------------------------------------
# dtypes: tinygrad's names for ug's (numpy) dtypes

class dtypes:  # noqa: N801 - tinygrad's name
    bool = np.dtype(np.bool_)
    int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
    uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
    float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
    half, float, double = float16, float32, float64
    char, uchar, short, ushort, int, uint, long, ulong = int8, uint8, int16, uint16, int32, uint32, int64, uint64
    default_float = float32
    default_int = int32

    @staticmethod
    def is_float(dt: Any) -> bool:
        return np.issubdtype(_dtype(dt), np.floating)

    @staticmethod
    def is_int(dt: Any) -> bool:
        return np.issubdtype(_dtype(dt), np.integer)

    @staticmethod
    def max(dt: Any) -> Any:
        dt = _dtype(dt)
        return True if dt == np.bool_ else (np.iinfo(dt).max if np.issubdtype(dt, np.integer) else math.inf)

    @staticmethod
    def min(dt: Any) -> Any:
        dt = _dtype(dt)
        return False if dt == np.bool_ else (np.iinfo(dt).min if np.issubdtype(dt, np.integer) else -math.inf)


def _dtype(dt: Any) -> Any:
    """tinygrad dtype spellings (None, 'int32', Python types, numpy/ug dtypes) -> numpy dtype."""
    if dt is None:
        return None
    if dt is float:
        return dtypes.float32
    if dt is int:
        return dtypes.int32
    if dt is bool:
        return dtypes.bool
    if isinstance(dt, str):
        if dt in ("bfloat16", "fp8e4m3", "fp8e5m2"):
            raise MissingOp(f"dtypes.{dt}")
        return getattr(dtypes, dt)  # tinygrad looks names up in dtypes: an unknown one is an AttributeError
    return np.dtype(dt)


def _to_np_dtype(dt: Any) -> Any:
    return _dtype(dt)


def is_dtype_supported(dt: Any, device: str | None = None) -> bool:
    try:
        ug.zeros((1,), dtype=_dtype(dt))
    except (TypeError, ValueError):
        return False
    return True


class Device:
    """tinygrad's Device registry: test_ops reads ``Device.DEFAULT`` to skip backend quirks."""
    DEFAULT = "CPU"


# ---------------------------------------------------------------------------------------------
# wrapping and lookups

def _ug(x: Any) -> Any:
    """Shim tensors (also inside lists/tuples) -> ug tensors; everything else unchanged."""
    if isinstance(x, Tensor):
        return x._t
    if isinstance(x, (list, tuple)) and any(isinstance(v, (Tensor, list, tuple)) for v in x):
        return type(x)(_ug(v) for v in x)
    return x


def _wrap(x: Any) -> Any:
    """ug tensors (also inside lists/tuples/named tuples) -> shim tensors."""
    if isinstance(x, ug.Tensor):
        return Tensor(x)
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(_wrap(v) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(_wrap(v) for v in x)
    return x


def _lookup(op: str, *names: str) -> Callable[..., Any]:
    """The first of ``names`` ('nn.conv2d', 'erf', 'random.normal'...) that ug has, else MissingOp(op)."""
    for name in names:
        obj: Any = ug
        for part in name.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if callable(obj):
            return obj
    raise MissingOp(op, "looked for " + ", ".join("ug." + n for n in names))


def _call(op: str, names: Sequence[str], *args: Any, **kwargs: Any) -> Any:
    fn = _lookup(op, *names)
    return _wrap(fn(*_ug(list(args)), **{k: _ug(v) for k, v in kwargs.items()}))


def _shape(args: tuple[Any, ...]) -> tuple[int, ...]:
    """tinygrad takes shapes both as ``f(2, 3)`` and ``f((2, 3))``."""
    shape = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)
    for s in shape:
        if not isinstance(s, (int, np.integer)) or s < 0:
            raise ValueError(f"invalid shape {shape}: dimensions must be non-negative ints")
    return tuple(int(s) for s in shape)


def _axis(axis: Any, ndim: int = 1) -> Any:
    """tinygrad axis arguments: lists are tuples; a 0-d tensor takes axis 0 and -1 (as torch does)."""
    axis = tuple(axis) if isinstance(axis, list) else axis
    if ndim == 0 and axis in (0, -1, (0,), (-1,)):
        return ()
    return axis


def _is_float(dt: Any) -> bool:
    return bool(np.issubdtype(dt, np.floating))


_GRAD_LEAVES: "weakref.WeakSet[Tensor]" = weakref.WeakSet()
_PHASE = {"backward": False}  # set when a test starts differentiating, so the harness can tell


# ---------------------------------------------------------------------------------------------
# Tensor

class Tensor:
    """tinygrad's Tensor over a ug tensor (``_t``); every method returns a new shim Tensor."""

    __slots__ = ("_t", "requires_grad", "grad", "__weakref__")
    training = False

    def __init__(self, data: Any, device: Any = None, dtype: Any = None, requires_grad: bool | None = None) -> None:
        dt = _dtype(dtype)
        if isinstance(data, Tensor):
            t = data._t
        elif isinstance(data, ug.Tensor):
            t = data
        else:
            if isinstance(data, np.ndarray):
                arr = data
            else:
                arr = np.array(data)
                # tinygrad's defaults for Python data: floats are float32, ints int32
                if arr.dtype == np.float64:
                    arr = arr.astype(np.float32)
                elif arr.dtype == np.int64:
                    arr = arr.astype(np.int32) if dt is None or not _is_float(dt) else arr
            t = ug.tensor(arr)
        if dt is not None and t.dtype != dt:
            t = ug.astype(t, dt)
        self._t = t
        self.requires_grad = requires_grad
        self.grad: Tensor | None = None
        if requires_grad:
            _GRAD_LEAVES.add(self)

    # --- basics -------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._t.shape)

    @property
    def dtype(self) -> Any:
        return self._t.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def device(self) -> str:
        return Device.DEFAULT

    def numel(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<shim Tensor {self.shape} {self.dtype}>"

    __hash__ = object.__hash__

    def realize(self, *others: Tensor) -> Tensor:
        ug.realize(self._t, *(o._t for o in others))
        return self

    def numpy(self) -> np.ndarray:
        return np.asarray(self._t.numpy())

    def item(self) -> Any:
        return self._t.item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def data(self) -> Any:
        return memoryview(self.numpy())

    def __bool__(self) -> bool:
        return bool(self._t)

    def __float__(self) -> float:
        return float(self._t)

    def __int__(self) -> int:
        return int(self._t)

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))

    def contiguous(self) -> Tensor:
        return self

    def clone(self) -> Tensor:
        return Tensor(ug.astype(self._t, self.dtype, copy=True))

    def detach(self) -> Tensor:
        sg = getattr(ug, "stop_gradient", None)
        return Tensor(sg(self._t)) if sg is not None else Tensor(self._t)

    def to(self, device: Any = None) -> Tensor:
        return self

    def to_(self, device: Any = None) -> Tensor:
        return self

    def cpu(self) -> Tensor:
        return self

    def assign(self, x: Any) -> Tensor:
        self._t.assign(x._t if isinstance(x, Tensor) else x)
        return self

    def replace(self, x: Tensor) -> Tensor:
        self._t = x._t
        return self

    # --- creation -----------------------------------------------------------------------------
    @staticmethod
    def empty(*shape: Any, dtype: Any = None, **kw: Any) -> Tensor:
        return Tensor(ug.empty(_shape(shape), dtype=_dtype(dtype) or dtypes.float32))

    @staticmethod
    def zeros(*shape: Any, dtype: Any = None, **kw: Any) -> Tensor:
        return Tensor(ug.zeros(_shape(shape), dtype=_dtype(dtype) or dtypes.float32), requires_grad=kw.get("requires_grad"))

    @staticmethod
    def ones(*shape: Any, dtype: Any = None, **kw: Any) -> Tensor:
        return Tensor(ug.ones(_shape(shape), dtype=_dtype(dtype) or dtypes.float32), requires_grad=kw.get("requires_grad"))

    @staticmethod
    def full(shape: Any, fill_value: Any, dtype: Any = None, **kw: Any) -> Tensor:
        shape = _shape((shape,) if not isinstance(shape, int) else (shape,))
        if dtype is None:
            dtype = dtypes.bool if isinstance(fill_value, bool) else dtypes.int32 if isinstance(fill_value, int) else dtypes.float32
        return Tensor(ug.full(shape, fill_value, dtype=_dtype(dtype)))

    def full_like(self, fill_value: Any, dtype: Any = None, **kw: Any) -> Tensor:
        return Tensor(ug.full(self.shape, fill_value, dtype=_dtype(dtype) or self.dtype))

    def zeros_like(self, dtype: Any = None, **kw: Any) -> Tensor:
        return self.full_like(0, dtype)

    def ones_like(self, dtype: Any = None, **kw: Any) -> Tensor:
        return self.full_like(1, dtype)

    @staticmethod
    def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None, **kw: Any) -> Tensor:
        if stop is None:
            start, stop = 0, start
        if dtype is None:
            dtype = dtypes.float32 if any(isinstance(v, float) for v in (start, stop, step)) else dtypes.int32
        return Tensor(ug.arange(start, stop, step, dtype=_dtype(dtype)))

    @staticmethod
    def linspace(start: Any, stop: Any, steps: int, dtype: Any = None, **kw: Any) -> Tensor:
        dt = _dtype(dtype) or dtypes.float32
        if dt == np.bool_:
            raise ValueError("linspace with bool dtype is not supported")
        if steps < 0:
            raise ValueError(f"linspace: number of steps must be non-negative, got {steps}")
        if not _is_float(dt):
            # torch's (and tinygrad's) integer linspace rounds toward zero, numpy's (ug's) down
            return Tensor(ug.astype(ug.trunc(ug.linspace(start, stop, steps, dtype=dtypes.float32)), dt))
        return Tensor(ug.linspace(start, stop, steps, dtype=dt))

    @staticmethod
    def eye(n: int, m: int | None = None, dtype: Any = None, **kw: Any) -> Tensor:
        if n < 0 or (m is not None and m < 0):
            raise ValueError(f"eye: negative size ({n}, {m})")
        return Tensor(ug.eye(n, m, dtype=_dtype(dtype) or dtypes.float32))

    # random numbers: ug.random (counter-based keys), with tinygrad's global seed
    _seed: int = 0
    _key_counter: int = 0

    @staticmethod
    def manual_seed(seed: int = 0) -> None:
        Tensor._seed, Tensor._key_counter = seed, 0

    @staticmethod
    def _next_key() -> Any:
        key = _lookup("random key", "random.key", "random.PRNGKey")(Tensor._seed)
        Tensor._key_counter += 1
        fold = getattr(getattr(ug, "random", None), "fold_in", None)
        if fold is not None:
            return fold(key, Tensor._key_counter)
        split = _lookup("random split", "random.split")
        return split(key, Tensor._key_counter + 1)[Tensor._key_counter]

    @staticmethod
    def rand(*shape: Any, dtype: Any = None, **kw: Any) -> Tensor:
        shape = _shape(shape)
        fn = _lookup("rand", "random.uniform")
        return Tensor(fn(Tensor._next_key(), shape, dtype=_dtype(dtype) or dtypes.float32), requires_grad=kw.get("requires_grad"))

    @staticmethod
    def randn(*shape: Any, dtype: Any = None, **kw: Any) -> Tensor:
        shape = _shape(shape)
        fn = _lookup("randn", "random.normal")
        return Tensor(fn(Tensor._next_key(), shape, dtype=_dtype(dtype) or dtypes.float32), requires_grad=kw.get("requires_grad"))

    @staticmethod
    def randint(*shape: Any, low: int = 0, high: int = 10, dtype: Any = None, **kw: Any) -> Tensor:
        shape = _shape(shape)
        fn = _lookup("randint", "random.randint")
        return Tensor(fn(Tensor._next_key(), shape, low, high, dtype=_dtype(dtype) or dtypes.int32))

    @staticmethod
    def normal(*shape: Any, mean: float = 0.0, std: float = 1.0, **kw: Any) -> Tensor:
        return Tensor.randn(*shape, **kw) * std + mean

    @staticmethod
    def uniform(*shape: Any, low: float = 0.0, high: float = 1.0, **kw: Any) -> Tensor:
        return Tensor.rand(*shape, **kw) * (high - low) + low

    @staticmethod
    def scaled_uniform(*shape: Any, **kw: Any) -> Tensor:
        return Tensor.uniform(*shape, low=-1.0, high=1.0, **kw) * (math.prod(_shape(shape)) ** -0.5)

    @staticmethod
    def glorot_uniform(*shape: Any, **kw: Any) -> Tensor:
        s = _shape(shape)
        bound = (6 / (s[0] + math.prod(s[1:]))) ** 0.5
        return Tensor.uniform(*s, low=-bound, high=bound, **kw)

    @staticmethod
    def kaiming_uniform(*shape: Any, a: float = 0.01, **kw: Any) -> Tensor:
        s = _shape(shape)
        bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(math.prod(s[1:]))
        return Tensor.uniform(*s, low=-bound, high=bound, **kw)

    @staticmethod
    def kaiming_normal(*shape: Any, a: float = 0.01, **kw: Any) -> Tensor:
        s = _shape(shape)
        std = math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(math.prod(s[1:]))
        return Tensor.normal(*s, mean=0.0, std=std, **kw)

    def dropout(self, p: float = 0.5) -> Tensor:
        if not Tensor.training or p == 0:
            return self
        return _call("dropout", ["nn.dropout"], Tensor._next_key(), self, p)

    # --- autodiff -----------------------------------------------------------------------------
    def gradient(self, *targets: Tensor, gradient: Tensor | None = None) -> list[Tensor]:
        """tinygrad's Tensor.gradient: d(self)/d(targets), through ug.gradients."""
        _PHASE["backward"] = True
        fn = _lookup("gradient", "gradients")
        cot = None if gradient is None else gradient._t
        # tinygrad gives zeros for a target the output does not depend on
        return [Tensor(g) for g in fn(self._t, [t._t for t in targets], cot, allow_unused=True)]

    def backward(self, gradient: Tensor | None = None) -> Tensor:
        """tinygrad's backward: fills ``.grad`` of every live tensor created with requires_grad."""
        _PHASE["backward"] = True
        leaves = [t for t in list(_GRAD_LEAVES) if t is not self]
        if gradient is None and self.shape != ():
            raise RuntimeError("backward can only be called for scalar tensors without a gradient")
        grads = self.gradient(*leaves, gradient=gradient)
        for leaf, g in zip(leaves, grads):
            leaf.grad = g if leaf.grad is None else leaf.grad + g
        return self

    # --- casts --------------------------------------------------------------------------------
    def cast(self, dtype: Any) -> Tensor:
        return Tensor(ug.astype(self._t, _dtype(dtype)))

    def float(self) -> Tensor:
        return self.cast(dtypes.float32)

    def half(self) -> Tensor:
        return self.cast(dtypes.float16)

    def int(self) -> Tensor:
        return self.cast(dtypes.int32)

    def long(self) -> Tensor:
        return self.cast(dtypes.int64)

    def bool(self) -> Tensor:
        return self.cast(dtypes.bool)

    def double(self) -> Tensor:
        return self.cast(dtypes.float64)

    def bitcast(self, dtype: Any) -> Tensor:
        return _call("bitcast", ["bitcast", "view_as"], self, _dtype(dtype))

    # --- binary ops with tinygrad's promotion ---------------------------------------------------
    def _pair(self, other: Any, reverse: bool = False) -> tuple[Any, Any]:
        a = self._t
        if isinstance(other, Tensor):
            b = other._t
            fa, fb = _is_float(a.dtype), _is_float(b.dtype)
            # tinygrad: int (op) float takes the float's dtype, not numpy's wider one
            if fa and not fb:
                b = ug.astype(b, a.dtype)
            elif fb and not fa:
                a = ug.astype(a, b.dtype)
            elif a.dtype == np.bool_ and b.dtype != np.bool_:
                a = ug.astype(a, b.dtype)
            elif b.dtype == np.bool_ and a.dtype != np.bool_:
                b = ug.astype(b, a.dtype)
        else:
            b = other
            if isinstance(b, float) and not _is_float(a.dtype):
                a = ug.astype(a, dtypes.float32)
            elif isinstance(b, int) and not isinstance(b, bool) and a.dtype == np.bool_:
                a = ug.astype(a, dtypes.int32)
            elif isinstance(b, (ug.Tensor,)):
                pass
        return (b, a) if reverse else (a, b)

    def _bin(self, fn: Callable[[Any, Any], Any], other: Any, reverse: bool = False) -> Tensor:
        a, b = self._pair(other, reverse)
        return Tensor(fn(a, b))

    def __add__(self, o: Any) -> Tensor: return self._bin(ug.add, o)
    def __radd__(self, o: Any) -> Tensor: return self._bin(ug.add, o, True)
    def __sub__(self, o: Any) -> Tensor: return self._bin(ug.subtract, o)
    def __rsub__(self, o: Any) -> Tensor: return self._bin(ug.subtract, o, True)
    def __mul__(self, o: Any) -> Tensor: return self._bin(ug.multiply, o)
    def __rmul__(self, o: Any) -> Tensor: return self._bin(ug.multiply, o, True)
    def __pow__(self, o: Any) -> Tensor: return self._bin(ug.pow, o)
    def __rpow__(self, o: Any) -> Tensor: return self._bin(ug.pow, o, True)
    def __matmul__(self, o: Any) -> Tensor: return self._bin(ug.matmul, o)
    def __rmatmul__(self, o: Any) -> Tensor: return self._bin(ug.matmul, o, True)
    def __and__(self, o: Any) -> Tensor: return self._bin(ug.bitwise_and, o)
    def __rand__(self, o: Any) -> Tensor: return self._bin(ug.bitwise_and, o, True)
    def __or__(self, o: Any) -> Tensor: return self._bin(ug.bitwise_or, o)
    def __ror__(self, o: Any) -> Tensor: return self._bin(ug.bitwise_or, o, True)
    def __xor__(self, o: Any) -> Tensor: return self._bin(ug.bitwise_xor, o)
    def __rxor__(self, o: Any) -> Tensor: return self._bin(ug.bitwise_xor, o, True)
    def __lshift__(self, o: Any) -> Tensor: return self._bin(ug.bitwise_left_shift, o)
    def __rshift__(self, o: Any) -> Tensor: return self._bin(ug.bitwise_right_shift, o)
    def __lt__(self, o: Any) -> Tensor: return self._bin(ug.less, o)
    def __le__(self, o: Any) -> Tensor: return self._bin(ug.less_equal, o)
    def __gt__(self, o: Any) -> Tensor: return self._bin(ug.greater, o)
    def __ge__(self, o: Any) -> Tensor: return self._bin(ug.greater_equal, o)
    def __eq__(self, o: Any) -> Tensor: return self._bin(ug.equal, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Tensor: return self._bin(ug.not_equal, o)  # type: ignore[override]
    def __neg__(self) -> Tensor: return Tensor(ug.negative(self._t)) if self.dtype != np.bool_ else self.logical_not()
    def __abs__(self) -> Tensor: return self.abs()
    def __invert__(self) -> Tensor: return self.bitwise_not()

    def __truediv__(self, o: Any) -> Tensor:
        a, b = self._pair(o)
        # tinygrad divides ints in the default float
        if not _is_float(a.dtype) and (not isinstance(b, ug.Tensor) or not _is_float(b.dtype)):
            a = ug.astype(a, dtypes.float32)
            b = ug.astype(b, dtypes.float32) if isinstance(b, ug.Tensor) else b
        return Tensor(ug.divide(a, b))

    def __rtruediv__(self, o: Any) -> Tensor:
        a = self._t if _is_float(self.dtype) else ug.astype(self._t, dtypes.float32)
        return Tensor(ug.divide(o, a))

    def __floordiv__(self, o: Any) -> Tensor: return self._bin(ug.floor_divide, o)
    def __rfloordiv__(self, o: Any) -> Tensor: return self._bin(ug.floor_divide, o, True)
    def __mod__(self, o: Any) -> Tensor: return self._bin(ug.remainder, o)
    def __rmod__(self, o: Any) -> Tensor: return self._bin(ug.remainder, o, True)

    def add(self, o: Any) -> Tensor: return self + o
    def sub(self, o: Any) -> Tensor: return self - o
    def mul(self, o: Any) -> Tensor: return self * o
    def pow(self, o: Any) -> Tensor: return self ** o
    def mod(self, o: Any) -> Tensor: return self % o
    def lshift(self, o: Any) -> Tensor: return self << o
    def rshift(self, o: Any) -> Tensor: return self >> o
    def bitwise_and(self, o: Any) -> Tensor: return self & o
    def bitwise_or(self, o: Any) -> Tensor: return self | o
    def bitwise_xor(self, o: Any) -> Tensor: return self ^ o
    def maximum(self, o: Any) -> Tensor: return self._bin(ug.maximum, o)
    def minimum(self, o: Any) -> Tensor: return self._bin(ug.minimum, o)
    def copysign(self, o: Any) -> Tensor: return self._bin(ug.copysign, o)
    def logaddexp(self, o: Any) -> Tensor: return self._bin(ug.logaddexp, o)
    def matmul(self, o: Any, **kw: Any) -> Tensor: return self @ o
    def dot(self, o: Any, **kw: Any) -> Tensor: return self @ o

    def div(self, o: Any, rounding_mode: str | None = None) -> Tensor:
        if rounding_mode is None:
            return self / o
        if rounding_mode == "floor":
            return (self / o).floor().cast(self._pair(o)[0].dtype) if not _is_float(self._pair(o)[0].dtype) else (self / o).floor()
        if rounding_mode == "trunc":
            return self.idiv(o) if not _is_float(self._pair(o)[0].dtype) else (self / o).trunc()
        raise RuntimeError(f"div: rounding_mode must be None, 'trunc' or 'floor', not {rounding_mode!r}")

    def idiv(self, o: Any) -> Tensor:
        """Integer division rounding toward zero (tinygrad's idiv, C's /)."""
        a, b = self._pair(o)
        q = ug.floor_divide(a, b)
        # floor and trunc differ by one where the remainder is nonzero and the signs differ
        r = ug.remainder(a, b)
        fix = ug.logical_and(ug.not_equal(r, 0), ug.not_equal(ug.less(a, 0), ug.less(b, 0) if isinstance(b, ug.Tensor) else b < 0))
        return Tensor(ug.where(fix, q + 1, q))

    def where(self, x: Any, y: Any) -> Tensor:
        xt, yt = _ug(x), _ug(y)
        if not isinstance(xt, ug.Tensor) and not isinstance(yt, ug.Tensor):
            # two Python scalars: tinygrad's default dtypes (int32, float32), not numpy's 64-bit ones
            xt = Tensor(xt)._t if not isinstance(yt, float) or isinstance(xt, float) else Tensor(float(xt))._t
        if isinstance(xt, ug.Tensor) and isinstance(yt, ug.Tensor) and xt.dtype != yt.dtype:
            xt, yt = Tensor(xt)._pair(Tensor(yt))
        return Tensor(ug.where(self._t, xt, yt))

    def masked_fill(self, mask: Tensor, value: Any) -> Tensor:
        return mask.where(value, self)

    def lerp(self, end: Tensor, weight: Any) -> Tensor:
        return _call("lerp", ["nn.lerp", "lerp"], self, end, weight)

    # --- unary --------------------------------------------------------------------------------
    def _un(self, fn: Callable[[Any], Any], float_only: bool = True) -> Tensor:
        t = self._t if not float_only or _is_float(self.dtype) else ug.astype(self._t, dtypes.float32)
        return Tensor(fn(t))

    def neg(self) -> Tensor: return -self
    def abs(self) -> Tensor: return self._un(ug.abs, False)
    def exp(self) -> Tensor: return self._un(ug.exp)
    def exp2(self) -> Tensor: return self._un(lambda t: ug.pow(2.0, t))
    def log(self) -> Tensor: return self._un(ug.log)
    def log2(self) -> Tensor: return self._un(ug.log2)
    def sqrt(self) -> Tensor: return self._un(ug.sqrt)
    def rsqrt(self) -> Tensor: return self._un(lambda t: ug.reciprocal(ug.sqrt(t)))
    def reciprocal(self) -> Tensor: return self._un(ug.reciprocal)
    def square(self) -> Tensor: return self._un(ug.square, False)
    def sin(self) -> Tensor: return self._un(ug.sin)
    def cos(self) -> Tensor: return self._un(ug.cos)
    def tan(self) -> Tensor: return self._un(ug.tan)
    def asin(self) -> Tensor: return self._un(ug.asin)
    def acos(self) -> Tensor: return self._un(ug.acos)
    def atan(self) -> Tensor: return self._un(ug.atan)
    def sinh(self) -> Tensor: return self._un(ug.sinh)
    def cosh(self) -> Tensor: return self._un(ug.cosh)
    def tanh(self) -> Tensor: return self._un(ug.tanh)
    def asinh(self) -> Tensor: return self._un(ug.asinh)
    def acosh(self) -> Tensor: return self._un(ug.acosh)
    def atanh(self) -> Tensor: return self._un(ug.atanh)
    def floor(self) -> Tensor: return self._un(ug.floor, False)
    def ceil(self) -> Tensor: return self._un(ug.ceil, False)
    def trunc(self) -> Tensor: return self._un(ug.trunc, False)
    def round(self) -> Tensor: return self._un(ug.round, False)
    def sign(self) -> Tensor: return self._un(ug.sign, False)
    def isnan(self) -> Tensor: return self._un(ug.isnan, False)
    def isfinite(self) -> Tensor: return self._un(ug.isfinite, False)
    def logical_not(self) -> Tensor: return self._un(ug.logical_not, False)
    def bitwise_not(self) -> Tensor: return self._un(ug.bitwise_invert, False)
    def sigmoid(self) -> Tensor: return self._un(lambda t: t.sigmoid())
    def relu(self) -> Tensor: return self._un(lambda t: t.relu(), False)
    def silu(self) -> Tensor: return self._un(lambda t: t.silu())
    swish = silu
    def gelu(self) -> Tensor: return self._un(lambda t: t.gelu())
    def relu6(self) -> Tensor: return self._nn("relu6")

    def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
        t = self._t
        if detect_positive and detect_negative:
            return Tensor(ug.isinf(t))
        if detect_positive:
            return Tensor(ug.equal(t, math.inf))
        if detect_negative:
            return Tensor(ug.equal(t, -math.inf))
        return Tensor(ug.zeros(self.shape, dtype=np.bool_))

    def clip(self, min_: Any = None, max_: Any = None) -> Tensor:
        if min_ is None and max_ is None:
            raise RuntimeError("clip: at least one of min_ and max_ must be given")
        lo, hi = _ug(min_), _ug(max_)
        return Tensor(ug.clip(self._t, lo, hi))

    clamp = clip

    # activations, losses and the other nn functions: ug.nn when it has them
    def _nn(self, op: str, *args: Any, names: Sequence[str] = (), **kw: Any) -> Tensor:
        return _call(op, list(names) or [f"nn.{op}", op], self, *args, **kw)

    def erf(self) -> Tensor: return self._nn("erf")
    def elu(self, alpha: float = 1.0) -> Tensor: return self._nn("elu", alpha=alpha)
    def celu(self, alpha: float = 1.0) -> Tensor: return self._nn("celu", alpha=alpha)
    def selu(self) -> Tensor: return self._nn("selu")
    def softplus(self, beta: float = 1.0) -> Tensor: return self._nn("softplus", beta=beta)
    def softsign(self) -> Tensor: return self._nn("softsign")
    def mish(self) -> Tensor: return self._nn("mish")
    def hardsigmoid(self, alpha: float = 1 / 6, beta: float = 0.5) -> Tensor: return self._nn("hardsigmoid")
    def hardswish(self) -> Tensor: return self._nn("hardswish")
    def hardtanh(self, min_val: float = -1, max_val: float = 1) -> Tensor:
        return self._nn("hardtanh", min_val=min_val, max_val=max_val)
    def leaky_relu(self, neg_slope: float = 0.01) -> Tensor: return self._nn("leaky_relu", negative_slope=neg_slope)
    def logsigmoid(self) -> Tensor: return self._nn("logsigmoid")
    def quick_gelu(self) -> Tensor: return self * (self * 1.702).sigmoid()

    # --- reductions ---------------------------------------------------------------------------
    def sum(self, axis: Any = None, keepdim: bool = False, dtype: Any = None, **kw: Any) -> Tensor:
        dt = _dtype(dtype)
        if dt is None and not _is_float(self.dtype):
            # tinygrad sums bools and small ints in int32/uint32, keeps wider ints
            dt = self.dtype if self.dtype.itemsize >= 4 and self.dtype != np.bool_ else (
                dtypes.uint32 if np.issubdtype(self.dtype, np.unsignedinteger) else dtypes.int32)
        return Tensor(ug.sum(self._t, axis=_axis(axis, self.ndim), keepdims=keepdim, dtype=dt))

    def prod(self, axis: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        dt = _dtype(dtype) or (None if _is_float(self.dtype) else self.dtype if self.dtype.itemsize >= 4 and self.dtype != np.bool_ else dtypes.int32)
        return Tensor(ug.prod(self._t, axis=_axis(axis, self.ndim), keepdims=keepdim, dtype=dt))

    def max(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        return Tensor(ug.max(self._t, axis=_axis(axis, self.ndim), keepdims=keepdim))

    def min(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        return Tensor(ug.min(self._t, axis=_axis(axis, self.ndim), keepdims=keepdim))

    def any(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        return Tensor(ug.any(self._t, axis=_axis(axis, self.ndim), keepdims=keepdim))

    def all(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        return Tensor(ug.all(self._t, axis=_axis(axis, self.ndim), keepdims=keepdim))

    def _floated(self) -> Any:
        return self._t if _is_float(self.dtype) else ug.astype(self._t, dtypes.float32)

    def mean(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        return Tensor(ug.mean(self._floated(), axis=_axis(axis, self.ndim), keepdims=keepdim))

    def var(self, axis: Any = None, keepdim: bool = False, correction: float = 1) -> Tensor:
        return Tensor(ug.var(self._floated(), axis=_axis(axis, self.ndim), keepdims=keepdim, correction=correction))

    def std(self, axis: Any = None, keepdim: bool = False, correction: float = 1) -> Tensor:
        return Tensor(ug.std(self._floated(), axis=_axis(axis, self.ndim), keepdims=keepdim, correction=correction))

    def var_mean(self, axis: Any = None, keepdim: bool = False, correction: float = 1) -> tuple[Tensor, Tensor]:
        return self.var(axis, keepdim, correction), self.mean(axis, keepdim)

    def std_mean(self, axis: Any = None, keepdim: bool = False, correction: float = 1) -> tuple[Tensor, Tensor]:
        return self.std(axis, keepdim, correction), self.mean(axis, keepdim)

    def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        return Tensor(ug.argmax(self._t, axis=axis, keepdims=keepdim)).cast(dtypes.int32)

    def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        return Tensor(ug.argmin(self._t, axis=axis, keepdims=keepdim)).cast(dtypes.int32)

    def softmax(self, axis: int = -1, dtype: Any = None) -> Tensor:
        x = Tensor(self._floated() if dtype is None else ug.astype(self._t, _dtype(dtype)))
        return x._scalar_as_1d(lambda t: t.softmax(axis=axis if self.ndim else 0), axis)

    def log_softmax(self, axis: int = -1, dtype: Any = None) -> Tensor:
        x = Tensor(self._floated() if dtype is None else ug.astype(self._t, _dtype(dtype)))
        return x._scalar_as_1d(lambda t: t.log_softmax(axis=axis if self.ndim else 0), axis)

    def logsumexp(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        return self._nn("logsumexp", axis=_axis(axis, self.ndim), keepdims=keepdim)

    def logcumsumexp(self, axis: int = 0) -> Tensor:
        return self._nn("logcumsumexp", axis=axis)

    def _scalar_as_1d(self, fn: Callable[[Any], Any], axis: int = 0) -> Tensor:
        """torch and tinygrad scan/normalize a 0-d tensor as one element and keep it 0-d."""
        if self.ndim:
            return Tensor(fn(self._t))
        if axis not in (0, -1):
            raise IndexError(f"axis {axis} out of range for a 0-d tensor")
        return Tensor(ug.reshape(fn(ug.reshape(self._t, (1,))), ()))

    def cumsum(self, axis: int = 0) -> Tensor:
        return self._scalar_as_1d(lambda t: ug.cumulative_sum(t, axis=axis if self.ndim else 0), axis)

    def cumprod(self, axis: int = 0) -> Tensor:
        return self._scalar_as_1d(lambda t: ug.cumulative_prod(t, axis=axis if self.ndim else 0), axis)

    def cummax(self, axis: int = 0) -> Any:
        # tinygrad's cummax is the values (torch.cummax(...).values)
        return self._nn("cummax", axis)[0]

    def cummin(self, axis: int = 0) -> Any:
        return self._nn("cummin", axis)[0]

    def isclose(self, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
        return self._nn("isclose", other, rtol=rtol, atol=atol, equal_nan=equal_nan)

    # --- movement -----------------------------------------------------------------------------
    def reshape(self, *shape: Any) -> Tensor:
        s = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        s = tuple(self.shape[i] if d is None else d for i, d in enumerate(s))
        return Tensor(ug.reshape(self._t, s))

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        if self.ndim == 0:
            return self.reshape(1)
        s, e = start_dim % self.ndim, end_dim % self.ndim
        return self.reshape(self.shape[:s] + (math.prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

    def unflatten(self, dim: int, sizes: tuple[int, ...]) -> Tensor:
        dim = dim % self.ndim
        return self.reshape(self.shape[:dim] + tuple(sizes) + self.shape[dim + 1:])

    def squeeze(self, dim: int | None = None) -> Tensor:
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        if self.ndim == 0:
            if dim not in (0, -1):
                raise IndexError(f"squeeze: dim {dim} out of range for a 0-d tensor")
            return self
        return self if self.shape[dim] != 1 else Tensor(ug.squeeze(self._t, dim))

    def unsqueeze(self, dim: int) -> Tensor:
        return Tensor(ug.expand_dims(self._t, axis=dim % (self.ndim + 1)))

    def expand(self, *shape: Any) -> Tensor:
        s = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        full = (1,) * (len(s) - self.ndim) + self.shape
        return Tensor(ug.broadcast_to(self._t, tuple(f if d == -1 else d for f, d in zip(full, s))))

    def permute(self, *order: Any) -> Tensor:
        o = tuple(order[0]) if len(order) == 1 and isinstance(order[0], (tuple, list)) else order
        return Tensor(ug.permute_dims(self._t, o))

    def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
        order = list(range(self.ndim))
        order[dim0], order[dim1] = order[dim1], order[dim0]
        return self.permute(order)

    @property
    def T(self) -> Tensor:  # noqa: N802
        return self.transpose()

    def flip(self, axis: Any) -> Tensor:
        return Tensor(ug.flip(self._t, axis=tuple(axis) if isinstance(axis, (list, tuple)) else axis))

    def shrink(self, arg: Sequence[tuple[int, int] | None]) -> Tensor:
        return self[tuple(slice(None) if a is None else slice(a[0], a[1]) for a in arg)]

    def pad(self, padding: Any, mode: str = "constant", value: float = 0.0) -> Tensor:
        """tinygrad pad: per-dim (before, after) pairs, or torch's flat tuple from the last dim;
        negative amounts crop."""
        if all(isinstance(p, int) for p in padding):
            flat = list(padding)
            if len(flat) % 2 or len(flat) // 2 > self.ndim:
                raise ValueError(f"padding {padding} does not fit shape {self.shape}")
            pairs = [(0, 0)] * (self.ndim - len(flat) // 2) + [(flat[i], flat[i + 1]) for i in range(len(flat) - 2, -1, -2)]
        else:
            pairs = [(0, 0) if p is None else tuple(p) for p in padding]
        if len(pairs) != self.ndim:
            raise ValueError(f"padding {padding} does not fit shape {self.shape}")
        np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}.get(mode)
        if np_mode is None:
            raise NotImplementedError(f"pad mode {mode!r}")
        if mode == "circular":
            # torch's circular padding wraps once at most (numpy's wrap, any number of times);
            # tinygrad's takes no negative amounts
            if any(b < 0 or a < 0 for b, a in pairs):
                raise NotImplementedError("circular padding with negative amounts")
            if any(b > n or a > n for (b, a), n in zip(pairs, self.shape)):
                raise ValueError(f"circular padding {padding} wraps around more than once for shape {self.shape}")
        # torch (and tinygrad) pad the input first, then crop by the negative amounts
        pw = tuple((max(0, b), max(0, a)) for b, a in pairs)
        if np_mode == "constant":
            x = Tensor(ug.pad(self._t, pw, mode="constant", constant_value=value))
        elif np_mode == "wrap" and "wrap" not in str(ug.pad.__doc__):
            raise MissingOp("pad(mode='circular')", "ug.pad has no 'wrap' mode")
        else:
            x = Tensor(ug.pad(self._t, pw, mode=np_mode))
        return x.shrink([(max(0, -b), s - max(0, -a)) for (b, a), s in zip(pairs, x.shape)])

    def pad2d(self, padding: Sequence[int], value: float = 0.0) -> Tensor:
        return self.pad(padding, value=value)

    @staticmethod
    def _index(idx: Any) -> Any:
        """tinygrad index -> ug index: shim tensors unwrapped, lists of ints made int32 tensors."""
        if isinstance(idx, Tensor):
            return idx._t
        if isinstance(idx, (list, tuple)):
            arr = np.array(idx)
            # ints become tinygrad's int32; floats or bools stay so that ug rejects or masks them
            return ug.tensor(arr.astype(np.int32) if arr.dtype == np.int64 else arr)
        return idx

    def __getitem__(self, idx: Any) -> Tensor:
        # a top-level list is one index; inside the tuple, lists and tuples are index tensors
        items = tuple(self._index(i) for i in (idx if isinstance(idx, tuple) else (idx,)))
        has_int = any(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in items)
        has_arr = any(isinstance(i, ug.Tensor) for i in items)
        if has_int and has_arr:
            # torch and tinygrad select with ints first (basic indexing), numpy counts an int among
            # the advanced indices; select the ints, then index the rest
            first = tuple(slice(None) if isinstance(i, ug.Tensor) else i for i in items)
            rest = tuple(i if isinstance(i, ug.Tensor) or i is Ellipsis else slice(None)
                         for i in items if not (isinstance(i, (int, np.integer)) and not isinstance(i, bool)))
            return Tensor(self._t[first][rest])
        return Tensor(self._t[items if isinstance(idx, tuple) else items[0]])

    def __setitem__(self, idx: Any, v: Any) -> None:
        items = tuple(self._index(i) for i in idx) if isinstance(idx, tuple) else self._index(idx)
        self._t[items] = _ug(v)

    def repeat(self, repeats: Any, *more: int) -> Tensor:
        reps = tuple(repeats) if isinstance(repeats, (tuple, list)) else (repeats, *more)
        return Tensor(ug.tile(self._t, reps))

    def repeat_interleave(self, repeats: int, dim: int | None = None) -> Tensor:
        return Tensor(ug.repeat(self._t, repeats, axis=dim))

    def cat(self, *others: Tensor, dim: int = 0) -> Tensor:
        ts = [*self, *others] if isinstance(self, (tuple, list)) else [self, *others]
        dt = ts[0]
        for t in ts[1:]:
            dt = Tensor(dt._pair(t)[0])
        return Tensor(ug.concat([ug.astype(t._t, dt.dtype) for t in ts], axis=dim))

    def stack(self, *others: Tensor, dim: int = 0) -> Tensor:
        # Tensor.stack(t0, t1, dim=) and Tensor.stack((t0, t1), dim=) both call this unbound
        ts = [*self, *others] if isinstance(self, (tuple, list)) else [self, *others]
        if not all(isinstance(t, Tensor) for t in ts):
            raise ValueError("stack takes tensors")
        return Tensor(ug.stack([t._t for t in ts], axis=dim))

    def split(self, sizes: Any, dim: int = 0) -> list[Tensor]:
        # torch.split's meaning (sizes, not numpy's split points): ug.nn.split
        return list(self._nn("split", sizes, dim, names=["nn.split"]))

    def chunk(self, chunks: int, dim: int = 0) -> list[Tensor]:
        return self.split(math.ceil(self.shape[dim] / chunks), dim)

    def unfold(self, dim: int, size: int, step: int) -> Tensor:
        # torch's Tensor.unfold: numpy's sliding windows along dim (appended last), every step-th
        if step <= 0:
            raise ValueError(f"unfold: step must be positive, got {step}")
        windows = _call("unfold", ["sliding_window_view", "lib.stride_tricks.sliding_window_view"], self, size, axis=dim)
        return windows[(slice(None),) * (dim % max(self.ndim, 1)) + (slice(None, None, step),)]

    def meshgrid(self, *others: Tensor, indexing: str = "ij") -> list[Tensor]:
        if indexing not in ("ij", "xy"):
            raise RuntimeError(f"indexing must be 'ij' or 'xy', not {indexing!r}")
        # torch and tinygrad take 0-d tensors as one-element axes
        ts = [ug.reshape(t._t, (1,)) if t.ndim == 0 else t._t for t in (self, *others)]
        return [Tensor(t) for t in ug.meshgrid(*ts, indexing=indexing)]

    def roll(self, shifts: Any, dims: Any = None) -> Tensor:
        n_shifts = len(shifts) if isinstance(shifts, (tuple, list)) else 1
        n_dims = 1 if dims is None or isinstance(dims, int) else len(dims)
        if n_shifts != n_dims:
            raise RuntimeError(f"roll: {n_shifts} shifts for {n_dims} dims")
        if dims is None and isinstance(shifts, (tuple, list)):
            shifts = shifts[0]
        return Tensor(ug.roll(self._t, shifts, axis=dims))

    def tril(self, diagonal: int = 0) -> Tensor:
        return Tensor(ug.tril(self._t, k=diagonal))

    def triu(self, diagonal: int = 0) -> Tensor:
        return Tensor(ug.triu(self._t, k=diagonal))

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        x = self.permute([d for d in range(self.ndim) if d not in (dim1 % self.ndim, dim2 % self.ndim)] + [dim1, dim2])
        return Tensor(ug.linalg.diagonal(x._t, offset=offset))

    def diag(self) -> Tensor:
        if self.ndim != 1:
            raise ValueError(f"diag expects a 1-D tensor, got shape {self.shape}")
        n = self.shape[0]
        return Tensor(ug.where(ug.eye(n, dtype=np.bool_), self._t, ug.zeros((), dtype=self.dtype)))

    # --- indexing ops ---------------------------------------------------------------------------
    def gather(self, dim: int, index: Tensor) -> Tensor:
        dim = dim % self.ndim
        if index.ndim != self.ndim:
            raise RuntimeError(f"gather: index has {index.ndim} dims, input {self.ndim}")
        # torch's gather reads only the index's extent in the other dims
        x = self.shrink([None if d == dim else (0, index.shape[d]) for d in range(self.ndim)])
        if any(i > s for d, (i, s) in enumerate(zip(index.shape, self.shape)) if d != dim):
            raise RuntimeError(f"gather: index shape {index.shape} exceeds input shape {self.shape} outside dim {dim}")
        return Tensor(ug.take_along_axis(x._t, index._t, axis=dim))

    def scatter(self, dim: int, index: Tensor, src: Any, reduce: str | None = None) -> Tensor:
        # tinygrad takes `reduce` with a scalar src only (a tensor's is scatter_reduce)
        if reduce is not None and isinstance(src, Tensor):
            raise TypeError("scatter: reduce needs a scalar src; use scatter_reduce for a tensor src")
        return _call("scatter", ["scatter"], self, dim, index, src, reduce=reduce)

    def scatter_reduce(self, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool = True) -> Tensor:
        return _call("scatter_reduce", ["scatter_reduce"], self, dim, index, src, reduce, include_self=include_self)

    def masked_select(self, mask: Tensor) -> Tensor:
        # torch broadcasts the mask (a 0-d True selects everything)
        x, m = ug.broadcast_arrays(self._t, mask._t)
        return Tensor(x[m])

    def sort(self, dim: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
        idx = ug.argsort(self._t, axis=dim, descending=descending, stable=True)
        return Tensor(ug.take_along_axis(self._t, idx, axis=dim)), Tensor(ug.astype(idx, dtypes.int32))

    def argsort(self, dim: int = -1, descending: bool = False) -> Tensor:
        return Tensor(ug.astype(ug.argsort(self._t, axis=dim, descending=descending, stable=True), dtypes.int32))

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True) -> tuple[Tensor, Tensor]:
        v, i = ug.topk(self._t, k, axis=dim, largest=largest)
        return Tensor(v), Tensor(ug.astype(i, dtypes.int32))

    def one_hot(self, num_classes: int = -1) -> Tensor:
        # tinygrad's one-hot has the input's dtype (torch's is int64)
        return self._nn("one_hot", num_classes).cast(self.dtype)

    # --- nn -----------------------------------------------------------------------------------
    def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        x = self @ weight
        return x if bias is None else x + bias

    def conv2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: Any = 1,
               dilation: Any = 1, padding: Any = 0, **kw: Any) -> Tensor:
        nd = weight.ndim - 2
        x, padding = self._presided(padding, nd, 0.0)
        return _call(f"conv{nd}d", [f"nn.conv{nd}d", "nn.conv"], x, weight, bias, stride=stride,
                     padding=padding, dilation=dilation, groups=groups)

    def conv_transpose2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: Any = 1,
                         dilation: Any = 1, padding: Any = 0, output_padding: Any = 0) -> Tensor:
        nd = weight.ndim - 2
        return _call(f"conv_transpose{nd}d", [f"nn.conv_transpose{nd}d", "nn.conv_transpose"], self, weight, bias,
                     stride=stride, padding=padding, output_padding=output_padding, groups=groups, dilation=dilation)

    def _presided(self, padding: Any, nd: int, value: float) -> tuple[Tensor, Any]:
        """tinygrad's conv/pool padding may be per side (torch's flat pad order, last dim first) or
        negative (a crop); torch's functions pad symmetrically: pad here, then call them with 0."""
        if isinstance(padding, (tuple, list)) and len(padding) == 2 * nd:
            return self.pad(tuple(padding), value=value), 0
        sym = [padding] * nd if isinstance(padding, int) else list(padding)
        if any(p < 0 for p in sym):
            return self.pad(tuple(p for p in reversed(sym) for _ in range(2)), value=value), 0
        return self, padding

    def max_pool2d(self, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1, padding: Any = 0,
                   ceil_mode: bool = False, return_indices: bool = False) -> Any:
        nd = len(kernel_size) if isinstance(kernel_size, (tuple, list)) else 2
        x, padding = self._presided(padding, nd, -math.inf) if not return_indices else (self, padding)
        out = _call(f"max_pool{nd}d", [f"nn.max_pool{nd}d", "nn.max_pool"], x, kernel_size, stride=stride,
                    padding=padding, dilation=dilation, ceil_mode=ceil_mode, return_indices=return_indices)
        # tinygrad's indices are its default int
        return (out[0], out[1].cast(dtypes.int32)) if return_indices else out

    def avg_pool2d(self, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1, padding: Any = 0,
                   ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
        nd = len(kernel_size) if isinstance(kernel_size, (tuple, list)) else 2
        kw: dict[str, Any] = dict(stride=stride, padding=padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad)
        if dilation != 1:
            kw["dilation"] = dilation
        return _call(f"avg_pool{nd}d", [f"nn.avg_pool{nd}d", "nn.avg_pool"], self, kernel_size, **kw)

    def max_unpool2d(self, indices: Tensor, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1,
                     padding: Any = 0, output_size: Any = None) -> Tensor:
        return _call("max_unpool2d", ["nn.max_unpool2d"], self, indices, kernel_size, stride=stride, padding=padding,
                     output_size=output_size)

    def interpolate(self, size: tuple[int, ...], mode: str = "linear", align_corners: bool = False) -> Tensor:
        # torch's interpolate takes align_corners only for the (bi/tri)linear and bicubic modes
        kw = {"align_corners": align_corners} if "linear" in mode or mode == "bicubic" else {}
        # tinygrad's "linear" is linear in every spatial dim: torch's bilinear/trilinear
        if mode == "linear":
            mode = {4: "bilinear", 5: "trilinear"}.get(self.ndim, mode)
        return self._nn("interpolate", size=tuple(size), mode=mode, **kw)

    def scaled_dot_product_attention(self, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                     dropout_p: float = 0.0, is_causal: bool = False, **kw: Any) -> Tensor:
        return self._nn("scaled_dot_product_attention", key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                        is_causal=is_causal, **kw)

    def cross_entropy(self, Y: Tensor, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:  # noqa: N803
        return self._nn("cross_entropy", Y, reduction=reduction, label_smoothing=label_smoothing)

    def nll_loss(self, Y: Tensor, weight: Tensor | None = None, ignore_index: int | None = None,  # noqa: N803
                 reduction: str = "mean") -> Tensor:
        kw: dict[str, Any] = dict(weight=weight, reduction=reduction)
        if ignore_index is not None:
            kw["ignore_index"] = ignore_index
        return self._nn("nll_loss", Y, **kw)

    def binary_crossentropy(self, Y: Tensor, reduction: str = "mean") -> Tensor:  # noqa: N803
        return self._nn("binary_cross_entropy", Y, reduction=reduction)

    def binary_crossentropy_logits(self, Y: Tensor, reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:  # noqa: N803
        kw: dict[str, Any] = dict(reduction=reduction)
        if pos_weight is not None:
            kw["pos_weight"] = pos_weight
        return self._nn("binary_cross_entropy_with_logits", Y, **kw)

    def sparse_categorical_crossentropy(self, Y: Tensor, ignore_index: int = -1, label_smoothing: float = 0.0,  # noqa: N803
                                        reduction: str = "mean") -> Tensor:
        # tinygrad's name for cross entropy over integer labels with logits; its class axis is the
        # last one, torch's the second
        x = self if self.ndim <= 2 else self.permute(0, self.ndim - 1, *range(1, self.ndim - 1))
        return x._nn("cross_entropy", Y, ignore_index=ignore_index, label_smoothing=label_smoothing,
                        reduction=reduction, names=["nn.cross_entropy"])

    @staticmethod
    def einsum(formula: str, *operands: Any, **kw: Any) -> Tensor:
        ops = operands[0] if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else operands
        return _call("einsum", ["nn.einsum", "einsum"], formula, *ops)

    def __getattr__(self, name: str) -> Any:
        # slots raise AttributeError for unset attributes; anything else is a tinygrad op the shim lacks
        if name.startswith("__") or name in Tensor.__slots__:
            raise AttributeError(name)
        raise MissingOp(name)


# ---------------------------------------------------------------------------------------------
# sys.modules wiring

def install() -> None:
    """Make ``import tinygrad`` (and the submodules test_ops imports) resolve to this shim."""
    me = sys.modules[__name__]
    pkg = types.ModuleType("tinygrad")
    pkg.__path__ = []  # a package, so "tinygrad.x" submodule imports look in sys.modules
    for name in ("Tensor", "Device", "dtypes", "Context", "getenv", "MissingOp"):
        setattr(pkg, name, getattr(me, name))
    helpers = types.ModuleType("tinygrad.helpers")
    for name in ("getenv", "Context", "DEBUG", "IMAGE", "CI", "CPU_LLVM", "AMD_LLVM", "EMULATE"):
        setattr(helpers, name, getattr(me, name))
    tensor_mod = types.ModuleType("tinygrad.tensor")
    tensor_mod.Tensor = Tensor  # type: ignore[attr-defined]
    tensor_mod._to_np_dtype = _to_np_dtype  # type: ignore[attr-defined]
    device_mod = types.ModuleType("tinygrad.device")
    device_mod.Device = Device  # type: ignore[attr-defined]
    device_mod.is_dtype_supported = is_dtype_supported  # type: ignore[attr-defined]
    dtype_mod = types.ModuleType("tinygrad.dtype")
    dtype_mod.dtypes = dtypes  # type: ignore[attr-defined]
    pkg.helpers, pkg.tensor, pkg.device, pkg.dtype = helpers, tensor_mod, device_mod, dtype_mod  # type: ignore[attr-defined]
    sys.modules.update({"tinygrad": pkg, "tinygrad.helpers": helpers, "tinygrad.tensor": tensor_mod,
                        "tinygrad.device": device_mod, "tinygrad.dtype": dtype_mod})


def reset_phase() -> None:
    _PHASE["backward"] = False


def in_backward() -> bool:
    return _PHASE["backward"]


def leaves() -> Iterable[Tensor]:
    return list(_GRAD_LEAVES)
