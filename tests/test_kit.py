"""The backend kit's core parts (ug_core.kit), apart from any backend: plugins/ug-c is the
backend built on it, and the core suite runs on its device `c`."""

import re

import numpy as np
import pytest

import ug_core as ug
from ug_core.specs import MatmulSpec
from ug_core.kit import (ENTRY, Allocator, CachingAllocator, Compiler, CStyleRenderer, Device, DeviceInfo, KitDevice,
                         LowerOptions, NumpyAllocator, Renderer, Runtime, SortSpec, c_name, matmul_kernel)
from ug_core.kit.allocator import SMALL_CLASS
from ug_core.kit.device import PROGRAM_CACHE_SIZE
from ug_core.loop_ir import Opc
from ug_core.ref import run_kernel
from ug_core.view import View


def test_a_renderer_missing_an_opcode_fails_when_defined():
    with pytest.raises(TypeError, match="op_barrier"):
        class Partial(CStyleRenderer):  # noqa: F841
            op_barrier = None  # type: ignore[assignment]

    class Abstract(Renderer):  # saying so, a base may leave opcodes to its subclasses
        complete = False
    assert Abstract.dispatch == {}

    class Dialect(CStyleRenderer):
        def head(self, name, program):
            return f"void {name}() {{"
    assert set(Dialect.dispatch) == set(Opc)


class _Counting(Allocator):
    alignment = 64

    def __init__(self):
        self.made, self.freed = [], []

    def alloc(self, nbytes):
        self.made.append(nbytes)
        return bytearray(nbytes)

    def free(self, handle):
        self.freed.append(len(handle))

    def copy_in(self, handle, src):
        handle[: src.nbytes] = src.tobytes()

    def copy_out(self, handle, dst):
        dst.view(np.uint8)[...] = np.frombuffer(bytes(handle[: dst.nbytes]), np.uint8)


def test_caching_allocator_reuses_by_size_class_and_caps_the_pool():
    raw = _Counting()
    pool = CachingAllocator(raw, cache_bytes=3 << 20)
    assert pool.size_class(1) == 64 and pool.size_class(65) == 128 and pool.size_class(0) == 64
    big = pool.size_class(SMALL_CLASS + 1)
    assert big % 64 == 0 and big - (SMALL_CLASS + 1) <= (SMALL_CLASS + 1) // 8
    a = pool.allocate(100)
    pool.free(a)
    assert pool.allocate(120) is a and raw.made == [128]  # same class: reused
    assert pool.memory_usage() == 128 and pool.pool_bytes() == 0
    blocks = [pool.allocate(1 << 20) for _ in range(5)]
    for block in blocks:
        pool.free(block)
    assert pool.pool_bytes() == 3 << 20 and raw.freed == [1 << 20] * 2  # past the cap: back to the backend
    take, make, give = pool.handle_allocator(100)
    pool.free(a)
    assert take() is a
    give(a)
    pool.empty_cache()
    assert pool.pool_bytes() == 0 and pool.memory_usage() == 0 and len(raw.freed) == len(raw.made)
    with pytest.raises(IndexError):
        take()
    assert len(make()) == 128


@pytest.mark.parametrize("case", ["plain", "transposed-b", "batched-broadcast"])
def test_the_default_matmul_kernel(case):
    rng = np.random.default_rng(5)
    if case == "plain":
        a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
        av, bv = View((3, 4), (4, 1)), View((4, 5), (5, 1))
        want = a @ b
        a_flat, b_flat = a.ravel(), b.ravel()
    elif case == "transposed-b":
        a, bt = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
        av, bv = View((3, 4), (4, 1)), View((4, 5), (1, 4))
        want = a @ bt.T
        a_flat, b_flat = a.ravel(), bt.ravel()
    else:  # a (2, 3, 4) batch, b one (4, 5) matrix broadcast over it, read at an offset
        a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
        av, bv = View((2, 3, 4), (12, 4, 1)), View((2, 4, 5), (0, 5, 1), 7)
        want = a @ b
        a_flat, b_flat = a.ravel(), np.concatenate([np.zeros(7), b.ravel()])
    spec = MatmulSpec(av, bv, want.shape, np.dtype(np.float64))
    kernel = matmul_kernel(spec, a_flat.size, b_flat.size)
    out = np.zeros(want.size)
    run_kernel(kernel, [out, a_flat, b_flat])
    np.testing.assert_allclose(out.reshape(want.shape), want, rtol=1e-12)


class _Limited(_Counting):
    """At most `limit` bytes allocated at once (a device running out of memory)."""

    def __init__(self, limit):
        super().__init__()
        self.limit, self.live = limit, 0

    def alloc(self, nbytes):
        if self.live + nbytes > self.limit:
            raise MemoryError(f"out of memory allocating {nbytes} bytes")
        self.live += nbytes
        return super().alloc(nbytes)

    def free(self, handle):
        self.live -= len(handle)
        super().free(handle)


def test_the_pool_gives_its_free_blocks_back_and_retries_when_the_backend_runs_out():
    raw = _Limited(3 << 20)
    pool = CachingAllocator(raw)
    for block in [pool.allocate(1 << 20) for _ in range(3)]:
        pool.free(block)
    assert pool.pool_bytes() == 3 << 20 and raw.live == 3 << 20
    big = pool.allocate(2 << 20)   # only once the pooled 1 MiB blocks went back
    assert len(big) == 2 << 20 and pool.pool_bytes() == 0 and raw.freed == [1 << 20] * 3
    with pytest.raises(MemoryError, match=r"out of memory allocating .* \(after giving the pool's free blocks back\)"):
        pool.allocate(2 << 20)
    take, make, give = pool.handle_allocator(1 << 20)   # (the jit fast path's allocate retries too)
    pool.free(big)
    assert len(make()) == 1 << 20


# --- the pipeline, on a backend of fakes: a C dialect whose "compiler" returns the source's bytes
# and whose runtime records its launches on int handles (addresses, as ug-llvm's blocks are)

class _Ints(Allocator):
    def __init__(self):
        self.next = 0x1000

    def alloc(self, nbytes):
        self.next += nbytes
        return self.next

    def free(self, handle):
        pass

    def copy_in(self, handle, src):
        pass

    def copy_out(self, handle, dst):
        pass


class _Source(Compiler):
    name, disk_cache = "kit-test", False

    def identity(self):
        return "test"

    def compile(self, source, name):
        return source.encode()


class _Recording(Runtime):
    def __init__(self):
        self.loaded, self.launches = [], []

    def load(self, binary, program, name):
        self.loaded.append((binary.decode(), name))
        return len(self.loaded) - 1

    def launch(self, loaded, program, handles):
        self.launches.append((loaded, list(handles)))


class _Restricted(CStyleRenderer):
    noalias = True   # (a class default: the kit sets it False on the variant's renderer)

    def head(self, name, program):
        restrict = " restrict" if self.noalias else ""
        params = ", ".join(f"float*{restrict} b{i}" for i in range(len(program.params)))
        return f"void {name}({params}) {{"


class _Hashed(_Restricted):
    entry_names = "hash"


def _fake_device(renderer):
    info = DeviceInfo("fake", frozenset({np.dtype(np.float32)}), LowerOptions(target="cpu"))
    return KitDevice(info, renderer, _Source(), _Ints(), _Recording())


def _add_kernel():
    x = ug.tensor(np.ones(8, np.float32), device="ref")
    return ug.schedule(x * 2.0 + x).kernels[0].kernel


def test_the_kit_compiles_the_no_alias_variant_on_the_first_launch_that_needs_it():
    dev = _fake_device(_Restricted)
    program = dev.compile(_add_kernel())
    (source, name), = dev.runtime.loaded
    assert "restrict" in source and name == c_name(program.name) and program.source == source
    buffers = [ug.Buffer(dev, 8, np.float32) for _ in program.handle.program.params]
    launch = dev.launcher(program)
    assert dev.launcher(program) is launch   # made once per program
    launch(buffers)
    assert dev.runtime.launches[-1] == (0, [b.handle for b in buffers]) and len(dev.runtime.loaded) == 1
    same = [buffers[0]] * len(buffers)       # one buffer passed twice: the variant, compiled now, once
    for _ in range(2):
        dev.run(program, same)
        assert dev.runtime.launches[-1] == (1, [buffers[0].handle] * len(buffers))
    assert len(dev.runtime.loaded) == 2 and "restrict" not in dev.runtime.loaded[1][0]
    launch(buffers)
    assert dev.runtime.launches[-1][0] == 0
    pack, call = dev.handle_launcher(program)   # (ug.jit's replays: the runtime's launch on the handles)
    call(pack(*[b.handle for b in buffers]))
    assert dev.runtime.launches[-1] == (0, [b.handle for b in buffers])


def test_hashed_entry_names_name_a_program_by_its_source():
    dev = _fake_device(_Hashed)
    source, name = dev.render_entry(dev.lower(_add_kernel()))
    assert re.fullmatch(r"ug_[0-9a-f]{24}", name) and f"void {name}(" in source and ENTRY not in source
    variant, other = dev.render_entry(dev.lower(_add_kernel()), noalias=False)
    assert other != name and "restrict" not in variant


def test_the_program_cache_is_bounded():
    dev = _fake_device(_Restricted)
    made = []
    for i in range(PROGRAM_CACHE_SIZE + 3):
        dev.cached(("t", i), lambda: made.append(1) or len(made))
    assert len(dev.programs) == PROGRAM_CACHE_SIZE and ("t", 0) not in dev.programs
    assert dev.cached(("t", 5), lambda: -1) == 6 and len(made) == PROGRAM_CACHE_SIZE + 3


class _HostOnly(Device):
    """A device with no sort of its own (memory the core only copies to and from)."""

    name, dtypes = "host-only", frozenset(map(np.dtype, ["float32", "int64"]))
    raw = NumpyAllocator()

    def allocate(self, nbytes):
        return self.raw.alloc(nbytes)

    def free(self, handle):
        self.raw.free(handle)

    def copy_in(self, handle, src):
        self.raw.copy_in(handle, src)

    def copy_out(self, handle, dst):
        self.raw.copy_out(handle, dst)

    def compile(self, kernel):
        raise NotImplementedError

    def run(self, program, buffers):
        raise NotImplementedError

    def matmul(self, out, a, b, spec):
        raise NotImplementedError


def test_a_device_without_a_sort_sorts_through_the_host(monkeypatch):
    from ug_core import device as device_module
    host_sorts = []
    sort_rows = device_module._host_fallbacks["sort"]
    monkeypatch.setitem(device_module._host_fallbacks, "sort", lambda *a: (host_sorts.append(1), sort_rows(*a)))
    dev = _HostOnly()
    keys = np.array([3.0, np.nan, 1.0, 2.0, -1.0, 1.0, 0.5, 7.0], np.float32)
    src = ug.Buffer(dev, 8, np.float32).copy_in(keys)
    order = ug.Buffer(dev, 6, np.int64)
    dev.sort(order, src, SortSpec(rows=2, n=4, k=3, descending=True, stable=True, indices=True))
    want = np.argsort(-keys.reshape(2, 4), axis=1, kind="stable")[:, :3]   # (NaN first, descending)
    want[0] = [1, 0, 3]
    np.testing.assert_array_equal(order.numpy().reshape(2, 3), want)
    values = ug.Buffer(dev, 8, np.float32)
    dev.sort(values, src, SortSpec(rows=2, n=4, k=4, descending=False, stable=True, indices=False))
    np.testing.assert_array_equal(values.numpy().reshape(2, 4), np.sort(keys.reshape(2, 4), axis=1))
    assert len(host_sorts) == 2   # (both through Device.sort's host round trip)
