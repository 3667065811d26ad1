"""NVRTC: CUDA C -> CUBIN (a real arch, `sm_XY`) or PTX (`compute_XY`), with a disk cache.

Needs no driver and no CUDA toolkit: NVRTC comes from the `nvidia-cuda-nvrtc-cu12` wheel
(found by cuda-bindings / cuda-pathfinder) and the generated source includes no headers.

Disk cache (ug_core.diskcache, shared with the other backends): `<user cache dir>/ug/cuda/<sha256>.bin`,
keyed by source + options + arch + NVRTC version + the cache format; `UG_CUDA_DISK_CACHE=0`
disables it, `UG_CUDA_CACHE_DIR` moves it, `UG_DISK_CACHE_MAX_MB` caps its size. An entry must be
this user's, carry a matching checksum of its payload and be a sound cubin (ELF for EM_CUDA) or
PTX text before the driver sees it; anything else is recompiled and rewritten.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from ug_core import diskcache
from ug_core.device import CompileError

_MAGIC = b"UGCUDA2\n"
_lock = threading.Lock()


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


@dataclass(frozen=True)
class Binary:
    image: bytes       # CUBIN, or NUL-terminated PTX text
    kind: str          # "cubin" or "ptx"
    arch: str
    log: str = ""


def _arch_kind(arch: str) -> str:
    if re.fullmatch(r"sm_\d+[af]?", arch):
        return "cubin"
    if re.fullmatch(r"compute_\d+[af]?", arch):
        return "ptx"
    raise ValueError(f"bad CUDA arch {arch!r}: expected sm_XY (CUBIN) or compute_XY (PTX)")


# --- disk cache -----------------------------------------------------------------------------


def _image_problem(image: bytes) -> str | None:
    """What keeps a cached image from being a cubin or PTX text NVRTC could have made, or None
    (which of the two it must be, the key says: it includes the arch)."""
    if image.startswith(b"\x7fELF"):
        return diskcache.elf_problem(image, diskcache.CUBIN)
    return diskcache.ptx_problem(image)


_DISK = diskcache.DiskCache("cuda", "UG_CUDA_CACHE_DIR", "UG_CUDA_DISK_CACHE", "bin", _MAGIC, validate=_image_problem)


def cache_dir() -> Path:
    return _DISK.directory()


def disk_cache_enabled() -> bool:
    return _DISK.enabled()


def cache_key(source: str, arch: str, options: tuple[str, ...]) -> str:
    return _DISK.key(source, arch, " ".join(options), "nvrtc %d.%d" % version())


def _cache_read(key: str) -> bytes | None:
    with _lock:
        return _DISK.read(key).payload  # a corrupt entry is removed: recompiled and rewritten


def _cache_write(key: str, image: bytes) -> None:
    with _lock:
        _DISK.write(key, image)  # a read-only or full cache dir only costs a recompile


def invalidate(source: str, arch: str, options: tuple[str, ...] = ()) -> None:
    """Drop a cache entry (e.g. the driver refused to load it)."""
    with _lock:
        _DISK.remove(cache_key(source, arch, options))


# --- compile --------------------------------------------------------------------------------


def compile_source(source: str, arch: str = "sm_90", options: tuple[str, ...] = (), name: str = "kernel.cu",
                   use_cache: bool | None = None) -> Binary:
    """Compile one CUDA C translation unit. Raises ug_core.CompileError with NVRTC's log."""
    kind = _arch_kind(arch)
    if use_cache is None:
        use_cache = disk_cache_enabled()
    key = cache_key(source, arch, options) if use_cache else ""
    if use_cache:
        image = _cache_read(key)
        if image is not None and image.startswith(b"\x7fELF") == (kind == "cubin"):
            return Binary(image, kind, arch)
    nvrtc = _nvrtc()
    opts = [f"--gpu-architecture={arch}", "--std=c++17", *options]
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        log_size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        log_buf = b" " * log_size
        _check(nvrtc.nvrtcGetProgramLog(prog, log_buf), "nvrtcGetProgramLog")
        log = log_buf.rstrip(b"\0").decode(errors="replace").strip()
        if int(err) != 0:
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
    if use_cache:
        _cache_write(key, image)
    return Binary(image, kind, arch, log)
