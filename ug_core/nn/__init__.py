"""ug.nn: neural-network functions (no layer classes)"""

from . import conv as _conv, conv_transpose as _conv_transpose, interpolation as _interpolation
from . import pool as _pool
from . import functional
from .attention import scaled_dot_product_attention
from .conv import *  # noqa: F403  (convolutions, unfold)
from .conv_transpose import *  # noqa: F403
from .interpolation import *  # noqa: F403
from .pool import *  # noqa: F403
from .dropout import dropout
from .functional import *  # noqa: F403
from ..array_api.extras import allclose, isclose, lerp
from ..einsum import einsum

__all__ = ["functional", "allclose", "dropout", "einsum", "isclose", "lerp", "scaled_dot_product_attention"]
__all__ += functional.__all__
_spatial = sorted(_conv.__all__ + _conv_transpose.__all__ + _pool.__all__ + _interpolation.__all__)
__all__ += _spatial

from ..array_api import aliasing as _aliasing  # noqa: E402
# numpy's aliasing rule: every function here returns a new value (functional's are wrapped there)
_aliasing.apply(globals(), ["allclose", "einsum", "isclose", "lerp"] + _spatial)
