"""The pytest plugin of ug's device conformance kit: the ``--ug-device`` option.

Registered through the ``pytest11`` entry point of ug-core (so it is there in every pytest run
where ug-core is installed), and light on purpose: it adds the option and, when the option is
given, starts the devices named before collecting (no backend is loaded otherwise). The
fixtures (``device``, ``rng``, ``close``, ``require_dtype``, ``tier_mode``) live in `ug_core.testing.fixtures`
and are seen only by the tests whose conftest imports them (the kit's own, the repository's
``tests/``), never by other projects' tests.

With plugin autoloading off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), load it by hand:
``python -m pytest -p ug_core.testing.plugin --pyargs ug_core.testing --ug-device NAME``,
or name the devices in ``$UG_TEST_DEVICES`` instead.
"""
from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ug", "ug device conformance kit (python -m pytest --pyargs ug_core.testing)")
    group.addoption(
        "--ug-device", action="append", default=[], metavar="NAME", dest="ug_device",
        help="device to run ug's device tests on (repeatable, or comma-separated); "
             "default: $UG_TEST_DEVICES, else every usable device that starts")
    group.addoption(
        "--ug-tier", default=None, choices=("0", "1", "auto"), dest="ug_tier",
        help="tier the kit's kernels run on (ug_core.tiers): 1 compiled before the first run (the default), "
             "0 the numpy evaluation of the kernel IR, never compiled, auto as users get it; "
             "default: $UG_TEST_TIER, else 1")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes several seconds per device (deselect with -m 'not slow')")


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    if session.config.getoption("ug_device"):
        # the devices named are started now: an unknown one, or one that fails to start, ends the
        # run here with the reason (a usage error), not in every module that takes `device`
        from ug_core.testing.fixtures import devices_under_test

        devices_under_test(session.config)
