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

`cross` and `matrix_power` with n >= 0 are compositions of ug ops (views, `stack`, matmul).

Derivatives: while a gradient is being taken (inside ug.grad / ug.vjp / ug.keep_graph) each
float result carries its own VJP rule (custom.define_vjp), the standard formulas (torch's),
built from ug ops and from these same functions on the forward values (inv(A), inv(L), eigh(A),
svd(A): computed from values already known, so the cotangent's graph stays lazy), so they
differentiate again. Outside a gradient nothing is added: the call costs what it did."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from .. import graph
from ..custom import custom, define_vjp
from ..shapes import broadcast_shape, normalize_axis
from ..tensor import Tensor, tensor, tracing, zeros
from ..tensor_arith import matmul, where
from ..tensor_io import realize
from ._common import check_tensor
from .creation import eye, tril, triu
from .elementwise import sign
from .manipulation import concat, stack


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
    if tracing():
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
    batch = broadcast_shape(*(x.shape[:x.ndim - c] for x, c in zip(inputs, cores)))
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


# --- derivatives ----------------------------------------------------------------------------------
#
# Each rule gets the cotangent of one result and returns the input's (summed over the results by
# the gradient walk: the rules are linear in the cotangents, so one rule per result adds up to the
# joint formula). They are torch's formulas (torch/csrc/autograd/FunctionsManual.cpp), written
# with ug ops; a matrix inverse they need is inv() of a forward value (a host call on a value
# already computed), never of the cotangent, so the backward graph stays lazy in the cotangent.


def _differentiating() -> bool:
    """Whether a gradient is being taken (ug.grad / ug.vjp / ug.keep_graph): only then do the
    results carry their derivative rules (outside, a result is only its value, as before)."""
    return graph.kept_sources.depth > 0


PartRule = Callable[[Tensor, list[Tensor], Tensor], "Tensor | None"]


def _real_rules_only(*inputs: Tensor) -> None:
    """The derivative rules here are the real-matrix formulas (transposes, not conjugate
    transposes; eigh / qr / svd's complex forms have terms of their own): a gradient through a
    decomposition of a complex matrix is refused when it is taken, never computed wrong."""
    for x in inputs:
        if x.dtype.kind == "c":
            raise TypeError(f"the gradient of a linalg function of a complex matrix ({x.dtype.name} {x.shape}) "
                            "is not implemented: its derivative rules are for real matrices")


def _with_rules(values: list[Tensor], x: Tensor, rules: list[PartRule | None]) -> list[Tensor]:
    """values (the results of one decomposition of x), each with its VJP: rules[i](g, parts, a)
    gives x's cotangent from result i's cotangent g, where parts are the results as returned
    (their own rules included, so a rule differentiates again) and a is x as it was used (not x's
    value after a later write to it); None: no gradient (a sign)."""
    if not _differentiating():
        return values
    parts: list[Tensor] = []

    def vjp(rule: PartRule | None) -> Callable[..., tuple[Tensor | None]]:
        def cotangent(g: Tensor, out: Tensor, a: Tensor) -> tuple[Tensor | None]:
            _real_rules_only(a)
            return (None if rule is None else rule(g, parts, a),)
        return cotangent
    parts.extend(define_vjp(v, [x], vjp(rule)) for v, rule in zip(values, rules))
    return parts


def _row(v: Tensor) -> Tensor:
    """(..., k) -> (..., 1, k): scales columns."""
    return v.reshape(v.shape[:-1] + (1, v.shape[-1]))


def _col(v: Tensor) -> Tensor:
    """(..., k) -> (..., k, 1): scales rows."""
    return v.reshape(v.shape + (1,))


def _scalar(v: Tensor) -> Tensor:
    """One value per matrix (...) -> (..., 1, 1)."""
    return v.reshape(v.shape + (1, 1))


def _off_diagonal_one(e: Tensor) -> Tensor:
    """e with 1 on the diagonal (a divisor whose diagonal is never used)."""
    n = e.shape[-1]
    return where(eye(n, dtype=bool, device=e.device), 1.0, e)


def _sum_to(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """t summed over the dims that broadcasting added to `shape` (a cotangent of a broadcast
    operand)."""
    if t.shape == shape:
        return t
    lead = t.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape) if n == 1 and t.shape[lead + d] != 1)
    return t.sum(axis=axes, keepdims=True).reshape(shape) if axes else t.reshape(shape)


def _inv_transpose(a: Tensor) -> Tensor:
    return inv(a).mT


# --- the functions ------------------------------------------------------------------------------


def cholesky(x: Tensor, /, *, upper: bool = False) -> Tensor:
    """The Cholesky factor (lower, or upper: x = U^T U). Its gradient is symmetric (torch's
    formula, Murray 2016): with L lower and P = tril(L^T gL) with its diagonal halved,
    gA = L^-T (P + P^T) / 2 L^-1."""
    x = _matrix(x, "cholesky", True)
    out = _host(lambda a: np.linalg.cholesky(a, upper=upper), [x], name="cholesky")

    def rule(g: Tensor, parts: list[Tensor], a: Tensor) -> Tensor:
        lower, g_lower = (parts[0].mT, g.mT) if upper else (parts[0], g)
        p = tril(lower.mT @ g_lower)
        p = 0.5 * (p + tril(p, k=-1).mT)   # symmetric, with tril(P)'s diagonal halved
        linv = inv(lower)
        return linv.mT @ p @ linv
    return _with_rules([out], x, [rule])[0]


def _cofactors(a: Tensor) -> Tensor:
    """The cofactor matrix det(A) A^-T, also where A is singular: from A = U diag(s) Vh it is
    det(U) det(Vh) U diag(prod of the other s) Vh (torch's singular case)."""
    u, s, vh = svd(a, full_matrices=False)
    n = s.shape[-1]
    others = where(eye(n, dtype=bool, device=s.device), 1.0, _row(s)).prod(axis=-1)   # prod_{j != i} s_j
    signs = _scalar(sign(det(u)) * sign(det(vh)))
    return signs * ((u * _row(others)) @ vh)


def det(x: Tensor, /) -> Tensor:
    """The determinant; its gradient g det(A) A^-T, and at a singular matrix (a determinant of
    exactly 0, outside ug.jit's trace) g times the cofactors from an SVD."""
    x = _matrix(x, "det", True)
    out = _host(np.linalg.det, [x])

    def rule(g: Tensor, parts: list[Tensor], a: Tensor) -> Tensor:
        if not tracing() and np.any(parts[0].numpy() == 0):   # (the value is known: computed at the call)
            return _scalar(g) * _cofactors(a)
        return _scalar(g * parts[0]) * _inv_transpose(a)
    return _with_rules([out], x, [rule])[0]


def eigh(x: Tensor, /) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of symmetric matrices (numpy reads the lower
    triangle). Gradients (torch's): eigenvalues V diag(g) V^T; eigenvectors
    V (skew(V^T gV) / 2 / (w_j - w_i)) V^T, which is infinite or NaN where two eigenvalues are
    equal (the eigenvectors are not unique there: only functions of the eigenspace have a
    derivative)."""
    x = _matrix(x, "eigh", True)
    values = _host_results(np.linalg.eigh, [x], (), 2, "eigh")

    def eigenvalues(g: Tensor, parts: list[Tensor], a: Tensor) -> Tensor:
        v = parts[1]
        return (v * _row(g)) @ v.mT

    def eigenvectors(g: Tensor, parts: list[Tensor], a: Tensor) -> Tensor:
        w, v = parts
        vg = v.mT @ g
        gap = _off_diagonal_one(_row(w) - _col(w))   # gap[i, j] = w_j - w_i
        return v @ ((0.5 * (vg - vg.mT)) / gap) @ v.mT
    return EighResult(*_with_rules(values, x, [eigenvalues, eigenvectors]))


def eigvalsh(x: Tensor, /) -> Tensor:
    """Eigenvalues (ascending) of symmetric matrices; gradient V diag(g) V^T (V from eigh when
    the gradient is built)."""
    x = _matrix(x, "eigvalsh", True)
    out = _host(np.linalg.eigvalsh, [x])

    def rule(g: Tensor, parts: list[Tensor], a: Tensor) -> Tensor:
        v = eigh(a).eigenvectors
        return (v * _row(g)) @ v.mT
    return _with_rules([out], x, [rule])[0]


def inv(x: Tensor, /) -> Tensor:
    """The inverse; gradient -A^-T g A^-T."""
    x = _matrix(x, "inv", True)
    out = _host(np.linalg.inv, [x])
    return _with_rules([out], x, [lambda g, parts, a: -(parts[0].mT @ g @ parts[0].mT)])[0]


def _with_tolerance(fn: Callable[..., Any], x: Tensor, rtol: float | Tensor | None, name: str) -> Tensor:
    """fn(x, rtol=...) as a host item; a tensor rtol (one per matrix) is one of its inputs."""
    x = _matrix(x, name)
    if isinstance(rtol, Tensor):
        return _host(lambda a, r: fn(a, rtol=r), [x, rtol], cores=(2, 0), name=name)
    kw = {} if rtol is None else {"rtol": rtol}
    return _host(lambda a: fn(a, **kw), [x], name=name)


def matrix_rank(x: Tensor, /, *, rtol: float | Tensor | None = None) -> Tensor:
    """The number of singular values above rtol times the largest (an integer: no gradient)."""
    return _with_tolerance(np.linalg.matrix_rank, x, rtol, "matrix_rank")


def pinv(x: Tensor, /, *, rtol: float | Tensor | None = None) -> Tensor:
    """The Moore-Penrose pseudo-inverse (singular values at most rtol times the largest are
    dropped). Gradient: torch's closed form (Golub and Pereyra), exact where the rank does not
    change; rtol gets none."""
    x = _matrix(x, "pinv")
    out = _with_tolerance(np.linalg.pinv, x, rtol, "pinv")

    def rule(g: Tensor, parts: list[Tensor], a: Tensor) -> Tensor:
        p, gt = parts[0], g.mT
        if x.shape[-2] <= x.shape[-1]:   # the products stay m x m
            k = gt @ p
            kp = k @ p.mT
            return -(p @ k).mT + kp - (a @ p) @ kp + (p.mT @ p) @ (gt - k @ a)
        k = p @ gt
        pk = p.mT @ k
        return -(k @ p).mT + (gt - a @ k) @ p @ p.mT + pk - pk @ p @ a
    return _with_rules([out], x, [rule])[0]


def _qr_vjp(q: Tensor, r: Tensor, gq: Tensor | None, gr: Tensor | None) -> Tensor:
    """torch's linalg_qr_backward (real): with M = gR R^T - Q^T gQ, a tall or square A gets
    (gQ + Q copyltu(triu(M))) R^-T, a wide one Q tril(M^T - M) R1^-T (R1: R's square left
    block), padded with zero columns, plus Q gR."""
    m, n = q.shape[-2], r.shape[-1]
    mm: Tensor | None = None
    if gr is not None:
        mm = gr @ r.mT
    if gq is not None:
        mm = -(q.mT @ gq) if mm is None else mm - q.mT @ gq
    assert mm is not None
    if m >= n:
        upper = triu(mm)
        b = q @ (upper + triu(upper, k=1).mT)   # copyltu: the strict upper part mirrored below
        if gq is not None:
            b = b + gq
        return b @ _inv_transpose(r)
    b = q @ tril(mm.mT - mm)
    out = b @ _inv_transpose(r[..., :, :m])
    out = concat([out, zeros(out.shape[:-1] + (n - m,), dtype=out.dtype, device=out.device)], axis=-1)
    return out + q @ gr if gr is not None else out


def qr(x: Tensor, /, *, mode: str = "reduced") -> QRResult:
    """Q and R with x = Q R (numpy's signs: R's diagonal may be negative). Gradient: torch's
    formula; not for mode='complete' with more rows than columns (Q's extra columns are any
    basis of the complement: a TypeError, as torch)."""
    if mode not in ("reduced", "complete"):
        raise ValueError(f"qr: mode must be 'reduced' or 'complete', got {mode!r}")
    x = _matrix(x, "qr")
    kw: dict[str, Any] = {"mode": mode}
    values = _host_results(lambda a: np.linalg.qr(a, **kw), [x], (), 2, "qr")
    m, n = x.shape[-2:]

    def check() -> None:
        if mode == "complete" and m > n:
            raise TypeError(f"qr: the derivative of mode='complete' with more rows than columns (shape {x.shape}) "
                            f"is not defined (Q's last {m - n} columns are not determined by x): use mode='reduced'")

    def q_rule(g: Tensor, parts: list[Tensor], a: Tensor) -> Tensor:
        check()
        return _qr_vjp(parts[0], parts[1], g, None)

    def r_rule(g: Tensor, parts: list[Tensor], a: Tensor) -> Tensor:
        check()
        return _qr_vjp(parts[0], parts[1], None, g)
    return QRResult(*_with_rules(values, x, [q_rule, r_rule]))


def slogdet(x: Tensor, /) -> SlogdetResult:
    """The sign (no gradient: piecewise constant) and log|det|, whose gradient is g A^-T."""
    x = _matrix(x, "slogdet", True)
    values = _host_results(np.linalg.slogdet, [x], (), 2, "slogdet")
    return SlogdetResult(*_with_rules(values, x, [None, lambda g, parts, a: _scalar(g) * _inv_transpose(a)]))


def solve(x1: Tensor, x2: Tensor, /) -> Tensor:
    """x1 @ out == x2; a 1-d x2 is one vector (numpy 2's rule, the standard's). Gradients:
    gB = A^-T g, gA = -gB X^T (summed over broadcast batch dims)."""
    x1 = _matrix(x1, "solve", True)
    check_tensor(x2, "solve", "x2")
    if x2.ndim == 0:
        raise ValueError("solve: x2 must have at least 1 dimension")
    vector = x2.ndim == 1
    out = _host(np.linalg.solve, [x1, x2], cores=(2, 1 if vector else 2))
    if not _differentiating():
        return out

    def rule(g: Tensor, out: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
        _real_rules_only(a, b)
        gm, xm = (_col(g), _col(out)) if vector else (g, out)
        gb = _inv_transpose(a) @ gm
        ga = -(gb @ xm.mT)
        return _sum_to(ga, a.shape), _sum_to(gb[..., 0] if vector else gb, b.shape)
    return define_vjp(out, [x1, x2], rule)


def _svd_vjp(parts: list[Tensor], shape: tuple[int, ...], gs: Tensor | None, gu: Tensor | None,
             gvh: Tensor | None) -> Tensor:
    """torch's svd_backward (real) for the reduced U (m x k), S, Vh (k x n): gA =
    U [skew(U^T gU) S / E + S skew(Vh gVh^T) / E + diag(gS)] Vh (E[i, j] = s_j^2 - s_i^2), plus
    (I - U U^T) gU S^-1 Vh for a tall A and U S^-1 gVh (I - Vh^T Vh) for a wide one. Infinite or
    NaN where two singular values are equal (or one is 0) and a singular vector's cotangent is
    not 0."""
    u, s, vh = parts
    m, n = shape[-2:]
    k = min(m, n)
    u, vh = u[..., :, :k], vh[..., :k, :]   # full_matrices: the complement's basis gets no gradient (torch)
    if gs is not None:
        return (u * _row(gs)) @ vh
    s2 = s * s
    gap = _off_diagonal_one(_row(s2) - _col(s2))
    if gu is not None:
        gu = gu[..., :, :k]
        ug = u.mT @ gu
        inner = u @ ((ug - ug.mT) * _row(s) / gap)
        if m > k:
            gus = gu / _row(s)
            inner = inner + gus - u @ (u.mT @ gus)
        return inner @ vh
    assert gvh is not None
    gvh = gvh[..., :k, :]
    vg = vh @ gvh.mT
    inner = ((_col(s) * (vg - vg.mT)) / gap) @ vh
    if n > k:
        sg = gvh / _col(s)
        inner = inner + sg - (sg @ vh.mT) @ vh
    return u @ inner


def svd(x: Tensor, /, *, full_matrices: bool = True) -> SVDResult:
    """U, S, Vh with x = U diag(S) Vh. Gradient: torch's formula (_svd_vjp); only functions
    invariant to the singular vectors' signs have one (numpy's and torch's signs differ)."""
    x = _matrix(x, "svd")
    values = _host_results(lambda a: np.linalg.svd(a, full_matrices=full_matrices), [x], (), 3, "svd")
    shape = x.shape
    return SVDResult(*_with_rules(values, x, [lambda g, parts, a: _svd_vjp(parts, shape, None, g, None),
                                              lambda g, parts, a: _svd_vjp(parts, shape, g, None, None),
                                              lambda g, parts, a: _svd_vjp(parts, shape, None, None, g)]))


def svdvals(x: Tensor, /) -> Tensor:
    """Singular values (descending); gradient U diag(g) Vh (U, Vh from svd when the gradient is
    built)."""
    x = _matrix(x, "svdvals")
    out = _host(np.linalg.svdvals, [x])

    def rule(g: Tensor, parts: list[Tensor], a: Tensor) -> Tensor:
        u, _, vh = svd(a, full_matrices=False)
        return (u * _row(g)) @ vh
    return _with_rules([out], x, [rule])[0]


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
    shape = broadcast_shape(x1.shape, x2.shape)
    if not shape:
        raise ValueError("cross: needs at least 1 dimension")
    if axis >= 0 and (axis >= x1.ndim or axis >= x2.ndim):
        raise ValueError(f"cross: axis {axis} is out of range for shapes {x1.shape} and {x2.shape}")
    at = normalize_axis(axis if axis < 0 else axis - x1.ndim, len(shape))
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
