"""Bad input must raise ValueError / IndexError / TypeError when the op is built
(never deferred to realize), with messages naming the offending shapes/values.

These run nothing on a device (the kit's ug_core/testing/test_errors.py has the errors seen when
something runs): they build their graphs on the built-in `ref` device."""
import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.test_errors import t

DEVICE = "ref"
AXIS_ERR = (IndexError, ValueError)


@pytest.mark.parametrize("op", [
    lambda a, b: a + b,
    lambda a, b: a - b,
    lambda a, b: a * b,
    lambda a, b: a / b,
    lambda a, b: a ** b,
    lambda a, b: a < b,
    lambda a, b: a == b,
    lambda a, b: ug.maximum(a, b),
    lambda a, b: ug.minimum(a, b),
    lambda a, b: ug.where(a > 0, a, b),
], ids=["add", "sub", "mul", "div", "pow", "lt", "eq", "maximum", "minimum", "where"])
def test_binary_shape_mismatch(op):
    a, b = t((2, 3), DEVICE), t((4,), DEVICE)
    with pytest.raises(ValueError) as ei:
        op(a, b)
    msg = str(ei.value)
    assert "(2, 3)" in msg and "(4,)" in msg, msg


def test_binary_shape_mismatch_reversed_and_nd():
    with pytest.raises(ValueError) as ei:
        t((4,), DEVICE) + t((2, 3), DEVICE)
    assert "(2, 3)" in str(ei.value) and "(4,)" in str(ei.value)
    with pytest.raises(ValueError) as ei:
        t((2, 3, 4), DEVICE) * t((3, 5), DEVICE)
    assert "(2, 3, 4)" in str(ei.value) and "(3, 5)" in str(ei.value)


def test_where_condition_mismatch():
    with pytest.raises(ValueError):
        ug.where(t((3,), DEVICE) > 0, t((2, 4), DEVICE), 0.0)


@pytest.mark.parametrize("sa,sb", [((3, 4), (5, 6)), ((3,), (4,)), ((3, 4), (3,)), ((5,), (4, 2)),
                                   ((2, 3, 4), (3, 4, 5)), ((2, 3, 4), (2, 5, 6))], ids=str)
def test_matmul_mismatch(sa, sb):
    a, b = t(sa, DEVICE), t(sb, DEVICE)
    with pytest.raises(ValueError):
        a @ b
    with pytest.raises(ValueError):
        ug.matmul(a, b)


def test_matmul_mismatch_message_names_shapes():
    with pytest.raises(ValueError) as ei:
        t((3, 4), DEVICE) @ t((5, 6), DEVICE)
    msg = str(ei.value)
    assert ("(3, 4)" in msg and "(5, 6)" in msg) or ("4" in msg and "5" in msg), msg


@pytest.mark.parametrize("shape", [(4, 2), (7,), (-1, 4), (-1, -1), (2, 2, 2), (0, 6)], ids=str)
def test_bad_reshape(shape):
    x = t((2, 3), DEVICE)
    with pytest.raises(ValueError):
        x.reshape(*shape)


def test_bad_reshape_message():
    with pytest.raises(ValueError) as ei:
        t((2, 3), DEVICE).reshape(4, 2)
    msg = str(ei.value)
    assert "(2, 3)" in msg or "6" in msg, msg


@pytest.mark.parametrize("name", ["sum", "max", "min", "mean"])
@pytest.mark.parametrize("axis", [2, -3, 5, (0, 2), (0, -3)], ids=str)
def test_reduce_axis_out_of_range(name, axis):
    x = t((2, 3), DEVICE)
    with pytest.raises(AXIS_ERR):
        getattr(x, name)(axis=axis)


def test_reduce_duplicate_axis():
    with pytest.raises(ValueError):
        t((2, 3), DEVICE).sum(axis=(0, 0))
    with pytest.raises(ValueError):
        t((2, 3), DEVICE).sum(axis=(1, -1))


@pytest.mark.parametrize("axis", [2, -3])
def test_softmax_axis_out_of_range(axis):
    x = t((2, 3), DEVICE)
    with pytest.raises(AXIS_ERR):
        x.softmax(axis=axis)
    with pytest.raises(AXIS_ERR):
        x.log_softmax(axis=axis)


def test_max_of_empty():
    for reduce in (lambda: ug.zeros((0,), device=DEVICE).max(), lambda: ug.zeros((3, 0), device=DEVICE).min(axis=1),
                   lambda: ug.zeros((0, 3), device=DEVICE).max(), lambda: ug.zeros((0, 3), device=DEVICE).max(axis=0),
                   lambda: ug.zeros((0, 3), device=DEVICE).min()):
        with pytest.raises(ValueError):
            reduce()


def test_bad_permute():
    x = t((2, 3, 4), DEVICE)
    with pytest.raises(AXIS_ERR):
        x.permute(0, 1, 3)
    with pytest.raises(ValueError):
        x.permute(0, 0, 1)
    with pytest.raises(ValueError):
        x.permute(0, 1)


def test_bad_squeeze():
    x = t((2, 1, 3), DEVICE)
    with pytest.raises(ValueError):
        x.squeeze(0)  # size 2, not squeezable
    with pytest.raises(AXIS_ERR):
        x.squeeze(3)


def test_bad_expand_dims():
    x = t((2, 3), DEVICE)
    with pytest.raises(AXIS_ERR):
        x.expand_dims(4)
    with pytest.raises(AXIS_ERR):
        x.expand_dims(-4)


@pytest.mark.parametrize("shape", [(2, 4), (3,), (2,), (3, 2)], ids=str)
def test_bad_broadcast_to(shape):
    x = t((2, 3), DEVICE)
    with pytest.raises(ValueError):
        x.broadcast_to(shape)


def test_index_out_of_range():
    x = t((3, 4), DEVICE)
    with pytest.raises(IndexError):
        x[3]
    with pytest.raises(IndexError):
        x[-4]
    with pytest.raises(IndexError):
        x[0, 4]
    with pytest.raises(IndexError):
        x[0, 0, 0]  # too many indices
    with pytest.raises(IndexError):
        x[..., 0, ...]  # two ellipses


def test_slice_step_zero():
    with pytest.raises(ValueError):
        t((5,), DEVICE)[::0]


def test_unknown_device_lists_available():
    with pytest.raises(ValueError) as ei:
        ug.tensor(np.zeros(3, np.float32), device="no_such_device")
    msg = str(ei.value)
    assert "no_such_device" in msg
    for d in ug.devices():
        assert d in msg, (d, msg)
    with pytest.raises(ValueError):
        ug.zeros((2,), device="no_such_device")
    with pytest.raises(ValueError):
        ug.ones((2,), device="no_such_device")
    with pytest.raises(ValueError):
        ug.full((2,), 1.0, np.float32, device="no_such_device")
    with pytest.raises(ValueError):
        ug.arange(3, np.float32, device="no_such_device")


def test_to_unknown_device():
    x = t((3,), DEVICE)
    with pytest.raises(ValueError) as ei:
        x.to("no_such_device")
    for d in ug.devices():
        assert d in str(ei.value)


@pytest.mark.parametrize("dt", [np.clongdouble, np.longdouble, np.dtype("U3"), np.dtype(object)], ids=str)
def test_unsupported_dtype(dt):
    with pytest.raises(TypeError):
        ug.tensor(np.zeros(3, dtype=dt), device=DEVICE)
    with pytest.raises(TypeError):
        ug.zeros((3,), dtype=dt, device=DEVICE)


def test_unsupported_astype():
    with pytest.raises(TypeError):
        t((3,), DEVICE).astype(np.clongdouble)


@pytest.mark.parametrize("obj", [object(), "abc", b"abc", {"a": 1}, {1, 2}, None, [object()], ["a", "b"]],
                         ids=["object", "str", "bytes", "dict", "set", "None", "list_of_object", "list_of_str"])
def test_tensor_unsupported_python_objects(obj):
    with pytest.raises(TypeError):
        ug.tensor(obj, device=DEVICE)


def test_ragged_list():
    with pytest.raises((ValueError, TypeError)):
        ug.tensor([[1.0, 2.0], [3.0]], device=DEVICE)


def test_item_requires_single_element():
    with pytest.raises(ValueError):
        t((2,), DEVICE).item()
    with pytest.raises(ValueError):
        t((0,), DEVICE).item()


def test_custom_bad_arguments():
    x = t((3,), DEVICE)
    with pytest.raises(TypeError):
        ug.custom(lambda out, a: None, [x], (3,), np.clongdouble)
    with pytest.raises((TypeError, ValueError)):
        ug.custom(lambda out, a: None, [x], (-1,), np.float32)


def test_error_raised_deep_in_lazy_graph():
    # the error surfaces while building, even deep inside a larger lazy graph
    x = t((2, 3), DEVICE)
    y = (x.exp() + 1).sum(axis=0)  # shape (3,)
    with pytest.raises(ValueError) as ei:
        y * t((2,), DEVICE)
    assert "(3,)" in str(ei.value) and "(2,)" in str(ei.value)


def test_iterating_a_0d_tensor_raises():
    x = ug.tensor(np.float32(3.0), device=DEVICE)
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(x)
    with pytest.raises(TypeError, match="0-d"):
        list(x)
