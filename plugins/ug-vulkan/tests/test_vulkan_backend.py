"""The Vulkan device end to end (skipped without a Vulkan driver; lavapipe runs it on the CPU).
Every module compiled here also passes spirv-val (the fixture's device validates)."""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug
from ug_core.loop_ir import Opc
from ug_core.plugins import registry

RNG = np.random.default_rng(5)


def test_device_reports_name_and_limits(vk_dev):
    assert vk_dev.description and vk_dev.device_name in vk_dev.description
    assert 1 <= vk_dev.local_size <= min(vk_dev.max_invocations, vk_dev.max_group_size[0])
    assert vk_dev.tile * vk_dev.tile <= vk_dev.max_invocations
    assert np.dtype(np.float32) in vk_dev.dtypes and np.dtype(bool) in vk_dev.dtypes


@pytest.mark.parametrize("cols", [1, 5, 17, 255, 257, 1000, 4099])
def test_row_lengths_not_a_multiple_of_the_workgroup(vk_name, cols):
    a = RNG.standard_normal((3, cols)).astype(np.float32)
    x = ug.tensor(a, device=vk_name)
    np.testing.assert_allclose(x.sum(axis=1).numpy(), a.sum(1), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(x.max(axis=1).numpy(), a.max(1))
    e = np.exp(a - a.max(1, keepdims=True))
    sm = (x - x.max(axis=1, keepdims=True)).exp()
    np.testing.assert_allclose((sm / sm.sum(axis=1, keepdims=True)).numpy(), e / e.sum(1, keepdims=True),
                               rtol=1e-5, atol=1e-6)


def test_launch_respects_small_device_limits(vk_dev, vk_name):
    """Pretend the device allows 48 invocations and 5 workgroups per dim: lowering must pick a
    non-power-of-two local size and spill the grid over y and z."""
    saved = vk_dev.local_size, vk_dev.max_group_count, vk_dev.max_invocations
    try:
        vk_dev.max_invocations, vk_dev.local_size, vk_dev.max_group_count = 48, 48, (5, 5, 65535)
        a = RNG.standard_normal((37, 300)).astype(np.float32)
        x = ug.tensor(a, device=vk_name)
        from ug_core.runtime import compile_cache
        compile_cache.clear()
        np.testing.assert_allclose((x * 2 + 1).numpy(), a * 2 + 1, rtol=1e-6)
        np.testing.assert_allclose(x.sum(axis=1).numpy(), a.sum(1), rtol=1e-4, atol=1e-4)
        for prog in compile_cache.programs.values():
            assert np.prod(prog.local_size) <= 48
            assert all(g <= 5 for g in prog.global_size[:2])
    finally:
        vk_dev.local_size, vk_dev.max_group_count, vk_dev.max_invocations = saved
        from ug_core.runtime import compile_cache
        compile_cache.clear()


def test_buffer_beyond_max_storage_range_is_a_clear_error(vk_dev, vk_name):
    saved = vk_dev.max_storage_range
    vk_dev.max_storage_range = 1024
    try:
        with pytest.raises(MemoryError, match="maxStorageBufferRange"):
            ug.tensor(np.zeros(1000, np.float32), device=vk_name).numpy()
    finally:
        vk_dev.max_storage_range = saved


def test_shared_memory_limit_shrinks_the_workgroup(vk_dev, vk_name):
    saved = vk_dev.max_shared
    vk_dev.max_shared = 256
    try:
        a = RNG.standard_normal((4, 500)).astype(np.float32)
        x = ug.tensor(a, device=vk_name)
        np.testing.assert_allclose(x.sum(axis=1).numpy(), a.sum(1), rtol=1e-4, atol=1e-4)
        sched = ug.schedule(x.sum(axis=1))
        program = vk_dev.lower(sched.kernels[0].kernel)
        shared = sum(i.arg * i.dtype.itemsize for i in program.instructions if i.opc is Opc.DEFINE_LOCAL)
        assert shared <= 256
    finally:
        vk_dev.max_shared = saved


@pytest.mark.parametrize("shape_a,shape_b", [((1, 1), (1, 1)), ((17, 33), (33, 19)), ((2, 3, 40, 7), (7, 5)),
                                             ((5, 16), (16, 16)), ((0, 4), (4, 3)), ((3, 0), (0, 2))])
def test_matmul_shapes(vk_name, shape_a, shape_b):
    a = RNG.standard_normal(shape_a).astype(np.float32)
    b = RNG.standard_normal(shape_b).astype(np.float32)
    got = (ug.tensor(a, device=vk_name) @ ug.tensor(b, device=vk_name)).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_matmul_strided_and_broadcast_views(vk_name):
    a = RNG.standard_normal((4, 30, 20)).astype(np.float32)
    b = RNG.standard_normal((25, 30)).astype(np.float32)
    x, y = ug.tensor(a, device=vk_name), ug.tensor(b, device=vk_name)
    got = (x[:, ::2, 1:].transpose(0, 2, 1) @ y[:, 3:18].T[None]).numpy()  # (4,19,15) @ (1,15,25)
    want = a[:, ::2, 1:].transpose(0, 2, 1) @ b[:, 3:18].T[None]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dt", [np.int32, np.int64, np.float64, np.float16, np.bool_])
def test_matmul_dtypes(vk_dev, vk_name, dt):
    if np.dtype(dt) not in vk_dev.dtypes:
        pytest.skip(f"{vk_dev.device_name} lacks {dt}")
    if dt == np.bool_:
        a, b = RNG.random((9, 21)) > 0.7, RNG.random((21, 6)) > 0.7
    else:
        a, b = (RNG.integers(-5, 5, s).astype(dt) for s in ((9, 21), (21, 6)))
    got = (ug.tensor(a, device=vk_name) @ ug.tensor(b, device=vk_name)).numpy()
    np.testing.assert_allclose(got.astype(np.float64), (a @ b).astype(np.float64), rtol=2e-3)


def test_fallbacks_without_int64_8bit_storage_float64_float16(make_device):
    """32-bit index math, bools in 32-bit words (atomic and/or stores), and a clear TypeError for
    the dtypes the device does not offer."""
    name = make_device(disable={"int64", "int8storage", "float64", "float16"})
    dev = registry.get(name)
    assert not dev.caps.int64 and not dev.caps.int8_storage
    for dt in (np.int64, np.float64, np.float16):
        with pytest.raises(TypeError, match=f"{name}.*{np.dtype(dt).name}|{np.dtype(dt).name}.*{name}"):
            ug.tensor(np.zeros(3, dt), device=name)
    a = RNG.standard_normal((5, 301)).astype(np.float32)
    x = ug.tensor(a, device=name)
    np.testing.assert_array_equal((x > 0).numpy(), a > 0)  # neighbouring bytes of a word written by different threads
    np.testing.assert_array_equal(((x > 0) == (x < 1)).numpy(), (a > 0) == (a < 1))
    np.testing.assert_allclose(x.sum(axis=1).numpy(), a.sum(1), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(ug.where(x > 0, x, 0.0).numpy(), np.where(a > 0, a, np.float32(0)))
    np.testing.assert_array_equal((x > 0).max(axis=1).numpy(), (a > 0).max(1))
    np.testing.assert_allclose((x @ x.T).numpy(), a @ a.T, rtol=1e-4, atol=1e-4)


def test_float64_math_runs_on_the_device(vk_dev, vk_name):
    """GLSL.std.450 has no float64 exp/log/...: ug_core.mathlib's loop IR computes them on the
    device (its accuracy: tests/test_mathlib.py, in the loop IR interpreter)."""
    if np.dtype(np.float64) not in vk_dev.dtypes or np.dtype(np.int64) not in vk_dev.dtypes:
        pytest.skip("no float64 or int64")
    a = np.concatenate([RNG.uniform(-30, 30, 200), [0.0, -0.0, 1e-300, 5e-324, 700.0, -740.0, 1e6, np.inf, -np.inf, np.nan]])
    x = ug.tensor(a, device=vk_name)
    with np.errstate(all="ignore"):
        for f, ref in [(lambda t: t.exp(), np.exp), (lambda t: t.sin(), np.sin), (lambda t: t.cos(), np.cos),
                       (lambda t: t.tanh(), np.tanh), (lambda t: t.abs().log(), lambda v: np.log(np.abs(v))),
                       (lambda t: t.abs() ** 0.37, lambda v: np.abs(v) ** 0.37)]:
            np.testing.assert_allclose(f(x).numpy(), ref(a), rtol=1e-12, atol=1e-300, equal_nan=True)


_POW_EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 3.0, -3.0, 2.5, np.inf, -np.inf, np.nan, 1e-40, 7.0, -0.5]


@pytest.mark.parametrize("dt", [np.float64, np.float32, np.float16])
def test_pow_runs_on_the_device(vk_dev, vk_name, dt):
    """pow is ug_core.mathlib's on every float dtype: numpy's edge cases (negative bases, zeros,
    infinities, NaN) exactly, and random values to an ulp (float32 / float16: computed in float64)."""
    if np.dtype(dt) not in vk_dev.dtypes:
        pytest.skip(f"no {np.dtype(dt)}")
    with np.errstate(all="ignore"):
        edges = np.array(_POW_EDGES, dt)
        bx, by = (v.ravel() for v in np.meshgrid(edges, edges))
        rx = np.abs(RNG.standard_normal(300) * 3).astype(dt)
        ry = (RNG.standard_normal(300) * 4).astype(dt)
        a, b = np.concatenate([bx, rx]), np.concatenate([by, ry])
        got = (ug.tensor(a, device=vk_name) ** ug.tensor(b, device=vk_name)).numpy()
        ref = np.power(a, b)
    assert got.dtype == np.dtype(dt)
    special = ~np.isfinite(ref) | (ref == 0)     # exactly numpy's, the sign of zero too
    np.testing.assert_array_equal(got[special], ref[special])
    number = special & ~np.isnan(ref)   # (a NaN's sign is not part of the result)
    np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(ref[number]))
    np.testing.assert_array_max_ulp(got[~special], ref[~special], maxulp=2 if dt == np.float64 else 1)


def test_every_module_was_validated(vk_dev):
    from ug_vulkan.spirv_tools import spirv_val_path
    if spirv_val_path() is None:
        pytest.skip("spirv-val not installed")
    assert vk_dev.assembler.validated > 0


def test_registering_does_not_touch_vulkan():
    import subprocess
    import sys
    code = ("import sys, ug_vulkan.plugin as p; specs = []; p.ug_register_devices(specs.append); "
            "assert [s.name for s in specs] == ['vulkan']; assert 'vulkan' not in sys.modules, 'imported vulkan'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_staging_path_as_on_a_discrete_gpu(make_device):
    name = make_device(disable={"mapped"})
    dev = registry.get(name)
    a = RNG.standard_normal((6, 333)).astype(np.float32)
    x = ug.tensor(a, device=name)
    assert dev.raw.plan is not None and not dev.raw.plan.mapped and x._node.buffer.handle.mapped is None
    np.testing.assert_allclose((x.exp() * 2).numpy(), np.exp(a) * 2, rtol=1e-5)
    np.testing.assert_allclose((x @ x.T).numpy(), a @ a.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal((x > 0).numpy(), a > 0)
