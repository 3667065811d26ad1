"""ug.jit: trace a function once per input signature, then replay its compiled schedule.

The first call with a given signature (shapes, dtypes and devices of the tensor arguments,
and the values of the other arguments) runs the function lazily, schedules and compiles its
outputs, and remembers which buffer slots hold the inputs and outputs. Later calls skip the
Python function and the scheduler: they bind the new input buffers to those slots and run
the compiled steps.

Each call returns a new output tensor, so earlier results stay valid. A function that
compiled to one kernel keeps its last output, and when the caller has dropped it and nothing
reads it any more (see `_measure_unreferenced`), the next call writes into it and returns it again: that
spares building a buffer, node and tensor per call (about 1.5 us of a tiny replay). So a
jitted function holds one output buffer between calls, as a cache.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import graph
from .device import Buffer
from .runtime import CompiledSchedule, run_schedule
from .schedule import create_schedule
from .tensor import Tensor
from .view import prod


@dataclass
class _Trace:
    compiled: CompiledSchedule | None
    fixed: list[Buffer | None]           # buffers of slots that are neither inputs nor outputs
    input_slots: list[int | None]        # per tensor argument: its slot, if the schedule reads it
    outputs: list[tuple[str, int, tuple[int, ...]]]   # ("slot", i, shape) | ("arg", j, shape) | ("const", k, shape)
    constants: list[Tensor]
    structure: Any                       # how to rebuild the return value from the output list
    arg_index: list[int]                 # per tensor argument: its position in the call's arguments
    nargs: int                           # positional arguments of the traced call
    # derived from the above, for the replay path
    bind: list[tuple[int, int]] = field(init=False)       # (tensor argument, slot) pairs
    single: tuple[int, tuple[int, ...], str] | None = field(init=False)  # one tensor out, from slot i: (i, shape, device)
    fast: Callable[[tuple[Any, ...]], Tensor] | None = field(init=False)  # the whole replay (on the call's args), when it is one kernel
    all_tensors: bool = field(init=False)                 # every argument of the traced call was a tensor

    def __post_init__(self) -> None:
        self.bind = [(j, slot) for j, slot in enumerate(self.input_slots) if slot is not None]
        self.single = None
        if self.structure == "T" and self.outputs[0][0] == "slot" and self.compiled is not None:
            _, i, shape = self.outputs[0]
            self.single = (i, shape, self.compiled.slots[i].device)
        self.fast = self._single_kernel_replay() or self._single_matmul_replay()
        self.all_tensors = len(self.arg_index) == self.nargs

    def _lone_step(self) -> Any:
        """The compiled schedule's one step, when it has one and a run is just that step (no
        UG_DEBUG timing); else None."""
        compiled = self.compiled
        if compiled is None or len(compiled.steps) != 1 or compiled.runner is not compiled.steps[0].run:
            return None
        return compiled.steps[0]

    def _single_kernel_replay(self) -> Callable[[tuple[Any, ...]], Tensor] | None:
        """The replay of a function that compiled to one kernel writing one fresh output (the
        common case), as one function written for this trace (_SINGLE_KERNEL_REPLAY).
        Everything that does not change between calls is worked out here: where each kernel
        argument comes from (a captured buffer, an input, the output) and how to make the
        output. A call then reads the inputs' handles, launches, and returns the output.

        None when the general path is needed: several steps, UG_DEBUG timing, in-place assigns
        (the output is an input's buffer), several outputs, or a device without
        `handle_launcher`."""
        step, single = self._lone_step(), self.single
        if step is None or single is None:
            return None
        k = step.kernel
        out_slot, shape, device_name = single
        if k is None or k.aliases or len(k.fresh) != 1 or k.fresh[0][0] != out_slot:
            return None
        # the launch needs no aliasing check: the one buffer the kernel writes is fresh, so it is
        # no other argument; inputs and captured buffers may repeat (a tensor passed twice), which
        # is harmless, they are only read
        launcher = k.device.handle_launcher(k.program)
        if launcher is None:
            return None
        pack, call = launcher
        pos_of = {slot: pos for pos, slot in enumerate(k.args)}
        if len(pos_of) != len(k.args):  # a slot passed twice: not something the scheduler makes
            return None
        arg_of = {slot: self.arg_index[j] for j, slot in self.bind}
        # each kernel argument as a Python expression: a captured buffer's handle (kept alive
        # by self.fixed), an input's from the call's arguments, or the output's
        env: dict[str, Any] = {}
        handles: list[str] = []
        for pos, slot in enumerate(k.args):
            buf = self.fixed[slot]
            if slot == out_slot:
                handles.append("buffer.handle")
            elif buf is not None:
                env[f"captured{pos}"] = buf.handle
                handles.append(f"captured{pos}")
            elif slot in arg_of:
                handles.append(f"call_args[{arg_of[slot]}]._node.buffer.handle")
            else:
                return None
        _, out_device, size, dtype = k.fresh[0]
        env.update(pack=pack, call=call, make_out=Tensor._maker(out_device, size, dtype, shape, device_name))
        # the last output(s), as (tensor, node, buffer), to be taken again once nothing else
        # refers to them (see _measure_unreferenced); one per replay running at the same time, at most
        spare: list[tuple[Tensor, Any, Any]] = []
        rc_out, rc_node, rc_buffer = _UNREFERENCED or (-1, -1, -1)
        env.update(take_spare=spare.pop, keep_spare=spare.append, refs=sys.getrefcount,
                   rc_out=rc_out, rc_node=rc_node, rc_buffer=rc_buffer)
        source = _SINGLE_KERNEL_REPLAY.format(handles=", ".join(handles),
                                              keep="keep_spare((out, node, buffer))" if _UNREFERENCED else "pass")
        exec(compile(source, "<ug.jit single-kernel replay>", "exec"), env)
        return env["replay"]  # type: ignore[no-any-return]

    def _single_matmul_replay(self) -> Callable[[tuple[Any, ...]], Tensor] | None:
        """The replay of a function that compiled to one matmul into a fresh output (a small
        model layer), as one closure: the operands' buffers from the call's arguments (or the
        captured ones), a new output, `device.matmul`. None when the general path is needed."""
        step, single = self._lone_step(), self.single
        if step is None or single is None:
            return None
        mm = step.matmul
        out_slot, shape, device_name = single
        if mm is None or mm.out != out_slot or self.fixed[out_slot] is not None:
            return None
        arg_of = {slot: self.arg_index[j] for j, slot in self.bind}
        if out_slot in arg_of:
            return None

        def operand(slot: int) -> Callable[[tuple[Any, ...]], Any] | None:
            if slot in arg_of:
                i = arg_of[slot]
                return lambda call_args: call_args[i]._node.buffer
            captured = self.fixed[slot]  # kept alive by self.fixed
            return None if captured is None else (lambda call_args: captured)
        get_a, get_b = operand(mm.a), operand(mm.b)
        if get_a is None or get_b is None:
            return None
        make_out = Tensor._maker(mm.device, prod(mm.spec.out_shape), mm.spec.dtype, shape, device_name)
        matmul, spec = mm.device.matmul, mm.spec

        def replay(call_args: tuple[Any, ...]) -> Tensor:
            out = make_out()
            matmul(out._node.buffer, get_a(call_args), get_b(call_args), spec)
            return out
        return replay


# The single-kernel replay, written out per trace (_Trace._single_kernel_replay): the kernel's
# arguments are one expression each, in order, so a call builds no list and runs no loop. Python
# code around a tiny kernel is most of its time, and the generic version of this function (a
# template list copied and patched per call) took twice as long as this. The `take_spare` lines
# must stay as they are: _measure_unreferenced measured the reference counts of exactly this
# pattern.
_SINGLE_KERNEL_REPLAY = """
def replay(call_args):
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


def _flatten(value: Any) -> tuple[list[Tensor], Any]:
    if isinstance(value, Tensor):
        return [value], "T"
    if isinstance(value, (tuple, list)):
        flat, parts = [], []
        for v in value:
            f, s = _flatten(v)
            flat += f
            parts.append(s)
        return flat, (type(value), parts)
    raise TypeError(f"ug.jit: the function must return tensors (or tuples/lists of them), got {type(value).__name__}")


def _unflatten(flat: list[Tensor], structure: Any) -> Any:
    it = iter(flat)

    def build(s: Any) -> Any:
        if s == "T":
            return next(it)
        kind, parts = s
        return kind(build(p) for p in parts)
    return build(structure)


def jit(fn: Callable[..., Any]) -> Callable[..., Any]:
    traces: dict[Any, _Trace] = {}
    # traces of calls that passed one tensor in several places, by key and how the tensors
    # repeat (see _repeats): such a trace reads one buffer for all of them, so it is right only
    # for calls that repeat them the same way (a trace of distinct tensors is right for any call)
    repeated: dict[Any, _Trace] = {}
    # the key and fast replay of the last call that took the fast path with tensors only as
    # arguments: most calls repeat the previous call's signature, and comparing two keys costs
    # less than hashing one. Such a key holds only shapes, dtypes and device names, whose ==
    # is plain (an argument's value could compare any way, elementwise even); a key with a
    # non-tensor argument differs from it at that argument's "py" already. One tuple, replaced
    # whole: a thread never sees one call's key with another's replay.
    last: tuple[tuple[Any, ...] | None, Callable[[tuple[Any, ...]], Tensor] | None] = (None, None)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal last
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
            else:
                key += ("py", _static_key(a))
        if kwargs:
            key += ("kw", *sorted((k, _static_key(v)) for k, v in kwargs.items()))
        last_key, last_fast = last
        if key == last_key:
            return last_fast(args)  # type: ignore[misc]
        trace = traces.get(key)
        if trace is not None and trace.fast is not None:
            if trace.all_tensors and not kwargs:
                last = (key, trace.fast)
            return trace.fast(args)
        tensors = [a for a in args if type(a) is Tensor]
        if trace is None:
            repeats = _repeats(tensors)
            if repeats:
                rkey = (key, repeats)
                trace = repeated.get(rkey)
                if trace is None:
                    trace, result = _trace(fn, args, kwargs, tensors)
                    repeated[rkey] = trace
                    return result
                return trace.fast(args) if trace.fast is not None else _replay(trace, tensors)
            trace, result = _trace(fn, args, kwargs, tensors)
            traces[key] = trace
            return result
        return _replay(trace, tensors)

    wrapper.traces = traces  # type: ignore[attr-defined]
    return wrapper


def _repeats(tensors: list[Tensor]) -> tuple[int, ...]:
    """For each tensor argument, the position of the first one with the same node; () when
    they all differ."""
    first: dict[int, int] = {}
    where = tuple(first.setdefault(id(t._node), i) for i, t in enumerate(tensors))
    return where if len(first) < len(tensors) else ()


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


def _trace(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], tensors: list[Tensor]) -> tuple[_Trace, Any]:
    input_nodes = [t.node for t in tensors]
    result = fn(*args, **kwargs)
    outs, structure = _flatten(result)
    sched = create_schedule([t.node for t in outs])
    if not sched.items:
        compiled = None
        slots: list[Any] = []
    else:
        compiled = CompiledSchedule(sched)
        slots = compiled.slots
    slot_of = {id(n): i for i, n in enumerate(slots)}
    input_slots = [slot_of.get(id(n)) for n in input_nodes]
    input_ids = {id(n) for n in input_nodes}
    # slots already realized before the run and not inputs: captured constants (weights)
    fixed: list[Buffer | None] = [n.buffer if (n.realized and id(n) not in input_ids) else None for n in slots]
    bufs: list[Buffer | None] = [n.buffer for n in slots]
    if compiled is not None:
        run_schedule_bufs(compiled, bufs)
    out_desc: list[tuple[str, int, tuple[int, ...]]] = []
    constants: list[Tensor] = []
    for t in outs:
        node = t.node
        if id(node) in input_ids:
            out_desc.append(("arg", next(j for j, n in enumerate(input_nodes) if n is node), t.shape))
        elif id(node) in slot_of:
            out_desc.append(("slot", slot_of[id(node)], t.shape))
        else:  # realized before the call and not an input: returned as it is every time
            out_desc.append(("const", len(constants), t.shape))
            constants.append(t)
    arg_index = [i for i, a in enumerate(args) if type(a) is Tensor]
    return _Trace(compiled, fixed, input_slots, out_desc, constants, structure, arg_index, len(args)), result


def run_schedule_bufs(compiled: CompiledSchedule, bufs: list[Buffer | None]) -> None:
    compiled.run(bufs)
    for node, buf in zip(compiled.slots, bufs):
        if not node.realized and buf is not None:
            node.set_buffer(buf)


def _replay(trace: _Trace, tensors: list[Tensor]) -> Any:
    bufs = trace.fixed.copy()
    for j, slot in trace.bind:
        bufs[slot] = tensors[j]._node.buffer
    if trace.compiled is not None:
        trace.compiled.runner(bufs)
    if trace.single is not None:  # the common case: one tensor out
        i, shape, device = trace.single
        return Tensor._of_new_node(graph.buffer_node(bufs[i], shape, device))  # type: ignore[arg-type]
    outs = []
    for kind, i, shape in trace.outputs:
        if kind == "slot":
            outs.append(Tensor(graph.from_buffer(bufs[i], shape)))  # type: ignore[arg-type]
        elif kind == "arg":
            outs.append(tensors[i])
        else:
            outs.append(trace.constants[i])
    return _unflatten(outs, trace.structure)


__all__ = ["jit", "run_schedule"]
