"""Differentiation's API on the device under test: ug.jvp, higher orders, ug.jit of ug.grad and
ug.grad of ug.jit, pytrees, argnums, errors and semantics (the rules themselves: test_autodiff,
whose finite-difference check this module uses)."""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug

from .test_autodiff import H, S, _float64, _ix, _to_device, check_grad, finite_difference, layernorm  # noqa: F401


# --- ug.custom --------------------------------------------------------------------------------------


def _host_square(out, x):
    out[...] = x * x


def test_custom_with_vjp(device, rng):
    def f(x):
        sq = ug.custom(_host_square, [x], x.shape, x.dtype, vjp=lambda g, out, inp: (g * 2 * inp,))
        return sq.sin()
    check_grad(device, rng, f, rng.standard_normal(S))


def test_custom_without_vjp_is_a_type_error(device, rng):
    x = ug.tensor(rng.standard_normal(S), device=device)
    with pytest.raises(TypeError, match="vjp"):
        ug.grad(lambda t: ug.custom(_host_square, [t], t.shape, t.dtype).sum())(x)


def test_custom_vjp_with_wrong_count_is_a_value_error(device, rng):
    x = ug.tensor(rng.standard_normal(S), device=device)
    with pytest.raises(ValueError, match="cotangents"):
        ug.grad(lambda t: ug.custom(_host_square, [t], t.shape, t.dtype,
                                    vjp=lambda g, out, inp: (g, g)).sum())(x)


# --- the API: jvp, higher order, jit, pytrees, errors, semantics -------------------------------


JVPS = {
    "elementwise": (lambda x, y: x.sin() * y, ((3, 4), (3, 4))),
    "reduce": (lambda x, y: (x * y).sum(axis=1), ((3, 4), (3, 4))),
    "matmul": (lambda x, y: (x @ y).tanh(), ((3, 4), (4, 2))),
    "softmax": (lambda x, y: (x + y).softmax(axis=-1), ((3, 4), (4,))),
}


@pytest.mark.parametrize("name", list(JVPS))
def test_jvp_against_finite_differences(device, rng, name):
    fn, shapes = JVPS[name]
    xs = [rng.standard_normal(s) for s in shapes]
    ts = [rng.standard_normal(s) for s in shapes]
    out, tangent_out = ug.jvp(fn, _to_device(xs, device), _to_device(ts, device))
    np.testing.assert_allclose(out.numpy(), fn(*_to_device(xs, device)).numpy(), rtol=1e-14)
    plus = fn(*_to_device([x + H * t for x, t in zip(xs, ts)], device)).numpy()
    minus = fn(*_to_device([x - H * t for x, t in zip(xs, ts)], device)).numpy()
    fd = (plus - minus) / (2 * H)
    assert np.max(np.abs(fd)) > 1e-3
    np.testing.assert_allclose(tangent_out.numpy(), fd, rtol=1e-6, atol=1e-7)


SECOND_ORDER = {
    # name: (f, f'' by hand)
    "sin": (lambda x: x.sin().sum(), lambda x: -np.sin(x)),
    "exp_times_x": (lambda x: (x * x.exp()).sum(), lambda x: (x + 2) * np.exp(x)),
    "cube": (lambda x: (x ** 3).sum(), lambda x: 6 * x),
    "tanh": (lambda x: x.tanh().sum(), lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2)),
    "log_of_sum": (lambda x: (x * x).sum(axis=1).log().sum(), None),
}


@pytest.mark.parametrize("name", list(SECOND_ORDER))
def test_grad_of_grad(device, rng, name):
    f, second = SECOND_ORDER[name]
    x = rng.uniform(0.3, 1.5, S)
    if second is not None:
        # d/dx sum(f'(x)) for an elementwise f is f''(x)
        g2 = ug.grad(lambda t: ug.grad(f)(t).sum())(ug.tensor(x, device=device))
        np.testing.assert_allclose(g2.numpy(), second(x), rtol=1e-12)
    # and the gradient of f' (with a random cotangent) against finite differences of ug.grad(f)
    check_grad(device, rng, lambda t: ug.grad(f)(t), x)


def test_third_order(device):
    x = ug.tensor(np.array([0.5, 1.0, -2.0]), device=device)
    g3 = ug.grad(lambda t: ug.grad(lambda u: ug.grad(lambda v: (v ** 4).sum())(u).sum())(t).sum())(x)
    np.testing.assert_allclose(g3.numpy(), 24 * np.array([0.5, 1.0, -2.0]), rtol=1e-12)


def _mse(w, x):
    return ((x @ w).tanh() - 0.5).square().mean() if hasattr(ug.Tensor, "square") else (((x @ w).tanh() - 0.5) ** 2).mean()


def test_jit_of_grad_replays_without_retracing(device, rng):
    g = ug.grad(_mse)
    jg = ug.jit(g)
    for i in range(3):
        w = rng.standard_normal((3, 2))
        x = rng.standard_normal((4, 3))
        got = jg(ug.tensor(w, device=device), ug.tensor(x, device=device))
        expected = g(ug.tensor(w, device=device), ug.tensor(x, device=device))
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)
        check = finite_difference(lambda t: _mse(t, ug.tensor(x, device=device)), [w], np.array(1.0), device)[0]
        np.testing.assert_allclose(got.numpy(), check, rtol=1e-6, atol=1e-8)
    assert jg.trace_count == 1


def test_grad_of_jit(device, rng):
    jf = ug.jit(_mse)
    g = ug.grad(jf)
    for i in range(3):
        w = rng.standard_normal((3, 2))
        x = ug.tensor(rng.standard_normal((4, 3)), device=device)
        got = g(ug.tensor(w, device=device), x)
        expected = ug.grad(_mse)(ug.tensor(w, device=device), x)
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)
        assert np.max(np.abs(expected.numpy())) > 1e-3
    # and jit(grad(jit(f))) compiles the whole thing once
    jg = ug.jit(ug.grad(jf))
    for i in range(2):
        w = ug.tensor(rng.standard_normal((3, 2)), device=device)
        x = ug.tensor(rng.standard_normal((4, 3)), device=device)
        np.testing.assert_allclose(jg(w, x).numpy(), ug.grad(_mse)(w, x).numpy(), rtol=1e-12)
    assert jg.trace_count == 1


def test_value_and_grad_and_has_aux(device, rng):
    w = rng.standard_normal(S)
    value, g = ug.value_and_grad(lambda t: (t * t).sum())(ug.tensor(w, device=device))
    np.testing.assert_allclose(value.numpy(), np.sum(w * w), rtol=1e-14)
    np.testing.assert_allclose(g.numpy(), 2 * w, rtol=1e-14)
    g, aux = ug.grad(lambda t: ((t * 3).sum(), {"m": t.max(), "n": 7}), has_aux=True)(ug.tensor(w, device=device))
    np.testing.assert_allclose(g.numpy(), np.full(S, 3.0))
    assert aux["n"] == 7
    np.testing.assert_allclose(aux["m"].numpy(), w.max())
    (value, aux), g = ug.value_and_grad(lambda t: ((t * 3).sum(), t.shape), has_aux=True)(ug.tensor(w, device=device))
    assert aux == S
    np.testing.assert_allclose(value.numpy(), 3 * w.sum(), rtol=1e-14)


def test_argnums(device, rng):
    a, b, c = (rng.standard_normal(3) for _ in range(3))
    f = lambda x, y, z: (x * y.exp() + z).sum()  # noqa: E731
    args = _to_device([a, b, c], device)
    ga, gc = ug.grad(f, argnums=(0, 2))(*args)
    np.testing.assert_allclose(ga.numpy(), np.exp(b), rtol=1e-14)
    np.testing.assert_allclose(gc.numpy(), np.ones(3))
    gb = ug.grad(f, argnums=1)(*args)
    np.testing.assert_allclose(gb.numpy(), a * np.exp(b), rtol=1e-14)
    (gb2,) = ug.grad(f, argnums=(-2,))(*args)
    np.testing.assert_allclose(gb2.numpy(), a * np.exp(b), rtol=1e-14)
    with pytest.raises(ValueError, match="argnums"):
        ug.grad(f, argnums=3)(*args)


def test_pytree_parameters(device, rng):
    params = {"w": [ug.tensor(rng.standard_normal((3, 2)), device=device), ug.tensor(rng.standard_normal(2), device=device)],
              "s": (ug.tensor(np.array(1.5), device=device),)}
    x = ug.tensor(rng.standard_normal((4, 3)), device=device)

    def loss(p, x):
        return ((x @ p["w"][0] + p["w"][1]) * p["s"][0]).tanh().sum()
    g = ug.grad(loss)(params, x)
    assert set(g) == {"w", "s"} and isinstance(g["w"], list) and isinstance(g["s"], tuple)
    flat = [params["w"][0].numpy(), params["w"][1].numpy(), params["s"][0].numpy()]

    def flat_loss(w, b, s):
        return loss({"w": [w, b], "s": (s,)}, x)
    fd = finite_difference(flat_loss, flat, np.array(1.0), device)
    for got, expected in zip([g["w"][0], g["w"][1], g["s"][0]], fd):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6, atol=1e-8)


def test_vjp_with_pytree_outputs(device, rng):
    x = rng.standard_normal(S)
    out, pullback = ug.vjp(lambda t: {"a": t.sin(), "b": [t.sum(axis=0)]}, ug.tensor(x, device=device))
    ca, cb = rng.standard_normal(S), rng.standard_normal(S[1])
    (g,) = pullback({"a": ug.tensor(ca, device=device), "b": [ug.tensor(cb, device=device)]})
    np.testing.assert_allclose(g.numpy(), ca * np.cos(x) + cb[None, :], rtol=1e-14)


def test_integer_input_is_a_type_error(device):
    with pytest.raises(TypeError, match="int64"):
        ug.grad(lambda t: t.sum())(ug.tensor(np.arange(4), device=device))
    with pytest.raises(TypeError, match="bool"):
        ug.vjp(lambda t: t, ug.tensor(np.array([True]), device=device))


def test_non_scalar_output_is_a_type_error(device, rng):
    x = ug.tensor(rng.standard_normal(S), device=device)
    with pytest.raises(TypeError, match="scalar"):
        ug.grad(lambda t: t * 2)(x)
    with pytest.raises(TypeError, match="scalar"):
        ug.grad(lambda t: [t.sum()])(x)


def test_integer_output_is_a_type_error(device, rng):
    x = ug.tensor(rng.standard_normal(S), device=device)
    with pytest.raises(TypeError, match="int64"):
        ug.grad(lambda t: t.argmax())(x)


def test_intermediate_numpy_does_not_cut_the_gradient(device, rng):
    x = rng.standard_normal(S)

    def f(t):
        y = t.exp()
        seen = y.numpy()            # realizes y in the middle of the function
        assert seen.shape == S
        return (y * t).sum()
    g = ug.grad(f)(ug.tensor(x, device=device))
    np.testing.assert_allclose(g.numpy(), (x + 1) * np.exp(x), rtol=1e-13)


def test_realized_input_and_output(device, rng):
    # the output realized before the pullback is called, and a realized argument
    x = ug.tensor(rng.standard_normal(S), device=device)
    x.realize()
    out, pullback = ug.vjp(lambda t: (t * t).exp(), x)
    out.numpy()
    (g,) = pullback(ug.ones(S, dtype=ug.float64, device=device))
    xn = x.numpy()
    np.testing.assert_allclose(g.numpy(), 2 * xn * np.exp(xn * xn), rtol=1e-13)


def test_captured_value_computed_from_the_argument_is_a_constant(device, rng):
    # JAX's semantics: `y` was computed from x outside the function, so inside it is a constant
    x = ug.tensor(rng.standard_normal(S), device=device)
    y = x * 3.0
    g = ug.grad(lambda t: (t * y).sum())(x)
    np.testing.assert_allclose(g.numpy(), 3.0 * x.numpy(), rtol=1e-14)
    # and the argument itself captured by closure is a constant too
    g = ug.grad(lambda t: (t * x).sum())(x)
    np.testing.assert_allclose(g.numpy(), x.numpy(), rtol=1e-14)


def test_same_tensor_passed_twice(device, rng):
    x = ug.tensor(rng.standard_normal(S), device=device)
    ga, gb = ug.grad(lambda a, b: (a * b.sin()).sum(), argnums=(0, 1))(x, x)
    xn = x.numpy()
    np.testing.assert_allclose(ga.numpy(), np.sin(xn), rtol=1e-14)
    np.testing.assert_allclose(gb.numpy(), xn * np.cos(xn), rtol=1e-14)


def test_stop_gradient(device, rng):
    x = rng.standard_normal(S)
    g = ug.grad(lambda t: (t * ug.stop_gradient(t * t)).sum())(ug.tensor(x, device=device))
    np.testing.assert_allclose(g.numpy(), x * x, rtol=1e-14)
    g = ug.grad(lambda t: (t.detach() * t).sum())(ug.tensor(x, device=device))
    np.testing.assert_allclose(g.numpy(), x, rtol=1e-14)


def test_unused_argument_gets_zeros(device, rng):
    a, b = _to_device([rng.standard_normal(S), rng.standard_normal(S)], device)
    ga, gb = ug.grad(lambda x, y: x.sum(), argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(gb.numpy(), np.zeros(S))
    np.testing.assert_array_equal(ga.numpy(), np.ones(S))


def test_gradients_function(device, rng):
    w = ug.tensor(rng.standard_normal(S), device=device)
    with ug.keep_graph():
        loss = (w.exp() * 2).sum()
        loss.numpy()
        (gw,) = ug.gradients(loss, [w])
    np.testing.assert_allclose(gw.numpy(), 2 * np.exp(w.numpy()), rtol=1e-14)
    with pytest.raises(ValueError, match="does not depend"):
        ug.gradients((w * 2).sum(), [ug.tensor(np.ones(2), device=device)])


def test_numpy_and_python_float_primals(device, rng):
    x = rng.standard_normal(3)
    g = ug.grad(lambda t: (t * t).sum())(x)
    np.testing.assert_allclose(g.numpy(), 2 * x, rtol=1e-14)


# --- kernel counts of fused backward passes ---------------------------------------------------------


def n_kernels(*tensors):
    return [item.kind for item in ug.schedule(*tensors).items].count("kernel")


def _realized(device, rng, shape):
    t = ug.tensor(rng.standard_normal(shape), device=device)
    t.realize()
    return t


def gelu_tanh(x):
    return x.gelu()


@pytest.mark.parametrize("name", ["softmax", "layernorm", "gelu"])
def test_backward_is_one_kernel(device, rng, name):
    fn = {"softmax": lambda t: t.softmax(axis=-1), "layernorm": layernorm, "gelu": gelu_tanh}[name]
    x = _realized(device, rng, (8, 16))
    out, pullback = ug.vjp(fn, x)
    out.realize()
    g = _realized(device, rng, (8, 16))
    (dx,) = pullback(g)
    assert n_kernels(dx) == 1, [item.kind for item in ug.schedule(dx).items]
    # and it computes the gradient
    fd = finite_difference(fn, [x.numpy()], g.numpy(), device)[0]
    np.testing.assert_allclose(dx.numpy(), fd, rtol=1e-6, atol=1e-7)


# --- graph-level rules with no public op of their own ------------------------------------------------


def test_copy_between_devices(device, rng):
    other = "ref" if device != "ref" else "cpu"
    if other not in ug.devices():
        pytest.skip(f"no {other} device to copy to")
    check_grad(device, rng, lambda t: (t.to_device(other).exp().to_device(device) * t), rng.standard_normal(S))


def test_scatter_max_splits_ties(device):
    # the SCATTER rule of a max scatter (ug_core.graph.scatter with RMAX): the gradient goes to
    # the values equal to their slot's result, split equally between ties
    from ug_core import graph
    from ug_core.ops import Op
    slots = _ix(device, np.array([0, 0, 0, 1, 1, 2]))

    def f(v):
        return ug.Tensor(graph.scatter(v.node, slots.node, Op.RMAX, 3, 1))
    out, pullback = ug.vjp(f, ug.tensor(np.array([1.0, 3.0, 3.0, 2.0, 5.0, 0.5]), device=device))
    np.testing.assert_array_equal(out.numpy(), [[3.0, 5.0, 0.5]])
    (g,) = pullback(ug.tensor(np.array([[1.0, 2.0, 3.0]]), device=device))
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.5, 0.5, 0.0, 2.0, 3.0])


def test_scatter_kernel_reading_a_reduction(device):
    """The gradient of softmax(sort(x)) is a scatter-add (sort's transpose) whose values read the
    softmax's reductions, fused into one kernel: the gpu scatter lowering computed no reductions
    (an IndexError on vulkan, found by the torch property tests)."""
    x = ug.tensor(np.array([[0.7], [-0.2]]), device=device)

    def f(a):
        s = ug.sort(a, axis=0)
        return [s.softmax(axis=1), s * 3.0]
    out, pullback = ug.vjp(f, x)
    (g,) = pullback([ug.tensor(np.array([[1.5], [0.25]]), device=device), ug.tensor(np.array([[0.5], [2.0]]), device=device)])
    # softmax over one element is 1 (no gradient); the sorted copy's cotangent 3 * c goes back to
    # where each element came from (sorted order: -0.2 first)
    np.testing.assert_allclose(g.numpy(), [[6.0], [1.5]], rtol=1e-12)
