"""Numerical accuracy on every device: long float32 sums of any length and layout, and the
composed activations (sigmoid, silu, gelu) where their results are tiny."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.oracles import gelu, sigmoid

EPS32 = float(np.finfo(np.float32).eps)


def relative_error(got, exact) -> float:
    got, exact = np.asarray(got, np.float64), np.asarray(exact, np.float64)
    return float(np.max(np.abs(got - exact) / np.abs(exact)))


# --- sums -------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [20_000_038, 16_777_259, 1_000_003, 65_537])
def test_long_float32_sum_is_accurate_for_any_length(device, n):
    # 20,000,038 = 2 * 10,000,019 and the primes have no divisor in 64..1024: they were summed in
    # one stage (relative error 1.7e-6 on cpu, 1.6e-1 on vulkan); now within 4 eps like numpy's
    x = np.random.default_rng(n).random(n, dtype=np.float32)
    got = ug.tensor(x, device=device).sum().numpy()
    assert relative_error(got, x.astype(np.float64).sum()) <= 4 * EPS32
    mean = ug.tensor(x, device=device).mean().numpy()
    assert relative_error(mean, x.astype(np.float64).mean()) <= 4 * EPS32


@pytest.mark.parametrize("shape, axis", [((32, 1 << 20), 1), ((1 << 20, 32), 0), ((17, 999_983), 1),
                                         ((3, 5, 200_003), (0, 2)), ((1_000_003, 3), 0)])
def test_long_float32_sum_is_accurate_for_any_layout(device, shape, axis):
    # long rows of many outer indices (one blocked loop each), strided columns (numpy's own
    # float32 sum over axis 0 of (1M, 32) is 3.5e-5 off: the ref device sums pairwise instead)
    x = np.random.default_rng(sum(shape)).random(shape, dtype=np.float32)
    got = ug.tensor(x, device=device).sum(axis=axis).numpy()
    assert relative_error(got, x.astype(np.float64).sum(axis=axis)) <= 4 * EPS32


@pytest.mark.parametrize("n", [16_777_259, 100_003])
def test_long_max_min_of_any_length(device, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    x[n - 7] = 9.5
    x[n - 3] = -9.5  # in the short rest that a length without a divisor leaves
    t = ug.tensor(x, device=device)
    assert t.max().item() == 9.5 and t.min().item() == -9.5


# --- activations -------------------------------------------------------------------------------

def _gelu_stable(x):
    u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)
    return x / (1.0 + np.exp(-2.0 * u))   # the same function, no cancellation in float64 either


def assert_close_with_subnormals(got, exact, rtol: float, subnormal_ulps: float) -> None:
    """Within rtol of exact, or (for results below the normal range) within a few subnormal ulps;
    the sign must be right, and a nonzero rounded result must not be 0."""
    got, exact = np.asarray(got, np.float64), np.asarray(exact, np.float64)
    rounded = exact.astype(np.float32).astype(np.float64)
    tol = np.maximum(rtol * np.abs(exact), subnormal_ulps * 2.0 ** -149)
    bad = (np.abs(got - exact) > tol) | ((rounded != 0) & (got == 0)) | (np.signbit(got) != np.signbit(exact))
    bad &= ~(np.isnan(got) & np.isnan(exact))
    if bad.any():
        i = np.flatnonzero(bad)[:8]
        raise AssertionError(f"{int(bad.sum())} bad: got {got[i]}, exact {exact[i]}")


def test_sigmoid_is_accurate_where_it_is_tiny(device):
    x = np.concatenate([np.linspace(-103.9, -80, 4001), np.linspace(-80, 80, 4001)]).astype(np.float32)
    got = ug.tensor(x, device=device).sigmoid().numpy()
    # 1 / (1 + exp(100)) was 1 / inf = 0; now exp(x) / (1 + exp(x)): subnormal results are right
    assert_close_with_subnormals(got, sigmoid(x.astype(np.float64)), 4 * EPS32, 1)
    assert (got[x > -103] > 0).all()


def test_silu_is_accurate_where_it_is_tiny(device):
    x = np.concatenate([np.linspace(-105, -80, 4001), np.linspace(-80, 80, 4001)]).astype(np.float32)
    got = ug.tensor(x, device=device).silu().numpy()
    x64 = x.astype(np.float64)
    assert_close_with_subnormals(got, x64 * sigmoid(x64), 8 * EPS32, 1)
    assert (got[(x > -100) & (x < 0)] < 0).all()


def test_gelu_negative_tail_does_not_cancel(device):
    x = np.linspace(-10.1, -5, 2001).astype(np.float32)
    got = ug.tensor(x, device=device).gelu().numpy()
    # 0.5 x (1 + tanh(u)) cancelled to -0 for x < -5; x sigmoid(2u) keeps the value. (u, about
    # -40 at the end, is rounded to float32 first: exp turns that into up to ~1.2e-5 relative, the
    # function's own condition, whatever the formula; the rtol below)
    exact = _gelu_stable(x.astype(np.float64))
    assert (got < 0).all()
    assert_close_with_subnormals(got, exact, 5e-5, 1)
    y = np.linspace(-5, 5, 1001).astype(np.float32)
    assert_close_with_subnormals(ug.tensor(y, device=device).gelu().numpy(), gelu(y.astype(np.float64)), 1e-5, 1)


