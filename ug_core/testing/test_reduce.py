"""Reductions (sum/max/min/mean), softmax/log_softmax and normalisation-style compositions."""
import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.data import RNG, rand
from ug_core.testing.oracles import log_softmax, softmax

AXES = [None, 0, 1, 2, -1, -2, -3, (0, 2), (1, -1), (0, 1, 2), (2, 0), (-1, 0, 1)]
REDUCE = {
    "sum": (lambda t, **k: t.sum(**k), np.sum),
    "max": (lambda t, **k: t.max(**k), np.max),
    "min": (lambda t, **k: t.min(**k), np.min),
    "mean": (lambda t, **k: t.mean(**k), np.mean),
}


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduce_axes(device, close, name, axis, keepdims):
    f, ref = REDUCE[name]
    a = rand((3, 4, 5))
    got = f(ug.tensor(a, device=device), axis=axis, keepdims=keepdims)
    # the exact sum (float64) rounded, not numpy's float32 one: two float32 summation orders of
    # 60 values of about 1 differ by some 1e-6 where the sum cancels to nearly 0
    close(got, ref(a.astype(np.float64), axis=axis, keepdims=keepdims).astype(np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduce_default_args(device, close, name):
    f, ref = REDUCE[name]
    a = rand((4, 6))
    x = ug.tensor(a, device=device)
    got = getattr(x, name)()
    assert got.shape == ()
    close(got, ref(a), rtol=1e-5, atol=1e-6)
    close(getattr(x, name)(1), ref(a, 1), rtol=1e-5, atol=1e-6)  # axis positionally


@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduce_0d(device, close, name):
    f, ref = REDUCE[name]
    a = np.array(2.5, np.float32)
    x = ug.tensor(a, device=device)
    close(f(x), ref(a))
    close(f(x, keepdims=True), ref(a, keepdims=True))


@pytest.mark.parametrize("name", sorted(REDUCE))
@pytest.mark.parametrize("shape", [(1,), (1, 1, 1), (5, 1), (1, 7)], ids=str)
def test_reduce_size_one_dims(device, close, name, shape):
    f, ref = REDUCE[name]
    a = rand(shape)
    for axis in [None] + list(range(len(shape))):
        close(f(ug.tensor(a, device=device), axis=axis), ref(a, axis=axis), rtol=1e-6)


@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_reduce_int(device, close, require_dtype, name):
    f, ref = REDUCE[name]
    if name == "sum":
        require_dtype(np.int64)  # numpy accumulates int32 sums in int64
    a = RNG.integers(-100, 100, size=(5, 7)).astype(np.int32)
    x = ug.tensor(a, device=device)
    for axis in (None, 0, 1, -1):
        got = f(x, axis=axis)
        # the accumulator dtype of integer sums is not part of the contract; values are
        close(got, ref(a, axis=axis), check_dtype=(name != "sum"))
        assert np.dtype(got.dtype).kind == "i"


def test_mean_int(device, close, require_dtype):
    require_dtype(np.float64)  # numpy: mean of ints is float64
    a = RNG.integers(-100, 100, size=(5, 7)).astype(np.int32)
    got = ug.tensor(a, device=device).mean(axis=0)
    assert np.dtype(got.dtype).kind == "f"
    close(got, a.mean(axis=0), rtol=1e-6, atol=1e-5, check_dtype=False)


def test_sum_bool_counts(device, close, require_dtype):
    require_dtype(np.int64)  # numpy: bool sums are int64
    a = rand((6, 5))
    x = ug.tensor(a, device=device)
    got = (x > 0).sum()
    close(got, (a > 0).sum(), check_dtype=False)
    got1 = (x > 0).sum(axis=1)
    close(got1, (a > 0).sum(axis=1), check_dtype=False)


def test_max_min_with_ties_and_negatives(device, close):
    a = np.array([[-5.0, -5.0, -7.0], [-1.0, -3.0, -1.0], [-np.inf, -2.0, -np.inf]], np.float32)
    x = ug.tensor(a, device=device)
    close(x.max(axis=1), a.max(axis=1))
    close(x.min(axis=0), a.min(axis=0))
    close(x.max(), a.max())
    close(ug.tensor(np.full((4,), -np.inf, np.float32), device=device).max(), np.float32(-np.inf))


# --------------------------------------------------------------------------- empty tensors
def test_sum_empty(device, close):
    a = np.zeros((0, 3), np.float32)
    x = ug.tensor(a, device=device)
    close(x.sum(), np.float32(0))
    close(x.sum(axis=0), np.zeros(3, np.float32))
    close(x.sum(axis=1), np.zeros((0,), np.float32))
    close(x.sum(axis=0, keepdims=True), np.zeros((1, 3), np.float32))
    close(ug.zeros((0,), device=device).sum(), np.float32(0))


def test_max_empty_along_nonempty_axis_ok(device, close):
    x = ug.zeros((0, 3), device=device)
    close(x.max(axis=1), np.zeros((0,), np.float32))
    close(x.min(axis=-1, keepdims=True), np.zeros((0, 1), np.float32))


# --------------------------------------------------------------------------- precision / size
def test_long_float32_sum(device):
    a = RNG.uniform(0.0, 1.0, size=3_000_000).astype(np.float32)
    got = ug.tensor(a, device=device).sum()
    assert got.dtype == np.float32
    ref = a.astype(np.float64).sum()
    assert abs(float(got.item()) - ref) <= 1e-4 * abs(ref), (got.item(), ref)


def test_long_float32_mean(device):
    a = (RNG.uniform(0.0, 1.0, size=3_000_000) + 100.0).astype(np.float32)
    got = ug.tensor(a, device=device).mean()
    ref = a.astype(np.float64).mean()
    assert abs(float(got.item()) - ref) <= 1e-4 * abs(ref), (got.item(), ref)


def test_long_axis_sum(device):
    a = RNG.uniform(0.0, 1.0, size=(4, 300_000)).astype(np.float32)
    got = ug.tensor(a, device=device).sum(axis=1).numpy()
    np.testing.assert_allclose(got, a.astype(np.float64).sum(axis=1), rtol=1e-4)
    got0 = ug.tensor(a.T.copy(), device=device).sum(axis=0).numpy()
    np.testing.assert_allclose(got0, a.astype(np.float64).sum(axis=1), rtol=1e-4)


def test_large_max(device, close):
    a = rand((1_000_003,))
    close(ug.tensor(a, device=device).max(), a.max())
    close(ug.tensor(a, device=device).min(), a.min())


def test_float64_sum(device, close, require_dtype):
    require_dtype(np.float64)
    a = RNG.standard_normal((50, 70))
    x = ug.tensor(a, device=device)
    close(x.sum(axis=0), a.sum(axis=0), rtol=1e-10, atol=1e-12)
    close(x.mean(), a.mean(), rtol=1e-10, atol=1e-12)


def test_float16_sum(device, close, require_dtype):
    require_dtype(np.float16)
    a = RNG.uniform(-1, 1, (8, 64)).astype(np.float16)
    got = ug.tensor(a, device=device).sum(axis=1)
    assert got.dtype == np.float16
    close(got, a.astype(np.float32).sum(axis=1).astype(np.float16), rtol=2e-2, atol=2e-2)


# --------------------------------------------------------------------------- views + reductions
def test_reduce_on_views(device, close):
    a = rand((6, 8))
    x = ug.tensor(a, device=device)
    close(x.T.sum(axis=0), a.T.sum(axis=0), rtol=1e-5, atol=1e-6)
    close(x[::2].max(axis=1), a[::2].max(axis=1))
    close(x[:, 1:7:3].min(axis=0), a[:, 1:7:3].min(axis=0))
    close(x.reshape(4, 12).mean(axis=-1), a.reshape(4, 12).mean(axis=-1), rtol=1e-5, atol=1e-6)
    close(x[None, :, None].sum(axis=(0, 2)), a, rtol=1e-6)


def test_reduce_broadcast_view(device, close):
    a = rand((3, 1))
    x = ug.tensor(a, device=device)
    close(x.broadcast_to((3, 5)).sum(axis=1), np.broadcast_to(a, (3, 5)).sum(axis=1), rtol=1e-5)
    close(x.broadcast_to((4, 3, 5)).sum(), np.broadcast_to(a, (4, 3, 5)).sum(), rtol=1e-5)
    close(x.broadcast_to((4, 3, 5)).max(axis=(0, 2)), np.broadcast_to(a, (4, 3, 5)).max(axis=(0, 2)))


def test_reduce_of_computed_and_broadcast_back(device, close):
    a = rand((5, 7))
    x = ug.tensor(a, device=device)
    got = x - x.max(axis=-1, keepdims=True)
    close(got, a - a.max(axis=-1, keepdims=True))
    got = (x * x).sum(axis=0) / x.abs().sum(axis=0)
    close(got, (a * a).sum(axis=0) / np.abs(a).sum(axis=0), rtol=1e-5)
    got = x.sum(axis=1).sum()
    close(got, a.sum(axis=1).sum(), rtol=1e-5, atol=1e-5)
    got = x.exp().sum(axis=0).log()
    close(got, np.log(np.exp(a).sum(axis=0)), rtol=1e-5, atol=1e-6)


def test_reduce_then_elementwise_with_other_reduce(device, close):
    a = rand((4, 6))
    x = ug.tensor(a, device=device)
    got = x.sum(axis=0)[None, :] + x.max(axis=1)[:, None]
    close(got, a.sum(axis=0)[None, :] + a.max(axis=1)[:, None], rtol=1e-5, atol=1e-6)


def test_variance(device, close):
    a = rand((6, 32)) * 3 + 5
    x = ug.tensor(a, device=device)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1)
    close(var, a.var(axis=-1), rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------- softmax / log_softmax
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("shape", [(4, 10), (3, 5, 7)], ids=str)
def test_softmax(device, close, shape, axis):
    a = rand(shape) * 3
    x = ug.tensor(a, device=device)
    close(x.softmax(axis=axis), softmax(a, axis).astype(np.float32), rtol=1e-5, atol=1e-6)
    close(x.log_softmax(axis=axis), log_softmax(a, axis).astype(np.float32), rtol=1e-5, atol=1e-5)


def test_softmax_default_axis(device, close):
    a = rand((3, 6))
    x = ug.tensor(a, device=device)
    close(x.softmax(), softmax(a, -1).astype(np.float32), rtol=1e-5, atol=1e-6)
    close(x.log_softmax(), log_softmax(a, -1).astype(np.float32), rtol=1e-5, atol=1e-5)
    close(x.softmax(axis=-1).sum(axis=-1), np.ones(3, np.float32), rtol=1e-5)


def test_softmax_1d(device, close):
    a = rand((17,))
    close(ug.tensor(a, device=device).softmax(), softmax(a, -1).astype(np.float32), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_large_logits(device, close, axis):
    a = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -999.0], [1000.0, 1000.0, 1000.0]], np.float32)
    x = ug.tensor(a, device=device)
    sm = x.softmax(axis=axis).numpy()
    assert np.all(np.isfinite(sm))
    close(sm, softmax(a, axis).astype(np.float32), rtol=1e-5, atol=1e-6)
    ls = x.log_softmax(axis=axis).numpy()
    assert np.all(np.isfinite(ls))
    close(ls, log_softmax(a, axis).astype(np.float32), rtol=1e-5, atol=1e-5)


def test_log_softmax_very_negative_tail(device, close):
    # log_softmax must not be computed as log(softmax): log(0) would give -inf
    a = np.array([[0.0, -200.0, 50.0]], np.float32)
    x = ug.tensor(a, device=device)
    ls = x.log_softmax(axis=-1).numpy()
    assert np.all(np.isfinite(ls))
    close(ls, log_softmax(a, -1).astype(np.float32), rtol=1e-5, atol=1e-4)


def test_softmax_on_view_and_computed(device, close):
    a = rand((6, 4))
    x = ug.tensor(a, device=device)
    close(x.T.softmax(axis=-1), softmax(a.T, -1).astype(np.float32), rtol=1e-5, atol=1e-6)
    close((x * 2 + 1)[::2].log_softmax(axis=0), log_softmax((a * 2 + 1)[::2], 0).astype(np.float32),
          rtol=1e-5, atol=1e-5)


def test_softmax_float64(device, close, require_dtype):
    require_dtype(np.float64)
    a = RNG.standard_normal((4, 9)) * 10
    close(ug.tensor(a, device=device).softmax(axis=-1), softmax(a, -1), rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- compositions
def test_layernorm(device, close):
    a = rand((4, 7, 32)) * 2 + 3
    g, b = rand((32,)), rand((32,))
    x, gt, bt = (ug.tensor(v, device=device) for v in (a, g, b))
    eps = 1e-5
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=-1, keepdims=True)
    y = xc / (var + eps).sqrt() * gt + bt
    a64 = a.astype(np.float64)
    ref = (a64 - a64.mean(-1, keepdims=True)) / np.sqrt(a64.var(-1, keepdims=True) + eps) * g + b
    close(y, ref.astype(np.float32), rtol=1e-4, atol=1e-4)


def test_rmsnorm_with_pow(device, close):
    a = rand((3, 16))
    x = ug.tensor(a, device=device)
    y = x / ((x ** 2).mean(axis=-1, keepdims=True) + 1e-6).sqrt()
    a64 = a.astype(np.float64)
    ref = a64 / np.sqrt((a64 ** 2).mean(-1, keepdims=True) + 1e-6)
    close(y, ref.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_cross_entropy_like(device, close):
    logits = rand((8, 10)) * 4
    labels = RNG.integers(0, 10, size=8)
    onehot = np.eye(10, dtype=np.float32)[labels]
    lt, ot = ug.tensor(logits, device=device), ug.tensor(onehot, device=device)
    loss = -(lt.log_softmax(axis=-1) * ot).sum(axis=-1).mean()
    ref = -(log_softmax(logits, -1) * onehot).sum(-1).mean()
    close(loss, np.float32(ref), rtol=1e-5, atol=1e-5)


def test_multiple_reductions_same_input(device, close):
    a = rand((5, 6))
    x = ug.tensor(a, device=device)
    s, m, n, mu = x.sum(axis=0), x.max(axis=1), x.min(), x.mean(axis=(0, 1))
    ug.realize(s, m, n, mu)
    close(s, a.sum(axis=0), rtol=1e-5, atol=1e-6)
    close(m, a.max(axis=1))
    close(n, a.min())
    close(mu, a.mean(), rtol=1e-5, atol=1e-6)


def test_softmax_with_neg_inf_mask(device, close):
    a = np.array([[-np.inf, 0.0, 1.0], [2.0, -np.inf, -np.inf]], np.float32)
    x = ug.tensor(a, device=device)
    with np.errstate(invalid="ignore"):
        close(x.softmax(axis=-1), softmax(a, -1).astype(np.float32), rtol=1e-5, atol=1e-6)


def test_max_propagates_nan(device, close):
    a = np.array([[np.nan, 1.0], [0.5, 2.0]], np.float32)
    x = ug.tensor(a, device=device)
    close(x.max(), a.max())
    close(x.max(axis=1), a.max(axis=1))
    close(x.min(axis=0), a.min(axis=0))


def test_float16_sum_does_not_saturate(device, close, require_dtype):
    # a naive float16 accumulator gets stuck at 2048 (2048 + 1 rounds to 2048)
    require_dtype(np.float16)
    close(ug.tensor(np.ones(3000, np.float16), device=device).sum(), np.float16(3000), rtol=1e-3, atol=0)
    close(ug.tensor(np.ones((2, 5000), np.float16), device=device).mean(axis=1), np.ones(2, np.float16),
          rtol=1e-3, atol=0)
