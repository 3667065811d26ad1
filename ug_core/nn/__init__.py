"""ug.nn: neural-network functions (no layer classes)"""

from ..einsum import einsum
from . import conv as _conv
from .conv import *  # noqa: F403  (convolutions, pooling, interpolate: conv.__all__)

__all__ = ["einsum"]
__all__ += _conv.__all__

from ..array_api import aliasing as _aliasing  # noqa: E402
_aliasing.apply(globals(), __all__)   # numpy's aliasing rule: every function here returns a new value
