"""Negative strides (flip, x[::-1]), masked views (pad, concat, stack, roll) and index vectors
(arange, linspace, eye), against numpy on every device; fusion checked by counting kernels; the
lowering's gated loads checked for out-of-bounds reads in the loop IR interpreter."""
from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest

import ug_core as ug
from ug_core.kernel_ir import Kernel
from ug_core.lower import LowerOptions, lower
from ug_core.loop_ir import Opc
from ug_core.view import View, compose

sys.path.insert(0, os.path.dirname(__file__))
import loop_interp  # noqa: E402


def _rand(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _same(got, want) -> None:
    got = got.numpy() if isinstance(got, ug.Tensor) else got
    assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
    np.testing.assert_array_equal(got, want)


def _close(got, want) -> None:  # (exp is within a few ulp of numpy's on the devices)
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-6, atol=0)


def _kernels(*tensors) -> int:
    return len(ug.schedule(*tensors).kernels)


# --- views in the abstract ---------------------------------------------------------------------


def test_view_canonical_forms():
    assert View((3, 4), (4, 1), 0, ((0, 3), (0, 4))).mask is None          # a full mask is no mask
    void = View((3, 4), (4, 1), 5, ((1, 1), (0, 4)))
    assert void.is_void and void == View.void((3, 4)) and void.strides == (0, 0)
    assert View((), (), 0, ()).is_void and not View((), (), 0).is_void  # 0-d: mask () is void
    assert View.contiguous((3,)).pad(((2, 0),)).pad(((0, 0),)) == View((5,), (1,), -2, ((2, 5),))
    assert View.contiguous((4,)).flip((0,)) == View((4,), (-1,), 3)
    assert View.contiguous((4,)).flip((0,)).bounds() == (0, 4)
    assert View.contiguous((2, 3)).pad(((1, 1), (0, 0))).index(0, 0).is_void


def _read(view: View, source: np.ndarray) -> np.ndarray:
    """What reading `source` (flat) through `view` gives, element by element."""
    out = np.zeros(view.shape, source.dtype)
    for idx in np.ndindex(*view.shape):
        ok = view.mask is None or all(lo <= i < hi for i, (lo, hi) in zip(idx, view.mask))
        if ok and not view.is_void:
            out[idx] = source[view.offset + sum(i * s for i, s in zip(idx, view.strides))]
    return out


@pytest.mark.parametrize("inner", [
    View.contiguous((4, 6)).flip((1,)),
    View.contiguous((4, 6)).pad(((1, 2), (0, 3))),
    View.contiguous((4, 6)).flip((0, 1)).pad(((2, 0), (1, 1))),
    View.contiguous((6, 4)).permute((1, 0)).slice((3, 5), (3, 3), (-1, -2)),
    View.contiguous((4, 6)).pad(((0, 0), (2, 2))).flip((1,)),
])
def test_compose_reads_what_the_two_views_read(rng, inner):
    source = np.arange(100, dtype=np.int64) + 1
    layout = _read(inner, source).reshape(-1)
    n = inner.size
    outers = [View.contiguous((n,)), View.contiguous((n,)).flip((0,)), View.contiguous(inner.shape).flip((0,)),
              View.contiguous(inner.shape).permute(tuple(reversed(range(len(inner.shape))))),
              View.contiguous(inner.shape).pad(tuple((1, 1) for _ in inner.shape)),
              View.contiguous(inner.shape).slice((1,) + (0,) * (len(inner.shape) - 1),
                                                 (inner.shape[0] - 1,) + inner.shape[1:], (1,) * len(inner.shape))]
    for outer in outers:
        merged = compose(outer, inner)
        want = _read(outer, layout)
        if merged is not None:
            np.testing.assert_array_equal(_read(merged, source), want, err_msg=f"{outer} o {inner} = {merged}")


# --- negative steps and flips --------------------------------------------------------------------


INDEXES = [np.s_[::-1], np.s_[::-2], np.s_[5:1:-1], np.s_[-1:-8:-3], np.s_[:, ::-1], np.s_[::-1, 2:0:-1],
           np.s_[1:5:2, ::-3], np.s_[::-1, 3], np.s_[..., ::-2], np.s_[None, ::-1, None], np.s_[6:2], np.s_[2:6:-1]]


@pytest.mark.parametrize("index", INDEXES, ids=range(len(INDEXES)))
def test_negative_step_slices(device, rng, index):
    a = _rand(rng, 7, 5)
    _same(ug.tensor(a, device=device)[index], a[index])


def test_views_of_views_with_negative_strides(device, rng):
    a = _rand(rng, 4, 6, 5)
    x = ug.tensor(a, device=device)
    cases = [
        (lambda t: t[::-1][1:, ::-2][::-1]),
        (lambda t: t.reshape(-1)[::-1].reshape(5, 6, 4)[:, ::-3]),
        (lambda t: t.transpose(2, 0, 1)[::-1, 1::2].reshape(5, -1)[::-2]),
        (lambda t: t[::-1, ::-1, ::-1].reshape(24, 5)),
        (lambda t: t[:, 2][::-1] * 2 + t[::-1, 3]),
    ]
    for f in cases:
        _same(f(x), f(a))


def test_flip(device, rng):
    a = _rand(rng, 3, 4, 5)
    x = ug.tensor(a, device=device)
    for axis in (None, 0, 1, -1, (0, 2), (2, 1, 0)):
        _same(ug.flip(x, axis=axis), np.flip(a, axis=axis))
    _same(ug.flip(x.permute(2, 0, 1), axis=(0, 1)), np.flip(a.transpose(2, 0, 1), axis=(0, 1)))   # transposed
    _same(ug.flip(x[1:, ::2], axis=1), np.flip(a[1:, ::2], axis=1))                               # sliced
    b = _rand(rng, 4, 1)
    y = ug.tensor(b, device=device).broadcast_to((2, 4, 3))                                        # broadcast
    _same(ug.flip(y), np.flip(np.broadcast_to(b, (2, 4, 3))))
    np.testing.assert_allclose(ug.flip(x.sum(axis=1)).numpy(), np.flip(a.sum(axis=1)), rtol=1e-5)  # of a computed value
    _same(ug.flip(ug.tensor(np.float32(3), device=device)), np.flip(np.float32(3)))                # 0-d
    _same(ug.flip(ug.tensor(np.zeros((0, 3), np.float32), device=device), axis=0), np.zeros((0, 3), np.float32))
    with pytest.raises(ValueError):
        ug.tensor(a, device=device)[::0]


def test_reduce_of_a_flip(device, rng):
    a = _rand(rng, 6, 300)
    x = ug.tensor(a, device=device)
    np.testing.assert_allclose(x[::-1, ::-1].sum(axis=1).numpy(), a[::-1, ::-1].sum(axis=1), rtol=1e-5, atol=1e-5)
    _same(ug.flip(x, axis=1).max(axis=0), np.flip(a, axis=1).max(axis=0))


def test_assign_into_flipped_regions(device, rng):
    a, v = _rand(rng, 5, 4), _rand(rng, 5)
    x = ug.tensor(a, device=device)
    want = a.copy()
    x[::-1, 1] = ug.tensor(v, device=device)
    want[::-1, 1] = v
    x[4:0:-2] = 7.0
    want[4:0:-2] = 7.0
    _same(x, want)
    y = ug.tensor(a, device=device).realize()
    y[::-1] = y                                  # in place, reading what it overwrites: numpy's copy first
    _same(y, a[::-1])
    y[:, ::-1] = y[::-1] * 2
    _same(y, (a * 2)[:, ::-1])
    p = ug.pad(ug.tensor(a, device=device), 1)   # a padded tensor is a value of its own: writable
    p[0, ::-1] = 3.0
    wp = np.pad(a, 1)
    wp[0, ::-1] = 3.0
    _same(p, wp)


# --- masked views: pad, concat, stack, roll ---------------------------------------------------------


@pytest.mark.parametrize("width", [1, (2,), (1, 3), ((0, 2),), ((1, 0), (2, 3)), ((0, 0), (0, 4))], ids=str)
@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad(device, rng, width, mode):
    a = _rand(rng, 4, 5)
    _same(ug.pad(ug.tensor(a, device=device), width, mode=mode), np.pad(a, width, mode=mode))


def test_pad_values_dtypes_and_errors(device, rng):
    a = _rand(rng, 3, 4)
    x = ug.tensor(a, device=device)
    _same(ug.pad(x, 2, constant_value=-1.5), np.pad(a, 2, constant_values=-1.5))
    _same(ug.pad(x, 1, constant_value=-0.0), np.pad(a, 1, constant_values=-0.0))
    np.testing.assert_array_equal(np.signbit(ug.pad(x, 1, constant_value=-0.0).numpy()),
                                  np.signbit(np.pad(a, 1, constant_values=-0.0)))
    i = rng.integers(-9, 9, (3, 4)).astype(np.int32)
    _same(ug.pad(ug.tensor(i, device=device), (1, 2), constant_value=7), np.pad(i, (1, 2), constant_values=7))
    m = i > 0
    _same(ug.pad(ug.tensor(m, device=device), 1), np.pad(m, 1))
    _same(ug.pad(ug.tensor(m, device=device), 1, constant_value=True), np.pad(m, 1, constant_values=True))
    _same(ug.pad(x, (3, 11), mode="reflect"), np.pad(a, (3, 11), mode="reflect"))     # wider than the axis
    _same(ug.pad(x[:1], (2, 1), mode="reflect"), np.pad(a[:1], (2, 1), mode="reflect"))  # one element
    _same(ug.pad(x.T[::-1], ((1, 2), (2, 0)), mode="edge"), np.pad(a.T[::-1], ((1, 2), (2, 0)), mode="edge"))
    _close(ug.pad(x, 1).exp(), np.exp(np.pad(a, 1)))        # exp(0) = 1 in the padding: the mask is below the exp
    _close(ug.pad(x.exp(), 1), np.pad(np.exp(a), 1))        # and above it here: 0, not exp(0)
    _same(ug.pad(-x, 1), np.pad(-a, 1))                     # -0.0 would be wrong in the padding
    _same(ug.pad(ug.pad(x, 1)[::-1], (0, 2))[1:, 2:], np.pad(np.pad(a, 1)[::-1], (0, 2))[1:, 2:])
    _same(ug.pad(ug.tensor(np.zeros((0, 3), np.float32), device=device), 1), np.pad(np.zeros((0, 3), np.float32), 1))
    _same(ug.pad(ug.tensor(np.float32(2), device=device), 3), np.pad(np.float32(2), 3))
    p = ug.pad(x, 2)
    _same(p[0, 0], np.pad(a, 2)[0, 0])
    _same(p[3, 3], np.pad(a, 2)[3, 3])
    _same(p.reshape(-1)[::-3], np.pad(a, 2).reshape(-1)[::-3])
    with pytest.raises(ValueError):
        ug.pad(x, -1)
    with pytest.raises(TypeError):
        ug.pad(x, 1.5)
    with pytest.raises(ValueError):
        ug.pad(ug.tensor(np.zeros((0, 3), np.float32), device=device), 1, mode="edge")
    with pytest.raises(ValueError):
        ug.pad(x, 1, mode="symmetric")
    _same(ug.pad(x, 1, mode="wrap"), np.pad(a, 1, mode="wrap"))   # (a mode of its own now)


def test_concat(device, rng):
    a, b, c = _rand(rng, 2, 3), _rand(rng, 4, 3), _rand(rng, 1, 3)
    x, y, z = (ug.tensor(v, device=device) for v in (a, b, c))
    _same(ug.concat([x, y, z]), np.concatenate([a, b, c]))
    _same(ug.concat([x.T, y.T[:, ::-1], z.T], axis=-1), np.concatenate([a.T, b.T[:, ::-1], c.T], axis=-1))
    _same(ug.concat([x, y], axis=None), np.concatenate([a, b], axis=None))
    _same(ug.concat([x]), a)
    empty = np.zeros((0, 3), np.float32)
    _same(ug.concat([ug.tensor(empty, device=device), x, ug.tensor(empty, device=device)]), a)
    _same(ug.concat([ug.tensor(empty, device=device)] * 2), np.zeros((0, 3), np.float32))
    i = np.arange(6, dtype=np.int32).reshape(2, 3)
    _same(ug.concat([x, ug.tensor(i, device=device)]), np.concatenate([a, i]))      # promotion
    m = i > 2
    _same(ug.concat([ug.tensor(m, device=device), ug.tensor(~m, device=device)], axis=1), np.concatenate([m, ~m], axis=1))
    neg = np.array([-0.0, 1.0], np.float32)
    got = ug.concat([ug.tensor(neg, device=device)] * 2).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.concatenate([neg, neg])))  # -0.0 kept: a select
    _same(ug.concat([x.exp(), y], axis=0).sum(axis=0) * 0 + 1, np.ones(3, np.float32))
    _same(ug.concat([ug.pad(x, ((0, 0), (1, 0))), ug.flip(y)[:2, :2]], axis=1)[::-1],
          np.concatenate([np.pad(a, ((0, 0), (1, 0))), np.flip(b)[:2, :2]], axis=1)[::-1])
    with pytest.raises(ValueError):
        ug.concat([x, ug.tensor(a[:, :2], device=device)])
    with pytest.raises(ValueError):
        ug.concat([ug.tensor(np.float32(1), device=device)])


def test_stack_roll_tile_repeat(device, rng):
    a, b = _rand(rng, 3, 4), _rand(rng, 3, 4)
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    for axis in (0, 1, 2, -1):
        _same(ug.stack([x, y, x], axis=axis), np.stack([a, b, a], axis=axis))
    for shift, axis in ((1, None), (-5, None), (2, 0), (3, 1), ((1, -1), (0, 1)), ((1, 2), (1, 1)), (13, -1)):
        _same(ug.roll(x, shift, axis=axis), np.roll(a, shift, axis=axis))
    _same(ug.roll(ug.tensor(np.zeros((0, 2), np.float32), device=device), 1), np.zeros((0, 2), np.float32))
    _same(ug.tile(x, (2, 1, 3)), np.tile(a, (2, 1, 3)))
    _same(ug.repeat(x, 2, axis=1), np.repeat(a, 2, axis=1))


def test_concat_and_pad_fuse_into_their_consumer(device, rng):
    parts = [_rand(rng, 6, 5 + k) for k in range(8)]
    xs = [ug.tensor(p, device=device) for p in parts]
    soft = ug.concat(xs, axis=1).softmax(axis=-1)
    assert _kernels(soft) == 1
    joined = np.concatenate(parts, axis=1)
    e = np.exp(joined - joined.max(axis=1, keepdims=True))
    np.testing.assert_allclose(soft.numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    a = _rand(rng, 9, 11)
    p, ap = ug.pad(ug.tensor(a, device=device), 1), np.pad(a, 1)
    stencil = sum(p[i:i + 9, j:j + 11] * float(i + 3 * j) for i in range(3) for j in range(3))
    assert _kernels(stencil) == 1
    want = sum(ap[i:i + 9, j:j + 11] * np.float32(i + 3 * j) for i in range(3) for j in range(3))
    np.testing.assert_allclose(stencil.numpy(), want, rtol=1e-5, atol=1e-5)
    rolled = ug.roll(ug.tensor(a, device=device), 3, axis=1) + 1
    stacked = ug.stack([ug.tensor(a, device=device)] * 3).max(axis=0)
    assert _kernels(rolled) == 1 and _kernels(stacked) == 1
    _same(rolled, np.roll(a, 3, axis=1) + 1)


def test_jit_replays_views(device, rng):
    @ug.jit
    def f(x, y):
        return ug.concat([ug.flip(x, axis=0), ug.pad(y, ((0, 0), (1, 1)))[:, 1:-1] * 2], axis=0).sum(axis=1) + ug.arange(7, device=x.device)

    for _ in range(3):
        a, b = _rand(rng, 3, 4), _rand(rng, 4, 4)
        want = np.concatenate([np.flip(a, axis=0), b * 2], axis=0).sum(axis=1) + np.arange(7)
        got = f(ug.tensor(a, device=device), ug.tensor(b, device=device))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


# --- index vectors -----------------------------------------------------------------------------------


ARANGES = [((10,), {}), ((3, 17, 2), {}), ((-5, 5), {}), ((10, 0, -3), {}), ((0,), {}), ((3, 3), {}),
           ((0, 1, 0.1), {}), ((0.1, 10.3, 0.7), {}), ((-0.0, 3.0), {}), ((0.5, 0.1, -0.07), {}),
           ((1e6, 1e6 + 100, 0.3), {}), ((0, 5), {"dtype": np.float16}), ((0.1, 5, 0.3), {"dtype": np.float16}),
           ((5,), {"dtype": np.int32}), ((2**40, 2**40 + 50, 7), {}), ((0, 1, 0.1), {"dtype": np.float64})]


@pytest.mark.parametrize("args,kw", ARANGES, ids=[str(a) + str(k.get("dtype", "")) for a, k in ARANGES])
def test_arange_is_numpys(device, args, kw):
    dtype = kw.get("dtype") or (np.float32 if any(isinstance(v, float) for v in args) else np.int64)
    if np.dtype(dtype) not in ug.registry.get(device).dtypes:
        pytest.skip(f"{device} has no {np.dtype(dtype).name}")
    got = ug.arange(*args, device=device, **kw).numpy()
    want = np.arange(*args, dtype=dtype)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "f" and device != "ref":  # (cpu contracts v0 + i * delta into an fma)
        np.testing.assert_array_max_ulp(got, want, maxulp=1)
    else:
        assert got.tobytes() == want.tobytes(), (got, want)


def test_index_vectors_fuse(device):
    n = 3000
    x = ug.arange(n, device=device) * 2 + ug.linspace(0, 1, n, device=device)
    assert _kernels(x) == 1
    np.testing.assert_allclose(x.numpy(), np.arange(n) * 2 + np.linspace(0, 1, n, dtype=np.float32), rtol=1e-6)
    for k in (-2, 0, 3):
        _same(ug.eye(4, 6, k=k, device=device), np.eye(4, 6, k=k, dtype=np.float32))
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    _same(ug.tril(ug.tensor(a, device=device), k=1), np.tril(a, k=1))
    _same(ug.triu(ug.tensor(a, device=device)[::-1], k=-1), np.triu(a[::-1], k=-1))
    _same(ug.arange(12, device=device).reshape(3, 4)[::-1, 1:], np.arange(12).reshape(3, 4)[::-1, 1:])
    _same(ug.pad(ug.arange(5, device=device), 2, constant_value=9), np.pad(np.arange(5), 2, constant_values=9))


# --- the lowering: gated loads never read out of bounds, loops split at the masks' bounds -----------


CONFIGS = {
    "cpu": LowerOptions("cpu"),
    "cpu-outer4": LowerOptions("cpu", sum_block=16, outer_block=4, outer_block_always=True),
    "cpu-block4": LowerOptions("cpu", sum_block=4),
    "gpu-l8": LowerOptions("gpu", local_size=8, gpu_serial_max_extent=0),
    "gpu-l8-block2": LowerOptions("gpu", local_size=8, gpu_serial_max_extent=0, sum_block=2),
    "gpu-serial": LowerOptions("gpu", local_size=8, gpu_serial_max_extent=10**9),
}


def _program(out: ug.Tensor, opts: LowerOptions):
    (item,) = ug.schedule(out).kernels
    return item, lower(item.kernel, opts)


def _run_in_interpreter(out: ug.Tensor, opts: LowerOptions) -> np.ndarray:
    item, program = _program(out, opts)
    buffers = [np.zeros(n.shape, n.dtype).reshape(-1) for n in item.outputs]
    buffers += [np.ascontiguousarray(ug.Tensor(n).numpy()).reshape(-1) for n in item.buffers[len(item.outputs):]]
    loop_interp.run(program, buffers)
    return buffers[0].reshape(out.shape)


def _gated(program) -> bool:
    return any(i.opc is Opc.GATED_LOAD for i in program.instructions)


@pytest.mark.parametrize("config", CONFIGS)
def test_gated_loads_in_the_loop_ir(rng, config):
    a, b = _rand(rng, 5, 7), _rand(rng, 3, 7)
    x, y = ug.tensor(a, device="ref"), ug.tensor(b, device="ref")
    cases = [
        (ug.pad(x, (2, 3)), np.pad(a, (2, 3))),
        (ug.concat([x, y]).exp().sum(axis=1, keepdims=True), np.exp(np.concatenate([a, b])).sum(axis=1, keepdims=True)),
        (ug.concat([x.T, y.T], axis=1).max(axis=0, keepdims=True), np.concatenate([a.T, b.T], axis=1).max(axis=0, keepdims=True)),
        (ug.pad(x, 2).reshape(-1)[::-3] + 1, np.pad(a, 2).reshape(-1)[::-3] + 1),
        (ug.flip(ug.pad(x[::-1], ((1, 0), (3, 1)))), np.flip(np.pad(a[::-1], ((1, 0), (3, 1))))),
        (ug.arange(35, device="ref").reshape(5, 7)[::-1] * 1.0 + x, np.arange(35).reshape(5, 7)[::-1] + a),
    ]
    for out, want in cases:
        np.testing.assert_allclose(_run_in_interpreter(out, CONFIGS[config]), want, rtol=1e-5, atol=1e-6)


class _Numpy:
    """numpy under the names of ug's namespace, so that a case is written once for both."""
    pad = staticmethod(np.pad)
    concat = staticmethod(np.concatenate)
    exp = staticmethod(np.exp)


def _softmax(ns, x):
    e = ns.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# name -> (input shapes, the computation in a namespace (ug or _Numpy), whether the cpu lowering
# keeps a gated load). Each is one kernel whose loops split where masks start or end.
SPLITS = {
    "pad: segments of 1 at both ends of both dims": (
        [(5, 7)], lambda ns, a: ns.pad(a, 1) * 2, False),
    "concat: a last segment of 1": (
        [(5, 7), (5, 4), (5, 1)], lambda ns, a, b, c: ns.concat([a, b, c], axis=1) + 1, False),
    "the masks of several inputs overlap": (
        [(5, 7), (5, 4)], lambda ns, a, b: ns.concat([ns.pad(a, ((0, 0), (2, 0))), b], axis=1)
        * ns.pad(ns.concat([b, a], axis=1), ((0, 0), (0, 2))) + ns.pad(a[:, ::-1], ((0, 0), (5, 1))), False),
    "concat along the outer dim: a version per part": (
        [(5, 7), (1, 7)], lambda ns, a, b: ns.concat([a, b, a[::-1]], axis=0) - 1, False),
    "1-d concat in chunks (empty segments in some)": (
        [(5000,), (3,), (4100,)], lambda ns, a, b, c: ns.concat([a, b, c, b]) * 3, False),
    "4-d pad: more versions than allowed (a dim keeps its gates)": (
        [(2, 3, 4, 5)], lambda ns, a: ns.pad(a, 1) + 1, True),
    "row sum over a masked axis": (
        [(5, 7), (5, 4), (5, 1)], lambda ns, a, b, c: ns.concat([a, b, c], axis=1).sum(axis=1), False),
    "row softmax over a concat": (
        [(5, 7), (5, 4), (5, 1)], lambda ns, a, b, c: _softmax(ns, ns.concat([c, a, b], axis=1)), False),
    "long row sum over a pad (blocked sums)": (
        [(3, 37)], lambda ns, a: ns.pad(ns.exp(a), ((0, 0), (5, 11))).sum(axis=1), False),
    "column max over a concat along the reduced axis": (
        [(5, 7), (2, 7)], lambda ns, a, b: ns.concat([b, a, b], axis=0).max(axis=0), False),
    "row max of a pad of rows: a version per row segment": (
        [(5, 7)], lambda ns, a: ns.pad(a, ((1, 2), (0, 0))).max(axis=1), False),
    "sum over both axes, masked leading": (
        [(5, 7)], lambda ns, a: ns.pad(a, ((2, 1), (0, 0))).sum(), False),
    "sum over both axes, masked second (keeps its gates)": (
        [(5, 7)], lambda ns, a: ns.pad(a, ((0, 0), (1, 2))).sum(), True),
    "a mask after a reshape (keeps its gate)": (
        [(5, 7)], lambda ns, a: ns.pad(a, 2).reshape(-1)[::-3] + 1, True),
}


def _split_inputs(rng, shapes):
    return [_rand(rng, *shape) for shape in shapes]


@pytest.mark.parametrize("case", SPLITS)
def test_split_loops(device, rng, case):
    shapes, f, _ = SPLITS[case]
    arrays = _split_inputs(rng, shapes)
    got = f(ug, *(ug.tensor(a, device=device) for a in arrays))
    assert _kernels(got) == 1
    np.testing.assert_allclose(got.numpy(), f(_Numpy, *arrays), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("case", SPLITS)
def test_split_loops_in_the_loop_ir(rng, case, config):
    shapes, f, keeps_gates = SPLITS[case]
    arrays = _split_inputs(rng, shapes)
    out = f(ug, *(ug.tensor(a, device="ref") for a in arrays))
    np.testing.assert_allclose(_run_in_interpreter(out, CONFIGS[config]), f(_Numpy, *arrays), rtol=2e-6, atol=1e-6)
    if config == "cpu":  # every mask on a dim a loop splits or a version fixes: no gate left
        assert _gated(_program(out, CONFIGS[config])[1]) == keeps_gates


def test_split_loops_keep_numpys_edge_cases(device, rng):
    a, b = _rand(rng, 4, 6), _rand(rng, 4, 3)
    a[1, 2], b[2, 0], a[3, :] = np.nan, np.nan, -0.0
    b[3, :] = -0.0
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    joined = np.concatenate([a, b], axis=1)
    _same(ug.concat([x, y], axis=1).max(axis=1), joined.max(axis=1))        # NaN in one segment or the other
    _same(ug.concat([x, y], axis=1).min(axis=1), joined.min(axis=1))
    np.testing.assert_array_equal(np.signbit(ug.concat([x, y], axis=1).numpy()), np.signbit(joined))  # -0.0 kept
    i, j = rng.integers(-2**31, 2**31 - 1, (3, 5)).astype(np.int32), rng.integers(-9, 9, (3, 2)).astype(np.int32)
    xi, yi = ug.tensor(i, device=device), ug.tensor(j, device=device)
    _same(ug.concat([xi, yi], axis=1).max(axis=1), np.concatenate([i, j], axis=1).max(axis=1))
    _same(ug.pad(xi, 1) * 3, np.pad(i, 1) * 3)                                # wrapping int math
    empty = np.zeros((0, 5), np.float32)
    _same(ug.concat([ug.tensor(empty, device=device)] * 2, axis=0).sum(axis=0), np.zeros(5, np.float32))
    _same(ug.pad(ug.tensor(a, device=device)[:, :0], ((0, 0), (2, 1))).sum(axis=1), np.zeros(4, np.float32))


def test_index_vector_offsets_are_arguments(device):
    """arange(n)[i:...] for each i is one kernel: the view's offset is a runtime value."""
    keys = set()
    for i in (0, 1, 5, 9):
        y = ug.arange(20, device=device)[i:i + 6] * 2
        keys.add(ug.schedule(y).kernels[0].kernel.key())
        _same(y, np.arange(20)[i:i + 6] * 2)
    assert len(keys) == 2  # offset 0 stays in the code
    _same(ug.pad(ug.arange(12, device=device)[3:], (2, 1)) - 1, np.pad(np.arange(12)[3:], (2, 1)) - 1)
    _same(ug.arange(10, device=device)[7] * 1, np.int64(7))


def test_concat_softmax_has_no_per_element_gate():
    """cpu: the loops of a softmax over a concat of 8 split into one plain loop per input, which
    LLVM vectorizes (no gated or masked load is left); likewise a pad's 3x3 stencil."""
    pytest.importorskip("ug_llvm")
    if "cpu" not in ug.devices():
        pytest.skip("no cpu device")
    cpu = ug.registry.get("cpu")
    xs = [ug.tensor(np.zeros((16, 64), np.float32), device="cpu") for _ in range(8)]
    p = ug.pad(ug.tensor(np.zeros((32, 64), np.float32), device="cpu"), 1)
    stencil = sum(p[i:i + 32, j:j + 64] * float(i + 3 * j + 1) for i in range(3) for j in range(3))
    for out in (ug.concat(xs, axis=-1).softmax(axis=-1), stencil):
        (item,) = ug.schedule(out).kernels
        program = cpu.lower(item.kernel)
        assert not _gated(program)
        assert not any(i.opc is Opc.ALU and i.arg is ug.ops.Op.WHERE for i in program.instructions)
        optimized = cpu.jit.target.optimized_ir(cpu.render(item.kernel))
        assert re.search(r"load <\d+ x float>", optimized), "not vectorized"
        assert "masked.load" not in optimized and "gather" not in optimized
