"""The rest of the Array API `linalg` extension: decompositions and solvers on the host.

ug has no dense linear algebra kernels, so these run numpy.linalg (LAPACK) on the host, on every
device, at the call: the input is computed and copied to the host then, and the results back
(one decomposition for all of a function's results: eigh, qr, svd, slogdet). So an error that
depends on the values (numpy's LinAlgError: cholesky of a matrix that is not positive
definite, inv or solve of a singular one, an SVD or eigh that does not converge) is raised at
the call, where the caller's `try` sees it (scikit-learn's `except LinAlgError`), as numpy
raises it. Inside ug.jit's trace the input has no value yet: there each function is a host item
of the schedule (ug.custom, one per result), and such an error is the same LinAlgError, raised
when the jitted call runs (each replay included).

`cross` and `matrix_power` with n >= 0 are compositions of ug ops (views, `stack`, matmul)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from .. import graph
from ..api import realize
from ..tensor import Tensor, _broadcast_shape, _normalize_axis, custom, matmul, tensor, tracing
from ._common import check_tensor
from .creation import eye
from .manipulation import stack


class EighResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor


class QRResult(NamedTuple):
    Q: Tensor
    R: Tensor


class SlogdetResult(NamedTuple):
    sign: Tensor
    logabsdet: Tensor


class SVDResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor


def _probe(x: Tensor, core_ndim: int) -> np.ndarray:
    """A stand-in of x with its core shape (the last core_ndim dims) and size-1 batch dims:
    identity matrices (every decomposition accepts them), or zeros for vectors and per-matrix
    scalars, to learn a result's shape and dtype cheaply."""
    core = x.shape[x.ndim - core_ndim:]
    base = np.eye(*core, dtype=x.dtype) if core_ndim == 2 else np.zeros(core, x.dtype)
    return np.broadcast_to(base, (1,) * (x.ndim - core_ndim) + core)


def _host(fn: Callable[..., Any], inputs: list[Tensor], cores: tuple[int, ...] = (), name: str = "") -> Tensor:
    """fn(*input arrays), one result (see _host_results)."""
    return _host_results(fn, inputs, cores, 0, name)[0]


def _host_results(fn: Callable[..., Any], inputs: list[Tensor], cores: tuple[int, ...], count: int,
                  name: str = "") -> list[Tensor]:
    """fn(*input arrays) as tensors on the inputs' device: its one result (count 0) or its first
    `count` results. Run now (numpy's errors raised here); inside a ug.jit trace, host items
    (_custom). `cores` says how many trailing dims of each input are its core (2: matrices, the
    default; 1: vectors; 0: one value per matrix)."""
    devices = {x.device for x in inputs}
    if len(devices) > 1:
        raise ValueError(f"{name or fn.__name__}: inputs are on different devices: {sorted(devices)}")
    if tracing() or graph.kept_sources.depth:
        # (and while ug.grad / ug.vjp run a function: a result computed now would be a
        # constant, its gradient silently 0; as a ug.custom item, differentiating it is
        # custom's TypeError, and a LinAlgError is raised when it is computed)
        return [_custom(fn, inputs, cores, None if count == 0 else i, name) for i in range(max(count, 1))]
    realize(*inputs)
    result = fn(*(x.numpy() for x in inputs))
    results = [result] if count == 0 else [result[i] for i in range(count)]
    return [tensor(np.asarray(r), device=inputs[0].device) for r in results]


def _custom(fn: Callable[..., Any], inputs: list[Tensor], cores: tuple[int, ...] = (), pick: int | None = None,
            name: str = "") -> Tensor:
    """fn(*input arrays) (its result `pick` if it returns several) as a ug.custom item (in a
    ug.jit trace). The result's shape is the inputs' broadcast batch shape and the core shape
    fn gives for probes."""
    cores = cores or (2,) * len(inputs)
    with np.errstate(all="ignore"):
        probe = fn(*(_probe(x, c) for x, c in zip(inputs, cores)))
    probe = np.asarray(probe if pick is None else probe[pick])
    batch_ndim = max(x.ndim - c for x, c in zip(inputs, cores))
    batch = _broadcast_shape(*(x.shape[:x.ndim - c] for x, c in zip(inputs, cores)))
    shape = batch + probe.shape[batch_ndim:]

    def fill(out: np.ndarray, *arrays: np.ndarray) -> None:
        result = fn(*arrays)
        out[...] = result if pick is None else result[pick]

    fill.__name__ = f"numpy.linalg.{name or fn.__name__}"
    return custom(fill, inputs, shape, probe.dtype)


def _matrix(x: Any, fn: str, square: bool = False) -> Tensor:
    check_tensor(x, fn)
    if x.ndim < 2:
        raise ValueError(f"{fn}: needs at least 2 dimensions, got shape {x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{fn}: needs square matrices, got shape {x.shape}")
    return x


def cholesky(x: Tensor, /, *, upper: bool = False) -> Tensor:
    return _host(lambda a: np.linalg.cholesky(a, upper=upper), [_matrix(x, "cholesky", True)], name="cholesky")


def det(x: Tensor, /) -> Tensor:
    return _host(np.linalg.det, [_matrix(x, "det", True)])


def eigh(x: Tensor, /) -> EighResult:
    return EighResult(*_host_results(np.linalg.eigh, [_matrix(x, "eigh", True)], (), 2, "eigh"))


def eigvalsh(x: Tensor, /) -> Tensor:
    return _host(np.linalg.eigvalsh, [_matrix(x, "eigvalsh", True)])


def inv(x: Tensor, /) -> Tensor:
    return _host(np.linalg.inv, [_matrix(x, "inv", True)])


def _with_tolerance(fn: Callable[..., Any], x: Tensor, rtol: float | Tensor | None, name: str) -> Tensor:
    """fn(x, rtol=...) as a host item; a tensor rtol (one per matrix) is one of its inputs."""
    x = _matrix(x, name)
    if isinstance(rtol, Tensor):
        return _host(lambda a, r: fn(a, rtol=r), [x, rtol], cores=(2, 0), name=name)
    kw = {} if rtol is None else {"rtol": rtol}
    return _host(lambda a: fn(a, **kw), [x], name=name)


def matrix_rank(x: Tensor, /, *, rtol: float | Tensor | None = None) -> Tensor:
    return _with_tolerance(np.linalg.matrix_rank, x, rtol, "matrix_rank")


def pinv(x: Tensor, /, *, rtol: float | Tensor | None = None) -> Tensor:
    return _with_tolerance(np.linalg.pinv, x, rtol, "pinv")


def qr(x: Tensor, /, *, mode: str = "reduced") -> QRResult:
    if mode not in ("reduced", "complete"):
        raise ValueError(f"qr: mode must be 'reduced' or 'complete', got {mode!r}")
    kw: dict[str, Any] = {"mode": mode}
    return QRResult(*_host_results(lambda a: np.linalg.qr(a, **kw), [_matrix(x, "qr")], (), 2, "qr"))


def slogdet(x: Tensor, /) -> SlogdetResult:
    return SlogdetResult(*_host_results(np.linalg.slogdet, [_matrix(x, "slogdet", True)], (), 2, "slogdet"))


def solve(x1: Tensor, x2: Tensor, /) -> Tensor:
    """x1 @ out == x2; a 1-d x2 is one vector (numpy 2's rule, the standard's)."""
    x1 = _matrix(x1, "solve", True)
    check_tensor(x2, "solve", "x2")
    if x2.ndim == 0:
        raise ValueError("solve: x2 must have at least 1 dimension")
    return _host(np.linalg.solve, [x1, x2], cores=(2, 1 if x2.ndim == 1 else 2))


def svd(x: Tensor, /, *, full_matrices: bool = True) -> SVDResult:
    return SVDResult(*_host_results(lambda a: np.linalg.svd(a, full_matrices=full_matrices), [_matrix(x, "svd")],
                                    (), 3, "svd"))


def svdvals(x: Tensor, /) -> Tensor:
    return _host(np.linalg.svdvals, [_matrix(x, "svdvals")])


def matrix_power(x: Tensor, n: int, /) -> Tensor:
    """x multiplied by itself n times, by repeated squaring (ug matmuls); a negative n inverts
    first (a host item), n == 0 gives identities."""
    x = _matrix(x, "matrix_power", True)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"matrix_power: n must be an int, got {n!r}")
    if n < 0:
        x, n = inv(x), -n
    if n == 0:
        return eye(x.shape[-1], dtype=x.dtype, device=x.device).broadcast_to(x.shape)
    result: Tensor | None = None
    square = x
    while n:
        if n & 1:
            result = square if result is None else matmul(result, square)
        n >>= 1
        if n:
            square = matmul(square, square)
    assert result is not None
    return result


def cross(x1: Tensor, x2: Tensor, /, *, axis: int = -1) -> Tensor:
    """The cross product of 3-vectors along `axis` (of the broadcast operands), from views."""
    check_tensor(x1, "cross", "x1")
    check_tensor(x2, "cross", "x2")
    shape = _broadcast_shape(x1.shape, x2.shape)
    if not shape:
        raise ValueError("cross: needs at least 1 dimension")
    if axis >= 0 and (axis >= x1.ndim or axis >= x2.ndim):
        raise ValueError(f"cross: axis {axis} is out of range for shapes {x1.shape} and {x2.shape}")
    at = _normalize_axis(axis if axis < 0 else axis - x1.ndim, len(shape))
    u, v = x1.broadcast_to(shape), x2.broadcast_to(shape)
    if shape[at] != 3:
        raise ValueError(f"cross: axis {axis} must have size 3, got shapes {x1.shape} and {x2.shape}")
    lead = (slice(None),) * at

    def part(t: Tensor, i: int) -> Tensor:
        return t[lead + (i,)]

    parts = [part(u, (i + 1) % 3) * part(v, (i + 2) % 3) - part(u, (i + 2) % 3) * part(v, (i + 1) % 3)
             for i in range(3)]
    return stack(parts, axis=at)


__all__ = ["EighResult", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "cross", "det", "eigh", "eigvalsh",
           "inv", "matrix_power", "matrix_rank", "pinv", "qr", "slogdet", "solve", "svd", "svdvals"]
