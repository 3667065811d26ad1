"""ug tensors as the chunks of dask arrays (issue 28): `import ug_core.dask` registers ug's Tensor
with dask.array, and its helpers make dask arrays whose chunks are ug tensors from end to end.

`import ug_core` never imports dask; this module does (dask[array] must be installed).

What importing it registers (`register()`, idempotent):
- `dask.array.register_chunk_type(Tensor)`: dask wraps ug tensors as chunks and does not defer to
  them in arithmetic;
- dask.array's dispatch tables, so its own tasks run ug's functions on ug chunks:
  concatenate (`ug.concat`), take, tensordot, einsum, empty (numpy: da.percentile's host arrays), divide, numel/nannumel
  (counts as ug tensors, for mean/var), percentile (`da.percentile`), to_numpy;
- `dask.sizeof` of a Tensor: its bytes (distributed's memory accounting and transfer costs);
- dask's `array_optimize`: dask.array's own, then each task made to hand back its ug tensors
  realized (`optimize`; not when the user set an optimization of their own);
- in `distributed.nanny.pre-spawn-environ` (unless this process's environment or that setting
  has them already): $UG_LLVM_THREADS as dask's OMP_NUM_THREADS (1) and UG_TIER=1: the worker
  processes that nannies started from this process (a LocalCluster's) run ug on one thread each
  and compile kernels before their first run (see `register`).
Everything else dask calls on chunks goes through numpy's protocols (`__array_function__`,
`__array_ufunc__`), which ug tensors implement: reductions with `dtype=`, argmax via NEP 35's
`like=`, cumsum, sort, unique, pad...

Helpers:
- `from_array(x, chunks)`: a dask array of ug chunks from a ug tensor, a numpy array or anything
  `ug.asarray` takes (`device=` picks the chunks' device; the meta is a ug tensor);
- `generate(fn, shape, chunks, dtype)`: a virtual array, each chunk made by `fn` where it is
  computed (no data in the graph: arrays larger than any worker's memory);
- `map_blocks`, `blockwise`, `map_overlap`: dask's, with ug metas and, under the jit setting, the
  function run under `ug.jit` in each worker process (`jit(True)`, `$UG_DASK_JIT=1`, or `jit=` on a
  call): tasks of one function on chunks of one shape trace once per process and replay after;
- `to_numpy(x)`: the same array with numpy chunks.

Where the chunks run: each task computes on the device its input chunks are on; a chunk sent to
another worker process is pickled by value and lands on the device `ug_core.plugins.unpickle_device`
picks there (the same name by default, `$UG_UNPICKLE_DEVICE=preferred` for the worker's own).
"""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from typing import Any, Callable, Iterator, Sequence

import dask
import dask.array as da
import numpy as np
from dask.array import chunk_types, dispatch
from dask.sizeof import sizeof

import ug_core as _api
from .cache import Cache, declare
from .env import env_flag
from .jit import jit as _ug_jit
from .tensor import Tensor

TIER_ENV = "UG_TIER"
"""ug's tier mode, which a dask worker process gets from its nanny as "1" (see `register`)."""

THREADS_ENV = "UG_LLVM_THREADS"
"""The cpu device's thread count, which a dask worker process gets from its nanny (see `register`)."""

JIT_ENV = "UG_DASK_JIT"
"""Run the helpers' functions under ug.jit (1/true/yes/on) unless a call says otherwise."""

_JITTED = declare("dask.jitted", 64)   # (each process's ug.jit of the functions that tasks run)
_jitted: Cache[str, Any] = Cache(_JITTED, max_entries=64)
_jit_setting: list[bool | None] = [None]   # jit(...): overrides $UG_DASK_JIT while set
_registered = [False]


# --- registration -----------------------------------------------------------------------------


def _concatenate(arrays: Sequence[Any], axis: int = 0) -> Tensor:
    """dask's concatenate task: ug.concat, with any non-ug piece (a numpy block dask made itself)
    put on the ug pieces' device."""
    device = next(a.device for a in arrays if isinstance(a, Tensor))
    return _api.concat([a if isinstance(a, Tensor) else _api.asarray(a, device=device) for a in arrays], axis=axis)


def _numel(x: Tensor, **kwargs: Any) -> Tensor:
    """How many elements each reduction over `axis` counts, as a ug tensor on x's device (dask's
    mean and var divide ug sums by it)."""
    axis = kwargs.get("axis")
    keepdims = kwargs.get("keepdims", False)
    dtype = kwargs.get("dtype") or np.float64
    axes = tuple(range(x.ndim)) if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % x.ndim for a in axes) if x.ndim else ()
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape)) if keepdims else \
        tuple(n for i, n in enumerate(x.shape) if i not in axes)
    return _api.full(shape, count, dtype=dtype, device=x.device)


def _nannumel(x: Tensor, **kwargs: Any) -> Tensor:
    """How many non-NaN elements each reduction over `axis` counts (dask's nanmean/nanvar)."""
    counted: Tensor = np.sum(~np.isnan(x), **kwargs)
    return counted


def _einsum(subscripts: str, *operands: Any, dtype: Any = None, casting: str = "safe", optimize: Any = False,
            **kwargs: Any) -> Tensor:
    """dask's einsum task (numpy's signature): ug.einsum on the operands in `dtype` when given (dask
    passes its result dtype); `casting` and `optimize` are numpy's planning choices, ug plans its own."""
    if kwargs:
        raise TypeError(f"einsum: unexpected arguments {sorted(kwargs)}")
    if dtype is not None:
        operands = tuple(_api.astype(_api.asarray(o), dtype) for o in operands)
    return _api.einsum(subscripts, *operands)


def _percentile(a: Tensor, q: Any, method: str = "linear") -> tuple[Any, int]:
    """One chunk's percentiles for da.percentile (which merges them on the host, as for numpy
    chunks): the chunk's own, computed by ug."""
    n = len(a)
    if not n:
        return None, n
    if not np.issubdtype(a.dtype, np.number):
        method = "nearest"
    percentile: Callable[..., Any] = np.percentile   # (on a Tensor: ug's, through __array_function__)
    return np.asarray(percentile(a, list(q), method=method)), n


def register() -> None:
    """Register ug's Tensor with dask.array (see the module doc); done on import, idempotent."""
    if _registered[0]:
        return
    if Tensor not in chunk_types._HANDLED_CHUNK_TYPES:
        chunk_types.register_chunk_type(Tensor)
    dispatch.concatenate_lookup.register(Tensor, _concatenate)
    dispatch.take_lookup.register(Tensor, lambda a, indices, axis=None: _api.take(a, _api.asarray(
        indices, device=a.device), axis=axis))
    dispatch.tensordot_lookup.register(Tensor, _api.tensordot)
    dispatch.einsum_lookup.register(Tensor, _einsum)
    # only da.percentile asks it, for small host-side work arrays (its q with 0 and 100 added)
    dispatch.empty_lookup.register(Tensor, np.empty)
    dispatch.divide_lookup.register(Tensor, lambda a, b, dtype=None: _divide(a, b, dtype))
    dispatch.numel_lookup.register(Tensor, _numel)
    dispatch.nannumel_lookup.register(Tensor, _nannumel)
    dispatch.percentile_lookup.register(Tensor, _percentile)
    dispatch.to_numpy_dispatch.register(Tensor, lambda x, **kwargs: x.numpy())
    # what the chunk holds (or will, once realized): distributed's memory limits, spilling and
    # transfer costs count it (the default, sys.getsizeof, says 48 bytes for any tensor)
    sizeof.register(Tensor, lambda x: int(x.size) * x.dtype.itemsize)
    _register_serialization()
    # every task hands back realized ug tensors (see `optimize`), unless the user chose an
    # optimization of their own
    if dask.config.get("array_optimize", None) is None:
        dask.config.set({"array_optimize": optimize})
    # worker processes started from here (a LocalCluster's nannies) run ug's cpu device on as
    # many threads as dask gives BLAS (OMP_NUM_THREADS, 1 by default): each worker process
    # already takes a core, so ug's own pool per worker would contend with the others for them
    # and compile each kernel before its first run (tier 1, UG_TIER=1): a worker runs the same
    # kernels chunk after chunk, on chunks large enough that numpy's evaluation of the kernel IR
    # (tier 0) takes longer than the compile, which the kernel disk cache shares among the
    # workers (measured on the stencil below: worker CPU per run 0.76 s on tier 0, 0.31 s on 1)
    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", None) or {})
    wanted = {THREADS_ENV: environ.get("OMP_NUM_THREADS", 1), TIER_ENV: "1"}
    if any(k not in environ and k not in os.environ for k in wanted):
        environ.update({k: v for k, v in wanted.items() if k not in environ and k not in os.environ})
        dask.config.set({"distributed.nanny.pre-spawn-environ": environ})
    _registered[0] = True


def _register_serialization() -> None:
    """dask.distributed's serializer for ug tensors (when distributed is installed): a chunk that
    travels between worker processes is sent as numpy's serializer sends an array, from the
    memory of its buffer where the device's memory is the host's (no copy: a 4 MB chunk's
    serialization took 2 ms through pickle, which copies the buffer out first, against 0.01 ms for
    a numpy chunk), and lands as an unpickled tensor does (`_deserialize_tensor`)."""
    try:
        from distributed.protocol import dask_deserialize, dask_serialize
    except ImportError:
        return
    dask_serialize.register(Tensor)(_serialize_tensor)
    dask_deserialize.register(Tensor)(_deserialize_tensor)


def _serialize_tensor(x: Tensor) -> tuple[dict[str, Any], list[Any]]:
    from distributed.protocol.numpy import serialize_numpy_ndarray

    # a whole tensor lends its buffer's memory (a task's result: nothing writes it afterwards; see
    # Tensor._host_memory for the copy it makes where another ug value still reads that buffer);
    # a view (a halo's few rows or columns) copies its elements out
    array = x._host_memory() if type(x) is Tensor else None
    if array is None or not array.flags.c_contiguous:
        array = x.numpy()
    else:   # frames deserialized in this process (not through a socket) would be this memory:
        array = array.view()   # read-only there, so the tensor landing on them copies before a write
        array.flags.writeable = False
    header, frames = serialize_numpy_ndarray(array)
    header["ug-device"] = x.device
    return header, frames


def _deserialize_tensor(header: dict[str, Any], frames: list[Any]) -> Tensor:
    """The tensor on the device `plugins.unpickle_device` picks for the sender's device (as
    unpickling: the same name by default), over the received frames' memory where it can."""
    from distributed.protocol.numpy import deserialize_numpy_ndarray

    from .tensor import _unpickle

    header = dict(header)
    device = header.pop("ug-device")
    return _unpickle(deserialize_numpy_ndarray(header, frames), device)


# --- realized task results ----------------------------------------------------------------------


def realized(value: Any) -> Any:
    """`value` with every ug tensor in it (in tuples, lists and dict values too: dask's
    reductions hand dicts of partial sums from task to task) realized, with one schedule."""
    tensors: list[Tensor] = []
    _collect(value, tensors)
    if tensors:
        _api.realize(*tensors)
    return value


def _collect(value: Any, into: list[Tensor]) -> None:
    if isinstance(value, Tensor):
        into.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _collect(v, into)
    elif isinstance(value, dict):
        for v in value.values():
            _collect(v, into)


def _realizing(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    return realized(func(*args, **kwargs))


def optimize(dsk: Any, keys: Any, **kwargs: Any) -> dict[Any, Any]:
    """dask.array's graph optimization (set as dask's `array_optimize` when this module is
    imported), then every task made to hand back its ug tensors realized (numpy results pass
    through untouched).

    Why: ug tensors are lazy. A task that returned one unrealized would leave its work to
    whatever touches the value next, outside the task: distributed's serialization when the chunk
    travels to another worker (on the worker's event loop or its offload thread, where dask
    neither counts nor overlaps it) or every later task that reads it, each of which then schedules
    and compiles the upstream graph fused into its own (shapes and fusions that differ with the
    chunk-to-worker assignment: new compiles every run). A realized result costs one schedule
    per task (dask's linear fusion already put each chunk's chain of element-wise work in one
    task, where ug fuses it)."""
    from dask._task_spec import Task, convert_legacy_graph
    from dask.array.optimization import optimize as array_optimize
    from dask.utils import ensure_dict

    out = convert_legacy_graph(ensure_dict(array_optimize(dsk, keys, **kwargs)))
    for key, node in out.items():
        if type(node) is Task:   # (containers, aliases and data nodes make no ug work)
            out[key] = Task(key, _realizing, node.func, *node.args, _data_producer=node.data_producer,
                            **node.kwargs)
    return dict(out)


def _divide(a: Any, b: Any, dtype: Any) -> Any:
    out = a / b
    return out.astype(dtype) if dtype is not None and out.dtype != np.dtype(dtype) else out


# --- metas and arrays -----------------------------------------------------------------------


def meta(ndim: int, dtype: Any, device: str | None = None) -> Tensor:
    """The meta of a dask array of ug chunks: an empty ug tensor of that rank and dtype."""
    return _api.empty((0,) * ndim, dtype=dtype, device=device)


def from_array(x: Any, chunks: Any = "auto", *, device: str | None = None, name: str | None = None,
               **kwargs: Any) -> da.Array:
    """A dask array whose chunks are ug tensors: from a ug tensor (its device, unless `device=`
    says another), a numpy array or anything `ug.asarray` takes (on `device`, default the
    preferred one). The source is sliced per chunk as da.from_array does; `kwargs` go to it."""
    register()
    source = x if isinstance(x, Tensor) and (device is None or x.device == device) else \
        _api.asarray(x, device=device)
    return da.from_array(source, chunks=chunks, name=name, asarray=False,
                         meta=meta(source.ndim, source.dtype, source.device), **kwargs)


def to_numpy(x: da.Array) -> da.Array:
    """The same dask array with numpy chunks (each ug chunk copied to the host)."""
    return da.map_blocks(_host, x, meta=np.empty((0,) * x.ndim, dtype=x.dtype))


def _host(block: Any) -> np.ndarray:
    return block.numpy() if isinstance(block, Tensor) else np.asarray(block)


# --- the jit setting --------------------------------------------------------------------------


def jit_enabled() -> bool:
    """Whether the helpers run their functions under ug.jit: `jit(...)`'s setting while one is
    active, else $UG_DASK_JIT (default off)."""
    setting = _jit_setting[0]
    return env_flag(JIT_ENV, False) if setting is None else setting


@contextlib.contextmanager
def jit(enabled: bool = True) -> Iterator[None]:
    """`with ug_core.dask.jit():` the graphs that map_blocks/blockwise/map_overlap build
    meanwhile run their functions under ug.jit (the setting is read when the graph is built:
    the workers need not share it)."""
    previous = _jit_setting[0]
    _jit_setting[0] = bool(enabled)
    try:
        yield
    finally:
        _jit_setting[0] = previous


class Jitted:
    """`func` run under ug.jit in whatever process runs the task. Pickles as `func` and a token:
    each worker keeps one ug.jit of it per token (a bounded cache), so that the tasks of one graph,
    unpickled one by one, share their traces (a shape traced once per worker, replayed after)."""

    def __init__(self, func: Callable[..., Any]):
        self.func = func
        self.token = uuid.uuid4().hex
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        jitted = _jitted.get(self.token)
        if jitted is None:
            jitted = _ug_jit(self.func)
            _jitted[self.token] = jitted
        return jitted(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_jitted, (self.func, self.token))


def _rebuild_jitted(func: Callable[..., Any], token: str) -> Jitted:
    out = Jitted.__new__(Jitted)
    out.func, out.token = func, token
    functools.update_wrapper(out, func)
    return out


def _maybe_jit(func: Callable[..., Any], use_jit: bool | None) -> Callable[..., Any]:
    on = jit_enabled() if use_jit is None else use_jit
    return Jitted(func) if on and not isinstance(func, Jitted) else func


def _meta_for(arrays: Sequence[Any], kwargs: dict[str, Any], ndim: int | None = None) -> None:
    """Give dask a ug meta when the call has none and a dtype (dask would otherwise run the
    function on empty numpy arrays to guess one)."""
    if "meta" in kwargs or kwargs.get("dtype") is None:
        return
    devices = [a._meta.device for a in arrays if isinstance(a, da.Array) and isinstance(a._meta, Tensor)]
    rank = ndim if ndim is not None else max((a.ndim for a in arrays if isinstance(a, da.Array)), default=0)
    kwargs["meta"] = meta(rank, kwargs["dtype"], devices[0] if devices else None)


def map_blocks(func: Callable[..., Any], *args: Any, jit: bool | None = None, **kwargs: Any) -> da.Array:
    """dask.array.map_blocks with ug: `func` under ug.jit when the jit setting (or `jit=`) says so,
    and a ug meta from `dtype=` when no `meta=` is given."""
    register()
    if "drop_axis" not in kwargs and "new_axis" not in kwargs:   # else the output's rank is dask's to work out
        inputs = any(isinstance(a, da.Array) for a in args)
        _meta_for(args, kwargs, None if inputs or "chunks" not in kwargs else len(kwargs["chunks"]))
    return da.map_blocks(_maybe_jit(func, jit), *args, **kwargs)


def blockwise(func: Callable[..., Any], out_ind: Any, *args: Any, jit: bool | None = None,
              **kwargs: Any) -> da.Array:
    """dask.array.blockwise with ug: as `map_blocks` for the jit setting and the meta."""
    register()
    if out_ind is not None:
        _meta_for(args[::2], kwargs, len(out_ind))
    return da.blockwise(_maybe_jit(func, jit), out_ind, *args, **kwargs)


def map_overlap(func: Callable[..., Any], *args: Any, jit: bool | None = None, **kwargs: Any) -> da.Array:
    """dask.array.map_overlap with ug: as `map_blocks` for the jit setting and the meta."""
    register()
    _meta_for(args, kwargs)
    return da.map_overlap(_maybe_jit(func, jit), *args, **kwargs)


def generate(fn: Callable[..., Any], shape: Sequence[int], chunks: Any, dtype: Any, *,
             device: str | None = None) -> da.Array:
    """A virtual dask array of ug chunks, each made where it is computed by `fn(start, shape,
    device=device)` (`start`: the chunk's first index on each axis, as a tuple of ints; `shape`:
    its shape; `fn` returns a ug tensor of that shape and `dtype`). Nothing but `fn` is in the
    graph, so the array may be far larger than a worker's memory. (Not under ug.jit: `start`
    differs from chunk to chunk, and jit keys on Python values.)"""
    register()
    dtype = np.dtype(dtype)
    normalized = da.core.normalize_chunks(chunks, tuple(shape), dtype=dtype)
    return da.map_blocks(_generated_block, dtype=dtype, chunks=normalized,
                         meta=meta(len(normalized), dtype, device), maker=fn, device=device)


def _generated_block(block_info: Any = None, *, maker: Callable[..., Any], device: str | None) -> Any:
    location = block_info[None]["array-location"]
    start = tuple(int(lo) for lo, _ in location)
    shape = tuple(int(hi - lo) for lo, hi in location)
    return maker(start, shape, device=device)


register()

__all__ = ["JIT_ENV", "Jitted", "blockwise", "from_array", "generate", "jit", "jit_enabled", "map_blocks",
           "map_overlap", "meta", "optimize", "realized", "register", "to_numpy"]
