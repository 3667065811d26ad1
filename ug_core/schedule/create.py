"""create_schedule: the device pass first, then the scheduler's passes run until they agree
(buffers, in-place writes, kernels, order), then the kernels' view offsets made parameters."""

from __future__ import annotations

from ..graph import Node
from ..kernel_ir import Kernel
from ..kernel_params import parametrize_offsets
from .assign import _in_place_assigns, _misaligned_in_place
from .build import ITEM_OPS, BuildCache, _NeedsBuffer, _loads_buffer
from .buffers import _lifted, _must_realize, _settle_buffers
from .device_pass import for_device
from .fuse import _build_kernels, _reductions_in_several_kernels
from .items import KernelItem, Schedule, ScheduleError
from .operands import _item_for
from .order import _order
from .nodes import unrealized, walk


def create_schedule(targets: list[Node], nodes: list[Node] | None = None) -> Schedule:
    """The schedule computing `targets`. `nodes`: walk(unrealized(targets)), where the caller
    has walked the graph already (execute.realize_nodes keys the graph by its structure first:
    one walk serves both)."""
    targets = unrealized(targets)
    if nodes is None:
        nodes = walk(targets)
    rewrite = for_device(targets, nodes)   # (first: the passes below see what the device runs)
    if rewrite is not None:
        targets = rewrite.targets
        nodes = walk(targets)
    realize = _must_realize(nodes, targets)
    position = {id(n): i for i, n in enumerate(nodes)}
    in_place = _in_place_assigns(nodes, targets, realize)
    merge_writes = True
    cache = BuildCache()   # (every pass below builds every root: see there)
    while True:
        kernel_nodes = sorted((n for n in realize if n.op not in ITEM_OPS), key=lambda n: position[id(n)])
        try:
            items = _build_kernels(kernel_nodes, realize, in_place, merge_writes, cache)
        except _NeedsBuffer as e:
            if e.node in realize:  # would loop forever: a bug in the scheduler, not in the user's graph
                raise ScheduleError(f"scheduler could not place {e.node!r}") from e
            realize.update(_lifted(e.nodes, realize, position, cache))
            _settle_buffers(nodes, realize, cache)  # the other nodes builds will ask for, in one pass
            continue
        misaligned = _misaligned_in_place(items, in_place)
        # a value with a buffer of its own already cannot be given one: misaligned, its kernel
        # reads the target itself (`x[::-1] = x`, also where x is an earlier write of this
        # schedule, in `realize` and sharing the target's buffer): that write gets a fresh buffer
        not_in_place = {a for a in misaligned if _loads_buffer(a.srcs[1], realize)}
        in_place -= not_in_place
        shared = _reductions_in_several_kernels(items) | ({a.srcs[1] for a in misaligned - not_in_place} - realize)
        if shared or not_in_place:
            realize.update(shared)
            continue
        items += [_item_for(n) for n in sorted((n for n in realize if n.op in ITEM_OPS), key=lambda n: position[id(n)])]
        try:
            ordered = _order(items, in_place)
        except ScheduleError:
            if merge_writes and any(isinstance(i, KernelItem) and i.alias and len(i.outputs) > 1 for i in items):
                # a write merged with its readers (_write_clusters) that must also wait for a
                # reader of its target which needs the merged kernel: kernels of their own
                merge_writes = False
                continue
            if not in_place:
                raise
            in_place = set()  # a read depends on the write: write into fresh buffers instead
            continue
        clobbered = {n.srcs[0] for n in in_place if not n.srcs[0].realized}
        # (kernels alike share one Kernel: see BuildCache; each is parametrized once)
        parametrized: dict[tuple[int, str], tuple[Kernel, Node | None]] = {}
        for item in ordered:  # last: the decisions above read the offsets in the kernels' views
            if isinstance(item, KernelItem):
                at = (id(item.kernel), item.outputs[0].device)
                done = parametrized.get(at)
                if done is None:
                    done = parametrized[at] = parametrize_offsets(item.kernel, item.outputs[0].device)
                item.kernel, holder = done
                if holder is not None:
                    item.buffers.append(holder)
        return Schedule(ordered, targets, clobbered, rewrite.replaced if rewrite is not None else {})
