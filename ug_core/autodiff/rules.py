"""The helpers the derivative rules in ops.py call (`vjp(d, g, out, *srcs)`: `d` is this module),
and the rules of the graph's other ops that need more than a line there."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from .. import graph
from ..array_api._common import iota
from ..array_api.fft import fft_vjp  # noqa: F401  (d.fft_vjp: Op.FFT's rule calls it through this module)
from ..array_api.scans import scan
from ..custom import custom_vjps
from ..graph import Node
from ..ops import REDUCE, Op
from ..tensor import Tensor, checked_tensor, zeros
from ..tensor_arith import combine, parts, where
from ..view import View
from .view_vjp import _INT64, _reshape, _scatter_add, view_vjp


# --- what the rules in ops.py call ------------------------------------------------------------


def sign(x: Tensor) -> Tensor:
    """-1, 0 or 1 (0 for 0 and NaN: abs's derivative at 0 is 0, torch's choice)."""
    return where(x > 0, 1.0, where(x < 0, -1.0, 0.0))


def trunc(x: Tensor) -> Tensor:
    return checked_tensor(graph.alu(Op.TRUNC, (x.node,), x.dtype))


def _expand(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """t (shape with 1 where `shape` has more) broadcast to `shape` (a view, no copy)."""
    return t if t.shape == shape else Tensor(graph.view(t.node, View.contiguous(t.shape).expand(shape)))


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


_this = __import__(__name__, fromlist=["_"])   # (what reduce_vjp hands REDUCE's rules as their `d`)
