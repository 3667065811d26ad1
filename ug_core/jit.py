"""ug.jit: trace a function once per input signature, then replay its compiled schedule.

The first call with a given signature runs the function lazily (the trace), schedules and
compiles what it computes, and remembers which buffer slots hold the inputs and outputs. Later
calls with that signature skip the Python function and the scheduler: they bind the new input
buffers to those slots and run the compiled steps.

What a replay computes: what calling the function would, or the call raises.

- Arguments form a pytree: the positional and keyword arguments, and tuples, lists and dicts in
  them (namedtuples too). Each tensor in it is an input. The signature (the trace key) is, per
  tensor, its place in the tree, shape, dtype and device, and per other value its place, type and
  value: floats by repr (0.0 and -0.0 differ), numpy arrays by dtype, shape and bytes, and other
  unhashable values by repr. A value that is new traces the function again.
- Outputs may be any pytree of tensors and Python values; a Python value is returned as the
  trace made it.
- Writes (`t.assign(v)`, `t[idx] = v`) to an argument or to a tensor of the enclosing scope are
  made by every replay, on that call's tensor: afterwards it holds what running the function
  would have given it. A replay writes only buffers it makes, so a written tensor gets a new
  buffer each call (a tensor read from it before keeps the old value, as when run eagerly).
- Views (numpy's, see tensor.TensorView) follow their base: a view the function makes of an
  argument and writes writes the argument; a view passed as an argument is one input (its value
  at the call), and a write to it reaches its base on every call (the function gets a plain
  tensor of the view's value, written back into the view after the call); a view the function
  returns is returned as a value of its own.
- Tensors of the enclosing scope that the function reads (weights, say) are read by each
  replay as they are then: a lazy one is realized first, and one whose shape or dtype changed
  makes the call trace again. The trace finds them as the tensors made before the call that
  hold the values its graph reads, and keeps them; a Python name bound to another tensor is not
  seen (as in jax). A lazy constant one (a `ug.full` never realized) is compiled into the
  kernels; a write to it makes the next call trace again.
- While the function is traced nothing runs. `t.realize()` and `ug.realize(...)` leave tensors
  lazy, and reading the value of an argument or of any lazy tensor to Python (`.numpy()`,
  `.item()`, `float()`, `int()`, `bool()`, `numpy.asarray`) raises TracerValueError naming the
  function and the line of the read: a value read then would be frozen into every replay.
  Realized tensors from outside the function can be read; what is read is then part of the
  trace, like any Python value the function computes.
- A jitted function called while another one is traced runs its Python function in the outer
  trace (inlined), so nested jitted functions compose.
- A function keeps its `max_traces` most recently used traces (64 unless given) and warns once
  (RetraceWarning) when it has been traced more than 8 times, naming what changed.

A tensor the function makes and stores outside itself (in a global, an attribute) is not an
output: a replay does not store a new one there.

Each call returns new output tensors, so earlier results stay valid. A function that
compiled to one kernel keeps its last output, and when the caller has dropped it and nothing
reads it any more (see `replay._kernel_replay`), the next call writes into it and returns it
again: that spares building a buffer, node and tensor per call (about 1.5 us of a tiny replay).
So a jitted function holds one output buffer between calls, as a cache.

This module traces, keys calls and picks their trace; replay.py holds what a trace keeps and
replays it.
"""

from __future__ import annotations

import functools
import gc
import inspect
import os
import sys
import threading
import warnings
import weakref
from collections import OrderedDict
from threading import get_ident
from types import FrameType
from typing import Any, Callable

import numpy as np

from .cache import Cache, declare
from .device import Buffer
from .faults import ForkedDeviceError, defer_interrupts
from .graph import Node, graph_lock, kept_sources
from .ops import Op
from .replay import PY, Capture, Guard, Stale, Trace, Write, general_replay, sig_text
from .runtime import CompiledSchedule, realize_nodes
from .schedule import create_schedule, walk
from .tensor import Tensor, TensorView, TracerValueError

# the module tensor.py (where the tracing hooks live); not `from . import tensor`, which gives the
# function ug_core.tensor once the package has imported it under that name
tensor_module: Any = sys.modules[Tensor.__module__]   # (its _tracer is set while tracing)

DEFAULT_MAX_TRACES = 64
"""Traces a jitted function keeps (least recently used goes first), unless ug.jit is given
`max_traces`."""

_TRACES = declare("jit.traces", DEFAULT_MAX_TRACES)   # (each jitted function's cache of traces: ug.cache_stats adds them up)

RETRACE_WARNING_AFTER = 8
"""A jitted function traced more often than this warns once (RetraceWarning)."""


class RetraceWarning(UserWarning):
    """A jitted function was traced many times: the shapes, dtypes or static values of its
    arguments keep changing (each new one compiles again)."""


# --- tracing state ------------------------------------------------------------------------

# the threads tracing a function now: every jitted call reads it (one global load when empty)
# to run a nested jitted function inline
_TRACING: set[int] = set()
_tracing_lock = threading.Lock()


class _TraceContext:
    """What one trace records while its function runs."""

    def __init__(self, fn: Callable[..., Any], arg_nodes: list[Node]):
        self.fn = fn
        self.arg_nodes = arg_nodes
        self.arg_node_ids = {id(n) for n in arg_nodes}
        # ids of the tensors made during the trace. An id can be taken again by a later
        # tensor once the first is gone, but only by one also made during the trace: so an id
        # found here means "made during the trace" for any tensor alive at the end.
        self.made: set[int] = set()
        # (tensor, its node before, its node after) per write, in order
        self.writes: list[tuple[weakref.ref[Tensor], Node, Node]] = []


class _ThreadState(threading.local):
    trace: _TraceContext | None = None


_thread = _ThreadState()


class _Tracer:
    """The hooks tensor.py calls (through tensor._tracer, which tensor_io reads through
    tensor.tracing()) while some thread traces; each does nothing on a thread that is not
    tracing."""

    @staticmethod
    def tracing() -> bool:
        return _thread.trace is not None

    @staticmethod
    def made(t: Tensor) -> None:
        ctx = _thread.trace
        if ctx is not None:
            ctx.made.add(id(t))

    @staticmethod
    def wrote(t: Tensor, before: Node) -> None:
        ctx = _thread.trace
        if ctx is not None:
            ctx.writes.append((weakref.ref(t), before, t._node))

    @staticmethod
    def before_read(t: Tensor) -> None:
        """Raise for a value the trace does not have: an argument's, or a lazy tensor's (it
        would be computed now, once, and its value frozen into the trace)."""
        ctx = _thread.trace
        if ctx is None:
            return
        node = t._node
        if node.buffer is not None and id(node) not in ctx.arg_node_ids:
            return  # a realized tensor from outside the function: its value exists
        raise TracerValueError(_read_error(ctx.fn))


_TRACER = _Tracer()


def _begin_trace(ctx: _TraceContext) -> None:
    with _tracing_lock:
        _TRACING.add(get_ident())
        tensor_module._tracer = _TRACER
    _thread.trace = ctx


def _end_trace() -> None:
    _thread.trace = None
    with _tracing_lock:
        _TRACING.discard(get_ident())
        if not _TRACING:
            tensor_module._tracer = None


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# the Tensor methods that read a value, as the error names them
_READS = {"numpy": ".numpy()", "item": ".item()", "__float__": "float()", "__int__": "int()",
          "__bool__": "bool()", "__array__": "numpy.asarray()"}


def _outside_frame() -> tuple[Any, str]:
    """The innermost frame outside ug_core (the user's line) and the outermost ug_core
    function under it that reads a value (`_READS`), as the error names it."""
    frame: FrameType | None = sys._getframe(1)
    what = "reading a value"
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        what = _READS.get(frame.f_code.co_name, what)
        frame = frame.f_back
    return frame, what


def _fn_label(fn: Callable[..., Any]) -> str:
    """`name` (file:line of its definition) for messages."""
    name = getattr(fn, "__qualname__", None) or repr(fn)
    code = getattr(fn, "__code__", None)
    return f"`{name}` ({code.co_filename}:{code.co_firstlineno})" if code is not None else f"`{name}`"


def _read_error(fn: Callable[..., Any]) -> str:
    frame, what = _outside_frame()
    where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "an unknown line"
    return (f"ug.jit: {_fn_label(fn)} reads a tensor's value to Python with {what} at {where} while "
            f"it is traced. During the trace its arguments, and every lazy tensor, have no value yet, "
            f"and a value read now would be frozen into every later call. Keep the computation in "
            f"tensor ops (ug.where instead of an `if`), pass the value as a non-tensor argument (each "
            f"new value is traced once), or read it outside the jitted function.")


# --- arguments and results as pytrees -----------------------------------------------------

_TREE_TYPES = (Tensor, tuple, list, dict)   # a positional argument of one of these takes the pytree path


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def _tree_key(value: Any, leaves: list[Tensor]) -> Any:
    """The trace key of an argument tree; appends its tensors to `leaves` (lazy ones are
    realized: a replay reads input buffers). A tensor is its (shape, dtype, device), a container
    its type and items (a dict's keys included), anything else `_static_key`."""
    if isinstance(value, Tensor):
        node = value._node
        if node.buffer is None:
            value.realize()
        leaves.append(value)
        return node.sig
    kind = type(value)
    if kind is tuple or kind is list or _is_namedtuple(value):
        return (kind, tuple([_tree_key(v, leaves) for v in value]))
    if kind is dict or kind is OrderedDict:
        return (kind, tuple([(_static_key(k), _tree_key(v, leaves)) for k, v in value.items()]))
    return (PY, _static_key(value))


def _map_tensors(value: Any, fn: Callable[[Tensor], Tensor]) -> Any:
    """A pytree (tuples, lists, namedtuples, dicts) with each tensor t in it replaced by fn(t)."""
    if isinstance(value, Tensor):
        return fn(value)
    kind = type(value)
    if kind is tuple or kind is list:
        return kind(_map_tensors(v, fn) for v in value)
    if _is_namedtuple(value):
        return kind(*(_map_tensors(v, fn) for v in value))
    if kind is dict or kind is OrderedDict:
        return kind((k, _map_tensors(v, fn)) for k, v in value.items())
    return value


def _stand_in(value: Any, stand_ins: list[tuple[TensorView, Tensor, Node]]) -> Any:
    """`value` (an argument tree) with each view (TensorView) replaced by a plain tensor of its
    value, noted in `stand_ins` with its node: the trace and its replays take that tensor as the
    argument (its own input buffer, and its writes are the argument's writes), and _write_back
    then writes what it holds into the view, that is into the view's base, as a call would."""
    def stand_for(t: Tensor) -> Tensor:
        if not isinstance(t, TensorView):
            return t
        stand = Tensor(t.realize()._node)
        stand_ins.append((t, stand, stand._node))
        return stand
    return _map_tensors(value, stand_for)


def _write_back(result: Any, stand_ins: list[tuple[TensorView, Tensor, Node]]) -> Any:
    """After a call with views among its arguments (see _stand_in): the written stand-ins' values
    written into their views, and the result with each stand-in it returns replaced by its view."""
    for view, stand, before in stand_ins:
        if stand._node is not before:
            view._replace_node(stand._node)
    of: dict[int, Tensor] = {id(stand): view for view, stand, _ in stand_ins}
    return _map_tensors(result, lambda t: of.get(id(t), t))


def _views_as_values(value: Any) -> Any:
    """A result tree with each view (TensorView) in it as a plain tensor of its value."""
    return _map_tensors(value, lambda t: Tensor(t._node) if isinstance(t, TensorView) else t)


def _flatten_output(value: Any, leaves: list[Tensor]) -> Any:
    """The structure of a return value (tensors, tuples, lists, dicts, namedtuples and other
    Python values); appends its tensors to `leaves`."""
    if isinstance(value, Tensor):
        leaves.append(value)
        return "T"
    kind = type(value)
    if kind is tuple or kind is list or _is_namedtuple(value):
        return (kind, [_flatten_output(v, leaves) for v in value])
    if kind is dict or kind is OrderedDict:
        return (kind, [(k, _flatten_output(v, leaves)) for k, v in value.items()])
    return (PY, value)


def _static_key(value: Any) -> Any:
    """A non-tensor argument, as part of the key: with its type, so that values that compare
    equal but trace differently (1, 1.0 and True give different dtypes) get traces of their own;
    floats by repr (0.0 and -0.0 differ; a nan equals itself); tuples and lists item by item;
    numpy arrays by dtype, shape and bytes (their repr elides the middle of a big one);
    anything else unhashable by repr."""
    kind = type(value)
    if kind is tuple or kind is list:
        return (kind, tuple(_static_key(v) for v in value))
    if isinstance(value, (float, complex, np.floating, np.complexfloating)):
        return (kind, repr(value))
    if isinstance(value, np.ndarray):
        return (kind, value.dtype.str, value.shape, value.tobytes())
    try:
        hash(value)
    except TypeError:
        return (kind, repr(value))
    return (kind, value)


def _repeats(tensors: list[Tensor]) -> tuple[tuple[int, int], ...]:
    """For each tensor argument, the positions of the first one with the same node and of the
    first one that is the same tensor; () when their nodes all differ. (A trace reads one
    buffer for tensors of one node, and writes a tensor passed twice once.)"""
    first_node: dict[int, int] = {}
    first_tensor: dict[int, int] = {}
    where = tuple((first_node.setdefault(id(t._node), i), first_tensor.setdefault(id(t), i)) for i, t in enumerate(tensors))
    return where if len(first_node) < len(tensors) else ()


# --- what changed, for RetraceWarning -----------------------------------------------------


def _positional_names(fn: Callable[..., Any], n: int) -> list[str]:
    """Names for the first n positional arguments of fn: its parameters', else args[i]."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin or a callable without a signature
        params = []
    names: list[str] = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            names += [f"{p.name}[{i}]" for i in range(max(n - len(names), 0))]
            break
    names += [f"args[{i}]" for i in range(len(names), n)]
    return names[:n]


def _describe(value: Any, path: str, out: list[tuple[str, str]]) -> None:
    if isinstance(value, Tensor):
        out.append((path, f"a tensor of {sig_text(value._node.sig)}"))
    elif isinstance(value, (tuple, list)) and value:
        for i, v in enumerate(value):
            _describe(v, f"{path}[{i}]", out)
    elif isinstance(value, dict) and value:
        for k, v in value.items():
            _describe(v, f"{path}[{k!r}]", out)
    elif isinstance(value, np.ndarray):
        out.append((path, f"an array of shape {value.shape} {value.dtype.name} (bytes hash {hash(value.tobytes()) & 0xFFFFFF:06x})"))
    else:
        text = repr(value)
        out.append((path, f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"))


def _describe_arguments(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, description) of every leaf of a call's arguments."""
    out: list[tuple[str, str]] = []
    for name, a in zip(_positional_names(fn, len(args)), args):
        _describe(a, name, out)
    for name in sorted(kwargs):
        _describe(kwargs[name], name, out)
    return out


def _what_changed(before: list[tuple[str, str]] | None, now: list[tuple[str, str]]) -> str:
    if before is None:
        return "it was called for the first time"
    for (path_before, was), (path, is_now) in zip(before, now):
        if path_before != path:
            return f"its arguments' structure changed: `{path}` where `{path_before}` was"
        if was != is_now:
            return f"argument `{path}` changed from {was} to {is_now}"
    if len(before) != len(now):
        return f"its arguments' structure changed: {len(now)} leaves where there were {len(before)}"
    return ("its arguments differ from the previous trace's in a way their description does not show "
            "(one tensor passed in several places, or a trace dropped to keep max_traces)")


class _TraceHistory:
    """How often a jitted function was traced, and what its last trace's arguments were."""

    def __init__(self, fn: Callable[..., Any], max_traces: int):
        self.fn = fn
        self.max_traces = max_traces
        self.count = 0
        self.warned = False
        self.last: list[tuple[str, str]] | None = None

    def traced(self, args: tuple[Any, ...], kwargs: dict[str, Any], stale: str | None) -> None:
        self.count += 1
        described = _describe_arguments(self.fn, args, kwargs)
        if self.count > RETRACE_WARNING_AFTER and not self.warned:
            self.warned = True
            why = f"{stale}" if stale is not None else _what_changed(self.last, described)
            _warn(RetraceWarning(
                f"ug.jit: {_fn_label(self.fn)} has been traced {self.count} times (each trace runs the "
                f"Python function, schedules and compiles); this time because {why}. Arguments whose "
                f"shapes, dtypes or Python values keep changing trace again: pass changing numbers as "
                f"tensors, or use a few fixed shapes. (It keeps its {self.max_traces} most recently used "
                f"traces; this warning is given once.)"))
        self.last = described


def _warn(warning: Warning) -> None:
    """warnings.warn, attributed to the user's line that called into ug."""
    frame, _ = _outside_frame()
    if frame is None:
        warnings.warn(warning, stacklevel=2)
        return
    warnings.warn_explicit(warning, type(warning), frame.f_code.co_filename, frame.f_lineno,
                           module=frame.f_globals.get("__name__"))


# --- jit ----------------------------------------------------------------------------------


def jit(fn: Callable[..., Any] | None = None, *, max_traces: int = DEFAULT_MAX_TRACES) -> Any:
    """Trace `fn` once per input signature and replay its compiled schedule (see the module
    docstring for what replays compute). `@ug.jit` or `@ug.jit(max_traces=8)`.

    The returned function has `traces` (the kept traces, least recently used first) and
    `trace_count` (how many times `fn` was traced)."""
    if fn is None:
        return functools.partial(jit, max_traces=max_traces)
    if not callable(fn):
        raise TypeError(f"ug.jit needs a function, got {type(fn).__name__}")
    if isinstance(max_traces, bool) or not isinstance(max_traces, int) or max_traces < 1:
        raise ValueError(f"ug.jit: max_traces must be a positive int, got {max_traces!r}")
    traces: Cache[Any, Trace] = Cache(_TRACES, max_entries=max_traces)   # (least recently used out first)
    history = _TraceHistory(fn, max_traces)
    lock = threading.Lock()  # for a new trace's bookkeeping (`last`, history; the cache locks its own)
    # the key and fast replay of the last call that took the fast path with tensors only as
    # arguments: most calls repeat the previous call's signature, and comparing two keys costs
    # less than hashing one. Such a key holds only shapes, dtypes and device names, whose ==
    # is plain (an argument's value could compare any way, elementwise even); a key with a
    # non-tensor argument differs from it at that argument's "py" already. One tuple, replaced
    # whole: a thread never sees one call's key with another's replay.
    last: tuple[tuple[Any, ...] | None, Callable[[Any], Tensor] | None] = (None, None)

    def trace_into(key: Any, args: tuple[Any, ...], kwargs: dict[str, Any], leaves: list[Tensor],
                   arg_index: list[int], stale: str | None = None) -> Any:
        """Trace a call and keep the trace: under `key`, or, when the call passes tensors of one
        value in several places, under that key and how they repeat (see dispatch)."""
        nonlocal last
        repeats = _repeats(leaves)
        kept_as = ("repeats", key, repeats) if repeats else key
        trace, result = _trace(fn, args, kwargs, leaves, arg_index)
        with lock:
            traces.put(kept_as, trace)
            last = (None, None)
            history.traced(args, kwargs, stale)
            held = wrapper_ref()  # (weakly: the wrapper holds this function through its closures)
            if held is not None:
                held.trace_count = history.count  # type: ignore[attr-defined]
        return result

    def retrace(stale_trace: Trace | None, stale: Stale, key: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                leaves: list[Tensor], arg_index: list[int]) -> Any:
        """Trace a call whose trace went stale (see Stale), forgetting that trace."""
        for kept_as in [k for k, t in traces.items() if t is stale_trace]:
            traces.pop(kept_as)
        return trace_into(key, args, kwargs, leaves, arg_index, stale.reason)

    def replay(key: Any, trace: Trace, seq: Any, leaves: list[Tensor], args: tuple[Any, ...],
               kwargs: dict[str, Any], arg_index: list[int]) -> Any:
        try:
            return trace.fast(seq) if trace.fast is not None else general_replay(trace, leaves)
        except Stale as stale:
            return retrace(trace, stale, key, args, kwargs, leaves, arg_index)
        except ForkedDeviceError as e:   # (in a forked child: the trace's device is the parent's)
            return retrace(trace, Stale(str(e)), key, args, kwargs, leaves, arg_index)

    def dispatch(key: Any, seq: Any, leaves: list[Tensor], args: tuple[Any, ...], kwargs: dict[str, Any],
                 arg_index: list[int], plain: bool) -> Any:
        nonlocal last
        trace = traces.get(key)   # (found: now the most recently used)
        if trace is not None and not trace.writes:
            # a trace of distinct tensors that writes none is right for any call, also one
            # passing a tensor in several places
            if plain and trace.fast is not None:
                last = (key, trace.fast)
            return replay(key, trace, seq, leaves, args, kwargs, arg_index)
        repeats = _repeats(leaves)
        if repeats:
            # a trace of such a call reads one buffer for all of them (and writes a tensor
            # passed twice once): it is right only for calls that repeat them the same way
            kept_as = ("repeats", key, repeats)
            trace = traces.get(kept_as)
            if trace is None:
                return trace_into(key, args, kwargs, leaves, arg_index)
            return replay(key, trace, seq, leaves, args, kwargs, arg_index)
        if trace is None:
            return trace_into(key, args, kwargs, leaves, arg_index)
        return replay(key, trace, seq, leaves, args, kwargs, arg_index)

    def tree_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        stand_ins: list[tuple[TensorView, Tensor, Node]] = []
        args, kwargs = _stand_in(args, stand_ins), _stand_in(kwargs, stand_ins)
        leaves: list[Tensor] = []
        key = ("tree", _tree_key(args, leaves), tuple((name, _tree_key(kwargs[name], leaves)) for name in sorted(kwargs)))
        result = dispatch(key, leaves, leaves, args, kwargs, list(range(len(leaves))), False)
        return _write_back(result, stand_ins) if stand_ins else result

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _TRACING and get_ident() in _TRACING:
            return fn(*args, **kwargs)  # called while a function is traced: part of that trace
        if kept_sources.depth:
            # ug.grad / ug.vjp run it: its graph must stay visible to be differentiated (a
            # replay's results are buffers), so it runs lazily, as part of the caller's graph
            return fn(*args, **kwargs)
        if kwargs:
            return tree_call(args, kwargs)
        # the replay path: one pass over the arguments for the key (flat: a tensor adds its
        # shape, dtype and device, anything else "py" and its value, so it decodes one way),
        # a compare with the last key or a dict lookup, then the compiled steps
        key: tuple[Any, ...] = ()
        for a in args:
            if type(a) is Tensor:
                node = a._node
                if node.buffer is None:
                    a.realize()
                key += node.sig  # (shape, dtype, device)
            elif isinstance(a, _TREE_TYPES):  # tensors in containers, or a Tensor subclass
                return tree_call(args, kwargs)
            else:
                key += (PY, _static_key(a))
        last_key, last_fast = last
        if key == last_key:
            try:
                return last_fast(args)  # type: ignore[misc]
            except Stale as stale:
                # (`last` is only set for calls with tensors only)
                return retrace(traces.peek(key), stale, key, args, kwargs, list(args), list(range(len(args))))
            except ForkedDeviceError as e:
                return retrace(traces.peek(key), Stale(str(e)), key, args, kwargs, list(args), list(range(len(args))))
        return positional_call(key, args)

    def positional_call(key: tuple[Any, ...], args: tuple[Any, ...]) -> Any:
        # apart from the wrapper: a comprehension reading `args` there would make it a cell
        # variable, which every call pays for
        arg_index = [i for i, a in enumerate(args) if type(a) is Tensor]
        return dispatch(key, args, [args[i] for i in arg_index], args, {}, arg_index, len(arg_index) == len(args))

    wrapper.traces = traces  # type: ignore[attr-defined]
    wrapper.trace_count = 0  # type: ignore[attr-defined]
    wrapper_ref = weakref.ref(wrapper)
    return wrapper


# --- tracing ------------------------------------------------------------------------------


def _trace(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], leaves: list[Tensor],
           arg_index: list[int]) -> tuple[Trace, Any]:
    ctx = _TraceContext(fn, [t._node for t in leaves])
    _begin_trace(ctx)
    try:
        # a view the function returns is returned as a value (its node): a replay makes new outputs
        result = _views_as_values(fn(*args, **kwargs))
    finally:
        _end_trace()
    out_leaves: list[Tensor] = []
    structure = _flatten_output(result, out_leaves)
    with graph_lock:   # (it schedules and runs the graph as a realize does)
        return _compile_trace(ctx, leaves, out_leaves, structure, arg_index), result


def _holders(node: Node, skip: set[int]) -> list[Tensor]:
    """The tensors whose value is `node`, but those in `skip` (ids of the tensors the trace
    made or wrote): tensors of the enclosing scope that held it before the call, and whom the
    function read it from."""
    found = [r for r in node.readers() if isinstance(r, Tensor) and r._holds(node) and id(r) not in skip]
    if node._creator and not any(id(t) == node._creator for t in found):
        # a ug.jit replay's output, which is not among the node's readers (Node._creator): find
        # it among the node's referrers (rare, and only while tracing)
        found += [r for r in gc.get_referrers(node) if isinstance(r, Tensor) and id(r) == node._creator and r._holds(node)]
    return found


def _traced(nodes: list[Node], arg_ids: set[int], written_ids: set[int]) -> set[int]:
    """Ids of the nodes (sources first) whose value depends on the call: on an argument, or on
    a write the function made."""
    traced: set[int] = set()
    for n in nodes:
        if id(n) in arg_ids or id(n) in written_ids or any(id(s) in traced for s in n.srcs):
            traced.add(id(n))
    return traced


def _reads_buffers(node: Node) -> bool:
    """Whether `node`'s value reads any buffer (else it is a constant expression)."""
    return any(n.buffer is not None for n in walk([node]))


def _compile_trace(ctx: _TraceContext, leaves: list[Tensor], out_leaves: list[Tensor], structure: Any,
                   arg_index: list[int]) -> Trace:
    """Schedule, compile and run (this call's result) what the trace computed, and record
    where each buffer of a replay comes from."""
    arg_nodes, arg_ids, made = ctx.arg_nodes, ctx.arg_node_ids, ctx.made
    leaf_of: dict[int, int] = {}
    for j, t in enumerate(leaves):
        leaf_of.setdefault(id(t), j)
    written = _written(ctx)
    arg_writes = [(leaf_of[id(t)], t) for t, _ in written.values() if id(t) in leaf_of]
    # a tensor the function made and then wrote is just part of what it computes
    state_writes = [(t, before) for t, before in written.values() if id(t) not in leaf_of and id(t) not in made]
    roots = [t._node for t in out_leaves] + [t._node for _, t in arg_writes] + [t._node for t, _ in state_writes]
    written_ids = {id(after) for _, _, after in ctx.writes}
    # a tensor that the trace neither made nor wrote holds the value it held before the call
    not_holders = made | set(written)
    before_ids = {id(before) for _, before in state_writes}
    nodes = _realize_scope_values(roots, [before for _, before in state_writes], arg_ids, written_ids, not_holders)
    captured, guards = _scope_values(nodes, arg_ids | before_ids, _traced(nodes, arg_ids, written_ids), not_holders)
    captured_ids = {id(n) for _, n in captured}

    # tensors on the buffers a replay reads but does not make (made after the holders were
    # found, which they are not): the schedule writes none of those in place, since a replay
    # must leave them as they are, so assigns get new buffers
    pins = [Tensor(n) for n in arg_nodes] + [Tensor(before) for _, before in state_writes]
    pins += [Tensor(n.srcs[0]) for n in nodes if n.op is Op.ASSIGN and n.buffer is None and n.srcs[0].buffer is not None]
    schedule = create_schedule(roots)
    compiled = CompiledSchedule(schedule) if schedule.items else None
    slots = compiled.slots if compiled is not None else []
    slot_of = {id(n): i for i, n in enumerate(slots)}
    bound = arg_ids | before_ids | captured_ids
    fixed = [n.buffer if n.buffer is not None and id(n) not in bound else None for n in slots]
    computed = {i for i, n in enumerate(slots) if n.buffer is None}
    captures = [Capture(holders, n, slot_of.get(id(n))) for holders, n in captured]
    writes = [Write(j, None, None, t._node.sig, slot_of[id(t._node)]) for j, t in arg_writes]
    writes += [Write(None, t, slot_of.get(id(before)), before.sig, slot_of[id(t._node)]) for t, before in state_writes]
    if compiled is not None:
        _run_first(compiled, computed, ctx.fn)
    del pins

    # the values before the call of the written tensors of the enclosing scope, by their write
    before_of = {id(before): len(arg_writes) + k for k, (_, before) in enumerate(state_writes)}
    outputs, output_devices, held, constants, kept_pins = _describe_outputs(
        out_leaves, leaf_of, arg_nodes, writes, before_of, captures, slot_of, computed)
    return Trace(compiled.runner if compiled is not None else None, compiled.steps if compiled is not None else [],
                 fixed, [slot_of.get(id(n)) for n in arg_nodes], captures, guards, writes, outputs, output_devices,
                 held, constants, kept_pins, structure, arg_index)


def _written(ctx: _TraceContext) -> dict[int, tuple[Tensor, Node]]:
    """The live tensors the function wrote, by id, each with its value before its first write."""
    written: dict[int, tuple[Tensor, Node]] = {}
    for ref, before, _ in ctx.writes:
        t = ref()
        if t is not None and id(t) not in written:
            written[id(t)] = (t, before)
    return written


def _realize_scope_values(roots: list[Node], befores: list[Node], arg_ids: set[int], written_ids: set[int],
                          not_holders: set[int]) -> list[Node]:
    """Realize what a replay reads from the enclosing scope as it is then: lazy tensors there
    that the function reads (a weight with a pending update, even one computed from an
    argument's value before the call) and the values before the call of the ones it writes,
    so that they become inputs. Lazy constant expressions stay (compiled in, under a guard).
    The graph's nodes (sources first), walked again if anything was realized."""
    nodes = walk(roots)
    traced = _traced(nodes, arg_ids, written_ids)
    pending = [before for before in befores if before.buffer is None]
    pending += [n for n in nodes if n.buffer is None and _holders(n, not_holders)
                and (id(n) in traced or _reads_buffers(n))]
    if not pending:
        return nodes
    realize_nodes(pending)
    return walk(roots)


def _scope_values(nodes: list[Node], inputs: set[int], traced: set[int], not_holders: set[int]
                  ) -> tuple[list[tuple[list[Tensor], Node]], list[Guard]]:
    """The values the graph reads from tensors of the enclosing scope (but `inputs`): realized
    ones with their holders (captures), lazy constant ones as guards."""
    captured: list[tuple[list[Tensor], Node]] = []
    guards: list[Guard] = []
    for n in nodes:
        if id(n) in inputs or (n.buffer is None and id(n) in traced):
            continue
        holders = _holders(n, not_holders)
        if not holders:
            continue
        if n.buffer is not None:
            captured.append((holders, n))
        else:
            guards.append(Guard(holders, n))
    return captured, guards


def _run_first(compiled: CompiledSchedule, computed: set[int], fn: Callable[..., Any]) -> None:
    """Run a trace's schedule for the call that traced it, giving the nodes their buffers."""
    slots = compiled.slots
    for i, step in enumerate(compiled.steps):
        launch = step.kernel
        if launch is not None and any(src not in computed for src, _ in launch.aliases):
            raise RuntimeError(f"ug.jit: internal error: the schedule of {_fn_label(fn)} writes in place into a "
                               f"buffer it did not make (step {i}: {step.describe}), which a replay cannot")
    bufs: list[Buffer | None] = [n.buffer for n in slots]
    with defer_interrupts:   # (Ctrl-C at its end: the nodes get their buffers all or none)
        compiled.runner(bufs)
        for i, (n, buf) in enumerate(zip(slots, bufs)):
            if n.buffer is None and buf is not None and i not in compiled.clobbered:
                n.set_buffer(buf)


def _describe_outputs(out_leaves: list[Tensor], leaf_of: dict[int, int], arg_nodes: list[Node], writes: list[Write],
                      before_of: dict[int, int], captures: list[Capture], slot_of: dict[int, int], computed: set[int]
                      ) -> tuple[list[tuple[str, int, tuple[int, ...]]], list[str], list[Tensor], list[Node], list[Tensor]]:
    """Where a replay takes each output tensor from (see Trace.outputs): (outputs, their
    devices, held tensors, constant nodes, pins of those)."""
    arg_node_of: dict[int, int] = {}
    for j, n in enumerate(arg_nodes):
        arg_node_of.setdefault(id(n), j)
    written_state = {id(w.tensor) for w in writes if w.tensor is not None}
    capture_of = {id(cap.state[0]): c for c, cap in enumerate(captures)}
    captured_tensors = {id(t) for cap in captures for t in cap.holders}
    outputs: list[tuple[str, int, tuple[int, ...]]] = []
    devices: list[str] = []
    held: list[Tensor] = []
    constants: list[Node] = []
    pins: list[Tensor] = []
    seen: dict[int, int] = {}
    for i, t in enumerate(out_leaves):
        node = t._node
        shape = node.shape
        devices.append(node.device)
        slot = slot_of.get(id(node))
        if id(t) in seen:
            outputs.append(("same", seen[id(t)], shape))
            continue
        seen[id(t)] = i
        if id(t) in leaf_of:
            outputs.append(("arg", leaf_of[id(t)], shape))
        elif id(t) in written_state or id(t) in captured_tensors:
            outputs.append(("held", len(held), shape))
            held.append(t)
        elif slot is not None and slot in computed:
            outputs.append(("slot", slot, shape))
        elif id(node) in arg_node_of:
            outputs.append(("argnode", arg_node_of[id(node)], shape))
        elif id(node) in before_of:
            outputs.append(("before", before_of[id(node)], shape))
        elif id(node) in capture_of:
            outputs.append(("capnode", capture_of[id(node)], shape))
        elif node.buffer is not None:
            # a value the function made (ug.tensor of an array) and returns: a new tensor on it
            # each call, and a pin so that no write to one of them goes in place
            outputs.append(("const", len(constants), shape))
            constants.append(node)
            pins.append(Tensor(node))
        else:
            raise RuntimeError(f"ug.jit: internal error: output {i} ({node!r}) is neither computed nor an input")
    return outputs, devices, held, constants, pins


__all__ = ["DEFAULT_MAX_TRACES", "RetraceWarning", "TracerValueError", "jit"]
