"""Reverse-mode differentiation of the lazy graph: ug.grad, ug.value_and_grad, ug.vjp, ug.jvp,
ug.gradients and ug.stop_gradient.

A function's result is a lazy graph over its arguments; its gradient is more graph. `vjp` runs the
function on fresh handles of its arguments (identity views: the graph then tells the uses of
each argument apart from anything captured that was computed from the same tensor), walks the
result's graph from the result back to those handles, and applies each op's vector-Jacobian
product (the rules sit next to the ops' meanings in ops.py: ALU[op].vjp, REDUCE[op].vjp,
SCAN_VJP, STRUCTURAL_VJP; this module holds their helpers). The cotangents it builds are lazy
tensors: the backward graph fuses and compiles like any other, and under ug.jit a whole
training step is one compiled schedule.

Rules of the road (as JAX's):
- Gradients flow through float and complex values only. Integer and bool results (comparisons,
  argmax, indices, bitwise ops) carry none, and differentiating with respect to an integer argument is
  a TypeError. Piecewise-constant float ops (floor, round, floor division, sign) have zero
  gradient.
- Ties: max / min reductions and maximum / minimum split the gradient equally between equal
  elements; cummax / cummin give it to the element the running extreme was taken from (the
  last of equal ones, torch's rule); sort / topk to the element each output came from.
- A complex value is the pair of reals (re, im): its cotangent is dL/dre + i dL/dim, so the
  gradient of a real loss with respect to a complex input is torch's (twice the conjugate
  Wirtinger derivative; JAX's is its conjugate). See docs/autodiff.md.
- An index (gather's, scatter's, sort's indices) gets no gradient; a gather's transpose is a
  scatter-add and a scatter-add's a gather.
- `ug.custom` ops are differentiated by the `vjp` given to `ug.custom`, or raise a TypeError.
- A value realized while the function runs (`.numpy()` of an intermediate, a boolean mask)
  keeps its graph until the gradient is built, so nothing silently stops a gradient.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np

from . import graph
from .array_api._common import iota
from .array_api.fft import fft_vjp
from .array_api.scans import scan
from .array_api.scatter import scatter_add
from .custom import custom_vjps, define_vjp
from .graph import Node
from .jit import _map_tensors
from .ops import ALU, NO_DERIVATIVE, REDUCE, STRUCTURAL_VJP, Op
from .tensor import Tensor, checked_tensor, tensor, zeros
from .tensor_arith import combine, parts, where
from .view import View, prod

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "gradients", "stop_gradient", "keep_graph", "define_vjp"]

_INT64 = np.dtype(np.int64)

# --- what the rules in ops.py call ------------------------------------------------------------


def sign(x: Tensor) -> Tensor:
    """-1, 0 or 1 (0 for 0 and NaN: abs's derivative at 0 is 0, torch's choice)."""
    return where(x > 0, 1.0, where(x < 0, -1.0, 0.0))


def trunc(x: Tensor) -> Tensor:
    return checked_tensor(graph.alu(Op.TRUNC, (x.node,), x.dtype))


def _expand(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """t (shape with 1 where `shape` has more) broadcast to `shape` (a view, no copy)."""
    return t if t.shape == shape else Tensor(graph.view(t.node, View.contiguous(t.shape).expand(shape)))


def _reshape(node: Node, shape: tuple[int, ...]) -> Node:
    return graph.view(node, View.contiguous(tuple(shape)))


def cast_vjp(g: Tensor, src: Tensor) -> Tensor | None:
    """A float -> float conversion passes g back in the source's dtype; from ints or bools no
    gradient flows (a cast to an integer has none: its output is not a float). A complex value
    is the pair of its parts: a real -> complex cast gives the real source g's real part, a
    complex -> real cast (the real part) the complex source g + 0j."""
    if src.dtype.kind not in "fc":
        return None
    if src.dtype.kind == "c" and g.dtype.kind != "c":
        return make_complex(g, zeros_like(g)).astype(src.dtype)
    if src.dtype.kind == "f" and g.dtype.kind == "c":
        return real(g).astype(src.dtype)
    return g.astype(src.dtype)


def zeros_like(t: Tensor) -> Tensor:
    return zeros(t.shape, t.dtype, t.device)


def real(z: Tensor) -> Tensor:
    """The real part of a complex cotangent."""
    return parts(z)[0]


def imag(z: Tensor) -> Tensor:
    """The imaginary part of a complex cotangent."""
    return parts(z)[1]


def make_complex(re: Tensor, im: Tensor) -> Tensor:
    """The complex cotangent re + im j (of a complex operand, from its parts' cotangents)."""
    return combine(re, im)


def reduce_vjp(g: Tensor, out: Tensor, x: Tensor, arg: tuple[Op, tuple[int, ...]]) -> Tensor:
    op, axes = arg
    return REDUCE[op].vjp(_this, _expand(g, x.shape), _expand(out, x.shape), x, axes)


def extreme_vjp(g: Tensor, out: Tensor, x: Tensor, axes: tuple[int, ...]) -> Tensor:
    """max / min: g to the elements equal to the result, split equally between ties."""
    hit = (x == out) | ((x != x) & (out != out))
    count = hit.astype(x.dtype).sum(axis=axes, keepdims=True)
    return where(hit, g / count, 0.0)


def prod_vjp(g: Tensor, out: Tensor, x: Tensor, axes: tuple[int, ...]) -> Tensor:
    """prod: out / x without zeros in the row; with one zero, the product of the others at the
    zero and 0 elsewhere; with more, 0."""
    zero = x == 0
    zeros_in_row = _expand(zero.astype(x.dtype).sum(axis=axes, keepdims=True), x.shape)
    others = _expand(where(zero, 1.0, x).prod(axis=axes, keepdims=True), x.shape)
    d = where(zeros_in_row == 0, out / where(zero, 1.0, x), where((zeros_in_row == 1) & zero, others, 0.0))
    return g * d


def _scan(t: Tensor, op: Op, axis: int) -> Tensor:
    return checked_tensor(scan(t.node, op, axis, t.dtype))


def _flip(t: Tensor, axis: int) -> Tensor:
    return Tensor(graph.view(t.node, View.contiguous(t.shape).flip((axis,))))


def reverse_cumsum(g: Tensor, axis: int) -> Tensor:
    """cumsum's transpose: element i gets the sum of g[j] for j >= i."""
    return _flip(_scan(_flip(g, axis), Op.SUM, axis), axis)


def cumprod_vjp(g: Tensor, out: Tensor, x: Tensor, axis: int) -> Tensor:
    """cumprod: d out[j] / d x[i] (i <= j) is the product of x[k], k <= j, k != i. Before the
    first zero of a row that is out[j] / x[i]; at the first zero it is the running product with
    that zero taken as 1; past it, 0 (the first zero is a factor)."""
    zero = x == 0
    zeros_so_far = _scan(zero.astype(x.dtype), Op.SUM, axis)
    before = zeros_so_far == 0
    first = zero & (zeros_so_far == 1)
    skip_first = _scan(where(first, 1.0, x), Op.PROD, axis)
    return where(before, reverse_cumsum(g * out, axis) / where(before, x, 1.0),
                 where(first, reverse_cumsum(g * skip_first, axis), 0.0))


def _positions(shape: tuple[int, ...], axis: int, device: str) -> Tensor:
    """The index along `axis` of every element of `shape` (int64)."""
    line = checked_tensor(graph.iota((shape[axis],), _INT64, device))
    return _expand(Tensor(_reshape(line.node, tuple(n if d == axis else 1 for d, n in enumerate(shape)))), shape)


def cumextreme_vjp(g: Tensor, out: Tensor, x: Tensor, axis: int) -> Tensor:
    """cummax / cummin: out[j] is x[k] for the last k <= j where x[k] equals its running
    extreme (or is the NaN that made it NaN); g[j] goes to that k."""
    taken = (x == out) | (x != x)
    source = _scan(where(taken, _positions(x.shape, axis, x.device), -1), Op.RMAX, axis)
    return _scatter_add(zeros(x.shape, x.dtype, x.device), axis, source, g)


def _scatter_add(x: Tensor, axis: int, index: Tensor, values: Tensor) -> Tensor:
    return scatter_add(x, axis, index, values)


def matmul_vjp(g: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """(..., M, K) @ (..., K, N): g @ b^T and a^T @ g (batch dims are equal in the graph)."""
    def t(n: Node) -> Node:
        nd = len(n.shape)
        return graph.view(n, View.contiguous(n.shape).permute(tuple(range(nd - 2)) + (nd - 1, nd - 2)))
    return (checked_tensor(graph.matmul(g.node, t(b.node), a.dtype)), checked_tensor(graph.matmul(t(a.node), g.node, b.dtype)))


def attention_vjp(g: Tensor, srcs: Sequence[Tensor], arg: tuple[float, bool]) -> tuple[Tensor, ...]:
    """The fused attention (ops.Op.ATTENTION) o = p v, p = softmax(s), s = q k^T * scale + mask
    (causal: -inf past the diagonal): the standard backward, the scores recomputed (they were
    never stored): dv = p^T g, dp = g v^T, ds = p (dp - rowsum(dp p)), dq = ds k * scale,
    dk = ds^T q * scale, dmask = ds. Built from ug ops (the composite graph), so it differentiates again."""
    scale, causal = arg
    q, k, v = srcs[:3]
    s = (q @ k.mT) * scale
    if len(srcs) > 3:
        s = s + srcs[3]
    if causal:
        n_q, n_k = q.shape[-2], k.shape[-2]
        s = where(iota(n_k, q.device).reshape(1, n_k) <= iota(n_q, q.device).reshape(n_q, 1), s, -np.inf)
    p = s.softmax(-1)
    dp = g @ v.mT
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    grads = ((ds @ k) * scale, (ds.mT @ q) * scale, p.mT @ g)
    return grads + (ds,) if len(srcs) > 3 else grads


GATHER_COMPARE_MAX = 16
"""A gather that reads at most this many elements per line along its axis (a cross-entropy's
class pick: 1) is transposed by comparing each position with the indices, an elementwise
select and a short sum that fuse with their neighbours; a larger one by a scatter-add."""


def gather_vjp(g: Tensor, x: Tensor, index: Tensor, axis: int) -> Tensor:
    """A gather's transpose: g added at the index it read (repeated indices add up)."""
    n, k = x.shape[axis], index.shape[axis]
    wrapped = where(index < 0, index + n, index)  # the gather's own wrap (ops.Op.GATHER)
    if k > GATHER_COMPARE_MAX:
        return _scatter_add(zeros(x.shape, x.dtype, x.device), axis, wrapped, g)
    # out[.., j, ..] = sum over i < k of g[.., i, ..] where index[.., i, ..] == j: a new axis
    # of length k after `axis` holds the i
    lines = x.shape[:axis] + (n, k) + x.shape[axis + 1:]
    def spread(t: Tensor) -> Tensor:
        return _expand(Tensor(_reshape(t.node, t.shape[:axis] + (1, k) + t.shape[axis + 1:])), lines)
    position = _expand(Tensor(_reshape(_positions(x.shape, axis, x.device).node, x.shape[:axis] + (n, 1) + x.shape[axis + 1:])), lines)
    picked = where(spread(wrapped) == position, spread(g), 0.0)
    summed = graph.reduce(picked.node, Op.SUM, (axis + 1,), g.dtype) if k > 1 else picked.node
    return Tensor(_reshape(summed, x.shape))


def scatter_vjp(g: Tensor, out: Tensor, values: Tensor, slots: Tensor, arg: tuple[Op, int, int]) -> Tensor:
    """A scatter's transpose: value j reads g at its part's row and its slot; a max / min
    scatter's g goes to the values equal to the result, split equally between ties."""
    op, n_slots, parts = arg
    n = values.shape[0]
    part = checked_tensor(graph.iota((n,), _INT64, values.device)) // (n // parts)
    slot = slots.astype(_INT64)
    slot = where(slot < 0, 0, where(slot >= n_slots, n_slots - 1, slot))  # the scatter clamps
    at = part * n_slots + slot

    def read(t: Tensor) -> Tensor:
        return checked_tensor(graph.gather(_reshape(t.node, (parts * n_slots,)), at.node, 0))
    if op is Op.SUM:
        return read(g)
    if op not in (Op.RMAX, Op.RMIN):  # (PROD: no op of the frontend builds a float product scatter)
        raise TypeError(f"no derivative for a {REDUCE[op].name} scatter (scatter_reduce has its own rule)")
    hit = values == read(out)
    count = checked_tensor(graph.scatter(hit.astype(values.dtype).node, slots.node, Op.SUM, n_slots, parts))
    return where(hit, read(g) / read(count), 0.0)


def sort_vjp(g: Tensor, x: Tensor, spec: Any) -> Tensor:
    """Sorted values (or a top-k): g goes back to where each came from (the same sort's
    indices; a row's positions are distinct)."""
    index = checked_tensor(graph.sort(x.node, replace(spec, indices=True), _INT64))
    return _scatter_add(zeros(x.shape, x.dtype, x.device), len(x.shape) - 1, index, g)


def assign_vjp(g: Tensor, target: Tensor, value: Tensor, region: View | None) -> tuple[Tensor | None, Tensor]:
    """A write: the value gets g read through the region, the target g outside it."""
    if region is None:
        return None, g
    inside = view_vjp(Tensor(graph.const(1, g.dtype, g.device, region.shape)), target.shape, region)
    return where(inside != 0, 0.0, g), Tensor(graph.view(g.node, region))


def copy_vjp(g: Tensor, src: Tensor) -> Tensor:
    return checked_tensor(graph.copy(g.node, src.device))


def custom_vjp(g: Tensor, out: Tensor, srcs: Sequence[Tensor], fn: Any) -> tuple[Tensor | None, ...]:
    rule = custom_vjps.get(out.node)
    if rule is None:
        raise TypeError(f"cannot differentiate through ug.custom({getattr(fn, '__name__', fn)!r}, ...): pass "
                        f"vjp=(lambda g, out, *inputs: one cotangent or None per input) to ug.custom")
    cts = tuple(rule(g, out, *srcs))
    if len(cts) != len(srcs):
        raise ValueError(f"the vjp of ug.custom({getattr(fn, '__name__', fn)!r}) returned {len(cts)} cotangents "
                         f"for {len(srcs)} inputs")
    return cts


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


# --- the walk ---------------------------------------------------------------------------------


class keep_graph:
    """A context in which a realize keeps the graph of what it computes (graph.set_buffer drops
    a node's sources otherwise, to free memory), so that ug.gradients can still differentiate a
    value realized inside it: `with ug.keep_graph(): loss = f(w); print(loss.numpy());
    (gw,) = ug.gradients(loss, [w])`. ug.grad and ug.vjp need none: they run their function
    inside one (an intermediate read to Python there, a printed loss or a boolean mask's values,
    does not cut the gradient's path), and keep the graph they differentiate. Inside it, ug.jit
    functions run lazily, as part of the caller's graph (a replay's results have no graph).
    The kept sources are let go when the outermost one ends."""

    def __enter__(self) -> "keep_graph":
        graph.kept_sources.depth += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        keeper = graph.kept_sources
        keeper.depth -= 1
        if keeper.depth == 0:
            keeper.nodes = {}


Sources = Callable[[Node], "tuple[Node, ...]"]


def _sources(node: Node) -> tuple[Node, ...]:
    """A node's sources, or those it had when a realize dropped them under keep_graph; for a
    value with its own derivative (define_vjp), that rule's inputs."""
    own = graph.derivatives.get(node)
    if own is not None:
        return own[0]
    return node.srcs or graph.kept_sources.nodes.get(node, ())


def _walk(roots: Sequence[Node], sources: Sources = _sources) -> list[Node]:
    """The nodes the roots depend on, sources before their users (no recursion: graphs may be
    100,000 ops deep). A detached node (stop_gradient) is a leaf."""
    order: list[Node] = []
    seen: set[int] = set()
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack: list[tuple[Node, int]] = [(root, 0)]
        while stack:
            node, i = stack[-1]
            srcs = () if node in graph.detached else sources(node)
            if i < len(srcs):
                stack[-1] = (node, i + 1)
                src = srcs[i]
                if id(src) not in seen:
                    seen.add(id(src))
                    stack.append((src, 0))
            else:
                stack.pop()
                order.append(node)
    return order


def _rule(node: Node, g: Tensor, srcs: tuple[Node, ...]) -> tuple[Tensor | None, ...]:
    out = Tensor(node)
    args = tuple(Tensor(s) for s in srcs)
    own = graph.derivatives.get(node)
    if own is not None:
        return tuple(own[1](g, out, *args))
    if node.op in ALU:
        return tuple(ALU[node.op].vjp(_this, g, out, *args))
    return tuple(STRUCTURAL_VJP[node.op](_this, g, out, args, node.arg))


def _backward(roots: Sequence[tuple[Node, Tensor]], wrt: Sequence[Node], sources: Sources = _sources
              ) -> list[Tensor | None]:
    """The cotangents of the `wrt` nodes given each root's cotangent (None: no path)."""
    order = _walk([r for r, _ in roots], sources)
    targets = {id(n) for n in wrt}
    # which nodes lie on a path from a target to a root, through float values
    on_path: set[int] = set()
    for node in order:
        if node.dtype.kind not in "fc":
            continue
        if id(node) in targets or (node not in graph.detached and any(id(s) in on_path for s in sources(node))):
            on_path.add(id(node))
    cotangents: dict[int, Tensor] = {}
    for node, root_ct in roots:
        if id(node) in on_path:
            _accumulate(cotangents, node, root_ct)
    found: dict[int, Tensor] = {}
    for node in reversed(order):
        g = cotangents.pop(id(node), None)
        if g is None:
            continue
        if id(node) in targets:
            found[id(node)] = g
        if node.op in NO_DERIVATIVE or node in graph.detached:
            continue
        srcs = sources(node)
        if not any(id(s) in on_path for s in srcs):
            continue
        for src, src_ct in zip(srcs, _rule(node, g, srcs)):
            if src_ct is not None and id(src) in on_path:
                _accumulate(cotangents, src, src_ct)
    return [found.get(id(n)) for n in wrt]


def _accumulate(cotangents: dict[int, Tensor], node: Node, ct: Tensor) -> None:
    if ct.shape != node.shape:
        raise AssertionError(f"a derivative rule gave shape {ct.shape} for a {node!r}")
    if ct.dtype != node.dtype:
        ct = ct.astype(node.dtype)
    old = cotangents.get(id(node))
    cotangents[id(node)] = ct if old is None else old + ct


# --- the public functions -----------------------------------------------------------------------


def stop_gradient(x: Any) -> Tensor:
    """x's value, with no gradient flowing back through it (JAX's stop_gradient, torch's
    detach): a constant to every derivative. Lazy and free (no copy)."""
    t = x if isinstance(x, Tensor) else _as_primal(x)
    return Tensor(graph.detach(t.node))


def gradients(output: Tensor, wrt: Sequence[Tensor], cotangent: Tensor | None = None, *,
              allow_unused: bool = False) -> list[Tensor]:
    """The gradients of `output` with respect to the tensors `wrt` (torch.autograd.grad's
    meaning): each tensor is identified by its value now (its current graph node), and every
    path from it to `output` counts. `cotangent` (output's shape) defaults to 1 for a
    one-element output. A tensor that `output` does not depend on raises ValueError, unless
    allow_unused (then its gradient is zeros). For functions, prefer ug.grad / ug.vjp: they tell
    an argument apart from what was computed from it before the call."""
    if not isinstance(output, Tensor):
        raise TypeError(f"gradients: output must be a Tensor, got {type(output).__name__}")
    wrt = list(wrt)
    for i, t in enumerate(wrt):
        if not isinstance(t, Tensor):
            raise TypeError(f"gradients: wrt[{i}] must be a Tensor, got {type(t).__name__}")
        _check_float(t, f"wrt[{i}]")
    ct = _cotangent_for(output, cotangent, "gradients")
    nodes = [t.node for t in wrt]
    found = _backward([(output.node, ct)], nodes)
    out: list[Tensor] = []
    for i, (t, g) in enumerate(zip(wrt, found)):
        if g is None:
            if not allow_unused:
                raise ValueError(f"gradients: output does not depend on wrt[{i}] (shape {t.shape}); "
                                 f"pass allow_unused=True to get zeros for it")
            g = zeros(t.shape, t.dtype, t.device)
        out.append(g)
    return out


def _check_float(t: Tensor, what: str) -> None:
    if t.dtype.kind not in "fc":
        raise TypeError(f"differentiation needs floating-point inputs: {what} has dtype {t.dtype.name} "
                        f"(cast it with .astype(ug.float32), or leave it out of argnums)")


def _cotangent_for(out: Tensor, cotangent: Tensor | None, fn: str) -> Tensor:
    if cotangent is None:
        if out.size != 1:
            raise ValueError(f"{fn}: the output has shape {out.shape}: a cotangent is needed unless it has one "
                             f"element (grad's function must return a scalar)")
        _check_float(out, "the output")
        if out.dtype.kind == "c":
            raise TypeError(f"{fn}: the output is complex ({out.dtype.name}): a gradient needs a real-valued "
                            f"function (take .real, abs(), ...), or pass a cotangent (ug.vjp)")
        return Tensor(graph.const(1, out.dtype, out.device, out.shape))
    ct = cotangent if isinstance(cotangent, Tensor) else _as_like(cotangent, out)
    if ct.shape != out.shape:
        raise ValueError(f"{fn}: cotangent shape {ct.shape} does not match the output's {out.shape}")
    return ct.astype(out.dtype) if ct.dtype != out.dtype else ct


def _as_like(value: Any, like: Tensor) -> Tensor:
    arr = np.asarray(value)
    return tensor(arr.astype(like.dtype) if arr.dtype != like.dtype else arr, device=like.device)


def _tree_leaves(tree: Any) -> list[Tensor]:
    leaves: list[Tensor] = []

    def note(t: Tensor) -> Tensor:
        leaves.append(t)
        return t
    _map_tensors(tree, note)
    return leaves


def _treereplace(tree: Any, new: Sequence[Any]) -> Any:
    it = iter(new)
    return _map_tensors(tree, lambda t: next(it))


def _handle(t: Tensor) -> Tensor:
    """A fresh name for t's value: an identity view node, so uses through it are told apart from
    every other use of t's node (a captured value computed from it, another argument)."""
    return Tensor(graph.name(t.node))


def _as_primal(value: Any) -> Any:
    """An argument tree with numpy arrays and Python floats as tensors (JAX accepts both)."""
    if isinstance(value, (np.ndarray, float, np.floating)):
        return tensor(value)
    return _map_tensors(value, lambda t: t)


def vjp(fn: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """(fn(*primals), vjp_fn) or, with has_aux, (out, vjp_fn, aux) where fn returns (out, aux):
    vjp_fn(cotangent tree like out) returns one cotangent tree per primal (JAX's jax.vjp).
    Primals are pytrees (tuples, lists, dicts) of float tensors; numpy arrays and Python floats
    are taken as tensors."""
    primals = tuple(_as_primal(p) for p in primals)
    leaves = _tree_leaves(primals)
    for i, t in enumerate(leaves):
        _check_float(t, f"input {i} (shape {t.shape})")
    handles = [_handle(t) for t in leaves]
    # the arguments' nodes now: a write to an argument inside fn (t[0] = 5) gives its handle a
    # new node (the write's), and the gradient is the argument's, from before the write
    wrt = [h.node for h in handles]
    with keep_graph():
        result = fn(*_treereplace(primals, handles))
        out, aux = _split_aux(result, has_aux)
        out_leaves = _tree_leaves(out)
        out_nodes = [t.node for t in out_leaves]
        # the graph as it is now: the outputs (or anything in between) may be realized before
        # vjp_fn is called, and a realize drops a node's sources
        graph_now = {id(n): (n, _sources(n)) for n in _walk(out_nodes)}
    for i, t in enumerate(out_leaves):
        _check_float(t, f"output {i} (shape {t.shape})")

    def sources(node: Node) -> tuple[Node, ...]:
        entry = graph_now.get(id(node))
        return entry[1] if entry is not None else _sources(node)

    def vjp_fn(cotangent: Any) -> tuple[Any, ...]:
        cts = [cotangent] if isinstance(cotangent, Tensor) or cotangent is None else _tree_leaves(cotangent)
        if len(cts) != len(out_nodes):
            raise ValueError(f"vjp: {len(cts)} cotangents for {len(out_nodes)} outputs")
        roots = [(n, _cotangent_for(Tensor(n), c, "vjp")) for n, c in zip(out_nodes, cts)]
        found = _backward(roots, wrt, sources)
        grads = [g if g is not None else zeros(t.shape, t.dtype, t.device) for g, t in zip(found, leaves)]
        return tuple(_treereplace(primals, grads))
    if has_aux:
        return out, vjp_fn, aux
    return out, vjp_fn


def _split_aux(result: Any, has_aux: bool) -> tuple[Any, Any]:
    if not has_aux:
        return result, None
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise TypeError("has_aux=True: the function must return a pair (output, aux)")
    return result[0], result[1]


def _argnums(argnums: int | Sequence[int], n: int) -> tuple[tuple[int, ...], bool]:
    single = isinstance(argnums, (int, np.integer))
    nums = (int(argnums),) if single else tuple(int(a) for a in argnums)  # type: ignore[union-attr,arg-type]
    for a in nums:
        if not -n <= a < n:
            raise ValueError(f"argnums {argnums!r} is out of range for a call with {n} positional arguments")
    return tuple(a % n for a in nums), single


def value_and_grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable[..., Any]:
    """A function returning (fn(*args), the gradient of fn with respect to args[argnums]) (JAX's
    jax.value_and_grad): fn returns a one-element float tensor (or (it, aux) with has_aux: then
    ((value, aux), grad)); the gradient has the argument's pytree structure (a tuple of them
    for a sequence of argnums). The value and the gradients are lazy tensors."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums, single = _argnums(argnums, len(args))

        def partial(*diff: Any) -> Any:
            full = list(args)
            for a, v in zip(nums, diff):
                full[a] = v
            return fn(*full, **kwargs)
        result = vjp(partial, *(args[a] for a in nums), has_aux=has_aux)
        out, pullback = result[0], result[1]
        if not isinstance(out, Tensor) or out.size != 1:
            what = f"shape {out.shape}" if isinstance(out, Tensor) else type(out).__name__
            raise TypeError(f"grad: the function must return a scalar (one-element) tensor, got {what}; "
                            f"use ug.vjp for other outputs")
        grads = pullback(None)
        g = grads[0] if single else tuple(grads)
        return ((out, result[2]), g) if has_aux else (out, g)
    wrapper.__name__ = f"value_and_grad({getattr(fn, '__name__', 'fn')})"
    wrapper.__doc__ = fn.__doc__
    return wrapper


def grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The gradient of fn (returning a one-element float tensor) with respect to its positional
    argument(s) `argnums` (JAX's jax.grad): grad(fn)(*args) has the argument's pytree structure;
    with has_aux (fn returns (value, aux)), (gradient, aux). Lazy: the backward graph fuses like
    any other, and composes with ug.jit (either way round) and with itself (grad(grad(f)))."""
    vg = value_and_grad(fn, argnums, has_aux)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        (value, g) = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    wrapper.__name__ = f"grad({getattr(fn, '__name__', 'fn')})"
    wrapper.__doc__ = fn.__doc__
    return wrapper


def jvp(fn: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """(fn(*primals), the directional derivative of fn along `tangents`) (JAX's jax.jvp). Forward
    mode by transposing the reverse mode: vjp's function u -> J^T u is linear in u, and its own
    VJP at the tangents t is J t. The extra graph is lazy and fuses."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals and {len(tangents)} tangents")
    out, pullback = vjp(fn, *primals)
    out_leaves = _tree_leaves(out)
    dummies = [zeros(t.shape, t.dtype, t.device) for t in out_leaves]
    _, transpose = vjp(lambda *us: pullback(_treereplace(out, us)), *dummies)
    t_out = transpose(tuple(_as_primal(t) for t in tangents))
    return out, _treereplace(out, list(t_out))


_this = __import__(__name__, fromlist=["_"])
