"""ug as an Array API standard (2024.12) namespace: the functions, grouped as the standard
groups them, one module per group. `ug_core` re-exports them; `Tensor.__array_namespace__()`
returns the `ug_core` module (see info.namespace)."""

import math

from . import (creation, data_types, elementwise, extras, indexing, manipulation, numpy_names, searching, sets, sorting,
               statistical, transcendental, utility)
from .creation import *  # noqa: F403
from .data_types import *  # noqa: F403
from .elementwise import *  # noqa: F403
from .extras import *  # noqa: F403
from .indexing import *  # noqa: F403
from .info import API_VERSION, __array_namespace_info__
from .linalg import matmul, matrix_transpose, tensordot, vecdot
from .manipulation import *  # noqa: F403
from .numpy_names import *  # noqa: F403
from .searching import *  # noqa: F403
from .sets import *  # noqa: F403
from .sorting import *  # noqa: F403
from .statistical import *  # noqa: F403
from .transcendental import *  # noqa: F403
from .utility import *  # noqa: F403

e = math.e
inf = math.inf
nan = math.nan
pi = math.pi
newaxis = None

__array_api_version__ = API_VERSION

__all__ = [
    "__array_api_version__", "__array_namespace_info__", "e", "inf", "nan", "newaxis", "pi",
    "matmul", "matrix_transpose", "tensordot", "vecdot",   # the linalg extension's, in the main namespace too
]
# each group module lists its functions (`+=` of module lists: a form type checkers follow)
__all__ += creation.__all__
__all__ += data_types.__all__
__all__ += elementwise.__all__
__all__ += extras.__all__   # beyond the standard: erf, erfc, logsumexp, isclose, allclose, lerp, split
__all__ += indexing.__all__
__all__ += manipulation.__all__
__all__ += numpy_names.__all__   # numpy's names that libraries call on a namespace (transpose, lib)
__all__ += searching.__all__
__all__ += sets.__all__
__all__ += sorting.__all__
__all__ += statistical.__all__
__all__ += transcendental.__all__
__all__ += utility.__all__

# complex_math registers itself with _complex (the complex arguments of the functions above reach
# it there), and methods binds the Tensor's methods: both import the groups above, none imports them
from . import complex_math, methods  # noqa: E402,F401
