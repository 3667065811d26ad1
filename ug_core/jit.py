"""ug.jit: trace a function once per input signature, then replay its compiled schedule.

The first call with a given signature (shapes, dtypes and devices of the tensor arguments,
and the values of the other arguments) runs the function lazily, schedules and compiles its
outputs, and remembers which buffer slots hold the inputs and outputs. Later calls skip the
Python function and the scheduler: they bind the new input buffers to those slots and run
the compiled steps.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

from . import graph
from .device import Buffer
from .runtime import CompiledSchedule, run_schedule
from .schedule import create_schedule
from .tensor import Tensor


@dataclass
class _Trace:
    compiled: CompiledSchedule | None
    fixed: list[Buffer | None]           # buffers of slots that are neither inputs nor outputs
    input_slots: list[int | None]        # per tensor argument: its slot, if the schedule reads it
    outputs: list[tuple[str, int, tuple[int, ...]]]   # ("slot", i, shape) | ("arg", j, shape) | ("const", k, shape)
    constants: list[Tensor]
    structure: Any                       # how to rebuild the return value from the output list
    # derived from the above, for the replay path
    bind: list[tuple[int, int]] = field(init=False)       # (tensor argument, slot) pairs
    single: tuple[int, tuple[int, ...], str] | None = field(init=False)  # one tensor out, from slot i: (i, shape, device)

    def __post_init__(self) -> None:
        self.bind = [(j, slot) for j, slot in enumerate(self.input_slots) if slot is not None]
        self.single = None
        if self.structure == "T" and self.outputs[0][0] == "slot" and self.compiled is not None:
            _, i, shape = self.outputs[0]
            self.single = (i, shape, self.compiled.slots[i].device)


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

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # the replay path: one pass over the arguments, a dict lookup, then the compiled steps
        key: list[Any] = []
        tensors: list[Tensor] = []
        for a in args:
            if type(a) is Tensor:
                node = a._node
                key.append((node.shape, node.dtype, node.device))
                if node.buffer is None:
                    a.realize()
                tensors.append(a)
            else:
                key.append(("py", _static_key(a)))
        if kwargs:
            key += sorted((k, _static_key(v)) for k, v in kwargs.items())
        tkey = tuple(key)
        trace = traces.get(tkey)
        if trace is None:
            trace, result = _trace(fn, args, kwargs, tensors)
            traces[tkey] = trace
            return result
        return _replay(trace, tensors)

    wrapper.traces = traces  # type: ignore[attr-defined]
    return wrapper


def _static_key(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


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
    return _Trace(compiled, fixed, input_slots, out_desc, constants, structure), result


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
