"""Reductions: what is refused when the graph is built (the kit's ug_core/testing/test_reduce.py
runs reductions, softmax/log_softmax and normalisation-style compositions on each device)."""
import pytest

import ug_core as ug

DEVICE = "ref"


def test_max_empty_raises_at_build():
    x = ug.zeros((0, 3), device=DEVICE)
    with pytest.raises(ValueError):
        x.max()
    with pytest.raises(ValueError):
        x.max(axis=0)
    with pytest.raises(ValueError):
        x.min()
    with pytest.raises(ValueError):
        ug.zeros((0,), device=DEVICE).max()
