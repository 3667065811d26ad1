"""Shared fixtures for the device-parametrized ug test suite.

Every test takes the ``device`` fixture and creates its tensors with
``device=device``; a backend plugin reuses the whole suite with e.g.::

    UG_TEST_DEVICES=cpu python -m pytest tests/

Fixtures
--------
device        -- the device under test (from $UG_TEST_DEVICES or ug.devices()).
require_dtype -- require_dtype(np.float64): skip the test if the device under
                 test does not support that dtype (it raises TypeError).
close         -- close(got, expected, rtol=None, atol=None, check_dtype=True):
                 compare a ug tensor (or ndarray) with a numpy oracle, checking
                 shape and dtype, with tolerances chosen from the dtype.
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import ug_core as ug

settings.register_profile(
    "ug",
    deadline=None,
    max_examples=40,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.register_profile(
    "ug-thorough",
    parent=settings.get_profile("ug"),
    max_examples=400,
)
settings.load_profile(os.environ.get("UG_HYPOTHESIS_PROFILE", "ug"))


def _devices_under_test():
    env = os.environ.get("UG_TEST_DEVICES")
    if env:
        return [d.strip() for d in env.split(",") if d.strip()]
    return list(ug.devices(initialize=True))  # the devices that really start, not only pass their probe


DEVICES = _devices_under_test()


@pytest.fixture(params=DEVICES, scope="session")
def device(request):
    return request.param


@pytest.fixture(scope="session")
def require_dtype(device):
    """Return a function that skips the current test when `device` lacks a dtype."""

    def _require(*dtypes):
        for dt in dtypes:
            dt = np.dtype(dt)
            try:
                ug.tensor(np.zeros(1, dtype=dt), device=device)
            except TypeError as e:  # the documented "unsupported dtype" error
                pytest.skip(f"device {device!r} does not support {dt}: {e}")

    return _require


# default (rtol, atol) per result dtype
TOLERANCES = {
    np.dtype(np.float16): (2e-3, 2e-3),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float64): (1e-10, 1e-12),
}


def assert_close(got, expected, rtol=None, atol=None, check_dtype=True):
    expected = np.asarray(expected)
    if isinstance(got, np.ndarray):
        arr = got
    else:
        assert tuple(got.shape) == expected.shape, f"shape {got.shape} != expected {expected.shape}"
        if check_dtype:
            assert got.dtype == expected.dtype, f"dtype {got.dtype} != expected {expected.dtype}"
        arr = got.numpy()
        assert isinstance(arr, np.ndarray), f".numpy() returned {type(arr)}"
    assert arr.shape == expected.shape, f"numpy() shape {arr.shape} != expected {expected.shape}"
    if check_dtype:
        assert arr.dtype == expected.dtype, f"numpy() dtype {arr.dtype} != expected {expected.dtype}"
    if expected.dtype.kind in "biu" and arr.dtype.kind in "biu":
        np.testing.assert_array_equal(arr, expected)
        return
    d_rtol, d_atol = TOLERANCES.get(expected.dtype, (1e-5, 1e-6))
    np.testing.assert_allclose(
        arr.astype(np.float64),
        expected.astype(np.float64),
        rtol=d_rtol if rtol is None else rtol,
        atol=d_atol if atol is None else atol,
        equal_nan=True,
    )


@pytest.fixture(scope="session")
def close():
    return assert_close
