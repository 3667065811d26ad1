"""Zero-copy exchange with numpy and torch on host-memory devices (cpu, c, ref): asarray /
from_dlpack share the producer's memory, __dlpack__ lends the tensor's buffer; other devices copy."""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug

HOST = [d for d in ("ref", "cpu", "c") if d in ug.devices()]


@pytest.fixture(params=HOST)
def dev(request):
    return request.param


def test_asarray_shares_a_numpy_arrays_memory(dev):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ug.asarray(a, device=dev)
    a[0, 0] = 100                          # a write through numpy shows in the tensor
    assert t.numpy()[0, 0] == 100
    assert (t * 2).numpy()[0, 0] == 200
    same = ug.asarray(a, device=dev, copy=False)
    assert same.numpy()[0, 0] == 100
    copied = ug.asarray(a, device=dev, copy=True)
    a[0, 0] = 7
    assert copied.numpy()[0, 0] == 100 and t.numpy()[0, 0] == 7


def test_asarray_copies_what_it_cannot_share(dev):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    strided = a[:, ::2]                    # not C-contiguous: a copy
    t = ug.asarray(strided, device=dev)
    a[0, 0] = 50
    assert t.numpy()[0, 0] == 0
    with pytest.raises(ValueError, match="copy=False"):
        ug.asarray(strided, device=dev, copy=False)
    with pytest.raises(ValueError, match="copy=False"):
        ug.asarray(a, dtype=ug.float64, device=dev, copy=False)   # a conversion is a copy
    with pytest.raises(ValueError, match="copy=False"):
        ug.asarray([1.0, 2.0], device=dev, copy=False)


def test_dlpack_export_lends_the_buffer_and_keeps_it_alive(dev):
    t = ug.asarray(np.arange(6, dtype=np.float32), device=dev) * 3
    exported = np.from_dlpack(t)
    want = np.arange(6, dtype=np.float32) * 3
    del t
    for _ in range(3):                     # freed buffers are reused: the exported one is not freed
        (ug.asarray(np.ones(6, np.float32), device=dev) + 1).numpy()
    np.testing.assert_array_equal(exported, want)
    with pytest.raises(BufferError):
        ug.ones(3, device=dev).__dlpack__(dl_device=(2, 0))


def test_dlpack_export_shares_memory_with_later_writes(dev):
    t = ug.asarray(np.zeros(4, np.float32), device=dev, copy=True) + 1
    view = np.from_dlpack(t)
    assert view.tolist() == [1, 1, 1, 1]
    t[0] = 5                               # (a write may go in place: the exported array shares it)
    assert t.numpy().tolist() == [5, 1, 1, 1]


def test_torch_round_trip_without_copies(dev):
    torch = pytest.importorskip("torch")
    src = torch.arange(5, dtype=torch.float64)
    t = ug.from_dlpack(src, device=dev)
    src[1] = 42
    assert t.numpy()[1] == 42
    back = torch.from_dlpack(t * 1)
    np.testing.assert_array_equal(back.numpy(), src.numpy())


def test_other_devices_copy():
    other = [d for d in ug.devices() if d not in ("ref", "cpu", "c")]
    if not other:
        pytest.skip("no device without host memory here")
    a = np.arange(4, dtype=np.float32)
    t = ug.asarray(a, device=other[0])
    a[0] = 9
    assert t.numpy()[0] == 0
    with pytest.raises(ValueError, match="copy=False"):
        ug.asarray(a, device=other[0], copy=False)
    with pytest.raises(BufferError):
        t.__dlpack__(copy=False)
    np.testing.assert_array_equal(np.from_dlpack(t), [0, 1, 2, 3])


def test_an_empty_tensor_exports_without_a_copy_request_failing():
    # (nothing to share or copy: copy=False is honoured on every device)
    for dev in ug.devices():
        e = ug.zeros((0, 3), dtype=ug.bool, device=dev)
        assert np.asarray(np.from_dlpack(e, copy=False)).shape == (0, 3)


def test_uint64_values_above_int64_are_exact_from_lists():
    # (numpy converts the Python ints directly; an int64 or float64 detour rounded or wrapped them)
    values = [2**63 + 1, 3, 2**64 - 1]
    np.testing.assert_array_equal(ug.asarray(values, dtype=ug.uint64).numpy(), np.array(values, np.uint64))
