"""Bad input must raise ValueError / IndexError / TypeError when the op is built
(never deferred to realize), with messages naming the offending shapes/values."""
import numpy as np
import pytest

import ug_core as ug

AXIS_ERR = (IndexError, ValueError)


def t(shape, device, dtype=np.float32):
    return ug.tensor(np.ones(shape, dtype), device=device)


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
def test_binary_shape_mismatch(device, op):
    a, b = t((2, 3), device), t((4,), device)
    with pytest.raises(ValueError) as ei:
        op(a, b)
    msg = str(ei.value)
    assert "(2, 3)" in msg and "(4,)" in msg, msg


def test_binary_shape_mismatch_reversed_and_nd(device):
    with pytest.raises(ValueError) as ei:
        t((4,), device) + t((2, 3), device)
    assert "(2, 3)" in str(ei.value) and "(4,)" in str(ei.value)
    with pytest.raises(ValueError) as ei:
        t((2, 3, 4), device) * t((3, 5), device)
    assert "(2, 3, 4)" in str(ei.value) and "(3, 5)" in str(ei.value)


def test_where_condition_mismatch(device):
    with pytest.raises(ValueError):
        ug.where(t((3,), device) > 0, t((2, 4), device), 0.0)


@pytest.mark.parametrize("sa,sb", [((3, 4), (5, 6)), ((3,), (4,)), ((3, 4), (3,)), ((5,), (4, 2)),
                                   ((2, 3, 4), (3, 4, 5)), ((2, 3, 4), (2, 5, 6))], ids=str)
def test_matmul_mismatch(device, sa, sb):
    a, b = t(sa, device), t(sb, device)
    with pytest.raises(ValueError):
        a @ b
    with pytest.raises(ValueError):
        ug.matmul(a, b)


def test_matmul_mismatch_message_names_shapes(device):
    with pytest.raises(ValueError) as ei:
        t((3, 4), device) @ t((5, 6), device)
    msg = str(ei.value)
    assert ("(3, 4)" in msg and "(5, 6)" in msg) or ("4" in msg and "5" in msg), msg


@pytest.mark.parametrize("shape", [(4, 2), (7,), (-1, 4), (-1, -1), (2, 2, 2), (0, 6)], ids=str)
def test_bad_reshape(device, shape):
    x = t((2, 3), device)
    with pytest.raises(ValueError):
        x.reshape(*shape)


def test_bad_reshape_message(device):
    with pytest.raises(ValueError) as ei:
        t((2, 3), device).reshape(4, 2)
    msg = str(ei.value)
    assert "(2, 3)" in msg or "6" in msg, msg


@pytest.mark.parametrize("name", ["sum", "max", "min", "mean"])
@pytest.mark.parametrize("axis", [2, -3, 5, (0, 2), (0, -3)], ids=str)
def test_reduce_axis_out_of_range(device, name, axis):
    x = t((2, 3), device)
    with pytest.raises(AXIS_ERR):
        getattr(x, name)(axis=axis)


def test_reduce_duplicate_axis(device):
    with pytest.raises(ValueError):
        t((2, 3), device).sum(axis=(0, 0))
    with pytest.raises(ValueError):
        t((2, 3), device).sum(axis=(1, -1))


@pytest.mark.parametrize("axis", [2, -3])
def test_softmax_axis_out_of_range(device, axis):
    x = t((2, 3), device)
    with pytest.raises(AXIS_ERR):
        x.softmax(axis=axis)
    with pytest.raises(AXIS_ERR):
        x.log_softmax(axis=axis)


def test_max_of_empty(device):
    with pytest.raises(ValueError):
        ug.zeros((0,), device=device).max()
    with pytest.raises(ValueError):
        ug.zeros((3, 0), device=device).min(axis=1)


def test_bad_permute(device):
    x = t((2, 3, 4), device)
    with pytest.raises(AXIS_ERR):
        x.permute(0, 1, 3)
    with pytest.raises(ValueError):
        x.permute(0, 0, 1)
    with pytest.raises(ValueError):
        x.permute(0, 1)


def test_bad_squeeze(device):
    x = t((2, 1, 3), device)
    with pytest.raises(ValueError):
        x.squeeze(0)  # size 2, not squeezable
    with pytest.raises(AXIS_ERR):
        x.squeeze(3)


def test_bad_expand_dims(device):
    x = t((2, 3), device)
    with pytest.raises(AXIS_ERR):
        x.expand_dims(4)
    with pytest.raises(AXIS_ERR):
        x.expand_dims(-4)


@pytest.mark.parametrize("shape", [(2, 4), (3,), (2,), (3, 2)], ids=str)
def test_bad_broadcast_to(device, shape):
    x = t((2, 3), device)
    with pytest.raises(ValueError):
        x.broadcast_to(shape)


def test_index_out_of_range(device):
    x = t((3, 4), device)
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


def test_slice_step_zero(device):
    with pytest.raises(ValueError):
        t((5,), device)[::0]


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


def test_to_unknown_device(device):
    x = t((3,), device)
    with pytest.raises(ValueError) as ei:
        x.to("no_such_device")
    for d in ug.devices():
        assert d in str(ei.value)


@pytest.mark.parametrize("dt", [np.complex64, np.complex128, np.dtype("U3"), np.dtype(object)], ids=str)
def test_unsupported_dtype(device, dt):
    with pytest.raises(TypeError):
        ug.tensor(np.zeros(3, dtype=dt), device=device)
    with pytest.raises(TypeError):
        ug.zeros((3,), dtype=dt, device=device)


def test_unsupported_astype(device):
    with pytest.raises(TypeError):
        t((3,), device).astype(np.complex64)


@pytest.mark.parametrize("obj", [object(), "abc", b"abc", {"a": 1}, {1, 2}, None, [object()], ["a", "b"]],
                         ids=["object", "str", "bytes", "dict", "set", "None", "list_of_object", "list_of_str"])
def test_tensor_unsupported_python_objects(device, obj):
    with pytest.raises(TypeError):
        ug.tensor(obj, device=device)


def test_ragged_list(device):
    with pytest.raises((ValueError, TypeError)):
        ug.tensor([[1.0, 2.0], [3.0]], device=device)


def test_item_requires_single_element(device):
    with pytest.raises(ValueError):
        t((2,), device).item()
    with pytest.raises(ValueError):
        t((0,), device).item()


def test_assign_shape_mismatch(device):
    x = t((2, 3), device)
    with pytest.raises(ValueError):
        x.assign(t((3, 2), device))
    with pytest.raises(ValueError):
        x[0] = t((4,), device)
    with pytest.raises(ValueError):
        x[1:] = t((2, 3), device)
    with pytest.raises(IndexError):
        x[5] = 1.0
    # the failed writes left x intact
    np.testing.assert_array_equal(x.numpy(), np.ones((2, 3), np.float32))


def test_custom_bad_arguments(device):
    x = t((3,), device)
    with pytest.raises(TypeError):
        ug.custom(lambda out, a: None, [x], (3,), np.complex64)
    with pytest.raises((TypeError, ValueError)):
        ug.custom(lambda out, a: None, [x], (-1,), np.float32)


def test_errors_do_not_poison_later_work(device):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = ug.tensor(a, device=device)
    for bad in (lambda: x + t((4,), device), lambda: x.reshape(4, 2), lambda: x.sum(axis=3),
                lambda: x @ t((4, 1), device)):
        with pytest.raises((ValueError, IndexError)):
            bad()
    np.testing.assert_allclose((x * 2 + 1).sum(axis=1).numpy(), (a * 2 + 1).sum(axis=1))


def test_error_raised_deep_in_lazy_graph(device):
    # the error surfaces while building, even deep inside a larger lazy graph
    x = t((2, 3), device)
    y = (x.exp() + 1).sum(axis=0)  # shape (3,)
    with pytest.raises(ValueError) as ei:
        y * t((2,), device)
    assert "(3,)" in str(ei.value) and "(2,)" in str(ei.value)


def test_iterating_a_0d_tensor_raises(device):
    x = ug.tensor(np.float32(3.0), device=device)
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(x)
    with pytest.raises(TypeError, match="0-d"):
        list(x)


def test_iterating_yields_rows(device):
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    rows = list(ug.tensor(a, device=device))
    assert len(rows) == 3 and all(isinstance(r, ug.Tensor) and r.shape == (2,) for r in rows)
    np.testing.assert_array_equal(np.stack([r.numpy() for r in rows]), a)
    assert [r.item() for r in ug.tensor(np.arange(4, dtype=np.int32), device=device)] == [0, 1, 2, 3]


def test_custom_op_returning_an_array_is_an_error(device):
    x = ug.tensor(np.arange(4, dtype=np.float32), device=device)

    def doubles_but_returns(out, a):
        return a * 2   # a common mistake: `out` is left zero

    y = ug.custom(doubles_but_returns, [x], (4,), np.float32)
    with pytest.raises(TypeError) as e:
        y.numpy()
    assert "doubles_but_returns" in str(e.value) and "in place" in str(e.value) and "ndarray" in str(e.value)


def _resizes(out, a):
    out.resize((2,), refcheck=False)


def _reshapes(out, a):
    out.shape = (2, 2)
    out[...] = 1


def _retypes(out, a):
    out.dtype = np.int32


@pytest.mark.parametrize("fn,changed", [(_resizes, "(2,)"), (_reshapes, "(2, 2)"), (_retypes, "int32")],
                         ids=["resize", "reshape", "dtype"])
def test_custom_op_that_changes_out_is_an_error(device, fn, changed):
    x = ug.tensor(np.arange(4, dtype=np.float32), device=device)
    y = ug.custom(fn, [x], (4,), np.float32)
    with pytest.raises(ValueError) as e:
        y.numpy()
    message = str(e.value)
    assert fn.__name__ in message and "(4,)" in message and changed in message and "in place" in message
