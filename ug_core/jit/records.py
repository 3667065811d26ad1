"""What a ug.jit trace keeps (`Trace`: the compiled steps, where each buffer comes from, the
captured tensors of the enclosing scope, the writes, the outputs) and Stale, which a replay
raises when the trace no longer fits (the call then traces again)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..device import Buffer
from ..graph import Node
from ..ops import Op
from ..tensor import Tensor

Replay = Callable[[Sequence[Any]], Tensor]
"""A fast replay: the call's arguments (positional, or the tensor leaves of a pytree call) ->
the output tensor."""

PY = "py"
"""Marks a Python value in an output structure (and, in pytree.py, in a trace key)."""


class Stale(Exception):
    """A trace no longer fits the tensors of the enclosing scope it reads (`reason` says how):
    the call traces again. Raised before a replay runs anything."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def sig_text(sig: tuple[Any, ...]) -> str:
    shape, dtype, device = sig
    return f"shape {shape} {np.dtype(dtype).name} on {device!r}"


# --- what a trace keeps -------------------------------------------------------------------


class Capture:
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
        """The state for the holders' value now (realized first if lazy); Stale when it does
        not fit the trace."""
        first = self.holders[0]
        node = first._node
        if any(t._node is not node for t in self.holders):
            raise Stale("tensors of the enclosing scope that held one value when it was traced "
                        "(the function read one of them) now hold different values")
        if node.sig != self.sig:
            raise Stale(f"a tensor of the enclosing scope that it reads changed from "
                        f"{sig_text(self.sig)} to {sig_text(node.sig)}")
        if node.buffer is None:
            first.realize()
        buffer = node.buffer
        assert buffer is not None
        self.state = state = (node, buffer, buffer.handle)
        return state


class Guard:
    """A lazy constant tensor of the enclosing scope (no buffer under it) that the trace
    compiled into its kernels: a write to it makes the next call trace again."""

    __slots__ = ("holders", "node")

    def __init__(self, holders: list[Tensor], node: Node):
        self.holders = holders
        self.node = node

    def check(self) -> None:
        for t in self.holders:
            if t._node is not self.node:
                raise Stale("a lazy constant tensor of the enclosing scope that it reads was written")


@dataclass
class Write:
    """A tensor the function writes (assign, setitem): each replay gives it its new value."""

    leaf: int | None                # an argument: its position among the tensor leaves
    tensor: Tensor | None           # else the tensor of the enclosing scope
    before_slot: int | None         # where the trace reads that tensor's value before the call
                                    # (for a tensor of the enclosing scope; an argument's is an input)
    sig: tuple[Any, ...]            # its (shape, dtype, device)
    after_slot: int                 # the slot of its value after the call


@dataclass
class Trace:
    runner: Callable[[list[Buffer | None]], object] | None   # the compiled steps, run on the slots' buffers
    steps: list[Any]                     # runtime._Step, for the fast paths
    fixed: list[Buffer | None]           # buffers of constant slots (made or read by the function, no one else's)
    input_slots: list[int | None]        # per tensor argument (leaf): its slot, if the schedule reads it
    captures: list[Capture]
    guards: list[Guard]
    writes: list[Write]
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
    fast: Replay | None = field(init=False)  # the whole replay (on the call's args), when it is one kernel or one matmul
                                             # (fast_replay.choose's, set by trace.py when it makes the trace)
    reads_arg_nodes: bool = field(init=False)              # an output is an argument's value before the call
    # while the trace's kernels run tiered (tier 0, see trace._upgrade): called by each replay,
    # it moves the trace to compiled steps and its fast replay once they are all compiled
    upgrade: Callable[[], None] | None = field(init=False)

    def __post_init__(self) -> None:
        self.bind = [(j, slot) for j, slot in enumerate(self.input_slots) if slot is not None]
        self.single = None
        if self.structure == "T" and self.outputs[0][0] == "slot" and self.runner is not None and not self.writes:
            _, i, shape = self.outputs[0]
            self.single = (i, shape, self.output_devices[0])
        self.fast = None
        self.upgrade = None
        self.reads_arg_nodes = any(kind == "argnode" for kind, _, _ in self.outputs)


# bound once, for the per-call paths (replay.py and fast_replay.py import them: globals there
# too): object.__new__ for Tensor, and Op.BUFFER (reading an enum member off its class goes
# through the enum's metaclass: several times a global's cost)
_new_tensor = Tensor.__new__
_BUFFER = Op.BUFFER
