"""ug.nn's convolutions, pooling, interpolate and ug.einsum against torch.nn.functional / torch.einsum
over many parameter combinations (float64, on the default device), and the errors bad arguments
raise when the op is built.

Convolution forms (ug_core/nn/conv.py: im2col matmul vs the direct sum over taps), measured on
the cpu device (2 shared cores, float32, 3x3 kernels, padding 1, bias; best of 5, ms):

    case                          im2col         taps (direct)    chosen
    64x1x28x28, 1->32             2.6 (2 kern.)  3.5 (1 kern.)    im2col
    64x32x28x28, 32->64           32.5           373              im2col
    1x64x224x224, 64->64          85-284 (noisy) 373              im2col
    64x32x28x28, 32->64 groups=8  51             90               im2col
    64x32x28x28 depthwise         23             3.5              taps
    1x64x224x224 depthwise        79             5.4              taps
"""
import itertools

import numpy as np
import pytest

import ug_core as ug

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(24)


def data(*shape):
    return RNG.standard_normal(shape)


def check(got, want, rtol=1e-10, atol=1e-12):
    want = want.numpy()
    got = got.numpy()
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


T = torch.from_numpy
U = ug.tensor

SPATIAL = {1: (10,), 2: (8, 9), 3: (5, 6, 5)}
KERNELS = {1: (3,), 2: (3, 2), 3: (2, 3, 2)}


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("stride,padding,dilation,groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), (1, "same", 2, 1), (1, "valid", 1, 2), (2, 2, 2, 2), (3, 1, 1, 4), (1, 1, 1, 8),
    ((1, 2, 1), (0, 1, 2), (2, 1, 1), 1)])
@pytest.mark.parametrize("bias", [False, True])
def test_conv(nd, stride, padding, dilation, groups, bias):
    def per_dim(v):
        return v[:nd] if isinstance(v, tuple) else v
    stride, padding, dilation = per_dim(stride), per_dim(padding), per_dim(dilation)
    c, o = 8, 16 if groups != 8 else 8
    x, w, b = data(2, c, *SPATIAL[nd]), data(o, c // groups, *KERNELS[nd]), data(o)
    fn = f"conv{nd}d"
    want = getattr(F, fn)(T(x), T(w), T(b) if bias else None, stride, padding, dilation, groups)
    got = getattr(ug.nn, fn)(U(x), U(w), U(b) if bias else None, stride, padding, dilation, groups)
    check(got, want)


def test_conv_unbatched_and_float32():
    x, w = data(3, 9, 9).astype(np.float32), data(5, 3, 3, 3).astype(np.float32)
    check(ug.nn.conv2d(U(x), U(w), padding=1), F.conv2d(T(x), T(w), padding=1), 1e-5, 1e-5)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups", [
    (1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (3, 2, 1, 2, 2), (2, 0, 1, 3, 4), (1, 2, 0, 1, 2), (2, 3, 0, 1, 1),
    ((2, 1, 3), (1, 0, 2), (1, 0, 2), (1, 2, 1), 1)])
def test_conv_transpose(nd, stride, padding, output_padding, dilation, groups):
    def per_dim(v):
        return v[:nd] if isinstance(v, tuple) else v
    stride, padding, output_padding, dilation = map(per_dim, (stride, padding, output_padding, dilation))
    c, o_g = 4, 3
    x, w, b = data(2, c, *SPATIAL[nd]), data(c, o_g, *KERNELS[nd]), data(o_g * groups)
    fn = f"conv_transpose{nd}d"
    want = getattr(F, fn)(T(x), T(w), T(b), stride, padding, output_padding, groups, dilation)
    got = getattr(ug.nn, fn)(U(x), U(w), U(b), stride, padding, output_padding, groups, dilation)
    check(got, want)


@pytest.mark.parametrize("k,stride,padding,output_padding,dilation", [
    (2, 3, 0, 0, 1), (2, 3, 1, 2, 1), (1, 4, 0, 3, 1), (3, 4, 2, 1, 2), (4, 2, 3, 1, 2), (3, 6, 1, 0, 4),
    (5, 3, 4, 2, 3), (2, 2, 2, 0, 1)])
def test_conv_transpose_phases(k, stride, padding, output_padding, dilation):
    """Strided transposes run one stride-1 convolution per output phase: strides past the kernel
    (phases with no tap), dilations sharing a factor with the stride, crops of the input, all
    against torch, with the gradients of input and weight."""
    x, w = data(2, 4, 5, 4), data(4, 3, k, 2)
    args = ((stride, 2), (padding, 0), (output_padding, 1), 2, (dilation, 1))
    want_x = T(x).requires_grad_()
    want_w = T(w).requires_grad_()
    want = F.conv_transpose2d(want_x, want_w, None, *args)
    ux, uw = U(x), U(w)
    got = ug.nn.conv_transpose2d(ux, uw, None, *args)
    check(got, want.detach())
    g = data(*want.shape)
    want.backward(T(g))
    gx, gw = ug.vjp(lambda a, b: ug.nn.conv_transpose2d(a, b, None, *args), ux, uw)[1](U(g))
    check(gx, want_x.grad)
    check(gw, want_w.grad)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", [
    (2, None, 0, 1, False), (3, 2, 1, 1, True), (3, 2, 1, 2, False), (2, 3, 1, 1, True), (3, 1, 0, 1, False),
    (3, 3, 1, 1, True), ((3, 2, 2), (2, 1, 3), (1, 1, 0), (1, 2, 1), True)])
def test_max_pool(nd, kernel, stride, padding, dilation, ceil_mode):
    def per_dim(v):
        return v[:nd] if isinstance(v, tuple) else v
    kernel, stride, padding, dilation = map(per_dim, (kernel, stride, padding, dilation))
    x = data(2, 3, *(s + 1 for s in SPATIAL[nd]))
    fn = f"max_pool{nd}d"
    want_v, want_i = getattr(F, fn)(T(x), kernel, stride, padding, dilation, ceil_mode, True)
    got_v, got_i = getattr(ug.nn, fn)(U(x), kernel, stride, padding, dilation, ceil_mode, True)
    check(got_v, want_v)
    check(got_i, want_i)
    check(getattr(ug.nn, fn)(U(x), kernel, stride, padding, dilation, ceil_mode), want_v)


def test_max_pool_ints_and_ties():
    x = RNG.integers(-3, 3, (2, 3, 9, 8))   # many ties: torch's index is the window's first maximum
    want_v, want_i = F.max_pool2d(T(x).double(), 3, 2, 1, return_indices=True)
    got_v, got_i = ug.nn.max_pool2d(U(x), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(got_v.numpy(), want_v.numpy().astype(np.int64))
    np.testing.assert_array_equal(got_i.numpy(), want_i.numpy())


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("kernel,stride,padding,ceil_mode", [
    (2, None, 0, False), (3, 2, 1, True), (3, 2, 1, False), (2, 3, 1, True), (3, 1, 0, False), (3, 3, 1, True),
    ((3, 2, 2), (2, 1, 3), (1, 1, 0), True)])
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("divisor_override", [None, 3])
def test_avg_pool(nd, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    def per_dim(v):
        return v[:nd] if isinstance(v, tuple) else v
    kernel, stride, padding = map(per_dim, (kernel, stride, padding))
    x = data(2, 3, *(s + 1 for s in SPATIAL[nd]))
    fn = f"avg_pool{nd}d"
    args = (kernel, stride, padding, ceil_mode, count_include_pad)
    if nd == 1:   # torch's avg_pool1d has no divisor_override: avg_pool2d's over a size-1 dim
        k2, s2, p2 = ((a, v[0] if isinstance(v, tuple) else v) if v is not None else None
                      for a, v in ((1, kernel), (1, stride), (0, padding)))
        want = F.avg_pool2d(T(x)[:, :, None], k2, s2, p2, ceil_mode, count_include_pad, divisor_override)[:, :, 0]
    else:
        want = getattr(F, fn)(T(x), *args, divisor_override)
    check(getattr(ug.nn, fn)(U(x), *args, divisor_override), want)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("out", [1, 2, 3, 4, 7])
def test_adaptive_pool(nd, out):
    x = data(2, 3, *(s + 1 for s in SPATIAL[nd]))
    check(getattr(ug.nn, f"adaptive_avg_pool{nd}d")(U(x), out), getattr(F, f"adaptive_avg_pool{nd}d")(T(x), out))
    check(getattr(ug.nn, f"adaptive_max_pool{nd}d")(U(x), out), getattr(F, f"adaptive_max_pool{nd}d")(T(x), out))


def test_adaptive_pool_none_size():
    x = data(2, 3, 7, 5)
    check(ug.nn.adaptive_avg_pool2d(U(x), (None, 2)), F.adaptive_avg_pool2d(T(x), (None, 2)))


LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("how", [dict(size=13), dict(size=4), dict(size=1), dict(scale_factor=2),
                                 dict(scale_factor=1.7), dict(scale_factor=0.5), dict(scale_factor=3.3),
                                 dict(scale_factor=0.7, recompute_scale_factor=True)])
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "linear", "linear-ac"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_interpolate(nd, how, mode, dtype):
    x = data(2, 3, *SPATIAL[nd]).astype(dtype)
    align = None
    if mode.startswith("linear"):
        align = mode == "linear-ac"
        mode = LINEAR[nd]
    want = F.interpolate(T(x), mode=mode, align_corners=align, **how)
    got = ug.nn.interpolate(U(x), mode=mode, align_corners=align, **how)
    # (float32: torch's source coordinates may differ from ours by an ulp, a contracted fma)
    check(got, want, *((1e-5, 1e-5) if dtype == np.float32 else (1e-12, 1e-12)))


EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("ii->i", [(4, 4)]), ("ii", [(4, 4)]),
    ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("i,i->", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 6)]),
    ("ij,ij->ij", [(1, 3), (2, 3)]), ("iij->j", [(3, 3, 4)]), ("ijk,kl,lm->im", [(2, 3, 4), (4, 5), (5, 6)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 6)]),
    ("i,i,i->i", [(3,), (3,), (3,)]), ("...i->i", [(2, 3)]), ("Ba,aC", [(2, 3), (3, 4)]), (",i->i", [(), (3,)]),
    ("ij,kl->", [(2, 3), (4, 5)]), ("iji->j", [(3, 2, 3)]), ("ijk,ikj->i", [(2, 3, 4), (2, 4, 3)]),
    ("i...,j...", [(2, 3, 4), (5, 1, 4)]), ("ab,ab,ab->a", [(2, 3), (2, 3), (1, 3)]),
    ("ijkl,jl->ik", [(2, 3, 4, 5), (3, 5)]), ("nchw,oc->nohw", [(2, 3, 4, 5), (6, 3)]), ("i->", [(0,)]),
    ("ij,jk->ik", [(2, 0), (0, 3)]), ("a,b,c,d->dcba", [(2,), (3,), (1,), (2,)]),
    ("ab,cd,bc->ad", [(4, 5), (6, 7), (5, 6)]),
]


@pytest.mark.parametrize("subscripts,shapes", EINSUM)
def test_einsum(subscripts, shapes):
    ops = [data(*s) for s in shapes]
    want = torch.einsum(subscripts, *(T(o) for o in ops))
    got = ug.einsum(subscripts, *(U(o) for o in ops))
    check(got, want)
    check(ug.nn.einsum(subscripts, *(U(o) for o in ops)), want)


def test_einsum_forms_and_ints():
    a, b = data(3, 4), data(4, 5)
    check(ug.einsum(U(a), [0, 1], U(b), [1, 2], [0, 2]), T(a) @ T(b))
    check(ug.einsum(U(a), [0, 1], U(b), [1, 2]), T(a) @ T(b))
    check(ug.einsum("ij,jk", [U(a), U(b)]), T(a) @ T(b))
    ia, ib = RNG.integers(-5, 5, (3, 4)), RNG.integers(-5, 5, (4, 2))
    np.testing.assert_array_equal(ug.einsum("ij,jk->ik", U(ia), U(ib)).numpy(), ia @ ib)


def test_einsum_result_is_a_value_of_its_own():
    a = U(data(3, 3))
    out = ug.einsum("ij->ij", a)
    a[0, 0] = 100.0
    assert out.numpy()[0, 0] != 100.0


def test_einsum_greedy_order_uses_matmuls():
    a, b, c = U(data(8, 2)), U(data(2, 8)), U(data(8, 2))
    out = ug.einsum("ij,jk,kl->il", a, b, c)
    assert sum(1 for item in ug.schedule(out).items if item.kind == "matmul") == 2
    check(out, torch.einsum("ij,jk,kl->il", *(torch.from_numpy(t.numpy()) for t in (a, b, c))))


def test_conv_is_lazy_and_jits():
    x, w = U(data(2, 3, 6, 6)), U(data(4, 3, 3, 3))
    step = ug.jit(lambda x, w: ug.nn.max_pool2d(ug.nn.conv2d(x, w, padding=1).relu(), 2))
    want = F.max_pool2d(F.conv2d(T(x.numpy()), T(w.numpy()), padding=1).relu(), 2)
    for _ in range(3):
        check(step(x, w), want)


ERRORS = [
    (lambda: ug.nn.conv2d(U(data(3, 5)), U(data(4, 3, 3, 3))), ValueError, "expected a 3-d"),
    (lambda: ug.nn.conv2d(U(data(1, 2, 3, 4, 5, 6)), U(data(4, 3, 3, 3))), ValueError, "shape (1, 2, 3, 4, 5, 6)"),
    (lambda: ug.nn.conv2d(U(data(2, 3, 5, 5)), U(data(4, 3, 3))), ValueError, "weight must be 4-d"),
    (lambda: ug.nn.conv2d(U(data(2, 6, 5, 5)), U(data(4, 3, 3, 3)), groups=4), ValueError, "divisible by groups"),
    (lambda: ug.nn.conv2d(U(data(2, 6, 5, 5)), U(data(4, 2, 3, 3))), ValueError, "has 6"),
    (lambda: ug.nn.conv2d(U(data(2, 3, 2, 5)), U(data(4, 3, 3, 3))), ValueError, "larger than the padded input"),
    (lambda: ug.nn.conv2d(U(data(2, 3, 5, 5)), U(data(4, 3, 3, 3)), padding="full"), ValueError, "'full'"),
    (lambda: ug.nn.conv2d(U(data(2, 3, 5, 5)), U(data(4, 3, 3, 3)), stride=2, padding="same"), ValueError,
     "strided"),
    (lambda: ug.nn.conv2d(U(data(2, 3, 5, 5)), U(data(4, 3, 3, 3)), stride=0), ValueError, "stride must be >= 1"),
    (lambda: ug.nn.conv2d(U(data(2, 3, 5, 5)), U(data(4, 3, 3, 3)), stride=(1, 2, 3)), ValueError, "tuple of 2"),
    (lambda: ug.nn.conv2d(U(data(2, 3, 5, 5)), U(data(4, 3, 3, 3)), stride=1.5), TypeError, "stride"),
    (lambda: ug.nn.conv2d(U(data(2, 3, 5, 5)), U(data(4, 3, 3, 3)), U(data(3))), ValueError, "bias must have shape"),
    (lambda: ug.nn.conv2d(data(2, 3, 5, 5), U(data(4, 3, 3, 3))), TypeError, "input must be a ug Tensor"),
    (lambda: ug.nn.conv_transpose2d(U(data(2, 3, 5, 5)), U(data(4, 3, 3, 3))), ValueError, "expects 4 input"),
    (lambda: ug.nn.conv_transpose2d(U(data(2, 4, 5, 5)), U(data(4, 3, 3, 3)), stride=2, output_padding=2),
     ValueError, "output_padding"),
    (lambda: ug.nn.conv_transpose1d(U(data(2, 4, 2)), U(data(4, 3, 2)), padding=3), ValueError, "too small"),
    (lambda: ug.nn.max_pool2d(U(data(2, 3, 5, 5)), 3, padding=2), ValueError, "at most half"),
    (lambda: ug.nn.max_pool2d(U(data(2, 3, 2, 5)), 3), ValueError, "too small"),
    (lambda: ug.nn.max_pool2d(U(data(5, 5)), 2), ValueError, "expected a 3-d"),
    (lambda: ug.nn.avg_pool2d(U(RNG.integers(0, 3, (2, 3, 5, 5))), 2), TypeError, "floating-point"),
    (lambda: ug.nn.avg_pool2d(U(data(2, 3, 5, 5)), 2, divisor_override=0), ValueError, "divisor_override"),
    (lambda: ug.nn.adaptive_avg_pool2d(U(data(2, 3, 5, 5)), (2, 0)), ValueError, "must be positive"),
    (lambda: ug.nn.interpolate(U(data(2, 3, 5, 5)), size=4, mode="lanczos"), ValueError, "'lanczos'"),
    (lambda: ug.nn.interpolate(U(data(2, 3, 5)), size=4, mode="bicubic"), ValueError, "needs a 4-d input"),
    (lambda: ug.nn.interpolate(U(data(2, 3, 5, 5)), size=4, mode="linear"), ValueError, "needs a 3-d"),
    (lambda: ug.nn.interpolate(U(data(2, 3, 5, 5)), size=4, scale_factor=2), ValueError, "exactly one"),
    (lambda: ug.nn.interpolate(U(data(2, 3, 5, 5)), mode="nearest", size=4, align_corners=True), ValueError,
     "align_corners"),
    (lambda: ug.nn.interpolate(U(data(2, 3, 5, 5)), size=(4, 4, 4)), ValueError, "size must be"),
    (lambda: ug.nn.interpolate(U(data(2, 3, 5, 5)), scale_factor=0.1), ValueError, "empty output"),
    (lambda: ug.nn.interpolate(U(data(5, 5)), size=4), ValueError, "3-d, 4-d or 5-d"),
    (lambda: ug.nn.interpolate(U(RNG.integers(0, 3, (2, 3, 5, 5))), size=4, mode="bilinear"), TypeError,
     "floating-point"),
    (lambda: ug.einsum("ij,jk->ik", U(data(3, 4)), U(data(5, 5))), ValueError, "sizes 4 and 5"),
    (lambda: ug.einsum("ij", U(data(3))), ValueError, "names 2 dims but its operand has 1"),
    (lambda: ug.einsum("ij->ii", U(data(3, 3))), ValueError, "repeats label 'i'"),
    (lambda: ug.einsum("ij->k", U(data(3, 3))), ValueError, "no operand has"),
    (lambda: ug.einsum("ii", U(data(3, 4))), ValueError, "different sizes [3, 4]"),
    (lambda: ug.einsum("i,j", U(data(3))), ValueError, "name 2 operands, but 1"),
    (lambda: ug.einsum("i#", U(data(3, 3))), ValueError, "'#'"),
    (lambda: ug.einsum("ij..", U(data(3, 3))), ValueError, "ellipsis"),
    (lambda: ug.einsum("ij", data(3, 3)), TypeError, "operand 0 must be a ug Tensor"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors(case):
    build, error, words = ERRORS[case]
    with pytest.raises(error) as info:
        build()
    assert words in str(info.value), str(info.value)


@pytest.mark.parametrize("n,k,s,p,d,ceil_mode", [
    (n, k, s, p, d, c) for n, k, s, p, d, c in itertools.product([5, 6, 7], [2, 3], [1, 2, 3], [0, 1], [1, 2],
                                                                 [False, True])
    if p <= k // 2 and n + 2 * p >= d * (k - 1) + 1])
def test_pool_output_sizes(n, k, s, p, d, ceil_mode):
    """ceil_mode's last window (it must start inside the input or its left padding), over many sizes."""
    x = data(1, 2, n)
    want_v, want_i = F.max_pool1d(T(x), k, s, p, d, ceil_mode, True)
    got_v, got_i = ug.nn.max_pool1d(U(x), k, s, p, d, ceil_mode, True)
    check(got_v, want_v)
    check(got_i, want_i)
    if d == 1:
        for include in (True, False):
            check(ug.nn.avg_pool1d(U(x), k, s, p, ceil_mode, include), F.avg_pool1d(T(x), k, s, p, ceil_mode, include))
