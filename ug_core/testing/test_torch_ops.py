"""torch's ops that tinygrad's op tests use, on every device, against numpy references:
logcumsumexp, unfold / Tensor.unfold, max_unpool2d, pad(mode='wrap'), integer linspace, the
bicubic and area interpolations, adaptive max pooling's indices; and the gradients of relu6 /
hardtanh at their bounds and of acosh / atanh at and outside their domain's edge (torch's)."""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.data import rand


# --- logcumsumexp ----------------------------------------------------------------------------------


def logcumsumexp_ref(x, axis):
    """float64 log(cumsum(exp(x))) through a running logaddexp (numpy's, exact enough)."""
    return np.logaddexp.accumulate(x.astype(np.float64), axis=axis)


@pytest.mark.parametrize("shape, axis", [((45, 65), 0), ((45, 65), 1), ((6, 6, 6), 1), ((3, 200), -1), ((1100,), 0)],
                         ids=str)
def test_logcumsumexp(device, shape, axis, rng):
    x = (rand(shape) * 6).astype(np.float32)
    got = ug.logcumsumexp(ug.tensor(x, device=device), axis=axis)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got.numpy(), logcumsumexp_ref(x, axis), rtol=2e-6, atol=2e-6)


def test_logcumsumexp_is_stable(device):
    x = np.array([0.0, 100.0, -200.0, 300.0, -np.inf, 300.0], np.float32)
    got = ug.logcumsumexp(ug.tensor(x, device=device)).numpy()
    want = np.array([0.0, 100.0, 100.0, 300.0, 300.0, 300.0 + np.log(2.0)], np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-7)
    x = np.array([-np.inf, -np.inf, 1.0, np.inf], np.float32)   # -inf adds nothing; inf stays
    np.testing.assert_array_equal(ug.logcumsumexp(ug.tensor(x, device=device)).numpy(), [-np.inf, -np.inf, 1.0, np.inf])
    np.testing.assert_array_equal(ug.logcumsumexp(ug.tensor(np.float32(2.5), device=device)).numpy(), np.float32(2.5))


def test_logcumsumexp_gradient(device, require_dtype, rng):
    require_dtype(np.float64)
    from ug_core.testing.test_autodiff import check_grad
    for shape, axis in (((3, 7), 1), ((40, 2), 0)):   # a direct line and a blocked one
        check_grad(device, rng, lambda x: ug.logcumsumexp(x, axis=axis), rng.standard_normal(shape) * 2)


def test_logcumsumexp_errors(device):
    with pytest.raises(ValueError, match="axis is required"):
        ug.logcumsumexp(ug.tensor(np.zeros((2, 3), np.float32), device=device))
    with pytest.raises(ValueError, match="out of range"):
        ug.logcumsumexp(ug.tensor(np.float32(1.0), device=device), axis=1)


# --- derivatives at the edges (torch's) -------------------------------------------------------------


def _grad_of_sum(fn, x, device):
    return ug.grad(lambda t: fn(t).sum())(ug.tensor(x, device=device)).numpy()


def test_hardtanh_and_relu6_derivative_is_zero_at_the_bounds(device):
    x = np.array([-2.0, -1.0, -0.5, 0.0, 1.0, 2.0, np.nan], np.float32)
    np.testing.assert_array_equal(_grad_of_sum(ug.nn.hardtanh, x, device), [0, 0, 1, 1, 0, 0, 1])
    x = np.array([-1.0, 0.0, 3.0, 6.0, 7.0], np.float32)
    np.testing.assert_array_equal(_grad_of_sum(ug.nn.relu6, x, device), [0, 0, 1, 0, 0])
    # (clip keeps its own rule: 1 at the bounds)
    np.testing.assert_array_equal(_grad_of_sum(lambda t: ug.clip(t, 0.0, 6.0), x, device), [0, 1, 1, 1, 0])


def test_acosh_and_atanh_derivatives_follow_the_formula_outside_the_domain(device):
    x = np.array([-300.0, -2.0, -1.0, 0.5, 1.0, 2.0, 1e30], np.float32)
    with np.errstate(all="ignore"):
        want = (1 / np.sqrt(np.abs(x).astype(np.float64) - 1) / np.sqrt(np.abs(x).astype(np.float64) + 1))
    np.testing.assert_allclose(_grad_of_sum(ug.acosh, x, device), want.astype(np.float32), rtol=1e-6)
    x = np.array([-300.0, -1.0, -0.5, 0.0, 0.5, 1.0, 300.0], np.float32)
    with np.errstate(all="ignore"):
        want = 1 / ((1 - x.astype(np.float64)) * (1 + x.astype(np.float64)))
    np.testing.assert_allclose(_grad_of_sum(ug.atanh, x, device), want.astype(np.float32), rtol=1e-6)


def test_acosh_and_atanh_gradient_inside_the_domain(device, require_dtype, rng):
    require_dtype(np.float64)
    from ug_core.testing.test_autodiff import check_grad
    check_grad(device, rng, ug.acosh, rng.uniform(1.1, 30.0, 12))
    check_grad(device, rng, ug.atanh, rng.uniform(-0.95, 0.95, 12))


def test_sdpa_grouped_query_attention(device, rng):
    q, k, v = rand((2, 6, 5, 4)), rand((2, 2, 5, 4)), rand((2, 2, 5, 3))
    got = ug.nn.scaled_dot_product_attention(*(ug.tensor(a, device=device) for a in (q, k, v)), enable_gqa=True)
    # the reference: every key / value head repeated for its 3 query heads
    kr, vr = np.repeat(k, 3, axis=1).astype(np.float64), np.repeat(v, 3, axis=1).astype(np.float64)
    s = q.astype(np.float64) @ kr.swapaxes(-1, -2) / 2.0
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ vr
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="multiple"):
        ug.nn.scaled_dot_product_attention(ug.tensor(rand((2, 5, 5, 4)), device=device), ug.tensor(k, device=device),
                                           ug.tensor(v, device=device), enable_gqa=True)


# --- unfold (im2col) and max_unpool ---------------------------------------------------------------


def unfold_ref(x, k, d, p, s):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    out = np.zeros((n, c, k[0], k[1], oh, ow), x.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            out[:, :, i, j] = xp[:, :, i * d[0]:i * d[0] + s[0] * (oh - 1) + 1:s[0], j * d[1]:j * d[1] + s[1] * (ow - 1) + 1:s[1]]
    return out.reshape(n, c * k[0] * k[1], oh * ow)


@pytest.mark.parametrize("k, d, p, s", [((3, 3), (1, 1), (0, 0), (1, 1)), ((2, 3), (2, 1), (1, 2), (2, 3))], ids=str)
def test_unfold_im2col(device, k, d, p, s):
    x = rand((2, 3, 7, 8))
    got = ug.nn.unfold(ug.tensor(x, device=device), k, dilation=d, padding=p, stride=s)
    np.testing.assert_array_equal(got.numpy(), unfold_ref(x, k, d, p, s))
    got = ug.nn.unfold(ug.tensor(x[0], device=device), k, dilation=d, padding=p, stride=s)   # unbatched
    np.testing.assert_array_equal(got.numpy(), unfold_ref(x[:1], k, d, p, s)[0])


def test_unfold_gradient_sums_the_windows(device, require_dtype, rng):
    require_dtype(np.float64)
    from ug_core.testing.test_autodiff import check_grad
    check_grad(device, rng, lambda x: ug.nn.unfold(x, 3, padding=1, stride=2), rng.standard_normal((1, 2, 5, 6)))


def test_max_unpool2d_inverts_max_pool2d(device):
    x = rand((2, 3, 9, 10))
    for kw, output_size in ((dict(kernel_size=2), None), (dict(kernel_size=3, stride=(2, 3), padding=1), (9, 10))):
        values, idx = ug.nn.max_pool2d(ug.tensor(x, device=device), return_indices=True, **kw)
        got = ug.nn.max_unpool2d(values, idx, output_size=output_size, **kw).numpy()
        flat_idx, flat_val = idx.numpy().reshape(2, 3, -1), values.numpy().reshape(2, 3, -1)
        oh = (values.shape[2] - 1) * (kw.get("stride") or (2, 2))[0] + kw["kernel_size"] - 2 * kw.get("padding", 0) \
            if output_size is None else output_size[0]
        ow = got.shape[3]
        want = np.zeros((2, 3, oh * ow), np.float32)
        for b in range(2):
            for c in range(3):
                want[b, c, flat_idx[b, c]] = flat_val[b, c]
        np.testing.assert_array_equal(got, want.reshape(2, 3, oh, ow))
        # every pooled maximum is back where it came from
        assert np.all((got == 0) | (got == x[:, :, :oh, :ow]))


def test_max_unpool_errors(device):
    v = ug.tensor(rand((1, 1, 2, 2)), device=device)
    i = ug.tensor(np.zeros((1, 1, 2, 2), np.int64), device=device)
    with pytest.raises(ValueError, match="within a stride"):
        ug.nn.max_unpool2d(v, i, 2, output_size=(7, 4))
    with pytest.raises(ValueError, match="input's shape"):
        ug.nn.max_unpool2d(v, i.reshape(1, 1, 4), 2)
    with pytest.raises(TypeError, match="integers"):
        ug.nn.max_unpool2d(v, v, 2)


# --- pad(mode='wrap'), integer linspace -------------------------------------------------------------


@pytest.mark.parametrize("widths", [((1, 2), (3, 4)), ((7, 8), (0, 12)), ((0, 0), (5, 5)), ((2, 0), (0, 1))], ids=str)
def test_pad_wrap(device, widths):
    x = rand((3, 5))
    np.testing.assert_array_equal(ug.pad(ug.tensor(x, device=device), widths, mode="wrap").numpy(),
                                  np.pad(x, widths, mode="wrap"))
    one = rand((1, 4))   # one element along an axis repeats it
    np.testing.assert_array_equal(ug.pad(ug.tensor(one, device=device), ((2, 3), (0, 0)), mode="wrap").numpy(),
                                  np.pad(one, ((2, 3), (0, 0)), mode="wrap"))


def test_pad_wrap_gradient(device, require_dtype, rng):
    require_dtype(np.float64)
    from ug_core.testing.test_autodiff import check_grad
    check_grad(device, rng, lambda x: ug.pad(x, ((1, 6), (2, 1)), mode="wrap"), rng.standard_normal((3, 4)))


@pytest.mark.parametrize("dt", [np.int32, np.int64, np.uint8, np.int16, np.bool_], ids=lambda d: np.dtype(d).name)
def test_integer_linspace_rounds_down_as_numpy(device, require_dtype, dt):
    require_dtype(dt)
    for start, stop, num in ((5, 10, 3), (5, 10, 20), (5, -5, 20), (-5.5, 5.5, 10), (0, 10, 5), (3, 9, 0)):
        if np.dtype(dt).kind == "u" and min(start, stop) < 0:
            continue
        want = np.linspace(start, stop, num, dtype=dt)
        got = ug.linspace(start, stop, num, dtype=dt, device=device).numpy()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


# --- interpolate: bicubic and area; adaptive max pooling's indices ---------------------------------


def cubic_ref(x, out_h, out_w, align_corners):
    """torch's bicubic upsampling (a = -0.75, taps clamped at the border), in float64 loops."""
    def taps(n, m):
        s = (n - 1) / (m - 1) if align_corners and m > 1 else (0.0 if align_corners else n / m)
        a = -0.75
        rows = []
        for i in range(m):
            src = s * i if align_corners else s * (i + 0.5) - 0.5
            f = np.floor(src)
            t = src - f
            w = [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a, ((a + 2) * t - (a + 3)) * t * t + 1,
                 ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
                 ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]
            rows.append([(int(min(max(f - 1 + j, 0), n - 1)), w[j]) for j in range(4)])
        return rows
    th, tw = taps(x.shape[2], out_h), taps(x.shape[3], out_w)
    out = np.zeros(x.shape[:2] + (out_h, out_w))
    for i in range(out_h):
        for j in range(out_w):
            out[:, :, i, j] = sum(wh * ww * x[:, :, ih, iw].astype(np.float64) for ih, wh in th[i] for iw, ww in tw[j])
    return out


@pytest.mark.parametrize("size, align_corners", [((11, 5), False), ((14, 18), True), ((3, 4), False)], ids=str)
def test_interpolate_bicubic(device, size, align_corners):
    x = rand((2, 3, 7, 9))
    got = ug.nn.interpolate(ug.tensor(x, device=device), size=size, mode="bicubic", align_corners=align_corners)
    np.testing.assert_allclose(got.numpy(), cubic_ref(x, *size, align_corners), rtol=1e-5, atol=1e-5)


def test_interpolate_area_is_adaptive_average_pooling(device):
    x = rand((2, 3, 7, 9))
    for size in ((3, 4), (10, 13), (7, 9)):
        got = ug.nn.interpolate(ug.tensor(x, device=device), size=size, mode="area").numpy()
        want = np.zeros(x.shape[:2] + size)
        for i in range(size[0]):
            for j in range(size[1]):
                h0, h1 = (i * 7) // size[0], -((-(i + 1) * 7) // size[0])
                w0, w1 = (j * 9) // size[1], -((-(j + 1) * 9) // size[1])
                want[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="align_corners"):
        ug.nn.interpolate(ug.tensor(x, device=device), size=(3, 4), mode="area", align_corners=True)


@pytest.mark.parametrize("shape, size", [((2, 3, 7, 9), (3, 4)), ((2, 3, 8, 8), (4, 2)), ((3, 5, 6), (5, 4))], ids=str)
def test_adaptive_max_pool2d_indices(device, shape, size):
    x = rand(shape)
    values, idx = ug.nn.adaptive_max_pool2d(ug.tensor(x, device=device), size, return_indices=True)
    assert idx.dtype == np.int64
    xb = x.reshape(-1, *shape[-2:])
    h, w = shape[-2:]
    want_v, want_i = np.zeros((xb.shape[0],) + size, x.dtype), np.zeros((xb.shape[0],) + size, np.int64)
    for i in range(size[0]):
        for j in range(size[1]):
            h0, h1 = (i * h) // size[0], -((-(i + 1) * h) // size[0])
            w0, w1 = (j * w) // size[1], -((-(j + 1) * w) // size[1])
            win = xb[:, h0:h1, w0:w1].reshape(xb.shape[0], -1)
            k = win.argmax(axis=1)
            want_v[:, i, j] = win.max(axis=1)
            want_i[:, i, j] = (h0 + k // (w1 - w0)) * w + w0 + k % (w1 - w0)
    np.testing.assert_array_equal(values.numpy().reshape(want_v.shape), want_v)
    np.testing.assert_array_equal(idx.numpy().reshape(want_i.shape), want_i)
    # the values equal the plain pooling's
    np.testing.assert_array_equal(values.numpy(), ug.nn.adaptive_max_pool2d(ug.tensor(x, device=device), size).numpy())
