"""The core disk cache of compiled kernels (ug_core.diskcache), which the backends share: entries
that are damaged, foreign or unsafe are never handed to a loader, the directory is private and
bounded, and killed writers' temporary files are cleaned up."""

import hashlib
import os
import stat
import struct
import time

import pytest

from ug_core import diskcache
from ug_core.diskcache import DiskCache, ElfKind, elf_problem, ptx_problem

HOST = ElfKind(elf_class=2, data=1, type=1, machine=62)  # x86-64 relocatable, as LLVM writes for this host


def _elf(*, symbol_section=1, reloc_symbol=1, reloc_offset=8, sym_entsize=24, section_offset=None) -> bytes:
    """A minimal ELF64 relocatable object: .text, .symtab (a null and one symbol), .strtab,
    .rela.text (one relocation) and .shstrtab, with knobs to break each table."""
    shstrtab = b"\0.text\0.symtab\0.strtab\0.rela.text\0.shstrtab\0"
    name = {n: shstrtab.index(n.encode() + b"\0") for n in (".text", ".symtab", ".strtab", ".rela.text", ".shstrtab")}
    text = b"\x90" * 16
    strtab = b"\0kernel\0"
    symtab = bytes(24) + struct.pack("<IBBHQQ", 1, 0x12, 0, symbol_section, 0, 16)
    rela = struct.pack("<QQq", reloc_offset, (reloc_symbol << 32) | 1, 0)
    blobs = [text, symtab, strtab, rela, shstrtab]
    offsets, pos = [], 64
    for blob in blobs:
        offsets.append(pos)
        pos += len(blob)
    shoff = pos
    sections = [bytes(64),
                struct.pack("<IIQQQQIIQQ", name[".text"], 1, 6, 0, offsets[0] if section_offset is None else section_offset,
                            len(text), 0, 0, 16, 0),
                struct.pack("<IIQQQQIIQQ", name[".symtab"], 2, 0, 0, offsets[1], len(symtab), 3, 1, 8, sym_entsize),
                struct.pack("<IIQQQQIIQQ", name[".strtab"], 3, 0, 0, offsets[2], len(strtab), 0, 0, 1, 0),
                struct.pack("<IIQQQQIIQQ", name[".rela.text"], 4, 0x40, 0, offsets[3], len(rela), 2, 1, 8, 24),
                struct.pack("<IIQQQQIIQQ", name[".shstrtab"], 3, 0, 0, offsets[4], len(shstrtab), 0, 0, 1, 0)]
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8) + struct.pack(
        "<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(sections), 5)
    return header + b"".join(blobs) + b"".join(sections)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("UG_TEST_CACHE_DIR", str(tmp_path / "parent" / "cache"))
    return DiskCache("test", "UG_TEST_CACHE_DIR", "UG_TEST_DISK_CACHE", "o", b"UGTEST01",
                     validate=lambda payload: elf_problem(payload, HOST))


# --- the structure of object files ----------------------------------------------------------------


def test_a_sound_object_passes_and_each_damage_is_named():
    assert elf_problem(_elf(), HOST) is None
    good = _elf()
    broken = {
        "truncated": good[:40],
        "truncated tables": good[:-10],
        "not ELF": b"\0" * len(good),
        "32-bit": good[:4] + b"\x01" + good[5:],
        "big endian": good[:5] + b"\x02" + good[6:],
        "other machine": good[:18] + struct.pack("<H", 183) + good[20:],
        "executable": good[:16] + struct.pack("<H", 2) + good[18:],
        "section outside the file": _elf(section_offset=1 << 40),
        "symbol entry size": _elf(sym_entsize=16),
        "symbol in no section": _elf(symbol_section=77),
        "relocation's symbol": _elf(reloc_symbol=9),
        "relocation outside its section": _elf(reloc_offset=4096),
    }
    for what, data in broken.items():
        problem = elf_problem(data, HOST)
        assert isinstance(problem, str) and problem, what
    assert elf_problem(good, ElfKind(2, 1, 1, 183)) is not None  # a cache made on another machine


def test_ptx_text_checks():
    assert ptx_problem(b"//\n.version 8.0\n.target sm_80\n.address_size 64\n\0") is None
    for bad in (b".version 8.0\n.target sm_80\n", b".version 8.0\0.target sm_80\n\0", b"\x7fELF\0", b"junk\0"):
        assert ptx_problem(bad) is not None


# --- reading and writing ------------------------------------------------------------------------


def test_roundtrip_and_private_directory(cache, tmp_path):
    key = cache.key("some ir")
    assert cache.read(key).status == "miss"
    cache.write(key, _elf())
    for d in (tmp_path / "parent", tmp_path / "parent" / "cache"):  # every level made is private
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    found = cache.read(key)
    assert found.status == "hit" and found.payload == _elf()
    assert stat.S_IMODE(cache.path(key).stat().st_mode) == 0o600


def test_keys_are_versioned(cache, monkeypatch):
    key = cache.key("ir")
    assert key != cache.key("ir", "")
    monkeypatch.setattr(diskcache, "FORMAT_VERSION", "999")
    assert cache.key("ir") != key


@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "empty", "garbage", "old magic", "sound checksum, bad ELF"])
def test_damaged_entries_are_removed_never_loaded(cache, damage):
    key = cache.key("ir")
    cache.write(key, _elf())
    path = cache.path(key)
    data = path.read_bytes()
    bad_payload = _elf(reloc_symbol=9)
    path.write_bytes({
        "flipped byte": data[:-1] + bytes([data[-1] ^ 0xFF]),
        "truncated": data[:len(data) // 2],
        "empty": b"",
        "garbage": os.urandom(300),
        "old magic": b"UGTEST00" + data[8:],
        "sound checksum, bad ELF": b"UGTEST01" + hashlib.sha256(bad_payload).digest() + bad_payload,
    }[damage])
    found = cache.read(key)
    assert found.payload is None and found.status == "corrupt" and found.problem
    assert not path.exists()  # removed: the next compile rewrites it
    cache.write(key, _elf())
    assert cache.read(key).payload == _elf()


def test_a_validator_that_raises_is_a_corrupt_entry(cache):
    def broken(payload):
        raise IndexError("checker bug")
    cache.validate = broken
    key = cache.key("ir")
    cache.write(key, _elf())
    assert cache.read(key).status == "corrupt"


def test_entries_others_may_write_or_own_are_ignored(cache):
    key = cache.key("ir")
    cache.write(key, _elf())
    path = cache.path(key)
    os.chmod(path, 0o666)
    found = cache.read(key)
    assert found.payload is None and found.status == "unsafe" and "writable" in found.problem
    os.chmod(path, 0o600)
    assert cache.read(key).status == "hit"
    if os.geteuid() == 0:  # (only root can give a file away)
        os.chown(path, 4242, -1)
        found = cache.read(key)
        assert found.status == "unsafe" and "owned by uid 4242" in found.problem
        cache.write(key, _elf())  # a write replaces it with our own
        assert cache.read(key).status == "hit"
    # a symbolic link is not followed
    os.unlink(path)
    target = path.parent / "elsewhere"
    target.write_bytes(b"x")
    os.symlink(target, path)
    assert cache.read(key).status == "miss"


def test_a_directory_others_may_write_is_not_used(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("UG_TEST_CACHE_DIR", str(shared))
    cache = DiskCache("test", "UG_TEST_CACHE_DIR", "UG_TEST_DISK_CACHE", "o", b"UGTEST01", validate=lambda p: None)
    with pytest.warns(RuntimeWarning, match="writable by group or others"):
        cache.write(cache.key("ir"), b"payload")
    assert not list(shared.iterdir())
    assert cache.read(cache.key("ir")).status == "miss"


# --- keeping the directory bounded and clean ----------------------------------------------------


def test_stale_temporary_files_are_removed(cache):
    cache.write(cache.key("first"), _elf())
    directory = cache.directory()
    old = time.time() - diskcache.STALE_TMP_SECONDS - 60
    stale, fresh, unrelated = directory / ".tmp-abcd_123", directory / ".tmp-zzzz9999", directory / "notes.tmp-old"
    for f in (stale, fresh, unrelated):
        f.write_bytes(b"partial")
    os.utime(stale, (old, old))
    os.utime(unrelated, (old, old))
    cache.trim()
    assert not stale.exists() and fresh.exists() and unrelated.exists()
    assert cache.stats["tmp_removed"] == 1


def test_size_cap_evicts_the_least_recently_used(cache):
    payload = _elf()
    entry = len(cache.magic) + 32 + len(payload)
    cache.max_bytes = 5 * entry
    keys = [cache.key(str(i)) for i in range(12)]
    for i, key in enumerate(keys):
        cache.write(key, payload)
        past = time.time() - 1000 + i  # written in order, a second apart
        os.utime(cache.path(key), (past, past))
        if i == 2:
            assert cache.read(keys[0]).status == "hit"  # a hit makes it the most recently used
    directory = cache.directory()
    sizes = [p.stat().st_size for p in directory.iterdir() if p.name.endswith(".o")]
    assert sum(sizes) <= 5 * entry and cache.stats["evicted"] >= 7
    assert cache.read(keys[-1]).status == "hit"
    assert cache.read(keys[0]).status == "hit"  # read after it was written: kept
    assert cache.read(keys[1]).status == "miss"  # the oldest unread one went first
    other = directory / "README"  # not an entry: never counted, never removed
    other.write_bytes(b"x" * (10 * entry))
    cache.trim()
    assert other.exists() and cache.read(keys[-1]).status == "hit"


def test_cap_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("UG_DISK_CACHE_MAX_MB", "3")
    assert diskcache.max_bytes() == 3 << 20
    monkeypatch.setenv("UG_DISK_CACHE_MAX_MB", "lots")
    with pytest.raises(ValueError, match="UG_DISK_CACHE_MAX_MB"):
        diskcache.max_bytes()


def test_the_first_formats_entries_are_removed(cache):
    cache.write(cache.key("new"), _elf())
    directory = cache.directory()
    legacy, mixed = directory / "cd", directory / "ab"
    for d in (legacy, mixed):
        d.mkdir()
        (d / ("0" * 64 + ".o")).write_bytes(b"UGLLVMO1 old entry")
    (mixed / "keep.txt").write_bytes(b"not ours to remove")
    cache.trim()
    assert not legacy.exists() and (mixed / "keep.txt").exists() and not (mixed / ("0" * 64 + ".o")).exists()
    assert cache.read(cache.key("new")).status == "hit"
