"""The hooks tensor.py calls while ug.jit traces a function (tensor._tracer: a tensor made,
written, or read to Python), the tracing state per thread, and the error that names the user's
line where a traced function reads a value."""

from __future__ import annotations

import os
import sys
import threading
import weakref
from threading import get_ident
from types import FrameType
from typing import Any, Callable

from ..graph import Node
from ..tensor import Tensor, TracerValueError

# the module tensor.py (where the tracing hooks live); not `from .. import tensor`, which gives the
# function ug_core.tensor once the package has imported it under that name
tensor_module: Any = sys.modules[Tensor.__module__]   # (its _tracer is set while tracing)


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


# (this package's parent: the frames of ug_core's modules are not the user's)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
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
