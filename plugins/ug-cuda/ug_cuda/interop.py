"""Sharing GPU memory with other libraries (CuPy, PyTorch, Numba, JAX...).

Export: `to_cuda_array(tensor)` realizes a tensor on the `cuda` device and returns a
`CudaArray` view of its buffer (zero-copy, C-contiguous) with
* `__cuda_array_interface__` (version 3; our stream is synchronized on export, so "stream" is None);
* `__dlpack__(stream=None, max_version=None, ...)` / `__dlpack_device__()` (legacy unversioned
  DLManagedTensor capsule "dltensor", device type kDLCUDA). The capsule keeps the buffer alive
  until the consumer calls its deleter.

Import: `from_cuda_array(obj, copy=True)` takes any object with `__cuda_array_interface__`;
`from_dlpack(obj)` any object with `__dlpack__` (on a CUDA device). Both copy into a new ug
buffer (device-to-device) by default; `from_cuda_array(..., copy=False)` wraps a C-contiguous
array zero-copy, keeping `obj` alive (writes by ug are then visible to its owner).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

import ug_core as ug
from ug_core.kit import SUPPORTED, Buffer, node_over, prod, registry

from .device import CudaDevice
from .memory import Allocation
from .runtime import ctypes_array

KDL_CUDA = 2
_DL_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}  # kDLInt, kDLUInt, kDLFloat, kDLBool


def _device(name: str = "cuda") -> CudaDevice:
    device = registry.get(name)
    if not isinstance(device, CudaDevice):
        raise TypeError(f"device {name!r} is not a CUDA device")
    return device


class CudaArray:
    """A C-contiguous view of a realized cuda tensor's buffer; keeps the buffer alive."""

    def __init__(self, tensor: ug.Tensor):
        if tensor.device != "cuda" and not isinstance(registry.get(tensor.device), CudaDevice):
            tensor = tensor.to("cuda")
        tensor.realize()
        self.tensor = tensor
        self.buffer: Buffer = tensor.node.buffer
        self.device: CudaDevice = self.buffer.device  # type: ignore[assignment]
        self.shape = tuple(tensor.shape)
        self.dtype = tensor.dtype

    @property
    def ptr(self) -> int:
        return self.buffer.handle.ptr

    @property
    def __cuda_array_interface__(self) -> dict:
        self.device.synchronize()
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr if prod(self.shape) else 0, False),
                "version": 3, "strides": None, "stream": None}

    def __dlpack_device__(self) -> tuple[int, int]:
        return (KDL_CUDA, self.device.context.ordinal)

    def __dlpack__(self, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        if copy:
            raise BufferError("ug-cuda exports zero-copy DLPack only")
        self.device.synchronize()  # our work is done before the consumer's stream uses the memory
        return _make_capsule(self)


# --- DLPack structs (dlpack.h, unversioned DLManagedTensor) -------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_pyapi = ctypes.pythonapi
_pyapi.PyCapsule_New.restype = ctypes.py_object
_pyapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR]
_pyapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_pyapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pyapi.PyCapsule_IsValid.restype = ctypes.c_int
_pyapi.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pyapi.PyCapsule_SetName.restype = ctypes.c_int
_pyapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

# raw-pointer variants for the capsule destructor, which must not touch the dying object's refcount
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _pyapi))
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _pyapi))

_LIVE: dict[int, Any] = {}   # address of a DLManagedTensor we made -> what keeps its memory alive


@_DELETER
def _deleter(managed: Any) -> None:
    _LIVE.pop(ctypes.addressof(managed.contents), None)


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule: int) -> None:
    # an unconsumed capsule ("dltensor" still its name) owns the tensor: call its deleter
    if _capsule_is_valid(capsule, b"dltensor"):
        _LIVE.pop(_capsule_get_pointer(capsule, b"dltensor"), None)


def _dl_dtype(dtype: np.dtype) -> _DLDataType:
    return _DLDataType(_DL_CODES[dtype.kind], dtype.itemsize * 8, 1)


def _make_capsule(array: CudaArray) -> Any:
    ndim = len(array.shape)
    shape = ctypes_array(ctypes.c_int64, max(ndim, 1))(*array.shape)
    managed = _DLManagedTensor()
    managed.dl_tensor = _DLTensor(ctypes.c_void_p(array.ptr), _DLDevice(KDL_CUDA, array.device.context.ordinal), ndim,
                                  _dl_dtype(array.dtype), ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)), None, 0)
    managed.deleter = _deleter
    address = ctypes.addressof(managed)
    _LIVE[address] = (managed, shape, array)
    return _pyapi.PyCapsule_New(address, b"dltensor", _capsule_destructor)


# --- import -----------------------------------------------------------------------------------

def _wrap(device: CudaDevice, ptr: int, shape: tuple[int, ...], dtype: np.dtype, owner: Any, copy: bool) -> ug.Tensor:
    if dtype not in SUPPORTED:
        raise TypeError(f"unsupported dtype {dtype}")
    size = prod(shape)
    if copy:
        buf = Buffer(device, size, dtype)
        if size:
            device.raw.copy_device(buf.handle.ptr, ptr, size * dtype.itemsize)
    else:
        buf = Buffer.__new__(Buffer)
        buf.device, buf.size, buf.dtype = device, size, dtype
        buf.handle = Allocation(ptr, owner)
        buf.exposed = True   # the owner may write it any time: ug.tensor(t) of it copies at once
    return ug.Tensor(node_over(buf, tuple(shape)))


def _contiguous(shape: tuple[int, ...], strides: Any, itemsize: int) -> bool:
    if strides is None:
        return True
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def from_cuda_array(obj: Any, copy: bool = True, device: str = "cuda") -> ug.Tensor:
    """A ug tensor from an object exposing `__cuda_array_interface__` (C-contiguous)."""
    iface = obj.__cuda_array_interface__
    shape = tuple(iface["shape"])
    dtype = np.dtype(iface["typestr"])
    if not _contiguous(shape, iface.get("strides"), dtype.itemsize):
        raise ValueError("from_cuda_array needs a C-contiguous array")
    dev = _device(device)
    stream = iface.get("stream")
    if stream not in (None, 0):  # the producer's pending work must finish before we read
        dev.context.drv.cuStreamSynchronize(dev.context.drv.CUstream(stream))
    return _wrap(dev, int(iface["data"][0]), shape, dtype, obj, copy)


def from_dlpack(obj: Any, device: str = "cuda") -> ug.Tensor:
    """A ug tensor (a copy) from an object with `__dlpack__` whose memory is on a CUDA GPU."""
    dev = _device(device)
    if hasattr(obj, "__dlpack_device__"):
        kind, _ = obj.__dlpack_device__()
        if kind != KDL_CUDA:
            raise ValueError(f"from_dlpack: device type {kind} is not CUDA ({KDL_CUDA}); use ug.tensor(numpy array)")
    capsule = obj.__dlpack__(stream=dev.context.stream_handle) if hasattr(obj, "__dlpack__") else obj
    ptr = _pyapi.PyCapsule_GetPointer(capsule, b"dltensor")
    managed = _DLManagedTensor.from_address(ptr)
    t = managed.dl_tensor
    if t.device.device_type != KDL_CUDA:
        raise ValueError("from_dlpack: not CUDA memory")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    code = {v: k for k, v in _DL_CODES.items()}[t.dtype.code]
    dtype = np.dtype("bool" if code == "b" else f"{code}{t.dtype.bits // 8}")
    strides = tuple(t.strides[i] * dtype.itemsize for i in range(t.ndim)) if t.strides else None
    if not _contiguous(shape, strides, dtype.itemsize):
        raise ValueError("from_dlpack needs a C-contiguous tensor")
    tensor = _wrap(dev, int(t.data or 0) + int(t.byte_offset), shape, dtype, None, copy=True)
    dev.synchronize()  # the copy is done: the producer may free its memory
    _pyapi.PyCapsule_SetName(capsule, b"used_dltensor")
    if managed.deleter:
        managed.deleter(ctypes.pointer(managed))
    return tensor


def to_cuda_array(tensor: ug.Tensor) -> CudaArray:
    """The tensor on the cuda device, exposing __cuda_array_interface__ and __dlpack__ (zero-copy)."""
    return CudaArray(tensor)
