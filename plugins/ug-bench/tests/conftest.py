"""The `device` fixture of the core suite (tests/conftest.py), which this directory does not see:
the devices under test are $UG_TEST_DEVICES (comma-separated) or else the usable ones that start."""
import os

import pytest

import ug_core as ug


def _devices_under_test() -> list[str]:
    names = [d.strip() for d in os.environ.get("UG_TEST_DEVICES", "").split(",") if d.strip()]
    return names or list(ug.devices(initialize=True))


@pytest.fixture(params=_devices_under_test(), scope="session")
def device(request):
    return request.param
