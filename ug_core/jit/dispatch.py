"""`ug.jit`: the jitted function, which keys each call and replays the trace kept for that key
(it keeps the most recently used ones), or traces the call."""

from __future__ import annotations

import functools
import threading
import weakref
from threading import get_ident
from typing import Any, Callable

from ..cache import Cache, declare
from ..faults import ForkedDeviceError
from .. import profiler
from ..graph import Node, kept_sources
from ..tensor import Tensor, TensorView
from .precompile import precompile
from .pytree import _TREE_TYPES, _repeats, _stand_in, _static_key, _tree_key, _write_back
from .records import PY, Stale, Trace
from .replay import general_replay
from .retrace import _TraceHistory
from .trace import _trace
from .tracer import _TRACING

DEFAULT_MAX_TRACES = 64
"""Traces a jitted function keeps (least recently used goes first), unless ug.jit is given
`max_traces`."""

_TRACES = declare("jit.traces", DEFAULT_MAX_TRACES)   # (each jitted function's cache of traces: ug.cache_stats adds them up)


# --- jit ----------------------------------------------------------------------------------


def jit(fn: Callable[..., Any] | None = None, *, max_traces: int = DEFAULT_MAX_TRACES) -> Any:
    """Trace `fn` once per input signature and replay its compiled schedule (see the module
    docstring for what replays compute). `@ug.jit` or `@ug.jit(max_traces=8)`.

    The returned function has `traces` (the kept traces, least recently used first),
    `trace_count` (how many times `fn` was traced) and `lower(*example_args)`, which compiles
    what a call with such arguments runs without running it (ug.precompile)."""
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
        if trace.upgrade is not None:   # (its kernels ran on tier 0: compiled yet?)
            trace.upgrade()
        try:
            # (while a profile records, the general path, which records what it runs)
            return trace.fast(seq) if trace.fast is not None and not profiler.active else general_replay(trace, leaves)
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
            if plain and trace.fast is not None and not profiler.active:
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

    def forget_last() -> None:
        """Drop the last call's fast replay: a profile started, which the replays must go
        past (the wrapper's check of `last` is all a repeated call does before replaying)."""
        nonlocal last
        last = (None, None)
    wrapper._forget_last = forget_last  # type: ignore[attr-defined]  # (held by the wrapper, registered weakly)
    profiler.forget_on_profile(forget_last)

    def lower(*example_args: Any, **example_kwargs: Any) -> Any:
        """Compile every kernel a call with such arguments runs, without running it or keeping a
        trace (see ug.precompile); returns its Precompiled."""
        return precompile(fn, *example_args, **example_kwargs)

    wrapper.lower = lower  # type: ignore[attr-defined]
    wrapper.__ug_jit_fn__ = fn  # type: ignore[attr-defined]   # (what ug.precompile traces)
    wrapper.traces = traces  # type: ignore[attr-defined]
    wrapper.trace_count = 0  # type: ignore[attr-defined]
    wrapper_ref = weakref.ref(wrapper)
    return wrapper
