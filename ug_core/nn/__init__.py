"""ug.nn: neural-network functions (no layer classes)"""

from . import functional
from .attention import scaled_dot_product_attention
from .functional import *  # noqa: F403
from ..array_api.extras import allclose, isclose, lerp

__all__ = ["functional", "allclose", "isclose", "lerp"]
__all__ += functional.__all__

from ..array_api import aliasing as _aliasing  # noqa: E402
_aliasing.apply(globals(), ["allclose", "isclose", "lerp"])   # (functional's are wrapped there)
