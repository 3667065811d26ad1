"""Matrix multiplication with numpy semantics."""
import math

import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.data import rand
from ug_core.testing.oracles import gelu, softmax


def tol(dtype, k):
    if np.dtype(dtype) == np.float64:
        return dict(rtol=1e-10, atol=1e-10)
    if np.dtype(dtype) == np.float16:
        return dict(rtol=2e-2, atol=2e-2 * max(1, k) ** 0.5)
    return dict(rtol=1e-4, atol=1e-5 * max(1, k))


SHAPES = [
    ((5,), (5,)),                  # 1-D . 1-D -> 0-d
    ((4,), (4, 3)),                # 1-D . 2-D
    ((3, 4), (4,)),                # 2-D . 1-D
    ((3, 4), (4, 5)),
    ((1, 1), (1, 1)),
    ((1, 7), (7, 1)),
    ((7, 1), (1, 6)),              # outer product via K=1
    ((2, 3, 4), (2, 4, 5)),        # batched
    ((2, 3, 4), (4, 5)),           # batch x 2-D
    ((3, 4), (2, 4, 5)),           # 2-D x batch
    ((2, 1, 3, 4), (5, 4, 6)),     # broadcast batch dims
    ((1, 3, 4), (6, 4, 2)),
    ((2, 1, 3, 4), (1, 5, 4, 2)),
    ((2, 3, 4), (4,)),             # N-D . 1-D
    ((4,), (2, 4, 5)),             # 1-D . N-D
    ((33, 65), (65, 17)),          # odd sizes
    ((64, 128), (128, 96)),
    ((2, 0), (0, 3)),              # K = 0 -> zeros
    ((0, 3), (3, 4)),              # M = 0
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_matmul_shapes(device, close, require_dtype, shapes, dtype):
    require_dtype(dtype)
    sa, sb = shapes
    a, b = rand(sa, dtype), rand(sb, dtype)
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    expected = a @ b
    k = sa[-1]
    close(x @ y, expected, **tol(dtype, k))
    close(ug.matmul(x, y), expected, **tol(dtype, k))


def test_matmul_float16(device, close, require_dtype):
    require_dtype(np.float16)
    a, b = rand((8, 16), np.float16), rand((16, 4), np.float16)
    got = ug.tensor(a, device=device) @ ug.tensor(b, device=device)
    assert got.dtype == np.float16
    close(got, (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16), **tol(np.float16, 16))


def test_matmul_mixed_dtype_promotes(device, close, require_dtype):
    require_dtype(np.float64)
    a, b = rand((3, 4)), rand((4, 2), np.float64)
    got = ug.tensor(a, device=device) @ ug.tensor(b, device=device)
    close(got, a @ b, rtol=1e-6, atol=1e-6)


VIEW_CASES = [
    # id, a shape, b shape, fn on ug tensors, fn on numpy arrays (None: same as the ug fn)
    ("x @ w.T", (5, 8), (6, 8), lambda x, w: x @ w.T, None),
    ("x.T @ w", (8, 5), (8, 6), lambda x, w: x.T @ w, None),
    ("x.T @ w.T", (8, 5), (6, 8), lambda x, w: x.T @ w.T, None),
    ("strided rows", (10, 8), (8, 3), lambda x, w: x[::2] @ w, None),
    ("strided inner", (5, 16), (8, 3), lambda x, w: x[:, ::2] @ w, None),
    ("strided cols w", (5, 8), (8, 12), lambda x, w: x @ w[:, 1::3], None),
    ("sliced both", (6, 10), (12, 4), lambda x, w: x[1:5, 2:9] @ w[3:10, 1:], None),
    ("row vector", (5, 8), (8, 6), lambda x, w: x[2] @ w, None),
    ("column", (5, 8), (8, 6), lambda x, w: x @ w[:, 3], None),
    ("broadcast batch", (3, 4), (4, 5), lambda x, w: x.broadcast_to((2, 3, 4)) @ w,
     lambda x, w: np.broadcast_to(x, (2, 3, 4)) @ w),
    ("permuted batch", (4, 2, 3), (2, 3, 5), lambda x, w: x.permute(1, 0, 2) @ w,
     lambda x, w: x.transpose(1, 0, 2) @ w),
    ("reshape", (12, 4), (4, 2), lambda x, w: x.reshape(3, 4, 4) @ w, None),
    ("expand_dims", (3, 4), (4, 5), lambda x, w: x.expand_dims(0) @ w.expand_dims(0),
     lambda x, w: np.expand_dims(x, 0) @ np.expand_dims(w, 0)),
    ("batched transposed", (2, 5, 3), (2, 4, 3), lambda x, w: x @ w.permute(0, 2, 1),
     lambda x, w: x @ w.transpose(0, 2, 1)),
]


@pytest.mark.parametrize("sa,sb,f,nf", [c[1:] for c in VIEW_CASES], ids=[c[0] for c in VIEW_CASES])
def test_matmul_views(device, close, sa, sb, f, nf):
    a, b = rand(sa), rand(sb)
    got = f(ug.tensor(a, device=device), ug.tensor(b, device=device))
    close(got, (nf or f)(a, b), rtol=1e-4, atol=1e-4)


def test_matmul_of_computed_inputs_and_epilogue(device, close):
    a, w, bias = rand((6, 8)), rand((8, 5)), rand((5,))
    x, wt, bt = (ug.tensor(v, device=device) for v in (a, w, bias))
    got = ((x * 2 + 1).tanh() @ wt.exp() + bt).relu()
    ref = np.maximum(np.tanh(a * 2 + 1) @ np.exp(w) + bias, 0)
    close(got, ref, rtol=1e-4, atol=1e-4)


def test_mlp(device, close):
    a = rand((16, 32))
    w1, b1, w2, b2 = rand((64, 32)) * 0.2, rand((64,)), rand((10, 64)) * 0.2, rand((10,))
    x, W1, B1, W2, B2 = (ug.tensor(v, device=device) for v in (a, w1, b1, w2, b2))
    h = (x @ W1.T + B1).gelu()
    out = (h @ W2.T + B2).log_softmax(axis=-1)
    a64 = a.astype(np.float64)
    z = a64 @ w1.T + b1
    h_ref = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))
    o = h_ref @ w2.T + b2
    o = o - o.max(-1, keepdims=True)
    o = o - np.log(np.exp(o).sum(-1, keepdims=True))
    close(out, o.astype(np.float32), rtol=1e-4, atol=1e-4)


def test_attention_like(device, close):
    q, k, v = rand((2, 5, 8)), rand((2, 7, 8)), rand((2, 7, 8))
    Q, K, V = (ug.tensor(t, device=device) for t in (q, k, v))
    att = ((Q @ K.permute(0, 2, 1)) * (1 / math.sqrt(8))).softmax(axis=-1) @ V   # (a np.float64 would make it float64)
    s = (q.astype(np.float64) @ k.transpose(0, 2, 1)) / np.sqrt(8)
    s = np.exp(s - s.max(-1, keepdims=True))
    s = s / s.sum(-1, keepdims=True)
    close(att, (s @ v).astype(np.float32), rtol=1e-4, atol=1e-5)


def test_matmul_chain_and_reuse(device, close):
    a = rand((6, 6)) * 0.5
    x = ug.tensor(a, device=device)
    close(x @ x @ x, a @ a @ a, rtol=1e-4, atol=1e-5)
    y = x @ x
    close(y + y.T, a @ a + (a @ a).T, rtol=1e-4, atol=1e-5)


def test_matmul_result_views_and_reduce(device, close):
    a, b = rand((4, 5, 6)), rand((6, 3))
    y = ug.tensor(a, device=device) @ ug.tensor(b, device=device)
    close(y[1], (a @ b)[1], rtol=1e-4, atol=1e-5)
    close(y.sum(axis=1), (a @ b).sum(axis=1), rtol=1e-4, atol=1e-4)
    close(y.T, (a @ b).T, rtol=1e-4, atol=1e-5)


def test_matmul_1d_1d_is_0d(device):
    a, b = rand((4,)), rand((4,))
    got = ug.tensor(a, device=device) @ ug.tensor(b, device=device)
    assert got.shape == ()
    assert got.item() == pytest.approx(float(a @ b), rel=1e-5, abs=1e-6)


def test_matmul_identity(device, close):
    a = rand((5, 5))
    eye = ug.tensor(np.eye(5, dtype=np.float32), device=device)
    x = ug.tensor(a, device=device)
    close(eye @ x, a, rtol=1e-6, atol=0)
    close(x @ eye, a, rtol=1e-6, atol=0)


def test_larger_matmul(device, close):
    a, b = rand((200, 300)), rand((300, 150))
    close(ug.tensor(a, device=device) @ ug.tensor(b, device=device), a @ b, rtol=1e-4, atol=1e-3)


# --- epilogues: the elementwise kernel right after a matmul, which a device may run on each
# block of the product's rows as it is done (Device.matmul_epilogue); results must not depend
# on whether it does
def test_epilogue_bias_activation_shapes(device, close, require_dtype):
    rng = np.random.default_rng(5)
    for m, k, n in [(64, 40, 72), (130, 33, 257), (9, 16, 8), (3, 5, 20), (257, 64, 16)]:
        a, w, bias = (rng.standard_normal(s, dtype=np.float32) for s in ((m, k), (k, n), (n,)))
        x, wt, bt = (ug.tensor(v, device=device) for v in (a, w, bias))
        close((x @ wt + bt).relu(), np.maximum(a @ w + bias, 0), rtol=1e-4, atol=1e-4)
        close((x @ wt) * 0.5 - (x @ wt).exp() * 0 + 1, (a @ w) * 0.5 + 1, rtol=1e-4, atol=1e-4)
    require_dtype(np.float64)
    a, w = rng.standard_normal((96, 48)), rng.standard_normal((48, 80))
    close((ug.tensor(a, device=device) @ ug.tensor(w, device=device)).tanh() * 2, np.tanh(a @ w) * 2, rtol=1e-9, atol=1e-9)


def test_epilogue_batched_and_folded(device, close):
    rng = np.random.default_rng(6)
    a, b, c = (rng.standard_normal(s, dtype=np.float32) for s in ((3, 40, 24), (3, 24, 36), (3, 40, 36)))
    A, B, C = (ug.tensor(v, device=device) for v in (a, b, c))
    close(A @ B * 2 + C, a @ b * 2 + c, rtol=1e-4, atol=1e-4)
    w, bias = rng.standard_normal((24, 50), dtype=np.float32), rng.standard_normal((50,), dtype=np.float32)
    W, Bias = ug.tensor(w, device=device), ug.tensor(bias, device=device)
    # x @ weight: one tall product
    close((A @ W + Bias).gelu(), gelu(a @ w + bias).astype(np.float32), rtol=1e-4, atol=1e-4)
    close((A @ W).reshape(3 * 40 * 50) + 1, (a @ w).reshape(-1) + 1, rtol=1e-4, atol=1e-4)


def test_epilogue_that_must_not_run_per_row_block(device, close):
    # kernels after a matmul that read the product elsewhere than at the element they compute,
    # or reduce it, or write an operand in place: still right (the device runs them after)
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((48, 48), dtype=np.float32), rng.standard_normal((48, 48), dtype=np.float32)
    A, B = ug.tensor(a, device=device), ug.tensor(b, device=device)
    close((A @ B).T + (A @ B), (a @ b).T + a @ b, rtol=1e-4, atol=1e-4)
    close((A @ B)[1:] + 1, (a @ b)[1:] + 1, rtol=1e-4, atol=1e-4)      # a view: not the same index space
    close((A @ B).softmax(axis=-1), softmax(a @ b).astype(np.float32), rtol=1e-4, atol=1e-5)
    x = ug.tensor(a.copy(), device=device).realize()
    x.assign(x @ B + 1)              # writes the matmul's operand: never while the product is made
    close(x, a @ b + 1, rtol=1e-4, atol=1e-4)
    p = A @ B
    q = (p + 1).relu()
    ug.realize(p, q)                 # the product is an output too
    close(p, a @ b, rtol=1e-4, atol=1e-4)
    close(q, np.maximum(a @ b + 1, 0), rtol=1e-4, atol=1e-4)


def test_epilogue_float16_and_jit(device, close, require_dtype):
    rng = np.random.default_rng(8)
    a, w, bias = (rng.standard_normal(s, dtype=np.float32) for s in ((64, 32), (32, 48), (48,)))
    f = ug.jit(lambda x, w, b: (x @ w + b).relu())
    for _ in range(3):
        close(f(*(ug.tensor(v, device=device) for v in (a, w, bias))), np.maximum(a @ w + bias, 0), rtol=1e-4, atol=1e-4)
    require_dtype(np.float16)
    h = [v.astype(np.float16) for v in (a, w, bias)]
    got = (ug.tensor(h[0], device=device) @ ug.tensor(h[1], device=device) + ug.tensor(h[2], device=device)).relu()
    want = np.maximum((h[0].astype(np.float32) @ h[1].astype(np.float32)).astype(np.float16) + h[2], 0)
    close(got, want, rtol=2e-2, atol=2e-2)
