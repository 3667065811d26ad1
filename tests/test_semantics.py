"""The meaning of each (op, dtype kind), as ug_core.ops defines it next to each op: the table
itself, and the small integer powers that the lowering turns into multiplies (the kit's
ug_core/testing/test_semantics.py checks the edge cases on each device)."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import ug_core as ug
from ug_core import ops
from ug_core.lower import LowerOptions, lower
from ug_core.ops import Op

I32 = np.dtype(np.int32)


def _lowered(t: ug.Tensor) -> str:
    (item,) = ug.schedule(t).kernels
    return str(lower(item.kernel, LowerOptions(target="cpu")))


@pytest.mark.parametrize("exponent", [2, 3, 4, 8, -1, -2, -4, 0.5, 2.0, 0])
def test_small_integer_exponents_become_multiplies(exponent):
    x = ug.tensor(np.linspace(0.5, 2, 16, dtype=np.float32), device="ref")
    text = _lowered(x ** exponent + 1)
    assert " pow " not in text, text
    if exponent not in (0, 0.5):
        assert " mul " in text or " recip " in text
    assert " pow " in _lowered(x ** 2.5 + 1)
    assert " pow " in _lowered(x ** 9 + 1)


def test_semantics_are_written_next_to_each_op():
    # the table in ug_core.ops: every ALU op has its numpy meaning, and the ones whose meaning
    # differs from numpy's (or numpy's is not portable) are ug's own functions
    assert ops.ALU[Op.MAX].numpy is ops.maximum and ops.ALU[Op.MIN].numpy is ops.minimum
    assert ops.ALU[Op.DIV].numpy is ops.divide and ops.ALU[Op.POW].numpy is ops.power
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ops.power(np.array([2], I32), np.array([-1], I32))   # no numpy error: a defined result
    assert math.copysign(1.0, float(ops.maximum(np.float32(-0.0), np.float32(0.0)))) == 1.0
