"""The user-facing Tensor: numpy-like, lazy. Every method validates its input (shapes,
axes, dtypes, devices) and builds graph nodes; nothing runs until a value is needed.

Here: the Tensor and TensorView classes (node, properties, views, writes), the constructors the
frontend builds on (`tensor`, `full`), the device and dtype checks and ug.jit's tracing hooks. The
other methods live beside what they use, are declared in the class body (for type checkers) and
are bound in one place, array_api/methods.py, which ug_core imports first:
    tensor_arith.py       operators, elementwise math, where, maximum, minimum, matmul
    tensor_reduce.py      reductions (sum, max, mean, softmax, ...), long rows split in two stages
    tensor_index.py       movement (reshape, permute, squeeze, ...), basic indexing, assign
    tensor_io.py          values out: numpy(), item(), int()/float(), DLPack, ug.realize
    array_api/methods.py  the namespace's functions as methods (argmax, var, cumsum, any, round,
                          real, conj, ...), integer-array indexing, numpy's protocols, complex ops
Nothing here imports them: they build on this module."""

from __future__ import annotations

import operator
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from . import dtypes, graph, scalars, sharing
from .device import Buffer, LentBuffer
from .graph import Node
from .ops import Op
from .plugins import registry, unpickle_device
from .execute import realize_nodes
from .shapes import broadcast_node, shape_arg
from .view import View, compose, prod

Scalar = bool | int | float

write_lock = graph.graph_lock
"""The hook that makes writes to a tensor thread-safe: every write holds it from reading the
tensor's current node (the value it builds on) to `_replace_node` (assign, __setitem__, and
replay.general_replay's writes). Without it, two threads writing rows of one tensor both build
on the same old node and the second replaces the first's write (it is lost). Build what does
not read the tensor (the written value) before taking it."""


# --- devices and dtypes -----------------------------------------------------------------


def resolve_device(device: str | None) -> str:
    """A device argument as a usable device's name: None is the preferred device; a name the
    registry does not have is a ValueError naming the available ones."""
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


def check_supported(dtype: np.dtype, device: str) -> np.dtype:
    """`dtype`, which the device must support (TypeError naming the ones it does)."""
    dev = registry.get(device)
    if dtype not in dev.dtypes:
        names = ", ".join(sorted(d.name for d in dev.dtypes))
        raise TypeError(f"device {device!r} does not support dtype {dtype.name} (it supports {names})")
    return dtype


def checked_tensor(node: Node) -> Tensor:
    """The tensor of `node`, whose dtype its device must support (TypeError naming both)."""
    check_supported(node.dtype, node.device)
    return Tensor(node)


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
    dev = resolve_device(device)
    arr = _to_array(data, dt)
    check_supported(arr.dtype, dev)
    buf = Buffer(registry.get(dev), arr.size, arr.dtype).copy_in(arr)
    return Tensor(graph.from_buffer(buf, arr.shape))


def snapshot(t: "Tensor") -> "Tensor":
    """A new tensor holding t's value as it is now (ug.tensor(t), asarray(t, copy=True),
    copy.deepcopy): see sharing.snapshot_node."""
    return Tensor(sharing.snapshot_node(t._node, tracing()))


def _unpickle(array: np.ndarray, device: str) -> "Tensor":
    """A pickled tensor (Tensor.__reduce__): its value on the device plugins.unpickle_device picks
    (the unpickled array is this tensor's alone, so a host-memory device takes its memory rather
    than a copy, as asarray would: dask.distributed's out-of-band frames arrive so)."""
    dev = registry.get(unpickle_device(device))
    if array.size and array.flags.c_contiguous and array.dtype in dev.dtypes:
        handle = dev.wrap_host(array)   # (None where the device's memory is not the host's)
        if handle is not None:   # (as creation._lend: read-only memory is lent read-only)
            buffer = LentBuffer(dev, array.size, array.dtype, handle, writable=bool(array.flags.writeable))
            return Tensor(graph.from_buffer(buffer, array.shape))
    return tensor(array, device=dev.name)


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
    dev = resolve_device(device)
    dt = check_supported(dt, dev)
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


def graph_scalar(value: Scalar, dtype: np.dtype, device: str) -> Tensor:
    """A constant the library itself uses (mean's count, gelu's coefficients): folded into the
    kernel's code, unlike a user's scalar (see scalars)."""
    return Tensor(graph.const(value, dtype, device))


# --- ug.jit's hooks -------------------------------------------------------------------------

# ug.jit's hooks (jit.tracer._Tracer) while some thread traces a jitted function, else None (the one
# check the hot paths pay). While a function is traced its tensors have no values yet, so the
# trace must see which tensors it makes, which ones it writes, and any read of a value.
_tracer: Any = None


def tracing() -> bool:
    """Whether ug.jit is tracing a function on this thread (realizing then does nothing)."""
    return _tracer is not None and _tracer.tracing()


class TracerValueError(RuntimeError):
    """A jitted function read the value of a traced tensor to Python while it was traced."""


def before_read(t: Tensor) -> None:
    """Raises TracerValueError where `t`'s value is one a jitted function's trace does not have
    (reading it would freeze one call's value into every replay); nothing outside a trace."""
    if _tracer is not None:
        _tracer.before_read(t)


def values_for_shape(t: "Tensor", what: str) -> np.ndarray:
    """t's values on the host, which the shape of `what` depends on (a data-dependent op: boolean
    masks, nonzero, bincount). Inside a ug.jit trace that is an error saying why: the trace
    would freeze one call's shape into every later call."""
    if tracing():
        raise TracerValueError(
            f"ug.jit: {what} has a shape that depends on the values of a tensor, so it cannot be traced (a "
            f"trace is one sequence of kernels of fixed shapes, replayed on new values). Call it outside the "
            f"jitted function and jit the parts before and after it, or give the mask or indices as a numpy "
            f"array (a value known when traced: each new one is traced once).")
    return t.numpy()


class Tensor:
    """A lazy n-dimensional array on one device.

    numpy's rule for writes and aliasing: what numpy documents as a view (basic indexing,
    reshape where one strided view does it, permute/.T, expand_dims, squeeze, flip,
    broadcast_to, diagonal, ...) is a `TensorView` of this tensor: it reads this tensor's value
    as it is when read, and a write to it (`assign`, `v[idx] = x`) writes this tensor's region.
    Everything else (arithmetic, `ug.tensor(t)`, astype, pad, roll, concat, take, boolean and
    integer-array indexing, ...) is a new value: a later write to either side leaves the other
    as it was. A write happens in place in memory whenever nothing can observe the old value
    (see schedule.assign._in_place_assigns); a value read before it keeps the old one."""

    __slots__ = ("_node", "__weakref__")
    __array_priority__ = 1000

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
        `write_lock` from reading `self._node` to this call (see there). The order of the
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
    def nbytes(self) -> int:
        """The bytes of the value: size * itemsize (numpy's; cubed and dask size chunks by it)."""
        return prod(self._node.shape) * self._node.dtype.itemsize

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

    # --- its value ---
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
        with write_lock:   # (no write may come between taking the node and its realize's decisions)
            node = self._node
            realize_nodes([node])
        return node

    def to_device(self, device: str, /, *, stream: Any = None) -> "Tensor":
        """The Array API spelling of `.to(device)`; ug has no streams, so `stream` must be None."""
        if stream is not None:
            raise ValueError(f"to_device: ug devices have no streams, got stream={stream!r}")
        return self.to(device)

    def to(self, device: str) -> "Tensor":
        device = resolve_device(device)
        if device == self.device:
            return Tensor(self._node)
        check_supported(self.dtype, device)
        return Tensor(graph.copy(self._node, device))

    def astype(self, dtype: Any, copy: bool = True) -> "Tensor":
        """This value as `dtype`; copy=False (numpy's keyword, which dask's astype task passes)
        returns this tensor itself when it has that dtype already."""
        dt = dtypes.to_dtype(dtype)
        if not copy and dt == self.dtype:
            return self
        return checked_tensor(graph.cast(self._node, check_supported(dt, self.device)))

    def detach(self) -> "Tensor":
        """This value with no gradient flowing back through it (ug.stop_gradient)."""
        return Tensor(graph.detach(self._node))

    # --- views and writes (numpy's, see TensorView) ---
    def _view(self, v: View, writeable: bool = True) -> "Tensor":
        """This tensor read through `v` (which indexes its contiguous layout), as a view that
        aliases it; a masked read (pad) is a new value."""
        if v.mask is not None:
            return Tensor(graph.view(self._node, v))
        return TensorView(self, v, writeable)

    def _write(self, value: Node, region: View | None) -> None:
        """Write `value` into this tensor: all of it, or `region` (a View over its layout). Under
        the write lock from reading the current node to replacing it: writes from several
        threads are not lost (see faults)."""
        graph.note_thread()
        with write_lock:
            node = self._node
            if region is not None and value.op is Op.VIEW and value.srcs and value.srcs[0] is node and value.arg == region:
                return  # x[idx] = x[idx]: the write-back of `x[idx] += v` after its view wrote x already
            if region is None and node.buffer is None and node.op is not Op.ASSIGN:
                # all of a value that has no memory yet: the new value is all there is to keep (an
                # ASSIGN would first compute the old value into a buffer to write over)
                self._replace_node(value)
                return
            self._replace_node(graph.assign(node, value, region))

    @property
    def T(self) -> "Tensor":
        return self.permute(tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> "Tensor":
        """The matrix transpose of a stack of matrices (the last two axes swapped)."""
        if self.ndim < 2:
            raise ValueError(f"mT needs at least 2 dimensions, got shape {self.shape}")
        return self.permute((*range(self.ndim - 2), self.ndim - 1, self.ndim - 2))

    # --- copy and pickle: by value ---
    def __copy__(self) -> "Tensor":
        """copy.copy: a new tensor with this one's value now (ug.tensor(t))."""
        return snapshot(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> "Tensor":
        """copy.deepcopy: a new tensor with this one's value now (ug.tensor(t))."""
        out = memo[id(self)] = snapshot(self)
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        """pickle: the value, computed and copied to the host (a lazy tensor is realized), with its
        dtype and its device's name. Unpickling puts it on the device `unpickle_device` picks: by
        default the device of that name (ValueError, or the DeviceUnavailableError saying why, where
        the reading process has no such usable device); $UG_UNPICKLE_DEVICE=preferred puts it on the
        reading process's preferred device, =NAME on that device (a dask or cubed worker sets it in
        its environment). The host array pickles out of band under protocol 5 (dask.distributed)."""
        return (_unpickle, (self.numpy(), self.device))

    if TYPE_CHECKING:
        # The methods bound in array_api/methods.py, as type checkers see them (mypy checks each
        # binding there against its declaration here); grouped by the module that has them.
        # tensor_arith: operators and elementwise functions
        def _binary(self, op: Op, other: Any, reverse: bool = False, ufunc: Callable[..., Any] | None = None
                    ) -> Tensor: ...
        def _unary(self, op: Op, ufunc: Callable[..., Any]) -> Tensor: ...
        def __add__(self, o: Any) -> Tensor: ...
        __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = __pow__ = __rpow__ = __add__
        __lt__ = __le__ = __gt__ = __ge__ = __matmul__ = __rmatmul__ = __floordiv__ = __rfloordiv__ = __add__
        __mod__ = __rmod__ = __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __add__
        __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = __add__
        __iadd__ = __isub__ = __imul__ = __itruediv__ = __ifloordiv__ = __imod__ = __ipow__ = __imatmul__ = __add__
        __iand__ = __ior__ = __ixor__ = __ilshift__ = __irshift__ = __add__
        def __eq__(self, o: Any) -> Tensor: ...  # type: ignore[override]
        def __ne__(self, o: Any) -> Tensor: ...  # type: ignore[override]
        def __neg__(self) -> Tensor: ...
        __pos__ = __abs__ = __invert__ = __neg__
        def exp(self) -> Tensor: ...
        log = sqrt = sin = cos = tanh = abs = reciprocal = exp
        _float = relu = sigmoid = gelu = silu = exp
        # tensor_reduce: reductions
        def _reduce(self, op: Op, axis: Any, keepdims: bool, dtype: np.dtype) -> Tensor: ...
        def sum(self, axis: Any = None, keepdims: bool = False, *, dtype: Any = None, out: Any = None) -> Tensor: ...
        prod = mean = sum
        def max(self, axis: Any = None, keepdims: bool = False, *, out: Any = None) -> Tensor: ...
        min = max
        def softmax(self, axis: int = -1) -> Tensor: ...
        log_softmax = softmax
        # tensor_index: movement, basic indexing, writes
        def reshape(self, *shape: Any) -> Tensor: ...
        def permute(self, *axes: Any) -> Tensor: ...
        transpose = permute
        def broadcast_to(self, shape: Any) -> Tensor: ...
        def squeeze(self, axis: Any = None) -> Tensor: ...
        def expand_dims(self, axis: Any) -> Tensor: ...
        def unsqueeze(self, axis: int) -> Tensor: ...
        flatten = exp
        def ravel(self, order: str = "C") -> Tensor: ...
        def assign(self, value: Any) -> Tensor: ...
        # tensor_io: values out
        def numpy(self) -> np.ndarray: ...
        def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray: ...
        def item(self) -> Scalar: ...
        def __bool__(self) -> bool: ...
        def __float__(self) -> float: ...
        def __int__(self) -> int: ...
        __index__ = __int__
        def __complex__(self) -> complex: ...
        def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                       dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any: ...
        def __dlpack_device__(self) -> tuple[int, int]: ...
        def _host_memory(self) -> np.ndarray | None: ...
        # array_api/methods: the namespace's functions as methods
        def argmax(self, axis: int | None = None, keepdims: bool = False, *, out: Any = None) -> Tensor: ...
        argmin = argmax
        def var(self, axis: Any = None, *, dtype: Any = None, out: Any = None, ddof: float = 0, keepdims: bool = False,
                correction: float | None = None) -> Tensor: ...
        std = var
        def cumsum(self, axis: int | None = None, dtype: Any = None, out: Any = None) -> Tensor: ...
        cumprod = cumsum
        def any(self, axis: Any = None, *, out: Any = None, keepdims: bool = False) -> Tensor: ...
        all = any
        def round(self, decimals: int = 0, out: Any = None) -> Tensor: ...
        conj = conjugate = exp
        @property
        def real(self) -> Tensor: ...
        @property
        def imag(self) -> Tensor: ...
        def __getitem__(self, index: Any) -> Tensor: ...
        def __setitem__(self, index: Any, value: Any) -> None: ...
        def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any: ...
        def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any: ...
        def __array_namespace__(self, api_version: str | None = None) -> Any: ...
        def _complex_binary(self, op: Op, other: Any, reverse: bool, common: np.dtype) -> Tensor: ...
        def _complex_unary(self, op: Op) -> Tensor: ...
        def _complex_reduce(self, op: Op, axes: tuple[int, ...], keepdims: bool, dtype: np.dtype) -> Tensor: ...


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
        with write_lock:   # (the base's node and the view's, taken together, and realized)
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
        with write_lock:   # (reentrant: the base's _write takes it too)
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
