"""The gradients of ug.linalg's host-computed functions (inv, det, slogdet, solve, cholesky,
eigh, eigvalsh, qr, svd, svdvals, pinv, matrix_power, matrix_norm's 2 / -2 / 'nuc') against
torch.autograd in float64: the same loss written once for both (an adapter gives each its
linalg namespace and helpers), on random well-conditioned inputs; symmetric positive definite
ones with separated eigenvalues for cholesky and eigh. Singular vectors and eigenvectors are
defined up to sign (numpy's and torch's may differ), so their losses are invariant to it:
squares, products v v^T, or vectors times the sign of R's diagonal for QR. Also: second
derivatives (grad of grad), ug.jit either way round, float32, and that a call outside a
gradient is what it was (computed at the call, no derivative attached)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pytest

import ug_core as ug
from ug_core import graph

torch = pytest.importorskip("torch")

rng = np.random.default_rng(24)


UG = SimpleNamespace(la=ug.linalg, c=lambda a: ug.tensor(a), sign=ug.sign,
                     diag=lambda t: ug.linalg.diagonal(t))
TORCH = SimpleNamespace(la=torch.linalg, c=lambda a: torch.tensor(a), sign=torch.sign,
                        diag=lambda t: torch.diagonal(t, dim1=-2, dim2=-1))


def general(*shape: int) -> np.ndarray:
    """Random matrices; square ones shifted by 3 I (well conditioned)."""
    a = rng.standard_normal(shape)
    return a + 3 * np.eye(shape[-1]) if len(shape) >= 2 and shape[-1] == shape[-2] else a


def orthogonal(*shape: int) -> np.ndarray:
    return np.linalg.qr(rng.standard_normal(shape))[0]


def spd(*shape: int) -> np.ndarray:
    """Symmetric positive definite with eigenvalues 1, 1.7, 2.4, ... (separated: the
    eigenvectors' derivative divides by their differences)."""
    n = shape[-1]
    q = orthogonal(*shape)
    w = 1 + 0.7 * np.arange(n) + rng.uniform(0, 0.2, shape[:-1])
    return (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)


def separated(*shape: int) -> np.ndarray:
    """Matrices with singular values 1, 1.6, 2.2, ... (separated: the singular vectors'
    derivative divides by differences of their squares)."""
    m, n = shape[-2:]
    k = min(m, n)
    s = 1 + 0.6 * np.arange(k)[::-1] + rng.uniform(0, 0.1, shape[:-2] + (k,))
    u = orthogonal(*shape[:-2], m, k)
    v = orthogonal(*shape[:-2], n, k)
    return (u * s[..., None, :]) @ np.swapaxes(v, -1, -2)


def weights(*shape: int) -> np.ndarray:
    return rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)


def _qr_fixed(X: Any, a: Any, cq: np.ndarray, cr: np.ndarray, mode: str = "reduced") -> Any:
    """A QR loss invariant to the factors' signs: Q's columns and R's rows times the sign of R's
    diagonal (the QR with a positive diagonal)."""
    q, r = X.la.qr(a, mode=mode)
    d = X.sign(X.diag(r))
    k = d.shape[-1]
    return ((q[..., :, :k] * d[..., None, :]) * X.c(cq)).sum() + ((r[..., :k, :] * d[..., :, None]) * X.c(cr)).sum()


def _svd_loss(X: Any, a: Any, cu: np.ndarray, cv: np.ndarray, cs: np.ndarray, cp: np.ndarray, full: bool) -> Any:
    """Sign-invariant: U diag(s^2) Vh, the squares of U and Vh (all their columns / rows: with
    full_matrices, the complement's part has no gradient, torch's rule), and u_i u_i^T."""
    u, s, vh = X.la.svd(a, full_matrices=full)
    k = s.shape[-1]
    uk = u[..., :, :k]
    return (((uk * (s * s)[..., None, :]) @ vh[..., :k, :]) * X.c(cs)).sum() + (u * u * X.c(cu)).sum() \
        + (vh * vh * X.c(cv)).sum() + ((uk @ uk.mT) * X.c(cp)).sum()


# (name, loss(X, *inputs) with X an adapter, inputs)
CASES: list[tuple[str, Callable[..., Any], list[np.ndarray]]] = []


def case(name: str, loss: Callable[..., Any], *inputs: np.ndarray) -> None:
    CASES.append((name, loss, list(inputs)))


for shape in [(4, 4), (2, 3, 4, 4)]:
    sid = "x".join(map(str, shape))
    C = weights(*shape)
    case(f"inv_{sid}", lambda X, a, C=C: (X.la.inv(a) * X.c(C)).sum(), general(*shape))
    case(f"det_{sid}", lambda X, a, c=weights(*shape[:-2]): (X.la.det(a) * X.c(c)).sum(), general(*shape))
    mixed = general(*shape) * np.where(rng.random(shape[:-2] + (1, 1)) < 0.5, -1, 1)   # dets of both signs
    case(f"slogdet_{sid}", lambda X, a, c=weights(*shape[:-2]): (X.la.slogdet(a).logabsdet * X.c(c)).sum()
         + (X.la.slogdet(a).sign * X.c(c)).sum(), mixed)
    case(f"cholesky_{sid}", lambda X, a, C=C: (X.la.cholesky(a) * X.c(C)).sum(), spd(*shape))
    case(f"cholesky_upper_{sid}", lambda X, a, C=C: (X.la.cholesky(a, upper=True) * X.c(C)).sum(), spd(*shape))
    case(f"eigh_values_{sid}", lambda X, a, c=weights(*shape[:-1]): (X.la.eigh(a).eigenvalues ** 2 * X.c(c)).sum(),
         spd(*shape))
    case(f"eigh_vectors_squared_{sid}", lambda X, a, C=C: (X.la.eigh(a).eigenvectors ** 2 * X.c(C)).sum(), spd(*shape))

    def eigh_both(X: Any, a: Any, C: np.ndarray = C) -> Any:
        w, v = X.la.eigh(a)
        return (((v * (w * w).exp()[..., None, :]) @ v.mT) * X.c(C)).sum()   # V f(diag w) V^T: the matrix function
    case(f"eigh_matrix_function_{sid}", eigh_both, spd(*shape))
    case(f"eigvalsh_{sid}", lambda X, a, c=weights(*shape[:-1]): (X.la.eigvalsh(a) ** 3 * X.c(c)).sum(), spd(*shape))
    case(f"matrix_power_-3_{sid}", lambda X, a, C=C: (X.la.matrix_power(a, -3) * X.c(C)).sum(), general(*shape) / 3)

# numpy's det is exactly 0 for the first (inv would fail): the gradient takes the cofactors from an SVD
singular = np.stack([np.array([[1.0, 2, 3], [2, 4, 6], [1, 0, 1]]), general(3, 3)])
case("det_singular", lambda X, a, c=weights(2): (X.la.det(a) * X.c(c)).sum(), singular)
case("solve_matrix", lambda X, a, b: (X.la.solve(a, b) ** 2).sum(), general(3, 4, 4), general(3, 4, 2))
case("solve_vector", lambda X, a, b, C=weights(3, 4): (X.la.solve(a, b) * X.c(C)).sum(), general(3, 4, 4),
     general(4))
case("solve_broadcast_b", lambda X, a, b: (X.la.solve(a, b) ** 2).sum(), general(3, 4, 4), general(4, 2))
case("solve_broadcast_a", lambda X, a, b: (X.la.solve(a, b) ** 2).sum(), general(1, 4, 4), general(2, 3, 4, 2))

for shape in [(5, 3), (2, 3, 5), (2, 4, 4)]:
    sid = "x".join(map(str, shape))
    m, n = shape[-2:]
    k = min(m, n)
    batch = shape[:-2]
    case(f"qr_R_squared_{sid}", lambda X, a, C=weights(*batch, k, n): (X.la.qr(a).R ** 2 * X.c(C)).sum(), general(*shape))
    case(f"qr_signs_fixed_{sid}", lambda X, a, cq=weights(*batch, m, k), cr=weights(*batch, k, n): _qr_fixed(X, a, cq, cr),
         general(*shape))
    if m > n:   # (Q Q^T is the identity otherwise)
        case(f"qr_projector_{sid}", lambda X, a, C=weights(*batch, m, m):
             (((lambda q: q @ q.mT)(X.la.qr(a).Q)) * X.c(C)).sum(), general(*shape))
    if m <= n:
        case(f"qr_complete_{sid}", lambda X, a, cq=weights(*batch, m, k), cr=weights(*batch, k, n):
             _qr_fixed(X, a, cq, cr, "complete"), general(*shape))
    for full in (False, True):
        mu, nv = (m, n) if full else (k, k)
        case(f"svd_full{int(full)}_{sid}", lambda X, a, cu=weights(*batch, m, mu), cv=weights(*batch, nv, n),
             cs=weights(*shape), cp=weights(*batch, m, m), full=full: _svd_loss(X, a, cu, cv, cs, cp, full),
             separated(*shape))
    case(f"svdvals_{sid}", lambda X, a, c=weights(*batch, k): (X.la.svdvals(a) ** 3 * X.c(c)).sum(), separated(*shape))
    case(f"pinv_{sid}", lambda X, a, C=weights(*batch, n, m): (X.la.pinv(a) * X.c(C)).sum(), general(*shape))
    for ord in (2, -2, "nuc"):
        case(f"matrix_norm_{ord}_{sid}", lambda X, a, ord=ord, c=weights(*batch, 1, 1):
             (X.la.matrix_norm(a, ord=ord, keepdims=True) * X.c(c)).sum(), separated(*shape))


def _ug_grads(loss: Callable[..., Any], arrays: list[np.ndarray]) -> list[np.ndarray]:
    grads = ug.grad(lambda *a: loss(UG, *a), argnums=tuple(range(len(arrays))))(*(ug.tensor(a) for a in arrays))
    return [g.numpy() for g in grads]


def _torch_grads(loss: Callable[..., Any], arrays: list[np.ndarray]) -> list[np.ndarray]:
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    return [g.numpy() for g in torch.autograd.grad(loss(TORCH, *ts), ts)]


def _close(got: list[np.ndarray], want: list[np.ndarray], rtol: float = 1e-9) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, (i, g.shape, w.shape)
        assert np.max(np.abs(w)) > 1e-3, f"input {i}: torch's gradient is 0: a test that cannot fail"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * np.max(np.abs(w)), err_msg=f"input {i}")


@pytest.mark.parametrize("name, loss, arrays", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_torch(name, loss, arrays):
    _close(_ug_grads(loss, arrays), _torch_grads(loss, arrays))


SECOND_ORDER = ["inv_4x4", "det_2x3x4x4", "det_singular", "slogdet_4x4", "cholesky_2x3x4x4", "eigh_vectors_squared_4x4",
                "eigh_matrix_function_4x4", "eigvalsh_4x4", "solve_broadcast_b", "qr_signs_fixed_5x3",
                "qr_signs_fixed_2x3x5", "svd_full0_5x3", "svd_full1_2x3x5", "svdvals_2x4x4", "pinv_5x3",
                "pinv_2x3x5", "matrix_norm_nuc_2x4x4"]


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_derivative_matches_torch(name):
    # the rules are built from ug ops and from these functions (with their own rules), so the
    # gradient differentiates again: d/dx sum(D * grad(loss)(x)) against torch's create_graph
    loss, arrays = next((l, a) for n, l, a in CASES if n == name)
    ds = [weights(*a.shape) for a in arrays]
    nums = tuple(range(len(arrays)))

    def ug_outer(*a: Any) -> Any:
        gs = ug.grad(lambda *b: loss(UG, *b), argnums=nums)(*a)
        return sum((g * ug.tensor(d)).sum() for g, d in zip(gs, ds))
    got = [g.numpy() for g in ug.grad(ug_outer, argnums=nums)(*(ug.tensor(a) for a in arrays))]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    gs = torch.autograd.grad(loss(TORCH, *ts), ts, create_graph=True)
    want = [g.numpy() for g in torch.autograd.grad(sum((g * torch.tensor(d)).sum() for g, d in zip(gs, ds)), ts)]
    _close(got, want, rtol=1e-8)


@pytest.mark.parametrize("name", ["inv_2x3x4x4", "cholesky_4x4", "eigh_matrix_function_2x3x4x4", "svd_full0_2x3x5",
                                  "qr_signs_fixed_5x3", "solve_vector", "matrix_norm_2_5x3"])
def test_jit_either_way_round(name):
    # ug.jit(ug.grad(f)): the host calls are items of the compiled schedule (replayed: fresh
    # values each time); ug.grad(ug.jit(f)): the jitted function runs lazily inside the gradient
    loss, arrays = next((l, a) for n, l, a in CASES if n == name)
    want = _torch_grads(loss, arrays)
    nums = tuple(range(len(arrays)))
    jitted = ug.jit(ug.grad(lambda *a: loss(UG, *a), argnums=nums))
    for _ in range(2):   # traced, replayed
        _close([g.numpy() for g in jitted(*(ug.tensor(a) for a in arrays))], want)
    other = [a + 0.01 * weights(*a.shape) for a in arrays]
    _close([g.numpy() for g in jitted(*(ug.tensor(a) for a in other))], _torch_grads(loss, other))
    inner = ug.jit(lambda *a: loss(UG, *a))
    _close([g.numpy() for g in ug.grad(inner, argnums=nums)(*(ug.tensor(a) for a in arrays))], want)


@pytest.mark.parametrize("name", ["inv_2x3x4x4", "cholesky_2x3x4x4", "eigh_matrix_function_4x4", "svd_full0_5x3",
                                  "qr_signs_fixed_2x3x5", "solve_matrix", "det_4x4"])
def test_float32(name):
    loss, arrays = next((l, a) for n, l, a in CASES if n == name)
    arrays32 = [a.astype(np.float32) for a in arrays]
    got = _ug_grads(loss, arrays32)
    assert all(g.dtype == np.float32 for g in got)
    _close(got, _torch_grads(loss, arrays32), rtol=2e-4)


def test_outside_a_gradient_nothing_changes():
    # the fast path: computed at the call, no derivative attached, matrix_norm(ord=2) still one
    # host item
    x = ug.tensor(spd(4, 4))
    for out in (ug.linalg.inv(x), ug.linalg.cholesky(x), *ug.linalg.eigh(x), *ug.linalg.svd(x)):
        assert out.node.realized and graph.derivatives.get(out.node) is None
    assert len(ug.schedule(ug.linalg.matrix_norm(x, ord=2)).items) == 1
    with ug.keep_graph():   # inside a gradient's context: a derivative is attached
        assert graph.derivatives.get(ug.linalg.inv(x).node) is not None


def test_gradients_inside_keep_graph():
    # ug.gradients of a built result, inside ug.keep_graph
    a = general(4, 4)
    x = ug.tensor(a)
    with ug.keep_graph():
        y = ug.linalg.inv(x).sum()
        (g,) = ug.gradients(y, [x])
    np.testing.assert_allclose(g.numpy(), _torch_grads(lambda X, t: X.la.inv(t).sum(), [a])[0], rtol=1e-12)


def test_qr_complete_tall_has_no_derivative():
    # Q's last m - n columns are any orthonormal basis of the complement: torch refuses too
    x = ug.tensor(general(5, 3))
    with pytest.raises(TypeError, match="mode='complete'"):
        ug.grad(lambda a: (ug.linalg.qr(a, mode="complete").R ** 2).sum())(x)


def test_matrix_rank_is_an_integer():
    # no gradient flows through an integer: the loss is constant in x
    x = ug.tensor(general(4, 4))
    g = ug.grad(lambda a: a.sum() * ug.linalg.matrix_rank(a).astype(ug.float64))(x)
    np.testing.assert_array_equal(g.numpy(), np.full((4, 4), 4.0))


def test_write_to_the_input_after_the_call():
    # a rule uses the input as it was used, not its later value
    a = general(3, 3)

    def f(t: Any) -> Any:
        y = t * 1
        d = ug.linalg.det(y)
        y[0, 0] = 100.0
        return d + y.sum() * 0
    want = _torch_grads(lambda X, t: X.la.det(t), [a])
    _close([ug.grad(f)(ug.tensor(a)).numpy()], want)
