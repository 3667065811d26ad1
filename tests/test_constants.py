"""Python scalars are kernel arguments, not code (ug_core.scalars): which values fold into the
code and which are arguments, and how kernel keys hold offsets, seen in the schedule alone (the
kit's ug_core/testing/test_constants.py runs them on each device)."""

import numpy as np

import ug_core as ug

DEVICE = "ref"


def _inputs(kernel_item):
    return len(kernel_item.buffers) - len(kernel_item.outputs)


def test_kernel_keys_hold_slots_not_offsets():
    x = ug.tensor(np.arange(40, dtype=np.float32), device=DEVICE)
    k3, k5 = (ug.schedule(x[i:i + 8] * 2.5).kernels[0].kernel for i in (3, 5))
    assert k3.key() == k5.key()
    assert k3.offsets_arg == len(k3.args) - 1 and k3.args[-1].dtype == np.int32 and not k3.args[-1].output
    assert f"+ b{k3.offsets_arg}[0]" in str(k3)
    k0 = ug.schedule(x[0:8] * 2.5).kernels[0].kernel
    assert k0.offsets_arg is None and k0.key() != k3.key()  # offset 0 stays code


def test_what_folds_and_what_is_an_argument():
    x = ug.tensor(np.ones(8, np.float32), device=DEVICE)
    for folded in (x * 2, x + 1, x * 0.5, x - 0, x * -1, x * True, ug.maximum(x, 0), x.relu(), x ** 2, x ** 3, x ** 0.5,
                   x.gelu(), x.sigmoid(), x.mean(), ug.where(x > 0, x, 0)):
        (item,) = ug.schedule(folded).kernels[-1:]
        assert _inputs(item) == 1, item.describe()
    for argument in (x * 3.7, x + 0.1, x - -0.0, ug.maximum(x, 6.5), ug.full((8,), 2.5, device=DEVICE) * x,
                     x ** 2.7, ug.where(x > 0, 1.25, x)):
        (item,) = ug.schedule(argument).kernels
        assert _inputs(item) == 2, item.describe()
    # one value used twice in a graph is one argument (the same buffer passed twice would alias)
    (item,) = ug.schedule(x * 3.7 + x * 3.7 - 3.7).kernels
    assert _inputs(item) == 2
