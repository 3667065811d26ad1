"""Which nodes get buffers: the targets, items and writes (_must_realize), whatever keeps every
kernel within its size and buffer bounds (_bound_kernel_size), and what the kernels' builds ask
for (_settle_buffers)."""

from __future__ import annotations

import sys

from ..graph import Node
from ..ops import ALU, GRAPH_ONLY, INDEXED, Op
from ..plugins import registry
from ..view import prod
from .build import ITEM_OPS, BuildCache, _NeedsBuffer, _build, _kernel_root
from .operands import _matmul_operand, _matmul_operands, _strip_view


def _must_realize(nodes: list[Node], targets: list[Node]) -> set[Node]:
    realize = {t for t in targets if not t.realized}
    for node in nodes:
        if node.realized:
            continue
        if node.op in ITEM_OPS or node.op is Op.ASSIGN:
            realize.add(node)
        if node.op is Op.MATMUL:   # (read through their views, as the items take them)
            for base, _, _ in _matmul_operands(node):
                if not base.realized:
                    realize.add(base)
        elif node.op is Op.ATTENTION:
            for src in node.srcs:
                base, _ = _matmul_operand(src)
                if not base.realized:
                    realize.add(base)
        elif node.op is Op.GATHER:  # read at computed elements: its source is a buffer (an index
            base, _ = _strip_view(node.srcs[0])   # vector's element is its index: no buffer)
            if not base.realized and base.op is not Op.IOTA:
                realize.add(base)
        elif node.op is Op.SCATTER:  # a kernel of its own (a scatter store), which fuses its sources
            realize.add(node)
        elif node.op in (Op.CUSTOM, Op.COPY, Op.SORT, Op.FFT):
            realize.update(s for s in node.srcs if not s.realized)
        elif node.op is Op.ASSIGN and not node.srcs[0].realized:
            realize.add(node.srcs[0])
        elif node.op is Op.VIEW:
            repeated = _repeated_heavy(node)
            if repeated is not None:
                realize.add(repeated)
    _bound_kernel_size(nodes, realize)
    return realize


BROADCAST_REUSE = 16
"""A broadcast view that repeats each element of a lazy value at least this many times..."""
MIN_BROADCAST_ELEMENTS = 1 << 16
"""...into at least this many elements gets that value a buffer when computing it takes a
transcendental (_repeated_heavy)."""
_HEAVY_WALK = 64   # nodes of the value's elementwise graph looked at for a transcendental


def _repeated_heavy(view: Node) -> Node | None:
    """The lazy value under `view`, where the view repeats it (a broadcast: `sin(rows)[:, None] *
    cos(cols)`) at least BROADCAST_REUSE times into at least MIN_BROADCAST_ELEMENTS elements and
    its elementwise graph (up to its buffers and reductions) holds a transcendental: fused, the
    kernel would compute that transcendental once per element it writes rather than once per
    element of the value (a dask chunk generated from row and column coordinates: 3 sin/cos per
    element against numpy's 1). A reduction's result stays fused (a row's accumulator is
    computed once per row already: softmax, layernorm)."""
    src = view.srcs[0]
    if src.realized or src.buffer is not None or src.op in GRAPH_ONLY or src.op in INDEXED or not src.srcs:
        return None
    size, repeated = prod(src.shape), prod(view.shape)
    if repeated < MIN_BROADCAST_ELEMENTS or repeated < BROADCAST_REUSE * max(size, 1):
        return None
    seen = {id(src)}
    stack = [src]
    while stack and len(seen) <= _HEAVY_WALK:
        node = stack.pop()
        if node.op in _HEAVY_OPS:
            return src
        for operand in node.srcs:
            if (id(operand) not in seen and not operand.realized and operand.buffer is None
                    and (operand.op is Op.VIEW or operand.op not in GRAPH_ONLY) and operand.op not in INDEXED):
                seen.add(id(operand))
                stack.append(operand)
    return None


MAX_KERNEL_SIZE = 512
"""The most one kernel may fuse, in units of `_node_size` (an elementwise op or a load is one, a
view of a computed value 8, a transcendental 16). A bigger fused graph gets intermediates
realized into buffers (`_bound_kernel_size`), so each kernel's code, compile time and
per-kernel walks stay bounded however long the user's chain is. Measured compile times (one
kernel, fresh caches): cpu, a chain of `x * c + d` costs 250-380 us per op up to 800 ops, then
560 us at 1,600 and 900 us at 3,200 (LLVM turns superlinear), plus ~50 ms per kernel; vulkan
(lavapipe) such a chain costs ~150 us per op at any length, but `sin` about 50 ms each, 70 ms each
at 50 of them, 270 ms each at 200 (superlinear again); a view that does not merge with the next
one (a transpose read through a reshape) makes every load under it unravel its index once more:
8-11 ms each on cpu up to 128 of them, 18 ms each at 256, ~4.5 ms each on vulkan. Hence 512, at
most 32 transcendentals and 64 views of computed values a kernel. Ordinary kernels (softmax,
layernorm, gelu, an attention block's epilogues) are far smaller."""

_HEAVY_OPS = frozenset({Op.EXP, Op.LOG, Op.SIN, Op.COS, Op.TANH, Op.POW})
"""Ops that backends expand into many instructions (mathlib's exp/log/tanh, GLSL's sin/cos, pow)."""


def _node_size(node: Node) -> int:
    """What `node` adds to the size of a kernel that fuses it (see MAX_KERNEL_SIZE): a constant
    or a view of a leaf (a constant or buffer broadcast, say) nothing (the constant folds into
    the code, the view is part of the load), a view of a computed value 8 (where it does not
    merge with the views above it, every load under it unravels its index once more), a
    transcendental 16, anything else 1."""
    op = node.op
    if op is Op.VIEW:
        return 8 if node.srcs[0].srcs else 0
    if op is Op.CONST:
        return 0
    return 16 if op in _HEAVY_OPS else 1


def _max_arguments(device_name: str) -> int:
    """The most buffers (outputs and inputs) a kernel the scheduler builds may take on the
    device: its `max_kernel_buffers` (see Device) less one for the offsets argument that
    kernel_params may add (sys.maxsize: no limit)."""
    limit = getattr(registry.get(device_name), "max_kernel_buffers", None)
    return sys.maxsize if limit is None else max(2, limit - 1)


def _max_inputs(device_name: str) -> int:
    """The most input buffers a kernel of one output may read (see _max_arguments)."""
    return _max_arguments(device_name) - 1


def _bound_kernel_size(nodes: list[Node], realize: set[Node], limit: int = MAX_KERNEL_SIZE) -> None:
    """Add nodes to `realize` so that no kernel fuses a graph bigger than `limit` (in units of
    `_node_size`; a node with a buffer counts as one load) or reads more input buffers than
    its device takes (Device.max_kernel_buffers).

    One pass over `nodes` (sources before users) keeps, per node, upper bounds on the size of
    the graph a kernel computing it fuses (its own size plus its operands' bounds) and on the
    buffers it reads (its operands' bounds added up). They are exact where operands share
    nothing (chains, trees); where one passes its limit, a walk counts the node's fused graph
    exactly (stopping past the limits), and if that is too big too, the node's biggest operands
    get buffers until it fits. Linear in the graph, but for operands that share nodes near a
    limit (a walk of up to `limit` nodes each)."""
    bound: dict[int, tuple[int, int]] = {}  # id(node) -> (size, inputs) bounds of its fused graph, as its readers see it
    input_limits: dict[str, int] = {}  # per device: _max_inputs
    for node in nodes:
        if node.buffer is not None or node.op in ITEM_OPS:
            bound[id(node)] = _A_LOAD
            continue
        size, inputs = _node_size(node), 0
        for src in node.srcs:
            src_size, src_inputs = bound[id(src)]
            size += src_size
            inputs += src_inputs
        input_limit = input_limits.get(node.device)
        if input_limit is None:
            input_limit = input_limits[node.device] = _max_inputs(node.device)
        if size > limit or inputs > input_limit:
            size, inputs = _fused_size(node, realize, limit, input_limit)
            if size > limit or inputs > input_limit:
                size, inputs = _cut_operands(node, realize, bound, limit, input_limit)
        bound[id(node)] = _A_LOAD if node in realize else (size, inputs)


_A_LOAD = (1, 1)
"""A node with a buffer, as a fused graph reading it sees it: (size, input buffers)."""


def _fused_size(node: Node, realize: set[Node], limit: int, input_limit: int) -> tuple[int, int]:
    """(size, input buffers) of the graph a kernel computing `node` fuses: `node`, the lazy
    nodes it reaches through lazy nodes, and the buffers (loads) where that stops, each once;
    the walk stops as soon as either passes its limit."""
    seen = {id(node)}
    stack = [node]
    size, inputs = _node_size(node), 0
    while stack:
        for src in stack.pop().srcs:
            if id(src) in seen:
                continue
            seen.add(id(src))
            if src.buffer is not None or src in realize:
                size += 1
                inputs += 1
            else:
                size += _node_size(src)
                stack.append(src)
            if size > limit or inputs > input_limit:
                return size, inputs
    return size, inputs


def _cut_operands(node: Node, realize: set[Node], bound: dict[int, tuple[int, int]], limit: int,
                  input_limit: int) -> tuple[int, int]:
    """Give `node`'s biggest operands buffers until its fused graph fits; its (size, inputs)
    then. Of a view of a lazy node, the viewed node gets the buffer (a broadcast view would
    store every repeated element), unless that is a view too (a chain of views that do not
    merge, as long as the limit: then the view itself)."""
    size, inputs = limit + 1, 0
    for src in sorted(node.srcs, key=lambda s: bound[id(s)], reverse=True):
        if src.buffer is not None or src in realize or not src.srcs:
            continue  # a load or a constant already
        cut = src
        if (src.op is Op.VIEW and src.srcs[0].op is not Op.VIEW and src.srcs[0].srcs
                and src.srcs[0].buffer is None and src.srcs[0] not in realize):
            cut = src.srcs[0]
        realize.add(cut)
        bound[id(cut)] = _A_LOAD
        size, inputs = _fused_size(node, realize, limit, input_limit)
        if size <= limit and inputs <= input_limit:
            break
    return size, inputs


_LIFT_STEPS = 16   # the most nodes a reduction's buffer moves up past (_lifted)


def _lifted(asked: list[Node], realize: set[Node], position: dict[int, int], cache: BuildCache | None) -> list[Node]:
    """The nodes to give buffers for the ones a build asked for (_NeedsBuffer): a reduction
    whose value only a chain of elementwise ops of its own size reads (its sole reader in the
    graph, no tensor holding any of them) gets none; the chain's last node does, and the
    reduction fuses into that node's kernel. scipy's `mean(x) - mean(y)` per resample, joined
    by concat: one kernel per resample storing the difference, not two sums each in a buffer
    of its own that the join's kernel divides and subtracts (half the buffers and launches).

    A node is moved up only where the kernel of the chain's last node takes the reduction in
    (a trial build that does not ask for the reduction's buffer); else the reduction's own."""
    out: dict[Node, None] = {}
    tried: dict[Node, list[Node]] = {}   # a chain's last node: what its trial build asked for
    for node in asked:
        top = _lift_top(node, realize, position) if node.op is Op.REDUCE else node
        if top is not node and top in tried:
            if any(n is node for n in tried[top]):
                top = node
        elif top is not node:
            tried[top] = []
            try:
                _build([_kernel_root(top)], realize, cache=cache)
            except _NeedsBuffer as e:
                tried[top] = e.nodes
                if any(n is node for n in e.nodes):
                    top = node
        out[top] = None
    return list(out)


def _lift_top(node: Node, realize: set[Node], position: dict[int, int]) -> Node:
    """The last node of the chain above reduction `node` that _lifted may give the buffer to."""
    size = prod(node.shape)
    top = node
    for _ in range(_LIFT_STEPS):
        readers = top.readers()
        if len(readers) != 1:
            break
        (reader,) = readers
        if (type(reader) is not Node or id(reader) not in position or reader.buffer is not None or reader in realize
                or prod(reader.shape) != size or reader.device != node.device):
            break
        # an elementwise op (its operands are of its shape: broadcasts are views) or a reshape
        if reader.op is Op.VIEW:
            if reader.arg.mask is not None or not reader.arg.is_contiguous:
                break
        elif reader.op not in ALU:
            break
        top = reader
    return top


def _settle_buffers(nodes: list[Node], realize: set[Node], cache: BuildCache | None = None) -> None:
    """Add to `realize` the nodes that building the kernels will ask buffers for (_NeedsBuffer),
    in one pass: each kernel root is built alone, sources first, and a node a build asks for
    becomes a root, built next, before the root that asked is built again. Those new buffers
    are more inputs for the kernels that read them, so the kernel size bound is applied again
    (`_bound_kernel_size`), and the roots that adds are built in turn.

    create_schedule runs this after the first _NeedsBuffer. Its own loop adds one node and
    rebuilds every kernel, which for a chain of n reductions that cannot fuse with their
    readers takes n rounds, each building the whole chain: cubic, a minute for 100 of them.
    The kernels built here are thrown away (create_schedule builds them again, once, and checks
    what this missed), but for `cache`'s copies (see BuildCache), which the next pass takes."""
    position = {id(n): i for i, n in enumerate(nodes)}
    built: set[Node] = set()
    while True:
        todo = sorted((n for n in realize if n.op not in ITEM_OPS and n.buffer is None and n not in built),
                      key=lambda n: position[id(n)], reverse=True)  # popped from the end: sources first
        if not todo:
            return
        while todo:
            node = todo[-1]
            try:
                _build([_kernel_root(node)], realize, cache=cache)
            except _NeedsBuffer as e:
                new = [n for n in _lifted(e.nodes, realize, position, cache) if n not in realize]
                if not new:
                    return  # create_schedule's loop reports it
                realize.update(new)
                todo.extend(sorted(new, key=lambda n: position[id(n)], reverse=True))
                continue
            built.add(todo.pop())
        _bound_kernel_size(nodes, realize)
