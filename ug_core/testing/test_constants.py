"""Python scalars are kernel arguments, not code (ug_core.scalars): a new value reuses the kernel
compiled for the last one; only values that change the code are folded into it. And the
in-memory caches are bounded."""

import numpy as np
import pytest

import ug_core as ug
from ug_core import scalars
from ug_core.ops import Op
from ug_core.testing.data import RNG

VALUES = [float(v) for v in np.random.default_rng(11).uniform(-50, 50, 200)]  # none of them folds


def _bits_equal(got, expected):
    """Equal bit for bit where the values are not NaN (-0.0 is not 0.0), NaN where expected is."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    nan = np.isnan(expected) if expected.dtype.kind == "f" else np.zeros(expected.shape, bool)
    assert np.array_equal(np.isnan(got) if got.dtype.kind == "f" else nan, nan)
    view = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[expected.dtype.itemsize]
    assert np.array_equal(got[~nan].view(view), expected[~nan].view(view))


# --- a new value reuses the kernel --------------------------------------------------------------


@pytest.mark.parametrize("op", ["mul", "add", "rsub", "lt", "maximum", "where"])
def test_distinct_scalars_compile_one_kernel(device, compile_cache, op):
    xn = RNG.standard_normal(257).astype(np.float32) * 40
    x = ug.tensor(xn, device=device)
    ops = {
        "mul": (lambda t, c: t * c, lambda a, c: a * np.float32(c)),
        "add": (lambda t, c: t + c, lambda a, c: a + np.float32(c)),
        "rsub": (lambda t, c: c - t, lambda a, c: np.float32(c) - a),
        "lt": (lambda t, c: t < c, lambda a, c: a < np.float32(c)),
        "maximum": (lambda t, c: ug.maximum(t, c), lambda a, c: np.maximum(a, np.float32(c))),
        "where": (lambda t, c: ug.where(t > 0, c, t), lambda a, c: np.where(a > 0, np.float32(c), a)),
    }
    build, oracle = ops[op]
    for c in VALUES:
        _bits_equal(build(x, c).numpy(), oracle(xn, c))
    assert compile_cache.misses <= 2, f"{compile_cache.misses} kernels compiled for {len(VALUES)} scalars"
    assert len(compile_cache.schedules) <= 2  # and the realized graphs have one structure


def test_special_values_are_arguments_with_their_bits(device, compile_cache):
    xn = np.array([3.0, -2.0, 0.0, -0.0, np.inf, 1e-30], np.float32)
    x = ug.tensor(xn, device=device)
    for c in [7.25, -0.0, float("nan"), float("inf"), float("-inf"), 1e-38, 3.4e38, -7.25]:
        with np.errstate(all="ignore"):
            _bits_equal((x * c).numpy(), xn * np.float32(c))
            _bits_equal((x + c).numpy(), xn + np.float32(c))
    assert compile_cache.misses <= 2
    # -0.0 and 0.0, and NaNs of other payloads, are other values to a kernel: other entries
    f32 = np.dtype(np.float32)
    nodes = {id(scalars.scalar(v, f32, device)) for v in (-0.0, np.float32(np.nan), np.uint32(0x7FC00001).view(np.float32))}
    assert len(nodes) == 3
    assert scalars.scalar(0.0, f32, device).op is Op.CONST and scalars.scalar(-0.0, f32, device).op is Op.BUFFER


def test_integer_and_half_scalars(device, compile_cache, require_dtype):
    xi = np.arange(-20, 20, dtype=np.int32)
    ti = ug.tensor(xi, device=device)
    for c in (7, -3, 12345, 99):
        _bits_equal((ti * c).numpy(), xi * np.int32(c))
        _bits_equal((ti + c).numpy(), xi + np.int32(c))
    _bits_equal((ti * 2.5).numpy(), xi.astype(np.float32) * np.float32(2.5))  # a float scalar: float32
    _bits_equal((ti * 3.75).numpy(), xi.astype(np.float32) * np.float32(3.75))
    assert compile_cache.misses <= 3  # mul and add on int32, and the float32 product of an int32 tensor
    require_dtype(np.float16)
    xh = RNG.standard_normal(33).astype(np.float16)
    th = ug.tensor(xh, device=device)
    for c in (3.3, 0.1, -1234.5):
        _bits_equal((th * c).numpy(), xh * np.float16(c))


def test_assigning_distinct_floats_reuses_the_kernel(device, compile_cache):
    t = ug.zeros((16,), device=device).realize()
    expected = np.zeros(16, np.float32)
    misses = None
    for i, v in enumerate(VALUES[:100]):
        if i == 2:  # index 0 (no offset) and index 1 (an offset argument): the two kernels
            misses = compile_cache.misses
        t[i % 16] = v
        t.realize()
        expected[i % 16] = v
    _bits_equal(t.numpy(), expected)
    assert compile_cache.misses == misses
    t.assign(VALUES[100])
    _bits_equal(t.numpy(), np.full(16, VALUES[100], np.float32))
    t.assign(VALUES[101])
    _bits_equal(t.numpy(), np.full(16, VALUES[101], np.float32))
    assert compile_cache.misses == misses + 1


# --- view offsets are arguments too (kernel_params) ----------------------------------------------


def test_indices_and_windows_reuse_the_kernel(device, compile_cache):
    """`x[i] = v`, `x[i].item()`, a window `x[i:i+4]` and a row `m[i]` for every i: two kernels
    each (offset 0 is code, every other offset an argument), not one per index."""
    xn = np.zeros(64, np.float32)
    mn = RNG.standard_normal((16, 8)).astype(np.float32)
    x, m = ug.tensor(xn, device=device), ug.tensor(mn, device=device)
    counts = {}
    for name, step in [
        ("set", lambda i: (x.__setitem__(i, VALUES[i]), xn.__setitem__(i, np.float32(VALUES[i])), x.realize())),
        ("item", lambda i: _bits_equal(np.float32(x[i].item()), xn[i])),
        ("window", lambda i: np.testing.assert_allclose(x[i:i + 4].sum().numpy(), xn[i:i + 4].sum(), rtol=1e-6)),
        ("row", lambda i: np.testing.assert_allclose((m[i] * 3.0 + m[i // 2]).numpy(), mn[i] * 3.0 + mn[i // 2], rtol=1e-5, atol=1e-6)),
        ("set-row", lambda i: (m.__setitem__((i, slice(2, 6)), m[15 - i, 1:5] + 1.0),
                               mn.__setitem__((i, slice(2, 6)), mn[15 - i, 1:5] + np.float32(1.0)), m.realize())),
    ]:
        before = compile_cache.misses
        for i in range(16):
            step(i)
        counts[name] = compile_cache.misses - before
    _bits_equal(x.numpy(), xn)
    _bits_equal(m.numpy(), mn)
    assert max(counts.values()) <= 4, counts  # (one per index: 16)


def test_stencil_offsets_in_one_kernel_and_kept_schedules(device, compile_cache):
    """Several offsets of one buffer in one kernel, a strided region, and a graph realized again
    on new inputs through its kept schedule (which holds the offsets, not the graph's nodes)."""
    for trial in range(3):
        xn = RNG.standard_normal(50).astype(np.float32)
        x = ug.tensor(xn, device=device)
        y = x[2:] - x[1:-1] * 2.0 + x[:-2]
        z = ug.zeros((60,), device=device)
        z[5:53] = y
        z[1:60:7] = x[10:19]
        expected = np.zeros(60, np.float32)
        expected[5:53] = xn[2:] - xn[1:-1] * np.float32(2.0) + xn[:-2]
        expected[1:60:7] = xn[10:19]
        np.testing.assert_allclose(z.numpy(), expected, rtol=1e-6, atol=1e-6)
        if trial == 0:
            misses = compile_cache.misses
    assert compile_cache.misses == misses


def test_full_with_distinct_values(device, compile_cache):
    x = ug.tensor(np.arange(6, dtype=np.float32), device=device)
    for v in VALUES[:50]:
        _bits_equal((ug.full((6,), v, device=device) + x).numpy(), np.float32(v) + np.arange(6, dtype=np.float32))
    assert compile_cache.misses <= 2
    # writing a filled tensor never changes the kept scalar it was filled from
    for shape in ((), (3,)):
        t = ug.full(shape, 9.5, device=device)
        t.assign(ug.full(shape, -4.0, device=device) * 2.75)
        assert np.all(t.numpy() == -11.0)
        if shape:
            t[1] = 123.5
            assert t.numpy().tolist() == [-11.0, 123.5, -11.0]
        _bits_equal((x * 9.5).numpy(), np.arange(6, dtype=np.float32) * np.float32(9.5))
        _bits_equal(ug.full(shape, 9.5, device=device).numpy(), np.full(shape, 9.5, np.float32))


def test_non_integral_exponents_are_arguments(device, compile_cache, close):
    xn = RNG.uniform(0.5, 3.0, 40).astype(np.float32)
    x = ug.tensor(xn, device=device)
    for e in (2.7, 1.3, -0.8, 0.37):
        close(x ** e, xn ** np.float32(e), rtol=1e-5)
    assert compile_cache.misses <= 2
    close(x ** 3, xn ** 3)
    close(2.7 ** x, np.float32(2.7) ** xn, rtol=1e-5)


# --- ug.jit ---------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:ug.jit")  # (its advice to pass changing numbers as tensors)
def test_jit_with_scalar_arguments_and_captured_constants(device, compile_cache, monkeypatch, close):
    xn = RNG.standard_normal(50).astype(np.float32)
    x = ug.tensor(xn, device=device)
    f = ug.jit(lambda t, c: t * c)
    for c in VALUES[:40]:
        _bits_equal(f(x, c).numpy(), xn * np.float32(c))
    assert compile_cache.misses <= 2  # a trace per value (the key holds it), one kernel for all
    scale = 6.125
    g = ug.jit(lambda t: t * scale - 3.3)
    close(g(x), xn * np.float32(6.125) - np.float32(3.3))  # (close: the cpu may fuse it into an fma)
    # the trace holds its scalars' buffers: evicting them from the kept scalars changes nothing
    monkeypatch.setattr(scalars.scalar_cache.nodes, "max_entries", 1)
    scalars.scalar_cache.clear()
    for c in VALUES[:10]:
        (x + c).realize()
    assert len(scalars.scalar_cache.nodes) == 1
    y = ug.tensor(-xn, device=device)
    close(g(y), -xn * np.float32(6.125) - np.float32(3.3))
    close(g(x), xn * np.float32(6.125) - np.float32(3.3))


# --- the bounds of the caches ---------------------------------------------------------------------


def test_kept_scalars_are_bounded(device, monkeypatch):
    monkeypatch.setattr(scalars.scalar_cache.nodes, "max_entries", 8)
    scalars.scalar_cache.clear()
    x = ug.tensor(np.arange(4, dtype=np.float32), device=device)
    results = [x * c for c in VALUES[:40]]
    assert len(scalars.scalar_cache.nodes) == 8
    for c, r in zip(VALUES[:40], results):  # evicted ones still hold their value where they are used
        _bits_equal(r.numpy(), np.arange(4, dtype=np.float32) * np.float32(c))


def test_program_cache_is_lru_bounded(device, compile_cache, monkeypatch):
    monkeypatch.setattr(compile_cache.programs, "max_entries", 3)
    dev = ug.registry.get(device)
    kernels = [ug.schedule(ug.tensor(np.ones(n, np.float32), device=device) * 3.5).kernels[0].kernel for n in range(1, 5)]
    for k in kernels[:3]:
        compile_cache.get(dev, k)
    compile_cache.get(dev, kernels[0])   # a hit: now the most recently used
    compile_cache.get(dev, kernels[3])   # a miss: kernels[1], the least recently used, goes
    assert len(compile_cache.programs) == 3
    misses = compile_cache.misses
    compile_cache.get(dev, kernels[0])
    compile_cache.get(dev, kernels[2])
    assert compile_cache.misses == misses
    compile_cache.get(dev, kernels[1])
    assert compile_cache.misses == misses + 1 and len(compile_cache.programs) == 3
