"""torch's scatter / scatter_reduce, logcumsumexp, unfold, max_unpool2d, circular padding and the
other ops tinygrad's tests asked for, against torch: values, and gradients through ug.vjp with a
random cotangent against torch.autograd (float64)."""

import numpy as np
import pytest

import ug_core as ug

torch = pytest.importorskip("torch")
F = torch.nn.functional

rng = np.random.default_rng(11)


def _vjp_check(ug_fn, torch_fn, floats, rtol=1e-7, atol=1e-9):
    ts = [torch.tensor(a, requires_grad=True) for a in floats]
    out = torch_fn(*ts)
    cotangent = rng.standard_normal(tuple(out.shape))
    want = torch.autograd.grad(out, ts, torch.tensor(cotangent), allow_unused=True)
    value, pullback = ug.vjp(ug_fn, *[ug.tensor(a) for a in floats])
    np.testing.assert_allclose(value.numpy(), out.detach().numpy(), rtol=1e-9, atol=1e-10)
    got = pullback(ug.tensor(cotangent))
    for i, (g, w) in enumerate(zip(got, want)):
        w = np.zeros_like(floats[i]) if w is None else w.numpy()
        np.testing.assert_allclose(g.numpy(), w, rtol=rtol, atol=atol, err_msg=f"input {i}")


# --- scatter / scatter_reduce -------------------------------------------------------------------


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False], ids=["self", "noself"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_reduce_matches_torch(reduce, include_self, dim):
    idx = rng.integers(0, 3, (3, 4, 5))
    src = rng.standard_normal((3, 4, 5))
    src[0, 0, 0] = 0.0   # a zero for prod's rule
    _vjp_check(lambda x, s: ug.scatter_reduce(x, dim, idx, s, reduce, include_self=include_self),
               lambda x, s: x.scatter_reduce(dim, torch.tensor(idx), s, reduce, include_self=include_self),
               [rng.standard_normal((4, 5, 6)), src])


@pytest.mark.parametrize("reduce", ["amax", "amin", "prod"])
def test_scatter_reduce_ties_and_zeros_match_torch(reduce):
    # ties between x and the values and among the values, zeros once and twice per slot
    x = np.array([2.0, 5.0, 1.0, 0.0, 3.0])
    idx = np.array([0, 0, 1, 2, 2, 3, 4, 4])
    src = np.array([2.0, 2.0, 5.0, 0.0, 4.0, 0.0, 0.0, 0.0])
    for include_self in (True, False):
        if not include_self and reduce != "prod":
            # torch also counts an x equal to the result among the ties when x takes no part (a
            # share of the gradient lost); ug does not: compared where x ties nothing
            x = x - 100.0 if reduce == "amax" else x + 100.0
        _vjp_check(lambda x, s: ug.scatter_reduce(x, 0, idx, s, reduce, include_self=include_self),
                   lambda x, s: x.scatter_reduce(0, torch.tensor(idx), s, reduce, include_self=include_self),
                   [x, src])


def test_integer_scatter_reduce_mean_rounds_down_as_torch():
    x = np.array([5, -5, 7, 0])
    idx = np.array([0, 0, 1, 1, 3])
    src = np.array([2, -8, 3, 4, -3])
    for include_self in (True, False):
        want = torch.tensor(x).scatter_reduce(0, torch.tensor(idx), torch.tensor(src), "mean", include_self=include_self)
        got = ug.scatter_reduce(ug.tensor(x), 0, idx, ug.tensor(src), "mean", include_self=include_self)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_scatter_matches_torch(dim):
    x = rng.standard_normal((5, 5, 6))
    # distinct targets along dim (a permutation's first 3), so torch's unspecified order of
    # duplicate writes does not matter
    shape = [3, 4, 5]
    shape[dim] = x.shape[dim]
    idx = np.take(np.argsort(rng.random(shape), axis=dim), np.arange(3), axis=dim)
    src = rng.standard_normal(idx.shape)
    _vjp_check(lambda x, s: ug.scatter(x, dim, idx, s), lambda x, s: x.scatter(dim, torch.tensor(idx), s), [x, src])
    big = rng.standard_normal((4, 6, 7))   # larger than the index: its leading block is read
    want = torch.tensor(x).scatter(dim, torch.tensor(idx), torch.tensor(big))
    np.testing.assert_array_equal(ug.scatter(ug.tensor(x), dim, idx, ug.tensor(big)).numpy(), want.numpy())
    for reduce in ("add", "multiply"):
        want = torch.tensor(x).scatter(dim, torch.tensor(idx), 1.5, reduce=reduce)
        np.testing.assert_allclose(ug.scatter(ug.tensor(x), dim, idx, 1.5, reduce=reduce).numpy(), want.numpy())


# --- logcumsumexp ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shape, axis", [((5, 9), 1), ((45, 3), 0), ((2, 3, 70), -1), ((1100,), 0)], ids=str)
def test_logcumsumexp_matches_torch(shape, axis):
    x = rng.standard_normal(shape) * 4
    _vjp_check(lambda t: ug.logcumsumexp(t, axis=axis), lambda t: torch.logcumsumexp(t, axis), [x], rtol=1e-9)
    x = np.array([0.0, 100.0, -1000.0, 50.0])   # torch's and ug's: stable
    _vjp_check(lambda t: ug.logcumsumexp(t), lambda t: torch.logcumsumexp(t, 0), [x])


# --- derivatives at the edges, grouped-query attention --------------------------------------------


@pytest.mark.parametrize("name", ["relu6", "hardtanh", "acosh", "atanh"])
def test_edge_derivatives_match_torch(name):
    x = np.array([-300.0, -6.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 6.0, 7.0, 300.0])
    ug_fn, torch_fn = {"relu6": (ug.nn.relu6, F.relu6), "hardtanh": (ug.nn.hardtanh, F.hardtanh),
                       "acosh": (ug.acosh, torch.acosh), "atanh": (ug.atanh, torch.atanh)}[name]
    t = torch.tensor(x, requires_grad=True)
    torch_fn(t).sum().backward()
    got = ug.grad(lambda a: ug_fn(a).sum())(ug.tensor(x)).numpy()
    np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-12)   # (NaN where both are NaN)


def test_sdpa_enable_gqa_matches_torch():
    q, k, v = rng.standard_normal((2, 6, 5, 4)), rng.standard_normal((2, 2, 5, 4)), rng.standard_normal((2, 2, 5, 3))
    _vjp_check(lambda q, k, v: ug.nn.scaled_dot_product_attention(q, k, v, enable_gqa=True, is_causal=True),
               lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True, is_causal=True), [q, k, v])


# --- unfold, max_unpool ---------------------------------------------------------------------------


@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(2, 3))],
                         ids=str)
def test_unfold_matches_torch(kw):
    _vjp_check(lambda x: ug.nn.unfold(x, **kw), lambda x: F.unfold(x, **kw), [rng.standard_normal((2, 3, 7, 8))])
    _vjp_check(lambda x: ug.nn.unfold(x, **kw), lambda x: F.unfold(x, **kw), [rng.standard_normal((3, 7, 8))])


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool_matches_torch(nd):
    pool, unpool = getattr(F, f"max_pool{nd}d"), getattr(F, f"max_unpool{nd}d")
    x = torch.tensor(rng.standard_normal((2, 3) + (7,) * nd))
    values, idx = pool(x, 3, stride=2, padding=1, return_indices=True)
    for output_size in (None, (8,) * nd):
        want_fn = lambda v: unpool(v, idx, 3, stride=2, padding=1, output_size=output_size)  # noqa: E731
        got_fn = lambda v: getattr(ug.nn, f"max_unpool{nd}d")(v, ug.tensor(idx.numpy()), 3, stride=2, padding=1,  # noqa: E731
                                                            output_size=output_size)
        _vjp_check(got_fn, want_fn, [values.numpy()])


# --- circular padding -------------------------------------------------------------------------------


@pytest.mark.parametrize("pad", [(0, 2, 3, 2), (1, 2, 3, 5)], ids=str)
def test_pad_wrap_matches_torch_circular(pad):
    widths = ((0, 0), (0, 0), (pad[2], pad[3]), (pad[0], pad[1]))
    _vjp_check(lambda x: ug.pad(x, widths, mode="wrap"), lambda x: F.pad(x, pad, mode="circular"),
               [rng.standard_normal((2, 1, 5, 6))])


# --- interpolate (bicubic, area), adaptive max pooling's indices -------------------------------------


@pytest.mark.parametrize("kw", [dict(size=(11, 5), mode="bicubic"), dict(size=(14, 18), mode="bicubic", align_corners=True),
                                dict(scale_factor=1.7, mode="bicubic"), dict(size=(3, 4), mode="area"),
                                dict(size=(10, 13), mode="area"), dict(scale_factor=0.5, mode="area")], ids=str)
def test_interpolate_matches_torch(kw):
    _vjp_check(lambda x: ug.nn.interpolate(x, **kw), lambda x: F.interpolate(x, **kw), [rng.standard_normal((2, 3, 7, 9))])


@pytest.mark.parametrize("nd, shape, size", [(1, (2, 3, 10), 3), (2, (2, 3, 7, 9), (3, 4)), (2, (3, 8, 8), (4, 2)),
                                             (3, (1, 2, 5, 6, 7), (2, 3, 4))], ids=str)
def test_adaptive_max_pool_indices_match_torch(nd, shape, size):
    x = rng.standard_normal(shape)
    want = getattr(F, f"adaptive_max_pool{nd}d")(torch.tensor(x), size, return_indices=True)
    got = getattr(ug.nn, f"adaptive_max_pool{nd}d")(ug.tensor(x), size, return_indices=True)
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    _vjp_check(lambda t: getattr(ug.nn, f"adaptive_max_pool{nd}d")(t, size, return_indices=True)[0],
               lambda t: getattr(F, f"adaptive_max_pool{nd}d")(t, size), [x])
