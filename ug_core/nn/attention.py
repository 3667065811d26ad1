"""scaled_dot_product_attention (torch.nn.functional's) from ug ops: scores q k^T * scale, the
mask (causal, bool or additive), a max-shifted softmax over the keys, then @ v.

The two products are matmuls; the scale, the mask and the softmax fuse between them."""

from __future__ import annotations

import math
from typing import Any

from ..array_api._common import check_tensor, iota
from ..tensor import Tensor, _as_tensor, matmul, where


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
    scores = matmul(q, k.mT) * _as_tensor(factor, q)
    if is_causal:
        rows = iota(n_q, q.device).reshape(n_q, 1)
        cols = iota(n_k, q.device).reshape(1, n_k)
        scores = where(cols <= rows, scores, -math.inf)
    elif attn_mask is not None:
        mask = check_tensor(attn_mask, "scaled_dot_product_attention", "attn_mask")
        if mask.dtype.kind == "b":
            scores = where(mask, scores, -math.inf)
        else:
            scores = scores + mask.astype(scores.dtype)
    return matmul(scores.softmax(-1), v)


def _repeat_heads(t: Tensor, r: int) -> Tensor:
    """t (..., H, S, E) with each head repeated r times in place: (..., H * r, S, E)."""
    *lead, h, s, e = t.shape
    return t.reshape(*lead, h, 1, s, e).broadcast_to((*lead, h, r, s, e)).reshape(*lead, h * r, s, e)


__all__ = ["scaled_dot_product_attention"]
