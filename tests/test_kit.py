"""The backend kit's core parts (ug_core.kit), apart from any backend: plugins/ug-c is the
backend built on it, and the core suite runs on its device `c`."""

import numpy as np
import pytest

from ug_core.device import MatmulSpec
from ug_core.kit import Allocator, CachingAllocator, CStyleRenderer, Renderer, matmul_kernel
from ug_core.kit.allocator import SMALL_CLASS
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
