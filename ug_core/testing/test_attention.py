"""scaled_dot_product_attention on every device: the fused item where the device has one
(Device.attends: the cpu device's flash attention), the composite graph elsewhere. Against a
float64 numpy reference: masks (causal, bool, additive, broadcast), scale, sizes that are not
multiples of the blocks (queries, keys past one key block, odd embeddings), float32 / float64,
batch dims that broadcast, strided operands, a query that keeps no key; gradients against the
composite's and torch's; kernel counts; ug.jit."""
import math

import numpy as np
import pytest

import ug_core as ug
from ug_core.nn import functional as F
from ug_core.plugins import registry

RNG = np.random.default_rng(11)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def reference(q, k, v, mask=None, causal=False, scale=None):
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    if causal:
        n_q, n_k = s.shape[-2:]
        s = np.where(np.arange(n_k)[None, :] <= np.arange(n_q)[:, None], s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ v


def close(got, want, dtype=np.float32):
    tol = 2e-5 if np.dtype(dtype) == np.float32 else 1e-12
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.numpy().astype(np.float64), want, rtol=tol, atol=tol, equal_nan=True)


def fused(device, dtype=np.float32) -> bool:
    return registry.get(device).attends(np.dtype(dtype))


# (q, k, v) shapes: one key block and more than one (the cpu device's blocks: 64 queries, 256
# keys), queries past one block, odd embeddings, Ev != E, 2-d operands
SHAPES = [((1, 5, 3), (1, 7, 3), (1, 7, 2)), ((2, 70, 17), (2, 300, 17), (2, 300, 9)),
          ((3, 130, 8), (3, 64, 8), (3, 64, 8)), ((6, 8), (6, 8), (6, 3)),
          ((4, 200, 32), (4, 300, 32), (4, 300, 32))]   # (enough work for the cpu device's threads)


@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: "x".join(map(str, s[0])) + "-" + str(s[1][-2]))
@pytest.mark.parametrize("mask", ["none", "causal", "bool", "additive"])
def test_sdpa_matches_numpy(device, shapes, mask):
    q, k, v = (randn(*s) for s in shapes)
    n_q, n_k = shapes[0][-2], shapes[1][-2]
    m = None
    if mask == "bool":
        m = RNG.uniform(0, 1, (n_q, n_k)) < 0.6
        m[:, -1] = True   # every query keeps a key
    elif mask == "additive":
        m = randn(n_q, n_k)
    um = None if m is None else ug.tensor(m, device=device)
    got = F.scaled_dot_product_attention(*(ug.tensor(a, device=device) for a in (q, k, v)), um,
                                         is_causal=mask == "causal")
    close(got, reference(q, k, v, m, mask == "causal"))


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_float64_and_scale(device, require_dtype, causal):
    require_dtype(np.float64)
    q, k, v = randn(2, 37, 11, dtype=np.float64), randn(2, 290, 11, dtype=np.float64), randn(2, 290, 5, dtype=np.float64)
    got = F.scaled_dot_product_attention(*(ug.tensor(a, device=device) for a in (q, k, v)), is_causal=causal, scale=0.7)
    assert got.dtype == np.float64
    close(got, reference(q, k, v, causal=causal, scale=0.7), np.float64)


def test_sdpa_broadcast_batch_and_mask(device):
    """k and v shared by every head (no batch dims), a mask per batch entry broadcast over heads."""
    q, k, v = randn(2, 3, 20, 8), randn(33, 8), randn(33, 6)
    m = randn(2, 1, 20, 33)
    got = F.scaled_dot_product_attention(*(ug.tensor(a, device=device) for a in (q, k, v)), ug.tensor(m, device=device))
    close(got, reference(q, k, v, m))


def test_sdpa_strided_operands(device):
    """q, k, v as a projection's (B, L, H, E) permuted to (B, H, L, E): strided views."""
    x = randn(2, 40, 4, 24)
    ux = ug.tensor(x, device=device).permute(0, 2, 1, 3)
    q, k, v = ux[..., :8], ux[..., 8:16], ux[..., 16:]
    got = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    xt = x.transpose(0, 2, 1, 3)
    close(got, reference(xt[..., :8], xt[..., 8:16], xt[..., 16:], causal=True))


def test_sdpa_causal_more_keys_than_queries(device):
    """torch's causal mask is the top-left aligned triangle: query i keeps keys 0..i."""
    q, k, v = randn(2, 10, 4), randn(2, 300, 4), randn(2, 300, 4)
    got = F.scaled_dot_product_attention(*(ug.tensor(a, device=device) for a in (q, k, v)), is_causal=True)
    close(got, reference(q, k, v, causal=True))


def test_sdpa_query_keeping_no_key_is_nan(device):
    q, k, v = randn(1, 4, 8), randn(1, 6, 8), randn(1, 6, 8)
    m = np.ones((4, 6), bool)
    m[2] = False
    got = F.scaled_dot_product_attention(*(ug.tensor(a, device=device) for a in (q, k, v)), ug.tensor(m, device=device))
    out = got.numpy()
    assert np.isnan(out[0, 2]).all() and not np.isnan(np.delete(out, 2, axis=1)).any()
    close(got, reference(q, k, v, m))


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_schedule(device, causal):
    """One item (no kernel) where the device fuses attention; else q k^T, the softmax, @ v."""
    q, k, v = randn(2, 6, 8), randn(2, 9, 8), randn(2, 9, 4)
    out = F.scaled_dot_product_attention(*(ug.tensor(a, device=device) for a in (q, k, v)), is_causal=causal)
    schedule = ug.schedule(out)
    if fused(device):
        assert [i.kind for i in schedule.items] == ["attention"], str(schedule)
    else:
        assert len(schedule.kernels) == 1 and len(schedule.items) == 3, str(schedule)
    # a bool mask: one more kernel at most (made additive, in the mask's own shape)
    m = np.tril(np.ones((6, 9), bool))
    out = F.scaled_dot_product_attention(*(ug.tensor(a, device=device) for a in (q, k, v)), ug.tensor(m, device=device))
    assert len(ug.schedule(out).items) <= (2 if fused(device) else 3), str(ug.schedule(out))
    close(out, reference(q, k, v, m))


def test_sdpa_jit_replays(device):
    f = ug.jit(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    for _ in range(3):
        q, k, v = randn(2, 70, 8), randn(2, 70, 8), randn(2, 70, 8)
        close(f(*(ug.tensor(a, device=device) for a in (q, k, v))), reference(q, k, v, causal=True))


def _composite(q, k, v, mask, causal):
    """The attention as plain ug ops (the graph autodiff differentiates node by node)."""
    s = (q @ k.mT) * (1 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = s + mask
    if causal:
        n_q, n_k = q.shape[-2], k.shape[-2]
        s = ug.where(ug.arange(n_k, device=q.device).reshape(1, n_k) <= ug.arange(n_q, device=q.device).reshape(n_q, 1),
                     s, -math.inf)
    return s.softmax(-1) @ v


@pytest.mark.parametrize("mask", ["none", "causal", "additive"])
def test_sdpa_gradients(device, require_dtype, mask):
    """ug.grad through the attention (the fused item's rule, where the device fuses it) equals
    the gradient of the composite graph, for q, k, v and an additive mask."""
    require_dtype(np.float64)
    q, k, v = randn(2, 19, 6, dtype=np.float64), randn(2, 23, 6, dtype=np.float64), randn(2, 23, 5, dtype=np.float64)
    w = randn(2, 19, 5, dtype=np.float64)
    args = [ug.tensor(a, device=device) for a in (q, k, v)]
    if mask == "additive":
        args.append(ug.tensor(randn(19, 23, dtype=np.float64), device=device))
    uw = ug.tensor(w, device=device)
    causal = mask == "causal"

    def loss(fn):
        return lambda *a: (fn(*a) * uw).sum()
    argnums = tuple(range(len(args)))
    got = ug.grad(loss(lambda q, k, v, *m: F.scaled_dot_product_attention(q, k, v, *m, is_causal=causal)), argnums)(*args)
    want = ug.grad(loss(lambda q, k, v, *m: _composite(q, k, v, m[0] if m else None, causal)), argnums)(*args)
    for g, h in zip(got, want):
        np.testing.assert_allclose(g.numpy(), h.numpy(), rtol=1e-10, atol=1e-12)


def test_sdpa_gradients_match_torch(device):
    torch = pytest.importorskip("torch")
    q, k, v = randn(2, 3, 30, 8), randn(2, 3, 41, 8), randn(2, 3, 41, 4)
    g = ug.grad(lambda a, b, c: (F.scaled_dot_product_attention(a, b, c, is_causal=True) ** 2).sum(), (0, 1, 2))(
        *(ug.tensor(a, device=device) for a in (q, k, v)))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    (torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True) ** 2).sum().backward()
    for mine, theirs in zip(g, (tq, tk, tv)):
        np.testing.assert_allclose(mine.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_sdpa_bad_mask_raises(device):
    q = ug.tensor(randn(2, 5, 4), device=device)
    with pytest.raises(ValueError, match="attn_mask"):
        F.scaled_dot_product_attention(q, q, q, ug.tensor(randn(3, 4), device=device))
