"""The derivatives of ug.linalg's host-computed functions on the device under test, against
central finite differences in float64 (test_autodiff's check_grad: ug.vjp with a random
cotangent, the finite difference of the same function on the same device).

The decompositions run numpy.linalg on the host; their rules (linalg_host.py) are ug ops on the
device. Inputs are well conditioned; symmetric functions (cholesky, eigh) are applied to
(a + a^T) / 2, so that a finite difference of one element is a symmetric perturbation; outputs
of eigenvectors, singular vectors and QR factors are invariant to their signs (squares, products
U diag(s) Vh, Q and R times the sign of R's diagonal), so a perturbation cannot flip them."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.test_autodiff import check_grad


@pytest.fixture(autouse=True)
def _float64(require_dtype):
    require_dtype(np.float64)


def _general(rng, *shape: int) -> np.ndarray:
    a = rng.standard_normal(shape)
    return a + 3 * np.eye(shape[-1]) if len(shape) >= 2 and shape[-1] == shape[-2] else a


def _spd(rng, *shape: int) -> np.ndarray:
    """Symmetric positive definite with eigenvalues 1, 1.8, 2.6, ... (separated)."""
    q = np.linalg.qr(rng.standard_normal(shape))[0]
    w = 1 + 0.8 * np.arange(shape[-1])
    return (q * w) @ np.swapaxes(q, -1, -2)


def _sym(a: Any) -> Any:
    return (a + a.mT) * 0.5


def _qr_signed(a: Any, part: int, mode: str = "reduced") -> Any:
    """Q's columns or R's rows times the sign of R's diagonal (the QR with a positive diagonal)."""
    q, r = ug.linalg.qr(a, mode=mode)
    d = ug.sign(ug.linalg.diagonal(r))
    k = d.shape[-1]
    return q[..., :, :k] * d[..., None, :] if part == 0 else r[..., :k, :] * d[..., :, None]


def _svd_product(a: Any) -> Any:
    u, s, vh = ug.linalg.svd(a, full_matrices=False)
    return (u * (s * s)[..., None, :]) @ vh


def _eigh_function(a: Any) -> Any:
    w, v = ug.linalg.eigh(_sym(a))
    return (v * w.sin()[..., None, :]) @ v.mT


# name: (function, inputs from rng)
CASES = {
    "inv": (lambda a: ug.linalg.inv(a), lambda r: [_general(r, 2, 3, 3)]),
    "det": (lambda a: ug.linalg.det(a), lambda r: [_general(r, 2, 3, 3)]),
    "det_singular": (lambda a: ug.linalg.det(a), lambda r: [np.array([[1.0, 2, 3], [2, 4, 6], [1, 0, 1]])]),
    "slogdet": (lambda a: ug.linalg.slogdet(a).logabsdet, lambda r: [_general(r, 3, 3) * np.array([[-1.0], [1], [1]])]),
    "solve": (lambda a, b: ug.linalg.solve(a, b), lambda r: [_general(r, 2, 3, 3), _general(r, 3, 2)]),
    "solve_vector": (lambda a, b: ug.linalg.solve(a, b), lambda r: [_general(r, 3, 3), _general(r, 3)]),
    "matrix_power_-2": (lambda a: ug.linalg.matrix_power(a, -2), lambda r: [_general(r, 3, 3)]),
    "cholesky": (lambda a: ug.linalg.cholesky(_sym(a)), lambda r: [_spd(r, 2, 3, 3)]),
    "cholesky_upper": (lambda a: ug.linalg.cholesky(_sym(a), upper=True), lambda r: [_spd(r, 3, 3)]),
    "eigh_values": (lambda a: ug.linalg.eigh(_sym(a)).eigenvalues, lambda r: [_spd(r, 2, 3, 3)]),
    "eigh_vectors_squared": (lambda a: ug.linalg.eigh(_sym(a)).eigenvectors ** 2, lambda r: [_spd(r, 2, 3, 3)]),
    "eigh_matrix_function": (_eigh_function, lambda r: [_spd(r, 3, 3)]),
    "eigvalsh": (lambda a: ug.linalg.eigvalsh(_sym(a)), lambda r: [_spd(r, 3, 3)]),
    "qr_Q_tall": (lambda a: _qr_signed(a, 0), lambda r: [_general(r, 4, 3)]),
    "qr_R_tall": (lambda a: _qr_signed(a, 1), lambda r: [_general(r, 4, 3)]),
    "qr_Q_wide": (lambda a: _qr_signed(a, 0), lambda r: [_general(r, 2, 2, 4)]),
    "qr_R_wide": (lambda a: _qr_signed(a, 1), lambda r: [_general(r, 2, 2, 4)]),
    "qr_complete_square": (lambda a: _qr_signed(a, 0, "complete"), lambda r: [_general(r, 3, 3)]),
    "svd_U_squared_tall": (lambda a: ug.linalg.svd(a, full_matrices=False).U ** 2, lambda r: [_general(r, 4, 3)]),
    "svd_Vh_squared_wide": (lambda a: ug.linalg.svd(a, full_matrices=False).Vh ** 2, lambda r: [_general(r, 2, 2, 4)]),
    "svd_product_tall": (_svd_product, lambda r: [_general(r, 2, 4, 3)]),
    "svd_S_full": (lambda a: ug.linalg.svd(a).S, lambda r: [_general(r, 3, 4)]),
    "svdvals": (lambda a: ug.linalg.svdvals(a), lambda r: [_general(r, 2, 3, 4)]),
    "pinv_tall": (lambda a: ug.linalg.pinv(a), lambda r: [_general(r, 4, 3)]),
    "pinv_wide": (lambda a: ug.linalg.pinv(a), lambda r: [_general(r, 2, 2, 3)]),
    "matrix_norm_2": (lambda a: ug.linalg.matrix_norm(a, ord=2), lambda r: [_general(r, 2, 3, 4)]),
    "matrix_norm_-2": (lambda a: ug.linalg.matrix_norm(a, ord=-2), lambda r: [_general(r, 3, 3)]),
    "matrix_norm_nuc": (lambda a: ug.linalg.matrix_norm(a, ord="nuc", keepdims=True), lambda r: [_general(r, 4, 3)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_linalg_gradient(device, rng, name):
    fn, inputs = CASES[name]
    check_grad(device, rng, fn, *inputs(rng))


def test_qr_complete_tall_is_a_type_error(device, rng):
    # Q's last m - n columns are any basis of the complement: no derivative (torch's rule), and
    # no silent 0
    x = ug.tensor(_general(rng, 4, 3), device=device)
    with pytest.raises(TypeError, match="mode='complete'"):
        ug.grad(lambda a: ug.linalg.qr(a, mode="complete").Q.sum())(x)


def test_gradients_through_decompositions_of_complex_matrices_are_refused(device, require_dtype):
    # the rules are the real-matrix formulas: refused when the gradient is taken, never wrong
    require_dtype(np.complex64)
    a = (np.eye(3) * 3 + 1j * np.arange(9).reshape(3, 3) / 10).astype(np.complex64)
    for fn in (ug.linalg.inv, ug.linalg.det, lambda m: ug.linalg.solve(m, m[:, :1]), lambda m: ug.linalg.qr(m)[1]):
        with pytest.raises(TypeError, match="complex matrix"):
            ug.grad(lambda m: ug.real(ug.sum(fn(m))))(ug.tensor(a, device=device))
    # what is built from ug's complex ops differentiates (matrix_power: products)
    g = ug.grad(lambda m: ug.real(ug.sum(ug.linalg.matrix_power(m, 2))))(ug.tensor(a, device=device)).numpy()
    ones = np.ones((3, 3))
    np.testing.assert_allclose(g, np.conj(ones @ a.T + a.T @ ones), rtol=1e-5)
