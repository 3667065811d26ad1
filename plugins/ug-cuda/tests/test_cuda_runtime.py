"""Runtime tests of the cuda device: skipped (with the reason) where there is no driver or GPU.
The core's conformance kit also runs on it: python -m pytest --pyargs ug_core.testing --ug-device cuda"""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug
from ug_core.plugins import registry


def _cuda_or_skip():
    try:
        return registry.get("cuda")
    except ValueError as e:
        pytest.skip(f"no CUDA driver: {e}")


def test_registered_and_reason_shown_without_touching_the_driver():
    registry.load()
    assert "cuda" in registry.specs
    rows = {r.name: r for r in registry.status()}
    row = rows["cuda"]
    if not row.usable:
        assert "CUDA" in row.reason or "cuda" in row.reason, row.reason


def test_elementwise_reduce_softmax():
    _cuda_or_skip()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((33, 1000)).astype(np.float32)
    t = ug.tensor(x, device="cuda")
    e = (t - t.max(axis=1, keepdims=True)).exp()
    got = (e / e.sum(axis=1, keepdims=True)).numpy()
    ex = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(got, ex / ex.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    h = ug.tensor(x[:4, :8].astype(np.float16), device="cuda")
    np.testing.assert_array_equal((h * 2 + 1).numpy(), x[:4, :8].astype(np.float16) * np.float16(2) + np.float16(1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64, bool])
def test_matmul_dtypes_and_layouts(dtype):
    _cuda_or_skip()
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((3, 37, 19)) * 3).astype(dtype)
    b = (rng.standard_normal((19, 41)) * 3).astype(dtype)
    got = ug.matmul(ug.tensor(a, device="cuda"), ug.tensor(b, device="cuda")).numpy()
    want = np.matmul(a, b)
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2e-2 if dtype == np.float16 else 1e-5, atol=1e-2)
    else:
        np.testing.assert_array_equal(got, want)
    at = ug.tensor(np.ascontiguousarray(a.transpose(0, 2, 1)), device="cuda").permute(0, 2, 1)
    got_t = ug.matmul(at, ug.tensor(b, device="cuda")).numpy()
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(got_t.astype(np.float64), want.astype(np.float64), rtol=2e-2 if dtype == np.float16 else 1e-5, atol=1e-2)
    else:
        np.testing.assert_array_equal(got_t, want)


def test_caching_allocator_reuses_blocks():
    dev = _cuda_or_skip()
    before = dev.memory_usage()
    buf = ug.Buffer(dev, 1000, np.float32)
    ptr = buf.handle.ptr
    assert dev.memory_usage() > before
    del buf
    assert dev.memory_usage() == before
    buf2 = ug.Buffer(dev, 1000, np.float32)
    assert buf2.handle.ptr == ptr


def test_cuda_array_interface_and_dlpack_roundtrip():
    _cuda_or_skip()
    import ug_cuda

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    arr = ug_cuda.to_cuda_array(ug.tensor(x, device="cuda") * 2)
    iface = arr.__cuda_array_interface__
    assert iface["shape"] == (3, 4) and iface["typestr"] == "<f4" and iface["data"][0]
    back = ug_cuda.from_cuda_array(arr)
    np.testing.assert_array_equal(back.numpy(), x * 2)
    wrapped = ug_cuda.from_cuda_array(arr, copy=False)
    np.testing.assert_array_equal((wrapped + 1).numpy(), x * 2 + 1)
    again = ug_cuda.from_dlpack(arr)
    np.testing.assert_array_equal(again.numpy(), x * 2)


def test_in_place_assign_with_aliasing():
    _cuda_or_skip()
    x = ug.tensor(np.ones((4, 5), np.float32), device="cuda")
    y = x + 1
    np.testing.assert_array_equal(y.numpy(), 2 * np.ones((4, 5), np.float32))
