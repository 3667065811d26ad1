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


def test_a_transcendental_under_a_broadcast_is_computed_once_per_element_of_its_value():
    # sin(rows) * cos(cols) over 512 x 256: fused, sin and cos would run once per output element
    # (128K each); the scheduler gives the repeated values buffers (512 sin, 256 cos)
    rows = np.linspace(0, 3, 512, dtype=np.float32)[:, None]
    cols = np.linspace(0, 2, 256, dtype=np.float32)[None, :]
    r, c = ug.tensor(rows, device=DEVICE), ug.tensor(cols, device=DEVICE)
    out = ug.sin(r * 1.5 + 0.25) * ug.cos(c * 0.75) + 0.5 * ug.sin(r + c)
    kernels = [i.kernel for i in ug.schedule(out).items if isinstance(i, KernelItem)]
    assert sorted(np.prod(k.stores[0].shape) for k in kernels) == [256, 512, 512 * 256]
    want = np.sin(rows * 1.5 + 0.25) * np.cos(cols * 0.75) + 0.5 * np.sin(rows + cols)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
    # small outputs, cheap values and reductions stay fused: one kernel each
    small = ug.sin(ug.tensor(rows[:64], device=DEVICE)) * ug.tensor(cols, device=DEVICE)[:, :64]
    cheap = (r * 1.5 + 0.25) * (c * 0.75)
    x = ug.tensor(rand((512, 256)), device=DEVICE)
    softmax = ug.exp(x - x.max(1, keepdims=True)) / ug.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)
    for y in (small, cheap, softmax):
        assert len([i for i in ug.schedule(y).items if isinstance(i, KernelItem)]) == 1


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


def test_mlp_adam_step_kernel_count():
    # `ug bench`'s T1 step (784-512-512-10, batch 256, cross-entropy, Adam written as assigns):
    # 8 matmuls, none reading a transposed copy of a weight, and one update kernel (m, v and p)
    # per parameter, written in place; the loss and its gradient 5 kernels (the rows' max and
    # sum of exponentials, kept for the backward pass; the target pick fused into the kernel of
    # the rows' losses, which stores the scaled pick where the pick's sum had a buffer of its own:
    # buffers.lifted), the bias gradients 3
    rng = np.random.default_rng(0)
    sizes = (784, 512, 512, 10)
    params = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"w{i}"] = ug.tensor(rng.standard_normal((a, b)).astype(np.float32), device=DEVICE)
        params[f"b{i}"] = ug.zeros((b,), device=DEVICE)
    m = {k: ug.zeros(p.shape, device=DEVICE) for k, p in params.items()}
    v = {k: ug.zeros(p.shape, device=DEVICE) for k, p in params.items()}
    t = ug.zeros((), device=DEVICE)
    x = ug.tensor(rng.standard_normal((256, 784)).astype(np.float32), device=DEVICE)
    y = ug.tensor(rng.integers(0, 10, 256), device=DEVICE)
    ug.realize(t, x, y, *params.values(), *m.values(), *v.values())

    def loss_fn(p):
        h = x
        for i in range(3):
            h = h @ p[f"w{i}"] + p[f"b{i}"]
            h = h.relu() if i < 2 else h
        return ug.nn.cross_entropy(h, y)

    loss, grads = ug.value_and_grad(loss_fn)(params)
    t.assign(t + 1)
    for k, p in params.items():
        m[k].assign(0.9 * m[k] + 0.1 * grads[k])
        v[k].assign(0.999 * v[k] + 0.001 * grads[k] * grads[k])
        p.assign(p - 1e-3 * (m[k] / (1 - 0.9 ** t)) / ((v[k] / (1 - 0.999 ** t)).sqrt() + 1e-8))
    sched = ug.schedule(loss, t, *params.values(), *m.values(), *v.values())
    kinds = [item.kind for item in sched.items]
    assert kinds.count("matmul") == 8 and kinds.count("kernel") == 20, str(sched)
    assert all(item.fused for item in sched.kernels), str(sched)   # no copy kernel
    updates = [item for item in sched.kernels if len(item.outputs) == 3]
    assert len(updates) == 6 and all(len(item.alias) == 3 for item in updates), str(sched)
