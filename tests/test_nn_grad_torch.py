"""The gradients of ug.nn's functions (and of erf, logsumexp, einsum, cummax) against
torch.autograd, in float64: ug.vjp with a random cotangent on every differentiable input, the
same cotangent through torch's backward."""

import numpy as np
import pytest

import ug_core as ug

torch = pytest.importorskip("torch")
F = torch.nn.functional

rng = np.random.default_rng(7)


def _arr(*shape, positive=False):
    a = rng.standard_normal(shape)
    return np.abs(a) + 0.5 if positive else a


# (name, ug function, torch function, float inputs, fixed (non-differentiated) inputs)
CASES = [
    ("conv2d", lambda x, w, b: ug.nn.conv2d(x, w, b, padding=1), lambda x, w, b: F.conv2d(x, w, b, padding=1),
     [_arr(2, 3, 7, 7), _arr(4, 3, 3, 3), _arr(4)], []),
    ("conv2d_stride_dilation", lambda x, w: ug.nn.conv2d(x, w, stride=2, dilation=2),
     lambda x, w: F.conv2d(x, w, stride=2, dilation=2), [_arr(2, 2, 9, 9), _arr(3, 2, 3, 3)], []),
    ("conv2d_groups", lambda x, w: ug.nn.conv2d(x, w, groups=2, padding=(1, 0)),
     lambda x, w: F.conv2d(x, w, groups=2, padding=(1, 0)), [_arr(2, 4, 6, 6), _arr(4, 2, 3, 3)], []),
    ("conv2d_depthwise", lambda x, w: ug.nn.conv2d(x, w, groups=3, padding=1),
     lambda x, w: F.conv2d(x, w, groups=3, padding=1), [_arr(2, 3, 6, 6), _arr(3, 1, 3, 3)], []),
    ("conv1d", lambda x, w: ug.nn.conv1d(x, w, stride=2, padding=2), lambda x, w: F.conv1d(x, w, stride=2, padding=2),
     [_arr(2, 3, 11), _arr(4, 3, 5)], []),
    ("conv3d", lambda x, w: ug.nn.conv3d(x, w), lambda x, w: F.conv3d(x, w), [_arr(1, 2, 5, 5, 5), _arr(2, 2, 3, 3, 3)], []),
    ("conv_transpose2d", lambda x, w: ug.nn.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
     lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1), [_arr(2, 3, 4, 4), _arr(3, 2, 3, 3)], []),
    ("max_pool2d", lambda x: ug.nn.max_pool2d(x, 2), lambda x: F.max_pool2d(x, 2), [_arr(2, 3, 6, 6)], []),
    ("max_pool2d_overlap", lambda x: ug.nn.max_pool2d(x, 3, stride=1, padding=1),
     lambda x: F.max_pool2d(x, 3, stride=1, padding=1), [_arr(2, 2, 5, 5)], []),
    ("avg_pool2d", lambda x: ug.nn.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
     lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False), [_arr(2, 2, 7, 7)], []),
    ("adaptive_avg_pool2d", lambda x: ug.nn.adaptive_avg_pool2d(x, (3, 2)), lambda x: F.adaptive_avg_pool2d(x, (3, 2)),
     [_arr(2, 2, 7, 5)], []),
    ("interpolate_bilinear", lambda x: ug.nn.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
     lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False), [_arr(1, 2, 4, 5)], []),
    ("interpolate_nearest", lambda x: ug.nn.interpolate(x, size=(7, 3), mode="nearest"),
     lambda x: F.interpolate(x, size=(7, 3), mode="nearest"), [_arr(1, 2, 4, 5)], []),
    ("cross_entropy", lambda x, y: ug.nn.cross_entropy(x, y, label_smoothing=0.1),
     lambda x, y: F.cross_entropy(x, y, label_smoothing=0.1), [_arr(6, 5)], [rng.integers(0, 5, 6)]),
    ("cross_entropy_ignore", lambda x, y: ug.nn.cross_entropy(x, y, ignore_index=1),
     lambda x, y: F.cross_entropy(x, y, ignore_index=1), [_arr(6, 4, 3)], [rng.integers(0, 4, (6, 3))]),
    ("nll_loss", lambda x, y: ug.nn.nll_loss(x, y, reduction="sum"), lambda x, y: F.nll_loss(x, y, reduction="sum"),
     [_arr(6, 5)], [rng.integers(0, 5, 6)]),
    ("bce_with_logits", lambda x, y: ug.nn.binary_cross_entropy_with_logits(x, y),
     lambda x, y: F.binary_cross_entropy_with_logits(x, y), [_arr(5, 3)], [rng.random((5, 3))]),
    ("mse_smooth_l1", lambda x, y: ug.nn.mse_loss(x, y) + ug.nn.smooth_l1_loss(x, y, beta=0.5),
     lambda x, y: F.mse_loss(x, y) + F.smooth_l1_loss(x, y, beta=0.5), [_arr(5, 3)], [_arr(5, 3)]),
    ("layer_norm", lambda x, w, b: ug.nn.layer_norm(x, (6,), w, b), lambda x, w, b: F.layer_norm(x, (6,), w, b),
     [_arr(4, 6), _arr(6), _arr(6)], []),
    ("group_norm", lambda x: ug.nn.group_norm(x, 2), lambda x: F.group_norm(x, 2), [_arr(2, 4, 3)], []),
    ("gelu_erf", lambda x: ug.nn.gelu(x), lambda x: F.gelu(x), [_arr(7)], []),
    ("gelu_tanh", lambda x: ug.nn.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"), [_arr(7)], []),
    ("activations", lambda x: ug.nn.softplus(x) + ug.nn.elu(x) + ug.nn.mish(x) + ug.nn.hardswish(x) + ug.nn.silu(x)
     + ug.nn.leaky_relu(x, 0.1) + ug.nn.selu(x) + ug.nn.logsigmoid(x),
     lambda x: F.softplus(x) + F.elu(x) + F.mish(x) + F.hardswish(x) + F.silu(x) + F.leaky_relu(x, 0.1) + F.selu(x)
     + F.logsigmoid(x), [_arr(9) * 3], []),
    ("log_softmax", lambda x: ug.nn.log_softmax(x, dim=1), lambda x: F.log_softmax(x, dim=1), [_arr(3, 5)], []),
    ("logsumexp", lambda x: ug.logsumexp(x, axis=1), lambda x: torch.logsumexp(x, dim=1), [_arr(3, 5)], []),
    ("erf_erfc", lambda x: ug.erf(x) * 2 + ug.erfc(x), lambda x: torch.erf(x) * 2 + torch.erfc(x), [_arr(8)], []),
    ("sdpa_causal", lambda q, k, v: ug.nn.scaled_dot_product_attention(q, k, v, is_causal=True),
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), [_arr(2, 5, 4), _arr(2, 5, 4), _arr(2, 5, 4)], []),
    ("einsum", lambda a, b: ug.einsum("bij,bjk->bik", a, b), lambda a, b: torch.einsum("bij,bjk->bik", a, b),
     [_arr(2, 3, 4), _arr(2, 4, 5)], []),
    ("einsum_trace", lambda a: ug.einsum("ii->", a), lambda a: torch.einsum("ii->", a), [_arr(4, 4)], []),
    ("cummax", lambda x: ug.nn.cummax(x, 1)[0], lambda x: torch.cummax(x, 1)[0], [_arr(3, 6)], []),
    ("lerp", lambda a, b, w: ug.lerp(a, b, w), lambda a, b, w: torch.lerp(a, b, w), [_arr(5), _arr(5), _arr(5)], []),
    ("embedding", lambda w, i: ug.nn.embedding(i, w), lambda w, i: F.embedding(i, w), [_arr(6, 3)],
     [rng.integers(0, 6, (4, 2))]),
]


@pytest.mark.parametrize("name, ug_fn, torch_fn, floats, fixed", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_torch(name, ug_fn, torch_fn, floats, fixed):
    ts = [torch.tensor(a, requires_grad=True) for a in floats]
    out = torch_fn(*ts, *[torch.tensor(a) for a in fixed])
    cotangent = rng.standard_normal(tuple(out.shape))
    want = torch.autograd.grad(out, ts, torch.tensor(cotangent))
    fixed_ug = [ug.tensor(a) for a in fixed]
    value, pullback = ug.vjp(lambda *xs: ug_fn(*xs, *fixed_ug), *[ug.tensor(a) for a in floats])
    np.testing.assert_allclose(value.numpy(), out.detach().numpy(), rtol=1e-9, atol=1e-10)
    got = pullback(ug.tensor(cotangent))
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-7, atol=1e-9, err_msg=f"{name}: input {i}")
