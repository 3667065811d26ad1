"""Accuracy of ug_core.mathlib's float32 transcendentals, as loop IR run by the test interpreter,
in ulps, over the sweep of the kit's ug_core/testing/test_ulp.py (which measures each device):
within the same limits (4 ulp), whatever the device."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from ug_core import mathlib
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Store
from ug_core.lower import LowerOptions, lower
from ug_core.ops import Op
from ug_core.testing.test_ulp import MAX_ULP, sweep, ulp_errors
from ug_core.view import View

sys.path.insert(0, os.path.dirname(__file__))
import loop_interp  # noqa: E402


@pytest.mark.parametrize("name", ["exp", "log", "sin", "cos", "tanh"])
def test_core_math_library_itself(name):
    """ug_core.mathlib's loop IR, as any backend that asks for it gets it, executed by the test
    interpreter in numpy's IEEE arithmetic: within the same limits, whatever the device."""
    x = sweep(name)
    n = x.size
    eb = ExprBuilder()
    view = View.contiguous((n,))
    expr = eb.alu(Op[name.upper()], (eb.load(1, (view,), np.dtype(np.float32)),), np.dtype(np.float32))
    kernel = Kernel(f"mathlib_{name}", (BufferArg(np.dtype(np.float32), n, True), BufferArg(np.dtype(np.float32), n, False)),
                    (n,), (), (), (Store(0, (n,), view, expr),))
    program = mathlib.expand(lower(kernel, LowerOptions(target="cpu")), mathlib.targets(float64=True))
    assert not any(i.arg is Op[name.upper()] for i in program.instructions)
    out = np.empty(n, np.float32)
    with np.errstate(all="ignore"):
        loop_interp.run(program, [out, x.copy()])
    err = ulp_errors(out, x, name)
    worst = int(np.argmax(err))
    assert err[worst] <= MAX_ULP[name], f"mathlib {name}: {err[worst]:.3g} ulp at x={x[worst]!r} got {out[worst]!r}"
