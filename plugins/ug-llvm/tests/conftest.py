"""The backend's own tests check its compiled code: kernels compile before their first run (the
kit's `tier_mode` fixture, tier "1"; under the default "auto", ug_core.tiers would run a new
kernel on numpy first)."""
from ug_core.testing.fixtures import tier_mode  # noqa: F401
