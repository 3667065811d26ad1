"""ug.nn: neural-network functions (no layer classes)"""

from . import conv as _conv
from . import functional
from .attention import scaled_dot_product_attention
from .conv import *  # noqa: F403  (convolutions, pooling, interpolate: conv.__all__)
from .dropout import dropout
from .functional import *  # noqa: F403
from ..array_api.extras import allclose, isclose, lerp
from ..einsum import einsum

__all__ = ["functional", "allclose", "dropout", "einsum", "isclose", "lerp", "scaled_dot_product_attention"]
__all__ += functional.__all__
__all__ += _conv.__all__

from ..array_api import aliasing as _aliasing  # noqa: E402
# numpy's aliasing rule: every function here returns a new value (functional's are wrapped there)
_aliasing.apply(globals(), ["allclose", "einsum", "isclose", "lerp"] + _conv.__all__)
