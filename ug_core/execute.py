"""Executing a graph: schedule the nodes' graph (or find a kept one of the same structure), run it, and
give every node it computed its buffer (ug.realize, Tensor.realize, .numpy()).

A graph with the structure of one realized before replays that one's compiled steps
(steps.Replay, kept in runtime.compile_cache.schedules) on its own buffers, without scheduling.
"""

from __future__ import annotations

from typing import Callable

from . import graph
from . import profiler as _prof
from .device import Buffer, is_writable
from .faults import defer_interrupts
from .graph import Node, graph_lock
from .ops import Op
from .plugins import registry
from .runtime import CompiledSchedule, compile_cache, compile_schedule, debug_level
from .schedule import KernelItem, Schedule, create_schedule, unrealized, walk
from .schedule.assign import _observed_after
from .steps import Replay, Scratch
from .structure import graph_key

_log = _prof.log


def run_schedule(schedule: Schedule) -> CompiledSchedule | None:
    """Compile and run a schedule, then give every produced node its buffer; the compiled
    schedule (None when there was nothing to run)."""
    if not schedule.items:
        return None
    if debug_level() < 1:
        compiled = compile_schedule(schedule, tiered=True)
        _run_on(compiled.run, compiled.slots, compiled.clobbered, schedule.targets, compiled.effects,
                len(compiled.steps))
        schedule.adopt_stand_ins()
        return compiled
    _log(str(schedule))
    # UG_DEBUG's table is a profile's, of this thread's compiles and runs of this schedule; from
    # UG_DEBUG=2 on, every kernel compiles before it runs (no tier 0), so that the loop IR and the
    # source it prints are of what ran
    with _prof.Profile(thread_only=True) as p:
        compiled = compile_schedule(schedule, tiered=debug_level() < 2)
        _run_on(compiled.run, compiled.slots, compiled.clobbered, schedule.targets, compiled.effects,
                len(compiled.steps))
    schedule.adopt_stand_ins()
    _log(str(p.table(per_run=True)))
    return compiled


def _intermediates(slots: list[Node], bufs: list[Buffer | None], clobbered: frozenset[int],
                   targets: list[Node]) -> frozenset[int]:
    """The slots whose buffers may go after their last use (see _run_on): computed here, no
    target, held by no tensor, and read only by nodes that have a buffer or get one in this
    run. (A reader that stays lazy, e.g. fused into a kernel but held by a tensor, would compute
    it again from its sources later, and an in-place write may have overwritten those since.)"""
    computed = {id(n) for i, (n, b) in enumerate(zip(slots, bufs)) if b is None and i not in clobbered}
    keep = {id(t) for t in targets}
    drop = []
    for i, (node, buf) in enumerate(zip(slots, bufs)):
        if buf is not None or i in clobbered or node._creator or id(node) in keep:
            continue
        if all(type(r) is Node and (r.buffer is not None or id(r) in computed) for r in node.readers()):
            drop.append(i)
    return frozenset(drop)


def realize_nodes(targets: list[Node]) -> None:
    """Compute the targets' values and give them (and every node the schedule realizes on the
    way) their buffers: ug.realize and Tensor.realize.

    A graph with the structure of one realized before (structure.graph_key: the same ops,
    shapes, dtypes and constants, reading other buffers) runs that one's compiled steps on its
    own buffers, without scheduling again: for a small graph, scheduling and looking up its
    programs cost far more than running them. A graph with assigns replays them only where
    its in-place writes are still allowed (_in_place_allowed), else it is scheduled again.
    UG_DEBUG >= 1 always schedules, to show it.

    It holds graph_lock throughout: a realize in another thread would otherwise walk this
    graph while this one records its buffers (and drops the nodes' sources), or run the same
    in-place write a second time on the buffer this one already wrote."""
    with graph_lock:
        _realize_nodes(targets)


def _realize_nodes(targets: list[Node]) -> None:
    if len(targets) == 1:   # (Tensor.realize, float(), .item(): one node, without unrealized's dict)
        if targets[0].buffer is not None:
            return
    else:
        targets = unrealized(targets)
        if not targets:
            return
    nodes = walk(targets)
    structure = graph_key(nodes, targets, assigns=True) if debug_level() < 1 else None
    # (kept steps hold device objects: a device registered again under its name is another one)
    key = None if structure is None else (registry.generation, structure)
    cache = compile_cache
    try:
        replay = cache.schedules.get(key) if key is not None else None
    except TypeError:  # an unhashable argument (a custom op's callable)
        key = replay = None
    if replay is not None and replay.in_place and not _in_place_allowed(replay, nodes):
        replay = None   # (scheduled again below, and not kept: the kept one stays for later graphs)
        keep = False
    else:
        keep = True
    if replay is not None:
        cache.programs.hits += replay.programs   # (each program it reuses counts as a hit)
        slot_nodes = [nodes[i] if isinstance(i, int) else i.node() if isinstance(i, Scratch) else i for i in replay.slots]
        _run_on(replay.run if not _prof.active else replay.run_timed, slot_nodes, replay.clobbered, targets,
                replay.effects, len(replay.steps))
        return
    looked_up = cache.hits + cache.misses
    schedule = create_schedule(targets, nodes)   # (the walk above: the graph is walked once)
    position = {id(n): i for i, n in enumerate(nodes)}
    built: set[int] = set()   # the device pass's nodes: a replay makes a scratch node for each
    if schedule.replaced:
        built = {id(n) for n in walk(schedule.targets)} - position.keys()
        for original, stand_in in schedule.replaced.items():   # (its buffer goes to the original)
            if id(original) in position:
                position[id(stand_in)] = position[id(original)]
    compiled = run_schedule(schedule)
    if compiled is None:
        return
    slots = [position.get(id(n), Scratch(n.sig) if id(n) in built else n if n.realized else None)
             for n in compiled.slots]
    if key is None or not keep or None in slots or compiled.provisional:
        return
    in_place: list[int] = []
    computed: set[int] = set()
    for item in schedule.items:
        for out in (item.outputs if isinstance(item, KernelItem) else [item.out]):
            if id(out) in position:
                computed.add(position[id(out)])
        if isinstance(item, KernelItem):
            for assign in item.alias:
                if id(assign) not in position:
                    return   # (an assign the device pass made: no position to check it at)
                in_place.append(position[id(assign)])
    steps = [step.run for step in compiled.steps]
    cache.keep_schedule(key, Replay(steps, slots, cache.hits + cache.misses - looked_up,  # type: ignore[arg-type]
                                     compiled.last_use, compiled.clobbered, compiled.effects,
                                     compiled.infos, tuple(in_place), frozenset(computed)))


def _in_place_allowed(replay: Replay, nodes: list[Node]) -> bool:
    """Whether the assigns `replay` writes in place may write in place in the graph `nodes` too
    (the scheduler's own conditions, schedule.assign._in_place_assigns): the target's buffer is
    one ug may write, and nothing alive reads the target's old value after the run, where the
    nodes the replay computes into buffers of their own end a reader's path. The structure
    is the same, so what differs between two graphs is only which of their nodes live tensors
    hold and which buffers are shared or read-only."""
    if graph.threads.several:
        return False
    realize = {nodes[i] for i in replay.computed}
    assigned = {id(n.srcs[0]) for n in nodes if n.op is Op.ASSIGN and not n.realized}
    memo: dict[int, bool] = {}
    for i in replay.in_place:
        node = nodes[i]
        target = node.srcs[0]
        if target.realized and (getattr(target.buffer, "shared", False) or not is_writable(target.buffer)):
            return False
        if _observed_after(target, node, realize, assigned, memo):
            return False
    return True


def _run_on(run: Callable[[list[Buffer | None], frozenset[int], list[int]], object], slots: list[Node],
            clobbered: frozenset[int], targets: list[Node],
            effects: list[tuple[tuple[int, ...], tuple[int, ...]]], n_steps: int) -> None:
    """Run compiled steps on the buffers of these slot nodes, then give each node that had
    none the buffer the steps produced for it (but the clobbered ones, see Schedule.clobbered).

    An intermediate's buffer is let go after the last step that uses it, so a chain of k
    matmuls holds two or three products at a time, not k (see _intermediates for which).

    A run cut short (Ctrl-C between two steps, or an error such as a custom op's) still gives
    the nodes of the steps that ran their buffers: `effects` says per step which slots it
    gives values (a slot that several steps write, a partial write's copy of the old value
    and then the write, is done when the last one ran) and which slots' buffers it writes in
    place. A node whose step ran but whose buffer a step that ran overwrote is left out (in a
    whole run these are `clobbered`). Why: a step that wrote a buffer in place has overwritten
    the value its node's sources read, so left lazy, that node would compute the write again
    on the written value; and a lazy target whose buffer a later write would take keeps its
    own value while that write has not run. The nodes of the steps that did not run stay lazy
    and compute later from sources nothing has overwritten (_order runs every reader of an old
    value before the write that overwrites it, and an overwritten node is one nothing observes
    after). The run and this record are one critical section (faults.defer_interrupts),
    interrupted only between two steps.

    With one step (`n_steps`, the common small realize) nothing is let go early: no later
    step runs meanwhile, and an intermediate that gets its buffer is one nothing holds, freed
    with its node at once; so the readers' check (_intermediates) is skipped."""
    bufs: list[Buffer | None] = [n.buffer for n in slots]
    drop = _intermediates(slots, bufs, clobbered, targets) if n_steps > 1 else _NONE
    done = [0]
    with defer_interrupts:
        try:
            run(bufs, drop, done)
        except BaseException:
            ran = done[0]
            last: dict[int, int] = {}   # slot -> the last step giving it its value (a partial write
            for k, (made, _) in enumerate(effects):   # into a fresh buffer is a copy, then the write)
                for slot in made:
                    last[slot] = k
            overwritten = {slot for _, written in effects[:ran] for slot in written}
            for i, k in last.items():
                node, buf = slots[i], bufs[i]
                if k < ran and i not in overwritten and not node.realized and buf is not None:
                    node.set_buffer(buf)
            raise
        for i, (node, buf) in enumerate(zip(slots, bufs)):
            if node.buffer is None and buf is not None and i not in clobbered:
                node.set_buffer(buf)


_NONE: frozenset[int] = frozenset()
