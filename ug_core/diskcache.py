"""The on-disk cache of compiled kernels that backends share: where it lives, how an entry is
written and read back, and how the directory is kept bounded and safe.

An entry is native code that the process will load and run, so a read must never hand the
loader something it did not write itself:
- the directory is created private to the user (0o700, every missing level), and a directory
  (or an entry) that another user owns or that group/others may write is not read from;
- an entry is `magic + sha256(payload) + payload`; a short, foreign or corrupt one is removed
  and counts as a miss (the caller compiles again and rewrites it);
- the payload's structure is checked before the caller gets it (`validate`: e.g. `elf_problem`
  for object files, with every offset and size inside the file), so a loader written in C never
  parses a malformed file;
- writes go to a temporary file renamed into place (readers never see half an entry); temporary
  files left by a killed writer are removed once they are older than STALE_TMP_SECONDS;
- the directory is kept under a size cap (`$UG_DISK_CACHE_MAX_MB`, default 256 MB): the least
  recently used entries go first (a hit touches the entry's mtime).

Entry names are `<sha256 hex>.<suffix>`; the key includes FORMAT_VERSION and the backend's own
version data (`DiskCache.key`), so a format change never reads an old entry (the first format's
entries, in subdirectories `<key[:2]>/`, are removed by `trim`). Only files named like entries or
like our temporary files are ever removed, so a cache directory pointed at a shared place loses
nothing else.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import struct
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .cache import Cache, declare
from .env import env_int

_DIRECTORIES = declare("diskcache.directories", 16)   # (a cache per backend's disk cache)

FORMAT_VERSION = "2"
"""Part of every key: bump it when the entry format or its meaning changes."""

DEFAULT_MAX_MB = 256
STALE_TMP_SECONDS = 10 * 60
"""A temporary file this old belongs to a writer that was killed (a write takes milliseconds)."""
MAX_ENTRY_BYTES = 256 << 20
"""No kernel's object code is this large: a bigger file is not read into memory."""

_TMP_PREFIX = ".tmp-"
# mkstemp's names: the prefix and 8 characters of its alphabet (older writers used the same prefix)
_TMP_NAME = re.compile(r"\.tmp-[a-z0-9_]{8}")
_LEGACY_DIR = re.compile(r"[0-9a-f]{2}")  # the first format kept entries in subdirectories named by the key's start


def cache_dir(backend: str, override_env: str) -> Path:
    """`$<override_env>` if set, else `$XDG_CACHE_HOME/ug/<backend>` (default `~/.cache/ug/<backend>`)."""
    explicit = os.environ.get(override_env)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ug" / backend


def enabled(env_var: str) -> bool:
    """False when `$<env_var>` is 0/false/no/off (the cache is on by default)."""
    return os.environ.get(env_var, "1").strip().lower() not in ("0", "false", "no", "off")


def max_bytes() -> int:
    """The size cap of one cache directory: `$UG_DISK_CACHE_MAX_MB` megabytes (default 256)."""
    return env_int("UG_DISK_CACHE_MAX_MB", DEFAULT_MAX_MB, minimum=0) << 20


# --- safety of what is read -------------------------------------------------------------------


def _unsafe(st: os.stat_result, what: str) -> str | None:
    """Why a file or directory with this status may not be trusted, or None."""
    if not hasattr(os, "geteuid"):  # no POSIX owners and modes (Windows): nothing to check
        return None
    if st.st_uid != os.geteuid():
        return f"{what} is owned by uid {st.st_uid}, not by this user ({os.geteuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{what} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def make_private_dir(path: Path) -> None:
    """Create `path` and every missing parent with mode 0o700 (Path.mkdir gives parents the
    default mode, which lets others list the cache)."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for p in reversed(missing):
        try:
            p.mkdir(mode=0o700)
        except FileExistsError:  # another process made it meanwhile
            pass


# --- ELF structure --------------------------------------------------------------------------


@dataclass(frozen=True)
class ElfKind:
    """What an object file's header must say to be loadable here: ELF class (1: 32-bit,
    2: 64-bit), data encoding (1: little endian, 2: big endian), type (1: relocatable,
    2: executable) and machine."""

    elf_class: int
    data: int
    type: int
    machine: int


EM_CUDA = 190
CUBIN = ElfKind(elf_class=2, data=1, type=2, machine=EM_CUDA)
"""A CUDA cubin: a 64-bit little-endian executable for EM_CUDA."""

_SHT_NULL, _SHT_SYMTAB, _SHT_STRTAB, _SHT_RELA, _SHT_NOBITS, _SHT_REL, _SHT_DYNSYM = 0, 2, 3, 4, 8, 9, 11
_SHN_LORESERVE = 0xFF00


def elf_kind(data: bytes) -> ElfKind:
    """The header of a known-good object file (one made by this process's compiler): what
    cached entries must match."""
    if len(data) < 20 or data[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    endian = "<" if data[5] == 1 else ">"
    e_type, e_machine = struct.unpack_from(endian + "HH", data, 16)
    return ElfKind(data[4], data[5], e_type, e_machine)


def elf_problem(data: bytes, expected: ElfKind) -> str | None:
    """What is wrong with `data` as an ELF object of kind `expected`, or None when its
    structure is sound: the header, the section table, and the symbol and relocation tables
    (entry sizes, links, symbol indices) all inside the file. The loader parses these with
    offsets from the file; this is what keeps a damaged file from sending it out of bounds."""
    n = len(data)
    if n < 16 or data[:4] != b"\x7fELF":
        return "not an ELF file"
    elf_class, encoding, ident_version = data[4], data[5], data[6]
    if (elf_class, encoding) != (expected.elf_class, expected.data):
        return f"ELF class/encoding {elf_class}/{encoding}, expected {expected.elf_class}/{expected.data}"
    if ident_version != 1:
        return f"ELF identification version {ident_version}"
    wide = elf_class == 2
    e = "<" if encoding == 1 else ">"
    header = e + ("HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH")
    ehsize = 16 + struct.calcsize(header)
    if n < ehsize:
        return f"truncated ELF header ({n} bytes)"
    (e_type, e_machine, _version, _entry, phoff, shoff, _flags, e_ehsize, phentsize, phnum, shentsize, shnum,
     shstrndx) = struct.unpack_from(header, data, 16)
    if e_type != expected.type or e_machine != expected.machine:
        return f"ELF type/machine {e_type}/{e_machine}, expected {expected.type}/{expected.machine}"
    if e_ehsize != ehsize:
        return f"ELF header size {e_ehsize}, expected {ehsize}"
    if phnum:
        if phentsize != (56 if wide else 32) or phoff + phnum * phentsize > n:
            return "program header table out of bounds"
    section = e + ("IIQQQQIIQQ" if wide else "IIIIIIIIII")
    if shnum == 0 or shnum >= _SHN_LORESERVE:
        return f"{shnum} sections"
    if shentsize != struct.calcsize(section) or shoff + shnum * shentsize > n:
        return "section header table out of bounds"
    if shstrndx >= shnum:
        return f"section name table index {shstrndx} of {shnum}"
    sections = [struct.unpack_from(section, data, shoff + i * shentsize) for i in range(shnum)]
    # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
    for i, (_, sh_type, _, _, offset, size, _, _, _, _) in enumerate(sections):
        if sh_type not in (_SHT_NULL, _SHT_NOBITS) and offset + size > n:
            return f"section {i} ({offset}+{size}) outside the file ({n} bytes)"
    names = sections[shstrndx]
    if names[1] != _SHT_STRTAB:
        return "the section name table is not a string table"
    for i, sec in enumerate(sections):
        if sec[0] >= max(names[5], 1) and i:
            return f"section {i}'s name is outside the name table"
    sym_format = e + ("IBBHQQ" if wide else "IIIBBH")
    sym_size = struct.calcsize(sym_format)
    symbols: dict[int, int] = {}  # symbol table section -> number of symbols
    for i, (_, sh_type, _, _, offset, size, link, _, _, entsize) in enumerate(sections):
        if sh_type not in (_SHT_SYMTAB, _SHT_DYNSYM):
            continue
        if entsize != sym_size or size % sym_size:
            return f"symbol table {i} has entries of {entsize} bytes"
        if link >= shnum or sections[link][1] != _SHT_STRTAB:
            return f"symbol table {i} links to section {link}, not a string table"
        strings = sections[link][5]
        for values in struct.iter_unpack(sym_format, data[offset:offset + size]):
            st_name, st_shndx = values[0], (values[3] if wide else values[5])
            if st_name >= max(strings, 1) or (st_shndx >= shnum and st_shndx < _SHN_LORESERVE):
                return f"a symbol of table {i} names a string or section outside the file's"
        symbols[i] = size // sym_size
    for i, (_, sh_type, _, _, offset, size, link, info, _, entsize) in enumerate(sections):
        if sh_type not in (_SHT_REL, _SHT_RELA):
            continue
        rel_format = e + {(True, _SHT_RELA): "QQq", (True, _SHT_REL): "QQ",
                          (False, _SHT_RELA): "IIi", (False, _SHT_REL): "II"}[wide, sh_type]
        if entsize != struct.calcsize(rel_format) or size % entsize:
            return f"relocation section {i} has entries of {entsize} bytes"
        if link not in symbols or info >= shnum:
            return f"relocation section {i} links to sections {link} and {info}"
        count = symbols[link]
        # in a relocatable file, the offsets are into the section relocated (the loader writes there)
        target_size = sections[info][5] if expected.type == 1 else None
        for values in struct.iter_unpack(rel_format, data[offset:offset + size]):
            if (values[1] >> 32 if wide else values[1] >> 8) >= count:
                return f"a relocation of section {i} names a symbol outside its table"
            if target_size is not None and values[0] >= target_size:
                return f"a relocation of section {i} is outside the section it patches"
    return None


def ptx_problem(data: bytes) -> str | None:
    """What is wrong with `data` as PTX text (NUL-terminated, as NVRTC returns it), or None."""
    if not data.endswith(b"\0") or b"\0" in data[:-1]:
        return "not NUL-terminated text"
    if not data[:-1].isascii():
        return "not ASCII text"
    if b".version" not in data or b".target" not in data:
        return "no .version/.target directive"
    return None


# --- the cache ------------------------------------------------------------------------------


@dataclass
class Lookup:
    """What a read found: the payload, or None and why ("miss": no entry, "corrupt": an entry
    that failed its checks and was removed, "unsafe": one this user may not trust, left alone)."""

    payload: bytes | None
    status: str
    problem: str = ""


@dataclass
class _DirState:
    """What this process knows of one cache directory."""

    trusted: bool | None = None   # None: not checked yet
    size: int | None = None       # bytes in entries, as of the last scan plus our writes since


@dataclass
class DiskCache:
    """One backend's disk cache. The directory is looked up on every use (`cache_dir`), so a
    test or a user may move it with the environment at any time."""

    backend: str                   # e.g. "llvm": the default directory's name, and part of keys
    dir_env: str                   # environment variable that moves the directory
    enable_env: str                # environment variable that turns the cache off
    suffix: str                    # entry file name suffix, e.g. "o"
    magic: bytes                   # first bytes of an entry
    validate: Callable[[bytes], str | None]   # the payload's structural problem, or None
    max_bytes: int | None = None   # the size cap; None: `max_bytes()` (the environment's)
    stats: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("hits", "misses", "corrupt", "unsafe", "writes", "evicted", "tmp_removed"), 0))
    # what this process knows of each directory (a directory whose state is evicted is checked again)
    _dirs: Cache[Path, _DirState] = field(default_factory=lambda: Cache.of(_DIRECTORIES))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def directory(self) -> Path:
        return cache_dir(self.backend, self.dir_env)

    def enabled(self) -> bool:
        return enabled(self.enable_env)

    def key(self, *parts: str) -> str:
        """The entry name for what `parts` describe (everything the compiled code depends on)."""
        h = hashlib.sha256()
        for part in (FORMAT_VERSION, self.backend, *parts):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()

    def path(self, key: str) -> Path:
        return self.directory() / f"{key}.{self.suffix}"

    def _state(self, directory: Path) -> _DirState:
        with self._lock:
            state = self._dirs.get(directory)
            if state is None:
                state = self._dirs[directory] = _DirState()
            return state

    def _trusted(self, directory: Path) -> bool:
        """Whether the directory may be used: ours and private to us (checked once per process;
        a warning says why not)."""
        state = self._state(directory)
        if state.trusted is None:
            try:
                problem = _unsafe(directory.stat(), f"the {self.backend} kernel cache directory {directory}")
            except OSError:
                return False  # does not exist (yet): nothing to read, and not trusted until made
            if problem is not None:
                warnings.warn(f"ug: not using the disk cache: {problem}", RuntimeWarning, stacklevel=3)
            state.trusted = problem is None
        return state.trusted

    # -- reading
    def read(self, key: str) -> Lookup:
        directory = self.directory()
        path = directory / f"{key}.{self.suffix}"
        if not self._trusted(directory):
            self.stats["misses"] += 1
            return Lookup(None, "miss")
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:  # absent, or a symbolic link (O_NOFOLLOW)
            self.stats["misses"] += 1
            return Lookup(None, "miss")
        try:
            st = os.fstat(fd)
            problem = _unsafe(st, f"cache entry {path}")
            if problem is not None:
                self.stats["unsafe"] += 1
                return Lookup(None, "unsafe", problem)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
                return self._corrupt(path, "not a regular file of a plausible size")
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read(MAX_ENTRY_BYTES + 1)
            problem = self._check(data)
            if problem is not None:
                return self._corrupt(path, problem)
            try:
                os.utime(fd if os.utime in os.supports_fd else path)  # recently used: evicted last
            except OSError:
                pass  # a read-only cache still serves hits
        finally:
            os.close(fd)
        self.stats["hits"] += 1
        return Lookup(data[len(self.magic) + 32:], "hit")

    def _check(self, data: bytes) -> str | None:
        head = len(self.magic) + 32
        if len(data) < head or data[:len(self.magic)] != self.magic:
            return "no entry header"
        payload = data[head:]
        if hashlib.sha256(payload).digest() != data[len(self.magic):head]:
            return "checksum mismatch (truncated or damaged)"
        try:
            return self.validate(payload)
        except Exception as e:  # a checker's bug must not make a cache entry crash the process either
            return f"the structure check failed: {type(e).__name__}: {e}"

    def _corrupt(self, path: Path, problem: str) -> Lookup:
        self.stats["corrupt"] += 1
        try:
            path.unlink()
        except OSError:
            pass
        return Lookup(None, "corrupt", problem)

    def remove(self, key: str) -> None:
        """Drop an entry (e.g. the driver refused to load it)."""
        try:
            self.path(key).unlink()
        except OSError:
            pass

    # -- writing
    def write(self, key: str, payload: bytes) -> None:
        """Store `payload` under `key`; errors (a read-only or full disk) only cost speed."""
        directory = self.directory()
        try:
            make_private_dir(directory)
        except OSError:
            return
        if not self._trusted(directory):
            return
        try:
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=_TMP_PREFIX)  # mode 0o600
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(self.magic + hashlib.sha256(payload).digest() + payload)
                os.replace(tmp, directory / f"{key}.{self.suffix}")  # atomic: readers never see a partial entry
            except BaseException:
                _unlink(tmp)
                raise
        except OSError:
            return
        self.stats["writes"] += 1
        state = self._state(directory)
        if state.size is None:
            self.trim(directory)  # the first write of this process here: clean up, learn the size
            return
        state.size += len(self.magic) + 32 + len(payload)
        if state.size > self._cap():
            self.trim(directory)

    def _cap(self) -> int:
        return self.max_bytes if self.max_bytes is not None else max_bytes()

    def trim(self, directory: Path | None = None) -> None:
        """Remove stale temporary files and, while the entries take more than the cap, the least
        recently used ones (down to 90% of the cap, so that the next writes do not each scan)."""
        directory = directory or self.directory()
        entry_name = re.compile(r"[0-9a-f]{64}\." + re.escape(self.suffix))
        now = time.time()
        entries: list[tuple[float, int, str]] = []
        try:
            listing = list(os.scandir(directory))
        except OSError:
            return
        for item in listing:
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue  # removed meanwhile
            if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
                continue
            if stat.S_ISDIR(st.st_mode) and _LEGACY_DIR.fullmatch(item.name):
                self._remove_legacy(item.path, entry_name)
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if _TMP_NAME.fullmatch(item.name):
                if now - st.st_mtime > STALE_TMP_SECONDS and _unlink(item.path):
                    self.stats["tmp_removed"] += 1
            elif entry_name.fullmatch(item.name):
                entries.append((st.st_mtime, st.st_size, item.path))
        total = sum(size for _, size, _ in entries)
        cap = self._cap()
        if total > cap:
            entries.sort()
            for _, size, path in entries:
                if total <= cap * 9 // 10:
                    break
                if _unlink(path):
                    self.stats["evicted"] += 1
                    total -= size
        self._state(directory).size = total

    def _remove_legacy(self, subdir: str, entry_name: re.Pattern[str]) -> None:
        """Remove the entries of the first format's layout (`<dir>/<key[:2]>/<key>.<suffix>`,
        never read again: another format, other keys) and the subdirectory once it is empty."""
        try:
            items = list(os.scandir(subdir))
        except OSError:
            return
        for item in items:
            if entry_name.fullmatch(item.name) and item.is_file(follow_symlinks=False) and _unlink(item.path):
                self.stats["evicted"] += 1
        try:
            os.rmdir(subdir)
        except OSError:
            pass  # not empty: something else is in it, which stays


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


__all__ = ["CUBIN", "DiskCache", "ElfKind", "Lookup", "cache_dir", "elf_kind", "elf_problem", "enabled",
           "make_private_dir", "max_bytes", "ptx_problem"]
