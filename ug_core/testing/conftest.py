"""The kit's fixtures, from ug_core.testing.fixtures (the --ug-device option is ug_core.testing.plugin's)."""
from ug_core.testing.fixtures import close, device, pytest_generate_tests, require_dtype, rng  # noqa: F401
