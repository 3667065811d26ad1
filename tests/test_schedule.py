"""Scheduler behaviour seen in the schedule alone: accumulator phases, printing, cycles (the kit's
ug_core/testing/test_schedule.py checks kernel counts, item kinds and order and runs them on each
device)."""

import numpy as np
import pytest

import ug_core as ug
from ug_core.graph import Node
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Store
from ug_core.ops import Op
from ug_core.schedule import KernelItem, ScheduleError, _order
from ug_core.testing.data import rand
from ug_core.view import View

DEVICE = "ref"


def test_reduction_is_never_inlined_per_element():
    # every REDUCE becomes an accumulator phase: the stores only read it through ACC
    x = ug.tensor(rand((8, 16)), device=DEVICE)
    y = x - x.max(1, keepdims=True)
    (item,) = ug.schedule(y).items
    store_ops = set()
    stack = [item.kernel.stores[0].expr]
    while stack:
        e = stack.pop()
        store_ops.add(e.op)
        stack.extend(e.srcs)
    assert Op.ACC in store_ops
    assert len(item.kernel.reductions) == 1


def test_schedule_prints():
    x = ug.tensor(rand((4, 4)), device=DEVICE)
    text = str(ug.schedule(x.softmax()))
    assert "kernel" in text and "max" in text and "sum" in text


def test_cycle_is_a_clear_error():
    def node(name):
        n = Node(Op.CONST, (), 0.0, (1,), np.dtype(np.float32), "ref")
        return n

    n1, n2 = node("a"), node("b")
    eb = ExprBuilder()
    k = Kernel("k", (BufferArg(np.dtype(np.float32), 1, True),), (1,), (), (),
               (Store(0, (1,), View.contiguous((1,)), eb.const(0.0, np.dtype(np.float32))),))
    a = KernelItem(k, [n1, n2], [n1])
    b = KernelItem(k, [n2, n1], [n2])
    with pytest.raises(ScheduleError, match="cycle"):
        _order([a, b], set())
