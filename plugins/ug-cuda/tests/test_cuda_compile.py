"""Compile checks that need no GPU and no driver: kernels -> CUDA C -> NVRTC (sm_80, sm_90).

Kernels checked:
* every kernel the core suite scheduled or GPU-lowered in this pytest process (recorded by
  kernel_recorder, installed from conftest.py; `scripts/test.sh` runs the conformance kit, the
  core tests and the plugin tests in one process). When this file runs alone, the conformance
  kit and tests/ are run once on the `ref` device in a subprocess to record them
  (UG_CUDA_RECORD_CORE=0 skips that);
* a synthetic matrix: every ALU op on every dtype it is defined on, every cast pair, every
  reduction on every dtype (serial and workgroup strategies), special constants.

Kernels whose CUDA C differs only in integer/float literals (sizes, strides, constants; not
`__shared__` sizes) and value names are compiled once: a compile error does
not depend on them. They are compiled in batches, one NVRTC program per batch, with ptxas at
-O0 (the PTX is still fully assembled and checked); the synthetic matrix is also compiled
with full optimization.
"""
from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ug_core.device import CompileError, RenderError
from ug_core.specs import SortSpec
from ug_core.legalize import legalize
from ug_core.dtypes import SUPPORTED
from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Reduction, Store
from ug_core.kit import CachedCompiler, gpusort
from ug_core.loop_ir import LoopProgram
from ug_core.ops import ALU, REDUCE, TRANSCENDENTAL, Op, alu_result
from ug_core.view import View

import kernel_recorder
from ug_cuda import nvrtc
from ug_cuda.compiler import CAPABILITIES, Config, compile_many, compile_only, render_kernel
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
REPO = Path(__file__).resolve().parents[3]
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
        out = alu_result(op, dt)
        if out is None:  # (legalization rejects it, as the frontend never builds it)
            continue
        info = ALU[op]
        if op is Op.WHERE:
            ins = [BOOL, dt, dt]
        else:
            ins = [dt] * info.arity
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
        if dt.kind == "c" and op is not Op.SUM:   # (not componentwise: the frontend builds complex products)
            continue
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
    """Run the core suite (the conformance kit and tests/, as scripts/test.sh does) once on ref
    in a subprocess, recording its kernels."""
    if os.environ.get("UG_CUDA_RECORD_CORE", "1") == "0" or not (REPO / "tests").is_dir():
        return
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"ug_cuda_kernels_{os.getpid()}.pkl"
    env = dict(os.environ, UG_CUDA_RECORD_OUT=str(out),
               PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    # (no -x: a failing test elsewhere must not cut the record short; failures are the suite's to report)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "kernel_recorder", "-p", "no:cacheprovider",
                    "--no-header", "--pyargs", "ug_core.testing", "tests", "--ug-device", "ref"],
                   env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1200)
    if out.exists():
        kernel_recorder.load(str(out))
        out.unlink()


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
        if opts.local_size <= 1024:   # legalized, as a renderer gets them (some tests lower what legalization refuses)
            try:
                candidates.append(legalize(original_lower(k, opts), CAPABILITIES, SUPPORTED))
            except RenderError:
                pass
    candidates += sort_programs(config)
    seen: dict[str, LoopProgram] = {}
    for p in candidates:
        seen.setdefault(canonical(render_function(p, "k", config.render_options())), p)
    _PROGRAMS = list(seen.values())
    STATS["recorded_kernels"] = len(kernel_recorder.KERNELS)
    STATS["recorded_lowerings"] = len(kernel_recorder.GPU_LOWERINGS)
    STATS["distinct"] = len(_PROGRAMS)
    return _PROGRAMS


def sort_programs(config: Config) -> list[LoopProgram]:
    """The kit's GPU sort (ug_core.kit.gpusort) for a few key dtypes, as the device builds them."""
    out = []
    lower = config.lower_options()
    for dtype, indices in [(np.float32, False), (np.float32, True), (np.float16, False), (np.float64, True),
                           (np.bool_, False), (np.int64, False), (np.uint8, True)]:
        key = np.dtype(dtype)
        spec = SortSpec(3, 1000, 10, indices, True, indices)
        plan = gpusort.plan(spec, key, np.dtype(np.int64) if indices else key, lower.local_size, lower.max_global_size)
        out += [legalize(p, CAPABILITIES, SUPPORTED) for p in gpusort.programs(plan)]
    return out


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
    for k in synthetic_kernels()[::7]:
        compile_only(k, "sm_90", Config(fast_math=True, restrict=False))


def test_compile_errors_carry_the_log_and_source():
    broken = 'extern "C" __global__ void k() { undefined_thing(); }'
    for compile in (lambda: nvrtc.compile_source(broken, "sm_80"), lambda: nvrtc.NVRTCCompiler("sm_80").compile(broken, "k")):
        with pytest.raises(CompileError) as e:
            compile()
        assert "undefined_thing" in str(e.value) and "generated source" in str(e.value)
        assert "undefined_thing" in e.value.source


def test_ptx_for_virtual_arch():
    ptx = compile_only(synthetic_kernels()[0], "compute_80")
    assert b".visible .entry" in ptx and ptx.endswith(b"\0")


def test_target_for_picks_cubin_or_ptx():
    archs = nvrtc.supported_archs()
    assert nvrtc.target_for(8, 0) == "sm_80"
    newest = max(archs)
    assert nvrtc.target_for(newest // 10 + 5, 0) == f"compute_{newest}"  # a future GPU: PTX, JIT by the driver


SOURCE = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] = 1.0f; }'


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("UG_CUDA_CACHE_DIR", str(tmp_path / "cuda"))  # the kit's CachedCompiler keeps these names
    monkeypatch.setenv("UG_CUDA_DISK_CACHE", "1")
    return tmp_path / "cuda"


def test_nvrtc_is_a_kit_compiler_cached_on_disk(cache_dir, monkeypatch):
    first = CachedCompiler(nvrtc.NVRTCCompiler("sm_80"))
    image = first(SOURCE, "k")
    assert first.stats == {"compiled": 1, "disk_hits": 0} and image.startswith(b"\x7fELF")
    (entry,) = cache_dir.glob("*.bin")
    again = CachedCompiler(nvrtc.NVRTCCompiler("sm_80"))   # (a new process's)
    assert again(SOURCE, "k") == image and again.stats == {"compiled": 0, "disk_hits": 1}
    for other in (nvrtc.NVRTCCompiler("sm_90"), nvrtc.NVRTCCompiler("sm_80", ("--use_fast_math",))):
        assert other.identity() != again.compiler.identity()   # another arch or flags: another entry
    assert compile_only(synthetic_kernels()[0], "sm_80", use_cache=True) and len(list(cache_dir.glob("*.bin"))) == 2
    entry.write_bytes(entry.read_bytes()[:-10])   # truncated: its checksum fails
    assert again(SOURCE, "k") == image and again.stats["compiled"] == 1 and again.disk.stats["corrupt"] == 1
    assert again.disk.read(again.key(SOURCE, "k")).payload == image   # rewritten
    monkeypatch.setenv("UG_CUDA_DISK_CACHE", "0")
    for f in cache_dir.glob("*.bin"):
        f.unlink()
    again(SOURCE, "k")
    assert not list(cache_dir.glob("*.bin"))


@pytest.mark.parametrize("arch", ARCHS)
def test_matmul_kernels_compile(arch):
    from ug_cuda.matmul import kernel_source
    for dt in SUPPORTED:
        if dt.kind == "c":   # (complex matmuls are real ones of the parts: the frontend's)
            continue
        src, name = kernel_source(dt)
        assert nvrtc.NVRTCCompiler(arch).compile(src, name)


@pytest.mark.parametrize("arch", ["sm_80", "compute_80"])
def test_disk_cache_checks_the_image_before_the_driver_sees_it(cache_dir, arch):
    # an entry with a valid checksum but a malformed cubin / PTX (or PTX where the arch asks
    # for a cubin), or another user's / a group-writable one, is compiled again (and
    # rewritten), never handed to the driver
    import hashlib
    import stat
    import struct

    cached = CachedCompiler(nvrtc.NVRTCCompiler(arch))
    image = cached(SOURCE, "k")
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    (entry,) = cache_dir.glob("*.bin")
    magic, key = b"ug-cuda\n", cached.key(SOURCE, "k")
    if arch == "sm_80":  # a cubin for x86, and PTX
        malformed = [image[:18] + struct.pack("<H", 62) + image[20:], nvrtc.NVRTCCompiler("compute_80").compile(SOURCE, "k")]
    else:                # PTX without its NUL
        malformed = [image[:-1]]
    for bad in malformed:
        entry.write_bytes(magic + hashlib.sha256(bad).digest() + bad)
        assert cached.disk.read(key).payload is None and not entry.exists()
        assert cached(SOURCE, "k") == image
    os.chmod(entry, 0o666)
    assert cached.disk.read(key).payload is None
    os.chmod(entry, 0o600)
    assert cached.disk.read(key).payload == image
