"""ug.nn.functional against torch.nn.functional, over many parameter combinations, on the
default device (and erf / erfc against math.erf / math.erfc, in ulp)."""
import itertools
import math

import numpy as np
import pytest

import ug_core as ug
from ug_core.nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(1234)


def t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def check(got, want, rtol=2e-5, atol=2e-6):
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    got = got.numpy() if isinstance(got, ug.Tensor) else np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


def randn(*shape, dtype=np.float32, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


# --- activations ------------------------------------------------------------------------------

EDGES = np.array([0.0, -0.0, 1e-30, -1e-30, 25.0, -25.0, 100.0, -100.0, 1e4, -1e4], np.float32)
ACTIVATIONS = [
    ("relu", {}), ("relu6", {}), ("leaky_relu", {}), ("leaky_relu", {"negative_slope": 0.2}), ("elu", {}),
    ("elu", {"alpha": 0.5}), ("selu", {}), ("celu", {}), ("celu", {"alpha": 2.0}), ("gelu", {}),
    ("gelu", {"approximate": "tanh"}), ("silu", {}), ("mish", {}), ("softplus", {}),
    ("softplus", {"beta": 2.0, "threshold": 5.0}), ("softplus", {"beta": 0.5}), ("softsign", {}), ("hardswish", {}),
    ("hardsigmoid", {}), ("hardtanh", {}), ("hardtanh", {"min_val": -2.0, "max_val": 0.5}), ("logsigmoid", {}),
    ("sigmoid", {}), ("tanh", {}),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kwargs", ACTIVATIONS, ids=[f"{n}-{k}" for n, k in ACTIVATIONS])
def test_activation(name, kwargs, dtype):
    x = np.concatenate([randn(200, dtype=dtype, scale=4), EDGES.astype(dtype)])
    got = getattr(F, name)(ug.tensor(x), **kwargs)
    # (torch in float64: its float32 gelu is 1 + erf(x / sqrt 2), which cancels for x < -3)
    want = getattr(TF, name)(t(x).double(), **kwargs)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    check(got, want, rtol=tol, atol=tol * 1e-3)
    assert got.dtype == x.dtype


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax(name, dim):
    x = randn(4, 7, scale=5)
    check(getattr(F, name)(ug.tensor(x), dim), getattr(TF, name)(t(x), dim))


def test_glu():
    x = randn(3, 8, 4)
    for dim in (1, -1, 0) if x.shape[0] % 2 == 0 else (1, -1):
        check(F.glu(ug.tensor(x), dim), TF.glu(t(x), dim))
    with pytest.raises(ValueError, match="even"):
        F.glu(ug.tensor(x), 0)


# --- normalization, linear, embedding ---------------------------------------------------------

@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape,normalized", [((4, 10), (10,)), ((2, 3, 5), (3, 5)), ((2, 3, 8), (8,))])
def test_layer_norm(shape, normalized, affine):
    x = randn(*shape, scale=3) + 2
    w, b = (randn(*normalized), randn(*normalized)) if affine else (None, None)
    got = F.layer_norm(ug.tensor(x), normalized, None if w is None else ug.tensor(w), None if b is None else ug.tensor(b))
    want = TF.layer_norm(t(x), normalized, None if w is None else t(w), None if b is None else t(b))
    check(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("eps", [None, 1e-3])
def test_rms_norm(eps):
    x, w = randn(3, 4, 6), randn(6)
    check(F.rms_norm(ug.tensor(x), (6,), ug.tensor(w), eps=eps), TF.rms_norm(t(x), (6,), t(w), eps=eps), rtol=1e-4)


@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 4, 4)])
@pytest.mark.parametrize("training", [False, True])
def test_batch_norm(shape, training):
    x = randn(*shape, scale=2) + 1
    c = shape[1]
    rm, rv = randn(c), np.abs(randn(c)) + 0.5
    w, b = randn(c), randn(c)
    urm, urv = ug.tensor(rm.copy()), ug.tensor(rv.copy())
    trm, trv = t(rm.copy()), t(rv.copy())
    got = F.batch_norm(ug.tensor(x), urm, urv, ug.tensor(w), ug.tensor(b), training=training, momentum=0.3)
    want = TF.batch_norm(t(x), trm, trv, t(w), t(b), training=training, momentum=0.3)
    check(got, want, rtol=1e-4, atol=1e-5)
    check(urm, trm, rtol=1e-5)
    check(urv, trv, rtol=1e-5)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_group_norm(groups):
    x, w, b = randn(2, 4, 3, 3, scale=2), randn(4), randn(4)
    check(F.group_norm(ug.tensor(x), groups, ug.tensor(w), ug.tensor(b)), TF.group_norm(t(x), groups, t(w), t(b)),
          rtol=1e-4, atol=1e-5)
    check(F.group_norm(ug.tensor(x), groups), TF.group_norm(t(x), groups), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(5,), (3, 5), (2, 3, 5)])
def test_linear(shape, bias):
    x, w, b = randn(*shape), randn(4, 5), randn(4)
    check(F.linear(ug.tensor(x), ug.tensor(w), ug.tensor(b) if bias else None),
          TF.linear(t(x), t(w), t(b) if bias else None), rtol=1e-5, atol=1e-5)


def test_embedding():
    w = randn(10, 3)
    idx = RNG.integers(0, 10, (4, 5))
    check(F.embedding(ug.tensor(idx), ug.tensor(w)), TF.embedding(t(idx), t(w)))


@pytest.mark.parametrize("kw", [dict(padding_idx=2), dict(padding_idx=-1), dict(max_norm=1.0),
                                dict(max_norm=1.5, norm_type=1.0, padding_idx=0)])
def test_embedding_padding_idx_and_max_norm(kw):
    """padding_idx: no gradient to that row; max_norm: the rows read renormalized, in the weight too."""
    w = randn(10, 4, scale=2.0)
    idx = np.array([[1, 2, 2], [5, 0, 9]])
    m = randn(2, 3, 4)
    tw = t(w.copy()).requires_grad_(True)
    want = TF.embedding(t(idx), tw, **kw)
    (want * t(m)).sum().backward()
    grad = ug.grad(lambda uw: (F.embedding(ug.tensor(idx), uw, **kw) * ug.tensor(m)).sum())(ug.tensor(w))
    check(grad, tw.grad)
    uw = ug.tensor(w)
    check(F.embedding(ug.tensor(idx), uw, **kw), want)
    check(uw, tw)   # max_norm renormalized the rows read in place, as torch's


def test_softmin():
    x = randn(3, 5)
    check(F.softmin(ug.tensor(x), 1), TF.softmin(t(x), 1))
    check(F.softmin(ug.tensor(x), 0), TF.softmin(t(x), 0))


@pytest.mark.parametrize("num_classes", [-1, 7])
def test_one_hot(num_classes):
    idx = RNG.integers(0, 5, (3, 4))
    got = F.one_hot(ug.tensor(idx), num_classes)
    assert got.dtype == np.int64
    check(got, TF.one_hot(t(idx), num_classes))


# --- losses -----------------------------------------------------------------------------------

REDUCTIONS = ["none", "mean", "sum"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(6, 5), (3, 5, 4), (2, 5, 3, 2), (5,)])
@pytest.mark.parametrize("weighted,ignore,smoothing", list(itertools.product([False, True], [False, True], [0.0, 0.2])))
def test_cross_entropy_class_indices(shape, reduction, weighted, ignore, smoothing):
    if len(shape) == 1 and smoothing:
        return   # (torch 2's unbatched cross_entropy with label_smoothing fails: a shape error of its own)
    x = randn(*shape, scale=3)
    c = shape[1] if len(shape) > 1 else shape[0]
    tshape = (shape[0],) + shape[2:] if len(shape) > 1 else ()
    target = RNG.integers(0, c, tshape)
    if ignore and target.size > 1:
        target.reshape(-1)[::3] = -100
    w = np.abs(randn(c)) + 0.1 if weighted else None
    kw = dict(reduction=reduction, label_smoothing=smoothing)
    got = F.cross_entropy(ug.tensor(x), ug.tensor(target), None if w is None else ug.tensor(w), **kw)
    want = TF.cross_entropy(t(x), t(target), None if w is None else t(w), **kw)
    check(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(6, 5), (3, 5, 4)])
@pytest.mark.parametrize("weighted,smoothing", list(itertools.product([False, True], [0.0, 0.3])))
def test_cross_entropy_probabilities(shape, reduction, weighted, smoothing):
    x = randn(*shape, scale=3)
    p = TF.softmax(t(randn(*shape)), 1).numpy()
    w = np.abs(randn(shape[1])) + 0.1 if weighted else None
    kw = dict(reduction=reduction, label_smoothing=smoothing)
    got = F.cross_entropy(ug.tensor(x), ug.tensor(p), None if w is None else ug.tensor(w), **kw)
    want = TF.cross_entropy(t(x), t(p), None if w is None else t(w), **kw)
    check(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted,ignore", list(itertools.product([False, True], [False, True])))
@pytest.mark.parametrize("shape", [(6, 4), (2, 4, 3)])
def test_nll_loss(shape, reduction, weighted, ignore):
    logp = TF.log_softmax(t(randn(*shape)), 1).numpy()
    target = RNG.integers(0, shape[1], (shape[0],) + shape[2:])
    if ignore:
        target.reshape(-1)[1::2] = 2
    w = np.abs(randn(shape[1])) + 0.1 if weighted else None
    kw = dict(reduction=reduction, ignore_index=2 if ignore else -100)
    got = F.nll_loss(ug.tensor(logp), ug.tensor(target), None if w is None else ug.tensor(w), **kw)
    want = TF.nll_loss(t(logp), t(target), None if w is None else t(w), **kw)
    check(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(reduction, weighted):
    p = np.concatenate([RNG.uniform(0, 1, 30), [0.0, 1.0, 1e-30, 1 - 1e-7]]).astype(np.float32)
    y = RNG.uniform(0, 1, p.shape).astype(np.float32)
    w = RNG.uniform(0, 2, p.shape).astype(np.float32) if weighted else None
    got = F.binary_cross_entropy(ug.tensor(p), ug.tensor(y), None if w is None else ug.tensor(w), reduction=reduction)
    want = TF.binary_cross_entropy(t(p), t(y), None if w is None else t(w), reduction=reduction)
    check(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted,pos_weighted", list(itertools.product([False, True], [False, True])))
def test_binary_cross_entropy_with_logits(reduction, weighted, pos_weighted):
    x = np.concatenate([randn(4, 5, scale=5), [[200.0, -200.0, 0.0, 40.0, -40.0]]]).astype(np.float32)
    y = RNG.uniform(0, 1, x.shape).astype(np.float32)
    w = RNG.uniform(0, 2, x.shape).astype(np.float32) if weighted else None
    pw = RNG.uniform(0.5, 3, (5,)).astype(np.float32) if pos_weighted else None
    got = F.binary_cross_entropy_with_logits(ug.tensor(x), ug.tensor(y), None if w is None else ug.tensor(w),
                                             reduction=reduction, pos_weight=None if pw is None else ug.tensor(pw))
    want = TF.binary_cross_entropy_with_logits(t(x), t(y), None if w is None else t(w), reduction=reduction,
                                               pos_weight=None if pw is None else t(pw))
    check(got, want, rtol=1e-5, atol=1e-5)


POINTWISE = [("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {}), ("smooth_l1_loss", {"beta": 0.5}),
             ("smooth_l1_loss", {"beta": 0.0}), ("huber_loss", {}), ("huber_loss", {"delta": 2.0})]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,kwargs", POINTWISE, ids=[f"{n}-{k}" for n, k in POINTWISE])
def test_pointwise_losses(name, kwargs, reduction):
    x, y = randn(4, 6, scale=2), randn(4, 6, scale=2)
    check(getattr(F, name)(ug.tensor(x), ug.tensor(y), reduction=reduction, **kwargs),
          getattr(TF, name)(t(x), t(y), reduction=reduction, **kwargs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    x = TF.log_softmax(t(randn(4, 6)), 1).numpy()
    p = TF.softmax(t(randn(4, 6)), 1).numpy()
    p[0, :2] = 0.0
    target = np.log(p) if log_target else p
    check(F.kl_div(ug.tensor(x), ug.tensor(target), reduction=reduction, log_target=log_target),
          TF.kl_div(t(x), t(target), reduction=reduction, log_target=log_target), rtol=1e-5, atol=1e-6)


# --- attention --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4)), ((6, 8), (6, 8), (6, 3))])
@pytest.mark.parametrize("mask", ["none", "causal", "bool", "additive"])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_sdpa(shape, mask, scale):
    q, k, v = (randn(*s) for s in shape)
    L, S = shape[0][-2], shape[1][-2]
    kw = dict(scale=scale, is_causal=mask == "causal")
    um = tm = None
    if mask == "bool":
        m = RNG.uniform(0, 1, (L, S)) < 0.7
        m[:, 0] = True   # every query keeps a key (a row keeping none is NaN in both)
        um, tm = ug.tensor(m), t(m)
    elif mask == "additive":
        m = randn(L, S)
        um, tm = ug.tensor(m), t(m)
    got = F.scaled_dot_product_attention(ug.tensor(q), ug.tensor(k), ug.tensor(v), um, **kw)
    want = TF.scaled_dot_product_attention(t(q), t(k), t(v), tm, **kw)
    check(got, want, rtol=1e-4, atol=1e-5)


# --- cummax / cummin, split, the namespace functions --------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_cummax_cummin(name, dim, dtype):
    x = RNG.integers(0, 4, (5, 6)).astype(dtype)   # many ties
    if dtype == np.float32:
        x[2, 3] = np.nan
        x[1, 1] = np.nan
    got = getattr(F, name)(ug.tensor(x), dim)
    want = getattr(torch, name)(t(x), dim)
    check(got.values, want.values)
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())


@pytest.mark.parametrize("sizes", [2, 3, 7, [1, 4, 2], [7], [0, 7]])
def test_torch_split(sizes):
    x = randn(7, 3)
    got = ug.nn.split(ug.tensor(x), sizes)
    want = torch.split(t(x), sizes)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        check(g, w)


@pytest.mark.parametrize("args", [(3,), ([2, 5],), ([-3, 100],), (2, 1)])
def test_numpy_split(args):
    x = randn(6, 4)
    for ug_fn, np_fn in ((ug.split, np.split), (ug.array_split, np.array_split)):
        try:
            want = np_fn(x, *args)
        except ValueError:
            with pytest.raises(ValueError):
                ug_fn(ug.tensor(x), *args)
            continue
        got = ug_fn(ug.tensor(x), *args)
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w)
    assert [p.shape for p in ug.array_split(ug.tensor(x), 4)] == [(2, 4), (2, 4), (1, 4), (1, 4)]


def test_split_pieces_are_views():
    x = ug.tensor(np.arange(6.0))
    a, b = ug.split(x, 2)
    b[0] = 100.0
    assert x.numpy()[3] == 100.0
    c, _ = ug.nn.split(x, 3)
    c[1] = -1.0
    assert x.numpy()[1] == -1.0


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dim", [0, 1, (0, 1)])
def test_logsumexp(dim, keepdims):
    x = randn(4, 5, scale=30)
    x[0, :] = -np.inf
    x[1, 2] = np.inf
    check(ug.logsumexp(ug.tensor(x), dim, keepdims), torch.logsumexp(t(x), dim, keepdims), rtol=1e-6)


@pytest.mark.parametrize("weight", [0.0, 0.25, 0.5, 0.8, 1.0, "tensor"])
def test_lerp(weight):
    a, b = randn(20), randn(20)
    w = RNG.uniform(-0.5, 1.5, 20).astype(np.float32) if weight == "tensor" else weight
    got = ug.lerp(ug.tensor(a), ug.tensor(b), ug.tensor(w) if weight == "tensor" else w)
    want = torch.lerp(t(a), t(b), t(w) if weight == "tensor" else w)
    check(got, want, rtol=3e-7, atol=1e-7)   # (torch's kernel may fuse the multiply-add: 1 ulp)
    if weight in (0.0, 1.0):   # the ends exactly
        np.testing.assert_array_equal(got.numpy(), a if weight == 0.0 else b)


@pytest.mark.parametrize("equal_nan", [False, True])
@pytest.mark.parametrize("rtol,atol", [(1e-5, 1e-8), (1e-2, 0.0), (0.0, 0.1)])
def test_isclose(rtol, atol, equal_nan):
    a = np.array([1.0, 1.0 + 1e-6, 1.1, np.inf, -np.inf, np.inf, np.nan, np.nan, 0.0, 1e-9, 100.0])
    b = np.array([1.0, 1.0, 1.0, np.inf, np.inf, 1.0, np.nan, 1.0, 1e-9, 0.0, 100.5])
    got = ug.isclose(ug.tensor(a), ug.tensor(b), rtol=rtol, atol=atol, equal_nan=equal_nan)
    np.testing.assert_array_equal(got.numpy(), np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))
    assert bool(ug.allclose(ug.tensor(a), ug.tensor(b), rtol=rtol, atol=atol, equal_nan=equal_nan)) == \
        np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    ints = np.array([1, 2, 3])
    np.testing.assert_array_equal(ug.isclose(ug.tensor(ints), ug.tensor(ints + [0, 1, 0])).numpy(),
                                  np.isclose(ints, ints + [0, 1, 0]))


# --- erf / erfc, in ulp -----------------------------------------------------------------------

def ulp_error(got, exact, dtype):
    spacing = np.maximum(np.spacing(np.abs(exact).astype(dtype)).astype(np.float64),
                         np.finfo(dtype).smallest_subnormal)
    same = (got == exact) | (np.isnan(got) & np.isnan(exact))
    return np.where(same, 0.0, np.abs(got.astype(np.float64) - exact) / spacing)


def erf_points(dtype):
    tiny = np.finfo(dtype).tiny
    pts = np.concatenate([RNG.uniform(-1.3, 1.3, 20000), RNG.uniform(-6, 6, 20000), RNG.uniform(-30, 30, 5000),
                          np.geomspace(tiny, 30, 5000), [0.84375, 1.25, 1 / 0.35, 6, 10.0, 10.05, 26.5, 27.2]])
    pts = np.concatenate([pts, -pts]).astype(dtype)
    return pts, pts.astype(np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erf_erfc_ulp(dtype):
    pts, wide = erf_points(dtype)
    x = ug.tensor(pts)
    erf_ulp = ulp_error(ug.erf(x).numpy(), np.array([math.erf(v) for v in wide]), dtype)
    erfc_ulp = ulp_error(ug.erfc(x).numpy(), np.array([math.erfc(v) for v in wide]), dtype)
    assert erf_ulp.max() <= 1.5, (erf_ulp.max(), wide[erf_ulp.argmax()])
    assert erfc_ulp.max() <= 5, (erfc_ulp.max(), wide[erfc_ulp.argmax()])


def test_erf_specials_and_torch():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30], np.float32)
    e, c = ug.erf(ug.tensor(x)).numpy(), ug.erfc(ug.tensor(x)).numpy()
    np.testing.assert_array_equal(e, [0.0, -0.0, 1.0, -1.0, np.nan, 1.0, -1.0])
    assert np.signbit(e[1])
    np.testing.assert_array_equal(c, [1.0, 1.0, 0.0, 2.0, np.nan, 0.0, 2.0])
    y = randn(1000, scale=3)
    check(ug.erf(ug.tensor(y)), torch.erf(t(y)), rtol=2e-7, atol=1e-7)
    check(ug.erfc(ug.tensor(y)), torch.erfc(t(y)), rtol=1e-6, atol=0)
    assert ug.erf(ug.tensor(np.array([1, 2]))).dtype == np.float64   # ints promote as numpy's
    assert ug.erf(ug.tensor(np.array([0.5], np.float16))).dtype == np.float16


# --- argument errors --------------------------------------------------------------------------

def test_errors_name_the_fault():
    x = ug.tensor(randn(4, 5))
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(x, x, reduction="avg")
    with pytest.raises(ValueError, match="target"):
        F.mse_loss(x, ug.tensor(randn(5, 4)))
    with pytest.raises(TypeError, match="integers"):
        F.nll_loss(x, ug.tensor(randn(4)))
    with pytest.raises(ValueError, match=r"\(4,\)"):
        F.cross_entropy(x, ug.tensor(np.zeros(3, np.int64)))
    with pytest.raises(ValueError, match="normalized_shape"):
        F.layer_norm(x, (4,))
    with pytest.raises(ValueError, match="divide"):
        F.group_norm(ug.tensor(randn(2, 6, 3)), 4)
    with pytest.raises(ValueError, match="dropout_p"):
        F.scaled_dot_product_attention(x, x, x, dropout_p=0.1)
    with pytest.raises(ValueError, match="equal division"):
        ug.split(x, 3, axis=1)
    with pytest.raises(ValueError, match="sum to"):
        ug.nn.split(x, [1, 2])
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(x, approximate="fast")
