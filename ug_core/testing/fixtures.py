"""Fixtures of ug's device conformance kit, for the kit's tests and any others that want them.

A conftest.py takes them with ``from ug_core.testing.fixtures import *`` (the kit's own
``ug_core/testing/conftest.py`` and the repository's ``tests/conftest.py`` do).

Fixtures
--------
device        -- the name of the device under test. A test that takes it runs once per device
                 under test: the ``--ug-device NAME`` options (repeatable, or comma-separated),
                 else ``$UG_TEST_DEVICES`` (comma-separated), else every usable device that
                 starts (``ug.devices(initialize=True)``). Take it only to run something on it.
rng           -- a numpy Generator of the test's own, seeded from its id (module, name and
                 parameters): a test's data do not depend on which tests ran before it, and
                 are the same for every run of it (the device is part of the id). Autouse:
                 `ug_core.testing.data` (``RNG``, ``rand``) draws from it, for module helpers.
require_dtype -- require_dtype(np.float64): skip the test if the device under test does not
                 support that dtype (creating a tensor of it raises TypeError).
close         -- close(got, expected, rtol=None, atol=None, check_dtype=True): compare a ug
                 tensor (or ndarray) with a numpy oracle, checking shape and dtype, with
                 tolerances chosen from the dtype (`TOLERANCES`).
threads_state -- autouse: ug_core.graph.threads restored after each test (a test using threads
                 must not leave later ones without in-place writes).
tier_mode     -- autouse, per session: the tier kernels run on (ug_core.tiers.set_mode): the
                 ``--ug-tier`` option, else ``$UG_TEST_TIER``, else "1", compiled before the
                 first run, so that the kit tests the backends' code (under "auto", most of the
                 kit's kernels, run once each, would only ever run on numpy). ``--ug-tier 0``
                 checks tier 0, the numpy evaluation of the kernel IR on the device's buffers
                 (on a device without host memory it is tier 1).
compile_cache -- the runtime's in-memory compile cache (ug_core.runtime.compile_cache), emptied
                 before and after the test, for tests that count its hits and misses.

The hypothesis profile "ug" (40 examples, no deadline) is loaded on import;
``UG_HYPOTHESIS_PROFILE=ug-thorough`` runs 400 examples per property instead.
"""
from __future__ import annotations

import os
import zlib
from typing import Any

import numpy as np
import pytest

import ug_core as ug
from ug_core import runtime, tiers
from ug_core.plugins import registry
from ug_core.testing import data

__all__ = ["close", "compile_cache", "device", "require_dtype", "rng", "pytest_generate_tests", "TOLERANCES",
           "assert_close", "devices_under_test", "seed_of", "threads_state", "tier_mode"]

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is a test extra (pip install ug-core[test]); only the property tests need it
    pass
else:
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


_DEVICES = pytest.StashKey[list]()


def devices_under_test(config: pytest.Config) -> list[str]:
    """The device names the `device` fixture runs over (see the module doc); worked out once per
    session. A named device that is unknown or does not start ends the run (a usage error) saying why."""
    names = config.stash.get(_DEVICES, None)
    if names is not None:
        return names
    try:
        options = config.getoption("ug_device")
    except ValueError:  # the plugin (ug_core.testing.plugin) is not loaded: no --ug-device
        options = []
    names = [n.strip() for opt in options or [] for n in opt.split(",") if n.strip()]
    source = "--ug-device"
    if not names:
        names = [n.strip() for n in os.environ.get("UG_TEST_DEVICES", "").split(",") if n.strip()]
        source = "UG_TEST_DEVICES"
    if names:
        for name in names:
            try:
                registry.get(name)  # starts it: an unknown or broken device is said here, not in every test
            except Exception as e:
                raise pytest.UsageError(f"{source}: device {name!r} cannot be tested: {e}") from e
        names = list(dict.fromkeys(names))
    else:
        names = list(ug.devices(initialize=True))  # the devices that really start, not only pass their probe
    config.stash[_DEVICES] = names
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device" in metafunc.fixturenames:
        names = devices_under_test(metafunc.config)
        metafunc.parametrize("device", names, ids=names, indirect=True, scope="session")


@pytest.fixture(scope="session")
def device(request):
    """The device under test (parametrized by pytest_generate_tests)."""
    return request.param


def seed_of(node: pytest.Item) -> int:
    """A stable 32-bit seed for a test: crc32 of its module's name and its name with parameters
    (not its path, so that the kit seeds the same wherever it is installed)."""
    module = getattr(node, "module", None)
    key = f"{module.__name__ if module else node.path.name}::{node.nodeid.split('::', 1)[-1]}"
    return zlib.crc32(key.encode())


@pytest.fixture(autouse=True)
def rng(request) -> np.random.Generator:
    """This test's own generator, seeded from its id (`seed_of`); `data.RNG` draws from it too.
    Autouse, so that no helper drawing from `data.RNG` ever gets another test's generator."""
    generator = np.random.default_rng(seed_of(request.node))
    data.RNG.use(generator)
    return generator


def supports(device: str, *dtypes: Any) -> bool:
    """Whether `device` holds all of `dtypes` (for the part of a test that needs one)."""
    have = registry.get(device).dtypes
    return all(np.dtype(dt) in have for dt in dtypes)


def shares_host_memory(device: str) -> bool:
    """Whether `device` runs kernels on host memory without a copy (Device.wrap_host): asarray
    of a numpy array then shares it, and DLPack exports lend the tensor's own memory."""
    return registry.get(device).wrap_host(np.zeros(4, np.float32)) is not None


@pytest.fixture(scope="session", autouse=True)
def tier_mode(request) -> Any:
    """The tier mode of the session (see the module doc); the mode before it afterwards."""
    try:
        value = request.config.getoption("ug_tier")
    except ValueError:  # the plugin is not loaded: no --ug-tier
        value = None
    value = value or os.environ.get("UG_TEST_TIER") or "1"
    if value not in tiers.MODES:
        raise pytest.UsageError(f"UG_TEST_TIER={value!r}: expected one of {', '.join(tiers.MODES)}")
    with tiers.forced(value):
        yield value


@pytest.fixture
def compile_cache():
    """The runtime's compile cache, empty when the test starts, emptied again after it."""
    runtime.compile_cache.clear()
    yield runtime.compile_cache
    runtime.compile_cache.clear()


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
    np.dtype(np.complex64): (1e-5, 1e-6),     # (each part's, as its float dtype's)
    np.dtype(np.complex128): (1e-10, 1e-12),
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
    wide = np.complex128 if "c" in (expected.dtype.kind, arr.dtype.kind) else np.float64
    np.testing.assert_allclose(
        arr.astype(wide),
        expected.astype(wide),
        rtol=d_rtol if rtol is None else rtol,
        atol=d_atol if atol is None else atol,
        equal_nan=True,
    )


@pytest.fixture(scope="session")
def close():
    return assert_close


@pytest.fixture(autouse=True)
def threads_state():
    """ug_core.graph.threads as it was before each test: once a second thread has written or
    realized tensors, writes stop going in place for the rest of the process (see there), which
    a test that uses threads must not pass on to the tests after it (kernel and buffer counts)."""
    from ug_core import graph
    saved = (graph.threads.first, graph.threads.several)
    yield
    graph.threads.first, graph.threads.several = saved
