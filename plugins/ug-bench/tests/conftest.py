"""The device conformance kit's `device` fixture (ug_core.testing.fixtures): the devices under test
are those named by ``--ug-device`` or $UG_TEST_DEVICES, else the usable ones that start."""
from ug_core.testing.fixtures import device, pytest_generate_tests  # noqa: F401
