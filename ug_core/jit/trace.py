"""A call traced: the function run lazily under the tracer, then what it computed scheduled,
compiled and run once, and recorded as a Trace (where each buffer of a replay comes from).

A trace's new kernels may start on tier 0 (ug_core.tiers: numpy, compiled in the background
from their second run on), as a realize's do, so that a function called once or twice costs no
LLVM: its first calls replay the tiered steps (the general replay), and once every kernel is
compiled the trace compiles its schedule again, finding the programs, and gets its fast replay
(`_upgrade`). UG_TIER=1 (and UG_DEBUG >= 2) compile them before the first run, as
`ug.precompile` / `jit(fn).lower` do ahead of time (a trace whose kernels are compiled starts
on tier 1)."""

from __future__ import annotations

import gc
import weakref
from typing import Any, Callable

import numpy as np

from .. import tiers
from ..device import Buffer, Program
from ..faults import defer_interrupts
from ..graph import Node, graph_lock
from ..ops import Op
from ..execute import realize_nodes
from ..plugins import registry
from ..runtime import CompiledSchedule, compile_cache, compile_schedule, debug_level
from ..schedule import KernelItem, Schedule, create_schedule, walk
from ..view import prod
from ..tensor import Tensor
from . import fast_replay
from .pytree import _flatten_output, _views_as_values
from .records import Capture, Guard, Trace, Write
from .tracer import _TraceContext, _begin_trace, _end_trace, _fn_label


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
    compiled = compile_schedule(schedule, tiered=_tiers_first_calls(schedule)) if schedule.items else None
    slots = compiled.slots if compiled is not None else []
    slot_of = {id(n): i for i, n in enumerate(slots)}
    for original, stand_in in schedule.replaced.items():   # (the device pass's, schedule.device_pass)
        if id(stand_in) in slot_of:
            slot_of[id(original)] = slot_of[id(stand_in)]
    bound = arg_ids | before_ids | captured_ids
    fixed = [n.buffer if n.buffer is not None and id(n) not in bound else None for n in slots]
    computed = {i for i, n in enumerate(slots) if n.buffer is None}
    captures = [Capture(holders, n, slot_of.get(id(n))) for holders, n in captured]
    writes = [Write(j, None, None, t._node.sig, slot_of[id(t._node)]) for j, t in arg_writes]
    writes += [Write(None, t, slot_of.get(id(before)), before.sig, slot_of[id(t._node)]) for t, before in state_writes]
    if compiled is not None:
        _run_first(compiled, computed, ctx.fn)
        schedule.adopt_stand_ins()
    del pins

    # the values before the call of the written tensors of the enclosing scope, by their write
    before_of = {id(before): len(arg_writes) + k for k, (_, before) in enumerate(state_writes)}
    outputs, output_devices, held, constants, kept_pins = _describe_outputs(
        out_leaves, leaf_of, arg_nodes, writes, before_of, captures, slot_of, computed)
    trace = Trace(compiled.runner if compiled is not None else None, compiled.steps if compiled is not None else [],
                  fixed, [slot_of.get(id(n)) for n in arg_nodes], captures, guards, writes, outputs, output_devices,
                  held, constants, kept_pins, structure, arg_index)
    trace.fast = fast_replay.choose(trace)
    if compiled is not None and compiled.tiered:
        trace.upgrade = _upgrade(trace, schedule, compiled)
    return trace


# --- tier 0 for a trace's first calls ------------------------------------------------------

JIT_TIER_MAX_BYTES = 1 << 26
"""A trace whose schedule's buffers take more bytes than this compiles its kernels before its
first run (tier 1): a trace on tier 0 keeps its schedule, and so the first call's buffers, until
its kernels are compiled."""


def _tiers_first_calls(schedule: Schedule) -> bool:
    """Whether a trace's first calls run its new kernels on tier 0 (ug_core.tiers: numpy, while
    they compile in the background from their second run on): in tier mode "auto", without
    UG_DEBUG >= 2 (which compiles everything before it runs), for a schedule with a kernel not
    compiled yet whose buffers take at most JIT_TIER_MAX_BYTES. The kernels each qualify or not
    as a realize's do (a kernel of more than tiers.MAX_ELEMENTS compiles at once)."""
    if tiers.mode() != "auto" or debug_level() >= 2:
        return False
    kernels = [item for item in schedule.items if isinstance(item, KernelItem)]
    if not kernels or all(_program(item) is not None for item in kernels):
        return False
    nodes = {id(n): n for item in schedule.items for n in item.buffers}
    return sum(prod(n.shape) * np.dtype(n.dtype).itemsize for n in nodes.values()) <= JIT_TIER_MAX_BYTES


def _key(item: KernelItem) -> tuple[str, str, str]:
    return compile_cache.key(registry.get(item.outputs[0].device), item.kernel)


def _program(item: KernelItem) -> Program | None:
    return compile_cache.programs.peek(_key(item))


def _upgrade(trace: Trace, schedule: Schedule, compiled: CompiledSchedule) -> Callable[[], None] | None:
    """For a trace compiled tiered (_tiers_first_calls): what a replay calls until it is done
    (Trace.upgrade). Once every kernel of the schedule is compiled (in the background, or
    anywhere else), it compiles the schedule again, now finding every program (and fusing a
    matmul's epilogue), gives the trace those steps and its fast replay (fast_replay.choose),
    and lets go of the schedule. None where every kernel already ran compiled."""
    keys = [_key(item) for item in schedule.items if isinstance(item, KernelItem)]
    if all(compile_cache.programs.peek(k) is not None for k in keys) and not compiled.provisional:
        return None
    slot_ids = [id(n) for n in compiled.slots]
    held: list[Schedule | None] = [schedule]   # (dropped once done: it holds the first call's nodes)
    trace_ref = weakref.ref(trace)   # (the trace holds this function: no reference cycle)

    def upgrade() -> None:
        if any(compile_cache.programs.peek(k) is None for k in keys):
            return
        scheduled, trace = held[0], trace_ref()
        if scheduled is None or trace is None:
            return
        held[0] = None
        trace.upgrade = None
        again = CompiledSchedule(scheduled)   # (every program is in the cache: nothing compiles)
        if [id(n) for n in again.slots] != slot_ids:
            return   # (not the same slots: the trace keeps its tiered steps, which run compiled by now)
        trace.steps = again.steps
        trace.runner = again.runner
        trace.fast = fast_replay.choose(trace)
    return upgrade


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
        if any(src not in computed for src in step.overwrites):
            raise RuntimeError(f"ug.jit: internal error: the schedule of {_fn_label(fn)} writes in place into a "
                               f"buffer it did not make (step {i}: {step.describe}), which a replay cannot")
    bufs: list[Buffer | None] = [n.buffer for n in slots]
    with defer_interrupts:   # (Ctrl-C at its end: the nodes get their buffers all or none)
        compiled.run_all(bufs)   # (the runner, or the timed path while a profile records)
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
