"""Source -> binary for kit backends, cached on disk by the core.

A backend's `Compiler` turns the renderer's source into bytes its runtime loads (an object
file, a shared library, PTX, a SPIR-V module) and says what those bytes must look like
(`validate`). The core keeps every binary in one disk cache per backend (ug_core.diskcache:
private directory, checked entries, atomic writes, a size cap), keyed by the source and the
compiler's `identity()`, so a kernel compiled once is never compiled again on this machine.
"""

from __future__ import annotations

import abc
from .. import diskcache


class Compiler(abc.ABC):
    """What a backend supplies to turn source into a loadable binary."""

    name: str = "?"          # the disk cache's directory name (`~/.cache/ug/<name>`), e.g. "c"
    suffix: str = "bin"      # cache entries' file suffix

    @abc.abstractmethod
    def identity(self) -> str:
        """Everything besides the source that the binary depends on (compiler version, flags,
        target): part of the cache key."""

    @abc.abstractmethod
    def compile(self, source: str, name: str) -> bytes:
        """The binary for `source` (`name`: its entry point). Raise CompileError on failure."""

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

    def __call__(self, source: str, name: str) -> bytes:
        use_disk = self.disk.enabled()
        key = self.disk.key(self.compiler.identity(), name, source) if use_disk else ""
        if use_disk:
            found = self.disk.read(key)
            if found.payload is not None:
                self.stats["disk_hits"] += 1
                return found.payload
        binary = self.compiler.compile(source, name)
        self.stats["compiled"] += 1
        if use_disk:
            self.disk.write(key, binary)
        return binary

