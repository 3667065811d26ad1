"""Compile checks that need no GPU and no driver: kernels -> CUDA C -> NVRTC (sm_80, sm_90).

Kernels checked:
* every kernel the core suite scheduled or GPU-lowered in this pytest process (recorded by
  kernel_recorder, installed from conftest.py; `scripts/test.sh` runs the core suite and the
  plugin tests in one process). When this file runs alone, the core suite is run once on the
  `ref` device in a subprocess to record them (UG_CUDA_RECORD_CORE=0 skips that);
* a synthetic matrix: every ALU op on every dtype, every cast pair, every reduction on every
  dtype (serial and workgroup strategies), special constants.

Kernels whose CUDA C differs only in integer/float literals (sizes, strides, constants; not
`__shared__` sizes) and value names are compiled once: a compile error does
not depend on them. They are compiled in batches, one NVRTC program per batch, with ptxas at
-O0 (the PTX is still fully assembled and checked); the synthetic matrix is also compiled
with full optimization.
"""
from __future__ import annotations

import itertools
import os
import pickle
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ug_core.dtypes import SUPPORTED
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Reduction, Store
from ug_core.loop_ir import LoopProgram
from ug_core.ops import ALU, REDUCE, TRANSCENDENTAL, Op
from ug_core.view import View

import kernel_recorder
from ug_cuda import nvrtc
from ug_cuda.compiler import Config, compile_many, render_kernel
from ug_cuda.render import render_function

try:
    nvrtc.version()
    HAVE_NVRTC = True
except Exception as e:  # pragma: no cover
    HAVE_NVRTC = False
    NVRTC_ERROR = str(e)

pytestmark = pytest.mark.skipif(not HAVE_NVRTC, reason="NVRTC not available")

ARCHS = ("sm_80", "sm_90")
BATCH = 100
FAST = ("-Xptxas", "-O0")
CORE_TESTS = Path(__file__).resolve().parents[3] / "tests"
MIN_RECORDED = 100  # fewer recorded kernels than this: the core suite did not run in this process


def c(shape):
    return View.contiguous(tuple(shape))


def _elementwise(name: str, in_dtypes: list[np.dtype], build, out_dtype: np.dtype, n: int = 37) -> Kernel:
    eb = ExprBuilder()
    loads = [eb.load(i + 1, (c((n,)),), dt) for i, dt in enumerate(in_dtypes)]
    args = (BufferArg(out_dtype, n, True),) + tuple(BufferArg(dt, n, False) for dt in in_dtypes)
    return Kernel(name, args, (n,), (), (), (Store(0, (n,), c((n,)), build(eb, loads)),))


def synthetic_kernels() -> list[Kernel]:
    kernels = []
    BOOL = np.dtype(bool)
    for dt, op in itertools.product(SUPPORTED, ALU):
        info = ALU[op]
        if op is Op.WHERE:
            ins = [BOOL, dt, dt]
        else:
            ins = [dt] * info.arity
        out = BOOL if info.returns_bool else dt
        kernels.append(_elementwise(f"alu_{op.name}_{dt.name}", ins,
                                    lambda eb, xs, op=op, out=out: eb.alu(op, tuple(xs), out), out))
    for src, dst in itertools.product(SUPPORTED, SUPPORTED):
        if src != dst:
            kernels.append(_elementwise(f"cast_{src.name}_{dst.name}", [src],
                                        lambda eb, xs, dst=dst: eb.cast(xs[0], dst), dst))
    specials = {np.dtype(np.float16): [np.inf, -np.inf, np.nan, -0.0, 65504.0, 1e-7],
                np.dtype(np.float32): [np.inf, -np.inf, np.nan, -0.0, 3.4e38, 1e-45, 0.1],
                np.dtype(np.float64): [np.inf, -np.inf, np.nan, -0.0, 1.7e308, 5e-324, 0.1],
                np.dtype(np.int32): [-2**31, 2**31 - 1, 0], np.dtype(np.int64): [-2**63, 2**63 - 1, 0],
                BOOL: [True, False]}
    for dt, values in specials.items():
        def build(eb, xs, dt=dt, values=values):
            acc = xs[0]
            for v in values:
                acc = eb.alu(Op.MAX, (acc, eb.const(v, dt)), dt)
            return acc
        kernels.append(_elementwise(f"const_{dt.name}", [dt], build, dt))
    for dt, op in itertools.product(SUPPORTED, REDUCE):
        for rows, n in ((3, 5), (4, 1000), (1, 70000)):  # serial, workgroup, one long row
            eb = ExprBuilder()
            x = eb.load(1, (c((rows, n)),), dt)
            k = Kernel(f"red_{op.name}_{dt.name}_{n}", (BufferArg(dt, rows, True), BufferArg(dt, rows * n, False)),
                       (rows, 1), (1,), (Reduction(op, (rows, n), x, dt),),
                       (Store(0, (rows, 1), c((rows, 1)), eb.acc(0, dt)),))
            kernels.append(k)
        # column reduction
        eb = ExprBuilder()
        x = eb.load(1, (c((300, 7)),), dt)
        kernels.append(Kernel(f"colred_{op.name}_{dt.name}", (BufferArg(dt, 7, True), BufferArg(dt, 2100, False)),
                              (1, 7), (0,), (Reduction(op, (300, 7), x, dt),),
                              (Store(0, (1, 7), c((1, 7)), eb.acc(0, dt)),)))
    for dt in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        for op in TRANSCENDENTAL:
            kernels.append(_elementwise(f"tr_{op.name}_{dt.name}", [dt],
                                        lambda eb, xs, op=op, dt=dt: eb.alu(op, (xs[0],), dt), dt))
    return kernels


def _record_core_suite() -> None:
    """Run the core suite once on ref in a subprocess, recording its kernels."""
    if os.environ.get("UG_CUDA_RECORD_CORE", "1") == "0" or not CORE_TESTS.is_dir():
        return
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"ug_cuda_kernels_{os.getpid()}.pkl"
    env = dict(os.environ, UG_TEST_DEVICES="ref", UG_CUDA_RECORD_OUT=str(out),
               PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "kernel_recorder", "-p", "no:cacheprovider",
                    "-x", "--no-header", str(CORE_TESTS)], env=env, cwd=CORE_TESTS.parent,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1200)
    if out.exists():
        kernels, lowerings = pickle.loads(out.read_bytes())
        out.unlink()
        for k in kernels:
            kernel_recorder.KERNELS.setdefault(k.key(), k)
        for k, opts in lowerings:
            kernel_recorder.GPU_LOWERINGS.setdefault((k.key(), opts), (k, opts))


_LITERAL = re.compile(r"0x[0-9a-fA-F.]+(p[+-]?\d+)?f?|\b\d+(LL|u)?\b")
_NAME = re.compile(r"\b(v|acc|smem)\d+\b")


def canonical(function: str) -> str:
    """The function with literals and value names abstracted (shared-memory sizes kept)."""
    names: dict[str, str] = {}
    lines = []
    for line in function.splitlines():
        if "__shared__" not in line:
            line = _LITERAL.sub("N", line)
        lines.append(_NAME.sub(lambda m: names.setdefault(m.group(0), f"x{len(names)}"), line))
    return "\n".join(lines)


_PROGRAMS: list[LoopProgram] | None = None
STATS: dict[str, float] = {}


def programs() -> list[LoopProgram]:
    """Distinct GPU programs to compile (deduplicated by rendered source)."""
    global _PROGRAMS
    if _PROGRAMS is not None:
        return _PROGRAMS
    from ug_core.lower import lower as original_lower  # may be the recorder's wrapper: fine
    if len(kernel_recorder.KERNELS) < MIN_RECORDED:
        _record_core_suite()
    config = Config()
    candidates: list[LoopProgram] = []
    for k in list(kernel_recorder.KERNELS.values()) + synthetic_kernels():
        candidates.append(render_kernel(k, config).program)
    for k, opts in list(kernel_recorder.GPU_LOWERINGS.values()):
        if opts.local_size <= 1024:
            candidates.append(original_lower(k, opts))
    seen: dict[str, LoopProgram] = {}
    for p in candidates:
        seen.setdefault(canonical(render_function(p, "k", config.render_options())), p)
    _PROGRAMS = list(seen.values())
    STATS["recorded_kernels"] = len(kernel_recorder.KERNELS)
    STATS["recorded_lowerings"] = len(kernel_recorder.GPU_LOWERINGS)
    STATS["distinct"] = len(_PROGRAMS)
    return _PROGRAMS


@pytest.mark.parametrize("arch", ARCHS)
def test_nvrtc_compiles_every_kernel(arch):
    progs = programs()
    assert len(progs) > 100, len(progs)
    start = time.perf_counter()
    for i in range(0, len(progs), BATCH):
        compile_many(progs[i:i + BATCH], arch, options=FAST)  # raises CompileError naming the kernel, with source
    STATS[arch] = time.perf_counter() - start
    print(f"\nug-cuda: {len(progs)} distinct kernels compiled for {arch} in {STATS[arch]:.1f}s "
          f"(recorded {STATS['recorded_kernels']:.0f} scheduled kernels, {STATS['recorded_lowerings']:.0f} gpu lowerings)")


@pytest.mark.parametrize("arch", ARCHS)
def test_synthetic_matrix_compiles_optimized(arch):
    config = Config()
    progs = [render_kernel(k, config).program for k in synthetic_kernels()]
    for i in range(0, len(progs), BATCH):
        compile_many(progs[i:i + BATCH], arch)


def test_fast_math_and_no_restrict_variants_compile():
    from ug_cuda.compiler import compile_only
    for k in synthetic_kernels()[::7]:
        compile_only(k, "sm_90", Config(fast_math=True, restrict=False))


def test_compile_error_carries_log_and_source():
    from ug_core import CompileError
    with pytest.raises(CompileError) as e:
        nvrtc.compile_source('extern "C" __global__ void k() { undefined_thing(); }', "sm_80", use_cache=False)
    assert "undefined_thing" in str(e.value) and "generated source" in str(e.value)
    assert "undefined_thing" in e.value.source


def test_ptx_for_virtual_arch():
    k = synthetic_kernels()[0]
    from ug_cuda import compile_only
    ptx = compile_only(k, "compute_80")
    assert b".visible .entry" in ptx


def test_target_for_picks_cubin_or_ptx():
    archs = nvrtc.supported_archs()
    assert nvrtc.target_for(8, 0) == "sm_80"
    newest = max(archs)
    assert nvrtc.target_for(newest // 10 + 5, 0) == f"compute_{newest}"  # a future GPU: PTX, JIT by the driver


def test_disk_cache_roundtrip_and_corruption(tmp_path, monkeypatch):
    monkeypatch.setenv("UG_CUDA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("UG_CUDA_DISK_CACHE", "1")
    src = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] = 1.0f; }'
    first = nvrtc.compile_source(src, "sm_80")
    entries = list(tmp_path.glob("*.bin"))
    assert len(entries) == 1 and first.log is not None
    again = nvrtc.compile_source(src, "sm_80")
    assert again.image == first.image and again.log == ""  # from the cache
    entries[0].write_bytes(entries[0].read_bytes()[:-10])    # truncate: corrupt
    fixed = nvrtc.compile_source(src, "sm_80")
    assert fixed.image == first.image
    assert nvrtc._cache_read(nvrtc.cache_key(src, "sm_80", ())) == first.image  # rewritten
    monkeypatch.setenv("UG_CUDA_DISK_CACHE", "0")
    for f in tmp_path.glob("*.bin"):
        f.unlink()
    nvrtc.compile_source(src, "sm_80")
    assert not list(tmp_path.glob("*.bin"))


@pytest.mark.parametrize("arch", ARCHS)
def test_matmul_kernels_compile(arch):
    from ug_cuda.matmul import kernel_source
    for dt in SUPPORTED:
        src, name = kernel_source(dt)
        image = nvrtc.compile_source(src, arch, use_cache=False).image
        assert image


@pytest.mark.parametrize("arch", ["sm_80", "compute_80"])
def test_disk_cache_checks_the_image_before_the_driver_sees_it(tmp_path, monkeypatch, arch):
    # an entry with a valid checksum but a malformed cubin / PTX, or another user's / a
    # group-writable one, is compiled again (and rewritten), never handed to the driver
    import hashlib
    import stat
    import struct

    monkeypatch.setenv("UG_CUDA_CACHE_DIR", str(tmp_path / "cuda"))
    monkeypatch.setenv("UG_CUDA_DISK_CACHE", "1")
    src = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] = 2.0f; }'
    first = nvrtc.compile_source(src, arch)
    assert stat.S_IMODE((tmp_path / "cuda").stat().st_mode) == 0o700
    (entry,) = (tmp_path / "cuda").glob("*.bin")
    image = first.image
    bad = (image[:18] + struct.pack("<H", 62) + image[20:]) if first.kind == "cubin" else image[:-1]  # x86 / no NUL
    entry.write_bytes(nvrtc._MAGIC + hashlib.sha256(bad).digest() + bad)
    assert nvrtc._cache_read(nvrtc.cache_key(src, arch, ())) is None and not entry.exists()
    assert nvrtc.compile_source(src, arch).image == image
    os.chmod(entry, 0o666)
    assert nvrtc._cache_read(nvrtc.cache_key(src, arch, ())) is None
    os.chmod(entry, 0o600)
    assert nvrtc._cache_read(nvrtc.cache_key(src, arch, ())) == image
