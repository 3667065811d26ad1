"""What a read of a value to Python (bool(), float(), item()) realizes besides the value itself:
the lazy values above it that live tensors hold (tensor_io._realize_with_held), so that code which
branches on a value and then goes on to use the values it came from does not compute them twice;
and the data-dependent ops that read values on the host (unique_*, boolean masks), which realize
what they read once."""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug
from ug_core import execute

DEV = "ref"   # (what is realized, and when, is the frontend's: the same on every device)


def _schedules(monkeypatch) -> list[int]:
    """A counter of the schedules made from now on (create_schedule calls)."""
    made = [0]
    original = execute.create_schedule

    def counting(targets, nodes):
        made[0] += 1
        return original(targets, nodes)

    monkeypatch.setattr(execute, "create_schedule", counting)
    return made


def test_bool_realizes_the_held_values_it_is_computed_from(monkeypatch):
    a = np.array([3.0, 1.0, 2.0, 1.0, 5.0])
    x = ug.asarray(a, device=DEV)
    denominator = x * 2 - 2        # held: the code below uses it again
    mask = denominator == 0
    made = _schedules(monkeypatch)
    assert bool(ug.any(mask))
    assert made[0] == 1 and denominator.node.realized and mask.node.realized
    np.testing.assert_array_equal(denominator.numpy(), a * 2 - 2)
    np.testing.assert_array_equal(mask.numpy(), a * 2 - 2 == 0)
    # using them now reads their buffers: one more schedule, of the division alone
    result = ug.where(mask, 0.0, x / ug.where(mask, 1.0, denominator))
    np.testing.assert_allclose(result.numpy(), np.where(a * 2 - 2 == 0, 0.0, a / np.where(a * 2 - 2 == 0, 1.0, a * 2 - 2)))
    assert made[0] == 2


def test_float_leaves_unheld_intermediates_and_constants_lazy():
    x = ug.asarray(np.arange(6, dtype=np.float32), device=DEV)
    zeros = ug.zeros((6,), device=DEV)       # held, but a broadcast constant: nothing to compute
    total = ug.sum((x * 3 + zeros) ** 2)        # (x * 3 + zeros) is held by no tensor
    assert float(total) == pytest.approx(float(np.sum((np.arange(6) * 3.0) ** 2)))
    assert total.node.realized and not zeros.node.realized and not x.node.srcs
    # the held constant still folds: a graph reading it needs no buffer for it
    assert (zeros + 1).numpy().tolist() == [1.0] * 6


def test_a_held_value_written_after_the_read_keeps_numpys_meaning():
    a = np.array([1.0, -2.0, 3.0])
    x = ug.asarray(a, device=DEV)
    y = x * 2
    view = y[1:]
    assert bool(ug.all(view != 0))      # realizes y (held) with the answer
    view[0] = 7.0                        # a write to y through the view, after the read
    np.testing.assert_array_equal(y.numpy(), [2.0, 7.0, 6.0])
    np.testing.assert_array_equal(x.numpy(), a)


def test_grad_through_a_function_that_reads_a_value_to_python():
    # the held values realized inside ug.grad keep their sources for the gradient walk
    def f(x):
        y = x * x
        scale = 3.0 if float(ug.sum(y)) > 0 else 1.0
        return ug.sum(y * scale)

    x = ug.asarray(np.array([1.0, -2.0, 0.5], dtype=np.float32), device="ref")
    np.testing.assert_allclose(ug.grad(f)(x).numpy(), 6 * np.array([1.0, -2.0, 0.5]), rtol=1e-6)


@pytest.mark.parametrize("n", [7, 70_000])   # (picked on the host, and by a gather above HOST_GATHER_MAX)
def test_unique_of_a_computed_value_sorts_once(n, monkeypatch):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 5, n).astype(np.float64)
    a[::3] = np.nan
    x = ug.asarray(a, device=DEV)
    made = _schedules(monkeypatch)
    values = ug.unique_values(x * 2)
    expected = np.unique(a * 2, equal_nan=False)
    np.testing.assert_array_equal(values.numpy(), expected)
    # one schedule sorts and finds the groups; the values are picked on the host (small), or
    # gathered from the kept sorted values (a second schedule, which does not sort again)
    assert made[0] == (1 if n <= 7 else 2)
    counts = ug.unique_counts(x * 2)
    np.testing.assert_array_equal(counts.values.numpy(), expected)
    np.testing.assert_array_equal(counts.counts.numpy(), np.unique(a * 2, return_counts=True, equal_nan=False)[1])
    inverse = ug.unique_inverse(x * 2)
    kept = ~np.isnan(a)
    np.testing.assert_array_equal(inverse.values.numpy()[inverse.inverse_indices.numpy()][kept], (a * 2)[kept])


def test_a_mask_computed_from_the_value_it_selects(monkeypatch):
    a = np.array([3.0, -1.0, 2.0, -4.0, 5.0], dtype=np.float32)
    x = ug.asarray(a, device=DEV)
    y = ug.exp(x) - 2
    picked = y[y > 0]
    np.testing.assert_allclose(picked.numpy(), (np.exp(a) - 2)[np.exp(a) - 2 > 0], rtol=1e-6)
    assert y.node.realized   # realized with the mask: the gather reads it, not its graph again
