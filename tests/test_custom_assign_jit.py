"""ug.custom, assign / __setitem__, ug.jit, ug.realize, ug.schedule and device transfer: the
schedules, which run nothing (the kit's ug_core/testing/test_custom_assign_jit.py runs the rest
on each device)."""
import numpy as np
import pytest

import ug_core as ug

DEVICE = "ref"
KINDS = {"kernel", "matmul", "custom", "copy"}
RNG = np.random.default_rng(0)  # replaced by the running test's own generator (see _test_rng)


@pytest.fixture(autouse=True)
def _test_rng(rng):
    """The helpers draw from RNG: each test sets it to its own `rng` (seeded from the test's id),
    so that a test's data do not depend on which tests ran before it."""
    global RNG
    RNG = rng


def rand(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


class Counter:
    """A custom-op body that records how often and with what it was called."""

    def __init__(self, body):
        self.body = body
        self.calls = 0
        self.seen = []

    def __call__(self, out, *ins):
        self.calls += 1
        self.seen.append((out.shape, out.dtype, [(i.shape, i.dtype) for i in ins]))
        self.body(out, *ins)


def test_custom_in_schedule():
    x = ug.tensor(rand((3,)), device=DEVICE)
    fn = Counter(lambda out, p: np.negative(p, out=out))
    c = ug.custom(fn, [x + 1], (3,), np.float32) * 3
    sched = ug.schedule(c)
    kinds = [it.kind for it in sched.items]
    assert "custom" in kinds
    assert set(kinds) <= KINDS
    assert fn.calls == 0, "ug.schedule must not run anything"


def test_schedule_several_outputs():
    x = ug.tensor(rand((3, 3)), device=DEVICE)
    s = ug.schedule(x.exp(), x.sum(axis=0), x @ x)
    assert len(list(s.items)) >= 1
    assert {it.kind for it in s.items} <= KINDS
    assert str(s).strip()


def test_schedule_copy_kind_for_cross_device():
    others = [d for d in ug.devices() if d != DEVICE]
    if not others:
        pytest.skip("only one device available")
    x = ug.tensor(rand((4,)), device=DEVICE)
    y = (x + 1).to(others[0])
    kinds = {it.kind for it in ug.schedule(y).items}
    assert kinds <= KINDS
    assert "copy" in kinds
