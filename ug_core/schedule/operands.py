"""Items of their own (matmul, attention, custom, copy, sort, fft) and how they read their
operands: the view a matmul or attention reads a lazy view of a buffer through in place (no copy
kernel), and the item each such node becomes."""

from __future__ import annotations

from ..specs import AttentionSpec, MatmulSpec
from ..graph import Node
from ..ops import Op
from ..plugins import registry
from ..view import View, ViewChain, chain_push, contiguous_strides, prod
from .items import AttentionItem, CopyItem, CustomItem, FftItem, Item, MatmulItem, SortItem


def _strip_view(node: Node) -> tuple[Node, View]:
    """(base, view) such that node == base read through one strided view that a matmul takes:
    no mask, no negative stride (else the view is a kernel's, and the matmul reads its result).
    Lazy views of lazy views are merged down to the first node that is not one (e.g. the
    transpose of ug.grad's named identity view of a parameter, `g @ W^T` in a backward pass:
    the weight's own buffer, read transposed, not a transposed copy) when they make one view."""
    if node.op is not Op.VIEW or node.realized:
        return node, View.contiguous(node.shape)
    chain: ViewChain = (node.arg,)
    base = node.srcs[0]
    while base.op is Op.VIEW and not base.realized:
        chain = chain_push(chain, base.arg)
        if len(chain) != 1:
            return node, View.contiguous(node.shape)
        base = base.srcs[0]
    v = chain[0]
    if v.mask is None and min(v.strides, default=0) >= 0:
        return base, v
    return node, View.contiguous(node.shape)


def _matmul_operand(node: Node) -> tuple[Node, View]:
    """(base, view) of a matmul operand: as _strip_view, and also for a strided view of an
    unrealized view (a chain that did not merge, e.g. the transpose of a flattened window view)
    when the inner view has at most as many elements as the operand: the inner view is realized
    and the matmul reads it through the outer view. Then two products that read one value through
    different layouts (conv's im2col columns, and their transpose in the weight's gradient) share
    one buffer, and each copy kernel reads through the shorter chain."""
    base, view = _strip_view(node)
    if base is not node:  # the chain makes one view of a non-view: read that directly
        return base, view
    if (node.op is Op.VIEW and not node.realized and node.srcs[0].op is Op.VIEW and not node.srcs[0].realized
            and node.arg.mask is None and min(node.arg.strides, default=0) >= 0
            and prod(node.srcs[0].shape) <= prod(node.shape)):
        return node.srcs[0], node.arg
    return base, view


def _split_operand(node: Node) -> tuple[Node, View, int] | None:
    """A matmul operand read in place as a split operand (MatmulSpec.a_split / b_split): where
    it is a reshape of a strided view of a value whose rows (dim -2) flatten dims that no single
    stride walks, such as conv's im2col matrix (channel, tap row, tap column) x positions over
    the image: (the value, the view with the row dims kept apart, how many there are). None where
    that does not fit (the caller then reads the operand as _matmul_operand does)."""
    if node.op is not Op.VIEW or node.realized or len(node.shape) < 2:
        return None
    outer: View = node.arg
    if outer.mask is not None or outer.offset or outer.strides != contiguous_strides(outer.shape):
        return None
    inner = node.srcs[0]
    if inner.op is not Op.VIEW or inner.realized:
        return None
    chain: ViewChain = (inner.arg,)
    base = inner.srcs[0]
    while base.op is Op.VIEW and not base.realized:   # merge the views below while they make one
        pushed = chain_push(chain, base.arg)
        if len(pushed) != 1:
            break
        chain, base = pushed, base.srcs[0]
    v = chain[0]
    if v.mask is not None or min(v.strides, default=0) < 0:
        return None
    # the inner view's dims (size-1 ones dropped), grouped by the outer dim each flattens into
    dims = [(n, st) for n, st in zip(v.shape, v.strides) if n != 1]
    groups: list[list[tuple[int, int]]] = []
    k = 0
    for size in outer.shape:
        group, got = [], 1
        while got < size and k < len(dims):
            group.append(dims[k])
            got *= dims[k][0]
            k += 1
        if got != size:
            return None
        groups.append(group)
    if k != len(dims):
        return None
    shape: list[int] = []
    strides: list[int] = []
    split = 1
    for d, (size, group) in enumerate(zip(outer.shape, groups)):
        merges = all(st == st2 * n2 for (_, st), (n2, st2) in zip(group, group[1:]))
        if merges:
            shape.append(size)
            strides.append(group[-1][1] if group else 0)
        elif d == len(outer.shape) - 2 and len(group) <= 4:
            shape.extend(n for n, _ in group)
            strides.extend(st for _, st in group)
            split = len(group)
        else:
            return None
    if split == 1:
        return None
    return base, View(tuple(shape), tuple(strides), v.offset), split


def _matmul_operands(node: Node) -> tuple[tuple[Node, View, int], tuple[Node, View, int]]:
    """A matmul's or its operands' (base, view, split): split operands (_split_operand) where the
    device reads them, else (_matmul_operand, 1)."""
    out = []
    splits = registry.get(node.device).reads_split_operands()
    for src in node.srcs:
        split = _split_operand(src) if splits else None
        if split is None:
            base, view = _matmul_operand(src)
            split = (base, view, 1)
        out.append(split)
    return out[0], out[1]


def _item_for(node: Node) -> Item:
    if node.op is Op.MATMUL:
        (a, av, a_split), (b, bv, b_split) = _matmul_operands(node)
        return MatmulItem(node, a, b, MatmulSpec(av, bv, node.shape, node.dtype, a_split, b_split))
    if node.op is Op.CUSTOM:
        return CustomItem(node, list(node.srcs), node.arg)
    if node.op is Op.COPY:
        return CopyItem(node, node.srcs[0])
    if node.op is Op.SORT:
        return SortItem(node, node.srcs[0], node.arg)
    if node.op is Op.FFT:
        return FftItem(node, node.srcs[0], node.arg)
    if node.op is Op.ATTENTION:
        # (the operands as _must_realize realized them: the same rule as a matmul's)
        bases, views = zip(*(_matmul_operand(s) for s in node.srcs))
        mask = views[3] if len(views) > 3 else None
        spec = AttentionSpec(views[0], views[1], views[2], mask, node.shape, node.dtype, *node.arg)
        return AttentionItem(node, list(bases), spec)
    raise AssertionError(node)
