"""ug.jit's replays: running a trace again on a call's arguments.

The jit package traces a function, keys each call and picks its trace (see its doc for what a
replay computes); records.py holds what a trace keeps (`Trace`), this module and fast_replay.py
run it. A trace is replayed one of three ways, chosen once when it is made (`Trace.fast`):

- one kernel writing one fresh output, on a device with `handle_launcher` (most traced
  functions fuse into one kernel): `_single_kernel_replay` (fast_replay.py), the hot path;
- one matmul into a fresh output: `_single_matmul_replay` (fast_replay.py);
- anything else: `general_replay`, which binds every buffer slot, runs the compiled steps,
  makes the writes and builds the return value.

Each replay first checks what may have gone stale (a tensor of the enclosing scope that it
reads or writes changed) and raises Stale before anything runs; dispatch.py then traces again.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Any, Iterator

from ..faults import defer_interrupts
from ..graph import Node, graph_lock, new_node
from ..steps import run_steps
from ..tensor import Tensor
from .records import _BUFFER, PY, Stale, Trace, Write, _new_tensor, sig_text


# --- the general replay -------------------------------------------------------------------


def _value_before(write: Write) -> Node:
    """The value now of a tensor of the enclosing scope that the function writes (realized),
    which the replay reads; Stale when its shape or dtype changed."""
    t = write.tensor
    assert t is not None
    node = t._node
    if node.sig != write.sig:
        raise Stale(f"a tensor of the enclosing scope that it writes changed from {sig_text(write.sig)} "
                    f"to {sig_text(node.sig)}")
    if node.buffer is None:
        t.realize()
    return node


def general_replay(trace: Trace, leaves: list[Tensor]) -> Any:
    """A replay on the general path: bind every buffer, run the steps, write, build the result.

    One that writes tensors holds the graph lock (tensor.write_lock) from reading their values
    to replacing them, and runs its steps and writes as one critical section: Ctrl-C never
    leaves some of the writes done and others not."""
    if not trace.writes:
        return _general_replay(trace, leaves)
    with graph_lock, defer_interrupts:
        return _general_replay(trace, leaves)


def _general_replay(trace: Trace, leaves: list[Tensor]) -> Any:
    # everything that may be stale first: nothing has run when Stale is raised
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
        run_steps(trace.runner, trace.steps, bufs)   # (the timed path while a profile records)
    for w in trace.writes:
        written = leaves[w.leaf] if w.leaf is not None else w.tensor
        assert written is not None
        buffer = bufs[w.after_slot]
        assert buffer is not None
        written._replace_node(new_node(_BUFFER, (), None, (w.sig[0], buffer.dtype, w.sig[2]), buffer))
    if trace.single is not None:  # the common case: one tensor out
        i, shape, device = trace.single
        buffer = bufs[i]
        assert buffer is not None
        return _tensor_on_new_node(new_node(_BUFFER, (), None, (shape, buffer.dtype, device), buffer))
    outs: list[Tensor] = []
    for (kind, i, shape), device in zip(trace.outputs, trace.output_devices):
        if kind == "slot":
            buffer = bufs[i]
            assert buffer is not None
            outs.append(Tensor(new_node(_BUFFER, (), None, (shape, buffer.dtype, device), buffer)))
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
    return unflatten(outs, trace.structure)


def unflatten(flat: list[Tensor], structure: Any) -> Any:
    """The return value of structure `structure` (see jit._flatten_output) with the tensors
    `flat`."""
    return _build(iter(flat), structure)


def _build(tensors: Iterator[Tensor], structure: Any) -> Any:
    # a module function, not a closure in unflatten: one that calls itself is a reference
    # cycle, which kept the returned tensors' buffers alive until the cyclic GC ran
    if structure == "T":
        return next(tensors)
    kind, parts = structure
    if kind is PY:
        return parts
    if kind is dict or kind is OrderedDict:
        return kind([(k, _build(tensors, p)) for k, p in parts])
    if kind is tuple or kind is list:
        return kind([_build(tensors, p) for p in parts])
    return kind(*[_build(tensors, p) for p in parts])  # a namedtuple


def _tensor_on_new_node(node: Node) -> Tensor:
    """Tensor(node) for a node made just now, which has no readers yet: Node.add_reader's
    occasional pruning has nothing to prune, and no trace is running (replays inside a trace
    run inline), so Tensor.__init__ is skipped."""
    out = _new_tensor(Tensor)
    out._node = node
    node._readers = weakref.ref(out)   # (no reader yet: see Node._add_reader_ref)
    return out
