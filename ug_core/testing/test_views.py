"""Movement ops and indexing: reshape, permute, .T, broadcast_to, squeeze,
expand_dims, flatten and __getitem__ with ints, slices, None and Ellipsis."""
import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.data import RNG, rand

# (id, base shape, ug fn, numpy fn)
VIEWS = [
    ("reshape", (2, 3, 4), lambda t: t.reshape(6, 4), lambda a: a.reshape(6, 4)),
    ("reshape_neg1_last", (2, 3, 4), lambda t: t.reshape(4, -1), lambda a: a.reshape(4, -1)),
    ("reshape_neg1_first", (2, 3, 4), lambda t: t.reshape(-1, 2), lambda a: a.reshape(-1, 2)),
    ("reshape_flat", (2, 3, 4), lambda t: t.reshape(-1), lambda a: a.reshape(-1)),
    ("reshape_add_ones", (2, 3), lambda t: t.reshape(1, 2, 1, 3, 1), lambda a: a.reshape(1, 2, 1, 3, 1)),
    ("reshape_0d_to_1", (), lambda t: t.reshape(1), lambda a: a.reshape(1)),
    ("reshape_empty", (0, 4), lambda t: t.reshape(2, 0, 2), lambda a: a.reshape(2, 0, 2)),
    ("permute_2d", (3, 5), lambda t: t.permute(1, 0), lambda a: a.transpose(1, 0)),
    ("permute_3d", (2, 3, 4), lambda t: t.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    ("permute_4d", (2, 3, 4, 5), lambda t: t.permute(3, 1, 0, 2), lambda a: a.transpose(3, 1, 0, 2)),
    ("permute_identity", (2, 3), lambda t: t.permute(0, 1), lambda a: a),
    ("T_2d", (3, 5), lambda t: t.T, lambda a: a.T),
    ("T_3d", (2, 3, 4), lambda t: t.T, lambda a: a.T),
    ("T_1d", (5,), lambda t: t.T, lambda a: a.T),
    ("broadcast_to_lead", (3,), lambda t: t.broadcast_to((4, 3)), lambda a: np.broadcast_to(a, (4, 3))),
    ("broadcast_to_ones", (3, 1), lambda t: t.broadcast_to((2, 3, 5)), lambda a: np.broadcast_to(a, (2, 3, 5))),
    ("broadcast_to_0d", (), lambda t: t.broadcast_to((2, 2)), lambda a: np.broadcast_to(a, (2, 2))),
    ("broadcast_to_same", (2, 3), lambda t: t.broadcast_to((2, 3)), lambda a: a),
    ("squeeze_0", (1, 3, 4), lambda t: t.squeeze(0), lambda a: a.squeeze(0)),
    ("squeeze_mid", (3, 1, 4), lambda t: t.squeeze(1), lambda a: a.squeeze(1)),
    ("squeeze_neg", (3, 4, 1), lambda t: t.squeeze(-1), lambda a: a.squeeze(-1)),
    ("expand_dims_0", (3, 4), lambda t: t.expand_dims(0), lambda a: np.expand_dims(a, 0)),
    ("expand_dims_mid", (3, 4), lambda t: t.expand_dims(1), lambda a: np.expand_dims(a, 1)),
    ("expand_dims_end", (3, 4), lambda t: t.expand_dims(2), lambda a: np.expand_dims(a, 2)),
    ("expand_dims_neg", (3, 4), lambda t: t.expand_dims(-1), lambda a: np.expand_dims(a, -1)),
    ("expand_dims_0d", (), lambda t: t.expand_dims(0), lambda a: np.expand_dims(a, 0)),
    ("flatten", (2, 3, 4), lambda t: t.flatten(), lambda a: a.flatten()),
    ("flatten_0d", (), lambda t: t.flatten(), lambda a: a.flatten()),
    # indexing
    ("int", (4, 5), lambda t: t[1], lambda a: a[1]),
    ("int_neg", (4, 5), lambda t: t[-1], lambda a: a[-1]),
    ("int_int", (4, 5), lambda t: t[2, 3], lambda a: a[2, 3]),
    ("int_int_neg", (4, 5), lambda t: t[-2, -5], lambda a: a[-2, -5]),
    ("slice", (6, 5), lambda t: t[1:4], lambda a: a[1:4]),
    ("slice_open", (6, 5), lambda t: t[2:], lambda a: a[2:]),
    ("slice_neg", (6, 5), lambda t: t[-3:], lambda a: a[-3:]),
    ("slice_neg_stop", (6, 5), lambda t: t[:-2], lambda a: a[:-2]),
    ("slice_step", (9, 5), lambda t: t[::2], lambda a: a[::2]),
    ("slice_step3_start", (10,), lambda t: t[1:8:3], lambda a: a[1:8:3]),
    ("slice_2d", (6, 7), lambda t: t[1:5, 2:6], lambda a: a[1:5, 2:6]),
    ("slice_2d_steps", (6, 7), lambda t: t[::2, 1::3], lambda a: a[::2, 1::3]),
    ("slice_out_of_bounds_clamped", (5,), lambda t: t[2:100], lambda a: a[2:100]),
    ("slice_empty", (5, 3), lambda t: t[3:1], lambda a: a[3:1]),
    ("slice_full", (5, 3), lambda t: t[:, :], lambda a: a[:, :]),
    ("int_then_slice", (4, 5, 6), lambda t: t[1, 1:4], lambda a: a[1, 1:4]),
    ("slice_then_int", (4, 5, 6), lambda t: t[:, 2], lambda a: a[:, 2]),
    ("last_axis_int", (4, 5, 6), lambda t: t[:, :, -1], lambda a: a[:, :, -1]),
    ("none_front", (3, 4), lambda t: t[None], lambda a: a[None]),
    ("none_mid", (3, 4), lambda t: t[:, None, :], lambda a: a[:, None, :]),
    ("none_end", (3, 4), lambda t: t[..., None], lambda a: a[..., None]),
    ("none_with_int", (3, 4), lambda t: t[None, 1, None], lambda a: a[None, 1, None]),
    ("ellipsis_int", (2, 3, 4), lambda t: t[..., 0], lambda a: a[..., 0]),
    ("ellipsis_slice", (2, 3, 4), lambda t: t[..., 1:3], lambda a: a[..., 1:3]),
    ("int_ellipsis", (2, 3, 4), lambda t: t[1, ...], lambda a: a[1, ...]),
    ("int_ellipsis_int", (2, 3, 4), lambda t: t[1, ..., 2], lambda a: a[1, ..., 2]),
    ("ellipsis_only", (2, 3), lambda t: t[...], lambda a: a[...]),
    ("0d_ellipsis", (), lambda t: t[...], lambda a: a[...]),
    ("0d_none", (), lambda t: t[None], lambda a: a[None]),
    ("mixed", (4, 5, 6), lambda t: t[1:, None, ::2, -1], lambda a: a[1:, None, ::2, -1]),
    # chains
    ("T_reshape", (3, 4), lambda t: t.T.reshape(-1), lambda a: a.T.reshape(-1)),
    ("step_T_slice", (6, 5), lambda t: t[::2].T[1:], lambda a: a[::2].T[1:]),
    ("permute_slice_reshape", (2, 3, 4), lambda t: t.permute(2, 1, 0)[1:3].reshape(2, -1),
     lambda a: a.transpose(2, 1, 0)[1:3].reshape(2, -1)),
    ("reshape_permute_slice", (24,), lambda t: t.reshape(4, 6).permute(1, 0)[::2, 1:],
     lambda a: a.reshape(4, 6).transpose(1, 0)[::2, 1:]),
    ("broadcast_then_slice", (3, 1), lambda t: t.broadcast_to((3, 4))[1:, ::2],
     lambda a: np.broadcast_to(a, (3, 4))[1:, ::2]),
    ("broadcast_then_reshape", (3, 1), lambda t: t.broadcast_to((3, 4)).reshape(-1),
     lambda a: np.broadcast_to(a, (3, 4)).reshape(-1)),
    ("broadcast_then_T", (1, 4), lambda t: t.broadcast_to((3, 4)).T, lambda a: np.broadcast_to(a, (3, 4)).T),
    ("slice_of_slice", (10,), lambda t: t[1:9][::2][1:], lambda a: a[1:9][::2][1:]),
    ("expand_squeeze", (3, 4), lambda t: t.expand_dims(1).squeeze(1), lambda a: a),
    ("flatten_of_T", (3, 4), lambda t: t.T.flatten(), lambda a: a.T.flatten()),
    ("T_T", (3, 4), lambda t: t.T.T, lambda a: a),
    ("step_reshape", (8, 3), lambda t: t[::2].reshape(3, 4), lambda a: a[::2].reshape(3, 4)),
    ("index_into_broadcast", (3, 1), lambda t: t.broadcast_to((3, 5))[:, 4], lambda a: np.broadcast_to(a, (3, 5))[:, 4]),
]


@pytest.mark.parametrize("base,uf,nf", [v[1:] for v in VIEWS], ids=[v[0] for v in VIEWS])
def test_view(device, close, base, uf, nf):
    a = rand(base)
    x = ug.tensor(a, device=device)
    got = uf(x)
    expected = nf(a)
    assert got.shape == expected.shape
    assert got.ndim == expected.ndim
    assert got.size == expected.size
    assert got.device == device
    close(got, np.array(expected))
    # the source is unchanged and still usable
    close(x, a)


@pytest.mark.parametrize("base,uf,nf", [v[1:] for v in VIEWS], ids=[v[0] for v in VIEWS])
def test_view_of_computed(device, close, base, uf, nf):
    a = rand(base)
    x = ug.tensor(a, device=device)
    got = uf(x * 2 + 1) * 3 - 1
    expected = (nf(a * np.float32(2) + np.float32(1)) * np.float32(3) - np.float32(1)).astype(np.float32)
    close(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("base,uf,nf", [v[1:] for v in VIEWS if v[1] != ()], ids=[v[0] for v in VIEWS if v[1] != ()])
def test_view_dtypes(device, close, require_dtype, base, uf, nf):
    for dt in (np.int32, np.bool_, np.float64):
        require_dtype(dt)
        a = RNG.integers(-3, 4, size=base).astype(dt)
        close(uf(ug.tensor(a, device=device)), np.array(nf(a)))


def test_views_share_base(device, close):
    a = rand((4, 6))
    x = ug.tensor(a, device=device)
    got = x[0] + x[1] * x[-1] + x.T[:, 2]
    close(got, a[0] + a[1] * a[-1] + a.T[:, 2], rtol=1e-6)
    got2 = x[:, :3] - x[:, 3:]
    close(got2, a[:, :3] - a[:, 3:])
    got3 = x[::2] + x[1::2]
    close(got3, a[::2] + a[1::2])


def test_views_of_realized_result(device, close):
    a = rand((4, 6))
    y = (ug.tensor(a, device=device) * 2).realize()
    close(y.T[1:, ::2], (a * 2).T[1:, ::2])
    close(y.reshape(3, 8)[1], (a * 2).reshape(3, 8)[1])
    close(y[2, 3], (a * 2)[2, 3])


def test_view_then_reduce_then_view(device, close):
    a = rand((4, 6, 5))
    x = ug.tensor(a, device=device)
    got = x.permute(2, 0, 1)[::2].sum(axis=1).T[1:]
    expected = a.transpose(2, 0, 1)[::2].sum(axis=1).T[1:]
    close(got, expected, rtol=1e-5, atol=1e-5)


def test_index_scalar_item(device):
    a = rand((3, 4))
    x = ug.tensor(a, device=device)
    v = x[1, 2]
    assert v.shape == ()
    assert v.item() == pytest.approx(float(a[1, 2]))
    assert x.T[3, 0].item() == pytest.approx(float(a[0, 3]))


def test_broadcast_to_then_elementwise(device, close):
    a, b = rand((3, 1)), rand((4,))
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    close(x.broadcast_to((3, 4)) + y, a + b)
    close(x.broadcast_to((2, 3, 4)) * y.broadcast_to((2, 3, 4)), np.broadcast_to(a, (2, 3, 4)) * b)


def test_large_strided_view(device, close):
    a = rand((64, 96))
    x = ug.tensor(a, device=device)
    got = x.T[5::3, 7:60:2].reshape(-1)
    close(got, a.T[5::3, 7:60:2].reshape(-1))


def test_flatten_is_row_major(device, close):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = ug.tensor(a, device=device)
    close(x.permute(1, 2, 0).flatten(), a.transpose(1, 2, 0).flatten())
    close(x.reshape(4, 6), a.reshape(4, 6))


def test_boolean_masks_with_a_zero_dim_select_nothing(device):
    # a mask dim of 0 against an axis of any size selects nothing (numpy's and the standard's rule);
    # other mismatches are an IndexError
    for xs, ms in [((1,), (0,)), ((2, 3), (0, 3)), ((2, 3), (2, 0)), ((2, 3, 4), (0, 3))]:
        a = np.arange(np.prod(xs), dtype=np.float32).reshape(xs)
        m = np.zeros(ms, bool)
        got = ug.tensor(a, device=device)[ug.tensor(m, device=device)]
        assert got.shape == a[m].shape and got.numpy().size == 0
    with pytest.raises(IndexError, match=r"\(3, 3\)"):
        ug.tensor(np.ones((2, 3), np.float32), device=device)[ug.tensor(np.ones((3, 3), bool), device=device)]
