"""The Array API standard's `linalg` extension: `ug_core.linalg`.

Built from ug ops (ug_core.array_api.linalg): matmul, matrix_transpose, tensordot, vecdot,
vector_norm, matrix_norm ('fro', 1, -1, inf, -inf), outer, trace, diagonal, cross, and
matrix_power for n >= 0. Host items running numpy.linalg (ug_core.array_api.linalg_host):
cholesky, det, eigh, eigvalsh, inv, matrix_rank, pinv, qr, slogdet, solve, svd, svdvals, and
matrix_norm's 2, -2, 'nuc'; under ug.grad each carries its derivative rule (docs/autodiff.md)."""

from .array_api.linalg import (diagonal, matmul, matrix_norm, matrix_transpose, outer, tensordot, trace, vecdot,
                               vector_norm)
from .array_api.linalg_host import (EighResult, QRResult, SlogdetResult, SVDResult, cholesky, cross, det, eigh,
                                    eigvalsh, inv, matrix_power, matrix_rank, pinv, qr, slogdet, solve, svd, svdvals)

__all__ = ["EighResult", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "cross", "det", "diagonal", "eigh",
           "eigvalsh", "inv", "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer",
           "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm"]

from .array_api import aliasing as _aliasing  # noqa: E402
_aliasing.apply(globals(), __all__)   # numpy's aliasing rule (diagonal and matrix_transpose are views)
