"""Numerical accuracy: the schedules that make long float32 sums accurate and keep the composed
activations one kernel (the kit's ug_core/testing/test_numerics.py measures the accuracy on each
device)."""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug


def test_long_sum_without_divisor_is_split_into_parallel_parts():
    x = ug.tensor(np.ones(16_777_259, np.float32), device="ref")
    kernels = ug.schedule(x.sum()).kernels
    assert len(kernels) == 3        # 1024 parts, the rest, the total
    assert kernels[0].outputs[0].shape[0] == 1024


@pytest.mark.parametrize("name", ["sigmoid", "silu", "gelu"])
def test_activations_stay_one_kernel(name):
    x = ug.tensor(np.ones((4, 8), np.float32), device="ref")
    assert len(ug.schedule(getattr(x, name)()).kernels) == 1
