"""The kit's fixtures, from ug_core.testing.fixtures (the --ug-device option is ug_core.testing.plugin's),
and the ulp table in the run's summary."""
import sys

import pytest

from ug_core.testing.fixtures import (  # noqa: F401
    close, compile_cache, device, pytest_generate_tests, require_dtype, rng, threads_state, tier_mode)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    test_ulp = sys.modules.get("ug_core.testing.test_ulp")  # imported only when its tests were collected
    lines = test_ulp.ulp_table() if test_ulp else []
    if lines:
        terminalreporter.write_sep("-", "float32 transcendentals: largest errors (test_ulp)")
        for line in lines:
            terminalreporter.write_line(line)
