"""Source -> binary for kit backends, cached on disk by the core.

A backend's `Compiler` turns the renderer's source into bytes its runtime loads (an object
file, a shared library, PTX, a SPIR-V module) and says what those bytes must look like
(`validate`). The core keeps every binary in one disk cache per backend (ug_core.diskcache:
private directory, checked entries, atomic writes, a size cap), keyed by the source and the
compiler's `identity()`, so a kernel compiled once is never compiled again on this machine.
"""

from __future__ import annotations

import abc
import time
from typing import Any, Callable, TypeVar

from .. import diskcache, profiler

T = TypeVar("T")


class Compiler(abc.ABC):
    """What a backend supplies to turn source into a loadable binary."""

    name: str = "?"          # the disk cache's directory name (`~/.cache/ug/<name>`), e.g. "c"
    suffix: str = "bin"      # cache entries' file suffix
    # False: binaries are never read from or written to the disk cache, for a compiler that is
    # as fast as a cache hit (an assembler) or whose input is not text (the cache keys text)
    disk_cache: bool = True

    @abc.abstractmethod
    def identity(self) -> str:
        """Everything besides the source that the binary depends on (compiler version, flags,
        target): part of the cache key."""

    @abc.abstractmethod
    def compile(self, source: Any, name: str) -> bytes:
        """The binary for `source`, the renderer's output (`name`: its entry point). Raise
        CompileError on failure."""

    def validate(self, binary: bytes) -> str | None:
        """What is wrong with a binary read from the disk cache (None: loadable). A loader
        written in C must never parse a malformed file: check its structure here."""
        return None


class CachedCompiler:
    """A backend's compiler behind the core's disk cache (`$UG_<NAME>_CACHE_DIR` moves it,
    `UG_<NAME>_DISK_CACHE=0` turns it off)."""

    def __init__(self, compiler: Compiler):
        self.compiler = compiler
        env = compiler.name.upper().replace("-", "_")
        self.disk = diskcache.DiskCache(compiler.name, f"UG_{env}_CACHE_DIR", f"UG_{env}_DISK_CACHE",
                                        compiler.suffix, f"ug-{compiler.name}\n".encode(), validate=compiler.validate)
        self.stats = {"compiled": 0, "disk_hits": 0}

    def key(self, source: Any, name: str) -> str:
        """The disk cache's entry name for the binary of `source`."""
        return self.disk.key(self.compiler.identity(), name, source)

    def __call__(self, source: Any, name: str) -> bytes:
        """The binary for `source`: from the disk cache, else compiled (and cached)."""
        return self.load(source, name, _binary)

    def load(self, source: Any, name: str, loader: Callable[[bytes], T]) -> T:
        """loader(binary) for the binary of `source`. A cached binary passed `validate`, but only
        the loader knows that it loads (links, has the entry point): one it refuses (raises) is
        removed from the cache and compiled again, never an error of the user's."""
        start = time.perf_counter_ns()   # (for the profiler: compile or disk cache, and how long)
        use_disk = self.compiler.disk_cache and self.disk.enabled()
        key = self.key(source, name) if use_disk else ""
        if use_disk:
            found = self.disk.read(key)
            if found.payload is not None:
                try:
                    loaded = loader(found.payload)
                except Exception:
                    self.disk.remove(key)
                    self.disk.stats["corrupt"] += 1   # (the disk cache's own count of entries it dropped)
                else:
                    self.stats["disk_hits"] += 1
                    profiler.backend_compiled(self.compiler.name, name, "disk cache", start)
                    return loaded
        binary = self.compiler.compile(source, name)
        self.stats["compiled"] += 1
        loaded = loader(binary)
        if use_disk:
            self.disk.write(key, binary)
        profiler.backend_compiled(self.compiler.name, name, "compiled", start)
        return loaded


def _binary(binary: bytes) -> bytes:
    return binary
