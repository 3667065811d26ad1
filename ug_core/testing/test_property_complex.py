"""Differential property tests for complex numbers: random programs over complex64 (and
complex128) tensors, built with hypothesis, run through ug on the device under test and through
numpy in complex128 on the same inputs, and compared.

Every step keeps values bounded and away from branch cuts and poles, so rounding can never flip
a branch: after each op the value is squashed to z / (1 + |z|) (|z| < 1); log, sqrt and angle see
z + 2 (real part above 1), division divides by z + 2. A mismatch larger than accumulated
rounding is a real bug.
"""
import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import ug_core as ug

SHAPE = (3, 4)


def _squash(xp, z):
    return z / (1 + xp.abs(z))


# (xp, a) -> value; xp is numpy or ug (their names agree for these)
UNARY = {
    "neg": lambda xp, a: -a,
    "conj": lambda xp, a: xp.conj(a),
    "exp": lambda xp, a: xp.exp(a),
    "log": lambda xp, a: xp.log(a + 2),
    "sqrt": lambda xp, a: xp.sqrt(a + 2),
    "sin": lambda xp, a: xp.sin(a),
    "cos": lambda xp, a: xp.cos(a),
    "tanh": lambda xp, a: xp.tanh(a),
    "square": lambda xp, a: a * a,
    "reciprocal": lambda xp, a: 1 / (a + 2),
    "abs": lambda xp, a: xp.abs(a) + 0j,
    "real_imag_swap": lambda xp, a: xp.imag(a) + 1j * xp.real(a),
    "times_1j": lambda xp, a: a * 1j,
    "scalar": lambda xp, a: (0.5 - 0.25j) * a + (1 + 1j),
}
BINARY = {
    "add": lambda xp, a, b: a + b,
    "sub": lambda xp, a, b: a - b,
    "mul": lambda xp, a, b: a * b,
    "div": lambda xp, a, b: a / (b + 2),
    "mul_conj": lambda xp, a, b: a * xp.conj(b),
    "complex_from_parts": lambda xp, a, b: xp.real(a) + 1j * xp.imag(b),
}


def _where(xp, mask, a, b):
    return xp.where(mask, a, b)


VIEWS = {
    "T_T": lambda xp, a: a.T.T,
    "flip": lambda xp, a: xp.flip(a, axis=1),
    "roll": lambda xp, a: xp.roll(a, 1, axis=0),
    "reshape": lambda xp, a: a.reshape(4, 3).reshape(SHAPE),
    "row_broadcast": lambda xp, a: a[:1] + a,
}
REDUCTIONS = {
    "sum_rows": lambda xp, a: xp.sum(a, axis=1, keepdims=True) + 0 * a,
    "mean_cols": lambda xp, a: xp.mean(a, axis=0, keepdims=True) + 0 * a,
    "matmul": lambda xp, a: (a @ a.T)[:, :1] + 0 * a,
    "cumsum": lambda xp, a: (xp.cumsum(a, axis=1) if xp is np else ug.cumulative_sum(a, axis=1)),
}
KINDS = {"unary": UNARY, "view": VIEWS, "reduce": REDUCTIONS}


@st.composite
def programs(draw):
    n = draw(st.integers(1, 8))
    steps = []
    for _ in range(n):
        kind = draw(st.sampled_from(["unary", "binary", "view", "reduce", "where"]))
        if kind == "binary":
            steps.append(("binary", draw(st.sampled_from(sorted(BINARY))), draw(st.integers(0, 10**6))))
        elif kind == "where":
            steps.append(("where", "", draw(st.integers(0, 10**6))))
        else:
            steps.append((kind, draw(st.sampled_from(sorted(KINDS[kind]))), 0))
    return steps


def run(xp, steps, z, w, mask):
    """The program's values: z, w, then one per step (each on the last value and, for a binary
    step, an earlier one picked by the step's number)."""
    pool = [z, w]
    for kind, name, pick in steps:
        a = pool[-1]
        if kind == "binary":
            value = BINARY[name](xp, a, pool[pick % len(pool)])
        elif kind == "where":   # the condition is an input: exact in both, no branch flips
            value = _where(xp, mask, a, pool[pick % len(pool)])
        else:
            value = KINDS[kind][name](xp, a)
        pool.append(_squash(xp, value))
    return pool


def _inputs(seed, dt):
    rng = np.random.default_rng(seed)
    z = (rng.uniform(-1, 1, SHAPE) + 1j * rng.uniform(-1, 1, SHAPE)).astype(dt)
    w = (rng.uniform(-1, 1, SHAPE) + 1j * rng.uniform(-1, 1, SHAPE)).astype(dt)
    return z, w, rng.random(SHAPE) < 0.5


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
@given(steps=programs(), seed=st.integers(0, 2**16), final_only=st.booleans())
def test_random_complex_programs(device, require_dtype, dt, steps, seed, final_only):
    require_dtype(np.dtype(dt))
    note(f"steps: {steps}")
    z, w, mask = _inputs(seed, dt)
    want = run(np, steps, z.astype(np.complex128), w.astype(np.complex128), mask)
    got = run(ug, steps, ug.tensor(z, device=device), ug.tensor(w, device=device), ug.tensor(mask, device=device))
    if not final_only:
        ug.realize(*got[2:])   # every intermediate in one schedule; else only the last: all fused
    tol = 2e-5 if dt == np.complex64 else 1e-12
    for k in (range(2, len(want)) if not final_only else [len(want) - 1]):
        g = got[k]
        assert g.dtype == np.dtype(dt), f"v{k}: dtype {g.dtype}"
        np.testing.assert_allclose(g.numpy().astype(np.complex128), want[k], rtol=tol * 10, atol=tol * len(steps),
                                   err_msg=f"v{k}")
