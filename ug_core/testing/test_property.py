"""Differential property tests: random op graphs built with hypothesis are run
through ug (float32, on the device under test) and through numpy (float64 on the
same float32 inputs) and compared.

Every op is continuous on its domain (log/sqrt/reciprocal see abs()+1, exp sees
2*tanh()), so float32-vs-float64 rounding can never flip a branch and any
mismatch larger than accumulated rounding is a real bug.
"""
import numpy as np
from hypothesis import assume, given, note
from hypothesis import strategies as st

import ug_core as ug


def is_np(x):
    return isinstance(x, (np.ndarray, np.generic))


def A(x):  # numpy ops on 0-d arrays return scalars; keep everything an ndarray
    return np.asarray(x) if is_np(x) else x


# ------------------------------------------------------------------ dual-dispatch helpers
def u(name):
    npf = {
        "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
        "abs": np.abs, "reciprocal": np.reciprocal, "relu": lambda a: np.maximum(a, 0),
        "sigmoid": lambda a: 1 / (1 + np.exp(-a)),
        "gelu": lambda a: 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3))),
        "silu": lambda a: a / (1 + np.exp(-a)),
    }[name]
    return lambda x: A(npf(x)) if is_np(x) else getattr(x, name)()


def maximum(a, b):
    return A(np.maximum(a, b)) if is_np(a) else ug.maximum(a, b)


def minimum(a, b):
    return A(np.minimum(a, b)) if is_np(a) else ug.minimum(a, b)


def where(c, a, b):
    return A(np.where(c, a, b)) if is_np(c) else ug.where(c, a, b)


def permute(x, perm):
    return A(np.transpose(x, perm)) if is_np(x) else x.permute(*perm)


def broadcast_to(x, shape):
    return A(np.broadcast_to(x, shape)) if is_np(x) else x.broadcast_to(shape)


def squeeze(x, ax):
    return A(np.squeeze(x, ax)) if is_np(x) else x.squeeze(ax)


def expand_dims(x, ax):
    return A(np.expand_dims(x, ax)) if is_np(x) else x.expand_dims(ax)


def reduce(x, kind, axis, keepdims):
    return A(getattr(x, kind)(axis=axis, keepdims=keepdims))


def softmax(x, axis, log):
    if not is_np(x):
        return x.log_softmax(axis=axis) if log else x.softmax(axis=axis)
    m = x.max(axis=axis, keepdims=True)
    if log:
        return A(x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True)))
    e = np.exp(x - m)
    return A(e / e.sum(axis=axis, keepdims=True))


UNARY = {
    "neg": lambda x: -x,
    "abs": u("abs"),
    "relu": u("relu"),
    "tanh": u("tanh"),
    "sin": u("sin"),
    "cos": u("cos"),
    "sigmoid": u("sigmoid"),
    "gelu": u("gelu"),
    "silu": u("silu"),
    "exp_safe": lambda x: u("exp")(u("tanh")(x) * 2),
    "log_safe": lambda x: u("log")(u("abs")(x) + 1),
    "sqrt_safe": lambda x: u("sqrt")(u("abs")(x) + 1),
    "recip_safe": lambda x: u("reciprocal")(u("abs")(x) + 1),
    "square": lambda x: x ** 2,
    "leaky_relu": lambda x: where(x > 0, x, x * 0.1),
}
SCALAR_OPS = {
    "add": lambda x, c: x + c, "radd": lambda x, c: c + x,
    "sub": lambda x, c: x - c, "rsub": lambda x, c: c - x,
    "mul": lambda x, c: x * c, "rmul": lambda x, c: c * x,
    "div": lambda x, c: x / c,
    "max": lambda x, c: maximum(x, c), "min": lambda x, c: minimum(x, c),
}
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div_safe": lambda a, b: a / (u("abs")(b) + 1),
    "maximum": maximum,
    "minimum": minimum,
    "where_max": lambda a, b: where(a > b, a, b),
    "smooth_where": lambda a, b: where(a > 0, a * b, a * 0.5 * b),  # continuous in a
}
MAX_RANK = 4
MAX_SIZE = 256


_SUPPORTED: dict[tuple, bool] = {}


def supported(device, dt):
    key = (device, np.dtype(dt))
    if key not in _SUPPORTED:
        try:
            ug.tensor(np.zeros(1, dt), device=device)
            _SUPPORTED[key] = True
        except TypeError:
            _SUPPORTED[key] = False
    return _SUPPORTED[key]


def broadcastable(s1, s2):
    try:
        return np.broadcast_shapes(s1, s2)
    except ValueError:
        return None


# ------------------------------------------------------------------ program generation
@st.composite
def input_shapes(draw):
    rank = draw(st.integers(0, 3))
    base = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    n = draw(st.integers(1, 3))
    shapes = [base]
    for _ in range(n - 1):
        # a broadcast-compatible partner: drop some leading dims, set some dims to 1
        drop = draw(st.integers(0, len(base)))
        s = list(base[drop:])
        for i in range(len(s)):
            if draw(st.booleans()):
                s[i] = 1
        shapes.append(tuple(s))
    return shapes


def draw_step(data, pool, allow_const):
    """Draw one op that is valid for the current numpy pool; return (description, fn).
    fn(vals, const) -> new value, where vals is the current pool (numpy or ug)."""
    n = len(pool)
    kinds = ["unary", "scalar", "binary", "view", "reduce", "softmax", "matmul", "indexed"]
    kind = data.draw(st.sampled_from(kinds), label="kind")
    i = data.draw(st.integers(0, n - 1), label="operand")
    x = pool[i]
    shape = x.shape

    if kind == "unary":
        name = data.draw(st.sampled_from(sorted(UNARY)), label="unary")
        return f"v{i}.{name}()", lambda v, c: UNARY[name](v[i])

    if kind == "scalar":
        name = data.draw(st.sampled_from(sorted(SCALAR_OPS)), label="scalar_op")
        s = data.draw(st.sampled_from([0.5, 2.0, -1.5, 3.0, 1]), label="scalar")
        return f"{name}(v{i}, {s})", lambda v, c: SCALAR_OPS[name](v[i], s)

    if kind == "binary":
        partners = [j for j in range(n) if broadcastable(shape, pool[j].shape) is not None
                    and int(np.prod(broadcastable(shape, pool[j].shape))) <= MAX_SIZE]
        j = data.draw(st.sampled_from(partners), label="partner")  # i itself always qualifies
        name = data.draw(st.sampled_from(sorted(BINARY)), label="binary")
        return f"{name}(v{i}, v{j})", lambda v, c: BINARY[name](v[i], v[j])

    if kind == "view":
        ops = ["reshape_flat", "expand_dims", "slice", "broadcast"]
        if x.ndim >= 1:
            ops += ["int_index", "flatten", "reshape_split"]
        if x.ndim >= 2:
            ops += ["permute", "T", "merge"]
        if 1 in shape:
            ops += ["squeeze"]
        op = data.draw(st.sampled_from(ops), label="view")
        if op == "reshape_flat":
            return f"v{i}.reshape(-1)", lambda v, c: v[i].reshape(-1)
        if op == "flatten":
            return f"v{i}.flatten()", lambda v, c: v[i].flatten()
        if op == "reshape_split":
            ax = data.draw(st.integers(0, x.ndim - 1))
            d = shape[ax]
            f = data.draw(st.sampled_from([k for k in range(1, d + 1) if d % k == 0]))
            new = shape[:ax] + (f, d // f) + shape[ax + 1:]
            if len(new) > MAX_RANK:
                new = (-1,)
            return f"v{i}.reshape{new}", lambda v, c: v[i].reshape(*new)
        if op == "merge":
            ax = data.draw(st.integers(0, x.ndim - 2))
            new = shape[:ax] + (-1,) + shape[ax + 2:]
            return f"v{i}.reshape{new}", lambda v, c: v[i].reshape(*new)
        if op == "expand_dims":
            if x.ndim >= MAX_RANK:
                return f"v{i}.flatten()", lambda v, c: v[i].flatten()
            ax = data.draw(st.integers(-x.ndim - 1, x.ndim))
            return f"expand_dims(v{i}, {ax})", lambda v, c: expand_dims(v[i], ax)
        if op == "squeeze":
            ax = data.draw(st.sampled_from([k for k, d in enumerate(shape) if d == 1]))
            if data.draw(st.booleans()):
                ax = ax - x.ndim
            return f"squeeze(v{i}, {ax})", lambda v, c: squeeze(v[i], ax)
        if op == "permute":
            perm = tuple(data.draw(st.permutations(range(x.ndim))))
            return f"v{i}.permute{perm}", lambda v, c: permute(v[i], perm)
        if op == "T":
            return f"v{i}.T", lambda v, c: v[i].T
        if op == "int_index":
            ax = data.draw(st.integers(0, x.ndim - 1))
            k = data.draw(st.integers(-shape[ax], shape[ax] - 1))
            key = (slice(None),) * ax + (k,)
            return f"v{i}[{key}]", lambda v, c: A(v[i][key])
        if op == "slice":
            key = []
            for d in shape:
                start = data.draw(st.integers(-d, d - 1))
                st_ = start % d
                step = data.draw(st.integers(1, 3))
                stop = data.draw(st.one_of(st.none(), st.integers(st_ + 1, d + 2)))
                key.append(slice(start, stop, step))
            if data.draw(st.booleans()):
                key.insert(data.draw(st.integers(0, len(key))), None)
            if len(key) > MAX_RANK:
                key = [k for k in key if k is not None]
            key = tuple(key)
            return f"v{i}[{key}]", lambda v, c: A(v[i][key])
        if op == "broadcast":
            if x.ndim < MAX_RANK and x.size * 3 <= MAX_SIZE and data.draw(st.booleans()):
                new = (data.draw(st.integers(1, 3)),) + shape
            else:
                new = tuple(data.draw(st.integers(1, 3)) if (d == 1 and x.size * 3 <= MAX_SIZE) else d
                            for d in shape)
            return f"broadcast_to(v{i}, {new})", lambda v, c: broadcast_to(v[i], new)

    if kind == "reduce":
        red = data.draw(st.sampled_from(["sum", "max", "min", "mean"]), label="reduce")
        keep = data.draw(st.booleans(), label="keepdims")
        if x.ndim == 0:
            axis = None
        else:
            axis = data.draw(st.one_of(
                st.none(),
                st.integers(-x.ndim, x.ndim - 1),
                st.lists(st.integers(0, x.ndim - 1), min_size=1, max_size=x.ndim, unique=True).map(tuple),
            ), label="axis")
        return f"v{i}.{red}(axis={axis}, keepdims={keep})", lambda v, c: reduce(v[i], red, axis, keep)

    if kind == "indexed":
        return draw_indexed(data, i, x)

    if kind == "softmax":
        if x.ndim == 0:
            return f"v{i}.abs()", lambda v, c: UNARY["abs"](v[i])
        axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="softmax_axis")
        log = data.draw(st.booleans(), label="log")
        return f"{'log_' if log else ''}softmax(v{i}, {axis})", lambda v, c: softmax(v[i], axis, log)

    # matmul: with another pool value if shapes allow, else with the value's own transpose
    partners = []
    if x.ndim >= 1:
        for j in range(n):
            if pool[j].ndim >= 1:
                try:
                    r = np.matmul(np.zeros(shape), np.zeros(pool[j].shape))
                except ValueError:
                    continue
                if r.size <= MAX_SIZE:
                    partners.append(j)
    choices = ["gram"] + (["pair"] if partners else []) + (["const"] if allow_const and x.ndim >= 1 else [])
    how = data.draw(st.sampled_from(choices), label="matmul")
    if how == "pair":
        j = data.draw(st.sampled_from(partners))
        return f"v{i} @ v{j}", lambda v, c: A(v[i] @ v[j])
    if how == "const":
        k = shape[-1]
        m = data.draw(st.integers(1, 4))
        seed = data.draw(st.integers(0, 2 ** 16))
        w = np.random.default_rng(seed).uniform(-1, 1, size=(k, m)).astype(np.float32)
        lead = data.draw(st.booleans()) and x.ndim >= 2
        if lead:  # w.T @ x^T style with a view on the constant
            return f"v{i} @ W{w.shape}.T.T", lambda v, c: A(v[i] @ c(w.T.copy()).T)
        return f"v{i} @ W{w.shape}", lambda v, c: A(v[i] @ c(w))
    # gram: x @ x^T over the last two axes (1-D: dot product)
    if x.ndim == 0:
        return f"v{i} * v{i}", lambda v, c: v[i] * v[i]
    if x.ndim == 1:
        return f"v{i} @ v{i}", lambda v, c: A(v[i] @ v[i])
    perm = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return f"v{i} @ v{i}.permute{perm}", lambda v, c: A(v[i] @ permute(v[i], perm))


def draw_indexed(data, i, x):
    """A data-dependent op whose result is continuous in x (the graph runs in float32 on ug and in
    float64 in numpy): gathers and masks at fixed indices, sorted values, scatter-adds at fixed
    slots, running maxima."""
    if x.ndim == 0:
        return f"v{i}.abs()", lambda v, c: UNARY["abs"](v[i])
    seed = data.draw(st.integers(0, 2 ** 16), label="seed")
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(0, x.ndim - 1), label="axis")
    n = x.shape[axis]
    op = data.draw(st.sampled_from(["take", "getitem", "take_along", "sort", "mask", "scatter_add", "cummax"]),
                   label="indexed")
    if op in ("take", "getitem") and n:
        # (at least one index, and a mask below at least one True: the other steps draw from
        # sizes of 1 or more; empty results are tested on their own, in test_sorting/test_gather)
        idx = rng.integers(-n, n, data.draw(st.integers(1, 5), label="count"))
        if op == "take":
            return (f"take(v{i}, {idx.tolist()}, axis={axis})",
                    lambda v, c: A(np.take(v[i], idx, axis=axis)) if is_np(v[i]) else ug.take(v[i], idx, axis=axis))
        key = (slice(None),) * axis + (idx,)
        return f"v{i}[{':, ' * axis}{idx.tolist()}]", lambda v, c: A(v[i][key])
    if op == "take_along" and n:
        shape = list(x.shape)
        shape[axis] = data.draw(st.integers(1, 4), label="along")
        idx = rng.integers(0, n, shape)
        return (f"take_along_axis(v{i}, idx{shape}, {axis})",
                lambda v, c: A(np.take_along_axis(v[i], idx, axis)) if is_np(v[i]) else ug.take_along_axis(v[i], idx, axis=axis))
    if op == "sort":
        desc = data.draw(st.booleans(), label="descending")
        return (f"sort(v{i}, axis={axis}, descending={desc})",
                lambda v, c: (A(-np.sort(-v[i], axis=axis)) if desc else A(np.sort(v[i], axis=axis))) if is_np(v[i])
                else ug.sort(v[i], axis=axis, descending=desc))
    if op == "mask":
        mask = rng.random(x.shape) < 0.5
        mask.flat[rng.integers(mask.size)] = True
        return f"v{i}[mask{x.shape}]", lambda v, c: A(v[i][mask])
    if op == "scatter_add":
        slots = data.draw(st.integers(1, 6), label="slots")
        flat = int(np.prod(x.shape))
        idx = rng.integers(0, slots, flat)

        def scatter(v, c):
            if is_np(v[i]):
                out = np.zeros(slots)
                np.add.at(out, idx, v[i].reshape(-1))
                return out
            return ug.scatter_add(ug.zeros(slots, device=v[i].device), 0, idx, v[i].reshape(-1))
        return f"scatter_add(zeros({slots}), {idx.tolist()}, v{i}.reshape(-1))", scatter
    return (f"cumulative_max(v{i}, axis={axis})",
            lambda v, c: A(np.maximum.accumulate(v[i], axis=axis)) if is_np(v[i]) else ug.cumulative_max(v[i], axis=axis))


class Program:
    def __init__(self, inputs, steps):
        self.inputs = inputs  # list of float32 arrays
        self.steps = steps  # list of (desc, fn)

    def run(self, vals, const):
        vals = list(vals)
        for _, fn in self.steps:
            vals.append(fn(vals, const))
        return vals


def draw_program(data, allow_const=True, max_steps=8):
    shapes = data.draw(input_shapes(), label="input_shapes")
    seed = data.draw(st.integers(0, 2 ** 16), label="seed")
    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(-2, 2, size=s).astype(np.float32) for s in shapes]
    pool = [x.astype(np.float64) for x in inputs]
    steps = []
    n_steps = data.draw(st.integers(1, max_steps), label="n_steps")
    np_const = lambda a: a.astype(np.float64)  # noqa: E731
    for _ in range(n_steps):
        desc, fn = draw_step(data, pool, allow_const)
        try:
            with np.errstate(over="raise", invalid="raise", divide="raise"):
                out = A(fn(pool, np_const))
        except FloatingPointError:
            assume(False)
        assume(out.size <= MAX_SIZE and out.ndim <= MAX_RANK + 1)
        steps.append((desc, fn))
        pool.append(out)
    for k, (desc, _) in enumerate(steps):
        note(f"v{len(inputs) + k} = {desc}")
    note(f"input shapes: {[x.shape for x in inputs]}")
    return Program(inputs, steps), pool


def tolerance(pool):
    scale = max([1.0] + [float(np.max(np.abs(p))) for p in pool if p.size])
    n = max([1] + [p.size for p in pool])
    return 1e-4, 4e-6 * scale * (n + 10)


def compare(got_vals, exp_vals, rtol, atol, first=0):
    for k in range(first, len(exp_vals)):
        g, e = got_vals[k], exp_vals[k]
        assert g.shape == e.shape, f"v{k}: shape {g.shape} != {e.shape}"
        assert g.dtype == np.float32, f"v{k}: dtype {g.dtype}"
        np.testing.assert_allclose(g.numpy().astype(np.float64), e, rtol=rtol, atol=atol, err_msg=f"v{k}")


# ------------------------------------------------------------------ tests
@given(data=st.data())
def test_random_graphs(device, data):
    prog, expected = draw_program(data)
    ug_const = lambda a: ug.tensor(a, device=device)  # noqa: E731
    xs = [ug.tensor(a, device=device) for a in prog.inputs]
    got = prog.run(xs, ug_const)
    ug.realize(*got[len(xs):])  # one schedule for every intermediate
    compare(got, expected, *tolerance(expected))


@given(data=st.data())
def test_random_graphs_final_only(device, data):
    # realizing only the last value exercises fusion of all intermediates
    prog, expected = draw_program(data)
    xs = [ug.tensor(a, device=device) for a in prog.inputs]
    got = prog.run(xs, lambda a: ug.tensor(a, device=device))
    rtol, atol = tolerance(expected)
    compare(got, expected, rtol, atol, first=len(expected) - 1)


@given(data=st.data())
def test_random_graphs_jit(device, data):
    prog, _ = draw_program(data, allow_const=False, max_steps=6)
    f = ug.jit(lambda *xs: prog.run(xs, None)[-1])
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16), label="jit_seed"))
    for call in range(3):
        inputs = [rng.uniform(-2, 2, size=a.shape).astype(np.float32) for a in prog.inputs]
        with np.errstate(all="ignore"):
            expected = prog.run([a.astype(np.float64) for a in inputs], None)
        got = f(*[ug.tensor(a, device=device) for a in inputs])
        rtol, atol = tolerance(expected)
        assert got.shape == expected[-1].shape
        np.testing.assert_allclose(got.numpy().astype(np.float64), expected[-1], rtol=rtol, atol=atol,
                                   err_msg=f"jit call {call}")


@st.composite
def index_keys(draw, shape):
    key = []
    dims = list(shape)
    used_ellipsis = False
    n_none = 0
    while dims:
        choice = draw(st.sampled_from(["int", "slice", "slice", "none", "ellipsis", "stop"]))
        if choice == "stop":
            break
        if choice == "none":
            if n_none < 2:
                n_none += 1
                key.append(None)
            continue
        if choice == "ellipsis":
            if used_ellipsis:
                continue
            used_ellipsis = True
            key.append(Ellipsis)
            # ellipsis eats a random number of the remaining dims from the end
            k = draw(st.integers(0, len(dims)))
            tail = dims[len(dims) - k:] if k else []
            dims = []
            for d in tail:
                key.append(slice(draw(st.integers(-d - 1, d + 1)), draw(st.one_of(st.none(), st.integers(-d - 1, d + 2))),
                                 draw(st.integers(1, 3))))
            break
        d = dims.pop(0)
        if choice == "int":
            key.append(draw(st.integers(-d, d - 1)))
        else:
            key.append(slice(draw(st.one_of(st.none(), st.integers(-d - 2, d + 2))),
                             draw(st.one_of(st.none(), st.integers(-d - 2, d + 2))),
                             draw(st.one_of(st.none(), st.integers(1, 4)))))
    return tuple(key) if key else (Ellipsis,)


@given(data=st.data())
def test_random_indexing(device, close, data):
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3), label="shape"))
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    key = data.draw(index_keys(shape), label="key")
    expected = a[key]
    x = ug.tensor(a, device=device)
    got = x[key]
    close(got, np.array(expected), rtol=0, atol=0)
    # and index a computed value, then compute on the view
    got2 = (x * 2 + 1)[key] - 1
    close(got2, np.array((a * 2 + 1)[key] - 1), rtol=0, atol=0)


@st.composite
def matmul_shapes(draw):
    m, k, n = draw(st.integers(1, 5)), draw(st.integers(1, 6)), draw(st.integers(1, 5))
    batch_rank = draw(st.integers(0, 2))
    batch = [draw(st.integers(1, 3)) for _ in range(batch_rank)]
    ba = [d if draw(st.booleans()) else 1 for d in batch]
    bb = [d if draw(st.booleans()) else 1 for d in batch]
    ba = ba[draw(st.integers(0, len(ba))):]
    bb = bb[draw(st.integers(0, len(bb))):]
    sa = tuple(ba) + (m, k)
    sb = tuple(bb) + (k, n)
    if draw(st.booleans()) and not ba:
        sa = (k,)
    elif draw(st.booleans()) and not bb:
        sb = (k,)
    return sa, sb, draw(st.booleans()), draw(st.booleans())


@given(spec=matmul_shapes(), seed=st.integers(0, 2 ** 16))
def test_random_matmul(device, close, spec, seed):
    sa, sb, transpose_a, transpose_b = spec
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    # optionally feed the operands through transposed views to exercise strided inputs
    if transpose_a and a.ndim >= 2:
        perm = tuple(range(a.ndim - 2)) + (a.ndim - 1, a.ndim - 2)
        x = ug.tensor(np.array(np.transpose(a, perm)), device=device).permute(*perm)
    if transpose_b and b.ndim >= 2:
        perm = tuple(range(b.ndim - 2)) + (b.ndim - 1, b.ndim - 2)
        y = ug.tensor(np.array(np.transpose(b, perm)), device=device).permute(*perm)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    close(x @ y, expected.astype(np.float32), rtol=1e-4, atol=1e-5 * sa[-1] + 1e-6)


@given(shapes=input_shapes(), seed=st.integers(0, 2 ** 16),
       op=st.sampled_from(["add", "sub", "mul", "maximum", "minimum", "lt", "eq"]),
       dts=st.tuples(st.sampled_from([np.float32, np.int32]), st.sampled_from([np.float32, np.int32])))
def test_random_broadcast_binary_dtypes(device, close, shapes, seed, op, dts):
    rng = np.random.default_rng(seed)
    sa, sb = shapes[0], shapes[-1]
    a = rng.integers(-3, 4, size=sa).astype(dts[0])
    b = rng.integers(-3, 4, size=sb).astype(dts[1])
    for dt in (a.dtype, b.dtype, np.result_type(a.dtype, b.dtype)):
        assume(supported(device, dt))  # don't skip the whole test: other combinations still run
    fns = {"add": (lambda p, q: p + q, np.add), "sub": (lambda p, q: p - q, np.subtract),
           "mul": (lambda p, q: p * q, np.multiply), "maximum": (ug.maximum, np.maximum),
           "minimum": (ug.minimum, np.minimum), "lt": (lambda p, q: p < q, np.less),
           "eq": (lambda p, q: p == q, np.equal)}
    f, ref = fns[op]
    close(f(ug.tensor(a, device=device), ug.tensor(b, device=device)), ref(a, b))
    close(f(ug.tensor(b, device=device), ug.tensor(a, device=device)), ref(b, a))


@given(data=st.data())
def test_random_reductions(device, close, data):
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=0, max_size=4), label="shape"))
    a = np.random.default_rng(data.draw(st.integers(0, 2 ** 16))).standard_normal(shape).astype(np.float32)
    nd = len(shape)
    axis = None if nd == 0 else data.draw(st.one_of(
        st.none(), st.integers(-nd, nd - 1),
        st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=nd, unique_by=lambda k: k % nd).map(tuple)))
    keep = data.draw(st.booleans())
    red = data.draw(st.sampled_from(["sum", "max", "min", "mean"]))
    view = data.draw(st.sampled_from(["none", "T", "slice"]))
    x = ug.tensor(a, device=device)
    b = a
    if view == "T":
        x, b = x.T, a.T
    elif view == "slice" and nd:
        x, b = x[::2], a[::2]
    expected = np.asarray(getattr(b, red)(axis=axis, keepdims=keep))
    close(getattr(x, red)(axis=axis, keepdims=keep), expected, rtol=1e-5, atol=1e-5)


# complex64 chains: each step combines the running value with a broadcast operand; all are
# continuous, and the divisions are by 1 + |w|^2 (never near 0), so the float64 reference is
# a fair oracle for complex64 arithmetic
COMPLEX_STEPS = {
    "add": (lambda v, w: v + w),
    "sub": (lambda v, w: w - v),
    "mul": (lambda v, w: v * w),
    "mul_conj": (lambda v, w: v * (w.conj() if isinstance(w, ug.Tensor) else np.conj(w))),
    "div": (lambda v, w: v / (1 + w * (w.conj() if isinstance(w, ug.Tensor) else np.conj(w)))),
    "real_scale": (lambda v, w: v * (abs(w) + 0.5)),
    "swap_parts": (lambda v, w: (v.imag if isinstance(v, ug.Tensor) else np.imag(v)) + 1j * (v.real if isinstance(v, ug.Tensor) else np.real(v))),
    "where": (lambda v, w: where((w.real if isinstance(w, ug.Tensor) else np.real(w)) > 0, v, w)),
}


@given(shapes=input_shapes(), seed=st.integers(0, 2 ** 16),
       steps=st.lists(st.sampled_from(sorted(COMPLEX_STEPS)), min_size=1, max_size=5),
       reduce=st.sampled_from(["none", "sum", "mean", "prod"]))
def test_random_complex_chains(device, require_dtype, shapes, seed, steps, reduce):
    """Random chains of complex64 arithmetic over broadcast operands, then a reduction, against
    numpy in complex128 (relative to the magnitudes involved)."""
    require_dtype(np.complex64)
    rng = np.random.default_rng(seed)
    sa, sb = shapes[0], shapes[-1]
    a = ((rng.standard_normal(sa) + 1j * rng.standard_normal(sa)) / 2).astype(np.complex64)
    b = ((rng.standard_normal(sb) + 1j * rng.standard_normal(sb)) / 2).astype(np.complex64)
    v, w = ug.tensor(a, device=device), ug.tensor(b, device=device)
    ref, refw = A(a.astype(np.complex128)), A(b.astype(np.complex128))
    scale = np.abs(ref) + 1
    for name in steps:
        v, ref = COMPLEX_STEPS[name](v, w), A(COMPLEX_STEPS[name](ref, refw))
        scale = np.broadcast_to(scale, ref.shape) * (np.abs(refw) + 2) + np.abs(ref)
    if reduce != "none":
        v, ref = getattr(v, reduce)(), A(getattr(ref, reduce)())
        scale = np.array(scale.sum() * (1 if reduce != "prod" else np.prod(scale))) if scale.size else np.array(1.0)
    note(f"steps {steps}, reduce {reduce}")
    got = v.numpy()
    assert got.dtype == np.complex64 and got.shape == ref.shape
    assert (np.abs(got - ref) <= 1e-5 * scale + 1e-6).all(), (got, ref)
