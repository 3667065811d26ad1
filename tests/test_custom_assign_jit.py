"""ug.custom, assign / __setitem__, ug.jit, ug.realize, ug.schedule and device transfer: the
schedules, which run nothing (the kit's ug_core/testing/test_custom_assign_jit.py runs the rest
on each device)."""
import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.data import rand
from ug_core.testing.test_custom_assign_jit import KINDS, Counter

DEVICE = "ref"


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
