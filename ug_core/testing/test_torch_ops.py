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
