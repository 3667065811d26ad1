"""A backend written against the low-level `ug.Device` interface exactly as CONTRIBUTING.md
documented it before the backend kit existed: its own allocate/free/copy_in/copy_out, compile
(the core's lowering, then its own "renderer") and run, and a numpy matmul. It runs the loop IR
in the numpy interpreter of tests/loop_interp.py. Loaded as a pytest plugin (`-p legacy_device`)
it registers the device `legacy`, so the conformance kit can run on it (test_legacy_device.py)."""
from __future__ import annotations

import os
import sys

import numpy as np

import ug_core as ug
from ug_core.lower import LowerOptions, lower

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
import loop_interp  # noqa: E402


class LegacyDevice(ug.Device):
    name = "legacy"
    version = "1"
    dtypes = frozenset(map(np.dtype, ["float32", "float64", "int32", "int64", "bool"]))

    def allocate(self, nbytes):
        return np.zeros(max(nbytes, 1), np.uint8)

    def free(self, handle):
        pass

    def copy_in(self, handle, src):
        handle[: src.nbytes] = src.reshape(-1).view(np.uint8)

    def copy_out(self, handle, dst):
        dst.reshape(-1).view(np.uint8)[...] = handle[: dst.nbytes]

    def compile(self, kernel):
        program = lower(kernel, LowerOptions(target="cpu"))
        source = str(program)   # this backend's "rendering": it interprets the loop IR as is
        return ug.Program(kernel.name, program, source, program.global_size, program.local_size)

    def run(self, program, buffers):
        arrays = [b.handle[: b.nbytes].view(b.dtype) for b in buffers]
        with np.errstate(all="ignore"):
            loop_interp.run(program.handle, arrays)

    def matmul(self, out, a, b, spec):
        def strided(buffer, view):
            flat = buffer.handle[: buffer.nbytes].view(buffer.dtype)
            return np.lib.stride_tricks.as_strided(flat[view.offset:], view.shape, [s * flat.itemsize for s in view.strides])
        product = np.matmul(strided(a, spec.a_view), strided(b, spec.b_view))
        out.handle[: out.nbytes].view(out.dtype)[...] = product.astype(out.dtype).reshape(-1)


class _Plugin:
    @ug.hookimpl
    def ug_register_devices(self, register):
        register(ug.DeviceSpec(name="legacy", factory=LegacyDevice, plugin="legacy-test", version="1", priority=900))


ug.registry.register_plugin(_Plugin(), name="legacy-test")
