"""Fusing kernel roots into kernels: each root's kernel built alone, then writes merged with
the roots that read their new values (_write_clusters) and independent roots of one iteration
space and depth merged into one kernel (_build_kernels, _depths)."""

from __future__ import annotations

import sys

from ..graph import Node
from ..ops import Op
from ..view import View
from .assign import _reads_only_at
from .build import BuildCache, _build, _kernel_root, _loads_buffer, _Root
from .buffers import MAX_KERNEL_SIZE, _fused_size, _max_arguments
from .items import Item, KernelItem


_ALONE = frozenset({Op.ASSIGN, Op.SCATTER})
"""Roots whose kernel is never merged with others: a write (its store may alias its target) and
a scatter. A scatter's kernel runs a part's positions in order, not the outer index's rows: with
a reduction of the same (parts, 1) iteration space it made a kernel the gpu lowering rejects
(vulkan: `m = x.max(-1); m[idx] = 1`), and scatters merged with each other gain no parallelism
(one part is one thread or workgroup either way) while LLVM's time for a kernel grows with the
square of its scatter stores (cpu: 8 stores 0.5 s, 32 stores 6 s); alone, the scatters of a
chain (`acc.assign(scatter_add(acc, ...))` k times) are one compiled kernel run k times."""


MAX_MERGED_ROOTS = 8
"""The most independent roots one kernel computes together. A merged kernel is new code for each
number of roots, so without a bound every length of a chain of independent small writes (their
scalar values, say) would compile a kernel of its own; past 8 the launches saved are few."""


def _build_kernels(kernel_nodes: list[Node], realize: set[Node], in_place: set[Node], merge_writes: bool = True,
                   cache: BuildCache | None = None) -> list[Item]:
    # first each root alone (this is where _NeedsBuffer decisions are made) ...
    singles = {node: _build([_kernel_root(node)], realize, cache=cache) for node in kernel_nodes}
    depth, reach = _depths(singles)
    # ... then merge writes with the roots that read their new values (_write_clusters): each
    # cluster is one kernel, and counts as one root in the depths below ...
    clusters = _write_clusters(kernel_nodes, singles, realize, in_place, depth, reach) if merge_writes else {}
    if clusters:
        depth, _ = _depths(singles, clusters)
    in_cluster = {m: r for r, members in clusters.items() for m in members}
    # ... then merge independent roots with the same iteration space into one kernel: roots of
    # one depth (see _depths) are independent, and kernels that each hold roots of one depth
    # never need each other in a circle, so this is one pass, linear in the roots
    groups: list[list[Node]] = []
    group_inputs: list[set[int]] = []  # ids of the nodes each group's kernel reads
    joining: dict[tuple[str, tuple[int, ...], tuple[int, ...], int], int] = {}  # the group a key's roots join
    for node in kernel_nodes:
        if node in in_cluster:   # a cluster is a kernel of its own, placed where its last root is
            if in_cluster[node] is node:
                groups.append(clusters[node])
                group_inputs.append(set())
            continue
        k = singles[node].kernel
        inputs = {id(n) for n in singles[node].buffers[1:]}
        # a write is a kernel of its own (its store may alias its target), and so is a scatter
        # (see _ALONE): no group to look for
        key = (node.device, k.outer, k.axes, depth[node])
        gi = joining.get(key) if node.op not in _ALONE else None
        if gi is not None and len(groups[gi]) < MAX_MERGED_ROOTS and (
                len(groups[gi]) + 1 + len(group_inputs[gi]) + len(inputs - group_inputs[gi]) <= _max_arguments(node.device)):
            groups[gi].append(node)
            group_inputs[gi] |= inputs
            continue
        if node.op not in _ALONE:  # (a full group: the key's later roots join this new one)
            joining[key] = len(groups)
        groups.append([node])
        group_inputs.append(inputs)
    items: list[Item] = []
    for group in groups:
        node = group[0]
        if node.op is Op.ASSIGN and node.arg is not None and node not in in_place:
            # a partial write into a fresh buffer: first copy the old value there
            items.append(_build([_Root(node, node.srcs[0], None)], realize, note="(assign-copy)", cache=cache))
        # a root alone is the kernel built for it above (the same roots and realize set)
        if len(group) == 1:
            item = singles[node]
        else:
            inlined = {n: n.srcs[1] for n in group if n.op is Op.ASSIGN} if node in in_cluster else None
            item = _build([_kernel_root(n) for n in group], realize, inlined=inlined, cache=cache)
        item.alias = {n: n.srcs[0] for n in group if n in in_place}
        items.append(item)
    return items


def _elementwise_root(node: Node, item: KernelItem) -> bool:
    """Whether `item`, `node`'s kernel alone, computes it element by element over its own index
    space (no reduction, scan or scatter), storing all of it (not a partial write)."""
    k = item.kernel
    return (not k.reductions and not k.axes and (node.op is not Op.ASSIGN or node.arg is None)
            and all(st.scan is None and st.scatter is None for st in k.stores))


def _write_clusters(kernel_nodes: list[Node], singles: dict[Node, KernelItem], realize: set[Node], in_place: set[Node],
                    depth: dict[Node, int], reach: dict[int, int]) -> dict[Node, list[Node]]:
    """Writes merged into one kernel with the roots that read their new values: Adam's
    `m.assign(b1 * m + (1 - b1) * g)`, `v.assign(...)` and `p.assign(p - lr * m / (v.sqrt() + eps))`
    are one kernel of three stores, whose p reads m's and v's new values as the kernel computes
    them for their own stores (in registers), not from their buffers after two more kernels.

    Independent roots are merged by depth (_build_kernels); these depend on each other, so a
    root R joins the cluster of a write D (a full assign) it reads when both are elementwise
    kernels of one device and index space (_elementwise_root) and R reads D only at the
    element it computes (so the value is the one D's store computes there), and when the
    merged cluster
    - reads members only that way, and only members that are writes (a plain root's buffer
      would be read in the kernel that writes it);
    - holds no write into another member;
    - has no path from one member to another through a node outside it (that node's kernel
      would need the cluster's and be needed by it);
    - can order its stores so that a write in place comes after every store that reads its
      target: at each element the kernel runs its stores in order, so they all read the old
      value (_misaligned_in_place checks the kernel built);
    - stays within MAX_MERGED_ROOTS roots, MAX_KERNEL_SIZE and the device's buffer limit.

    Returns each cluster of two or more roots by its last root in `kernel_nodes` (sources
    first), its members in store order."""
    position = {id(n): i for i, n in enumerate(kernel_nodes)}
    eligible: dict[Node, bool] = {}
    sizes: dict[Node, int] = {}
    in_cluster: dict[Node, Node] = {}
    clusters: dict[Node, list[Node]] = {}

    def inputs(n: Node) -> list[Node]:
        item = singles[n]
        return item.buffers[len(item.outputs):]

    def is_eligible(n: Node) -> bool:
        known = eligible.get(n)
        if known is None:
            known = eligible[n] = _elementwise_root(n, singles[n])
        return known

    def size(n: Node) -> int:
        known = sizes.get(n)
        if known is None:
            value = _kernel_root(n).value
            known = sizes[n] = 1 if value is not n and _loads_buffer(value, realize) else \
                _fused_size(value, realize, MAX_KERNEL_SIZE, sys.maxsize)[0]
        return known

    def store_order(members: list[Node]) -> list[Node] | None:
        reads: dict[Node, set[int]] = {}   # the buffers each member's store reads, inlined writes' included
        for m in members:   # (sources first: a member's inlined writes come before it)
            reads[m] = {id(b) for b in inputs(m)}.union(*(reads[b] for b in inputs(m) if b in reads))
        after: dict[Node, list[Node]] = {m: [] for m in members}   # m -> the stores that must follow it
        for w in members:
            if w in in_place:
                for m in members:
                    if m is not w and id(w.srcs[0]) in reads[m]:
                        after[m].append(w)
        indegree = {m: 0 for m in members}
        for followers in after.values():
            for w in followers:
                indegree[w] += 1
        ready = [m for m in members if not indegree[m]]
        order: list[Node] = []
        while ready:
            m = ready.pop(0)
            order.append(m)
            for w in after[m]:
                indegree[w] -= 1
                if not indegree[w]:
                    ready.append(w)
        return order if len(order) == len(members) else None

    def mergeable(members: list[Node]) -> list[Node] | None:
        if len(members) > MAX_MERGED_ROOTS:
            return None
        mset = set(members)
        outer = singles[members[0]].kernel.outer
        identity = View.contiguous(outer)
        reads: set[int] = set()
        for m in members:
            if m.op is Op.ASSIGN and m.srcs[0] in mset:
                return None
            item = singles[m]
            for j, b in enumerate(item.buffers[len(item.outputs):], start=len(item.outputs)):
                if b in mset:
                    if b.op is not Op.ASSIGN or not _reads_only_at((st.expr for st in item.kernel.stores), {j}, identity):
                        return None
                else:
                    reads.add(id(b))
        if sum(size(m) for m in members) > MAX_KERNEL_SIZE or len(members) + len(reads) > _max_arguments(members[0].device):
            return None
        # a path between members through a node outside: a walk from what they need, down to
        # the depth of the shallowest member (a node that needs a member reaches deeper)
        lowest = min(depth[m] for m in members)
        stack = [s for m in members for s in _needs(m, singles) if s not in mset]
        seen: set[int] = set()
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            if n in mset:
                return None
            if reach.get(id(n), 0) > lowest:
                stack.extend(_needs(n, singles))
        return store_order(members)

    for r in kernel_nodes:
        if not is_eligible(r):
            continue
        item = singles[r]
        for d in inputs(r):
            if (d.op is not Op.ASSIGN or d not in singles or d.device != r.device or not is_eligible(d)
                    or singles[d].kernel.outer != item.kernel.outer):
                continue
            cr, cd = in_cluster.get(r, r), in_cluster.get(d, d)
            if cr is cd:
                continue
            members = sorted(clusters.get(cd, [cd]) + clusters.get(cr, [cr]), key=lambda n: position[id(n)])
            ordered = mergeable(members)
            if ordered is None:
                continue
            clusters.pop(cd, None)
            clusters[cr] = ordered
            for m in ordered:
                in_cluster[m] = cr
    return clusters


def _needs(node: Node, singles: dict[Node, KernelItem]) -> list[Node]:
    """The unrealized nodes whose values `node` needs first: a kernel root's inputs (see
    `singles`), another node's sources."""
    item = singles.get(node)
    srcs = item.buffers[len(item.outputs):] if item is not None else list(node.srcs)
    if node.op is Op.ASSIGN:
        srcs = [node.srcs[0], *srcs]  # the write needs its target's buffer (to copy, or to write into)
    return [s for s in srcs if not s.realized]


def _depths(singles: dict[Node, KernelItem], clusters: dict[Node, list[Node]] | None = None
            ) -> tuple[dict[Node, int], dict[int, int]]:
    """For each kernel root, its depth: 0 for a root that needs no other root, else one more
    than the deepest root it needs (through any items, e.g. a root reading a matmul of a root).
    A root needs only shallower roots, so roots of one depth are independent of each other, and
    kernels that merge roots of one depth each need kernels of smaller depths only: never each
    other in a circle. With `clusters` (see _write_clusters: roots merged into one kernel, by
    their last root), a cluster counts as one root that needs what its members need, and its
    members get its depth.

    One iterative walk (graphs can be deep), each node once: `reach` holds, per node, one more
    than the deepest root it is or needs (0: none); it is returned too (by id)."""
    reach: dict[int, int] = {}
    depth: dict[Node, int] = {}
    unit = {m: r for r, members in (clusters or {}).items() for m in members}

    def needs(node: Node) -> list[Node]:
        members = clusters.get(node) if clusters else None
        if members is None:
            srcs = _needs(node, singles)
        else:
            srcs = [s for m in members for s in _needs(m, singles)]
        return [u for u in (unit.get(s, s) for s in srcs) if u is not node] if unit else srcs

    for root in singles:
        root = unit.get(root, root)
        if id(root) in reach:
            continue
        path = {id(root)}
        stack = [(root, iter(needs(root)))]
        while stack:
            node, srcs = stack[-1]
            for src in srcs:
                if id(src) not in reach and id(src) not in path:
                    path.add(id(src))
                    stack.append((src, iter(needs(src))))
                    break
            else:
                stack.pop()
                path.discard(id(node))
                d = max((reach.get(id(s), 0) for s in needs(node)), default=0)
                if node in singles:
                    depth[node] = d
                    d += 1
                reach[id(node)] = d
    for m, r in unit.items():
        depth[m] = depth[r]
    return depth, reach


def _reductions_in_several_kernels(items: list[Item]) -> set[Node]:
    """Fused reductions (and scans) that more than one kernel would compute: they get a buffer instead."""
    seen: dict[Node, int] = {}
    for i, item in enumerate(items):
        if not isinstance(item, KernelItem):
            continue
        for node in item.reduces:
            seen.setdefault(node, i)
            if seen[node] != i:
                seen[node] = -1
    return {n for n, i in seen.items() if i == -1}
