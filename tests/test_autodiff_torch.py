"""ug's gradients against torch.autograd: random programs of elementwise, reduce, view, scan and
matmul ops on float64 inputs (hypothesis), differentiated by ug.vjp with random cotangents and by
torch's backward of the same program; and torch's tie and zero rules (max / min reductions,
maximum / minimum, prod and cumprod with zeros, cummax) checked exactly. The random programs run
on every device (the `device` fixture), the tie rules on the default device."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import ug_core as ug

torch = pytest.importorskip("torch")


def is_torch(x):
    return isinstance(x, torch.Tensor)


# --- dual-dispatch ops: each takes ug tensors or torch tensors ---------------------------------


def _gelu(x):
    return torch.nn.functional.gelu(x, approximate="tanh") if is_torch(x) else x.gelu()


def _fn(ug_name, torch_name=None):
    return lambda x: getattr(x, torch_name or ug_name)()


UNARY = {
    "neg": lambda x: -x,
    "exp_tanh": lambda x: (x.tanh() * 2).exp(),
    "tanh": _fn("tanh"),
    "sin": _fn("sin"),
    "cos": _fn("cos"),
    "sigmoid": _fn("sigmoid"),
    "gelu": _gelu,
    "silu": lambda x: torch.nn.functional.silu(x) if is_torch(x) else x.silu(),
    "relu": _fn("relu"),
    "abs": _fn("abs"),
    "square": lambda x: x * x,
    "log_safe": lambda x: (x.abs() + 1).log(),
    "sqrt_safe": lambda x: (x.abs() + 1).sqrt(),
    "recip_safe": lambda x: (x.abs() + 1).reciprocal(),
    "pow_safe": lambda x: (x.abs() + 0.5) ** 1.7,
    "atan2_one": lambda x: torch.atan2(x, x * 0 + 1.5) if is_torch(x) else ug.atan2(x, x * 0 + 1.5),
}
SCALAR = {
    "add": lambda x, c: x + c, "rsub": lambda x, c: c - x, "mul": lambda x, c: x * c,
    "div": lambda x, c: x / c, "rdiv_safe": lambda x, c: c / (x * x + 1),
    "maximum": lambda x, c: torch.clamp(x, min=c) if is_torch(x) else ug.maximum(x, c),
    "minimum": lambda x, c: torch.clamp(x, max=c) if is_torch(x) else ug.minimum(x, c),
}


def _where(c, a, b):
    return torch.where(c, a, b) if is_torch(a) else ug.where(c, a, b)


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div_safe": lambda a, b: a / (b.abs() + 1),
    "maximum": lambda a, b: torch.maximum(a, b) if is_torch(a) else ug.maximum(a, b),
    "minimum": lambda a, b: torch.minimum(a, b) if is_torch(a) else ug.minimum(a, b),
    "where": lambda a, b: _where(a > b, a * b, a - b),
    "pow_safe": lambda a, b: (a.abs() + 0.5) ** (b.tanh()),
}


def _reduce(x, kind, axis, keepdims):
    if is_torch(x):
        if kind == "sum":
            return x.sum(dim=axis, keepdim=keepdims)
        if kind == "mean":
            return x.mean(dim=axis, keepdim=keepdims)
        if kind == "max":
            return x.amax(dim=axis, keepdim=keepdims)
        if kind == "min":
            return x.amin(dim=axis, keepdim=keepdims)
        if kind == "prod":
            return x.prod(dim=axis, keepdim=keepdims)
        if kind == "var":
            return x.var(dim=axis, keepdim=keepdims, correction=0)
        if kind == "logsumexp":
            return x.logsumexp(dim=axis, keepdim=keepdims)
    if kind == "var":
        return ug.var(x, axis=axis, keepdims=keepdims)
    if kind == "logsumexp":
        m = ug.stop_gradient(x.max(axis=axis, keepdims=True))
        out = (x - m).exp().sum(axis=axis, keepdims=True).log() + m
        return out if keepdims else ug.squeeze(out, axis=axis)
    return getattr(x, kind)(axis=axis, keepdims=keepdims)


def _softmax(x, axis, log):
    if is_torch(x):
        return torch.log_softmax(x, dim=axis) if log else torch.softmax(x, dim=axis)
    return x.log_softmax(axis=axis) if log else x.softmax(axis=axis)


def _scan(x, kind, axis):
    if is_torch(x):
        if kind == "cumsum":
            return torch.cumsum(x, dim=axis)
        if kind == "cumprod":
            return torch.cumprod(x, dim=axis)
        return torch.cummax(x, dim=axis).values
    if kind == "cumsum":
        return ug.cumulative_sum(x, axis=axis)
    if kind == "cumprod":
        return ug.cumulative_prod(x, axis=axis)
    return ug.cumulative_max(x, axis=axis)


def _permute(x, perm):
    return x.permute(*perm)


def _flip(x, axis):
    return torch.flip(x, dims=(axis,)) if is_torch(x) else ug.flip(x, axis=axis)


def _pad(x, before, after):
    if is_torch(x):
        return torch.nn.functional.pad(x, (before, after))   # the last axis
    return ug.pad(x, [(0, 0)] * (x.ndim - 1) + [(before, after)])


def _concat(a, b, axis):
    return torch.cat([a, b], dim=axis) if is_torch(a) else ug.concat([a, b], axis=axis)


def _broadcast(x, shape):
    return x.expand(*shape) if is_torch(x) else ug.broadcast_to(x, shape)


def _unsqueeze(x, axis):
    return x.unsqueeze(axis) if is_torch(x) else ug.expand_dims(x, axis=axis)


def _take(x, idx, axis):
    if is_torch(x):
        return torch.index_select(x, axis, torch.tensor(idx))
    return ug.take(x, ug.tensor(np.asarray(idx), device=x.device), axis=axis)


def _sort(x, axis):
    return torch.sort(x, dim=axis, stable=True).values if is_torch(x) else ug.sort(x, axis=axis)


MAX_SIZE = 64


KINDS = ["unary", "scalar", "binary", "view", "reduce", "softmax", "matmul", "scan", "gather"]


@st.composite
def programs(draw, first):
    """A list of steps over a pool of values, the first of kind `first` (so that every kind is
    drawn often: hypothesis favours short programs); each step is (description, fn(pool) ->
    value)."""
    rank = draw(st.integers(1, 3))
    base = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    shapes = [base]
    for _ in range(draw(st.integers(0, 2))):
        s = list(base[draw(st.integers(0, rank - 1)):])
        for i in range(len(s)):
            if draw(st.booleans()):
                s[i] = 1
        shapes.append(tuple(s))
    pool = [np.zeros(s) for s in shapes]   # shape stand-ins, to draw valid steps
    steps = []
    for k in range(draw(st.integers(1, 6))):
        desc, fn = draw_step(draw, pool, first if k == 0 else None)
        steps.append((desc, fn))
        pool.append(np.asarray(fn(pool)))   # numpy runs the shapes (the stand-ins are zeros)
    return shapes, steps


def _shape_of(fn, pool):
    return fn([torch.zeros(p.shape, dtype=torch.float64) for p in pool]).shape


def draw_step(draw, pool, kind=None):
    n = len(pool)
    i = draw(st.integers(0, n - 1))
    shape = pool[i].shape
    nd = len(shape)
    if kind is None:
        kind = draw(st.sampled_from(KINDS + ["unary", "binary", "view"]))
    if kind == "unary":
        name = draw(st.sampled_from(sorted(UNARY)))
        return f"{name}(v{i})", _wrap(lambda v: UNARY[name](v[i]))
    if kind == "scalar":
        name = draw(st.sampled_from(sorted(SCALAR)))
        c = draw(st.sampled_from([0.5, 2.0, -1.5, 3.0]))
        return f"{name}(v{i}, {c})", _wrap(lambda v: SCALAR[name](v[i], c))
    if kind == "binary":
        partners = []
        for j in range(n):
            try:
                if int(np.prod(np.broadcast_shapes(shape, pool[j].shape))) <= MAX_SIZE:
                    partners.append(j)
            except ValueError:
                pass
        if not partners:   # v_i is already bigger than MAX_SIZE (a broadcast or a concat made it)
            return f"tanh(v{i})", _wrap(lambda v: v[i].tanh())
        j = draw(st.sampled_from(partners))
        name = draw(st.sampled_from(sorted(BINARY)))
        return f"{name}(v{i}, v{j})", _wrap(lambda v: BINARY[name](v[i], v[j]))
    if kind == "view" and nd >= 1:
        ops = ["reshape_flat", "unsqueeze", "slice", "flip", "pad", "concat", "broadcast"]
        if nd >= 2:
            ops += ["permute", "merge"]
        op = draw(st.sampled_from(ops))
        if op == "reshape_flat":
            return f"v{i}.reshape(-1)", _wrap(lambda v: v[i].reshape(-1))
        if op == "unsqueeze":
            ax = draw(st.integers(0, nd))
            return f"unsqueeze(v{i}, {ax})", _wrap(lambda v: _unsqueeze(v[i], ax))
        if op == "slice":
            ax = draw(st.integers(0, nd - 1))
            d = shape[ax]
            start = draw(st.integers(0, d - 1))
            step = draw(st.sampled_from([1, 2, 3]))
            key = tuple([slice(None)] * ax + [slice(start, None, step)])
            return f"v{i}[{key}]", _wrap(lambda v: v[i][key])
        if op == "flip":
            ax = draw(st.integers(0, nd - 1))
            return f"flip(v{i}, {ax})", _wrap(lambda v: _flip(v[i], ax))
        if op == "pad":
            b, a = draw(st.integers(0, 2)), draw(st.integers(0, 2))
            return f"pad(v{i}, {b}, {a})", _wrap(lambda v: _pad(v[i], b, a))
        if op == "concat":
            ax = draw(st.integers(0, nd - 1))
            if int(np.prod(shape)) * 2 > MAX_SIZE:
                return f"v{i}", _wrap(lambda v: v[i] * 1.0)
            return f"concat(v{i}, sin(v{i}), {ax})", _wrap(lambda v: _concat(v[i], v[i].sin(), ax))
        if op == "broadcast":
            k = draw(st.integers(2, 3))
            if int(np.prod(shape)) * k > MAX_SIZE:
                return f"v{i}", _wrap(lambda v: v[i] * 1.0)
            return f"broadcast(v{i}, {k})", _wrap(lambda v: _broadcast(v[i], (k,) + tuple(shape)))
        if op == "permute":
            perm = tuple(draw(st.permutations(range(nd))))
            return f"v{i}.permute{perm}", _wrap(lambda v: _permute(v[i], perm))
        if op == "merge":
            return f"v{i}.reshape(-1, last)", _wrap(lambda v: v[i].reshape(-1, shape[-1]))
    if kind == "reduce" and nd >= 1:
        name = draw(st.sampled_from(["sum", "mean", "max", "min", "prod", "var", "logsumexp"]))
        ax = draw(st.integers(0, nd - 1))
        keep = draw(st.booleans())
        return f"{name}(v{i}, {ax}, {keep})", _wrap(lambda v: _reduce(v[i], name, ax, keep))
    if kind == "softmax" and nd >= 1:
        ax = draw(st.integers(0, nd - 1))
        log = draw(st.booleans())
        return f"{'log_' if log else ''}softmax(v{i}, {ax})", _wrap(lambda v: _softmax(v[i], ax, log))
    if kind == "scan" and nd >= 1:
        name = draw(st.sampled_from(["cumsum", "cumprod", "cummax"]))
        ax = draw(st.integers(0, nd - 1))
        return f"{name}(v{i}, {ax})", _wrap(lambda v: _scan(v[i], name, ax))
    if kind == "gather" and nd >= 1:
        ax = draw(st.integers(0, nd - 1))
        idx = draw(st.lists(st.integers(0, shape[ax] - 1), min_size=1, max_size=5))
        if draw(st.booleans()):
            return f"sort(v{i}, {ax})", _wrap(lambda v: _sort(v[i], ax))
        return f"take(v{i}, {idx}, {ax})", _wrap(lambda v: _take(v[i], idx, ax))
    if kind == "matmul" and nd >= 1:
        k = shape[-1]
        m = draw(st.integers(1, 4))
        partners = [j for j in range(n) if len(pool[j].shape) >= 1 and pool[j].shape[-1] == k]
        j = draw(st.sampled_from(partners))
        if nd == 1 and len(pool[j].shape) == 1:
            return f"v{i} @ v{j}", _wrap(lambda v: v[i] @ v[j])
        # v_i (..., k) @ v_j^T-ish: (k, m) from v_j's last axis: v_j.reshape(-1, k)[:m].T
        return (f"v{i} @ v{j}.reshape(-1, {k})[:{m}].T",
                _wrap(lambda v: v[i] @ v[j].reshape(-1, k)[:m].permute(1, 0)))
    return f"tanh(v{i})", _wrap(lambda v: v[i].tanh())


def _wrap(fn):
    """A step as fn(pool): on a numpy pool (shape stand-ins), run on torch zeros."""
    def step(pool):
        if isinstance(pool[0], np.ndarray):
            return np.zeros(tuple(_shape_of(fn, pool)))
        return fn(pool)
    return step


def run(steps, inputs):
    pool = list(inputs)
    for _, fn in steps:
        pool.append(fn(pool))
    return pool[len(inputs):]


@pytest.mark.parametrize("first", KINDS)
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_random_programs_against_torch(first, data, device):
    program = data.draw(programs(first))
    seed = data.draw(st.integers(0, 2**32 - 1))
    shapes, steps = program
    for desc, _ in steps:
        note(desc)
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes]
    # the outputs: the last step's and one other's, each with a random cotangent
    outs_t_ref = run(steps, [torch.tensor(a) for a in arrays])
    picked = sorted({len(steps) - 1, int(rng.integers(0, len(steps)))})
    cts = [rng.standard_normal(tuple(outs_t_ref[k].shape)) for k in picked]

    leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
    outs_t = run(steps, leaves)
    total = sum((outs_t[k] * torch.tensor(c)).sum() for k, c in zip(picked, cts))
    expected = torch.autograd.grad(total, leaves, allow_unused=True)

    def program_fn(*xs):
        outs = run(steps, xs)
        return [outs[k] for k in picked]
    outs_u, pullback = ug.vjp(program_fn, *(ug.tensor(a, device=device) for a in arrays))
    for o_u, k in zip(outs_u, picked):
        np.testing.assert_allclose(o_u.numpy(), outs_t[k].detach().numpy(), rtol=1e-10, atol=1e-10)
    got = pullback([ug.tensor(c, device=device) for c in cts])
    for i, (g, e) in enumerate(zip(got, expected)):
        want = np.zeros(shapes[i]) if e is None else e.numpy()
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-9, atol=1e-9, err_msg=f"input {i}")


# --- tie and zero rules, exactly as torch -----------------------------------------------------------


def _both(fn_u, fn_t, x, c):
    """ug's and torch's gradient of sum(c * fn(x))."""
    xt = torch.tensor(x, requires_grad=True)
    (fn_t(xt) * torch.tensor(c)).sum().backward()
    _, pullback = ug.vjp(fn_u, ug.tensor(x))
    (g,) = pullback(ug.tensor(c))
    return g.numpy(), xt.grad.numpy()


TIES = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0], [-1.0, 0.0, -2.0, -2.0], [0.0, -0.0, 0.0, -1.0]])


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("axis", [0, 1])
def test_max_min_reduction_ties_as_torch_amax(name, axis):
    c = np.arange(1.0, 5.0)
    got, want = _both(lambda t: getattr(t, name)(axis=axis), lambda t: getattr(t, "a" + name)(dim=axis), TIES, c)
    np.testing.assert_array_equal(got, want)


def test_max_of_everything_ties_as_torch_amax():
    got, want = _both(lambda t: t.max(), lambda t: t.amax(), TIES * 0 + 2.0, np.array(3.0))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_ties_as_torch(name):
    a = np.array([1.0, 2.0, 3.0, -1.0, 0.0])
    b = np.array([1.0, 1.0, 4.0, -1.0, -0.0])
    c = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    fu, ft = getattr(ug, name), getattr(torch, name)
    au, bu = ug.tensor(a), ug.tensor(b)
    ga, gb = ug.grad(lambda x, y: (fu(x, y) * ug.tensor(c)).sum(), argnums=(0, 1))(au, bu)
    at, bt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (ft(at, bt) * torch.tensor(c)).sum().backward()
    np.testing.assert_array_equal(ga.numpy(), at.grad.numpy())
    np.testing.assert_array_equal(gb.numpy(), bt.grad.numpy())


PROD_ROWS = np.array([[2.0, 3.0, 4.0, 0.5], [2.0, 0.0, 4.0, -1.0], [0.0, 3.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0],
                      [1.5, -2.0, 0.5, 0.0]])


@pytest.mark.parametrize("axis", [0, 1])
def test_prod_with_zeros_as_torch(axis):
    c = np.arange(1.0, 6.0 if axis == 1 else 5.0)
    got, want = _both(lambda t: t.prod(axis=axis), lambda t: t.prod(dim=axis), PROD_ROWS, c)
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)


@pytest.mark.parametrize("axis", [0, 1])
def test_cumprod_with_zeros_as_torch(axis):
    c = np.random.default_rng(1).standard_normal(PROD_ROWS.shape)
    got, want = _both(lambda t: ug.cumulative_prod(t, axis=axis), lambda t: torch.cumprod(t, dim=axis), PROD_ROWS, c)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin_ties_as_torch(name):
    x = np.array([[1.0, 3.0, 2.0, 3.0, 0.0, 3.0], [2.0, 2.0, 2.0, 1.0, 5.0, 5.0], [0.0, -0.0, 1.0, -1.0, -1.0, 4.0]])
    c = np.random.default_rng(2).standard_normal(x.shape)
    fu = ug.cumulative_max if name == "cummax" else ug.cumulative_min
    got, want = _both(lambda t: fu(t, axis=1), lambda t: getattr(torch, name)(t, dim=1).values, x, c)
    np.testing.assert_array_equal(got, want)


def test_sort_and_topk_ties_as_torch_stable_sort():
    x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0], [0.5, 0.5, 0.5, 0.5, 0.5]])
    c = np.random.default_rng(3).standard_normal(x.shape)
    got, want = _both(lambda t: ug.sort(t, axis=1), lambda t: torch.sort(t, dim=1, stable=True).values, x, c)
    np.testing.assert_array_equal(got, want)
