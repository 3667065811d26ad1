"""Memory shared with other libraries, copies, pickling and numpy's writing functions, on every
device (docs/array-api.md, "Shared memory and copies"; ug_core/sharing.py).

- read-only numpy memory given to `asarray` (setflags(write=False), frombuffer of bytes, a
  read-only memmap) is never written: a write to the tensor goes into a buffer of its own;
- copies (`ug.tensor(t)`, `asarray(t, copy=True)`, `copy.copy`, `copy.deepcopy`) are snapshots,
  also against writes made through a DLPack export or to a numpy array ug shares;
- big-endian arrays are byte-swapped on the way in;
- pickle round-trips a tensor by value (dtype and device kept);
- numpy's functions that write (`out=`, `ufunc.at`, `copyto`, `fill_diagonal`, `put`...) write
  into the ug tensor, and NEP 35's `like=` makes ug tensors.
"""
from __future__ import annotations

import copy
import os
import pickle
import tempfile

import numpy as np
import pytest

import ug_core as ug


def _values(t):
    return t.numpy() if isinstance(t, ug.Tensor) else np.asarray(t)


# --------------------------------------------------------------------- read-only memory
def _read_only_sources():
    """(name, read-only float32 array of 0..7, cleanup) for each way numpy makes read-only memory."""
    flagged = np.arange(8, dtype=np.float32)
    flagged.setflags(write=False)
    yield "setflags", flagged
    raw = np.arange(8, dtype=np.float32).tobytes()
    yield "frombuffer(bytes)", np.frombuffer(raw, dtype=np.float32)
    fd, path = tempfile.mkstemp(suffix=".f32")
    os.close(fd)
    try:
        np.arange(8, dtype=np.float32).tofile(path)
        mapped = np.memmap(path, dtype=np.float32, mode="r")   # PROT_READ: a write would segfault
        yield "memmap(mode='r')", mapped
        del mapped
    finally:
        os.unlink(path)


@pytest.mark.parametrize("write", ["setitem", "slice", "iadd", "assign", "scatter", "mask"])
def test_read_only_memory_is_never_written(device, write):
    want = np.arange(8, dtype=np.float32)
    for name, source in _read_only_sources():
        t = ug.asarray(source, device=device)
        expected = want.copy()
        if write == "setitem":
            t[0] = 5
            expected[0] = 5
        elif write == "slice":
            t[2:4] = -1
            expected[2:4] = -1
        elif write == "iadd":
            t += 1
            expected += 1
        elif write == "assign":
            t.assign(t * 2)
            expected *= 2
        elif write == "scatter":
            t[np.array([1, 3])] = 9
            expected[[1, 3]] = 9
        else:
            t[np.arange(8) % 2 == 0] = 0
            expected[::2] = 0
        np.testing.assert_array_equal(t.numpy(), expected, err_msg=name)   # the tensor has the new value
        np.testing.assert_array_equal(np.asarray(source), want, err_msg=name)  # the memory is unchanged
        t[1] = 42   # a second write goes into the tensor's own buffer (in place there)
        np.testing.assert_array_equal(np.asarray(source), want, err_msg=name)
        assert t.numpy()[1] == 42


def test_read_only_memory_is_still_read_without_a_copy(device):
    """Borrowing read-only memory read-only still reads it (a write by its owner through another
    array shows, as with numpy's asarray) until the tensor is first written."""
    owner = np.arange(4, dtype=np.float32)
    ro = owner.view()
    ro.setflags(write=False)
    t = ug.asarray(ro, device=device)
    shares = device in ("ref", "cpu", "c")
    owner[0] = 10
    assert t.numpy()[0] == (10 if shares else 0)


def test_read_only_memory_inside_jit(device):
    ro = np.arange(4.0, dtype=np.float32)
    ro.setflags(write=False)

    @ug.jit
    def step(x):
        x[0] = 5
        x += 1
        return x * 2

    for _ in range(3):   # traced, then replayed
        t = ug.asarray(ro, device=device)
        out = step(t)
        np.testing.assert_array_equal(out.numpy(), [12, 4, 6, 8])
        np.testing.assert_array_equal(t.numpy(), [6, 2, 3, 4])
        np.testing.assert_array_equal(ro, [0, 1, 2, 3])


def test_dlpack_export_of_read_only_memory_is_read_only_or_a_copy(device):
    ro = np.arange(4, dtype=np.float32)
    ro.setflags(write=False)
    t = ug.asarray(ro, device=device)
    exported = np.from_dlpack(t)
    np.testing.assert_array_equal(exported, ro)
    if exported.flags.writeable:   # a copy (devices without host memory)
        exported[0] = 9
    assert ro[0] == 0


# --------------------------------------------------------------------- copies are snapshots
def test_copies_are_snapshots_against_dlpack_writes(device):
    x = ug.tensor(np.arange(3, dtype=np.float32), device=device).realize()
    copies = [ug.tensor(x), ug.asarray(x, copy=True), copy.copy(x), copy.deepcopy(x), ug.astype(x, x.dtype, copy=True)]
    derived = x * 2                     # a lazy value computed from x before the write
    exported = np.from_dlpack(x)
    exported[0] = 100
    for c in copies:
        np.testing.assert_array_equal(c.numpy(), [0, 1, 2])
    np.testing.assert_array_equal(derived.numpy(), [0, 2, 4])
    if device in ("ref", "cpu", "c"):   # the export lends x's own memory: x sees the write
        np.testing.assert_array_equal(x.numpy(), [100, 1, 2])
    later = ug.tensor(x)                # a copy of exported memory is made at once
    exported[1] = 200
    np.testing.assert_array_equal(later.numpy(), x.numpy() if device not in ("ref", "cpu", "c") else [100, 1, 2])


def test_copies_are_snapshots_against_writes_to_shared_numpy_memory(device):
    a = np.arange(4, dtype=np.float32)
    t = ug.asarray(a, device=device)
    copies = [ug.tensor(t), ug.asarray(t, copy=True), copy.deepcopy(t), ug.tensor(t * 3),
              ug.asarray(a, device=device, copy=True), ug.tensor(t, dtype=ug.float64)]
    lazy = t * 3                        # a lazy value reads shared memory when it is computed
    a[0] = 7
    for c, want in zip(copies, [[0, 1, 2, 3]] * 3 + [[0, 3, 6, 9], [0, 1, 2, 3], [0, 1, 2, 3]]):
        np.testing.assert_array_equal(c.numpy(), want)
    shares = device in ("ref", "cpu", "c")
    np.testing.assert_array_equal(lazy.numpy(), [21 if shares else 0, 3, 6, 9])
    np.testing.assert_array_equal(t.numpy(), [7 if shares else 0, 1, 2, 3])


def test_copies_are_snapshots_against_ug_writes(device):
    x = ug.tensor(np.arange(3, dtype=np.int32), device=device)
    y, z = ug.tensor(x), copy.deepcopy(x)
    x[0] = 9
    y[1] = 8
    np.testing.assert_array_equal(x.numpy(), [9, 1, 2])
    np.testing.assert_array_equal(y.numpy(), [0, 8, 2])
    np.testing.assert_array_equal(z.numpy(), [0, 1, 2])


# --------------------------------------------------------------------- byte order
@pytest.mark.parametrize("dtype", [">f4", ">f8", ">i2", ">i8", ">u4"])
def test_big_endian_arrays_are_byte_swapped(device, dtype, require_dtype):
    native = np.dtype(dtype).newbyteorder("=")
    require_dtype(native)
    a = np.arange(6, dtype=dtype).reshape(2, 3)
    for t in (ug.tensor(a, device=device), ug.asarray(a, device=device), ug.asarray(a, device=device, dtype=a.dtype)):
        assert t.dtype == native
        np.testing.assert_array_equal(t.numpy(), np.arange(6).reshape(2, 3))
    base = ug.ones((2, 3), dtype=native, device=device)
    np.testing.assert_array_equal((base + a).numpy(), np.arange(6).reshape(2, 3) + 1)
    np.testing.assert_array_equal(np.add(base, a).numpy(), np.arange(6).reshape(2, 3) + 1)
    target = ug.zeros((2, 3), dtype=native, device=device)
    target[0] = a[1]
    target[np.array([1], dtype=">i8")] = a[:1]
    np.testing.assert_array_equal(target.numpy(), [[3, 4, 5], [0, 1, 2]])
    np.testing.assert_array_equal(ug.tensor(a[0], device=device)[np.array([2, 0], dtype=">i4")].numpy(), [2, 0])


# --------------------------------------------------------------------- pickle and deepcopy
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "uint64", "float16", "float32", "float64"])
def test_pickle_and_deepcopy_round_trip_by_value(device, dtype, require_dtype):
    require_dtype(np.dtype(dtype))
    values = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    x = ug.tensor(values, device=device)
    lazy = x[1:] if dtype == "bool" else x[1:] * 1   # a lazy tensor is computed first
    for t, want in ((x, values), (lazy, values[1:])):
        for back in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t), copy.copy(t)):
            assert isinstance(back, ug.Tensor)
            assert back.dtype == np.dtype(dtype) and back.device == device and back.shape == want.shape
            np.testing.assert_array_equal(back.numpy(), want)
    shared = copy.deepcopy([x, x])      # deepcopy's memo: one copy for one tensor
    assert shared[0] is shared[1]
    back = pickle.loads(pickle.dumps(x))
    back[0] = values[2]                 # the copies are tensors of their own
    np.testing.assert_array_equal(x.numpy(), values)


def test_unpickling_onto_an_absent_device_is_a_clear_error(device):
    data = pickle.dumps(ug.ones(3, device=device))
    name = device.encode()
    absent = data.replace(bytes([len(name)]) + name, bytes([len(b"nodevice")]) + b"nodevice")
    with pytest.raises(ValueError, match="cannot unpickle a tensor of device 'nodevice'"):
        pickle.loads(absent)
