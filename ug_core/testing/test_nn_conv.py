"""ug.nn's convolutions, pooling, interpolation and ug.einsum against numpy references written
here (loops over kernel taps), in float32 and float64, on every device; the kernels they fuse
into (a conv2d forward: the im2col copy (or, where the matmul reads split operands, as on cpu, a
padded copy of the input that it reads as its im2col matrix), one matmul, the bias in its epilogue
kernel; a depthwise conv, a pooling, an interpolation: one kernel each)."""
import itertools
import math

import numpy as np
import pytest

import ug_core as ug


def kernels(*tensors) -> int:
    return sum(1 for item in ug.schedule(*tensors).items if item.kind == "kernel")


def matmuls(*tensors) -> int:
    return sum(1 for item in ug.schedule(*tensors).items if item.kind == "matmul")


# --- numpy references -------------------------------------------------------------------------


def ref_conv(x, w, b, stride, pads, dilation, groups):
    """Cross-correlation: per tap, the strided slice of the padded input times the tap's weights."""
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + list(pads))
    k = w.shape[2:]
    outs = [(n - d * (kk - 1) - 1) // s + 1 for n, kk, s, d in zip(xp.shape[2:], k, stride, dilation)]
    o, cg = w.shape[:2]
    og = o // groups
    out = np.zeros((x.shape[0], o, *outs), np.result_type(x, w))
    for g in range(groups):
        for tap in itertools.product(*(range(kk) for kk in k)):
            sl = tuple(slice(t * d, t * d + (m - 1) * s + 1, s) for t, d, m, s in zip(tap, dilation, outs, stride))
            xs = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            w_tap = w[(slice(g * og, (g + 1) * og), slice(None)) + tap]
            out[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", xs, w_tap)
    if b is not None:
        out += b.reshape(1, -1, *(1,) * nd)
    return out


def ref_conv_transpose(x, w, stride, padding, output_padding, dilation, groups):
    """The scatter definition: input element i of tap t lands at i * stride + t * dilation - padding."""
    k = w.shape[2:]
    cg, og = x.shape[1] // groups, w.shape[1]
    full = [(i - 1) * s + d * (kk - 1) + 1 + op
            for i, s, d, kk, op in zip(x.shape[2:], stride, dilation, k, output_padding)]
    out = np.zeros((x.shape[0], og * groups, *full), np.result_type(x, w))
    for g in range(groups):
        for tap in itertools.product(*(range(kk) for kk in k)):
            w_tap = w[(slice(g * cg, (g + 1) * cg), slice(None)) + tap]
            y = np.einsum("nc...,co->no...", x[:, g * cg:(g + 1) * cg], w_tap)
            sl = tuple(slice(t * d, t * d + (i - 1) * s + 1, s)
                       for t, d, i, s in zip(tap, dilation, x.shape[2:], stride))
            out[(slice(None), slice(g * og, (g + 1) * og)) + sl] += y
    crop = tuple(slice(p, n - p) for p, n in zip(padding, full))
    return out[(slice(None), slice(None)) + crop]


def pool_size(n, k, s, p, d, ceil_mode):
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    return out - 1 if ceil_mode and (out - 1) * s >= n + p else out


def ref_max_pool(x, k, s, p, d, ceil_mode):
    """(values, flat indices): per output position, the first maximum of its window."""
    nd = x.ndim - 2
    sp = x.shape[2:]
    outs = [pool_size(n, kk, ss, pp, dd, ceil_mode) for n, kk, ss, pp, dd in zip(sp, k, s, p, d)]
    values = np.full(x.shape[:2] + tuple(outs), -np.inf, x.dtype)
    index = np.zeros(values.shape, np.int64)
    for pos in itertools.product(*(range(m) for m in outs)):
        for tap in itertools.product(*(range(kk) for kk in k)):
            coord = [o * ss - pp + t * dd for o, ss, pp, t, dd in zip(pos, s, p, tap, d)]
            if not all(0 <= c < n for c, n in zip(coord, sp)):
                continue
            v = x[(slice(None), slice(None)) + tuple(coord)]
            here = (slice(None), slice(None)) + pos
            better = v > values[here]
            values[here] = np.where(better, v, values[here])
            index[here] = np.where(better, np.ravel_multi_index(coord, sp), index[here])
    assert nd == len(k)
    return values, index


def ref_avg_pool(x, k, s, p, ceil_mode, count_include_pad, divisor=None):
    sp = x.shape[2:]
    outs = [pool_size(n, kk, ss, pp, 1, ceil_mode) for n, kk, ss, pp in zip(sp, k, s, p)]
    out = np.zeros(x.shape[:2] + tuple(outs), x.dtype)
    for pos in itertools.product(*(range(m) for m in outs)):
        lo = [o * ss - pp for o, ss, pp in zip(pos, s, p)]
        hi = [min(a + kk, n + pp) for a, kk, n, pp in zip(lo, k, sp, p)]
        size = math.prod(b - a for a, b in zip(lo, hi))
        lo = [max(a, 0) for a in lo]
        hi = [min(b, n) for b, n in zip(hi, sp)]
        window = x[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in zip(lo, hi))]
        count = divisor or (size if count_include_pad else math.prod(b - a for a, b in zip(lo, hi)))
        out[(slice(None), slice(None)) + pos] = window.sum(axis=tuple(range(2, x.ndim))) / count
    return out


def ref_interpolate(x, outs, mode, align_corners):
    """Per dim, torch's source coordinate (scale = in / out); nearest: floor(dst * scale)."""
    out = x
    for a, m in enumerate(outs):
        axis = 2 + a
        n = x.shape[axis]
        dst = np.arange(m, dtype=np.float64)
        if mode == "nearest":
            src = np.minimum(np.floor(dst * (n / m)).astype(np.int64), n - 1)
            out = np.take(out, src, axis=axis)
            continue
        if align_corners:
            src = dst * ((n - 1) / (m - 1) if m > 1 else 0.0)
        else:
            src = np.maximum((dst + 0.5) * (n / m) - 0.5, 0.0)
        i0 = np.floor(src).astype(np.int64)
        i1 = np.minimum(i0 + 1, n - 1)
        lam = (src - i0).reshape(-1, *(1,) * (x.ndim - axis - 1))
        out = np.take(out, i0, axis=axis) * (1 - lam) + np.take(out, i1, axis=axis) * lam
    return out.astype(x.dtype)


# --- tests ----------------------------------------------------------------------------------

DTYPES = [np.float32, np.float64]

CONV_CASES = [  # nd, input spatial, kernel, stride, padding, dilation, groups, bias
    (1, (9,), (3,), 1, 1, 1, 1, True),
    (1, (10,), (2,), 2, 0, 2, 2, False),
    (2, (7, 8), (3, 3), 1, 1, 1, 1, True),
    (2, (9, 7), (3, 2), 2, 2, 1, 2, False),
    (2, (8, 8), (3, 3), 1, "same", 2, 1, True),
    (2, (6, 7), (3, 3), 1, 1, 1, 4, True),        # depthwise: the taps form
    (3, (4, 5, 4), (2, 3, 2), (1, 2, 1), 1, 1, 1, True),
]


def _tuple(v, nd):
    return (v,) * nd if isinstance(v, int) else tuple(v)


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
@pytest.mark.parametrize("dtype", DTYPES)
def test_conv(device, case, dtype, rng, close, require_dtype):
    require_dtype(dtype)
    nd, sp, k, stride, padding, dilation, groups, bias = CONV_CASES[case]
    c, o = 4, 8 if groups != 4 else 4
    x = rng.standard_normal((2, c, *sp)).astype(dtype)
    w = rng.standard_normal((o, c // groups, *k)).astype(dtype)
    b = rng.standard_normal(o).astype(dtype) if bias else None
    s, d = _tuple(stride, nd), _tuple(dilation, nd)
    if padding == "same":
        pads = [(dd * (kk - 1) // 2, dd * (kk - 1) - dd * (kk - 1) // 2) for kk, dd in zip(k, d)]
    else:
        pads = [(p, p) for p in _tuple(padding, nd)]
    fn = getattr(ug.nn, f"conv{nd}d")
    got = fn(ug.tensor(x, device=device), ug.tensor(w, device=device),
             ug.tensor(b, device=device) if bias else None, stride, padding, dilation, groups)
    close(got, ref_conv(x, w, b, s, pads, d, groups), *((1e-4, 1e-5) if dtype == np.float32 else ()))


CONV_T_CASES = [  # nd, input spatial, kernel, stride, padding, output_padding, dilation, groups
    (1, (5,), (3,), 2, 1, 1, 1, 1),
    (2, (4, 5), (3, 3), 2, 1, 1, 1, 1),
    (2, (4, 3), (2, 3), (3, 1), (0, 2), (1, 0), (1, 2), 2),
    (3, (3, 2, 3), (2, 2, 3), 2, 0, (1, 0, 0), 1, 2),
]


@pytest.mark.parametrize("case", range(len(CONV_T_CASES)))
@pytest.mark.parametrize("dtype", DTYPES)
def test_conv_transpose(device, case, dtype, rng, close, require_dtype):
    require_dtype(dtype)
    nd, sp, k, stride, padding, out_pad, dilation, groups = CONV_T_CASES[case]
    c, og = 4, 3
    x = rng.standard_normal((2, c, *sp)).astype(dtype)
    w = rng.standard_normal((c, og, *k)).astype(dtype)
    got = getattr(ug.nn, f"conv_transpose{nd}d")(ug.tensor(x, device=device), ug.tensor(w, device=device), None,
                                                 stride, padding, out_pad, groups, dilation)
    want = ref_conv_transpose(x, w, _tuple(stride, nd), _tuple(padding, nd), _tuple(out_pad, nd),
                              _tuple(dilation, nd), groups)
    close(got, want, *((1e-4, 1e-5) if dtype == np.float32 else ()))


POOL_CASES = [  # nd, input spatial, kernel, stride, padding, dilation, ceil_mode
    (1, (11,), 3, 2, 1, 1, True),
    (2, (7, 8), 2, None, 0, 1, False),
    (2, (9, 7), 3, 2, 1, 1, True),
    (2, (8, 9), (3, 2), (1, 2), (1, 0), (2, 1), False),
    (3, (5, 6, 5), 2, (1, 2, 2), 1, 1, True),
]


@pytest.mark.parametrize("case", range(len(POOL_CASES)))
@pytest.mark.parametrize("dtype", DTYPES)
def test_pooling(device, case, dtype, rng, close, require_dtype):
    require_dtype(dtype)
    nd, sp, k, stride, padding, dilation, ceil_mode = POOL_CASES[case]
    x = rng.standard_normal((2, 3, *sp)).astype(dtype)
    t = ug.tensor(x, device=device)
    kk, pp, dd = _tuple(k, nd), _tuple(padding, nd), _tuple(dilation, nd)
    ss = kk if stride is None else _tuple(stride, nd)
    values, index = getattr(ug.nn, f"max_pool{nd}d")(t, k, stride, padding, dilation, ceil_mode, return_indices=True)
    want_values, want_index = ref_max_pool(x, kk, ss, pp, dd, ceil_mode)
    close(values, want_values)
    assert index.dtype == np.int64
    np.testing.assert_array_equal(index.numpy(), want_index)
    if dilation == 1:
        for include in (True, False):
            got = getattr(ug.nn, f"avg_pool{nd}d")(t, k, stride, padding, ceil_mode, include)
            close(got, ref_avg_pool(x, kk, ss, pp, ceil_mode, include))
        got = getattr(ug.nn, f"avg_pool{nd}d")(t, k, stride, padding, ceil_mode, True, 5)
        close(got, ref_avg_pool(x, kk, ss, pp, ceil_mode, True, divisor=5))


@pytest.mark.parametrize("out", [(2, 3), (3, 4), (1, 1)])
def test_adaptive_pooling(device, out, rng, close):
    x = rng.standard_normal((2, 3, 6, 9)).astype(np.float32)
    t = ug.tensor(x, device=device)
    want_avg = np.zeros((2, 3, *out), np.float32)
    want_max = np.zeros((2, 3, *out), np.float32)
    for i, j in itertools.product(range(out[0]), range(out[1])):
        rows = slice(i * 6 // out[0], -(-(i + 1) * 6 // out[0]))
        cols = slice(j * 9 // out[1], -(-(j + 1) * 9 // out[1]))
        want_avg[:, :, i, j] = x[:, :, rows, cols].mean(axis=(2, 3))
        want_max[:, :, i, j] = x[:, :, rows, cols].max(axis=(2, 3))
    close(ug.nn.adaptive_avg_pool2d(t, out), want_avg)
    close(ug.nn.adaptive_max_pool2d(t, out), want_max)


INTERP_CASES = [  # spatial, size, mode, align_corners
    ((7,), (12,), "linear", False),
    ((5, 6), (9, 4), "bilinear", False),
    ((5, 6), (10, 12), "bilinear", True),
    ((5, 6), (1, 3), "bilinear", True),
    ((5, 6), (10, 12), "nearest", None),
    ((6, 5), (4, 7), "nearest", None),
    ((3, 4, 2), (5, 3, 4), "trilinear", False),
]


@pytest.mark.parametrize("case", range(len(INTERP_CASES)))
@pytest.mark.parametrize("dtype", DTYPES)
def test_interpolate(device, case, dtype, rng, close, require_dtype):
    require_dtype(dtype)
    sp, size, mode, align = INTERP_CASES[case]
    x = rng.standard_normal((2, 3, *sp)).astype(dtype)
    got = ug.nn.interpolate(ug.tensor(x, device=device), size=size, mode=mode, align_corners=align)
    # (float32: ug's weights are float32 as torch's, the reference's float64; a lerp of values of
    # about 1 to a result near 0 keeps their absolute error, a few 1e-7)
    close(got, ref_interpolate(x, size, mode, align), *((1e-5, 1e-5) if dtype == np.float32 else (1e-6, 1e-7)))


EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]),
    ("iij->j", [(3, 3, 4)]),
    ("ij->", [(2, 3)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 6)]),
    ("ij,ij->ij", [(1, 3), (2, 3)]),
    ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 6)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
]


@pytest.mark.parametrize("case", range(len(EINSUM_CASES)))
def test_einsum(device, case, rng, close):
    subscripts, shapes = EINSUM_CASES[case]
    ops = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    # numpy broadcasts size-1 labeled dims only through an ellipsis: its reference takes them broadcast
    full = [np.broadcast_to(o, (2, 3)).copy() for o in ops] if subscripts == "ij,ij->ij" else ops
    got = ug.einsum(subscripts, *(ug.tensor(o, device=device) for o in ops))
    close(got, np.einsum(subscripts, *full), 1e-5, 1e-5)


def test_fused_kernel_counts(device):
    """conv2d with a bias: the im2col copy (or the padded input the matmul reads in place), one
    matmul, the bias in the kernel after it (the matmul's epilogue where the device has one); depthwise: one kernel; pooling and interpolation
    one kernel each."""
    def data(*shape):   # tensors with buffers (ug.ones is a lazy constant a matmul would copy)
        return ug.tensor(np.ones(shape, np.float32), device=device)

    x = data(2, 4, 9, 9)
    conv = ug.nn.conv2d(x, data(8, 4, 3, 3), data(8), padding=1)
    assert (kernels(conv), matmuls(conv)) == (2, 1)
    depthwise = ug.nn.conv2d(x, data(4, 1, 3, 3), padding=1, groups=4).relu()
    assert (kernels(depthwise), matmuls(depthwise)) == (1, 0)
    assert kernels(ug.nn.max_pool2d(x, 2)) == 1
    assert kernels(ug.nn.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)) == 1
    assert kernels(ug.nn.interpolate(x, scale_factor=2, mode="bilinear")) == 1
    assert kernels(ug.nn.interpolate(x, size=(5, 13))) == 1
