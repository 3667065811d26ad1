"""A view's transpose (the VJP of reading a tensor through a View): pads, reshapes, flips, slices
and sums, so that it fuses; a window view's by shifted placements or a scatter-add."""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from .. import graph
from ..array_api.scatter import scatter_add
from ..graph import Node
from ..ops import Op
from ..tensor import Tensor, zeros
from ..view import View, prod

_INT64 = np.dtype(np.int64)


def _reshape(node: Node, shape: tuple[int, ...]) -> Node:
    return graph.view(node, View.contiguous(tuple(shape)))


def _scatter_add(x: Tensor, axis: int, index: Tensor, values: Tensor) -> Tensor:
    return scatter_add(x, axis, index, values)


# --- a view's transpose ---------------------------------------------------------------------

MAX_OVERLAP_TAPS = 64
"""An overlapping view (a sliding window: conv's im2col, pooling with stride < kernel) is
transposed as a sum of this many non-overlapping placements at most (one per window tap); past
that, by a scatter-add."""


def view_vjp(g: Tensor, src_shape: tuple[int, ...], v: View) -> Tensor:
    """The transpose of reading src (its contiguous layout) through `v`: each source element
    gets the sum of g over the view's valid indices that read it. Built from views (pads,
    reshapes, flips, slices) and sums, so it fuses: a slice's transpose is a pad, a broadcast's a
    sum, a permutation's the inverse permutation, a window's a sum of shifted pads."""
    return Tensor(_transpose(g.node, tuple(src_shape), v))


def _transpose(g: Node, src_shape: tuple[int, ...], v: View) -> Node:
    n_src = prod(src_shape)
    if v.is_void or n_src == 0 or v.size == 0:
        return graph.const(0, g.dtype, g.device, src_shape)
    # 1. a masked view reads zeros outside its valid box: only the box's g flows back
    if v.mask is not None:
        lo = tuple(a for a, _ in v.mask)
        sizes = tuple(b - a for a, b in v.mask)
        g = graph.view(g, View.contiguous(v.shape).slice(lo, sizes, (1,) * len(sizes)))
        v = View(sizes, v.strides, v.offset + sum(a * st for a, st in zip(lo, v.strides)))
    # 2. a broadcast dim (stride 0) reads one element many times: its g sums; size-1 dims go
    repeated = tuple(d for d, (n, st) in enumerate(zip(v.shape, v.strides)) if st == 0 and n > 1)
    if repeated:
        g = graph.reduce(g, Op.SUM, repeated, g.dtype)
    dims = [d for d, st in enumerate(v.strides) if st != 0]
    shape = [v.shape[d] for d in dims]
    strides = [v.strides[d] for d in dims]
    offset = v.offset
    g = _reshape(g, tuple(shape))
    # 3. a negative stride is a flip
    flipped = tuple(i for i, st in enumerate(strides) if st < 0)
    if flipped:
        g = graph.view(g, View.contiguous(tuple(shape)).flip(flipped))
        for i in flipped:
            offset += (shape[i] - 1) * strides[i]
            strides[i] = -strides[i]
    # 4. outermost (largest stride) first
    order = tuple(sorted(range(len(shape)), key=lambda i: -strides[i]))
    g = graph.view(g, View.contiguous(tuple(shape)).permute(order))
    shape = [shape[i] for i in order]
    strides = [strides[i] for i in order]
    # 5. place g's elements at their source positions
    if _nests(shape, strides):
        return _place_in(g, shape, strides, offset, src_shape)
    return _place_overlapping(g, shape, strides, offset, src_shape)


def _box(shape: Sequence[int], strides: Sequence[int], offset: int,
         src_shape: tuple[int, ...]) -> tuple[list[int], list[int]] | None:
    """Whether a view (positive strides, largest first) reads a box of its source's own dims (a
    slice with unit steps: a window's tap, a crop): per view dim, the source dim it walks (in
    order), and the box's start per source dim; else None."""
    src_strides = [prod(src_shape[j + 1:]) for j in range(len(src_shape))]
    starts = []
    rest = offset
    for n_j, st_j in zip(src_shape, src_strides):
        starts.append(rest // st_j if n_j > 1 else 0)
        rest -= starts[-1] * st_j
    if rest != 0 or any(not 0 <= a < max(n, 1) for a, n in zip(starts, src_shape)):
        return None
    dims: list[int] = []
    j = 0
    for n, st in zip(shape, strides):
        while j < len(src_shape) and (src_shape[j] == 1 or src_strides[j] != st):
            j += 1
        if j == len(src_shape) or starts[j] + n > src_shape[j]:
            return None
        dims.append(j)
        j += 1
    return dims, starts


def _place_in(g: Node, shape: Sequence[int], strides: Sequence[int], offset: int, src_shape: tuple[int, ...]) -> Node:
    """g (of `shape`, a nesting view's) spread into zeros of src_shape at offset + sum(i * strides):
    where the view is a box of the source's dims, one pad in src_shape (a single masked view of g,
    which a kernel reads without index division: a window tap's transpose in conv's gradient);
    else along the flat source (_place)."""
    box = _box(shape, strides, offset, src_shape)
    if box is None:
        return _reshape(_place(g, shape, strides, offset, prod(src_shape)), src_shape)
    dims, starts = box
    sizes = [1] * len(src_shape)
    for d, j in enumerate(dims):
        sizes[j] = shape[d]
    block = _reshape(g, tuple(sizes))
    widths = tuple((a, n - a - k) for a, n, k in zip(starts, src_shape, sizes))
    return graph.view(block, View.contiguous(tuple(sizes)).pad(widths))


def _nests(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a view (positive strides, largest first) reads each element once with each dim's
    block of elements lying inside one step of the dim outside it, as _place needs."""
    extent = 1
    for n, st in zip(reversed(shape), reversed(strides)):
        if st < extent:
            return False
        extent += (n - 1) * st
    return True


def _place(g: Node, shape: Sequence[int], strides: Sequence[int], offset: int, n_src: int) -> Node:
    """g (of `shape`) spread into a flat vector of n_src zeros at offset + sum(i * strides):
    innermost dim first, each element's block is padded with zeros to its dim's stride and the
    dim merged into the block (a nesting view: _nests)."""
    block = _reshape(g, tuple(shape) + (1,))
    extent = 1
    for d in range(len(shape) - 1, -1, -1):
        n, st = shape[d], strides[d]
        outer = tuple(shape[:d])
        if st > extent:
            block = graph.view(block, View.contiguous(outer + (n, extent)).pad(((0, 0),) * (d + 1) + ((0, st - extent),)))
        block = _reshape(block, outer + (n * st,))
        new_extent = (n - 1) * st + extent
        if new_extent < n * st:
            block = graph.view(block, View.contiguous(outer + (n * st,)).slice((0,) * (d + 1), outer + (new_extent,), (1,) * (d + 1)))
        block = _reshape(block, outer + (new_extent,))
        extent = new_extent
    block = _reshape(block, (extent,))
    return graph.view(block, View.contiguous((extent,)).pad(((offset, n_src - offset - extent),)))


def _place_overlapping(g: Node, shape: list[int], strides: list[int], offset: int, src_shape: tuple[int, ...]) -> Node:
    """An overlapping view: fix the fewest taps (the window dims) that leave a nesting view, and
    add up one placement per tap; or, with too many taps, a scatter-add of g at the view's
    source positions."""
    taps = _tap_dims(shape, strides)
    if taps is None:
        return _reshape(_scatter_place(g, shape, strides, offset, prod(src_shape)), src_shape)
    rest = [d for d in range(len(shape)) if d not in taps]
    total: Node | None = None
    for point in itertools.product(*(range(shape[d]) for d in taps)):
        starts = [0] * len(shape)
        sizes = list(shape)
        for d, i in zip(taps, point):
            starts[d], sizes[d] = i, 1
        part = graph.view(g, View.contiguous(tuple(shape)).slice(tuple(starts), tuple(sizes), (1,) * len(shape)))
        part = _reshape(part, tuple(shape[d] for d in rest))
        at = offset + sum(i * strides[d] for d, i in zip(taps, point))
        placed = _place_in(part, [shape[d] for d in rest], [strides[d] for d in rest], at, src_shape)
        total = placed if total is None else graph.alu(Op.ADD, (total, placed), g.dtype)
    assert total is not None
    return total


def _tap_dims(shape: list[int], strides: list[int]) -> tuple[int, ...] | None:
    """The dims to fix one index at a time, fewest taps first, or None past MAX_OVERLAP_TAPS."""
    candidates = []
    for k in range(1, min(3, len(shape) - 1) + 1):
        for dims in itertools.combinations(range(len(shape)), k):
            taps = prod([shape[d] for d in dims])
            if taps <= MAX_OVERLAP_TAPS:
                candidates.append((taps, dims))
    for _, dims in sorted(candidates):
        rest = [d for d in range(len(shape)) if d not in dims]
        if _nests([shape[d] for d in rest], [strides[d] for d in rest]):
            return dims
    return None


def _scatter_place(g: Node, shape: list[int], strides: list[int], offset: int, n_src: int) -> Node:
    positions = graph.view(graph.iota((n_src,), _INT64, g.device), View(tuple(shape), tuple(strides), offset))
    n = prod(shape)
    out = _scatter_add(zeros((n_src,), g.dtype, g.device), 0, Tensor(_reshape(positions, (n,))), Tensor(_reshape(g, (n,))))
    return out.node
