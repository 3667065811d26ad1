"""The direct launch of tiny kernels (fastcall.py): a builtin that calls a kernel's entry with the
buffers' handles, used by ug.jit's single-kernel replays on the cpu device."""

import numpy as np
import pytest

import ug_core as ug
from ug_core.kit.device import Loaded

from ug_llvm.fastcall import FastLaunch
from ug_llvm.jit import get_jit


def _single_kernel(fn, *tensors):
    sched = ug.schedule(fn(*tensors))
    assert len(sched.kernels) == 1
    return sched.kernels[0].kernel


def test_a_jitted_tiny_kernel_launches_directly():
    dev = ug.registry.get("cpu")
    a = np.arange(64, dtype=np.float32)
    ta, tb = ug.tensor(a, device="cpu"), ug.tensor(a * 3, device="cpu")
    f = ug.jit(lambda x, y: x * y + 1)
    for _ in range(3):   # the trace, then replays (the second reuses the first's dropped output)
        np.testing.assert_array_equal(f(ta, tb).numpy(), a * (a * 3) + 1)
    kept = f(ta, tb)
    again = f(ta, tb)   # `kept` is held: a new output, `kept` stays as it was
    np.testing.assert_array_equal(kept.numpy(), again.numpy())
    program = dev.compile(_single_kernel(lambda x, y: x * y + 1, ta, tb))
    pack, call = dev.handle_launcher(program)
    assert pack is None and type(call).__name__ == "builtin_function_or_method"


def test_big_kernels_keep_the_packed_launch():
    dev = ug.registry.get("cpu")
    t = ug.tensor(np.ones(1 << 20, np.float32), device="cpu")
    program = dev.compile(_single_kernel(lambda x: x + 1, t))
    pack, _ = dev.handle_launcher(program)
    assert pack is not None   # (released GIL, threads: the ctypes path)


def test_the_builtin_checks_its_arguments():
    launch = FastLaunch(get_jit()).launcher(0, 3)   # (never called with the right count: address 0)
    with pytest.raises(TypeError, match="takes 3 buffer handles"):
        launch(1, 2)
    with pytest.raises(TypeError, match="takes 3 buffer handles"):
        launch(1, 2, 3, 4)
    with pytest.raises(TypeError):
        launch(1, 2, "not a handle")
