"""The `cuda` device on the backend kit, driven through a stand-in for the CUDA driver
(fake_driver.FakeDriver), so that its host side runs without a GPU: the core's pool around the
driver's allocations, NVRTC behind the core's disk cache, module loading, launch arguments,
the variant without __restrict__ for aliased launches, the tiled matmul's launch. Kernels are
compiled by the real NVRTC, never run (test_cuda_runtime.py runs them where there is a GPU)."""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug
from ug_core.specs import MatmulSpec
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Store
from ug_core.kit import CachingAllocator, KitDevice
from ug_core.ops import Op
from ug_core.view import View

from fake_driver import FakeDriver
from ug_cuda import nvrtc
from ug_cuda.device import CudaDevice
from ug_cuda.memory import Allocation, CudaAllocator

try:
    nvrtc.version()
    HAVE_NVRTC = True
except Exception:  # pragma: no cover
    HAVE_NVRTC = False

needs_nvrtc = pytest.mark.skipif(not HAVE_NVRTC, reason="NVRTC not available")
F32 = np.dtype(np.float32)


def make(cc: tuple[int, int] = (9, 9), memory: int = 1 << 30) -> tuple[CudaDevice, FakeDriver]:
    """A device on a fake GPU; compute capability 9.9 is one NVRTC has no CUBIN for, so kernels
    are PTX (compute_90), whose launches the fake reads the arguments of."""
    fake = FakeDriver(cc, memory)
    return CudaDevice(0, driver=fake), fake


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("UG_CUDA_CACHE_DIR", str(tmp_path / "cuda"))
    monkeypatch.setenv("UG_CUDA_DISK_CACHE", "1")
    return tmp_path / "cuda"


def add_kernel(n: int = 300) -> Kernel:
    eb = ExprBuilder()
    view = View.contiguous((n,))
    total = eb.alu(Op.ADD, (eb.load(1, (view,), F32), eb.load(2, (view,), F32)), F32)
    return Kernel("add", (BufferArg(F32, n, True), BufferArg(F32, n, False), BufferArg(F32, n, False)),
                  (n,), (), (), (Store(0, (n,), view, total),))


@needs_nvrtc
def test_the_device_is_assembled_from_kit_parts():
    dev, _ = make((8, 0))
    assert isinstance(dev, KitDevice) and isinstance(dev.memory, CachingAllocator) and isinstance(dev.raw, CudaAllocator)
    assert dev.target == "sm_80" and dev.info.lower_options.target == "gpu"
    assert "Fake GPU" in dev.description and "sm_80" in dev.version
    assert dev.compiler.compiler.name == "cuda"   # ~/.cache/ug/cuda, UG_CUDA_CACHE_DIR, UG_CUDA_DISK_CACHE


def test_the_pool_reuses_allocations_and_empties_itself_before_running_out():
    dev, fake = make(memory=1 << 20)
    a = ug.Buffer(dev, 1000, F32)
    ptr = a.handle.ptr
    assert dev.memory_usage() == 4096 and len(fake.blocks) == 1   # 512-byte size classes up to 64 KiB
    del a
    assert dev.memory_usage() == 0 and dev.pool_bytes() == 4096
    b = ug.Buffer(dev, 1000, F32)
    assert b.handle.ptr == ptr and len(fake.blocks) == 1           # the pool's block: no cuMemAlloc
    big = [ug.Buffer(dev, 100_000, F32) for _ in range(2)]        # 2 x 416 KiB
    del big
    assert dev.pool_bytes() == 2 * 425984 and not fake.freed
    c = ug.Buffer(dev, 200_000, F32)   # 832 KiB: fits once the pool's blocks are given back
    assert fake.freed == [425984, 425984] and dev.pool_bytes() == 0 and c.handle.ptr in fake.blocks
    with pytest.raises(MemoryError, match="out of memory"):
        ug.Buffer(dev, 1 << 20, F32)
    x = np.arange(10, dtype=F32)
    np.testing.assert_array_equal(ug.Buffer(dev, 10, F32).copy_in(x).numpy(), x)
    pooled = dev.pool_bytes()
    dev.free(Allocation(0x1000, owner=object()))   # foreign memory (interop, zero-copy): never pooled
    assert dev.pool_bytes() == pooled


@needs_nvrtc
def test_kernels_come_from_the_disk_cache_and_launch_with_their_buffers():
    dev, fake = make()
    program = dev.compile(add_kernel())
    assert dev.compiler.stats == {"compiled": 1, "disk_hits": 0} and "__restrict__" in program.source
    out, a, b = (ug.Buffer(dev, 300, F32) for _ in range(3))
    dev.launcher(program)([out, a, b])
    assert fake.launches[-1] == ("add", (2, 1, 1), (256, 1, 1), [out.handle.ptr, a.handle.ptr, b.handle.ptr])
    # in place (the output is an input too): the variant without __restrict__, compiled once
    for _ in range(2):
        dev.run(program, [a, a, b])
        assert fake.launches[-1][3] == [a.handle.ptr, a.handle.ptr, b.handle.ptr]
    assert dev.compiler.stats["compiled"] == 2 and fake.modules[-1] != fake.modules[-2]
    again, _ = make()   # (a new process's device)
    again.compile(add_kernel())
    assert again.compiler.stats == {"compiled": 0, "disk_hits": 1}


@needs_nvrtc
def test_an_image_the_driver_refuses_is_dropped_from_the_cache_and_compiled_again():
    from ug_cuda.matmul import kernel_source

    source, name = kernel_source(F32)
    make()[0].load_source(source, name)
    dev, fake = make()
    fake.refuse = 1
    dev.load_source(source, name)
    assert dev.compiler.stats == {"compiled": 1, "disk_hits": 0} and dev.compiler.disk.stats["corrupt"] == 1


@needs_nvrtc
def test_the_tiled_matmul_launches_with_its_sizes(monkeypatch):
    monkeypatch.setenv("UG_CUDA_CUBLAS", "0")
    dev, fake = make()
    out, a, b = ug.Buffer(dev, 6 * 5, F32), ug.Buffer(dev, 6 * 4, F32), ug.Buffer(dev, 4 * 5, F32)
    dev.matmul(out, a, b, MatmulSpec(View.contiguous((6, 4)), View.contiguous((4, 5)), (6, 5), F32))
    name, grid, block, args = fake.launches[-1]
    assert (name, grid, block) == ("ug_matmul_float32", (1, 1, 1), (16, 16, 1))
    assert args == [out.handle.ptr, a.handle.ptr, b.handle.ptr, 6]   # the by-value struct starts with M


@needs_nvrtc
def test_the_plugins_factory_fills_in_the_gpu(monkeypatch):
    from ug_cuda import driver, plugin

    monkeypatch.setattr(driver, "import_driver", lambda: FakeDriver((8, 6)))
    spec = plugin._spec()
    device = spec.factory()
    assert isinstance(device, CudaDevice) and spec.version == device.version
    assert "Fake GPU, compute capability 8.6, driver CUDA 12.4" in spec.description


def test_after_a_fork_the_device_refuses_with_a_clear_error_and_cannot_be_made_again(monkeypatch):
    """CUDA does not survive os.fork(): in the child (the core's fork handler calls after_fork
    for each device made in the parent) every driver call of the parent's device object says
    so, and making a new device there does too, rather than failing in cuInit."""
    from ug_cuda import driver, plugin

    device, fake = make()
    buffer = ug.Buffer(device, 4, F32).copy_in(np.arange(4, dtype=np.float32))
    monkeypatch.setattr(driver, "FORKED_FROM", None)   # (restored after the test)
    assert device.after_fork(4242) is False
    message = r"created in process 4242 before os\.fork\(\).*'spawn'"
    with pytest.raises(ug.DeviceUnavailableError, match=message):
        buffer.numpy()
    with pytest.raises(ug.DeviceUnavailableError, match=message):
        device.copy_in(buffer.handle, np.zeros(4, np.float32))
    with pytest.raises(ug.DeviceUnavailableError, match=message):
        device.synchronize()
    del buffer   # (freed into the pool: no driver call, no error)
    monkeypatch.setattr(driver, "import_driver", lambda: FakeDriver((8, 6)))
    with pytest.raises(RuntimeError, match=r"forked .* from process 4242, where ug had initialized it.*'spawn'"):
        plugin._spec().factory()
