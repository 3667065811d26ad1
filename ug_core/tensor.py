"""The user-facing Tensor: numpy-like, lazy. Every method validates its input (shapes,
axes, dtypes, devices) and builds graph nodes; nothing runs until a value is needed."""

from __future__ import annotations

import math
import operator
import weakref
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from . import dtypes, graph, scalars, sharing
from .device import Buffer
from .graph import Node
from .ops import ALU, REDUCE, Op
from .plugins import registry
from .runtime import realize_nodes
from .shapes import broadcast_node, broadcast_pair, broadcast_shape, normalize_axes, normalize_axis, shape_arg
from .view import View, compose, prod

Scalar = bool | int | float

_write_lock = graph.graph_lock
"""The hook that makes writes to a tensor thread-safe: every write holds it from reading the
tensor's current node (the value it builds on) to `_replace_node` (assign, __setitem__, and
replay.general_replay's writes). Without it, two threads writing rows of one tensor both build
on the same old node and the second replaces the first's write (it is lost). Build what does
not read the tensor (the written value) before taking it."""


# --- devices and dtypes -----------------------------------------------------------------


def _resolve_device(device: str | None) -> str:
    if device is None:
        # the first usable device that initializes (one whose hardware fails is skipped)
        preferred = registry.preferred()
        if preferred is None:
            raise RuntimeError("no usable ug device (not even 'ref'); run `ug devices` to see why")
        return preferred
    if not isinstance(device, str):
        raise TypeError(f"device must be a string like 'cpu' or 'ref', got {device!r}")
    registry.get(device)  # raises ValueError naming the available devices
    return device


def _check_supported(dtype: np.dtype, device: str) -> np.dtype:
    dev = registry.get(device)
    if dtype not in dev.dtypes:
        names = ", ".join(sorted(d.name for d in dev.dtypes))
        raise TypeError(f"device {device!r} does not support dtype {dtype.name} (it supports {names})")
    return dtype


_COMPARISONS = frozenset({Op.CMPLT, Op.CMPLE, Op.CMPEQ, Op.CMPNE})
_F16, _F32 = np.dtype(np.float16), np.dtype(np.float32)


def _make(node: Node) -> "Tensor":
    _check_supported(node.dtype, node.device)
    return Tensor(node)


# --- shapes and axes ----------------------------------------------------------------------


def _index_view(shape: tuple[int, ...], index: Any) -> View:
    """The View that basic indexing (ints, slices with any nonzero step, None, Ellipsis) selects."""
    if not isinstance(index, tuple):
        index = (index,)
    for item in index:
        if isinstance(item, (Tensor, np.ndarray, list)) or isinstance(item, bool):
            raise TypeError(f"indexing with {type(item).__name__} is not supported here; use ints, slices, None and ...")
        if not (item is None or item is Ellipsis or isinstance(item, (slice, int, np.integer))):
            raise TypeError(f"invalid index {item!r}: use ints, slices, None and ...")
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > len(shape):
        raise IndexError(f"too many indices for tensor of shape {shape}: {used} were indexed")
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + (slice(None),) * (len(shape) - used) + index[at + 1:]
    else:
        index = index + (slice(None),) * (len(shape) - used)
    view = View.contiguous(shape)
    out_shape: list[int] = []
    out_strides: list[int] = []
    offset = 0
    dim = 0
    for item in index:
        if item is None:
            out_shape.append(1)
            out_strides.append(0)
            continue
        size, stride = view.shape[dim], view.strides[dim]
        if isinstance(item, slice):
            if item.step is not None and operator.index(item.step) == 0:
                raise ValueError("slice step cannot be zero")
            start, stop, step = item.indices(size)
            n = len(range(start, stop, step))
            if n:
                offset += start * stride
            out_shape.append(n)
            out_strides.append(stride * step)
        else:
            i = operator.index(item)
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for axis {dim} with size {size}")
            offset += (i % size) * stride
        dim += 1
    return View(tuple(out_shape), tuple(out_strides), offset)


# --- creation ------------------------------------------------------------------------------


def _to_array(data: Any, dtype: np.dtype | None) -> np.ndarray:
    if isinstance(data, np.ndarray):
        arr = sharing.host_array(data)  # (big-endian data, as files hold it, byte-swapped)
    elif dtypes.is_scalar(data):
        return np.asarray(data, dtype=dtype or dtypes.default_dtype(data))
    elif isinstance(data, (list, tuple)):
        if dtype is not None:
            try:   # exact where numpy converts the elements directly (uint64 values above 2**63,
                # which an int64 or float64 detour would round or wrap)
                return np.asarray(data, dtype=dtype)
            except (OverflowError, TypeError, ValueError):
                pass   # (a ragged or otherwise odd sequence: the checks below say what is wrong)
        try:
            arr = np.asarray(data)
        except ValueError as e:
            raise ValueError(f"cannot make a tensor from a ragged nested sequence: {e}") from e
        if arr.dtype == np.float64 and dtype is None:
            arr = arr.astype(np.float32)  # Python floats default to float32, as for scalars
        elif arr.dtype == np.complex128 and dtype is None:
            arr = arr.astype(np.complex64)  # and Python complex numbers to complex64
    else:
        raise TypeError(f"cannot make a tensor from {type(data).__name__}; use a numpy array, nested lists or a scalar")
    if arr.dtype.kind not in "biufc":
        raise TypeError(f"cannot make a tensor from data of dtype {arr.dtype} (e.g. strings or objects)")
    if dtype is None:
        if arr.dtype not in dtypes.SUPPORTED:
            raise TypeError(f"unsupported dtype {arr.dtype.name}; ug supports {', '.join(d.name for d in dtypes.SUPPORTED)}")
        return arr
    return arr.astype(dtype)


def tensor(data: Any, dtype: Any = None, device: str | None = None) -> "Tensor":
    """A new tensor holding a copy of `data` (a Tensor, numpy array, nested lists or a scalar).

    Of a Tensor, it is a new tensor with data's value at the call: a later write to either
    tensor, through ug or through memory shared with another library, leaves the other one as
    it was (see sharing: no device copy is made where nothing outside ug can write what the
    value reads)."""
    dt = dtypes.to_dtype(dtype) if dtype is not None else None
    if isinstance(data, Tensor):
        out = data.astype(dt) if dt is not None else data
        out = out.to(device) if device is not None else out
        return snapshot(out)
    dev = _resolve_device(device)
    arr = _to_array(data, dt)
    _check_supported(arr.dtype, dev)
    buf = Buffer(registry.get(dev), arr.size, arr.dtype).copy_in(arr)
    return Tensor(graph.from_buffer(buf, arr.shape))


def snapshot(t: "Tensor") -> "Tensor":
    """A new tensor holding t's value as it is now (ug.tensor(t), asarray(t, copy=True),
    copy.deepcopy): see sharing.snapshot_node."""
    return Tensor(sharing.snapshot_node(t._node, tracing()))


def _unpickle(array: np.ndarray, device: str) -> "Tensor":
    """A pickled tensor (Tensor.__reduce__): its value on the device of that name, which must be
    usable here."""
    try:
        registry.get(device)
    except ValueError as e:  # (DeviceUnavailableError is one): the same type, saying what failed
        raise type(e)(f"cannot unpickle a tensor of device {device!r} here: {e}. Pickle t.to(name) for a "
                      f"device the reading process has, or t.numpy()") from e
    return tensor(array, device=device)


def full(shape: Any, value: Scalar, dtype: Any = None, device: str | None = None) -> "Tensor":
    """A tensor of `value`: of `dtype`, which must hold it (dtypes.written: `full(3, 300,
    uint8)` is an OverflowError, as numpy's), else of the value's (a numpy scalar's or a 0-d
    array's own dtype, ug's defaults for a Python scalar)."""
    shape = shape_arg(shape)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]   # numpy's full takes a 0-d array as its scalar (and its dtype)
    if not dtypes.is_scalar(value):
        raise TypeError(f"fill value must be a scalar, got {value!r}")
    dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.default_dtype(value)
    dev = _resolve_device(device)
    dt = _check_supported(dt, dev)
    v = dtypes.written(value, dt)
    if shape == ():
        # the tensor is the 0-d node itself, which the user may write (assign): not a kept,
        # shared scalar node (scalars.scalar_cache) but a buffer of its own, unless it folds
        if scalars.folds(v):
            return Tensor(graph.const(v.item(), dt, dev))
        return Tensor(graph.from_buffer(scalars.private_buffer(v, dev), ()))
    # a value that does not fold is a kernel argument (scalars): a new one reuses the kernels
    return Tensor(broadcast_node(scalars.scalar(v, dt, dev), shape))


def zeros(shape: Any, dtype: Any = np.float32, device: str | None = None) -> "Tensor":
    return full(shape, 0, dtype, device)


def ones(shape: Any, dtype: Any = np.float32, device: str | None = None) -> "Tensor":
    return full(shape, 1, dtype, device)


def arange(n: int, dtype: Any = None, device: str | None = None) -> "Tensor":
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"arange length must be non-negative, got {n}")
    dt = dtypes.to_dtype(dtype) if dtype is not None else np.dtype(np.int64)
    return tensor(np.arange(n, dtype=dt), device=device)


# --- the Tensor --------------------------------------------------------------------------

# ug.jit's hooks (jit._Tracer) while some thread traces a jitted function, else None (the one
# check the hot paths pay). While a function is traced its tensors have no values yet, so the
# trace must see which tensors it makes, which ones it writes, and any read of a value.
_tracer: Any = None


def tracing() -> bool:
    """Whether ug.jit is tracing a function on this thread (realizing then does nothing)."""
    return _tracer is not None and _tracer.tracing()


def values_for_shape(t: "Tensor", what: str) -> np.ndarray:
    """t's values on the host, which the shape of `what` depends on (a data-dependent op: boolean
    masks, nonzero, bincount). Inside a ug.jit trace that is an error saying why: the trace
    would freeze one call's shape into every later call."""
    if tracing():
        from .jit import TracerValueError
        raise TracerValueError(
            f"ug.jit: {what} has a shape that depends on the values of a tensor, so it cannot be traced (a "
            f"trace is one sequence of kernels of fixed shapes, replayed on new values). Call it outside the "
            f"jitted function and jit the parts before and after it, or give the mask or indices as a numpy "
            f"array (a value known when traced: each new one is traced once).")
    return t.numpy()


class _BufferArray:
    """A numpy array interface over a buffer's memory that holds the buffer: np.asarray of it
    is an array whose base keeps the buffer from being freed (and its memory reused)."""

    def __init__(self, array: np.ndarray, buffer: Any):
        self.__array_interface__ = array.__array_interface__
        self.array, self.buffer = array, buffer


class Tensor:
    """A lazy n-dimensional array on one device.

    numpy's rule for writes and aliasing: what numpy documents as a view (basic indexing,
    reshape where one strided view does it, permute/.T, expand_dims, squeeze, flip,
    broadcast_to, diagonal, ...) is a `TensorView` of this tensor: it reads this tensor's value
    as it is when read, and a write to it (`assign`, `v[idx] = x`) writes this tensor's region.
    Everything else (arithmetic, `ug.tensor(t)`, astype, pad, roll, concat, take, boolean and
    integer-array indexing, ...) is a new value: a later write to either side leaves the other
    as it was. A write happens in place in memory whenever nothing can observe the old value
    (see schedule._in_place_assigns); a value read before it keeps the old one."""

    __slots__ = ("_node", "__weakref__")
    __array_priority__ = 1000

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """numpy ufuncs on tensors (`np.exp(t)`, `np_array + t`) are ug's functions: lazy tensors
        (see array_api.numpy_interop)."""
        from .array_api.numpy_interop import array_ufunc
        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """numpy functions on tensors (`np.sum(t)`, `np.concatenate`) are ug's where it has them
        (see array_api.numpy_interop)."""
        from .array_api.numpy_interop import array_function
        return array_function(func, types, args, kwargs, self)

    def __init__(self, node: Node):
        self._node = node
        node.add_reader(self)
        if _tracer is not None:
            _tracer.made(self)

    @property
    def node(self) -> Node:
        return self._node

    def _replace_node(self, node: Node) -> None:
        """Make `node` (a write built on this tensor's current node) its value. The caller holds
        `_write_lock` from reading `self._node` to this call (see there). The order of the
        lines keeps the bookkeeping on the safe side wherever a KeyboardInterrupt cuts it: a
        node is never left without the reader that holds it, nor left counting as unobserved
        while this tensor still holds it (which would let a later write go in place into it)."""
        old = self._node
        node.add_reader(self)
        self._node = node  # the old node's weak ref to this tensor is skipped: its node moved on
        if old._creator == id(self):  # made with `old` (see Node._creator): now it no longer reads it
            old._creator = 0
        if _tracer is not None:
            _tracer.wrote(self, old)

    # --- properties ---
    @property
    def shape(self) -> tuple[int, ...]:
        return self._node.shape

    @property
    def ndim(self) -> int:
        return len(self._node.shape)

    @property
    def size(self) -> int:
        return prod(self._node.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._node.dtype

    @property
    def device(self) -> str:
        return self._node.device

    def __repr__(self) -> str:
        state = "" if self._node.realized else ", lazy"
        return f"Tensor(shape={self.shape}, dtype={self.dtype.name}, device={self.device!r}{state})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator["Tensor"]:
        # without it, Python iterates through __getitem__ until IndexError, which a 0-d
        # tensor raises at once: list(scalar) was [] instead of numpy's TypeError
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    __hash__ = object.__hash__

    # --- getting values out ---
    def realize(self) -> "Tensor":
        if not tracing():  # while ug.jit traces, tensors stay lazy: the trace computes them
            self._realized()
        return self

    def _holds(self, node: Node) -> bool:
        """Whether this tensor's value is `node` now (the scheduler's question about a reader:
        asked without building anything, see TensorView._holds)."""
        return self._node is node

    def _realized(self) -> Node:
        """The node of this tensor's value, realized: taken once, so that a write from another
        thread replacing the tensor's node meanwhile cannot leave a reader with a lazy one."""
        graph.note_thread()
        with _write_lock:   # (no write may come between taking the node and its realize's decisions)
            node = self._node
            realize_nodes([node])
        return node

    def numpy(self) -> np.ndarray:
        if _tracer is not None:  # raises for a value a jitted function's trace does not have
            _tracer.before_read(self)
        buf = self._realized().buffer
        assert buf is not None
        return buf.numpy().reshape(self.shape)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        arr = self.numpy()
        return arr.astype(dtype) if dtype is not None else arr

    def item(self) -> Scalar:
        if self.size != 1:
            raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
        return self.numpy().reshape(-1)[0].item()

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(f"the truth value of a tensor with shape {self.shape} is ambiguous")
        return bool(self.item())

    def _python_scalar(self, kind: str) -> Scalar:
        """The one element, for int()/float()/complex()/operator.index(): numpy's TypeError
        for a tensor of another size (bool() keeps its ValueError, as numpy's does)."""
        if self.size != 1:
            raise TypeError(f"only tensors with one element can be converted to Python {kind}s, "
                            f"this one has shape {self.shape}")
        return self.item()

    def __float__(self) -> float:
        return float(self._python_scalar("float"))

    def __int__(self) -> int:
        return int(self._python_scalar("int"))

    def __complex__(self) -> complex:
        return complex(self._python_scalar("complex"))

    def __index__(self) -> int:
        """Only integer tensors are indices (the Array API standard; numpy agrees)."""
        if self.dtype.kind not in "iu":
            raise TypeError(f"only integer tensors can be used as an index, this one is {self.dtype.name}")
        return int(self._python_scalar("int"))

    # --- Array API standard members ---
    def __array_namespace__(self, api_version: str | None = None) -> Any:
        """The Array API namespace of ug tensors: the ug_core module itself (as numpy 2 does)."""
        from .array_api import info
        return info.namespace(api_version)

    def to_device(self, device: str, /, *, stream: Any = None) -> "Tensor":
        """The Array API spelling of `.to(device)`; ug has no streams, so `stream` must be None."""
        if stream is not None:
            raise ValueError(f"to_device: ug devices have no streams, got stream={stream!r}")
        return self.to(device)

    @property
    def mT(self) -> "Tensor":
        """The matrix transpose of a stack of matrices (the last two axes swapped)."""
        if self.ndim < 2:
            raise ValueError(f"mT needs at least 2 dimensions, got shape {self.shape}")
        return self.permute((*range(self.ndim - 2), self.ndim - 1, self.ndim - 2))

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """A DLPack capsule of the value, realized, in host memory: the tensor's own buffer on a
        host-memory device (cpu, c, ref; the capsule keeps it alive, and a write through it
        changes this tensor only: see _host_memory), else a copy (copy=False then raises
        BufferError). Read-only memory (asarray of a read-only numpy array) is exported
        read-only, or copied for a consumer older than DLPack 1.0, which cannot be told."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"ug tensors export to the CPU (DLPack device (1, 0)) only, not {dl_device}")
        lent = None if copy else self._host_memory()
        if lent is None:
            if copy is False and self.size:   # (an empty tensor has no memory to share or copy)
                raise BufferError(f"device {self.device!r} does not keep its buffers in host memory: "
                                  f"DLPack export copies (copy=False cannot be honoured)")
            lent = self.numpy()
        try:
            return lent.__dlpack__(max_version=max_version)
        except BufferError:
            if lent.flags.writeable or copy is False:
                raise
            return self.numpy().__dlpack__(max_version=max_version)

    def _host_memory(self) -> np.ndarray | None:
        """The value as a numpy array sharing the buffer's memory (which it keeps alive), on a
        device whose memory is the host's; else None. The memory is lent out (`exposed`, see
        sharing): code outside ug may write it from now on. Where another ug value still reads
        that buffer (a tensor holding the same value, a lazy result built on it) and it was not
        exposed before, this tensor first moves to a copy of it, so writes through the export
        change this tensor only."""
        if _tracer is not None:  # raises for a value a jitted function's trace does not have
            _tracer.before_read(self)
        node = self._realized()
        buf = node.buffer
        assert buf is not None
        if not buf.size or buf.device.host_view(buf.handle, buf.nbytes) is None:
            return None
        if tracing():
            # a trace's tensors may not move to another node: lend a copy, which nothing else
            # reads (a TensorView lends its base's memory, see TensorView._host_memory)
            buf = sharing.copy_buffer(buf)
        elif not sharing.is_exposed(buf) and sharing.needs_private_copy(self, node):
            # (memory outside code may write already, another library's, is lent as it is: its
            # readers see such writes anyway, and asarray's sharing with its owner stays)
            buf = sharing.copy_buffer(buf)
            self._replace_node(graph.from_buffer(buf, self.shape))
        buf.exposed = True
        raw = buf.device.host_view(buf.handle, buf.nbytes)
        assert raw is not None
        return np.asarray(_BufferArray(raw.view(buf.dtype).reshape(self.shape), buf))

    # --- copy and pickle: by value ---
    def __copy__(self) -> "Tensor":
        """copy.copy: a new tensor with this one's value now (ug.tensor(t))."""
        return snapshot(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> "Tensor":
        """copy.deepcopy: a new tensor with this one's value now (ug.tensor(t))."""
        out = memo[id(self)] = snapshot(self)
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        """pickle: the value, computed and copied to the host, with its dtype and its device's
        name; unpickling puts it on the device of that name (ValueError, or the
        DeviceUnavailableError saying why, where the reading process has no such usable device)."""
        return (_unpickle, (self.numpy(), self.device))

    def __dlpack_device__(self) -> tuple[int, int]:
        """(kDLCPU, 0): where __dlpack__'s data lives, whatever device holds the tensor."""
        return (1, 0)

    def to(self, device: str) -> "Tensor":
        device = _resolve_device(device)
        if device == self.device:
            return Tensor(self._node)
        _check_supported(self.dtype, device)
        return Tensor(graph.copy(self._node, device))

    def astype(self, dtype: Any) -> "Tensor":
        dt = dtypes.to_dtype(dtype)
        return _make(graph.cast(self._node, _check_supported(dt, self.device)))

    # --- elementwise ---
    def _other(self, other: Any) -> tuple[Node, Node, np.dtype]:
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
            return self._other(tensor(other, device=self.device))
        raise TypeError(f"unsupported operand type {type(other).__name__} for a tensor op")

    def _binary(self, op: Op, other: Any, reverse: bool = False, ufunc: Callable[..., Any] | None = None) -> "Tensor":
        side = dtypes.beyond_range(other, self.dtype) if op in _COMPARISONS else 0
        if side:   # (numpy 2: uint8 < 300 is True, uint8 == -1 False: one answer for every element)
            answer = op is Op.CMPNE if op in (Op.CMPEQ, Op.CMPNE) else (side > 0) != reverse
            return full(self.shape, answer, dtypes.BOOL, self.device)
        a, b, common = self._other(other)
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
        out_dtype = dtypes.BOOL if op in _COMPARISONS else common
        return _make(graph.alu(op, (broadcast_node(a, shape), broadcast_node(b, shape)), out_dtype))

    def _complex_binary(self, op: Op, other: Any, reverse: bool, common: np.dtype) -> "Tensor":
        """A binary op whose operands promote to the complex dtype `common`: built from real ops
        on the parts (array_api._complex). An operand that is real (a real tensor, a Python
        int or float) stays real, in common's part dtype: Annex G's componentwise rule for it."""
        from .array_api import _complex
        part = dtypes.part_dtype(common)
        if op is Op.POW and not reverse and _complex.small_integer(other):   # z ** n: multiplies, as numpy's
            return _complex.integer_power(self.astype(common), int(complex(other).real))

        def operand(v: Any) -> Node:
            if isinstance(v, Tensor):
                return graph.cast(v._node, common if v.dtype.kind == "c" else part)
            if not dtypes.is_scalar(v):
                return operand(tensor(v, device=self.device))
            dt = common if isinstance(v, (complex, np.complexfloating)) else part
            # a user's scalar: a kernel argument unless it folds (see scalars)
            return scalars.parameter(graph.const(dtypes.operand(v, dt).item(), dt, self.device))

        a, b = operand(self), operand(other)
        if reverse:
            a, b = b, a
        shape = broadcast_pair(a.shape, b.shape)
        return _complex.binary(op, Tensor(broadcast_node(a, shape)), Tensor(broadcast_node(b, shape)))

    def __add__(self, o: Any) -> "Tensor": return self._binary(Op.ADD, o, ufunc=np.add)
    def __radd__(self, o: Any) -> "Tensor": return self._binary(Op.ADD, o, True, ufunc=np.add)
    def __sub__(self, o: Any) -> "Tensor": return self._binary(Op.SUB, o, ufunc=np.subtract)
    def __rsub__(self, o: Any) -> "Tensor": return self._binary(Op.SUB, o, True, ufunc=np.subtract)
    def __mul__(self, o: Any) -> "Tensor": return self._binary(Op.MUL, o, ufunc=np.multiply)
    def __rmul__(self, o: Any) -> "Tensor": return self._binary(Op.MUL, o, True, ufunc=np.multiply)
    def __truediv__(self, o: Any) -> "Tensor": return self._binary(Op.DIV, o, ufunc=np.true_divide)
    def __rtruediv__(self, o: Any) -> "Tensor": return self._binary(Op.DIV, o, True, ufunc=np.true_divide)
    def __pow__(self, o: Any) -> "Tensor":
        _check_integer_exponent(self.dtype, o)
        return self._binary(Op.POW, o, ufunc=np.power)

    def __rpow__(self, o: Any) -> "Tensor": return self._binary(Op.POW, o, True, ufunc=np.power)
    def __lt__(self, o: Any) -> "Tensor": return self._binary(Op.CMPLT, o)
    def __le__(self, o: Any) -> "Tensor": return self._binary(Op.CMPLE, o)
    def __gt__(self, o: Any) -> "Tensor": return self._binary(Op.CMPLT, o, True)
    def __ge__(self, o: Any) -> "Tensor": return self._binary(Op.CMPLE, o, True)
    def __eq__(self, o: Any) -> "Tensor": return self._binary(Op.CMPEQ, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> "Tensor": return self._binary(Op.CMPNE, o)  # type: ignore[override]
    def __matmul__(self, o: Any) -> "Tensor": return matmul(self, o)
    def __rmatmul__(self, o: Any) -> "Tensor": return matmul(o, self)

    def __floordiv__(self, o: Any) -> "Tensor": return self._binary(Op.FLOORDIV, o, ufunc=np.floor_divide)
    def __rfloordiv__(self, o: Any) -> "Tensor": return self._binary(Op.FLOORDIV, o, True, ufunc=np.floor_divide)
    def __mod__(self, o: Any) -> "Tensor": return self._binary(Op.MOD, o, ufunc=np.remainder)
    def __rmod__(self, o: Any) -> "Tensor": return self._binary(Op.MOD, o, True, ufunc=np.remainder)

    def _bitwise(self, op: Op, other: Any, reverse: bool = False) -> "Tensor":
        """`&`, `|`, `^` (bitwise of ints, logical of bools), `<<` and `>>` (of ints only), in the
        operands' common dtype; other dtypes (floats) are a TypeError naming them."""
        if not (dtypes.is_scalar(other) or isinstance(other, Tensor)):
            other = _as_tensor(other, self)
        other_dtype = dtypes.scalar_dtype(other, self.dtype) if dtypes.is_scalar(other) else other.dtype
        allowed = "iu" if op in (Op.SHL, Op.SHR) else "iub"
        if dtypes.promote(self.dtype, other_dtype).kind not in allowed:
            names = [self.dtype.name, other.dtype.name if isinstance(other, Tensor) else type(other).__name__]
            first, second = names[::-1] if reverse else names
            kinds = "integer" if allowed == "iu" else "integer or bool"
            raise TypeError(f"operator {ALU[op].symbol} is defined on {kinds} operands, got {first} and {second}")
        return self._binary(op, other, reverse)

    def __and__(self, o: Any) -> "Tensor": return self._bitwise(Op.AND, o)
    def __rand__(self, o: Any) -> "Tensor": return self._bitwise(Op.AND, o, True)
    def __or__(self, o: Any) -> "Tensor": return self._bitwise(Op.OR, o)
    def __ror__(self, o: Any) -> "Tensor": return self._bitwise(Op.OR, o, True)
    def __xor__(self, o: Any) -> "Tensor": return self._bitwise(Op.XOR, o)
    def __rxor__(self, o: Any) -> "Tensor": return self._bitwise(Op.XOR, o, True)
    def __lshift__(self, o: Any) -> "Tensor": return self._bitwise(Op.SHL, o)
    def __rlshift__(self, o: Any) -> "Tensor": return self._bitwise(Op.SHL, o, True)
    def __rshift__(self, o: Any) -> "Tensor": return self._bitwise(Op.SHR, o)
    def __rrshift__(self, o: Any) -> "Tensor": return self._bitwise(Op.SHR, o, True)

    # in place: `x op= y` gives x the value of `x op y` (assign: tensors made from x before keep
    # their values), which must keep x's shape and a dtype x can hold (numpy's same_kind rule:
    # float32 += float64 is float32, int += float raises)
    def _in_place(self, result: "Tensor", symbol: str) -> "Tensor":
        if result.shape != self.shape:
            raise ValueError(f"{symbol}=: the result's shape {result.shape} is not the tensor's {self.shape}")
        if result.dtype != self.dtype and not np.can_cast(result.dtype, self.dtype, "same_kind"):
            raise TypeError(f"{symbol}=: the result's dtype {result.dtype.name} cannot be held by the tensor's "
                            f"{self.dtype.name} (numpy's same_kind casting)")
        return self.assign(result)

    def __iadd__(self, o: Any) -> "Tensor": return self._in_place(self + o, "+")
    def __isub__(self, o: Any) -> "Tensor": return self._in_place(self - o, "-")
    def __imul__(self, o: Any) -> "Tensor": return self._in_place(self * o, "*")
    def __itruediv__(self, o: Any) -> "Tensor": return self._in_place(self / o, "/")
    def __ifloordiv__(self, o: Any) -> "Tensor": return self._in_place(self // o, "//")
    def __imod__(self, o: Any) -> "Tensor": return self._in_place(self % o, "%")
    def __ipow__(self, o: Any) -> "Tensor": return self._in_place(self ** o, "**")
    def __imatmul__(self, o: Any) -> "Tensor": return self._in_place(self @ o, "@")
    def __iand__(self, o: Any) -> "Tensor": return self._in_place(self & o, "&")
    def __ior__(self, o: Any) -> "Tensor": return self._in_place(self | o, "|")
    def __ixor__(self, o: Any) -> "Tensor": return self._in_place(self ^ o, "^")
    def __ilshift__(self, o: Any) -> "Tensor": return self._in_place(self << o, "<<")
    def __irshift__(self, o: Any) -> "Tensor": return self._in_place(self >> o, ">>")

    def __invert__(self) -> "Tensor":
        """`~`: not of bools, bitwise not of ints (numpy's invert); floats are a TypeError."""
        if self.dtype.kind not in "iub":
            raise TypeError(f"operator ~ is defined on integer or bool operands, got {self.dtype.name}")
        return _make(graph.alu(Op.NOT if self.dtype == dtypes.BOOL else Op.INVERT, (self._node,), self.dtype))

    def _unary(self, op: Op, ufunc: Callable[..., Any]) -> "Tensor":
        if self.dtype.kind == "c":   # built from real ops on the parts
            from .array_api import _complex
            return _complex.unary(op, self)
        dt = dtypes.ufunc_result(ufunc, self.dtype)
        return _make(graph.alu(op, (graph.cast(self._node, dt),), dt))

    def __neg__(self) -> "Tensor": return self._unary(Op.NEG, np.negative)
    def __pos__(self) -> "Tensor": return Tensor(self._node)
    def __abs__(self) -> "Tensor": return self.abs()
    def exp(self) -> "Tensor": return self._unary(Op.EXP, np.exp)
    def log(self) -> "Tensor": return self._unary(Op.LOG, np.log)
    def sqrt(self) -> "Tensor": return self._unary(Op.SQRT, np.sqrt)
    def sin(self) -> "Tensor": return self._unary(Op.SIN, np.sin)
    def cos(self) -> "Tensor": return self._unary(Op.COS, np.cos)
    def tanh(self) -> "Tensor": return self._unary(Op.TANH, np.tanh)
    def abs(self) -> "Tensor": return self._unary(Op.ABS, np.abs)

    @property
    def real(self) -> "Tensor":
        """The real part (numpy's attribute): of a complex tensor, its part dtype's; of a real
        tensor, the tensor."""
        from .array_api.elementwise import real
        return real(self)

    @property
    def imag(self) -> "Tensor":
        """The imaginary part (numpy's attribute); zeros of a real tensor."""
        from .array_api.elementwise import imag
        return imag(self)

    def conj(self) -> "Tensor":
        """The complex conjugate (numpy's method); a real tensor itself."""
        from .array_api.elementwise import conj
        return conj(self)

    conjugate = conj

    def reciprocal(self) -> "Tensor":
        if self.dtype.kind == "c":
            return self._unary(Op.RECIP, np.reciprocal)
        dt = dtypes.ufunc_result(np.true_divide, self.dtype, self.dtype)
        return _make(graph.alu(Op.RECIP, (graph.cast(self._node, dt),), dt))

    def _float(self) -> "Tensor":
        return self if self.dtype.kind == "f" else self.astype(dtypes.ufunc_result(np.exp, self.dtype))

    def relu(self) -> "Tensor":
        """max(x, 0), NaN kept; its gradient at 0 is 0 (torch's and JAX's), where maximum's
        would split it."""
        return where(self <= 0, 0, self)

    def sigmoid(self) -> "Tensor":
        """1 / (1 + exp(-x)), as e / (1 + e) with e = exp(x) for x < 0: exp(-x) overflows
        there, which gave 0 where the result is a (subnormal or small normal) number."""
        x = self._float()
        # -|x| spelled with the branch's sign, the same value: abs's derivative at 0 is 0, which
        # gave sigmoid'(0) == 0 (not 1/4) to ug.grad
        e = where(x >= 0, -x, x).exp()
        r = (1 + e).reciprocal()
        return where(x >= 0, r, e * r)

    def _times_sigmoid(self, half_z: "Tensor") -> "Tensor":
        """self * sigmoid(2 half_z), accurate where it is tiny: with h = exp(-|half_z|) (no
        overflow), self * h * h for z < 0 rounds once into the subnormals, where self * exp(z)
        multiplied an already rounded subnormal (or 0) by self."""
        h = where(half_z >= 0, -half_z, half_z).exp()   # -|half_z|, differentiable at 0 (sigmoid's)
        r = (1 + h * h).reciprocal()
        return where(half_z >= 0, self * r, self * h * h * r)

    def gelu(self) -> "Tensor":
        """GELU, tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
        computed as x sigmoid(2u) (the same function): 1 + tanh(u) cancelled to -0 for x < -5."""
        x = self._float()
        # the coefficients as the library's constants, folded into the code (a user's scalar
        # would be a kernel argument): 0.5 and 1 fold anyway
        c1, c3 = (graph_scalar(c, x.dtype, x.device) for c in (math.sqrt(2 / math.pi), 0.044715))
        return x._times_sigmoid(c1 * (x + c3 * x * x * x))

    def silu(self) -> "Tensor":
        """x sigmoid(x), accurate where it is subnormal (see _times_sigmoid)."""
        x = self._float()
        return x._times_sigmoid(x * 0.5)

    # --- reductions ---
    def _reduce(self, op: Op, axis: Any, keepdims: bool, dtype: np.dtype) -> "Tensor":
        axes = normalize_axes(axis, self.ndim)
        if op in (Op.RMAX, Op.RMIN) and any(self.shape[a] == 0 for a in axes):
            name = "maximum" if op is Op.RMAX else "minimum"
            raise ValueError(f"zero-size array to reduction operation {name} which has no identity "
                             f"(shape {self.shape}, axis {axis})")
        if dtype.kind == "c" and op is not Op.SUM:
            return self._complex_reduce(op, axes, keepdims, dtype)
        node = graph.cast(self._node, dtype)
        if axes:
            node = _split_reduce(node, op, axes, dtype) or graph.reduce(node, op, axes, dtype)
        out = _make(node)
        if not keepdims:
            out = out.reshape(tuple(s for d, s in enumerate(self.shape) if d not in axes))
        return out

    def _complex_reduce(self, op: Op, axes: tuple[int, ...], keepdims: bool, dtype: np.dtype) -> "Tensor":
        """A product of complex numbers (a tree of complex multiplies, array_api._complex);
        max and min are a TypeError (complex numbers are not ordered)."""
        from .array_api import _complex
        if op is not Op.PROD:
            raise _complex.refused("max" if op is Op.RMAX else "min", dtype)
        x = self.astype(dtype)
        kept = [d for d in range(x.ndim) if d not in axes]
        rows = prod([x.shape[d] for d in kept])
        flat = x.permute(*kept, *axes).reshape(rows, prod([x.shape[d] for d in axes]))
        out = _complex.prod_rows(flat)
        shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape)) if keepdims else \
            tuple(x.shape[d] for d in kept)
        return out.reshape(shape)

    def _dtype_arg(self, dtype: Any) -> np.dtype:
        return _check_supported(dtypes.to_dtype(dtype), self.device)

    # numpy's methods, by keyword (dask and xarray call them on chunks: `chunk.sum(axis=..,
    # dtype=.., keepdims=..)`); positionally, ug's (axis, keepdims) for sum/prod/max/min/mean/
    # argmax/argmin. `dtype` is the accumulation and result dtype (the Array API's); `out`, a
    # tensor given the result (assign, numpy's unsafe casting of a reduction) or a numpy array
    # written, is what is returned then.
    def sum(self, axis: Any = None, keepdims: bool = False, *, dtype: Any = None, out: Any = None) -> "Tensor":
        acc = np.sum(np.empty(0, self.dtype)).dtype if dtype is None else self._dtype_arg(dtype)
        return _into(out, self._reduce(Op.SUM, axis, keepdims, acc))

    def prod(self, axis: Any = None, keepdims: bool = False, *, dtype: Any = None, out: Any = None) -> "Tensor":
        acc = np.prod(np.empty(0, self.dtype)).dtype if dtype is None else self._dtype_arg(dtype)
        return _into(out, self._reduce(Op.PROD, axis, keepdims, acc))

    def max(self, axis: Any = None, keepdims: bool = False, *, out: Any = None) -> "Tensor":
        return _into(out, self._reduce(Op.RMAX, axis, keepdims, self.dtype))

    def min(self, axis: Any = None, keepdims: bool = False, *, out: Any = None) -> "Tensor":
        return _into(out, self._reduce(Op.RMIN, axis, keepdims, self.dtype))

    def argmax(self, axis: int | None = None, keepdims: bool = False, *, out: Any = None) -> "Tensor":
        from .array_api.searching import argmax
        return _into(out, argmax(self, axis=axis, keepdims=keepdims))

    def argmin(self, axis: int | None = None, keepdims: bool = False, *, out: Any = None) -> "Tensor":
        from .array_api.searching import argmin
        return _into(out, argmin(self, axis=axis, keepdims=keepdims))

    def mean(self, axis: Any = None, keepdims: bool = False, *, dtype: Any = None, out: Any = None) -> "Tensor":
        """The mean, of floats in their dtype, of ints and bools in float64 (numpy's); with `dtype`,
        computed in it (numpy's: an integer dtype truncates the mean). float16 is summed and
        divided in float32 and rounded once, as numpy does: in float16 the count itself
        overflows (65504 is its largest value) and a sum of 1000 x 100 is inf."""
        if dtype is not None:
            dt = self._dtype_arg(dtype)
            if dt.kind != "f":
                return _into(out, self.astype(dt).mean(axis, keepdims).astype(dt))
            if dt != self.dtype:
                return _into(out, self.astype(dt).mean(axis, keepdims))
        axes = normalize_axes(axis, self.ndim)
        dt = dtypes.ufunc_result(np.true_divide, self.dtype, self.dtype) if self.dtype.kind != "f" else self.dtype
        work = _F32 if dt == _F16 else dt
        count = prod([self.shape[a] for a in axes])
        # (a complex sum is divided by a real count: each part)
        result = self.astype(work).sum(axis, keepdims) / graph_scalar(count, dtypes.part_dtype(work), self.device)
        return _into(out, result.astype(dt) if work != dt else result)

    def var(self, axis: Any = None, *, dtype: Any = None, out: Any = None, ddof: float = 0, keepdims: bool = False,
            correction: float | None = None) -> "Tensor":
        """The variance (numpy's method: `ddof`, or the standard's name for it, `correction`)."""
        from .array_api.statistical import var
        x = self if dtype is None else self.astype(dtype)
        return _into(out, var(x, axis=axis, correction=ddof if correction is None else correction, keepdims=keepdims))

    def std(self, axis: Any = None, *, dtype: Any = None, out: Any = None, ddof: float = 0, keepdims: bool = False,
            correction: float | None = None) -> "Tensor":
        """The standard deviation (as var)."""
        return _into(out, self.var(axis, dtype=dtype, ddof=ddof, keepdims=keepdims, correction=correction).sqrt())

    def cumsum(self, axis: int | None = None, dtype: Any = None, out: Any = None) -> "Tensor":
        """numpy's cumsum method: the running sums along `axis`, of the flattened tensor for None."""
        from .array_api.statistical import cumulative_sum
        x, axis = (self.reshape(-1), 0) if axis is None else (self, axis)
        return _into(out, cumulative_sum(x, axis=axis, dtype=dtype))

    def cumprod(self, axis: int | None = None, dtype: Any = None, out: Any = None) -> "Tensor":
        """numpy's cumprod method (as cumsum)."""
        from .array_api.statistical import cumulative_prod
        x, axis = (self.reshape(-1), 0) if axis is None else (self, axis)
        return _into(out, cumulative_prod(x, axis=axis, dtype=dtype))

    def any(self, axis: Any = None, *, out: Any = None, keepdims: bool = False) -> "Tensor":
        from .array_api.utility import any as any_
        return any_(self, axis=axis, keepdims=keepdims, out=out)

    def all(self, axis: Any = None, *, out: Any = None, keepdims: bool = False) -> "Tensor":
        from .array_api.utility import all as all_
        return all_(self, axis=axis, keepdims=keepdims, out=out)

    def round(self, decimals: int = 0, out: Any = None) -> "Tensor":
        """numpy's round method (xarray calls it): ug_core.round(self, decimals)."""
        from .array_api.elementwise import round as round_
        return _into(out, round_(self, decimals))

    def ravel(self) -> "Tensor":
        """numpy's ravel: reshape(-1) (dask's argmax calls it on chunks)."""
        return self.reshape(-1)

    def softmax(self, axis: int = -1) -> "Tensor":
        x = self._float()
        e = (x - x.max(axis, keepdims=True).detach()).exp()  # (the shift cancels: no gradient)
        return e / e.sum(axis, keepdims=True)

    def log_softmax(self, axis: int = -1) -> "Tensor":
        x = self._float()
        shifted = x - x.max(axis, keepdims=True).detach()
        return shifted - shifted.exp().sum(axis, keepdims=True).log()

    def detach(self) -> "Tensor":
        """This value with no gradient flowing back through it (ug.stop_gradient)."""
        return Tensor(graph.detach(self._node))

    # --- movement (views: numpy's, see TensorView) ---
    def _view(self, v: View, writeable: bool = True) -> "Tensor":
        """This tensor read through `v` (which indexes its contiguous layout), as a view that
        aliases it; a masked read (pad) is a new value."""
        if v.mask is not None:
            return Tensor(graph.view(self._node, v))
        return TensorView(self, v, writeable)

    def reshape(self, *shape: Any) -> "Tensor":
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        try:
            dims = [operator.index(s) for s in shape]
        except TypeError as e:
            raise TypeError(f"reshape takes ints, got {shape!r}") from e
        if dims.count(-1) > 1:
            raise ValueError(f"can only specify one unknown dimension (-1) in reshape {tuple(dims)}")
        if -1 in dims:
            known = prod([d for d in dims if d != -1])
            if known == 0 or self.size % known:
                raise ValueError(f"cannot reshape tensor of shape {self.shape} into shape {tuple(dims)}")
            dims[dims.index(-1)] = self.size // known
        new = tuple(dims)
        if any(d < 0 for d in new) or prod(new) != self.size:
            raise ValueError(f"cannot reshape tensor of shape {self.shape} (size {self.size}) into shape {new}")
        return self._view(View.contiguous(new))

    def permute(self, *axes: Any) -> "Tensor":
        if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
            axes = tuple(axes[0])
        if len(axes) != self.ndim:
            raise ValueError(f"permute needs {self.ndim} axes for shape {self.shape}, got {axes}")
        norm = tuple(normalize_axis(a, self.ndim) for a in axes)
        if sorted(norm) != list(range(self.ndim)):
            raise ValueError(f"{axes} is not a permutation of the axes of shape {self.shape}")
        return self._view(View.contiguous(self.shape).permute(norm))

    def transpose(self, *axes: Any) -> "Tensor":
        return self.permute(*axes) if axes else self.permute(tuple(reversed(range(self.ndim))))

    @property
    def T(self) -> "Tensor":
        return self.permute(tuple(reversed(range(self.ndim))))

    def broadcast_to(self, shape: Any) -> "Tensor":
        shape = shape_arg(shape)
        if len(shape) < self.ndim or any(s != 1 and s != t for s, t in zip(self.shape, shape[len(shape) - self.ndim:])):
            raise ValueError(f"cannot broadcast tensor of shape {self.shape} to shape {shape}")
        pad = (1,) * (len(shape) - self.ndim)
        # numpy's broadcast_to: a read-only view (several indices share one element)
        return self._view(View.contiguous(pad + self.shape).expand(shape), writeable=False)

    def squeeze(self, axis: Any = None) -> "Tensor":
        if axis is None:
            axes = tuple(d for d, s in enumerate(self.shape) if s == 1)
        else:
            axes = normalize_axes(axis, self.ndim)
            bad = [a for a in axes if self.shape[a] != 1]
            if bad:
                raise ValueError(f"cannot squeeze axis {bad[0]} of shape {self.shape}: its size is not 1")
        return self.reshape(tuple(s for d, s in enumerate(self.shape) if d not in axes))

    def expand_dims(self, axis: Any) -> "Tensor":
        items = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        ndim = self.ndim + len(items)
        axes = normalize_axes(items, ndim)
        it = iter(self.shape)
        return self.reshape(tuple(1 if d in axes else next(it) for d in range(ndim)))

    def unsqueeze(self, axis: int) -> "Tensor":
        return self.expand_dims(axis)

    def flatten(self) -> "Tensor":
        """The elements in row-major order, 1-d: a new value (numpy's flatten copies; reshape(-1)
        is the view)."""
        return Tensor(self.reshape(-1)._node)

    def __getitem__(self, index: Any) -> "Tensor":
        if _is_advanced(index):
            from .array_api.indexing import getitem   # integer arrays: a gather, a new value
            out = getitem(self, _advanced_items(index))
            return Tensor(out._node) if isinstance(out, TensorView) else out
        v = _index_view(self.shape, index)
        if not v.shape and _indexes_every_dim(index):
            # numpy: an integer for every dimension (or () of a 0-d array) gives the element, a
            # copy (x[0, ...] and x[...] are views)
            return Tensor(graph.view(self._node, v))
        return self._view(v)

    # --- in place ---
    def assign(self, value: Any) -> "Tensor":
        """Give this tensor a new value (same shape and dtype). Later reads of this tensor (and
        of its views) see it; values computed from it before do not."""
        self._write(self._value_for(value, self.shape), None)
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        if _is_advanced(index):
            from .array_api.scatter import setitem   # integer arrays: a scatter (the last write wins)
            with _write_lock:   # (the scatter's value is built on the tensor's current node)
                self._write(setitem(self, _advanced_items(index), value), None)
            return
        region = _index_view(self.shape, index)
        self._write(self._value_for(value, region.shape), region)

    def _write(self, value: Node, region: View | None) -> None:
        """Write `value` into this tensor: all of it, or `region` (a View over its layout). Under
        the write lock from reading the current node to replacing it: writes from several
        threads are not lost (see faults)."""
        graph.note_thread()
        with _write_lock:
            node = self._node
            if region is not None and value.op is Op.VIEW and value.srcs[0] is node and value.arg == region:
                return  # x[idx] = x[idx]: the write-back of `x[idx] += v` after its view wrote x already
            if region is None and node.buffer is None and node.op is not Op.ASSIGN:
                # all of a value that has no memory yet: the new value is all there is to keep (an
                # ASSIGN would first compute the old value into a buffer to write over)
                self._replace_node(value)
                return
            self._replace_node(graph.assign(node, value, region))

    def _value_for(self, value: Any, shape: tuple[int, ...]) -> Node:
        if isinstance(value, Tensor):
            if value.device != self.device:
                raise ValueError(f"cannot assign a tensor on {value.device!r} to a tensor on {self.device!r}")
            node = value._node
        elif dtypes.is_scalar(value):
            # numpy's `a[i] = v`: the value must fit (an OverflowError, not a wrapped value); a
            # kernel argument unless it folds
            node = scalars.scalar(dtypes.written(value, self.dtype), self.dtype, self.device)
        else:
            node = _written_array(value, self.dtype, self.device)._node
        if not all(s == 1 or s == t for s, t in zip(node.shape[::-1], shape[::-1])) or len(node.shape) > len(shape):
            raise ValueError(f"cannot assign a value of shape {node.shape} to a region of shape {shape}")
        return broadcast_node(graph.cast(node, self.dtype), shape)


class TensorView(Tensor):
    """A view (numpy's): a window on a base tensor's value, which it shares.

    It holds its base (a plain Tensor, never another view: a view of a view is composed into one
    window on the root) and `window`, a View over the base's contiguous layout (no mask). Its
    value is the base's *current* value read through the window, so a write to the base shows
    through; a write to it (`assign`, `v[idx] = x`, `v += 1`) is a region write on the base (one
    ASSIGN of the base, fused and done in place like any other write). broadcast_to's views are
    read-only, as numpy's: writing one raises ValueError.

    The view's node (graph.view of the base's node) is built when read and kept only as long as
    something else holds it (or, once realized, while the base keeps its value): a node kept
    here for good would count as a reader of the base's old value and stop the next write to the
    base from happening in place."""

    __slots__ = ("_base", "_window", "_writeable", "_cache")

    def __init__(self, base: Tensor, window: View, writeable: bool = True):
        if type(base) is not Tensor:  # (a view's view is made by TensorView._view, composed)
            raise TypeError(f"a view's base is a plain Tensor, got {type(base).__name__}")
        self._base = base
        self._window = window
        self._writeable = writeable
        # (weakref to the base's node it was built from, the node: weakly, or strongly once realized)
        self._cache: tuple[Any, Any, bool] | None = None
        if _tracer is not None:
            _tracer.made(self)

    @property
    def _node(self) -> Node:  # (a plain Tensor's is a slot; a view computes its own)
        base_node = self._base._node
        cache = self._cache
        if cache is not None and cache[0]() is base_node:
            if cache[2]:
                return cache[1]
            node = cache[1]()
            # (a node kept only weakly is taken again while lazy: once realized by whoever holds
            # it, its buffer may have been written in place since, this view not being its reader)
            if node is not None and node.buffer is None:
                return node
        node = graph.view(base_node, self._window)
        if node is not base_node:
            self._cache = (weakref.ref(base_node), weakref.ref(node), False)
        return node

    @_node.setter
    def _node(self, node: Node) -> None:
        raise AttributeError("a TensorView's node is its base's, read through its window: write it with assign")

    @property
    def base(self) -> Tensor:
        """The tensor this one is a view of (numpy's `ndarray.base`)."""
        return self._base

    @property
    def shape(self) -> tuple[int, ...]:
        return self._window.shape

    @property
    def ndim(self) -> int:
        return len(self._window.shape)

    @property
    def size(self) -> int:
        return prod(self._window.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._base.dtype

    @property
    def device(self) -> str:
        return self._base.device

    def _holds(self, node: Node) -> bool:
        # (not self._node: building a view node while the scheduler decides would add readers)
        cache = self._cache
        return cache is not None and cache[2] and cache[1] is node and cache[0]() is self._base._node

    def _realized(self) -> Node:
        graph.note_thread()
        with _write_lock:   # (the base's node and the view's, taken together, and realized)
            base_node = self._base._node
            node = self._node
            realize_nodes([node])
            if node is not base_node:  # keep the computed value while the base keeps its own
                self._cache = (weakref.ref(base_node), node, True)
                node.add_reader(self)  # (a tensor holding it: a write to a copy of it must not go in place)
        return node

    def _view(self, v: View, writeable: bool = True) -> "Tensor":
        window = compose(v, self._window) if v.mask is None else None
        if window is None or window.mask is not None:
            # no single strided window on the base (a reshape of a transpose...): numpy copies
            return Tensor(graph.view(self._node, v))
        return TensorView(self._base, window, writeable and self._writeable)

    def _write(self, value: Node, region: View | None) -> None:
        if not self._writeable:
            raise ValueError(f"assignment destination is read-only: this tensor of shape {self.shape} is a "
                             f"broadcast_to view of one of shape {self._base.shape} (several of its elements "
                             f"are one element of the base); write to a copy (ug.tensor(v)) instead")
        window = self._window if region is None else compose(region, self._window)
        with _write_lock:   # (reentrant: the base's _write takes it too)
            if window is None:  # (basic indexing of a strided window composes; kept for any other region)
                value, window = graph.assign(self._node, value, region), self._window
            self._base._write(value, window)

    def _replace_node(self, node: Node) -> None:
        """A new value for the whole view (ug.jit's replays, numpy's out=): written into the base."""
        self._write(node, None)

    def _host_memory(self) -> np.ndarray | None:
        """The base's memory read through the window (DLPack export lends the base's elements, as
        numpy's does for a view), on a device whose memory is the host's; else None."""
        base = self._base._host_memory()
        if base is None or not self._writeable:
            return None   # (a read-only view exports a copy: a consumer could write through it)
        w, flat = self._window, base.reshape(-1)
        if not w.size:
            return np.empty(w.shape, flat.dtype)
        return np.lib.stride_tricks.as_strided(flat[w.offset:], w.shape, tuple(s * flat.itemsize for s in w.strides))


_ADVANCED = (Tensor, np.ndarray, list, bool, np.bool_)
"""Index items that make an index numpy's advanced indexing (integer arrays, boolean masks,
0-d ones such as True included): a gather or scatter, never a view."""


def _is_advanced(index: Any) -> bool:
    return isinstance(index, _ADVANCED) or (isinstance(index, tuple) and any(isinstance(i, _ADVANCED) for i in index))


def _advanced_items(index: Any) -> tuple[Any, ...]:
    """An advanced index as a tuple, a bool in it (x[True]) as the 0-d mask it is."""
    items = index if isinstance(index, tuple) else (index,)
    return tuple(np.asarray(i) if isinstance(i, (bool, np.bool_)) else i for i in items)


def _indexes_every_dim(index: Any) -> bool:
    """Whether a basic index gives an integer for every dimension (no slice, None or ...)."""
    items = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in items)


def _into(out: Any, result: Tensor) -> Any:
    """A method's result, or with numpy's `out=`, written into out (a tensor: assigned, as
    numpy's reductions cast, unsafely; a numpy array: copied into), which is returned."""
    if out is None:
        return result
    if isinstance(out, np.ndarray):
        np.copyto(out, result.numpy(), casting="unsafe")
        return out
    if not isinstance(out, Tensor):
        raise TypeError(f"out must be a ug Tensor or a numpy array, got {type(out).__name__}")
    if out.shape != result.shape:
        raise ValueError(f"output parameter has the wrong shape: {out.shape}, the result's is {result.shape}")
    out.assign(result.astype(out.dtype) if result.dtype != out.dtype else result)
    return out


SPLIT_MIN_ELEMENTS = 1 << 16
"""A reduction at least this long over at most SPLIT_MAX_ROWS rows is done in two stages: partial
results over many rows first (parallel across threads / workgroups), then a short reduction of
those. One long serial loop per row would leave all but one core idle."""
SPLIT_MAX_ROWS = 16


def _split_reduce(node: Node, op: Op, axes: tuple[int, ...], dtype: np.dtype) -> Node | None:
    shape = node.shape
    n = prod([shape[a] for a in axes])
    rows = prod([s for d, s in enumerate(shape) if d not in axes])
    if n < SPLIT_MIN_ELEMENTS or rows > SPLIT_MAX_ROWS:
        return None
    most = min(1024, math.isqrt(n))
    parts = next((p for p in range(most, 63, -1) if n % p == 0), most)
    chunk = n // parts
    head = parts * chunk  # n, or (n has no divisor in range, e.g. a large prime) n - (n % parts)
    keep = [d for d in range(len(shape)) if d not in axes]
    kept = tuple(shape[d] for d in keep)
    flat = Tensor(node).permute(keep + list(axes)).reshape(*kept, n)
    staged = (flat if head == n else flat[..., :head]).reshape(*kept, parts, chunk)._node
    partial = graph.reduce(staged, op, (len(keep) + 1,), dtype)
    total = graph.reduce(partial, op, (len(keep),), dtype)
    if head < n:
        # the rest (fewer than `parts` elements) reduced on its own, then combined: every length
        # gets the two stages' accuracy (a prime length's single serial loop lost ~1e-6 in a
        # float32 sum on cpu, and 1e-1 on a gpu) and parallelism
        rest = graph.reduce(flat[..., head:]._node, op, (len(keep),), dtype)
        total = graph.view(total, View.contiguous(total.shape).reshape(rest.shape) or View.contiguous(rest.shape))
        total = graph.alu(REDUCE[op].combine, (total, rest), dtype)
    keepdims_shape = tuple(1 if d in axes else s for d, s in enumerate(shape))
    return graph.view(total, View.contiguous(total.shape).reshape(keepdims_shape) or View.contiguous(keepdims_shape))


def _written_array(value: Any, dtype: np.dtype, device: str) -> Tensor:
    """The tensor of a non-scalar value written into a tensor of `dtype`: nested Python numbers
    become `dtype` directly, as numpy's `a[:2] = [v, w]` (exactly: a float64 tensor's 0.1 is not
    rounded through ug's float32 default, and an int it cannot hold is an OverflowError); an
    array keeps its dtype (the write casts it, as numpy's)."""
    if isinstance(value, (list, tuple)) and not any(isinstance(v, Tensor) for v in value):
        try:
            value = np.asarray(value, dtype=dtype)
        except ValueError as e:
            raise ValueError(f"cannot write a ragged nested sequence: {e}") from e
    return tensor(value, device=device)


def graph_scalar(value: Scalar, dtype: np.dtype, device: str) -> Tensor:
    """A constant the library itself uses (mean's count, gelu's coefficients): folded into the
    kernel's code, unlike a user's scalar (see scalars)."""
    return Tensor(graph.const(value, dtype, device))


POW_FOLDED_EXPONENTS = 64
"""`x ** e` keeps a scalar exponent e in the code when 2e is an integer of at most twice this
size: a backend may compute such powers with multiplies and a square root. Other exponents are
kernel arguments, like any other scalar of the user's."""


def _check_integer_exponent(base_dtype: np.dtype, exponent: Any) -> None:
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
        return abs(exponent) <= POW_FOLDED_EXPONENTS
    if isinstance(exponent, float):
        return math.isfinite(exponent) and (2 * exponent).is_integer() and abs(exponent) <= POW_FOLDED_EXPONENTS
    raise TypeError(f"unexpected exponent {exponent!r} of type {type(exponent).__name__}")


def _as_tensor(x: Any, like: Tensor | None) -> Tensor:
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
        return _as_tensor(b, None)._binary(Op.MAX, a, True, ufunc=np.maximum)
    return a._binary(Op.MAX, b, ufunc=np.maximum)


def minimum(a: Any, b: Any) -> Tensor:
    if not isinstance(a, Tensor):
        return _as_tensor(b, None)._binary(Op.MIN, a, True, ufunc=np.minimum)
    return a._binary(Op.MIN, b, ufunc=np.minimum)


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """a where cond, else b, in their common dtype (numpy 2's): tensors, arrays and numpy scalars
    are typed and promote; a Python scalar is weak, it takes that dtype (exactly; an int it
    cannot hold is an OverflowError, where numpy's where wraps it); of two Python scalars, the
    default dtype of the higher kind (bool, int64, float32)."""
    like = next((t for t in (cond, a, b) if isinstance(t, Tensor)), None)
    if like is None:
        like = tensor(cond)
    c = Tensor(graph.const(bool(cond), dtypes.BOOL, like.device)) if dtypes.is_scalar(cond) else _as_tensor(cond, like)
    # a scalar branch stays a value until the dtype is known; an array is a typed tensor
    x, y = (v if dtypes.is_scalar(v) else _as_tensor(v, like) for v in (a, b))
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
    return _make(graph.alu(Op.WHERE, srcs, dt))


def matmul(a: Any, b: Any) -> Tensor:
    """numpy.matmul semantics: 1-D operands are promoted and the added dim removed; batch dims broadcast."""
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    a, b = _as_tensor(a, like), _as_tensor(b, like)
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
        from .array_api._complex import parts, combine
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
    out = _make(graph.matmul(an, bn, dt))
    shape = batch + ((a2.shape[-2],) if a.ndim > 1 else ()) + ((b2.shape[-1],) if b.ndim > 1 else ())
    return Tensor(graph.view(out._node, View.contiguous(shape))) if shape != out.shape else out


def custom(fn: Callable[..., Any], inputs: Iterable[Tensor], shape: Any, dtype: Any,
           vjp: Callable[..., Any] | None = None) -> Tensor:
    """A host function as a graph op: fn(out_ndarray, *input_ndarrays) fills `out` in place.
    `vjp(g, out, *inputs)`, built from ug ops, returns one cotangent (or None) per input: how
    ug.grad differentiates through it (without one, differentiating it is a TypeError)."""
    if not callable(fn):
        raise TypeError(f"custom: fn must be callable, got {fn!r}")
    inputs = list(inputs)
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"custom: inputs must be tensors, got {type(t).__name__}")
    devices = {t.device for t in inputs}
    if len(devices) > 1:
        raise ValueError(f"custom: inputs are on different devices: {sorted(devices)}")
    device = devices.pop() if devices else _resolve_device(None)
    dt = _check_supported(dtypes.to_dtype(dtype), device)
    if vjp is not None and not callable(vjp):
        raise TypeError(f"custom: vjp must be callable, got {vjp!r}")
    node = graph.custom(fn, tuple(t._node for t in inputs), shape_arg(shape), dt, device)
    if vjp is not None:
        from .autodiff import custom_vjps
        custom_vjps[node] = vjp
    return Tensor(node)
