"""Fixtures for the repository's tests: those of the device conformance kit (ug_core.testing.fixtures).

The device-parametrized suite is the kit, ug_core/testing (``python -m pytest --pyargs
ug_core.testing``, see CONTRIBUTING.md). The tests here check what needs no device (the
lowering in the loop IR interpreter, the scheduler's decisions, plugin loading, the caches, the
CLI) and build their graphs on the built-in ``ref`` device; a test here takes the ``device``
fixture only when it runs something on every device and cannot live in the installed kit
(test_readme.py reads the repository's README).

Fixtures: ``rng`` (the test's own generator, seeded from its id; ug_core.testing.data draws from
it), ``close``, ``device``, ``require_dtype``, ``compile_cache``; see ug_core.testing.fixtures.
"""
from ug_core.testing.fixtures import (  # noqa: F401
    close, compile_cache, device, pytest_generate_tests, require_dtype, rng, threads_state, tier_mode)
