"""Matrix multiplication with numpy semantics."""
import numpy as np
import pytest

import ug_core as ug

RNG = np.random.default_rng(2024)


def rand(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


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
    att = ((Q @ K.permute(0, 2, 1)) * (1 / np.sqrt(8))).softmax(axis=-1) @ V
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
