"""Enough of cuda.bindings.driver to build and drive the `cuda` device on a machine without a GPU.

Device memory is host memory (a device pointer is the address of a ctypes buffer, so the
driver's copies are memmoves); a loaded module is the image NVRTC made, checked for a cubin's
or PTX's header; a launch is recorded, not run: its function, grid, block and the argument
values (pointers), read from the parameter array as cuLaunchKernel would. Calls return what
cuda-bindings returns, `(CUresult, *values)`.
"""
from __future__ import annotations

import ctypes
import enum
import re


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_INVALID_IMAGE = 200


class CUdevice_attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class CUstream_flags(enum.IntEnum):
    CU_STREAM_NON_BLOCKING = 1


OK = CUresult.CUDA_SUCCESS


class FakeDriver:
    CUresult = CUresult
    CUdevice_attribute = CUdevice_attribute
    CUstream_flags = CUstream_flags
    CUstream = int

    def __init__(self, cc: tuple[int, int] = (9, 0), memory: int = 1 << 30):
        self.cc = cc
        self.memory = memory                          # bytes cuMemAlloc may hand out in all
        self.blocks: dict[int, ctypes.Array] = {}     # device pointer -> its host buffer
        self.freed: list[int] = []                    # sizes given back by cuMemFree
        self.modules: list[bytes] = []
        self.launches: list[tuple[str, tuple[int, ...], tuple[int, ...], list[int]]] = []
        self.refuse = 0                               # images cuModuleLoadData refuses before loading one
        self.synchronized = 0

    # -- device and context
    def cuInit(self, flags):
        return (OK,)

    def cuDeviceGetCount(self):
        return OK, 1

    def cuDeviceGet(self, ordinal):
        return OK, ordinal

    def cuDeviceGetAttribute(self, attribute, device):
        major = attribute == CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        return OK, self.cc[0] if major else self.cc[1]

    def cuDeviceGetName(self, length, device):
        return OK, b"Fake GPU\0\0"

    def cuDriverGetVersion(self):
        return OK, 12040

    def cuDeviceTotalMem(self, device):
        return OK, self.memory

    def cuDevicePrimaryCtxRetain(self, device):
        return OK, "context"

    def cuCtxSetCurrent(self, context):
        return (OK,)

    def cuStreamCreate(self, flags):
        return OK, 7

    def cuStreamSynchronize(self, stream):
        self.synchronized += 1
        return (OK,)

    def cuGetErrorName(self, err):
        return OK, CUresult(err).name.encode()

    def cuGetErrorString(self, err):
        return OK, b"fake driver"

    # -- memory
    def cuMemAlloc(self, size):
        if sum(len(b) for b in self.blocks.values()) + size > self.memory:
            return CUresult.CUDA_ERROR_OUT_OF_MEMORY, 0
        block = (ctypes.c_char * size)()
        self.blocks[ctypes.addressof(block)] = block
        return OK, ctypes.addressof(block)

    def cuMemFree(self, ptr):
        self.freed.append(len(self.blocks.pop(int(ptr))))
        return (OK,)

    def cuMemcpyHtoDAsync(self, dst, src, nbytes, stream):
        ctypes.memmove(dst, src, nbytes)
        return (OK,)

    def cuMemcpyDtoHAsync(self, dst, src, nbytes, stream):
        ctypes.memmove(dst, src, nbytes)
        return (OK,)

    def cuMemcpyDtoDAsync(self, dst, src, nbytes, stream):
        ctypes.memmove(dst, src, nbytes)
        return (OK,)

    # -- modules and launches
    def cuModuleLoadData(self, image):
        if self.refuse or not (image.startswith(b"\x7fELF") or (b".version" in image and image.endswith(b"\0"))):
            self.refuse = max(self.refuse - 1, 0)
            return CUresult.CUDA_ERROR_INVALID_IMAGE, None
        self.modules.append(image)
        return OK, len(self.modules) - 1

    def cuModuleGetFunction(self, module, name):
        # a PTX entry's parameters are `<name>_param_<i>`; a cubin's are not counted (not read)
        params = re.findall(rb"\b" + re.escape(name) + rb"_param_\d+\b", self.modules[module])
        return OK, (name.decode(), len(set(params)))

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        name, count = function
        pointers = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        args = [ctypes.cast(pointers[i], ctypes.POINTER(ctypes.c_uint64))[0] for i in range(count)]
        self.launches.append((name, (gx, gy, gz), (bx, by, bz), args))
        return (OK,)
