"""Creation functions of the Array API standard, as lazy ug ops.

Index-based ones (arange, linspace, eye, tril, triu) are elementwise expressions of index
vectors (`_common.iota`, ops.Op.IOTA: no memory, each element computed from its index where it
is read), so they fuse into their consumers' kernels."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .. import dtypes, graph
from ..device import LentBuffer
from ..plugins import registry as _registry
from ..tensor import (Tensor, check_supported, full as _full, resolve_device, snapshot, tensor as _tensor,
                      zeros as _zeros)
from ..tensor_arith import combine, where
from ._common import check_tensor, iota
from .elementwise import floor

_DTYPE_LIKE = (type, np.dtype, str)


def _device(device: str | None) -> str:
    return resolve_device(device)


def _host_array(obj: Any) -> Any:
    """What numpy can read: dlpack and buffer-protocol objects become ndarrays; nested
    sequences and scalars pass through for `tensor` (whose default dtypes are ug's)."""
    if hasattr(obj, "__dlpack__") and not isinstance(obj, np.ndarray):
        return np.from_dlpack(obj)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return np.asarray(memoryview(obj))
    if isinstance(obj, np.generic):
        return np.asarray(obj)
    return obj


def _lend(array: Any, dtype: np.dtype | None, device: str) -> Tensor | None:
    """A tensor over the memory of a host array (no copy), where the device can run kernels on
    it (Device.wrap_host: the host devices); None where a copy is needed."""
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous or (dtype is not None and dtype != array.dtype):
        return None
    dev = _registry.get(device)
    if array.dtype not in dev.dtypes:
        return None
    handle = dev.wrap_host(array) if array.size else None
    if handle is None:
        return None
    # read-only memory (setflags(write=False), frombuffer of bytes, a read-only memmap) is
    # borrowed read-only: ug never writes it, a write to the tensor goes into a buffer of its own
    buffer = LentBuffer(dev, array.size, array.dtype, handle, writable=bool(array.flags.writeable))
    return Tensor(graph.from_buffer(buffer, array.shape))


def asarray(obj: Any, /, *, dtype: Any = None, device: str | None = None, copy: bool | None = None) -> Tensor:
    """A tensor of `obj`. copy=None reuses what needs no conversion: a tensor, or on a host-memory
    device (cpu, c, ref) the memory of a numpy array or DLPack exporter of the right dtype, which
    the tensor then shares (writes through either are seen by both, as with numpy.asarray);
    copy=True always copies; copy=False raises ValueError where a copy is needed."""
    dt = dtypes.to_dtype(dtype) if dtype is not None else None
    if isinstance(obj, Tensor):
        out = obj if dt is None or dt == obj.dtype else obj.astype(dt)
        if device is not None and _device(device) != out.device:
            out = out.to(device)
        if out is not obj and copy is False:
            raise ValueError(f"asarray(copy=False): converting a {obj.dtype.name} tensor on {obj.device!r} "
                             f"to dtype {dt.name if dt else obj.dtype.name} on {device or obj.device!r} needs a copy")
        return snapshot(out) if copy else out
    data = _host_array(obj)
    if not copy:
        lent = _lend(data, dt, _device(device))
        if lent is not None:
            return lent
        if copy is False:
            raise ValueError(f"asarray(copy=False): {type(obj).__name__} data must be copied into a buffer of "
                             f"device {_device(device)!r} (not host memory it can use in place, or another dtype "
                             f"or layout)")
    return _tensor(data, dtype=dt, device=device)


def from_dlpack(x: Any, /, *, device: str | None = None, copy: bool | None = None) -> Tensor:
    """A tensor of a DLPack exporter's data: sharing its memory where the device can (copy=None
    or False, see asarray), else a copy (copy=False then raises ValueError)."""
    if isinstance(x, (Tensor, np.ndarray)):   # (numpy's own DLPack export refuses big-endian data)
        return asarray(x, device=device, copy=copy)
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"from_dlpack: {type(x).__name__} does not support the DLPack protocol")
    return asarray(np.from_dlpack(x), device=device, copy=copy)


def _scalar_dtype(values: Sequence[Any], dtype: Any) -> np.dtype:
    """The dtype of a range of Python numbers: `dtype`, else int64 for ints, float32 for floats."""
    if dtype is not None:
        return dtypes.to_dtype(dtype)
    for v in values:
        if not dtypes.is_scalar(v):
            raise TypeError(f"expected Python numbers, got {v!r}")
    return np.dtype(np.float32) if any(isinstance(v, (float, np.floating)) for v in values) else np.dtype(np.int64)


F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)


def _arange_values(n: int, start: Any, step: Any, dt: np.dtype, device: str) -> Tensor:
    """numpy's arange fill (its `<type>_fill`): v0 = start and v1 = start + step, each rounded to
    `dt`, then v[i] = v0 + i * (v1 - v0) in dt's arithmetic (float16's in float32, rounded once;
    i converted to it as C converts), so integers are exact and floats are numpy's bits."""
    if dt == dtypes.BOOL:  # (numpy fills at most two bools: False, True)
        return _arange_values(n, start, step, np.dtype(np.int64), device).astype(dt)
    work = F32 if dt == F16 else dt
    exact = [dt.type(start), dt.type(start + step)]  # numpy's first two elements, set directly
    v0, delta = work.type(exact[0]), work.type(work.type(exact[1]) - work.type(exact[0]))
    values = iota(n, device, work)
    if delta != 1:
        values = values * delta.item()
    values = values + v0.item()
    if dt.kind == "f":  # the formula at i = 0, 1 (as the device computes it) may not give v0, v1
        index = None
        for i, want in enumerate(exact[:n]):
            got = dt.type(work.type(work.type(i) * delta if delta != 1 else work.type(i)) + v0)
            if got.tobytes() != want.tobytes():
                index = iota(n, device) if index is None else index
                values = where(index == i, _full((), want.item(), work, device), values)
    return values.astype(dt)


def arange(start: Any, /, stop: Any = None, step: Any = 1, *, dtype: Any = None, device: str | None = None) -> Tensor:
    """start, start + step, ... up to stop (excluded). `arange(n, dtype)` (ug's older form, with
    the dtype second) still works."""
    if stop is not None and isinstance(stop, _DTYPE_LIKE) and dtype is None:
        stop, dtype = None, stop
    if stop is None:
        start, stop = 0, start
    dt = _scalar_dtype((start, stop, step), dtype)
    if step == 0:
        raise ValueError("arange: step must not be zero")
    if all(isinstance(v, (int, np.integer)) for v in (start, stop, step)):
        n = len(range(int(start), int(stop), int(step)))
    else:
        n = max(0, math.ceil((stop - start) / step))
    dev = _device(device)
    if n == 0:
        return _zeros((0,), dt, dev)
    return _arange_values(n, start, step, dt, dev)


def linspace(start: Any, stop: Any, /, num: int, *, dtype: Any = None, device: str | None = None,
             endpoint: bool = True) -> Tensor:
    """num evenly spaced values from start to stop (included when `endpoint`, exactly). An
    integer dtype gets numpy's: the values computed in float64 (float32 where the device has
    no float64) rounded down (floor, not torch's toward zero), then cast; bool: nonzero."""
    if not isinstance(num, (int, np.integer)) or num < 0:
        raise ValueError(f"linspace: num must be a non-negative int, got {num!r}")
    complex_ends = any(isinstance(v, (complex, np.complexfloating)) for v in (start, stop))
    dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.DEFAULT_COMPLEX if complex_ends else np.dtype(np.float32)
    dev = _device(device)
    if dt.kind == "c":   # the real parts' and the imaginary parts' linspaces (numpy's, part by part)
        part = dtypes.part_dtype(dt)
        a, b = complex(start), complex(stop)
        re = linspace(a.real, b.real, num, dtype=part, device=device, endpoint=endpoint)
        im = linspace(a.imag, b.imag, num, dtype=part, device=device, endpoint=endpoint)
        return combine(re, im)
    if complex_ends:
        raise TypeError(f"linspace: complex start or stop {start!r}, {stop!r} for the real dtype {dt.name}")
    if dt.kind != "f":
        check_supported(dt, dev)
        work_dt = F64 if F64 in _registry.get(dev).dtypes else np.dtype(np.float32)
        values = linspace(start, stop, num, dtype=work_dt, device=device, endpoint=endpoint)
        return (values if dt.kind == "b" else floor(values)).astype(dt)
    if num == 0:
        return _zeros((0,), dt, dev)
    # numpy's: i * step + start in float64 (where the device has it), the endpoint set exactly
    work = F64 if F64 in _registry.get(dev).dtypes else dt
    div = num - 1 if endpoint else num
    delta = stop - start
    step = delta / div if div > 0 else 0.0
    index = iota(num, dev, work)
    out = (index / div * delta if div > 0 and step == 0 else index * step) + start
    if endpoint and num > 1:
        out = where(iota(num, dev) == num - 1, _full((), stop, work, dev), out)
    return out.astype(dt)


def _grid(n_rows: int, n_cols: int, device: str) -> Tensor:
    """col - row for an (n_rows, n_cols) grid (index dtype), lazily."""
    rows = iota(n_rows, device).reshape(n_rows, 1)
    cols = iota(n_cols, device).reshape(1, n_cols)
    return cols - rows


def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None,
        device: str | None = None) -> Tensor:
    """Ones on the k-th diagonal."""
    n_cols = n_rows if n_cols is None else n_cols
    for name, v in (("n_rows", n_rows), ("n_cols", n_cols), ("k", k)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise TypeError(f"eye: {name} must be an int, got {v!r}")
    if n_rows < 0 or n_cols < 0:
        raise ValueError(f"eye: negative size ({n_rows}, {n_cols})")
    dt = dtypes.to_dtype(dtype) if dtype is not None else np.dtype(np.float32)
    dev = _device(device)
    if n_rows == 0 or n_cols == 0:
        return _zeros((n_rows, n_cols), dt, dev)
    k = max(min(int(k), n_cols), -n_rows)  # a diagonal outside the matrix is as good as any (no overflow)
    return (_grid(n_rows, n_cols, dev) == k).astype(dt)


def _triangle(x: Tensor, k: int, lower: bool, fn: str) -> Tensor:
    check_tensor(x, fn)
    if x.ndim < 2:
        raise ValueError(f"{fn}: needs at least 2 dimensions, got shape {x.shape}")
    if x.size == 0:
        return Tensor(x.node)
    diff = _grid(x.shape[-2], x.shape[-1], x.device)
    keep = diff <= k if lower else diff >= k
    return where(keep, x, False if x.dtype == dtypes.BOOL else 0)


def tril(x: Tensor, /, *, k: int = 0) -> Tensor:
    """x with the elements above the k-th diagonal zeroed."""
    return _triangle(x, k, True, "tril")


def triu(x: Tensor, /, *, k: int = 0) -> Tensor:
    """x with the elements below the k-th diagonal zeroed."""
    return _triangle(x, k, False, "triu")


def full(shape: Any, fill_value: Any, dtype: Any = None, device: str | None = None) -> Tensor:
    """A tensor of `fill_value` (dtype and device may be given positionally too, ug's older form)."""
    if isinstance(fill_value, Tensor):
        raise TypeError("full: fill_value must be a Python scalar, got a Tensor")
    return _full(shape, fill_value, dtype, device)


def zeros(shape: Any, dtype: Any = None, device: str | None = None) -> Tensor:
    return _full(shape, 0, np.float32 if dtype is None else dtype, device)


def ones(shape: Any, dtype: Any = None, device: str | None = None) -> Tensor:
    return _full(shape, 1, np.float32 if dtype is None else dtype, device)


def empty(shape: Any, *, dtype: Any = None, device: str | None = None) -> Tensor:
    """Zeros: ug tensors are values, so an "uninitialized" one is as cheap as zeros (a broadcast
    constant, no memory until used)."""
    return zeros(shape, dtype, device)


def full_like(x: Tensor, /, fill_value: Any, *, dtype: Any = None, device: str | None = None,
              shape: Any = None) -> Tensor:
    """The standard's full_like; `shape` (numpy's, which cubed's element counts pass) replaces x's."""
    check_tensor(x, "full_like")
    return full(x.shape if shape is None else shape, fill_value, x.dtype if dtype is None else dtype,
                x.device if device is None else device)


def zeros_like(x: Tensor, /, *, dtype: Any = None, device: str | None = None) -> Tensor:
    return full_like(x, 0, dtype=dtype, device=device)


def ones_like(x: Tensor, /, *, dtype: Any = None, device: str | None = None) -> Tensor:
    return full_like(x, 1, dtype=dtype, device=device)


def empty_like(x: Tensor, /, *, dtype: Any = None, device: str | None = None) -> Tensor:
    return zeros_like(x, dtype=dtype, device=device)


def meshgrid(*arrays: Tensor, indexing: str = "xy") -> list[Tensor]:
    """Coordinate grids of 1-d tensors (broadcast views, no copies)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    for i, a in enumerate(arrays):
        check_tensor(a, "meshgrid", f"arrays[{i}]")
        if a.ndim != 1:
            raise ValueError(f"meshgrid: arrays must be 1-d, arrays[{i}] has shape {a.shape}")
    if len({a.dtype for a in arrays}) > 1:
        raise ValueError(f"meshgrid: arrays must have one dtype, got {sorted(a.dtype.name for a in arrays)}")
    sizes = [a.shape[0] for a in arrays]
    swap = indexing == "xy" and len(arrays) >= 2
    if swap:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, a in enumerate(arrays):
        axis = (1 - i if i < 2 else i) if swap else i
        shape = tuple(s if d == axis else 1 for d, s in enumerate(sizes))
        out.append(a.reshape(shape).broadcast_to(tuple(sizes)))
    return out


__all__ = ["arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like", "linspace",
           "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like"]
