"""Backend tests of the LLVM `cpu` device: threads, disk cache, vectorization, casts, errors."""

import itertools
import re
import warnings

import numpy as np
import pytest

import ug_core as ug
from ug_core.device import Buffer
from ug_core.dtypes import SUPPORTED
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Store
from ug_core.view import View

import ug_llvm.jit as jitmod
from ug_llvm.device import CPUDevice


@pytest.fixture(scope="module")
def dev():
    return ug.registry.get("cpu")


def _kernel(tensor):
    items = [it for it in ug.schedule(tensor).items if it.kind == "kernel"]
    assert items
    return items[-1].kernel


def test_registered_first_with_versions():
    assert ug.devices()[0] == "cpu"
    d = ug.registry.get("cpu")
    assert isinstance(d, CPUDevice)
    assert "llvmlite" in d.version and "llvm" in d.version


@pytest.mark.parametrize("make", [
    lambda x: x.exp() * x.sin() + x * x,
    lambda x: x.softmax(-1),
    lambda x: x.sum(-1),
    lambda x: x.T.tanh() - 1,
    lambda x: x.sum(0),
    lambda x: x.softmax(0),
], ids=["elementwise", "softmax", "rowsum", "transpose", "colsum", "colsoftmax"])
def test_threads_give_the_same_bits(dev, make):
    x = np.random.default_rng(0).standard_normal((1000, 333)).astype(np.float32)
    t = ug.tensor(x, device="cpu")
    kernel = _kernel(make(t))
    program = dev.compile(kernel)
    inputs = [Buffer(dev, a.size, a.dtype) for a in kernel.args]
    for b, a in zip(inputs, kernel.args):
        if not a.output:
            b.copy_in(x.reshape(-1)[: a.size].astype(a.dtype))
    results = []
    for threads in (1, 2, 3, 7):
        dev.run_threads(program, inputs, threads)
        results.append([b.numpy().copy() for b, a in zip(inputs, kernel.args) if a.output])
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


def test_disk_cache_hit_miss_and_corruption(tmp_path, monkeypatch):
    monkeypatch.setenv("UG_LLVM_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("UG_LLVM_DISK_CACHE", "1")
    j = jitmod.Jit()  # a fresh engine: nothing loaded in memory
    dev = ug.registry.get("cpu")
    x = ug.tensor(np.arange(10, dtype=np.float32), device="cpu")
    ir, name = dev.render_entry(dev.lower(_kernel((x * 3.5 + 0.25).exp())))
    j.load(ir, name)
    assert j.compiler.stats == {"compiled": 1, "disk_hits": 0}
    files = list(tmp_path.rglob("*.o"))
    assert len(files) == 1
    # a second engine (another process, in effect) loads it from disk
    j2 = jitmod.Jit()
    addr = j2.load(ir, name)
    assert addr and j2.compiler.stats == {"compiled": 0, "disk_hits": 1}
    # corrupt entries (flipped byte, truncated, garbage) are recompiled, never a crash
    data = files[0].read_bytes()
    for bad in (data[:-1] + bytes([data[-1] ^ 0xFF]), data[: len(data) // 2], b"garbage"):
        files[0].write_bytes(bad)
        j3 = jitmod.Jit()
        assert j3.load(ir, name)
        assert j3.compiler.stats == {"compiled": 1, "disk_hits": 0} and j3.compiler.disk.stats["corrupt"] == 1
    assert files[0].read_bytes() == data  # rewritten
    # the key depends on the IR (the scalars 3.5 and 0.25 are kernel arguments, not in it)
    assert j.compiler.key(ir, name) != j.compiler.key(ir.replace("fmul", "fadd", 1), name)


def test_a_cached_object_that_does_not_load_is_compiled_again(tmp_path, monkeypatch):
    # sound as a file (checksum, ELF structure) but refused by the engine: dropped and rebuilt
    monkeypatch.setenv("UG_LLVM_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("UG_LLVM_DISK_CACHE", "1")
    dev = ug.registry.get("cpu")
    x = ug.tensor(np.arange(10, dtype=np.float32), device="cpu")
    ir, name = dev.render_entry(dev.lower(_kernel(x * 5.5 - 2)))
    other_ir, other = dev.render_entry(dev.lower(_kernel(x * 5.5 + 2)))
    j = jitmod.Jit()
    j.compiler.disk.write(j.compiler.key(ir, name), j.target.compile(other_ir, other))  # no `name` in it
    assert j.load(ir, name)
    assert j.compiler.stats == {"compiled": 1, "disk_hits": 0} and j.compiler.disk.stats["corrupt"] == 1
    j2 = jitmod.Jit()
    assert j2.load(ir, name) and j2.compiler.stats == {"compiled": 0, "disk_hits": 1}


def test_disk_cache_can_be_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv("UG_LLVM_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("UG_LLVM_DISK_CACHE", "0")
    j = jitmod.Jit()
    dev = ug.registry.get("cpu")
    x = ug.tensor(np.arange(10, dtype=np.float32), device="cpu")
    ir, name = dev.render_entry(dev.lower(_kernel(x * 7 - 1)))
    j.load(ir, name)
    assert j.compiler.stats["compiled"] == 1 and not list(tmp_path.rglob("*.o"))


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("UG_LLVM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert jitmod.get_jit().compiler.disk.directory() == tmp_path / "ug" / "llvm"


def test_elementwise_kernel_is_vectorized(dev):
    x = ug.tensor(np.ones(4096, np.float32), device="cpu")
    ir = dev.render(_kernel(x.exp() * x.sin() + x * x))
    optimized = dev.jit.target.optimized_ir(ir)
    assert re.search(r"<(4|8|16) x float>", optimized), "no vector ops in the optimized IR"
    assert "call float @ug_sin_f32" not in optimized.split("define internal")[0] or "_v" in optimized
    asm = dev.jit.target.assembly(ir)
    assert re.search(r"%(xmm|ymm|zmm)\d+", asm) and re.search(r"v(mul|fmadd\d*)ps", asm)
    # the transcendental calls became vector code / vector-variant calls, not scalar libm calls
    assert not re.search(r"call\w*\s+(expf|sinf|logf)\b", asm)


def test_reductions_are_vectorized(dev):
    x = ug.tensor(np.ones((64, 4096), np.float32), device="cpu")
    for y in (x.sum(-1), x.max(-1)):
        optimized = dev.jit.target.optimized_ir(dev.render(_kernel(y)))
        assert re.search(r"<(4|8|16) x float>", optimized)


def test_column_reductions_are_outer_blocked_and_vectorized(dev):
    x = ug.tensor(np.ones((512, 4096), np.float32), device="cpu")
    for y in (x.sum(0), x.max(0), x.softmax(0)):
        kernel = _kernel(y)
        program = dev.lower(kernel)
        assert any(i.opc.name == "DEFINE_LOCAL" for i in program.instructions), program
        optimized = dev.jit.target.optimized_ir(dev.render(kernel))
        assert re.search(r"load <(4|8|16) x float>", optimized)
    # rows: the serial loop over the contiguous reduced axis is kept
    assert not any(i.opc.name == "DEFINE_LOCAL" for i in dev.lower(_kernel(x.sum(1))).instructions)


@pytest.mark.parametrize("shape,axis", [((3_000_000 // 48, 48), 0), ((1000, 33), 0), ((5, 1001, 70), 1),
                                        ((3, 7, 130), 0)])
def test_column_reductions_match_numpy(shape, axis):
    rng = np.random.default_rng(1)
    a = rng.random(shape, dtype=np.float32)
    t = ug.tensor(a, device="cpu")
    exact = a.astype(np.float64).sum(axis)
    np.testing.assert_allclose(t.sum(axis).numpy(), exact, rtol=1e-5)
    np.testing.assert_array_equal(t.max(axis).numpy(), a.max(axis))
    ex = np.exp(a - a.max(axis, keepdims=True))
    np.testing.assert_allclose(t.softmax(axis).numpy(), ex / ex.sum(axis, keepdims=True), rtol=1e-5, atol=1e-7)


def _cast_kernel(src: np.dtype, dst: np.dtype) -> Kernel:
    b = ExprBuilder()
    view = View((16,), (1,), 0)
    expr = b.cast(b.load(1, (view,), src), dst)
    return Kernel("cast", (BufferArg(dst, 16, True), BufferArg(src, 16, False)), (16,), (), (),
                  (Store(0, (16,), view, expr),))


@pytest.mark.parametrize("src,dst", list(itertools.product(SUPPORTED, SUPPORTED)),
                         ids=lambda d: np.dtype(d).name)
def test_every_cast_renders_and_compiles(dev, src, dst):
    ir = dev.render(_cast_kernel(src, dst))
    assert "define void @ug_" in ir
    asm = dev.jit.target.assembly(ir)
    # no libcalls that the JIT could not resolve (e.g. __truncdfhf2)
    assert not re.search(r"__\w+hf2|__float\w+hf", asm)


def test_cast_results_match_numpy(dev):
    rng = np.random.default_rng(3)
    vals = np.concatenate([rng.standard_normal(300) * 1e3, rng.standard_normal(300), [0.0, -0.0, 1.5, -2.5, 65504.0, 1e-7]])
    for src, dst in itertools.product(SUPPORTED, SUPPORTED):
        a = vals.astype(src) if src.kind != "b" else vals > 0
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)   # (complex -> real: the real part)
            expected = a.astype(dst)
        if src.kind in "fc" and dst.kind in "iu":  # out-of-range float->int is platform-defined
            keep = np.abs(np.real(a).astype(np.float64)) < 2.0 ** 31
            a, expected = a[keep], expected[keep]
        got = ug.tensor(a, device="cpu").astype(dst).numpy()
        assert np.array_equal(got.view(np.uint8), np.ascontiguousarray(expected).view(np.uint8)), (src, dst)


def test_compile_error_carries_the_ir(dev, monkeypatch):
    x = ug.tensor(np.ones(8, np.float32), device="cpu")
    kernel = _kernel(x + 1)
    from ug_llvm.render import LLVMRenderer

    class Bogus(LLVMRenderer):
        def render(self, program, name):
            return super().render(program, name).replace("fadd", "fadd_bogus")
    monkeypatch.setattr("ug_llvm.device.LLVMRenderer", Bogus)
    with pytest.raises(ug.CompileError) as info:
        dev.compile(kernel)
    assert "fadd_bogus" in info.value.source


def test_in_place_aliasing_runs_without_noalias(dev):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = ug.tensor(a.copy(), device="cpu")
    x[1] = x[1] * 2 + 1
    expected = a.copy()
    expected[1] = expected[1] * 2 + 1
    np.testing.assert_array_equal(x.numpy(), expected)


def test_aligned_buffers_and_pool_reuse(dev):
    bufs = [Buffer(dev, n, np.float32) for n in (1, 3, 17, 1000)]
    assert all(b.handle.ptr % 64 == 0 for b in bufs)
    ptr = bufs[-1].handle.ptr
    used = dev.memory_usage()
    del bufs
    assert dev.memory_usage() <= used - 4000
    again = Buffer(dev, 1000, np.float32)
    assert again.handle.ptr == ptr  # reused from the pool


def test_handle_allocator_pools_small_blocks(dev):
    # ug.jit's per-size allocator: take (the size's free list pop), allocate (a new block),
    # free (the list's append); blocks are their addresses and stay 64-byte aligned
    take, allocate, free = dev.handle_allocator(256)
    blocks = [allocate() for _ in range(3)]
    assert all(isinstance(b, int) and b == b.ptr and b.ptr % 64 == 0 and b.capacity == 256 for b in blocks)
    used = dev.memory_usage()
    for b in blocks:
        free(b)
    assert dev.memory_usage() == used - 3 * 256
    assert take() == blocks[-1]  # the last one freed comes back first
    assert dev.memory_usage() == used - 2 * 256
    # a big size goes through allocate/free (bounded pool) instead
    take_big, allocate_big, free_big = dev.handle_allocator(1 << 20)
    big = take_big()
    assert big.capacity == 1 << 20
    free_big(big)


@pytest.mark.parametrize("n", [100, 1 << 19], ids=["serial", "parallel"])
def test_handle_launcher_runs_the_whole_range(dev, n):
    a = np.arange(n, dtype=np.float32)
    x = ug.tensor(a, device="cpu").realize()
    kernel = _kernel(x * 2 + 1)
    program = dev.compile(kernel)
    bufs = [x.node.buffer if not arg.output else Buffer(dev, arg.size, arg.dtype) for arg in kernel.args]
    pack, call = dev.handle_launcher(program)
    handles = [b.handle for b in bufs]
    assert (pack is None) == (n == 100)   # a tiny kernel's launch is direct (fastcall.py)
    call(*handles) if pack is None else call(pack(*handles))
    out = next(b for b, arg in zip(bufs, kernel.args) if arg.output)
    np.testing.assert_array_equal(out.numpy(), a * 2 + 1)


def test_tiny_kernels_prefer_narrow_vectors(dev):
    # below HOLD_GIL_WORK a kernel is vectorized with 128-bit vectors (see TINY_VECTOR_BITS);
    # bigger ones keep the target's width. Both get the `.all` entry (the whole range).
    tiny = dev.render(_kernel(ug.tensor(np.ones(64, np.float32), device="cpu") * 2 + 1))
    big = dev.render(_kernel(ug.tensor(np.ones(1 << 16, np.float32), device="cpu") * 2 + 1))
    assert '"prefer-vector-width"="128"' in tiny and "prefer-vector-width" not in big
    assert re.search(r"define void @ug_\w+\.all\(ptr %args\)", tiny) and ".all(ptr %args)" in big


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16])
def test_matmul_strided_and_batched(dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 5, 7)).astype(dtype)
    b = rng.standard_normal((7, 4)).astype(dtype) if dtype != np.int32 else rng.integers(-3, 3, (7, 4)).astype(dtype)
    x, y = ug.tensor(a, device="cpu"), ug.tensor(b, device="cpu")
    got = (x.permute(0, 2, 1).permute(0, 2, 1) @ y).numpy()
    np.testing.assert_allclose(got.astype(np.float64), (a @ b).astype(np.float64), rtol=2e-3 if dtype == np.float16 else 1e-5)
    got_t = (y.T @ x[0].T).numpy()
    np.testing.assert_allclose(got_t.astype(np.float64), (b.T @ a[0].T).astype(np.float64),
                               rtol=2e-3 if dtype == np.float16 else 1e-5)


def test_cold_compile_is_fast(dev, monkeypatch):
    import time

    monkeypatch.setenv("UG_LLVM_DISK_CACHE", "0")
    x = ug.tensor(np.random.rand(33, 77).astype(np.float32), device="cpu")
    ir, name = dev.render_entry(dev.lower(_kernel(x.softmax(-1) * 1.2345)))
    j = jitmod.Jit()
    start = time.perf_counter()
    j.load(ir, name)
    assert time.perf_counter() - start < 2.0  # generous: the target is ~0.1 s, CI machines are noisy


def test_wide_column_reductions_use_wide_blocks(dev):
    """Outputs wide enough for every thread to get a block of WIDE_OUTER_BLOCK columns are
    lowered with that block (a page of each row per step); narrower ones keep OUTER_BLOCK."""
    from ug_llvm import settings

    wide_cols = settings.WIDE_OUTER_BLOCK * dev.threads
    x = np.random.default_rng(0).standard_normal((40, wide_cols)).astype(np.float32)
    t = ug.tensor(x, device="cpu").sum(0)
    assert int(np.prod(dev.lower(_kernel(t)).global_size)) == wide_cols // settings.WIDE_OUTER_BLOCK
    np.testing.assert_allclose(t.numpy(), x.sum(0), rtol=1e-5, atol=1e-4)
    narrow = ug.tensor(x[:, :256], device="cpu").sum(0)
    assert int(np.prod(dev.lower(_kernel(narrow)).global_size)) == 256 // settings.OUTER_BLOCK
    sm = ug.tensor(x, device="cpu").softmax(0).numpy()
    e = np.exp(x - x.max(0))
    np.testing.assert_allclose(sm, e / e.sum(0), rtol=1e-5, atol=1e-6)


def test_matmul_epilogue_runs_inside_the_gemm(dev, monkeypatch):
    # a bias + activation after a float32/float64 matmul runs in the packed gemm, per block of
    # rows; float16 (rounded at the end), matrix-vector shapes (numpy) and kernels that read
    # the product elsewhere than at their own element run after it, through the plain steps
    calls = []
    real = dev.matmul_epilogue

    def spy(*args):
        done = real(*args)
        calls.append(done)
        return done
    monkeypatch.setattr(dev, "matmul_epilogue", spy)
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        a, w, b = (rng.standard_normal(s).astype(dtype) for s in ((300, 70), (70, 90), (90,)))
        x, wt, bt = (ug.tensor(v, device="cpu") for v in (a, w, b))
        got = ((x @ wt + bt).relu() * 2).numpy()
        np.testing.assert_allclose(got, np.maximum(a @ w + b, 0) * 2, rtol=1e-4, atol=1e-4)
    assert calls == [True, True]
    # large enough for the threads and guided row blocks: the same bits as without the epilogue
    a, w, b = (rng.standard_normal(s, dtype=np.float32) for s in ((1500, 64), (64, 700), (700,)))
    x, wt, bt = (ug.tensor(v, device="cpu") for v in (a, w, b))
    fused = (x @ wt + bt).tanh().numpy()
    plain = ((x @ wt).realize() + bt).tanh().numpy()
    assert calls[-1] is True and np.array_equal(fused, plain)
    calls.clear()
    h = [v.astype(np.float16) for v in (a[:64], w, b)]
    (ug.tensor(h[0], device="cpu") @ ug.tensor(h[1], device="cpu") + ug.tensor(h[2], device="cpu")).numpy()
    (ug.tensor(a[:4], device="cpu") @ wt + bt).numpy()
    assert calls == [False, False]
    calls.clear()
    sq = ug.tensor(a[:64, :64], device="cpu")
    ((sq @ sq).T + 1).numpy()
    (sq @ sq).softmax(axis=-1).numpy()
    assert calls == []


def test_index_division_in_32_bits_where_it_fits(dev):
    # a broadcast's `i % n` / `i // n` under rows too short to split the loop at (render.ROW_MIN) is
    # rendered in 32 bits when the index stays below 2^31 (an i64 vector division by a constant is
    # scalarized); beyond that it stays 64-bit
    b = ug.tensor(np.arange(5, dtype=np.float32), device="cpu")
    x = ug.tensor(np.ones((1000, 5), np.float32), device="cpu")
    ir = dev.render(_kernel(x + b))
    assert re.search(r"urem i32 %\w+, 5", ir) and not re.search(r"urem i64", ir)
    np.testing.assert_array_equal((x + b).numpy(), np.ones((1000, 5), np.float32) + np.arange(5, dtype=np.float32))
    col = ug.tensor(np.arange(1000, dtype=np.float32).reshape(1000, 1), device="cpu")
    x = ug.tensor(np.ones((1000, 7), np.float32), device="cpu")
    assert re.search(r"udiv i32 %\w+, 7", dev.render(_kernel(x * col)))
    np.testing.assert_array_equal((x * col).numpy(), np.ones((1000, 7), np.float32) * np.arange(1000, dtype=np.float32)[:, None])
    huge = ug.full((1 << 30, 5), 1.0, device="cpu") + ug.arange(5, dtype=np.float32, device="cpu")
    ir = dev.render(_kernel(huge))     # 5.4e9 elements: indices past 2^31
    assert "urem i64" in ir and "urem i32" not in ir


def test_broadcast_rows_split_the_loop(dev):
    # where an elementwise kernel reads `gid // n` or `gid % n` (a broadcast operand, arange rows and
    # columns) the loop over [start, end) is a loop over rows of n around a loop over the row's
    # elements, which reads the row's operand once and the column's contiguously: no division per
    # element (on the flat loop LLVM vectorized `gid % n` only under a check that the range stays in
    # one row: scalar for any longer range); divisions by multiples of n come from the row index
    from ug_llvm.render import ROW_MIN

    rng = np.random.default_rng(5)
    a = rng.standard_normal((6, 10, 520)).astype(np.float32)
    d = rng.standard_normal((1, 10, 520)).astype(np.float32)    # read at gid % 5200
    r = rng.standard_normal((6, 10, 1)).astype(np.float32)      # read at gid // 520
    want = a * d - r
    t = ug.tensor(a, device="cpu") * ug.tensor(d, device="cpu") - ug.tensor(r, device="cpu")
    kernel = _kernel(t)
    body = dev.render(kernel).split("define void")[0]
    assert "%row.first = udiv i64 %start, 520" in body
    # the one division per element left: gid % 5200 = (row % 10) * 520 + col, in 32 bits
    assert re.search(r"urem i32 %t\d+, 10", body) and not re.search(r"u(div|rem) i(32|64) %t\d+, (520|5200)", body), body
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-6)
    # ranges that start and end inside rows (threads split the global range anywhere)
    program = dev.compile(kernel)
    buffers = [Buffer(dev, arg.size, arg.dtype) for arg in kernel.args]
    by_size = {x.size: x for x in (a, d, r)}
    for buf, arg in zip(buffers, kernel.args):
        if not arg.output:
            buf.copy_in(by_size[arg.size].reshape(-1))
    for threads in (1, 2, 3, 7):
        out = next(b for b, arg in zip(buffers, kernel.args) if arg.output)
        out.copy_in(np.zeros(a.size, np.float32))
        dev.run_threads(program, buffers, threads)
        np.testing.assert_allclose(out.numpy().reshape(want.shape), want, rtol=1e-6)
    # the dask example's chunk generator: sin of arange rows and columns, at an offset
    rows = ug.astype(ug.arange(3000, 3300, device="cpu"), ug.float32)[:, None]
    cols = ug.astype(ug.arange(700, 1700, device="cpu"), ug.float32)[None, :]
    got = ug.sin(rows * 3e-4 + cols * 5e-4)
    assert "%col = phi" in dev.render(_kernel(got))
    nr, nc = np.arange(3000, 3300, dtype=np.float32)[:, None], np.arange(700, 1700, dtype=np.float32)[None, :]
    np.testing.assert_allclose(got.numpy(), np.sin(nr * np.float32(3e-4) + nc * np.float32(5e-4)), rtol=1e-6, atol=1e-6)
    # rows shorter than ROW_MIN keep the flat loop
    short = ug.tensor(np.ones((100, ROW_MIN - 1), np.float32), device="cpu") + ug.arange(ROW_MIN - 1, dtype=np.float32,
                                                                                           device="cpu")
    assert "%col = phi" not in dev.render(_kernel(short))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_matmuls_run_as_a_reduction_kernel(dtype, monkeypatch):
    # up to SMALL_MATMUL_MACS multiply-adds a matmul is an ordinary reduction kernel (no packing):
    # any strides, batches and broadcasts, the same results as numpy
    from ug_llvm.small_matmul import SMALL_MATMUL_MACS

    dev = ug.registry.get("cpu")
    made = []
    real = dev.matmuls.small_launch
    monkeypatch.setattr(dev.matmuls, "small_launch", lambda *args: made.append(1) or real(*args))
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((3, 7, 5)).astype(dtype), rng.standard_normal((5, 6)).astype(dtype)
    cases = [
        (lambda x, y: x @ y, a, b, lambda p, q: p @ q),                            # x @ weight, batched
        (lambda x, y: x[1].T @ x[2], a, b, lambda p, q: p[1].T @ p[2]),          # a transposed view
        (lambda x, y: x[:, ::2] @ y[:, 1:4], a, b, lambda p, q: p[:, ::2] @ q[:, 1:4]),  # strided slices
        (lambda x, y: (x @ y + 1).relu(), a[0], b, lambda p, q: np.maximum(p @ q + 1, 0)),
        (lambda x, y: x @ y[:, 0], a[0], b, lambda p, q: p @ q[:, 0]),            # matrix-vector
    ]
    for build, p, q, want in cases:
        got = build(ug.tensor(p, device="cpu"), ug.tensor(q, device="cpu")).numpy()
        np.testing.assert_allclose(got, want(p, q), rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)
    assert len(made) == len(cases)
    big = rng.standard_normal((32, 32)).astype(dtype)   # 32^3 > SMALL_MATMUL_MACS: the packed gemm
    assert 32 ** 3 > SMALL_MATMUL_MACS
    np.testing.assert_allclose((ug.tensor(big, device="cpu") @ ug.tensor(big, device="cpu")).numpy(), big @ big,
                               rtol=1e-4, atol=1e-4)
    assert len(made) == len(cases)
    f = ug.jit(lambda x, y: x @ y)
    for _ in range(3):
        np.testing.assert_allclose(f(ug.tensor(a, device="cpu"), ug.tensor(b, device="cpu")).numpy(), a @ b,
                                   rtol=1e-5, atol=1e-6)


def test_a_module_names_its_pipeline_level(dev):
    """A tiny kernel's module asks for LLVM's O2 pipeline (device.TINY_PIPELINE), a larger
    one's for none (O3); the compiler runs the level a module names, and the level is part of
    the text, so of the disk cache's key."""
    from ug_llvm.device import TINY_PIPELINE
    from ug_llvm.render_ir import pipeline_mark
    tiny = ug.tensor(np.arange(64, dtype=np.float32), device="cpu")
    big = ug.tensor(np.arange(1 << 16, dtype=np.float32), device="cpu")
    tiny_ir, _ = dev.render_entry(dev.lower(_kernel(tiny.exp() * 2)))
    big_ir, _ = dev.render_entry(dev.lower(_kernel(big.exp() * 2)))
    assert tiny_ir.startswith(pipeline_mark(TINY_PIPELINE)) and not big_ir.startswith("; ug-pipeline")
    compiler = dev.jit.target
    assert [compiler.level_of(pipeline_mark(level) + big_ir) for level in range(4)] == [0, 1, 2, 3]
    assert compiler.level_of(big_ir) == jitmod.OPT_LEVEL
    for level in range(4):   # every level compiles (its pass builder made on first use)
        assert compiler.validate(compiler.compile(pipeline_mark(level) + big_ir, "k")) is None
    with pytest.raises(ValueError, match="0-3"):
        pipeline_mark(4)
    np.testing.assert_allclose((tiny.exp() * 2).numpy(), np.exp(np.arange(64, dtype=np.float32)) * 2, rtol=1e-6)


def test_debug_logs_the_backends_own_modules(tmp_path, monkeypatch, capsys):
    """UG_DEBUG=1: a module the backend compiles itself (gemm, attention, pool) is logged with
    its label and whether it was compiled or read from the disk cache; silent otherwise."""
    monkeypatch.setenv("UG_LLVM_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("UG_LLVM_DISK_CACHE", "1")
    dev = ug.registry.get("cpu")
    x = ug.tensor(np.arange(10, dtype=np.float32), device="cpu")
    ir, name = dev.render_entry(dev.lower(_kernel((x * 4.5 + 0.75).exp())))
    monkeypatch.setenv("UG_DEBUG", "0")
    jitmod.Jit().load(ir, name, "a test module")
    assert "a test module" not in capsys.readouterr().err
    monkeypatch.setenv("UG_DEBUG", "1")
    j = jitmod.Jit()
    j.load(ir, name, "a test module")
    assert re.search(r"loaded from the disk cache a test module on cpu in [\d.]+ ms", capsys.readouterr().err)
    for f in tmp_path.rglob("*.o"):
        f.unlink()
    jitmod.Jit().load(ir, name, "a test module")
    assert re.search(r"^compiled a test module on cpu in [\d.]+ ms", capsys.readouterr().err, re.M)
    j.load(ir, name, "a test module")   # already loaded in this engine: nothing to say
    assert capsys.readouterr().err == ""
