"""ug.jit refuses clearly: reading a traced value to Python raises ug.TracerValueError naming
the function and the line, before anything runs (the kit's ug_core/testing/test_jit_semantics.py
compares jitted functions with eager ones on each device)."""
import numpy as np
import pytest

import ug_core as ug

DEVICE = "ref"


def _reads_item(a):
    return a / a.sum().item()


READ_LINE = _reads_item.__code__.co_firstlineno + 1


@pytest.mark.parametrize("read", [
    lambda t: t.item(), lambda t: float(t), lambda t: int(t), lambda t: bool(t > 0), lambda t: t.numpy(),
    lambda t: np.asarray(t),
], ids=["item", "float", "int", "bool", "numpy", "asarray"])
def test_reading_a_traced_value_raises(read):
    f = ug.jit(lambda a: a * read(a.sum()))
    with pytest.raises(ug.TracerValueError, match="while it is traced"):
        f(ug.tensor(np.ones(4, np.float32), device=DEVICE))
    g = ug.jit(lambda a: a * read(a[0]))   # an argument's value itself is not there either
    with pytest.raises(ug.TracerValueError):
        g(ug.tensor(np.ones(1, np.float32), device=DEVICE))


def test_traced_read_error_names_function_and_line():
    f = ug.jit(_reads_item)
    with pytest.raises(ug.TracerValueError) as info:
        f(ug.tensor(np.ones(4, np.float32), device=DEVICE))
    assert isinstance(info.value, RuntimeError)
    message = str(info.value)
    assert "_reads_item" in message and ".item()" in message
    assert f"{__file__}:{READ_LINE}" in message
    assert f.trace_count == 0
