"""numpy's aliasing rule (docs/array-api.md, "Writes and aliasing"): views share their base's
elements both ways, copies share nothing, identity cases of copying functions are copies too,
broadcast views are read-only; under ug.jit as eagerly; writes through views are region writes
on the base (no extra copies). The random-program version is test_view_writes_fuzz.py."""
import numpy as np
import pytest

import ug_core as ug
from ug_core.schedule import KernelItem
from ug_core.tensor import TensorView


def _t(a, device):
    return ug.tensor(np.asarray(a), device=device)


# --------------------------------------------------------------------- the cases
def test_write_through_a_basic_view_reaches_its_base(device):
    c = ug.zeros((2, 3, 3), device=device)
    v = c[0]
    v[1, 1] = 5
    assert c.numpy()[0, 1, 1] == 5
    c[0, 2, 2] = 7          # and the view sees later writes to its base
    assert v.numpy()[2, 2] == 7


def _add_to_diagonal(array, value, xp):
    # scikit-learn's sklearn.utils._array_api._add_to_diagonal (GaussianMixture's regularization
    # of each covariances[k]), but for the device of `value`, the default one there
    value = xp.asarray(value, dtype=array.dtype, device=array.device)
    if value.ndim == 1:
        for i in range(array.shape[0]):
            array[i, i] += value[i]
    else:
        for i in range(array.shape[0]):
            array[i, i] += value


def test_sklearn_add_to_diagonal_of_a_stacked_covariance(device):
    cov = np.arange(18, dtype=np.float32).reshape(2, 3, 3)
    c = _t(cov, device)
    for k in range(2):
        _add_to_diagonal(c[k], 0.5, ug)
        cov[k].flat[::4] += 0.5
    _add_to_diagonal(c[1], ug.tensor([1.0, 2.0, 3.0], device=device), ug)
    cov[1].flat[::4] += [1, 2, 3]
    np.testing.assert_array_equal(c.numpy(), cov)
    flat = ug.reshape(c[0], (-1,))    # the numpy branch's spelling, on a view
    flat[::4] += 1
    cov[0].flat[::4] += 1
    np.testing.assert_array_equal(c.numpy(), cov)


def _np_diagonal(a, offset=0):
    """numpy's diagonal as a writable view (numpy's own is read-only; ug's is writable)."""
    d = np.diagonal(a, offset, -2, -1)
    return np.lib.stride_tricks.as_strided(a[max(-offset, 0):, max(offset, 0):], d.shape, d.strides)


VIEWS = [   # (ug's view, numpy's, an index into it)
    (lambda x: x[1:], lambda a: a[1:], (0,)), (lambda x: x[::-1], lambda a: a[::-1], (1,)),
    (lambda x: x.T, lambda a: a.T, (0, 1)), (lambda x: x[:, 1], lambda a: a[:, 1], (2,)),
    (lambda x: x.reshape(-1), lambda a: a.reshape(-1), (5,)),
    (lambda x: x.reshape(2, 3, 2), lambda a: a.reshape(2, 3, 2), (1, 0, 1)),
    (lambda x: ug.expand_dims(x, axis=1), lambda a: np.expand_dims(a, 1), (2, 0, 2)),
    (lambda x: x[None], lambda a: a[None], (0, 1, 1)),
    (lambda x: ug.flip(x, axis=1), lambda a: np.flip(a, 1), (3, 0)),
    (lambda x: ug.permute_dims(x, (1, 0)), lambda a: a.transpose(1, 0), (2, 3)),
    (lambda x: ug.moveaxis(x, 0, 1), lambda a: np.moveaxis(a, 0, 1), (1, 2)),
    (lambda x: ug.unstack(x)[2], lambda a: a[2], (1,)),
    (lambda x: ug.linalg.diagonal(x), _np_diagonal, (1,)),
    (lambda x: ug.linalg.diagonal(x, offset=1), lambda a: _np_diagonal(a, 1), (0,)),
    (lambda x: x.mT, lambda a: a.T, (1, 1)), (lambda x: x[..., 1:3], lambda a: a[..., 1:3], (0, 0)),
    (lambda x: x[1:3][::-1, ::2], lambda a: a[1:3][::-1, ::2], (0, 1)),
    (lambda x: ug.squeeze(x[None], axis=0), lambda a: a, (2, 2)),
    (lambda x: x[0, ...], lambda a: a[0, ...], (2,)),
    (lambda x: ug.matrix_transpose(x), lambda a: a.T, (2, 0)),
]


@pytest.mark.parametrize("case", range(len(VIEWS)))
def test_views_share_elements_both_ways(device, case):
    make, np_make, index = VIEWS[case]
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    x = _t(a, device)
    v = make(x)
    assert isinstance(v, TensorView) and v.base is x
    e = a.copy()
    ev = np_make(e)
    assert np.shares_memory(ev, e)
    v[index] = -1          # a write through the view reaches the base
    ev[index] = -1
    np.testing.assert_array_equal(x.numpy(), e)
    x[1] = 100             # and a write to the base shows in the view
    e[1] = 100
    np.testing.assert_array_equal(v.numpy(), ev)
    v += 1                 # an in-place operator through the view
    ev += 1
    np.testing.assert_array_equal(x.numpy(), e)


@pytest.mark.parametrize("make", [
    lambda x: ug.roll(x, 4, axis=0), lambda x: ug.roll(x, -8, axis=0), lambda x: ug.roll(x, 0),
    lambda x: ug.roll(x, (4, 3), axis=(0, 1)), lambda x: ug.roll(x, 12),
    lambda x: ug.pad(x, 0), lambda x: ug.pad(x, 0, mode="edge"), lambda x: ug.pad(x, 0, mode="reflect"),
    lambda x: ug.pad(x, ((0, 0), (0, 0))), lambda x: ug.concat([x]), lambda x: ug.concat([x, x[:0]]),
    lambda x: ug.stack([x])[0], lambda x: ug.tile(x, (1, 1)), lambda x: ug.repeat(x, 1, axis=0),
    lambda x: ug.scatter_add(x, 0, ug.tensor(np.zeros((0, 3), np.int64), device=x.device),
                             ug.zeros((0, 3), device=x.device)),
    lambda x: ug.index_add(x, 0, ug.tensor(np.zeros(0, np.int64), device=x.device), ug.zeros((0, 3), device=x.device)),
    lambda x: ug.clip(x, None, None), lambda x: ug.where(True, x, 0.0), lambda x: ug.astype(x, x.dtype),
    lambda x: ug.asarray(x, copy=True), lambda x: ug.tensor(x), lambda x: +x, lambda x: x.flatten(),
    lambda x: ug.reshape(x, (12,), copy=True), lambda x: x[np.arange(4)], lambda x: x[np.ones((4, 3), bool)],
    lambda x: ug.take(x, ug.tensor([0, 1, 2, 3], device=x.device), axis=0), lambda x: x[1, 2],
    lambda x: ug.sort(x, axis=0), lambda x: ug.cumulative_sum(x[:, :1], axis=1), lambda x: ug.sum(x, axis=()),
    lambda x: x.sum(axis=()), lambda x: ug.abs(x), lambda x: ug.matmul(x, ug.eye(3, device=x.device)),
    lambda x: ug.broadcast_arrays(x)[0] + 0, lambda x: ug.unique_values(x),
])
def test_copies_and_identity_cases_never_alias(device, make):
    a = np.abs(np.arange(12, dtype=np.float32).reshape(4, 3)) + 1
    x = _t(a, device)
    y = make(x)
    assert y is not x and not (isinstance(y, TensorView) and y.base is x)
    before = y.numpy().copy()
    x.assign(x * 0 - 5)        # a later write to the argument does not reach the result
    np.testing.assert_array_equal(y.numpy(), before)
    y[...] = 7                 # nor one to the result the argument
    np.testing.assert_array_equal(x.numpy(), np.full((4, 3), -5, np.float32))


def test_identity_roll_of_a_written_tensor(device):
    # the case: roll by -2 * len gave [2, 2, 2] for [3, 3, 3] after a write to a
    a = _t([3.0, 3.0, 3.0], device)
    t = ug.roll(a, -6)
    a.assign(_t([2.0, 2.0, 2.0], device))
    np.testing.assert_array_equal(t.numpy(), [3, 3, 3])
    p = ug.pad(a, 0, mode="reflect")
    p[0] = 0.5
    np.testing.assert_array_equal(a.numpy(), [2, 2, 2])


def test_one_element_index_is_a_copy_and_ellipsis_a_view(device):
    x = _t(np.arange(6.0).reshape(2, 3), device)
    e = x[1, 2]
    e += 1
    assert x.numpy()[1, 2] == 5 and e.item() == 6
    v = x[1, 2, ...]
    assert isinstance(v, TensorView)
    v += 1
    assert x.numpy()[1, 2] == 6


@pytest.mark.parametrize("make", [
    lambda x: x.broadcast_to((2, 4, 3)), lambda x: ug.broadcast_to(x, (4, 3)),
    lambda x: ug.broadcast_arrays(x, ug.zeros((2, 1, 1), device=x.device))[0],
    lambda x: x.broadcast_to((2, 4, 3))[1], lambda x: x.broadcast_to((2, 4, 3)).T,
])
def test_broadcast_views_are_read_only(device, make):
    x = _t(np.ones((4, 3), np.float32), device)
    v = make(x)
    for write in (lambda: v.__setitem__((0,) * v.ndim, 2.0), lambda: v.assign(ug.zeros(v.shape, device=device)),
                  lambda: v.__setitem__(np.zeros(v.shape, bool), 1.0)):
        with pytest.raises(ValueError, match="read-only"):
            write()
    with pytest.raises(ValueError, match="read-only"):
        v += 1
    np.testing.assert_array_equal(x.numpy(), np.ones((4, 3)))
    x[0, 0] = 9          # the base stays writable, and the view reads it
    assert v.numpy().reshape(-1)[0] == 9


def test_reshape_of_a_view_is_a_view_where_numpy_s_is(device):
    a = np.arange(24.0).reshape(4, 6)
    x = _t(a, device)
    assert isinstance(x[:, ::2].reshape(12), TensorView) == np.shares_memory(a[:, ::2].reshape(12), a)
    t = x.T.reshape(24)               # numpy copies: no single strided window
    assert not isinstance(t, TensorView)
    t[0] = -1
    assert x.numpy()[0, 0] == 0
    with pytest.raises(ValueError, match="copy=False"):
        ug.reshape(x.T, (24,), copy=False)
    r = ug.reshape(x[1:3], (2, 3, 2), copy=False)
    r[0, 0, 0] = -2
    assert x.numpy()[1, 0] == -2


def test_self_overlapping_writes_through_views(device, require_dtype):
    # the case: a write that reads its own target through another view
    x = _t(np.arange(6.0), device)
    x[0] = 10.0
    x[::-1] = x
    np.testing.assert_array_equal(x.numpy(), [5, 4, 3, 2, 1, 10])
    require_dtype(np.int8)
    a = _t(np.arange(12, dtype=np.int8).reshape(3, 4), device)
    e = np.arange(12, dtype=np.int8).reshape(3, 4)
    a[:, :] = a[:, ::-1]
    e[:, :] = e[:, ::-1].copy()
    a[:, ::-1] = a[:, :]
    e[:, ::-1] = e[:, :].copy()
    np.testing.assert_array_equal(a.numpy(), e)
    v = x[1:]                 # through a view: shifted by one
    v[:-1] = x[:-2]
    e = np.array([5, 4, 3, 2, 1, 10.0])
    e[1:][:-1] = e[:-2].copy()
    np.testing.assert_array_equal(x.numpy(), e)


# --------------------------------------------------------------------- schedule: no extra copies
def _kernels(*tensors):
    return [i for i in ug.schedule(*tensors).items if isinstance(i, KernelItem)]


def test_in_place_ops_on_views_are_region_writes_on_the_base(device):
    c = ug.zeros((2, 3, 3), device=device).realize()
    v = c[0]
    v[1, 1] += 5              # getitem + iadd + setitem: one kernel, written in place
    d = v.T
    d[0] *= 2
    kernels = _kernels(c)
    assert len(kernels) == 2, ug.schedule(c)
    assert all("(assign-copy)" not in k.fused for k in kernels)
    buffer = c.node.srcs[0]
    while buffer.srcs:
        buffer = buffer.srcs[0]
    c.realize()
    e = np.zeros((2, 3, 3), np.float32)
    e[0, 1, 1] += 5
    e[0].T[0] *= 2
    np.testing.assert_array_equal(c.numpy(), e)


# --------------------------------------------------------------------- ug.jit
def test_jit_writes_through_views_made_inside(device):
    @ug.jit
    def f(x, y):
        v = x[0]
        v[1] += y.sum()
        x.T[2] = 1.0
        return x.sum()

    for k in range(4):
        a = np.arange(6, dtype=np.float32).reshape(2, 3) + k
        x = _t(a, device)
        s = f(x, _t(np.ones(3, np.float32), device))
        a[0, 1] += 3
        a.T[2] = 1
        np.testing.assert_array_equal(x.numpy(), a)
        assert s.item() == a.sum()


def test_jit_view_arguments_read_and_written(device):
    k = ug.jit(lambda v, s: v.assign(v + s))
    a = ug.zeros((2, 3), device=device)
    b = ug.zeros((2, 3), device=device)
    for i in range(3):
        out = k(a[0], 1.0)
        assert isinstance(out, TensorView) and out.base is a
        k(b[:, 1], 2.0)
    np.testing.assert_array_equal(a.numpy(), [[3, 3, 3], [0, 0, 0]])
    np.testing.assert_array_equal(b.numpy(), [[0, 6, 0], [0, 6, 0]])
    g = ug.jit(lambda v: v * 2)
    w = _t(np.arange(6, dtype=np.float32).reshape(2, 3), device)
    for i in range(4):
        np.testing.assert_array_equal(g(w[i % 2]).numpy(), np.arange(6).reshape(2, 3)[i % 2] * 2)


def test_jit_reads_a_captured_view_as_its_base_is_then(device):
    w = _t(np.arange(6, dtype=np.float32).reshape(2, 3), device)
    row = w[1]
    f = ug.jit(lambda x: x + row)
    x = ug.zeros((3,), device=device)
    for k in range(3):
        np.testing.assert_array_equal(f(x).numpy(), np.arange(3, 6) + k)
        w.assign(w + 1)


# --------------------------------------------------------------------- DLPack
def test_dlpack_export_of_a_view_lends_the_base_s_elements(device):
    x = _t(np.arange(12.0, dtype=np.float32).reshape(3, 4), device)
    try:
        x.__dlpack__(copy=False)
    except BufferError:
        lends = False   # a device whose memory is not the host's: exports are copies
    else:
        lends = True
    v = x[1:, ::-2]
    a = np.from_dlpack(v)
    np.testing.assert_array_equal(a, np.arange(12.0).reshape(3, 4)[1:, ::-2])
    a[0, 0] = -7
    assert (x.numpy()[1, 3] == -7) == lends   # numpy's rule: a view's export is the base's memory
    b = np.from_dlpack(x.broadcast_to((2, 3, 4)))    # read-only views export copies
    b[0, 0, 0] = 50
    assert x.numpy()[0, 0] == 0


def test_a_copy_of_a_view_written_in_place_leaves_the_view(device, require_dtype):
    require_dtype(np.uint8)
    # found by the fuzzer (c): the copy held the view's node, realized it and wrote it in place,
    # while the view still took that node (kept weakly) as its value
    a = np.arange(20, dtype=np.uint8).reshape(4, 5)
    t0 = _t(a, device)
    t1 = ug.linalg.diagonal(t0, offset=1)
    t0[...] = _t(a + 100, device)
    t3 = ug.tensor(t1)
    t3.numpy()
    t3[[0, 0, 3]] = 36
    t3[[2, 2, 3]] = 1
    ug.realize(t1, t3)
    np.testing.assert_array_equal(t1.numpy(), np.diagonal(a + 100, 1))
    np.testing.assert_array_equal(t3.numpy(), [36, 107, 1, 1])
