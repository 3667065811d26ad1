"""torch's ops that tinygrad's op tests use, on every device, against numpy references:
logcumsumexp, unfold / Tensor.unfold, max_unpool2d, pad(mode='wrap'), integer linspace, the
bicubic and area interpolations, adaptive max pooling's indices; and the gradients of relu6 /
hardtanh at their bounds and of acosh / atanh at and outside their domain's edge (torch's)."""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.data import rand


# --- logcumsumexp ----------------------------------------------------------------------------------


def logcumsumexp_ref(x, axis):
    """float64 log(cumsum(exp(x))) through a running logaddexp (numpy's, exact enough)."""
    return np.logaddexp.accumulate(x.astype(np.float64), axis=axis)


@pytest.mark.parametrize("shape, axis", [((45, 65), 0), ((45, 65), 1), ((6, 6, 6), 1), ((3, 200), -1), ((1100,), 0)],
                         ids=str)
def test_logcumsumexp(device, shape, axis, rng):
    x = (rand(shape) * 6).astype(np.float32)
    got = ug.logcumsumexp(ug.tensor(x, device=device), axis=axis)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got.numpy(), logcumsumexp_ref(x, axis), rtol=2e-6, atol=2e-6)


def test_logcumsumexp_is_stable(device):
    x = np.array([0.0, 100.0, -200.0, 300.0, -np.inf, 300.0], np.float32)
    got = ug.logcumsumexp(ug.tensor(x, device=device)).numpy()
    want = np.array([0.0, 100.0, 100.0, 300.0, 300.0, 300.0 + np.log(2.0)], np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-7)
    x = np.array([-np.inf, -np.inf, 1.0, np.inf], np.float32)   # -inf adds nothing; inf stays
    np.testing.assert_array_equal(ug.logcumsumexp(ug.tensor(x, device=device)).numpy(), [-np.inf, -np.inf, 1.0, np.inf])
    np.testing.assert_array_equal(ug.logcumsumexp(ug.tensor(np.float32(2.5), device=device)).numpy(), np.float32(2.5))


def test_logcumsumexp_gradient(device, require_dtype, rng):
    require_dtype(np.float64)
    from ug_core.testing.test_autodiff import check_grad
    for shape, axis in (((3, 7), 1), ((40, 2), 0)):   # a direct line and a blocked one
        check_grad(device, rng, lambda x: ug.logcumsumexp(x, axis=axis), rng.standard_normal(shape) * 2)


def test_logcumsumexp_errors(device):
    with pytest.raises(ValueError, match="axis is required"):
        ug.logcumsumexp(ug.tensor(np.zeros((2, 3), np.float32), device=device))
    with pytest.raises(ValueError, match="out of range"):
        ug.logcumsumexp(ug.tensor(np.float32(1.0), device=device), axis=1)


# --- derivatives at the edges (torch's) -------------------------------------------------------------


def _grad_of_sum(fn, x, device):
    return ug.grad(lambda t: fn(t).sum())(ug.tensor(x, device=device)).numpy()


def test_hardtanh_and_relu6_derivative_is_zero_at_the_bounds(device):
    x = np.array([-2.0, -1.0, -0.5, 0.0, 1.0, 2.0, np.nan], np.float32)
    np.testing.assert_array_equal(_grad_of_sum(ug.nn.hardtanh, x, device), [0, 0, 1, 1, 0, 0, 1])
    x = np.array([-1.0, 0.0, 3.0, 6.0, 7.0], np.float32)
    np.testing.assert_array_equal(_grad_of_sum(ug.nn.relu6, x, device), [0, 0, 1, 0, 0])
    # (clip keeps its own rule: 1 at the bounds)
    np.testing.assert_array_equal(_grad_of_sum(lambda t: ug.clip(t, 0.0, 6.0), x, device), [0, 1, 1, 1, 0])


def test_acosh_and_atanh_derivatives_follow_the_formula_outside_the_domain(device):
    x = np.array([-300.0, -2.0, -1.0, 0.5, 1.0, 2.0, 1e30], np.float32)
    with np.errstate(all="ignore"):
        want = (1 / np.sqrt(np.abs(x).astype(np.float64) - 1) / np.sqrt(np.abs(x).astype(np.float64) + 1))
    np.testing.assert_allclose(_grad_of_sum(ug.acosh, x, device), want.astype(np.float32), rtol=1e-6)
    x = np.array([-300.0, -1.0, -0.5, 0.0, 0.5, 1.0, 300.0], np.float32)
    with np.errstate(all="ignore"):
        want = 1 / ((1 - x.astype(np.float64)) * (1 + x.astype(np.float64)))
    np.testing.assert_allclose(_grad_of_sum(ug.atanh, x, device), want.astype(np.float32), rtol=1e-6)


def test_acosh_and_atanh_gradient_inside_the_domain(device, require_dtype, rng):
    require_dtype(np.float64)
    from ug_core.testing.test_autodiff import check_grad
    check_grad(device, rng, ug.acosh, rng.uniform(1.1, 30.0, 12))
    check_grad(device, rng, ug.atanh, rng.uniform(-0.95, 0.95, 12))


def test_sdpa_grouped_query_attention(device, rng):
    q, k, v = rand((2, 6, 5, 4)), rand((2, 2, 5, 4)), rand((2, 2, 5, 3))
    got = ug.nn.scaled_dot_product_attention(*(ug.tensor(a, device=device) for a in (q, k, v)), enable_gqa=True)
    # the reference: every key / value head repeated for its 3 query heads
    kr, vr = np.repeat(k, 3, axis=1).astype(np.float64), np.repeat(v, 3, axis=1).astype(np.float64)
    s = q.astype(np.float64) @ kr.swapaxes(-1, -2) / 2.0
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ vr
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="multiple"):
        ug.nn.scaled_dot_product_attention(ug.tensor(rand((2, 5, 5, 4)), device=device), ug.tensor(k, device=device),
                                           ug.tensor(v, device=device), enable_gqa=True)
