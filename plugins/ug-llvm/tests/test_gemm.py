"""The packed gemm (ug_llvm.gemm): every edge of its blocking against numpy, any strides and
batch layouts, the same bits on any number of threads, and its use by the cpu device."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ug_core as ug
from ug_llvm import settings as llvm_settings
from ug_llvm.gemm import GemmConfig, PackedGemm, Problem
from ug_llvm.jit import get_jit

_POOL = ThreadPoolExecutor(4)


@pytest.fixture(scope="module", params=[np.float32, np.float64], ids=["float32", "float64"])
def gemm(request):
    return PackedGemm(get_jit(), np.dtype(request.param))


def _on_threads(fn, threads, native=None):
    futures = [_POOL.submit(fn, t) for t in range(1, threads)]
    fn(0)
    for f in futures:
        f.result()


def _alloc(nbytes):
    raw = np.empty(nbytes + 64, np.uint8)
    return raw, raw.ctypes.data + (-raw.ctypes.data) % 64


def run_gemm(g: PackedGemm, a: np.ndarray, b: np.ndarray, threads: int = 2) -> np.ndarray:
    """C = a @ b through the packed gemm, reading a and b in place (any strides, numpy batch
    broadcasting)."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    out = np.full(batch + (a.shape[-2], b.shape[-1]), np.nan, dtype=a.dtype)
    item = a.itemsize
    p = Problem.from_views(a.shape, tuple(s // item for s in a.strides), 0, b.shape, tuple(s // item for s in b.strides), 0)
    g.run(p, a.ctypes.data, b.ctypes.data, out.ctypes.data, _alloc, lambda handle: None, _on_threads, threads)
    return out


def _check(got, a, b):
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    k = a.shape[-1]
    if a.dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5 * np.sqrt(k) * 4)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12 * k)


def _rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def test_config_for_this_host(gemm):
    cfg = gemm.cfg
    assert cfg.nr == cfg.nv * cfg.vector and cfg.vector * cfg.itemsize in (16, 32, 64)
    assert cfg.mc_max % cfg.mr == 0 and cfg.kc >= 64


def test_tile_edges(gemm):
    """M, N and K on both sides of the register tile, the panel width and the KC block."""
    cfg = gemm.cfg
    rng = np.random.default_rng(1)
    ms = sorted({1, cfg.mr - 1, cfg.mr, cfg.mr + 1, 2 * cfg.mr + 3})
    ns = sorted({1, cfg.vector - 1, cfg.vector, cfg.nr - 1, cfg.nr, cfg.nr + 1, 3 * cfg.nr + 5})
    ks = sorted({1, 2, cfg.kc - 1, cfg.kc, cfg.kc + 1, 2 * cfg.kc + 7})
    for m in ms:
        for n in ns:
            for k in ks:
                a, b = _rand(rng, (m, k), gemm.cfg.dtype), _rand(rng, (k, n), gemm.cfg.dtype)
                _check(run_gemm(gemm, a, b), a, b)


def test_row_blocks_and_threads(gemm):
    """More rows than one A block (mc_max), split over threads, with ragged ends."""
    rng = np.random.default_rng(2)
    m = 2 * gemm.cfg.mc_max + 5
    a, b = _rand(rng, (m, 70), gemm.cfg.dtype), _rand(rng, (70, 45), gemm.cfg.dtype)
    for threads in (1, 2, 3, 4):
        _check(run_gemm(gemm, a, b, threads), a, b)


def test_threads_give_the_same_bits(gemm):
    rng = np.random.default_rng(3)
    a, b = _rand(rng, (300, 600), gemm.cfg.dtype), _rand(rng, (600, 130), gemm.cfg.dtype)
    one = run_gemm(gemm, a, b, threads=1)
    for threads in (2, 3, 4):
        assert np.array_equal(run_gemm(gemm, a, b, threads), one)


@pytest.mark.parametrize("case", ["aT", "bT", "both_T", "sliced", "negative", "strided_inner", "batch_permuted"])
def test_strided_operands_are_read_in_place(gemm, case):
    rng = np.random.default_rng(4)
    dt = gemm.cfg.dtype
    a, b = _rand(rng, (40, 90), dt), _rand(rng, (90, 50), dt)
    if case == "aT":
        a = np.ascontiguousarray(a.T).T
    elif case == "bT":
        b = np.ascontiguousarray(b.T).T
    elif case == "both_T":
        a, b = np.ascontiguousarray(a.T).T, np.ascontiguousarray(b.T).T
    elif case == "sliced":
        a, b = _rand(rng, (60, 120), dt)[5:45, 7:97], _rand(rng, (100, 80), dt)[3:93, 11:61]
    elif case == "negative":
        a, b = a[::-1], b[:, ::-1]
    elif case == "strided_inner":
        a, b = _rand(rng, (40, 180), dt)[:, ::2], _rand(rng, (270, 150), dt)[::3, ::3]
    elif case == "batch_permuted":
        a = _rand(rng, (40, 3, 90), dt).transpose(1, 0, 2)
        b = _rand(rng, (90, 3, 50), dt).transpose(1, 0, 2)
    _check(run_gemm(gemm, a, b), a, b)


def test_batches_and_broadcast(gemm):
    rng = np.random.default_rng(5)
    dt = gemm.cfg.dtype
    a, b = _rand(rng, (2, 3, 33, 40), dt), _rand(rng, (3, 40, 70), dt)
    _check(run_gemm(gemm, a, b), a, b)            # b broadcast over the first batch dim
    w = _rand(rng, (40, 70), dt)
    _check(run_gemm(gemm, a, w), a, w)            # x @ weight: folded into one tall A
    _check(run_gemm(gemm, a[:, :, ::2], w), a[:, :, ::2], w)   # rows not evenly spaced: no fold
    a1 = _rand(rng, (33, 40), dt)
    _check(run_gemm(gemm, a1, b), a1, b)          # a broadcast over b's batch


def test_x_at_weight_is_folded_into_one_problem():
    a = np.zeros((4, 5, 6, 7), np.float32)
    p = Problem.from_views(a.shape, tuple(s // 4 for s in a.strides), 0, (4, 5, 7, 3), (0, 0, 3, 1), 0)
    assert (p.m, p.batch) == (4 * 5 * 6, 1)
    q = Problem.from_views((4, 5, 6, 7), (0, 42, 7, 1), 0, (4, 5, 7, 3), (0, 0, 3, 1), 0)
    assert q.batch == 20  # a broadcast over the batch: rows repeat, no fold


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_many_batch_entries_with_their_own_b_run_batch_by_batch(gemm, threads):
    """Many batch entries, each with its own B: the threads take whole entries and pack each
    one's B into a slot of their own just before its row blocks (module._batch_by_batch); a B
    broadcast over the batch, or few entries, keep packing every entry's B first."""
    from ug_llvm.gemm.config import FIELD
    rng = np.random.default_rng(21)
    dt = gemm.cfg.dtype
    for batch, m, k, n in [(4 * threads, 19, 70, 45), (13, 2 * gemm.cfg.mr + 1, gemm.cfg.kc + 9, gemm.cfg.nr + 3)]:
        a, b = _rand(rng, (batch, m, k), dt), _rand(rng, (batch, k, n), dt)
        _check(run_gemm(gemm, a, b, threads), a, b)
        p = Problem.from_views(a.shape, tuple(s // a.itemsize for s in a.strides), 0,
                               b.shape, tuple(s // b.itemsize for s in b.strides), 0)
        assert gemm._setup(p, threads).ctx[FIELD["b_local"]] == 1
        bt = np.ascontiguousarray(b.transpose(0, 2, 1)).transpose(0, 2, 1)   # B's columns contiguous
        _check(run_gemm(gemm, a, bt, threads), a, bt)
    shared = Problem.from_views((12, 5, 7), (35, 7, 1), 0, (12, 7, 3), (0, 3, 1), 0)
    few = Problem.from_views((2, 5, 7), (35, 7, 1), 0, (2, 7, 3), (21, 3, 1), 0)
    assert gemm._setup(shared, 1).ctx[FIELD["b_local"]] == 0 and gemm._setup(few, 1).ctx[FIELD["b_local"]] == 0


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 50), n=st.integers(1, 70), k=st.integers(1, 300), batch=st.integers(1, 13),
       ta=st.booleans(), tb=st.booleans(), threads=st.integers(1, 3), f64=st.booleans())
def test_random_problems_match_numpy(m, n, k, batch, ta, tb, threads, f64):
    g = _gemms[np.dtype(np.float64 if f64 else np.float32)]
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    dt = g.cfg.dtype
    a = _rand(rng, (batch, k, m), dt).transpose(0, 2, 1) if ta else _rand(rng, (batch, m, k), dt)
    b = _rand(rng, (batch, n, k), dt).transpose(0, 2, 1) if tb else _rand(rng, (batch, k, n), dt)
    _check(run_gemm(g, a, b, threads), a, b)


class _Gemms(dict):
    def __missing__(self, dtype):
        self[dtype] = PackedGemm(get_jit(), dtype)
        return self[dtype]


_gemms = _Gemms()


# --- through the cpu device --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_device_matmul_uses_the_packed_gemm(dtype, monkeypatch):
    dev = ug.registry.get("cpu")
    rng = np.random.default_rng(6)
    a, w = _rand(rng, (2, 70, 96), dtype), _rand(rng, (80, 96), dtype)
    x, W = ug.tensor(a, device="cpu"), ug.tensor(w, device="cpu")
    calls = []
    original = dev.matmuls.packed_gemm
    monkeypatch.setattr(dev.matmuls, "packed_gemm", lambda *args: (calls.append(1), original(*args)))
    got = (x @ W.T).numpy()
    assert calls, "a 70x96 @ 96x80 matmul should run on the packed gemm"
    _check(got, a, w.T)
    got2 = (x.permute(0, 2, 1)[:, :50] @ x[:, :, :40]).numpy()
    _check(got2, a.transpose(0, 2, 1)[:, :50], a[:, :, :40])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_narrow_products_use_the_narrow_tile(dtype):
    """A product at most 2 vectors wide runs on a gemm whose tile is 2 vectors wide (and taller)
    where the host's is wider; a wider one on a tile no wider than it needs. All match numpy."""
    from ug_llvm.matmul import NARROW_NV, _tile_for
    host = GemmConfig.for_host(np.dtype(dtype), get_jit().features)
    rng = np.random.default_rng(12)
    narrow_n = NARROW_NV * host.vector
    for n in (narrow_n - 3, narrow_n, narrow_n + 1):
        a, b = _rand(rng, (3, 77, 130), dtype), _rand(rng, (3, n, 130), dtype)
        got = (ug.tensor(a, device="cpu") @ ug.tensor(b, device="cpu").mT).numpy()
        _check(got, a, b.transpose(0, 2, 1))
        used = _tile_for(host, n)
        if host.nv > NARROW_NV and n <= narrow_n:
            assert (used.nv, used.mr) == (NARROW_NV, host.mr * host.nv // NARROW_NV)
        else:
            assert (used.nv, used.mr) == (min(host.nv, -(-n // host.vector)), host.mr)


def test_numpy_matmul_can_be_chosen(monkeypatch):
    rng = np.random.default_rng(7)
    a, b = _rand(rng, (64, 48), np.float32), _rand(rng, (48, 40), np.float32)
    monkeypatch.setattr(llvm_settings, "MATMUL_IMPL", "numpy")
    dev = ug.registry.get("cpu")
    monkeypatch.setattr(dev.matmuls, "packed_gemm", lambda *args: pytest.fail("UG_LLVM_MATMUL=numpy must not use the packed gemm"))
    got = (ug.tensor(a, device="cpu") @ ug.tensor(b, device="cpu")).numpy()
    _check(got, a, b)


def test_empty_and_k_zero_through_the_device():
    z = ug.tensor(np.ones((40, 0), np.float32), device="cpu") @ ug.tensor(np.ones((0, 30), np.float32), device="cpu")
    assert np.array_equal(z.numpy(), np.zeros((40, 30), np.float32))
    e = ug.tensor(np.ones((0, 16), np.float32), device="cpu") @ ug.tensor(np.ones((16, 30), np.float32), device="cpu")
    assert e.numpy().shape == (0, 30)


def test_config_tiles_follow_the_vector_registers():
    assert GemmConfig.for_host(np.float32, "+avx512f,+avx2,+avx").mr == 6
    assert GemmConfig.for_host(np.float32, "+avx512f,+avx2,+avx").nr == 64
    assert GemmConfig.for_host(np.float64, "+avx2,+avx,-avx512f").nr == 8
    assert GemmConfig.for_host(np.float32, "+neon").nr == 8


@pytest.mark.parametrize("vector,mr,nv", [(8, 6, 2), (4, 6, 2), (4, 3, 3), (16, 12, 2), (16, 8, 3), (16, 6, 1)],
                         ids=["avx2-like", "sse-like", "3-vectors", "avx512-12x2", "avx512-8x3", "avx512-narrow"])
def test_other_tile_shapes(vector, mr, nv):
    """The tiles other hosts get (AVX2, 128-bit vectors), run here: same IR generator."""
    rng = np.random.default_rng(8)
    for dt in (np.float32, np.float64):
        v = vector if dt == np.float32 else max(2, vector // 2)
        g = PackedGemm(get_jit(), np.dtype(dt), GemmConfig(np.dtype(dt), v, mr, kc=64, mc_max=4 * mr, nv=nv))
        for m, n, k in [(1, 1, 1), (mr + 1, nv * v + 1, 65), (37, 23, 130), (5 * mr, 3 * nv * v, 64)]:
            a, b = _rand(rng, (m, k), dt), _rand(rng, (k, n), dt)
            _check(run_gemm(g, a, b, threads=2), a, b)
            bt = np.ascontiguousarray(b.T).T
            _check(run_gemm(g, a, bt, threads=3), a, bt)


def test_the_tile_that_pads_the_rows_and_columns_least():
    """Given the rows per batch entry, the tile of as many accumulators that pads M and N least
    (the host's on a tie): T2's convolutions (32 or 144 rows by 624 positions) get 8 x 3 vectors,
    a 256 x 512 layer keeps 6 x 4, 32 columns keep the narrow 12 x 2."""
    from ug_llvm.matmul import _tile_for
    cfg = GemmConfig.for_host(np.float32, "+avx512f,+avx2,+avx")
    assert [(t.mr, t.nv) for t in (_tile_for(cfg, 624, 32), _tile_for(cfg, 624, 144))] == [(8, 3), (8, 3)]
    assert _tile_for(cfg, 512, 256) is cfg and _tile_for(cfg, 512, 784) is cfg
    assert (_tile_for(cfg, 32, 144).mr, _tile_for(cfg, 32, 144).nv) == (12, 2)
    assert _tile_for(cfg, 10, 256).nv == 1


def test_narrow_products_get_a_narrower_tile():
    # a tile no wider (in vectors) than N: (256, 512) @ (512, 10) does not compute 64 columns
    from ug_llvm.matmul import _tile_for
    cfg = GemmConfig.for_host(np.float32, "+avx512f,+avx2,+avx")
    assert [_tile_for(cfg, n).nr for n in (1, 10, 16, 17, 32, 40, 64, 1000)] == [16, 16, 16, 32, 32, 48, 64, 64]
    assert _tile_for(cfg, 1000) is cfg
    rng = np.random.default_rng(11)
    for n in (10, 17, 40):
        a, b = _rand(rng, (70, 130), np.float32), _rand(rng, (130, n), np.float32)
        for bb in (b, np.ascontiguousarray(b.T).T):
            got = ug.tensor(a, device="cpu") @ ug.tensor(bb, device="cpu")
            _check(got.numpy(), a, bb)


def test_float16_operands_are_widened_while_packing():
    rng = np.random.default_rng(9)
    g = PackedGemm(get_jit(), np.dtype(np.float32), source=np.dtype(np.float16))
    for m, n, k in [(1, 1, 1), (7, 70, 33), (50, 130, 600)]:
        a, b = _rand(rng, (m, k), np.float16), _rand(rng, (k, n), np.float16)
        for bb in (b, np.ascontiguousarray(b.T).T):
            out = np.empty((m, n), np.float32)
            p = Problem.from_views(a.shape, (k, 1), 0, bb.shape, tuple(s // 2 for s in bb.strides), 0)
            g.run(p, a.ctypes.data, bb.ctypes.data, out.ctypes.data, _alloc, lambda h: None, _on_threads, 2)
            want = a.astype(np.float64) @ b.astype(np.float64)
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.sqrt(k))


def test_float16_matmul_through_the_device():
    rng = np.random.default_rng(10)
    a, b = _rand(rng, (3, 40, 64), np.float16), _rand(rng, (64, 48), np.float16)
    got = ug.tensor(a, device="cpu") @ ug.tensor(b, device="cpu")
    assert got.dtype == np.float16
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    np.testing.assert_allclose(got.numpy().astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


def test_units_are_shared_dynamically(gemm):
    """Threads take row blocks from a shared counter: if only one of them ever runs (a core
    busy elsewhere), it does all the work, and the result is the same."""
    rng = np.random.default_rng(11)
    a, b = _rand(rng, (500, 300), gemm.cfg.dtype), _rand(rng, (300, 70), gemm.cfg.dtype)
    p = Problem.from_views(a.shape, (300, 1), 0, b.shape, (70, 1), 0)
    starts = gemm.plan(p, 4)
    sizes = np.diff(starts)
    assert len(sizes) >= 4 * 2 and starts[0] == 0 and starts[-1] == 500   # several blocks per thread to share out
    assert all(s % gemm.cfg.mr == 0 for s in starts[:-1]) and (sizes > 0).all()
    assert sizes[0] > sizes[-1]   # guided: the last blocks are the small ones
    out = np.full((500, 70), np.nan, gemm.cfg.dtype)
    ran = []
    gemm.run(p, a.ctypes.data, b.ctypes.data, out.ctypes.data, _alloc, lambda h: None,
             lambda fn, threads, native=None: (ran.append(threads), fn(0)), 4)
    assert ran == [4]   # one hand-off to the threads per product (packing and gemm)
    _check(out, a, b)


@pytest.mark.parametrize("shape", [(500, 300, 70), (64, 1100, 200), (37, 20, 5)])
def test_a_late_thread_finds_the_work_done(gemm, shape):
    """Thread 0 returns only once every unit is done, whoever took it; a thread that starts
    after that (a pool thread slow to wake) finds nothing to do and touches no workspace, so
    the caller need not wait for it."""
    m, k, n = shape
    rng = np.random.default_rng(12)
    a, b = _rand(rng, (m, k), gemm.cfg.dtype), _rand(rng, (k, n), gemm.cfg.dtype)
    bt = np.ascontiguousarray(b.T).T
    for bb in (b, bt):
        p = Problem.from_views(a.shape, (k, 1), 0, bb.shape, tuple(s // bb.itemsize for s in bb.strides), 0)
        out = np.full((m, n), np.nan, gemm.cfg.dtype)
        workspaces = []

        def alloc(nbytes):
            raw, ptr = _alloc(nbytes)
            workspaces.append(raw)
            return raw, ptr

        def late_threads(fn, threads, native=None):
            fn(0)
            done = out.copy()
            for raw in workspaces:
                raw[...] = 0xFF   # NaNs everywhere: a late thread reading them would spoil out
            for t in range(1, threads):
                fn(t)
            np.testing.assert_array_equal(out, done)

        gemm.run(p, a.ctypes.data, bb.ctypes.data, out.ctypes.data, alloc, lambda h: None, late_threads, 3)
        _check(out, a, b)


@pytest.mark.parametrize("m,threads,batch", [(1024, 2, 1), (2048, 2, 1), (500, 4, 1), (7, 2, 1), (96, 2, 3), (300, 2, 8), (1000, 1, 1)])
def test_row_block_plans(gemm, m, threads, batch):
    """Plans cover the rows once, in MR multiples, within the A workspace (mc_max rows); with
    threads and few batch entries they shrink towards the end, so the last block a thread may
    wait for is small."""
    p = Problem.from_views((batch, m, 64), (m * 64, 64, 1), 0, (batch, 64, 64), (4096, 64, 1), 0)
    starts = list(gemm.plan(p, threads))
    sizes = np.diff(starts)
    mr = gemm.cfg.mr
    assert starts[0] == 0 and starts[-1] == m and (sizes > 0).all() and (sizes <= gemm.cfg.mc_max).all()
    assert all(s % mr == 0 for s in starts[:-1])
    if threads > 1 and batch < 4 * threads and m >= 64 * mr:
        assert sizes[-1] <= 2 * mr < sizes[0] and list(sizes) == sorted(sizes, reverse=True)
    if threads == 1:
        assert max(sizes) - min(sizes) < 2 * mr   # even blocks (the last may end in a partial panel)


@pytest.mark.parametrize("m,k,n", [(1024, 1024, 1024), (2048, 2048, 2048), (300, 1024, 512)])
def test_row_block_plans_of_a_big_b(gemm, m, k, n):
    """Where the packed B is too big to stay in L2, each row block reads it again from L3 or
    memory: a guided plan's blocks stop shrinking at BIG_B_MIN_BLOCK_PANELS panels (the last
    may be shorter: what is left), where a small B's go down to MIN_BLOCK_PANELS."""
    from ug_llvm.gemm.driver import BIG_B_BYTES, BIG_B_MIN_BLOCK_PANELS, MIN_BLOCK_PANELS
    cfg = gemm.cfg
    p = Problem.from_views((m, k), (k, 1), 0, (k, n), (n, 1), 0)
    assert k * -(-n // cfg.nr) * cfg.nr * cfg.itemsize >= BIG_B_BYTES
    starts = list(gemm.plan(p, 2))
    sizes = np.diff(starts)
    assert starts[0] == 0 and starts[-1] == m and (sizes > 0).all()
    assert all(s % cfg.mr == 0 for s in starts[:-1])
    assert (sizes[:-1] >= BIG_B_MIN_BLOCK_PANELS * cfg.mr).all() and list(sizes) == sorted(sizes, reverse=True)
    small = Problem.from_views((m, 64), (64, 1), 0, (64, 64), (64, 1), 0)
    assert np.diff(gemm.plan(small, 2))[-1] <= MIN_BLOCK_PANELS * cfg.mr < BIG_B_MIN_BLOCK_PANELS * cfg.mr


def _conv_windows(img, kh, kw):
    """The im2col rows of a stride-1 convolution read in place, the output computed over whole
    image rows (positions y * W + x, x < W: the last kw - 1 of each row are past the image's edge,
    read from the next row; the image has a spare row below for the last ones): img (N, C, H, W)
    -> a view (N, C, kh, kw, OH * W) with OH = H - 1 - kh + 1, and its element strides."""
    n, c, h, w = img.shape
    oh = h - 1 - kh + 1
    item = img.itemsize
    strides = (c * h * w, h * w, w, 1, 1)
    view = np.lib.stride_tricks.as_strided(img, (n, c, kh, kw, oh * w), tuple(s * item for s in strides))
    return view, strides


@pytest.mark.parametrize("threads", [1, 2])
def test_split_operands_read_rows_from_a_table(gemm, threads):
    """A split operand (Problem's a_rows / b_rows): rows that are a flattening of dims no one
    stride walks, read in place at the offsets of a row table. B split over its K rows (a
    convolution: weight @ im2col rows, the windows of the image read in place), and A split over
    its M rows (the weight's gradient: im2col rows @ gradient^T), against numpy on a copy; K and
    M cross the register tile and the KC block, batches broadcast the unsplit operand."""
    rng = np.random.default_rng(5)
    dt = gemm.cfg.dtype
    for n, c, h, w, o in [(3, 4, 7, 9, 5), (2, 70, 5, 6, 3), (1, 2, 4, 70, 13), (9, 3, 6, 8, 4)]:
        img = _rand(rng, (n, c, h + 1, w), dt)
        kh = kw = 3
        view, strides = _conv_windows(img, kh, kw)
        taps, pos = c * kh * kw, view.shape[-1]
        cols = np.ascontiguousarray(view).reshape(n, taps, pos)
        weight = _rand(rng, (o, taps), dt)
        # B split: (N, O, taps) @ (N, [C, kh, kw], P)
        p = Problem.from_views((n, o, taps), (0, taps, 1), 0, view.shape, strides, 0, b_split=3)
        out = np.full((n, o, pos), np.nan, dt)
        gemm.run(p, weight.ctypes.data, img.ctypes.data, out.ctypes.data, _alloc, lambda h: None, _on_threads, threads)
        _check(out, np.broadcast_to(weight, (n, o, taps)), cols)
        # A split: (N, [C, kh, kw], P) @ (N, P, O), the gradient read transposed
        g = _rand(rng, (n, o, pos), dt)
        p = Problem.from_views(view.shape, strides, 0, (n, pos, o), (o * pos, 1, pos), 0, a_split=3)
        out = np.full((n, taps, o), np.nan, dt)
        gemm.run(p, img.ctypes.data, g.ctypes.data, out.ctypes.data, _alloc, lambda h: None, _on_threads, threads)
        _check(out, cols, g.transpose(0, 2, 1))
        assert p.a_rows is not None and p.b_rows is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_product_runs_once_on_a_compiled_tile_then_on_its_own(dtype):
    """Where its own tile is not compiled but another of its dtype is, a product's first run
    uses that one (no compile), its second run compiles and uses its own: the same bits
    either way (the tile decides which elements share registers, not the order of any sum),
    on one thread and on two, with a fused epilogue too."""
    from ug_core.specs import MatmulSpec
    from ug_core.view import View, contiguous_strides
    from ug_llvm.matmul import GEMM_PARALLEL_MIN_MNK, HostMatmul, _tile_for
    dev = ug.registry.get("cpu")
    host = GemmConfig.for_host(np.dtype(dtype), get_jit().features)
    rng = np.random.default_rng(21)
    mm = HostMatmul(dev)   # (a fresh one: no tile compiled, none used)
    compiled = []
    real_gemm = mm._gemm

    def gemm(cfg):
        if cfg not in mm._gemms:
            compiled.append(cfg)
        return real_gemm(cfg)
    mm._gemm = gemm

    def product(m, n, k):
        a, b = _rand(rng, (m, k), dtype), _rand(rng, (k, n), dtype)
        spec = MatmulSpec(View((m, k), contiguous_strides((m, k))), View((k, n), contiguous_strides((k, n))), (m, n),
                          np.dtype(dtype))
        bufs = [ug.Buffer(dev, x.size, np.dtype(dtype)) for x in (np.empty((m, n)), a, b)]
        bufs[1].copy_in(a.reshape(-1))
        bufs[2].copy_in(b.reshape(-1))

        def run():
            mm.run(bufs[0], bufs[1], bufs[2], spec)
            return bufs[0].numpy().reshape(m, n).copy()
        return a, b, run, spec

    a, b, run, _ = product(64, 3 * host.nr, 50)
    _check(run(), a, b)
    first = list(compiled)
    assert first == [_tile_for(host, 3 * host.nr, 64)]
    stood_in = 0
    for m, n, k in [(200, 10, 300), (33, host.nr // 2 + 1, 70), (5 * host.mr + 1, 24, 600)]:
        if m * n * k >= GEMM_PARALLEL_MIN_MNK:
            continue
        want = _tile_for(host, n, m)
        a, b, run, spec = product(m, n, k)
        once = run()
        _check(once, a, b)
        if want in mm._gemms:
            continue
        assert compiled == first and mm._gemm_plans[id(spec)][4] == want   # ran on a stand-in
        twice = run()
        assert compiled[-1] == want and mm._gemm_plans[id(spec)][4] is None
        assert once.tobytes() == twice.tobytes()
        first = list(compiled)
        stood_in += 1
    assert stood_in >= 1
    big = 160
    a, b, run, spec = product(big * 2, 20, GEMM_PARALLEL_MIN_MNK // (big * 2 * 20) + 1)   # on the threads
    once, twice = run(), run()
    _check(once, a, b)
    assert once.tobytes() == twice.tobytes()
