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
reads it any more (see `_measure_unreferenced`), the next call writes into it and returns it again: that
spares building a buffer, node and tensor per call (about 1.5 us of a tiny replay). So a
jitted function holds one output buffer between calls, as a cache.
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
from dataclasses import dataclass, field
from threading import get_ident
from typing import Any, Callable

import numpy as np

from . import graph
from .device import Buffer
from .graph import Node
from .ops import Op
from .runtime import CompiledSchedule, realize_nodes
from .schedule import create_schedule, walk
from .tensor import Tensor
from .view import prod

# the module tensor.py (where the tracing hooks live); not `from . import tensor`, which gives the
# function ug_core.tensor once the package has imported it under that name
tensor_module = sys.modules[Tensor.__module__]

DEFAULT_MAX_TRACES = 64
"""Traces a jitted function keeps (least recently used goes first), unless ug.jit is given
`max_traces`."""

RETRACE_WARNING_AFTER = 8
"""A jitted function traced more often than this warns once (RetraceWarning)."""


class TracerValueError(RuntimeError):
    """A jitted function read the value of a traced tensor to Python while it was traced."""


class RetraceWarning(UserWarning):
    """A jitted function was traced many times: the shapes, dtypes or static values of its
    arguments keep changing (each new one compiles again)."""


class _Stale(Exception):
    """A trace no longer fits the tensors of the enclosing scope it reads (`reason` says how):
    the call traces again. Raised before a replay runs anything."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


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
    """The hooks tensor.py and api.py call (through tensor._tracer) while some thread traces;
    each does nothing on a thread that is not tracing."""

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
    frame = sys._getframe(1)
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


# --- what a trace keeps -------------------------------------------------------------------


def _sig_text(sig: tuple[Any, ...]) -> str:
    shape, dtype, device = sig
    return f"shape {shape} {np.dtype(dtype).name} on {device!r}"


class _Capture:
    """A tensor of the enclosing scope that the function reads (a weight): each replay reads
    its value then."""

    __slots__ = ("holders", "sig", "slot", "state")

    def __init__(self, holders: list[Tensor], node: Node, slot: int | None):
        # the tensors made before the call that held the value the trace read: normally one
        self.holders = holders
        self.sig = node.sig
        self.slot = slot      # its buffer slot, None when no step reads it (only returned)
        buffer = node.buffer
        assert buffer is not None
        # (node last seen, its buffer, the buffer's handle): one tuple, replaced whole, so that
        # a replay on another thread never takes one node's buffer with another's handle
        self.state: tuple[Node, Buffer, Any] = (node, buffer, buffer.handle)

    def current(self) -> tuple[Node, Buffer, Any]:
        state = self.state
        node = state[0]
        for t in self.holders:
            if t._node is not node:
                return self.refresh()
        return state

    def refresh(self) -> tuple[Node, Buffer, Any]:
        """The state for the holders' value now (realized first if lazy); _Stale when it does
        not fit the trace."""
        first = self.holders[0]
        node = first._node
        if any(t._node is not node for t in self.holders):
            raise _Stale("tensors of the enclosing scope that held one value when it was traced "
                         "(the function read one of them) now hold different values")
        if node.sig != self.sig:
            raise _Stale(f"a tensor of the enclosing scope that it reads changed from "
                         f"{_sig_text(self.sig)} to {_sig_text(node.sig)}")
        if node.buffer is None:
            first.realize()
        buffer = node.buffer
        assert buffer is not None
        self.state = state = (node, buffer, buffer.handle)
        return state


class _Guard:
    """A lazy constant tensor of the enclosing scope (no buffer under it) that the trace
    compiled into its kernels: a write to it makes the next call trace again."""

    __slots__ = ("holders", "node")

    def __init__(self, holders: list[Tensor], node: Node):
        self.holders = holders
        self.node = node

    def check(self) -> None:
        for t in self.holders:
            if t._node is not self.node:
                raise _Stale("a lazy constant tensor of the enclosing scope that it reads was written")


@dataclass
class _Write:
    """A tensor the function writes (assign, setitem): each replay gives it its new value."""

    leaf: int | None                # an argument: its position among the tensor leaves
    tensor: Tensor | None           # else the tensor of the enclosing scope
    before_slot: int | None         # where the trace reads that tensor's value before the call
                                    # (for a tensor of the enclosing scope; an argument's is an input)
    sig: tuple[Any, ...]            # its (shape, dtype, device)
    after_slot: int                 # the slot of its value after the call


@dataclass
class _Trace:
    runner: Callable[[list[Buffer | None]], object] | None   # the compiled steps, run on the slots' buffers
    steps: list[Any]                     # runtime._Step, for the fast paths
    fixed: list[Buffer | None]           # buffers of constant slots (made or read by the function, no one else's)
    input_slots: list[int | None]        # per tensor argument (leaf): its slot, if the schedule reads it
    captures: list[_Capture]
    guards: list[_Guard]
    writes: list[_Write]
    # per output tensor: (kind, index, shape); kinds: "slot" (a new tensor on that slot's buffer),
    # "arg" (the call's tensor argument itself), "argnode" (a new tensor on that argument's value
    # before the call), "held" (a tensor of the enclosing scope itself, as it is after the call),
    # "before" (a new tensor on the value before the call of written tensor `index`), "capnode"
    # (a new tensor on a capture's value), "const" (a new tensor on a constant node), "same" (an
    # earlier output again)
    outputs: list[tuple[str, int, tuple[int, ...]]]
    output_devices: list[str]            # per output tensor: its device's name
    held: list[Tensor]                   # tensors of "held" outputs
    constants: list[Node]                # nodes of "const" outputs
    pins: list[Tensor]                   # tensors on those nodes: nothing writes them in place
    structure: Any                       # how to rebuild the return value from the output list
    arg_index: list[int]                 # per tensor argument: its position in what a replay gets
    # derived from the above, for the replay path
    bind: list[tuple[int, int]] = field(init=False)       # (tensor argument, slot) pairs
    single: tuple[int, tuple[int, ...], str] | None = field(init=False)  # one tensor out, from slot i: (i, shape, device)
    fast: Callable[[Any], Tensor] | None = field(init=False)  # the whole replay (on the call's args), when it is one kernel or one matmul
    reads_arg_nodes: bool = field(init=False)              # an output is an argument's value before the call

    def __post_init__(self) -> None:
        self.bind = [(j, slot) for j, slot in enumerate(self.input_slots) if slot is not None]
        self.single = None
        if self.structure == "T" and self.outputs[0][0] == "slot" and self.runner is not None and not self.writes:
            _, i, shape = self.outputs[0]
            self.single = (i, shape, self.output_devices[0])
        self.fast = self._single_kernel_replay() or self._single_matmul_replay()
        self.reads_arg_nodes = any(kind == "argnode" for kind, _, _ in self.outputs)

    def _lone_step(self) -> Any:
        """The compiled schedule's one step, when it has one and a run is just that step (no
        UG_DEBUG timing); else None."""
        if len(self.steps) != 1 or self.runner is not self.steps[0].run:
            return None
        return self.steps[0]

    def _capture_of(self) -> dict[int, int]:
        return {cap.slot: c for c, cap in enumerate(self.captures) if cap.slot is not None}

    def _single_kernel_replay(self) -> Callable[[Any], Tensor] | None:
        """The replay of a function that compiled to one kernel writing one fresh output (the
        common case), as one function written for this trace (_SINGLE_KERNEL_REPLAY).
        Everything that does not change between calls is worked out here: where each kernel
        argument comes from (a constant buffer, an input, a captured tensor, the output) and
        how to make the output. A call then reads the inputs' handles, launches, and returns the
        output.

        None when the general path is needed: several steps, UG_DEBUG timing, writes, several
        outputs, or a device without `handle_launcher`."""
        step, single = self._lone_step(), self.single
        if step is None or single is None:
            return None
        k = step.kernel
        out_slot, shape, device_name = single
        if k is None or k.aliases or len(k.fresh) != 1 or k.fresh[0][0] != out_slot:
            return None
        # the launch needs no aliasing check: the one buffer the kernel writes is fresh, so it is
        # no other argument; inputs and constant buffers may repeat (a tensor passed twice), which
        # is harmless, they are only read
        launcher = k.device.handle_launcher(k.program)
        if launcher is None:
            return None
        pack, call = launcher
        pos_of = {slot: pos for pos, slot in enumerate(k.args)}
        if len(pos_of) != len(k.args):  # a slot passed twice: not something the scheduler makes
            return None
        arg_of = {slot: self.arg_index[j] for j, slot in self.bind}
        capture_of = self._capture_of()
        # each kernel argument as a Python expression: a constant buffer's handle (kept alive
        # by self.fixed), an input's from the call's arguments, a captured tensor's (its state,
        # checked first), or the output's
        env: dict[str, Any] = {}
        handles: list[str] = []
        checks: list[str] = []
        for pos, slot in enumerate(k.args):
            buf = self.fixed[slot]
            if slot == out_slot:
                handles.append("buffer.handle")
            elif buf is not None:
                env[f"constant{pos}"] = buf.handle
                handles.append(f"constant{pos}")
            elif slot in arg_of:
                handles.append(f"call_args[{arg_of[slot]}]._node.buffer.handle")
            elif slot in capture_of:
                c = capture_of[slot]
                cap = self.captures[c]
                env[f"capture{c}"] = cap
                moved = " or ".join(f"holder{c}_{h}._node is not state{c}[0]" for h in range(len(cap.holders)))
                env.update({f"holder{c}_{h}": t for h, t in enumerate(cap.holders)})
                checks += [f"state{c} = capture{c}.state", f"if {moved}:", f"    state{c} = capture{c}.refresh()"]
                handles.append(f"state{c}[2]")
            else:
                return None
        for g, guard in enumerate(self.guards):
            env.update({f"guard{g}": guard, f"guarded{g}": guard.node})
            env.update({f"guarded{g}_{h}": t for h, t in enumerate(guard.holders)})
            moved = " or ".join(f"guarded{g}_{h}._node is not guarded{g}" for h in range(len(guard.holders)))
            checks += [f"if {moved}:", f"    guard{g}.check()"]
        _, out_device, size, dtype = k.fresh[0]
        env.update(pack=pack, call=call, make_out=Tensor._maker(out_device, size, dtype, shape, device_name))
        # the last output(s), as (tensor, node, buffer), to be taken again once nothing else
        # refers to them (see _measure_unreferenced); one per replay running at the same time, at most
        spare: list[tuple[Tensor, Any, Any]] = []
        rc_out, rc_node, rc_buffer = _UNREFERENCED or (-1, -1, -1)
        env.update(take_spare=spare.pop, keep_spare=spare.append, refs=sys.getrefcount,
                   rc_out=rc_out, rc_node=rc_node, rc_buffer=rc_buffer)
        source = _SINGLE_KERNEL_REPLAY.format(checks="".join(f"\n    {line}" for line in checks),
                                              handles=", ".join(handles),
                                              keep="keep_spare((out, node, buffer))" if _UNREFERENCED else "pass")
        exec(compile(source, "<ug.jit single-kernel replay>", "exec"), env)
        # popped: the function's globals are `env`, and `env` holding it would be a reference
        # cycle (freed by the cyclic GC only, with the spare output it keeps)
        return env.pop("replay")  # type: ignore[no-any-return]

    def _single_matmul_replay(self) -> Callable[[Any], Tensor] | None:
        """The replay of a function that compiled to one matmul into a fresh output (a small
        model layer), as one closure: the operands' buffers from the call's arguments (or
        captured tensors, or constants), a new output, `device.matmul`. None when the general
        path is needed."""
        step, single = self._lone_step(), self.single
        if step is None or single is None or self.guards:
            return None
        mm = step.matmul
        out_slot, shape, device_name = single
        if mm is None or mm.out != out_slot or self.fixed[out_slot] is not None:
            return None
        arg_of = {slot: self.arg_index[j] for j, slot in self.bind}
        if out_slot in arg_of:
            return None
        capture_of = self._capture_of()

        def operand(slot: int) -> Callable[[Any], Any] | None:
            if slot in arg_of:
                i = arg_of[slot]
                return lambda call_args: call_args[i]._node.buffer
            if slot in capture_of:
                current = self.captures[capture_of[slot]].current
                return lambda call_args: current()[1]
            constant = self.fixed[slot]  # kept alive by self.fixed
            return None if constant is None else (lambda call_args: constant)
        get_a, get_b = operand(mm.a), operand(mm.b)
        if get_a is None or get_b is None:
            return None
        make_out = Tensor._maker(mm.device, prod(mm.spec.out_shape), mm.spec.dtype, shape, device_name)
        matmul, spec = mm.device.matmul, mm.spec

        def replay(call_args: Any) -> Tensor:
            a, b = get_a(call_args), get_b(call_args)  # first: a stale capture raises before anything runs
            out = make_out()
            matmul(out._node.buffer, a, b, spec)
            return out
        return replay


# The single-kernel replay, written out per trace (_Trace._single_kernel_replay): the kernel's
# arguments are one expression each, in order, so a call builds no list and runs no loop. Python
# code around a tiny kernel is most of its time, and the generic version of this function (a
# template list copied and patched per call) took twice as long as this. `checks` (captured
# tensors' states and guards) come first: a stale one raises before anything runs. The
# `take_spare` lines must stay as they are: _measure_unreferenced measured the reference counts
# of exactly this pattern.
_SINGLE_KERNEL_REPLAY = """
def replay(call_args):{checks}
    try:
        out, node, buffer = take_spare()
    except IndexError:
        out = make_out()
        node, buffer = out._node, out._node.buffer
    else:
        if not (out._node is node and node.buffer is buffer and refs(out) == rc_out
                and refs(node) == rc_node and refs(buffer) == rc_buffer):
            out = make_out()  # still in use: a new buffer, the earlier result stays valid
            node, buffer = out._node, out._node.buffer
    call(pack({handles}))
    {keep}
    return out
"""


def _measure_unreferenced() -> tuple[int, int, int] | None:
    """The reference counts of a replay's last output, its node and its buffer, as the replay
    reads them after taking them from its spare list, when nothing else refers to them; None
    (no reuse) where counts cannot tell: builds without the GIL defer reference counting, and
    a count that does not rise with an extra reference is no use.

    A replay makes a new output each call (buffer, node, tensor: about 1.5 us of the 3-4 us a
    tiny replay takes, mostly building the three objects and the buffer's __del__). When the
    caller has dropped the previous output and built nothing on it (no view, no lazy op, no
    assign), nothing can read its buffer any more, so the replay writes into it again and
    returns the same tensor. Any other reference (a variable, a container, a node reading it,
    a view sharing the buffer) raises one of the counts above these."""
    if not getattr(sys, "_is_gil_enabled", lambda: True)():
        return None

    class T:
        __slots__ = ("_node", "__weakref__")

    class N:
        __slots__ = ("buffer",)

    class B:
        __slots__ = ("handle",)

    refs = sys.getrefcount

    def probe(extra: bool) -> tuple[int, int, int] | None:
        spare: list[tuple[Any, Any, Any]] = []
        t, n, b = T(), N(), B()
        t._node, n.buffer = n, b
        spare.append((t, n, b))
        held = [t, n, b] if extra else []
        del t, n, b
        out, node, buffer = spare.pop()
        if not (out._node is node and node.buffer is buffer):
            return None
        counts = (refs(out), refs(node), refs(buffer))
        del held
        return counts

    alone, held = probe(False), probe(True)
    if alone is None or held is None or any(h != a + 1 for a, h in zip(alone, held)):
        return None
    return alone


_UNREFERENCED = _measure_unreferenced()


# --- arguments and results as pytrees -----------------------------------------------------

_TREE_TYPES = (Tensor, tuple, list, dict)   # a positional argument of one of these takes the pytree path
_PY = "py"                                   # marks a Python value in a structure or a key


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
    return (_PY, _static_key(value))


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
    return (_PY, value)


def _unflatten(flat: list[Tensor], structure: Any) -> Any:
    it = iter(flat)

    def build(s: Any) -> Any:
        if s == "T":
            return next(it)
        kind, parts = s
        if kind is _PY:
            return parts
        if kind is dict or kind is OrderedDict:
            return kind([(k, build(p)) for k, p in parts])
        if kind is tuple or kind is list:
            return kind([build(p) for p in parts])
        return kind(*[build(p) for p in parts])  # a namedtuple
    return build(structure)


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
        out.append((path, f"a tensor of {_sig_text(value._node.sig)}"))
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
    traces: OrderedDict[Any, _Trace] = OrderedDict()
    history = _TraceHistory(fn, max_traces)
    lock = threading.Lock()  # for adding and evicting traces (lookups need none)
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
            traces.pop(kept_as, None)
            traces[kept_as] = trace
            while len(traces) > max_traces:
                traces.popitem(last=False)  # the least recently used
            last = (None, None)
            history.traced(args, kwargs, stale)
            held = wrapper_ref()  # (weakly: the wrapper holds this function through its closures)
            if held is not None:
                held.trace_count = history.count  # type: ignore[attr-defined]
        return result

    def retrace(stale_trace: _Trace | None, stale: _Stale, key: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                leaves: list[Tensor], arg_index: list[int]) -> Any:
        """Trace a call whose trace went stale (see _Stale), forgetting that trace."""
        with lock:
            for kept_as in [k for k, t in traces.items() if t is stale_trace]:
                del traces[kept_as]
        return trace_into(key, args, kwargs, leaves, arg_index, stale.reason)

    def replay(key: Any, trace: _Trace, seq: Any, leaves: list[Tensor], args: tuple[Any, ...],
               kwargs: dict[str, Any], arg_index: list[int]) -> Any:
        try:
            return trace.fast(seq) if trace.fast is not None else _replay(trace, leaves)
        except _Stale as stale:
            return retrace(trace, stale, key, args, kwargs, leaves, arg_index)

    def dispatch(key: Any, seq: Any, leaves: list[Tensor], args: tuple[Any, ...], kwargs: dict[str, Any],
                 arg_index: list[int], plain: bool) -> Any:
        nonlocal last
        trace = traces.get(key)
        if trace is not None and not trace.writes:
            # a trace of distinct tensors that writes none is right for any call, also one
            # passing a tensor in several places
            _used(traces, key)
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
            _used(traces, kept_as)
            return replay(key, trace, seq, leaves, args, kwargs, arg_index)
        if trace is None:
            return trace_into(key, args, kwargs, leaves, arg_index)
        _used(traces, key)
        return replay(key, trace, seq, leaves, args, kwargs, arg_index)

    def tree_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        leaves: list[Tensor] = []
        key = ("tree", _tree_key(args, leaves), tuple((name, _tree_key(kwargs[name], leaves)) for name in sorted(kwargs)))
        return dispatch(key, leaves, leaves, args, kwargs, list(range(len(leaves))), False)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal last
        if _TRACING and get_ident() in _TRACING:
            return fn(*args, **kwargs)  # called while a function is traced: part of that trace
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
                key += (_PY, _static_key(a))
        last_key, last_fast = last
        if key == last_key:
            try:
                return last_fast(args)  # type: ignore[misc]
            except _Stale as stale:
                # (`last` is only set for calls with tensors only)
                return retrace(traces.get(key), stale, key, args, kwargs, list(args), list(range(len(args))))
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


def _used(traces: OrderedDict[Any, _Trace], kept_as: Any) -> None:
    """Mark a trace the most recently used (evicted last)."""
    try:
        traces.move_to_end(kept_as)
    except KeyError:  # another thread evicted it since it was looked up
        pass


# --- tracing ------------------------------------------------------------------------------


def _trace(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], leaves: list[Tensor],
           arg_index: list[int]) -> tuple[_Trace, Any]:
    ctx = _TraceContext(fn, [t._node for t in leaves])
    _begin_trace(ctx)
    try:
        result = fn(*args, **kwargs)
    finally:
        _end_trace()
    out_leaves: list[Tensor] = []
    structure = _flatten_output(result, out_leaves)
    return _compile_trace(ctx, leaves, out_leaves, structure, arg_index), result


def _holders(node: Node, skip: set[int]) -> list[Tensor]:
    """The tensors whose value is `node`, but those in `skip` (ids of the tensors the trace
    made or wrote): tensors of the enclosing scope that held it before the call, and whom the
    function read it from."""
    found = [r for r in node.readers() if isinstance(r, Tensor) and r._node is node and id(r) not in skip]
    if node._creator and not any(id(t) == node._creator for t in found):
        # a ug.jit replay's output, which is not among the node's readers (Node._creator): find
        # it among the node's referrers (rare, and only while tracing)
        found += [r for r in gc.get_referrers(node) if isinstance(r, Tensor) and id(r) == node._creator and r._node is node]
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
                   arg_index: list[int]) -> _Trace:
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
    captures = [_Capture(holders, n, slot_of.get(id(n))) for holders, n in captured]
    writes = [_Write(j, None, None, t._node.sig, slot_of[id(t._node)]) for j, t in arg_writes]
    writes += [_Write(None, t, slot_of.get(id(before)), before.sig, slot_of[id(t._node)]) for t, before in state_writes]
    if compiled is not None:
        _run_first(compiled, computed, ctx.fn)
    del pins

    # the values before the call of the written tensors of the enclosing scope, by their write
    before_of = {id(before): len(arg_writes) + k for k, (_, before) in enumerate(state_writes)}
    outputs, output_devices, held, constants, kept_pins = _describe_outputs(
        out_leaves, leaf_of, arg_nodes, writes, before_of, captures, slot_of, computed)
    return _Trace(compiled.runner if compiled is not None else None, compiled.steps if compiled is not None else [],
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
                  ) -> tuple[list[tuple[list[Tensor], Node]], list[_Guard]]:
    """The values the graph reads from tensors of the enclosing scope (but `inputs`): realized
    ones with their holders (captures), lazy constant ones as guards."""
    captured: list[tuple[list[Tensor], Node]] = []
    guards: list[_Guard] = []
    for n in nodes:
        if id(n) in inputs or (n.buffer is None and id(n) in traced):
            continue
        holders = _holders(n, not_holders)
        if not holders:
            continue
        if n.buffer is not None:
            captured.append((holders, n))
        else:
            guards.append(_Guard(holders, n))
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
    compiled.runner(bufs)
    for i, (n, buf) in enumerate(zip(slots, bufs)):
        if n.buffer is None and buf is not None and i not in compiled.clobbered:
            n.set_buffer(buf)


def _describe_outputs(out_leaves: list[Tensor], leaf_of: dict[int, int], arg_nodes: list[Node], writes: list[_Write],
                      before_of: dict[int, int], captures: list[_Capture], slot_of: dict[int, int], computed: set[int]
                      ) -> tuple[list[tuple[str, int, tuple[int, ...]]], list[str], list[Tensor], list[Node], list[Tensor]]:
    """Where a replay takes each output tensor from (see _Trace.outputs): (outputs, their
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


def _value_before(write: _Write) -> Node:
    """The value now of a tensor of the enclosing scope that the function writes (realized),
    which the replay reads; _Stale when its shape or dtype changed."""
    t = write.tensor
    assert t is not None
    node = t._node
    if node.sig != write.sig:
        raise _Stale(f"a tensor of the enclosing scope that it writes changed from {_sig_text(write.sig)} "
                     f"to {_sig_text(node.sig)}")
    if node.buffer is None:
        t.realize()
    return node


def _replay(trace: _Trace, leaves: list[Tensor]) -> Any:
    """A replay on the general path: bind every buffer, run the steps, write, build the result."""
    # everything that may be stale first: nothing has run when _Stale is raised
    for guard in trace.guards:
        guard.check()
    states = [cap.current() for cap in trace.captures]
    befores = [_value_before(w) if w.tensor is not None else None for w in trace.writes]
    bufs = trace.fixed.copy()
    for j, slot in trace.bind:
        bufs[slot] = leaves[j]._node.buffer
    for cap, state in zip(trace.captures, states):
        if cap.slot is not None:
            bufs[cap.slot] = state[1]
    for w, before in zip(trace.writes, befores):
        if before is not None and w.before_slot is not None:
            bufs[w.before_slot] = before.buffer
    arg_nodes = [t._node for t in leaves] if trace.reads_arg_nodes else []
    if trace.runner is not None:
        trace.runner(bufs)
    for w in trace.writes:
        written = leaves[w.leaf] if w.leaf is not None else w.tensor
        assert written is not None
        written._replace_node(graph.buffer_node(bufs[w.after_slot], w.sig[0], w.sig[2]))  # type: ignore[arg-type]
    if trace.single is not None:  # the common case: one tensor out
        i, shape, device = trace.single
        return Tensor._of_new_node(graph.buffer_node(bufs[i], shape, device))  # type: ignore[arg-type]
    outs: list[Tensor] = []
    for (kind, i, shape), device in zip(trace.outputs, trace.output_devices):
        if kind == "slot":
            outs.append(Tensor(graph.buffer_node(bufs[i], shape, device)))  # type: ignore[arg-type]
        elif kind == "arg":
            outs.append(leaves[i])
        elif kind == "argnode":
            outs.append(Tensor(arg_nodes[i]))
        elif kind == "held":
            outs.append(trace.held[i])
        elif kind == "before":
            outs.append(Tensor(befores[i]))  # type: ignore[arg-type]
        elif kind == "capnode":
            outs.append(Tensor(states[i][0]))
        elif kind == "const":
            outs.append(Tensor(trace.constants[i]))
        elif kind == "same":
            outs.append(outs[i])
        else:
            raise AssertionError(f"unknown output kind {kind!r}")
    return _unflatten(outs, trace.structure)


__all__ = ["DEFAULT_MAX_TRACES", "RetraceWarning", "TracerValueError", "jit"]
