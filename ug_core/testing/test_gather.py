"""Gathers (ops.Op.GATHER): take, take_along_axis and integer-array indexing against numpy, on
every device; their fusion (one kernel with the consumer and the index producer); indices
known on the host are checked (IndexError), lazy ones are clamped (never a read outside)."""
import numpy as np
import pytest

import ug_core as ug
from ug_core.dtypes import SUPPORTED
from ug_core.testing.data import rand
from ug_core.testing.fixtures import supports


def kernels(*tensors) -> int:
    return sum(1 for item in ug.schedule(*tensors).items if item.kind == "kernel")


# the same index as numpy array, list and (int64 / int32) ug tensor
def forms(idx, device):
    arr = np.asarray(idx)
    return [arr, arr.tolist(), ug.tensor(arr.astype(np.int64), device=device), ug.tensor(arr.astype(np.int32), device=device)]


GETITEM = [
    lambda a, i: a[i([0, 2, -1, 2])],
    lambda a, i: a[:, i([1, 1, 5, -6])],
    lambda a, i: a[i([[0, 1], [3, 4]]), :, i([0, 6])],        # arrays apart: their dims come first
    lambda a, i: a[1:4, i([0, 5]), i([[1], [2]])],           # adjacent: in place, broadcast (2, 2)
    lambda a, i: a[..., i([6, 0, 3])],
    lambda a, i: a[i([4]), 2],                               # an int beside an array is an array index
    lambda a, i: a[None, i([1, 0]), ::-1],
    lambda a, i: a[i([[3]]), i([0, 1, 2]), i([[4], [0]])],
    lambda a, i: a[::2, i([2, 0])][:, ::-1],
    lambda a, i: a[i(np.zeros((0,), np.int64))],
    lambda a, i: a[i(np.zeros((2, 0), np.int64)), 1],
]


@pytest.mark.parametrize("case", range(len(GETITEM)))
def test_integer_array_indexing(device, case):
    x = rand((5, 6, 7))
    want = GETITEM[case](x, np.asarray)
    for form in range(4):
        got = GETITEM[case](ug.tensor(x, device=device), lambda v: forms(v, device)[form])
        assert got.shape == want.shape and got.dtype == want.dtype, (form, got.shape, want.shape)
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("ishape", [(), (4,), (2, 3)])
def test_take(device, axis, ishape, rng):
    x = rand((4, 5, 3))
    n = x.size if axis is None else x.shape[axis]
    idx = rng.integers(-n, n, ishape)
    for form in forms(idx, device):
        got = ug.take(ug.tensor(x, device=device), form, axis=axis)
        np.testing.assert_array_equal(got.numpy(), np.take(x, idx, axis=axis))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_take_along_axis(device, axis, rng):
    x = rand((4, 5, 3))
    shape = list(x.shape)
    shape[axis] = 6
    idx = rng.integers(-x.shape[axis], x.shape[axis], shape)
    got = ug.take_along_axis(ug.tensor(x, device=device), ug.tensor(idx, device=device), axis=axis)
    np.testing.assert_array_equal(got.numpy(), np.take_along_axis(x, idx, axis))
    # broadcasting off the axis (numpy's take_along_axis broadcasts too)
    one = [1] * 3
    one[axis] = 2
    small = rng.integers(0, x.shape[axis], one)
    got = ug.take_along_axis(ug.tensor(x, device=device), small, axis=axis)
    np.testing.assert_array_equal(got.numpy(), np.take_along_axis(x, np.broadcast_to(small, tuple(
        2 if d == axis % 3 else s for d, s in enumerate(x.shape))), axis))


@pytest.mark.parametrize("dt", sorted(SUPPORTED, key=str), ids=str)
def test_every_source_and_index_dtype(device, require_dtype, dt, rng):
    require_dtype(dt)
    x = (rng.standard_normal((6, 4)) * 50).astype(dt)
    idx = np.array([5, 0, -1, 3, 3])
    np.testing.assert_array_equal(ug.tensor(x, device=device)[idx].numpy(), x[idx])
    if np.dtype(dt).kind in "iu":   # as the index
        i = np.array([5, 0, 3, 3], dtype=dt)
        np.testing.assert_array_equal(ug.tensor(x.astype(np.float32), device=device)[ug.tensor(i, device=device)].numpy(),
                                      x.astype(np.float32)[i])


def test_gather_fuses_with_consumer_and_index_producer(device):
    table = rand((50, 8))
    ids = np.array([3, 49, 0, 7, 7, 12], np.int64)
    t, i = ug.tensor(table, device=device), ug.tensor(ids, device=device)
    out = t[(i + 1) % 50] * 0.5 + 1.0
    assert kernels(out) == 1
    np.testing.assert_allclose(out.numpy(), table[(ids + 1) % 50] * 0.5 + 1.0, rtol=1e-6)


def test_gather_from_a_computed_source_and_from_views(device):
    x = rand((6, 5))
    t = ug.tensor(x, device=device)
    idx = [4, 0, 2]
    np.testing.assert_allclose((t.exp() * 2)[idx].numpy(), (np.exp(x) * 2)[idx], rtol=1e-6)   # realized first
    np.testing.assert_array_equal(t.T[idx].numpy(), x.T[idx])
    np.testing.assert_array_equal(t[::-1, 1:][idx].numpy(), x[::-1, 1:][idx])
    np.testing.assert_array_equal(ug.flip(t, axis=1)[:, [0, 4]].numpy(), x[:, ::-1][:, [0, 4]])


def test_out_of_range_known_index_is_an_index_error(device):
    t = ug.tensor(rand((3, 4)), device=device)
    with pytest.raises(IndexError, match="out of bounds"):
        t[[3]]
    with pytest.raises(IndexError, match="out of bounds"):
        t[:, np.array([0, -5])]
    with pytest.raises(IndexError, match="out of bounds"):
        ug.take(t, [12], axis=None)
    with pytest.raises(IndexError, match="integers"):
        t[np.array([0.5])]
    with pytest.raises(IndexError, match="broadcast"):
        t[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="size 0"):
        ug.tensor(np.zeros((0, 3), np.float32), device=device)[ug.tensor(np.array([0]), device=device)]


def test_lazy_index_out_of_range_is_clamped(device):
    # documented: a tensor index is not read on the host; out of range, it reads the first or
    # last element (after wrapping once from the end), never outside the tensor
    x = rand((4, 3))
    idx = ug.tensor(np.array([9, -1, -4, -100, 3]), device=device)
    got = ug.tensor(x, device=device)[idx].numpy()
    np.testing.assert_array_equal(got, x[[3, 3, 0, 0, 3]])
    if supports(device, np.uint8):
        u = ug.tensor(np.array([200, 1], np.uint8), device=device)
        np.testing.assert_array_equal(ug.tensor(x, device=device)[u].numpy(), x[[3, 1]])


def test_gather_in_jit_replays_with_new_indices(device):
    table = rand((20, 4))
    f = ug.jit(lambda t, i: t[i] * 2.0)
    t = ug.tensor(table, device=device)
    for ids in ([1, 2, 3], [19, 0, 5], [7, 7, 7]):
        np.testing.assert_array_equal(f(t, ug.tensor(np.array(ids), device=device)).numpy(), table[ids] * 2.0)


def test_in_place_write_of_a_gather_of_itself(device):
    # p[...] = p[idx] reads p anywhere: the value gets a buffer of its own before the write
    x = rand((5,))
    p = ug.tensor(x, device=device)
    p[...] = p[[4, 3, 2, 1, 0]]
    np.testing.assert_array_equal(p.numpy(), x[::-1])
    q = ug.tensor(x, device=device)
    q += q[[1, 2, 3, 4, 0]]
    np.testing.assert_allclose(q.numpy(), x + x[[1, 2, 3, 4, 0]], rtol=1e-6)
