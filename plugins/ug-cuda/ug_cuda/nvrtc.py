"""NVRTC: CUDA C -> CUBIN (a real arch, `sm_XY`) or PTX (`compute_XY`), and NVRTC as the
backend kit's `Compiler` (the core caches its binaries on disk).

Needs no driver and no CUDA toolkit: NVRTC comes from the `nvidia-cuda-nvrtc-cu12` wheel
(found by cuda-bindings / cuda-pathfinder) and the generated source includes no headers.

Disk cache (the kit's CachedCompiler over ug_core.diskcache, shared with the other backends):
`<user cache dir>/ug/cuda/<sha256>.bin`, keyed by source + entry point + arch + options + NVRTC
version; `UG_CUDA_DISK_CACHE=0` disables it, `UG_CUDA_CACHE_DIR` moves it, `UG_DISK_CACHE_MAX_MB`
caps its size. An entry must be this user's, carry a matching checksum of its payload and be a
sound cubin (ELF for EM_CUDA) or PTX text, as its arch says, before the driver sees it
(`NVRTCCompiler.validate`); anything else is recompiled and rewritten.
"""

from __future__ import annotations

import functools
import re

from ug_core.kit import CUBIN, CompileError, Compiler, elf_problem, ptx_problem


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:  # pragma: no cover - dependency missing
        raise RuntimeError(f"NVRTC unavailable: cannot import cuda.bindings.nvrtc ({e}); "
                           "install cuda-bindings and nvidia-cuda-nvrtc-cu12") from e
    return nvrtc


def _check(result, what: str):
    """cuda-bindings returns (err, *values); raise on error, return the values."""
    err, *rest = result
    if int(err) != 0:
        nvrtc = _nvrtc()
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise RuntimeError(f"{what} failed: {err!r} {msg.decode(errors='replace') if msg else ''}")
    return rest[0] if len(rest) == 1 else rest


@functools.lru_cache(maxsize=None)
def version() -> tuple[int, int]:
    major, minor = _check(_nvrtc().nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


@functools.lru_cache(maxsize=None)
def supported_archs() -> tuple[int, ...]:
    """Real architectures this NVRTC can emit CUBIN for, e.g. (50, 52, ..., 90, 100, 120)."""
    return tuple(int(a) for a in _check(_nvrtc().nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs"))


def target_for(major: int, minor: int) -> str:
    """What to compile for a device of compute capability major.minor: CUBIN for its real arch
    when this NVRTC knows it, else PTX for the newest virtual arch it knows (the driver JITs
    PTX forward to newer GPUs)."""
    cc = major * 10 + minor
    archs = supported_archs()
    if cc in archs:
        return f"sm_{cc}"
    older = [a for a in archs if a <= cc]
    return f"compute_{max(older) if older else min(archs)}"


def arch_kind(arch: str) -> str:
    if re.fullmatch(r"sm_\d+[af]?", arch):
        return "cubin"
    if re.fullmatch(r"compute_\d+[af]?", arch):
        return "ptx"
    raise ValueError(f"bad CUDA arch {arch!r}: expected sm_XY (CUBIN) or compute_XY (PTX)")


def compile_source(source: str, arch: str = "sm_90", options: tuple[str, ...] = (), name: str = "kernel.cu") -> bytes:
    """Compile one CUDA C translation unit: the CUBIN, or the NUL-terminated PTX text. Raises
    ug_core.CompileError with NVRTC's log and the source."""
    kind = arch_kind(arch)
    nvrtc = _nvrtc()
    opts = [f"--gpu-architecture={arch}", "--std=c++17", *options]
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        if int(err) != 0:
            log_size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
            log_buf = b" " * log_size
            _check(nvrtc.nvrtcGetProgramLog(prog, log_buf), "nvrtcGetProgramLog")
            log = log_buf.rstrip(b"\0").decode(errors="replace").strip()
            _, msg = nvrtc.nvrtcGetErrorString(err)
            raise CompileError(f"NVRTC {'%d.%d' % version()} failed for {arch} ({msg.decode()}):\n{log}", source)
        if kind == "cubin":
            size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            image = b" " * size
            _check(nvrtc.nvrtcGetCUBIN(prog, image), "nvrtcGetCUBIN")
        else:
            size = _check(nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
            image = b" " * size
            _check(nvrtc.nvrtcGetPTX(prog, image), "nvrtcGetPTX")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return image


class NVRTCCompiler(Compiler):
    """NVRTC for one arch and option set (their cache entries are apart: both are in `identity`)."""

    name, suffix = "cuda", "bin"   # ~/.cache/ug/cuda; UG_CUDA_CACHE_DIR, UG_CUDA_DISK_CACHE

    def __init__(self, arch: str, options: tuple[str, ...] = ()):
        self.kind = arch_kind(arch)
        self.arch = arch
        self.options = tuple(options)

    def identity(self) -> str:
        return " ".join(["nvrtc %d.%d" % version(), self.arch, *self.options])

    def compile(self, source: str, name: str) -> bytes:
        return compile_source(source, self.arch, self.options, f"{name}.cu")

    def validate(self, binary: bytes) -> str | None:
        if self.kind == "cubin":
            return elf_problem(binary, CUBIN)
        return ptx_problem(binary)
