"""scaled_dot_product_attention (torch.nn.functional's).

It is one graph node (ops.Op.ATTENTION) on every device. On a device with a fused attention of
its own (Device.attends: the cpu device) that is one schedule item: one pass over the keys per
block of queries with an online softmax, the (L, S) scores never stored. Elsewhere the
scheduler's device pass builds the composite graph in its place: scores q k^T * scale as a
matmul, the mask (causal or additive) and a max-shifted softmax over the keys fused into one
kernel, then @ v as a second matmul. Either way its gradient is the composite's
(autodiff.rules.attention_vjp recomputes the scores: the standard attention backward)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import graph
from ..array_api._common import check_tensor, iota
from ..graph import Node
from ..ops import Op
from ..plugins import registry
from ..schedule.device_pass import register_decomposition
from ..tensor import Tensor
from ..tensor_arith import as_tensor, matmul, where


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(q k^T * scale + mask) v for q (..., L, E), k (..., S, E), v (..., S, Ev) (batch
    axes broadcast): scale defaults to 1 / sqrt(E); attn_mask broadcasts to (..., L, S): a bool
    mask keeps the positions where it is True, a float mask is added to the scores; is_causal
    keeps key j for query i where j <= i (torch's top-left aligned lower triangle; not with
    attn_mask). A query row that keeps no key is NaN (torch's). dropout_p must be 0 (dropout
    needs random numbers: ug.random). enable_gqa (grouped-query attention): q's heads (dim -3)
    may be a multiple of k's and v's, each key / value head serving that many consecutive query
    heads (torch's repeat_interleave; a broadcast view, no copy)."""
    q = check_tensor(query, "scaled_dot_product_attention", "query")._float()
    k = check_tensor(key, "scaled_dot_product_attention", "key").astype(q.dtype)
    v = check_tensor(value, "scaled_dot_product_attention", "value").astype(q.dtype)
    if min(q.ndim, k.ndim, v.ndim) < 2:
        raise ValueError(f"scaled_dot_product_attention: query, key and value must be at least 2-d, got shapes "
                         f"{q.shape}, {k.shape}, {v.shape}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"scaled_dot_product_attention: query (shape {q.shape}) and key (shape {k.shape}) must "
                         f"share the embedding size, key and value (shape {v.shape}) the sequence length")
    if dropout_p != 0.0:
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be 0 (got {dropout_p}); apply dropout with "
                         "ug's random numbers to the result instead")
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: give either attn_mask or is_causal, not both (torch's rule)")
    if enable_gqa and min(q.ndim, k.ndim, v.ndim) >= 3 and k.shape[-3] != q.shape[-3]:
        heads, kv_heads = q.shape[-3], k.shape[-3]
        if v.shape[-3] != kv_heads or heads % kv_heads:
            raise ValueError(f"scaled_dot_product_attention: with enable_gqa, query's heads (dim -3 of {q.shape}) must "
                             f"be a multiple of key's and value's (shapes {k.shape}, {v.shape})")
        k, v = (_repeat_heads(t, heads // kv_heads) for t in (k, v))
    n_q, n_k = q.shape[-2], k.shape[-2]
    factor = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    mask = None if attn_mask is None else check_tensor(attn_mask, "scaled_dot_product_attention", "attn_mask")
    if mask is not None:
        if mask.ndim < 2:
            mask = mask.reshape((1,) * (2 - mask.ndim) + mask.shape)
        try:
            np.broadcast_shapes(mask.shape, np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (n_q, n_k))
        except ValueError:
            raise ValueError(f"scaled_dot_product_attention: attn_mask (shape {mask.shape}) does not broadcast to the "
                             f"scores' shape (query {q.shape}, key {k.shape})") from None
    if min(q.shape[-1], n_q, n_k) > 0:
        return _fused(q, k, v, mask, float(factor), is_causal)
    return _composite(q, k, v, mask, float(factor), is_causal)


def _composite(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, causal: bool) -> Tensor:
    """Attention as ug ops: the scores' matmul, the mask and the softmax as one kernel, @ v."""
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores = matmul(q, k.mT) * as_tensor(scale, q)
    if causal:
        rows = iota(n_q, q.device).reshape(n_q, 1)
        cols = iota(n_k, q.device).reshape(1, n_k)
        scores = where(cols <= rows, scores, -math.inf)
    elif mask is not None:
        if mask.dtype.kind == "b":
            scores = where(mask, scores, -math.inf)
        else:
            scores = scores + mask.astype(scores.dtype)
    return matmul(scores.softmax(-1), v)


def _without_fused_attention(node: Node) -> bool:
    return not registry.get(node.device).attends(node.dtype)


def _decomposed(node: Node, srcs: tuple[Node, ...]) -> Node:
    """An ATTENTION node (its sources: `srcs`) as the composite graph, for the scheduler's
    device pass on a device without a fused attention."""
    scale, causal = node.arg
    q, k, v = (Tensor(s) for s in srcs[:3])
    return _composite(q, k, v, Tensor(srcs[3]) if len(srcs) > 3 else None, scale, causal)._node


register_decomposition(Op.ATTENTION, _without_fused_attention, _decomposed)


def _fused(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, causal: bool) -> Tensor:
    """The device's fused attention: every operand broadcast (a view) to the common batch dims,
    a bool mask made additive (0 where kept, -inf elsewhere) in its own shape."""
    shapes = [q.shape[:-2], k.shape[:-2], v.shape[:-2]] + ([mask.shape[:-2]] if mask is not None else [])
    try:
        batch = tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"scaled_dot_product_attention: the batch dims of query {q.shape}, key {k.shape}, value "
                         f"{v.shape}" + (f" and attn_mask {mask.shape}" if mask is not None else "")
                         + " do not broadcast") from None
    n_q, n_k = q.shape[-2], k.shape[-2]
    srcs = [q.broadcast_to(batch + q.shape[-2:]), k.broadcast_to(batch + k.shape[-2:]),
            v.broadcast_to(batch + v.shape[-2:])]
    if mask is not None:
        additive = where(mask, 0.0, -math.inf).astype(q.dtype) if mask.dtype.kind == "b" else mask.astype(q.dtype)
        srcs.append(additive.broadcast_to(batch + (n_q, n_k)))
    return Tensor(graph.attention(tuple(t._node for t in srcs), scale, causal))


def _repeat_heads(t: Tensor, r: int) -> Tensor:
    """t (..., H, S, E) with each head repeated r times in place: (..., H * r, S, E)."""
    *lead, h, s, e = t.shape
    return t.reshape(*lead, h, 1, s, e).broadcast_to((*lead, h, r, s, e)).reshape(*lead, h * r, s, e)


__all__ = ["scaled_dot_product_attention"]
