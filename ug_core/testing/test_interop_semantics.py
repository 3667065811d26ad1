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
import warnings

import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.fixtures import shares_host_memory, supports


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
    shares = shares_host_memory(device)
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
    if shares_host_memory(device):   # the export lends x's own memory: x sees the write
        np.testing.assert_array_equal(x.numpy(), [100, 1, 2])
    later = ug.tensor(x)                # a copy of exported memory is made at once
    exported[1] = 200
    np.testing.assert_array_equal(later.numpy(), [100, 1, 2] if shares_host_memory(device) else x.numpy())


def test_copies_are_snapshots_against_writes_to_shared_numpy_memory(device):
    a = np.arange(4, dtype=np.float32)
    t = ug.asarray(a, device=device)
    copies = [ug.tensor(t), ug.asarray(t, copy=True), copy.deepcopy(t), ug.tensor(t * 3),
              ug.asarray(a, device=device, copy=True), ug.tensor(t, dtype=ug.float64)]
    lazy = t * 3                        # a lazy value reads shared memory when it is computed
    a[0] = 7
    for c, want in zip(copies, [[0, 1, 2, 3]] * 3 + [[0, 3, 6, 9], [0, 1, 2, 3], [0, 1, 2, 3]]):
        np.testing.assert_array_equal(c.numpy(), want)
    shares = shares_host_memory(device)
    np.testing.assert_array_equal(lazy.numpy(), [21 if shares else 0, 3, 6, 9])
    np.testing.assert_array_equal(t.numpy(), [7 if shares else 0, 1, 2, 3])


def test_exporting_a_tensor_over_a_numpy_array_keeps_sharing_it(device):
    a = np.arange(3, dtype=np.float32)
    t = ug.asarray(a, device=device)
    lazy = t * 1                        # a value that reads t's memory (when computed)
    exported = np.from_dlpack(t)
    exported[0] = 9                     # memory shared already: lent as it is, t not moved to a copy
    if shares_host_memory(device):
        assert a[0] == 9 and t.numpy()[0] == 9 and lazy.numpy()[0] == 9
        a[1] = 7
        assert t.numpy()[1] == 7
    else:                               # (a copy: nothing shared)
        assert a[0] == 0 and t.numpy()[0] == 0 and lazy.numpy()[0] == 0


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
    for t in (ug.tensor(a, device=device), ug.asarray(a, device=device), ug.asarray(a, device=device, dtype=a.dtype),
              ug.from_dlpack(a, device=device)):
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
    flat = ug.zeros(6, dtype=native, device=device)
    added = ug.scatter_add(flat, 0, np.array([0, 5], dtype=">i8"), a.reshape(-1)[:2])
    np.testing.assert_array_equal(added.numpy(), [0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(ug.bincount(np.array([1, 3], dtype=">i4")).numpy(), [0, 1, 0, 1])
    np.testing.assert_array_equal(ug.where(base > 0, a, 0).numpy(), np.arange(6).reshape(2, 3))


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


# --------------------------------------------------------------------- numpy's functions that write
def _pair(device, values, dtype=np.float32):
    return ug.tensor(np.asarray(values, dtype=dtype), device=device), np.asarray(values, dtype=dtype).copy()


def test_ufunc_out_writes_into_the_tensor(device):
    src = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    t = ug.tensor(src, device=device)
    x, want = _pair(device, np.zeros((2, 3)))
    assert np.exp(t, out=x) is x                     # the tensor itself comes back
    np.testing.assert_allclose(x.numpy(), np.exp(src, out=want), rtol=1e-6)
    y, want = _pair(device, np.zeros(3))
    assert np.add.reduce(t, axis=0, out=y) is y      # a reduction's out
    np.testing.assert_allclose(y.numpy(), np.add.reduce(src, axis=0, out=want), rtol=1e-6)
    z, want = _pair(device, np.full((2, 3), 7.0))
    mask = np.array([[True, False, True], [False, True, False]])
    np.multiply(t, 2, out=z, where=mask)             # where= keeps z elsewhere
    np.testing.assert_array_equal(z.numpy(), np.multiply(src, 2, out=want, where=mask))
    s, want = _pair(device, np.zeros(()))
    np.exp(1.0, out=s)                               # only the output is a tensor
    np.testing.assert_allclose(s.numpy(), np.exp(1.0, out=want), rtol=1e-6)
    a, want = _pair(device, np.zeros((2, 3)))
    np.add.accumulate(t, axis=1, out=a)              # a method ug has no counterpart of: numpy's, written back
    np.testing.assert_allclose(a.numpy(), np.add.accumulate(src, axis=1, out=want), rtol=1e-6)
    q, r = _pair(device, np.zeros((2, 3)))[0], _pair(device, np.zeros((2, 3)))[0]
    np.divmod(t, 0.3, out=(q, r))                    # two outputs
    np.testing.assert_allclose(q.numpy(), np.floor_divide(src, np.float32(0.3)))
    np.testing.assert_allclose(r.numpy(), np.remainder(src, np.float32(0.3)), atol=1e-6)
    arr = np.empty((2, 3), np.float32)
    assert np.sin(t, out=arr) is arr                 # a numpy array as out: written
    np.testing.assert_allclose(arr, np.sin(src), rtol=1e-6)


def test_ufunc_out_follows_numpys_casting(device):
    t = ug.tensor(np.arange(3, dtype=np.float32), device=device)
    ints = ug.zeros(3, dtype=ug.int32, device=device)
    with pytest.raises(TypeError, match="same_kind"):
        np.exp(t, out=ints)                          # float into int: numpy's UFuncTypeError is a TypeError
    np.testing.assert_array_equal(ints.numpy(), [0, 0, 0])
    with pytest.raises(ValueError, match="broadcast"):
        np.add(ug.ones((2, 3), device=device), 1, out=ug.zeros(3, device=device))
    wide = ug.zeros((2, 3), device=device)
    np.add(t, 1, out=wide)                           # the inputs broadcast to out's shape
    want = np.add(np.arange(3, dtype=np.float32), 1, out=np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(wide.numpy(), want)
    sums = ug.zeros((), dtype=ug.int32, device=device)
    np.sum(t + 0.5, out=sums)                        # a reduction casts unsafely, as numpy's
    assert sums.numpy() == np.sum(np.arange(3, dtype=np.float32) + 0.5, out=np.zeros((), np.int32))


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "float64"])
def test_ufunc_at_writes_into_the_tensor(device, dtype, require_dtype):
    require_dtype(np.dtype(dtype))
    idx = np.array([0, 2, 2, 4, 0, 0, -1])
    t, want = _pair(device, np.arange(15).reshape(5, 3), dtype)
    np.add.at(t, idx, 1)                             # a ug scatter (index_add)
    np.add.at(want, idx, 1)
    np.testing.assert_array_equal(t.numpy(), want)
    values = np.arange(21).reshape(7, 3).astype(dtype)
    np.add.at(t, idx, values)
    np.add.at(t, ug.tensor(idx, device=device), ug.tensor(values, device=device))
    np.add.at(want, idx, values)
    np.add.at(want, idx, values)
    np.testing.assert_array_equal(t.numpy(), want)
    np.multiply.at(t, (idx, 1), 3)                   # other ufuncs and index forms: numpy's, written back
    np.multiply.at(want, (idx, 1), 3)
    np.maximum.at(t, [1, 3], 20)
    np.maximum.at(want, [1, 3], 20)
    np.subtract.at(t, slice(None, 2), 1)
    np.subtract.at(want, slice(None, 2), 1)
    np.testing.assert_array_equal(t.numpy(), want)
    with pytest.raises(IndexError):
        np.add.at(t, [5], 1)


def test_copyto_fill_diagonal_and_put_write_into_the_tensor(device):
    x, want = _pair(device, np.zeros((3, 4)))
    np.copyto(x, 5)
    np.copyto(want, 5)
    mask = np.arange(12).reshape(3, 4) % 3 == 0
    src = np.arange(4, dtype=np.float32)
    np.copyto(x, ug.tensor(src, device=device), where=mask)
    np.copyto(want, src, where=mask)
    np.testing.assert_array_equal(x.numpy(), want)
    small = ug.int8 if supports(device, np.int8) else ug.int32
    with pytest.raises(TypeError, match="same_kind"):
        np.copyto(ug.zeros(3, dtype=small, device=device), ug.ones(3, device=device))
    with pytest.raises(OverflowError):
        np.copyto(ug.zeros(3, dtype=small, device=device), 300 if small == ug.int8 else 2**40)
    np.fill_diagonal(x, -1)
    np.fill_diagonal(want, -1)
    np.put(x, [1, 5], [8, 9])
    np.put(want, [1, 5], [8, 9])
    np.putmask(x, mask, 0.5)
    np.putmask(want, mask, 0.5)
    np.place(x, want > 4, [3])
    np.place(want, want > 4, [3])
    np.testing.assert_array_equal(x.numpy(), want)
    dst = np.zeros(4, np.float32)                    # a numpy destination is numpy's own
    np.copyto(dst, ug.tensor(src, device=device))
    np.testing.assert_array_equal(dst, src)


def test_nep35_like_makes_tensors(device):
    like = ug.ones(2, device=device)
    cases = {
        "asarray": (lambda lk: np.asarray([1, 2, 3], like=lk), np.asarray([1, 2, 3])),
        "array ndmin": (lambda lk: np.array([1.5, 2.5], ndmin=2, like=lk), np.array([1.5, 2.5], ndmin=2)),
        "zeros": (lambda lk: np.zeros((2, 3), like=lk), np.zeros((2, 3))),
        "ones int": (lambda lk: np.ones(3, dtype=np.int32, like=lk), np.ones(3, dtype=np.int32)),
        "empty": (lambda lk: np.empty(2, dtype=np.float32, like=lk), np.zeros(2, dtype=np.float32)),
        "arange": (lambda lk: np.arange(1, 7, 2, like=lk), np.arange(1, 7, 2)),
        "full": (lambda lk: np.full(2, 1.5, like=lk), np.full(2, 1.5)),
        "identity": (lambda lk: np.identity(3, dtype=np.float32, like=lk), np.identity(3, dtype=np.float32)),
        "frombuffer": (lambda lk: np.frombuffer(b"\x01\x02", dtype=np.uint8, like=lk), np.array([1, 2], np.uint8)),
        "asarray of a tensor": (lambda lk: np.asarray(ug.tensor([4, 5], device=device), like=lk), np.array([4, 5])),
    }
    for name, (make, want) in cases.items():
        if want.dtype not in ug.__array_namespace_info__().dtypes(device=device).values():
            continue
        got = make(like)
        assert isinstance(got, ug.Tensor), name
        assert got.device == device and got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_array_equal(got.numpy(), want, err_msg=name)
    assert np.argmin(np.asarray([3, 1], like=like)).numpy() == 1   # dask's dtype probe for argmin


def test_numpy_functions_ug_lacks_give_tensors_back(device):
    x = ug.tensor(np.array([3.0, 1.0, 2.0, 1.0], np.float32), device=device)
    got = np.nanmedian(x.reshape(2, 2), axis=0)      # numpy's, on the values: a tensor on x's device
    assert isinstance(got, ug.Tensor) and got.device == device and got.numpy().tolist() == [2.5, 1.0]
    assert isinstance(np.nanmedian(x), np.floating)  # (a numpy scalar stays one)
    hist, edges = np.histogram(x, bins=2)
    assert isinstance(hist, ug.Tensor) and hist.numpy().tolist() == [2, 2]
    assert np.allclose(x, x) is True                 # what is not an array stays as numpy gives it


@pytest.mark.parametrize("fn", ["nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd",
                                "nancumsum", "nancumprod"])
def test_numpy_nan_functions_are_lazy_ug(device, fn):
    a = np.array([[1.0, np.nan, 3.0, 0.5], [np.nan, np.nan, np.nan, np.nan], [2.0, -1.0, np.nan, 4.0]], np.float32)
    x = ug.tensor(a, device=device)
    func = getattr(np, fn)
    for kwargs in ({}, {"axis": 1}, {"axis": 0, "keepdims": True} if not fn.startswith("nancum") else {"axis": 0}):
        with warnings.catch_warnings():   # (numpy warns for all-NaN slices; ug does not)
            warnings.simplefilter("ignore", RuntimeWarning)
            want = func(a, **kwargs)
        got = func(x, **kwargs)
        assert isinstance(got, ug.Tensor)
        assert got.dtype == want.dtype and got.shape == want.shape, (fn, kwargs)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, equal_nan=True, err_msg=f"{fn} {kwargs}")
    ints = ug.tensor(np.arange(6, dtype=np.int32).reshape(2, 3), device=device)
    want = func(np.arange(6, dtype=np.int32).reshape(2, 3), axis=0)
    np.testing.assert_allclose(func(ints, axis=0).numpy(), want, rtol=1e-6)



# --------------------------------------------------------------------- errors where the values are at fault
def test_advanced_setitem_checks_the_value_shape_when_nothing_is_selected(device):
    x = ug.zeros(3, device=device)
    with pytest.raises(ValueError, match="shape mismatch"):
        x[np.array([], dtype=np.int64)] = np.ones(3)          # numpy raises too
    with pytest.raises(ValueError, match="shape mismatch"):
        x[np.zeros(3, dtype=bool)] = ug.ones(2, device=device)
    x[np.array([], dtype=np.int64)] = np.ones(1)              # what broadcasts is fine, and writes nothing
    x[np.zeros(3, dtype=bool)] = 5
    np.testing.assert_array_equal(x.numpy(), [0, 0, 0])


def test_bincount_of_huge_values_names_the_argument(device):
    for value in (2**64 - 1, 2**63) if supports(device, np.uint64) else ():
        with pytest.raises(ValueError, match=r"bincount: .*max\(x\) \+ 1 = "):
            ug.bincount(ug.tensor(np.array([1, value], dtype=np.uint64), device=device))
    with pytest.raises(MemoryError, match=r"bincount: .*max\(x\) \+ 1 = 1125899906842625"):
        ug.bincount(ug.tensor(np.array([2**50], dtype=np.int64), device=device))      # 8 PiB: checked first
    with pytest.raises(MemoryError, match="minlength = "):
        ug.bincount(ug.tensor(np.array([1], dtype=np.int64), device=device), minlength=2**52)


def test_bincount_of_one_large_value_fills_one_buffer(device):
    n = 1 << 21
    x = ug.tensor(np.array([n - 1, 3, 3], dtype=np.int64), device=device).realize()
    weights = ug.tensor(np.array([0.5, 1.5, 2.0], dtype=np.float32), device=device).realize()
    for w, dtype in ((None, np.int64), (weights, np.float32)):
        ug.reset_peak_memory_stats(device)
        before = ug.memory_stats(device)["live_bytes"]
        counts = ug.bincount(x, weights=w).realize()
        grew = ug.memory_stats(device)["peak_bytes"] - before
        itemsize = np.dtype(dtype).itemsize
        assert grew < 1.5 * n * itemsize, f"{grew} bytes for a result of {n * itemsize}"   # one buffer, not two
        want = np.bincount(np.array([n - 1, 3, 3]), weights=None if w is None else [0.5, 1.5, 2.0])
        np.testing.assert_array_equal(counts.numpy(), want.astype(dtype))


@pytest.mark.parametrize("case", ["cholesky", "inv", "solve"])
def test_linalg_value_errors_are_raised_at_the_call(device, case, require_dtype):
    require_dtype(np.float64)
    bad = ug.tensor(np.array([[1.0, 2.0], [2.0, 4.0]]), device=device) * 1   # singular, not positive definite
    call = {"cholesky": lambda a: ug.linalg.cholesky(a), "inv": lambda a: ug.linalg.inv(a),
            "solve": lambda a: ug.linalg.solve(a, ug.ones(2, dtype=ug.float64, device=device))}[case]
    with pytest.raises(np.linalg.LinAlgError):
        call(bad)                            # where the caller's try sees it (scikit-learn's except LinAlgError)
    jitted = ug.jit(lambda a: call(a) * 2)
    with pytest.raises(np.linalg.LinAlgError):   # inside ug.jit: the same type, when the jitted call runs
        jitted(bad)
    good = ug.tensor(np.array([[4.0, 1.0], [1.0, 3.0]]), device=device)
    want = {"cholesky": np.linalg.cholesky, "inv": np.linalg.inv,
            "solve": lambda a: np.linalg.solve(a, np.ones(2))}[case](good.numpy())
    np.testing.assert_allclose(call(good).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(jitted(good).numpy(), 2 * want, rtol=1e-12)


# --------------------------------------------------------------------- numpy's keywords, as libraries pass them
def test_tensor_methods_take_numpys_keywords(device, close):
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7 - 0.5
    x = ug.tensor(a, device=device)
    close(x.sum(axis=0, dtype=np.float64), a.sum(axis=0, dtype=np.float64))
    close(x.sum(axis=1, keepdims=True, dtype=ug.float32), a.sum(axis=1, keepdims=True, dtype=np.float32))
    close(x.prod(axis=1, dtype=np.float64), a.prod(axis=1, dtype=np.float64))
    close(x.mean(axis=0, dtype=np.float64), a.mean(axis=0, dtype=np.float64))
    close(x.var(axis=1, ddof=1), a.var(axis=1, ddof=1))
    close(x.std(keepdims=True), a.std(keepdims=True))
    close(x.var(0, correction=1), a.var(0, ddof=1))
    close(x.cumsum(axis=1), a.cumsum(axis=1))
    close(x.cumsum(), a.cumsum())
    close(x.cumprod(0, dtype=np.float64), a.cumprod(0, dtype=np.float64))
    close((x > 0).any(axis=1, keepdims=True), (a > 0).any(axis=1, keepdims=True))
    close((x > 0).all(axis=0), (a > 0).all(axis=0))
    close(x.max(axis=1, keepdims=True), a.max(axis=1, keepdims=True))
    close(x.round(1), a.round(1))
    close(x.ravel(), a.ravel())
    ints = ug.tensor(np.arange(6, dtype=np.int32), device=device)
    close(ints.sum(dtype=np.int32), np.arange(6, dtype=np.int32).sum(dtype=np.int32))
    close(ints.mean(dtype=np.float32), np.arange(6, dtype=np.int32).mean(dtype=np.float32))
    close(ints.mean(dtype=np.int64), np.arange(6, dtype=np.int32).mean(dtype=np.int64))
    out = ug.zeros(4, device=device)
    assert x.sum(axis=0, out=out) is out
    close(out, a.sum(axis=0))
    out_host = np.zeros(3, np.float32)
    assert x.max(axis=1, out=out_host) is out_host
    np.testing.assert_array_equal(out_host, a.max(axis=1))
    with pytest.raises(ValueError, match="wrong shape"):
        x.sum(axis=0, out=ug.zeros(3, device=device))


def test_numpys_spellings_beside_the_standards(device, close):
    a = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    x = ug.tensor(a, device=device)
    close(ug.pad(x, ((1, 0), (0, 2)), constant_values=np.nan), np.pad(a, ((1, 0), (0, 2)), constant_values=np.nan))
    close(ug.pad(x, 1, constant_values=((3, 3), (3, 3))), np.pad(a, 1, constant_values=3))
    close(np.pad(x, 1, constant_values=-1), np.pad(a, 1, constant_values=-1))
    with pytest.raises(ValueError, match="one constant"):
        ug.pad(x, 1, constant_values=((1, 2), (3, 4)))
    close(ug.round(x, 1), np.round(a, 1))
    close(ug.round(x * 1000, -2), np.round(a * 1000, -2))
    close(ug.round(ug.tensor(np.array([15, 25, -35, 44], np.int32), device=device), -1),
          np.round(np.array([15, 25, -35, 44], np.int32), -1))
    close(ug.transpose(x), a.T)
    close(ug.transpose(x, (1, 0)), a.T)
    windows = np.lib.stride_tricks.sliding_window_view
    close(ug.lib.stride_tricks.sliding_window_view(x, 2, axis=1), windows(a, 2, axis=1))
    close(windows(x, (2, 2)), windows(a, (2, 2)))
    close(windows(x, 3, axis=-1).mean(axis=-1), windows(a, 3, axis=-1).mean(axis=-1))
    with pytest.raises(ValueError, match="larger than input"):
        windows(x, 3, axis=0)


def test_default_dtypes_are_what_ug_makes(device):
    """SciPy picks float32 or float64 work by `default_dtypes()`: it must be what ug makes."""
    defaults = ug.__array_namespace_info__().default_dtypes(device=device)
    floats = [ug.asarray(1.0, device=device), ug.asarray([0.5], device=device), ug.full(2, 0.5, device=device),
              ug.zeros(2, device=device), ug.ones(2, device=device), ug.empty(2, device=device),
              ug.eye(2, device=device),
              ug.linspace(0, 1, 3, device=device), ug.arange(0.0, 1.0, 0.5, device=device)]
    assert {t.dtype for t in floats} == {defaults["real floating"]}
    ints = [ug.asarray(1, device=device), ug.asarray([1, 2], device=device), ug.arange(3, device=device),
            ug.full(2, 3, device=device), ug.sum(ug.asarray([True], device=device))]
    assert {t.dtype for t in ints} == {defaults["integral"]}
    x = ug.asarray([3.0, 1.0, 2.0], device=device)
    indices = [ug.argmax(x), ug.argsort(x), ug.nonzero(x)[0], ug.searchsorted(ug.sort(x), x),
               ug.unique_inverse(x).inverse_indices]
    assert {t.dtype for t in indices} == {defaults["indexing"]}
    if defaults["complex floating"] is None:   # (a device without complex dtypes: the standard's None)
        with pytest.raises(TypeError):
            ug.asarray(1j, device=device)
    else:
        assert ug.asarray(1j, device=device).dtype == defaults["complex floating"]
