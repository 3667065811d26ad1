"""ug.nn's functions and the namespace's erf / erfc / logsumexp / isclose / lerp / split against
numpy references written here, on every device; the kernel counts of the fused ones."""
import math

import numpy as np
import pytest

import ug_core as ug
from ug_core.nn import functional as F

RNG = np.random.default_rng(7)


def randn(*shape, scale=1.0, dtype=np.float32):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


def close(got, want, rtol=1e-5, atol=1e-6):
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got.numpy().astype(np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol,
                               equal_nan=True)


def np_log_softmax(x, axis):
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


def np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


NP_ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0),
    "relu6": lambda x: np.clip(x, 0, 6),
    "leaky_relu": lambda x: np.where(x > 0, x, 0.01 * x),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "selu": lambda x: F.SELU_SCALE * np.where(x > 0, x, F.SELU_ALPHA * np.expm1(np.minimum(x, 0))),
    "gelu": lambda x: 0.5 * x * np.array([math.erfc(-v / math.sqrt(2)) for v in x.reshape(-1)]).reshape(x.shape),
    "silu": lambda x: x * np_sigmoid(x),
    "softplus": lambda x: np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20)))),
    "mish": lambda x: x * np.tanh(np.log1p(np.exp(x))),
    "softsign": lambda x: x / (1 + np.abs(x)),
    "hardswish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "hardsigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "logsigmoid": lambda x: np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x))),
}


@pytest.mark.parametrize("name", sorted(NP_ACTIVATIONS))
def test_activations(device, name):
    x = np.concatenate([randn(64, scale=4), [0.0, 30.0, -30.0]]).astype(np.float32)
    want = NP_ACTIVATIONS[name](x.astype(np.float64))
    close(getattr(F, name)(ug.tensor(x, device=device)), want, rtol=2e-5, atol=1e-6)


def test_erf_erfc(device):
    x = np.concatenate([RNG.uniform(-6, 6, 2000), RNG.uniform(-30, 30, 500), np.geomspace(1e-30, 27, 500)])
    for dtype, erf_ulp, erfc_ulp in ((np.float32, 1.5, 5), (np.float64, 1.5, 5)):
        xs = x.astype(dtype)
        wide = xs.astype(np.float64)
        for fn, ref, bound in ((ug.erf, math.erf, erf_ulp), (ug.erfc, math.erfc, erfc_ulp)):
            exact = np.array([ref(v) for v in wide])
            got = fn(ug.tensor(xs, device=device)).numpy().astype(np.float64)
            spacing = np.maximum(np.spacing(np.abs(exact).astype(dtype)).astype(np.float64),
                                 np.finfo(dtype).smallest_subnormal)
            ulp = np.abs(got - exact) / spacing
            assert ulp.max() <= bound, (fn.__name__, dtype, ulp.max(), wide[ulp.argmax()])
    special = np.array([np.inf, -np.inf, np.nan, 0.0], np.float32)
    np.testing.assert_array_equal(ug.erf(ug.tensor(special, device=device)).numpy(), [1, -1, np.nan, 0])
    np.testing.assert_array_equal(ug.erfc(ug.tensor(special, device=device)).numpy(), [0, 2, np.nan, 1])


def test_logsumexp_isclose_lerp(device):
    x = randn(5, 7, scale=40)
    x[0] = -np.inf
    t = ug.tensor(x, device=device)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(np.isfinite(x.max(1, keepdims=True)), x.max(1, keepdims=True), 0)
        want = (np.log(np.exp(x - m).sum(1, keepdims=True)) + m)[:, 0]
    close(ug.logsumexp(t, axis=1), want, rtol=1e-6)
    a = np.array([1.0, 1.0 + 1e-6, np.inf, np.nan, 0.0])
    b = np.array([1.0, 1.0, np.inf, np.nan, 1e-9])
    for equal_nan in (False, True):
        got = ug.isclose(ug.tensor(a, device=device), ug.tensor(b, device=device), equal_nan=equal_nan)
        np.testing.assert_array_equal(got.numpy(), np.isclose(a, b, equal_nan=equal_nan))
    s, e, w = randn(9), randn(9), RNG.uniform(0, 1, 9).astype(np.float32)
    close(ug.lerp(ug.tensor(s, device=device), ug.tensor(e, device=device), ug.tensor(w, device=device)),
          s.astype(np.float64) + w * (e.astype(np.float64) - s), rtol=1e-6, atol=1e-6)


def test_split(device):
    x = randn(7, 3)
    t = ug.tensor(x, device=device)
    for got, want in zip(ug.array_split(t, 3), np.array_split(x, 3)):
        np.testing.assert_array_equal(got.numpy(), want)
    for got, want in zip(ug.nn.split(t, 3), (x[:3], x[3:6], x[6:])):
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("shape", [(6, 5), (3, 5, 4)])
def test_cross_entropy_and_nll(device, shape):
    x = randn(*shape, scale=3)
    target = RNG.integers(0, 5, (shape[0],) + shape[2:])
    target.reshape(-1)[0] = -100
    logp = np_log_softmax(x.astype(np.float64), 1)
    picked = np.take_along_axis(logp, np.expand_dims(np.where(target < 0, 0, target), 1), 1)[:, 0]
    keep = target != -100
    losses = np.where(keep, -picked, 0)
    tx, tt = ug.tensor(x, device=device), ug.tensor(target, device=device)
    close(F.cross_entropy(tx, tt, reduction="none"), losses)
    close(F.cross_entropy(tx, tt), losses.sum() / keep.sum())
    close(F.nll_loss(ug.tensor(logp.astype(np.float32), device=device), tt, reduction="sum"), losses.sum(), rtol=1e-5)


def test_bce_with_logits(device):
    x = np.array([-200.0, -5.0, -0.5, 0.0, 0.5, 5.0, 200.0], np.float32)
    y = np.array([0.0, 1.0, 0.3, 0.5, 1.0, 0.0, 1.0], np.float32)
    xd = x.astype(np.float64)
    want = (1 - y) * xd + np.log1p(np.exp(-np.abs(xd))) + np.maximum(-xd, 0)
    close(F.binary_cross_entropy_with_logits(ug.tensor(x, device=device), ug.tensor(y, device=device),
                                             reduction="none"), want)


def test_cummax_indices(device):
    x = np.array([[1, 3, 3, 2, 3, 5, 0], [4, 4, 1, 4, 6, 6, 2]], np.int32)
    got = F.cummax(ug.tensor(x, device=device), 1)
    np.testing.assert_array_equal(got.values.numpy(), np.maximum.accumulate(x, 1))
    np.testing.assert_array_equal(got.indices.numpy(), [[0, 1, 2, 2, 4, 5, 5], [0, 1, 1, 3, 4, 5, 5]])
    low = F.cummin(ug.tensor(x, device=device), 1)
    np.testing.assert_array_equal(low.indices.numpy(), [[0, 0, 0, 0, 0, 0, 6], [0, 1, 2, 2, 2, 2, 2]])


def test_layer_norm_is_one_kernel(device):
    x, w, b = randn(16, 32, scale=3), randn(32), randn(32)
    out = F.layer_norm(ug.tensor(x, device=device), (32,), ug.tensor(w, device=device), ug.tensor(b, device=device))
    assert len(ug.schedule(out).kernels) == 1
    xd = x.astype(np.float64)
    mean, var = xd.mean(1, keepdims=True), xd.var(1, keepdims=True)
    close(out, (xd - mean) / np.sqrt(var + 1e-5) * w + b, rtol=1e-4, atol=1e-5)


def test_softmax_is_one_kernel(device):
    x = randn(8, 50, scale=5)
    out = F.softmax(ug.tensor(x, device=device), 1)
    assert len(ug.schedule(out).kernels) == 1
    close(out, np.exp(np_log_softmax(x.astype(np.float64), 1)), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_two_matmuls_one_kernel(device, causal):
    q, k, v = randn(2, 6, 8), randn(2, 9, 8), randn(2, 9, 4)
    out = F.scaled_dot_product_attention(*(ug.tensor(a, device=device) for a in (q, k, v)), is_causal=causal)
    schedule = ug.schedule(out)
    if ug.plugins.registry.get(device).attends(np.dtype(np.float32)):   # the device's fused attention
        assert [i.kind for i in schedule.items] == ["attention"], str(schedule)
    else:
        assert len(schedule.kernels) == 1 and len(schedule.items) == 3, str(schedule)   # q k^T, the softmax, @ v
    s = q.astype(np.float64) @ k.transpose(0, 2, 1) / math.sqrt(8)
    if causal:
        s = np.where(np.tril(np.ones((6, 9), bool)), s, -np.inf)
    close(out, np.exp(np_log_softmax(s, -1)) @ v, rtol=1e-4, atol=1e-5)
