"""Bad input must raise ValueError / IndexError / TypeError when the op is built
(never deferred to realize), with messages naming the offending shapes/values: the errors
around work that runs on the device (a failed write leaves the tensor intact, an error does not
poison later work, a custom op that misuses `out` is caught when it runs). The build-time
checks that run nothing are in the repository's tests/test_errors.py."""
import numpy as np
import pytest

import ug_core as ug


def t(shape, device, dtype=np.float32):
    return ug.tensor(np.ones(shape, dtype), device=device)


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


def test_errors_do_not_poison_later_work(device):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = ug.tensor(a, device=device)
    for bad in (lambda: x + t((4,), device), lambda: x.reshape(4, 2), lambda: x.sum(axis=3),
                lambda: x @ t((4, 1), device)):
        with pytest.raises((ValueError, IndexError)):
            bad()
    np.testing.assert_allclose((x * 2 + 1).sum(axis=1).numpy(), (a * 2 + 1).sum(axis=1))


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
