"""The cpu backend's disk cache of object files (on ug_core.diskcache): an entry reaches LLVM's
loader only if it is this user's, intact, and an object file this target machine could have
written; anything else is compiled again, never a crash."""

import hashlib
import os
import stat
import struct

import numpy as np
import pytest

import ug_core as ug

import ug_llvm.jit as jitmod


@pytest.fixture
def module(tmp_path, monkeypatch):
    monkeypatch.setenv("UG_LLVM_CACHE_DIR", str(tmp_path / "ug" / "llvm"))
    monkeypatch.setenv("UG_LLVM_DISK_CACHE", "1")
    dev = ug.registry.get("cpu")
    x = ug.tensor(np.arange(10, dtype=np.float32), device="cpu")
    kernel = [it for it in ug.schedule((x * 3.5).exp()).items if it.kind == "kernel"][-1].kernel
    return dev.render_entry(dev.lower(kernel))


def _entry(j, ir, name):
    return j.compiler.disk.path(j.compiler.key(ir, name))


def test_entries_are_private_and_reload(module, tmp_path):
    ir, name = module
    j = jitmod.Jit()
    j.load(ir, name)
    assert stat.S_IMODE((tmp_path / "ug").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "ug" / "llvm").stat().st_mode) == 0o700
    j2 = jitmod.Jit()
    assert j2.load(ir, name) and j2.compiler.stats == {"compiled": 0, "disk_hits": 1}


def _rewrite(path, magic, payload):
    path.write_bytes(magic + hashlib.sha256(payload).digest() + payload)


@pytest.mark.parametrize("damage", ["other machine", "section outside the file", "cut tables", "not ELF"])
def test_a_malformed_object_with_a_valid_checksum_never_reaches_the_loader(module, damage):
    ir, name = module
    j = jitmod.Jit()
    j.load(ir, name)
    path, magic = _entry(j, ir, name), j.compiler.disk.magic
    obj = path.read_bytes()[len(magic) + 32:]
    shoff = struct.unpack_from("<Q", obj, 40)[0]
    bad = {
        "other machine": obj[:18] + struct.pack("<H", 183) + obj[20:],
        "section outside the file": obj[:shoff + 64 + 24] + struct.pack("<Q", 1 << 40) + obj[shoff + 64 + 32:],
        "cut tables": obj[:shoff + 70],
        "not ELF": b"\0" * len(obj),
    }[damage]
    _rewrite(path, magic, bad)
    j2 = jitmod.Jit()
    assert j2.load(ir, name)  # compiled again
    assert j2.compiler.stats == {"compiled": 1, "disk_hits": 0} and j2.compiler.disk.stats["corrupt"] == 1
    assert path.read_bytes()[len(magic) + 32:] == obj  # and rewritten


def test_entries_others_may_write_are_not_loaded(module):
    ir, name = module
    j = jitmod.Jit()
    j.load(ir, name)
    path = _entry(j, ir, name)
    os.chmod(path, 0o666)
    j2 = jitmod.Jit()
    assert j2.load(ir, name)
    assert j2.compiler.stats == {"compiled": 1, "disk_hits": 0} and j2.compiler.disk.stats["unsafe"] == 1
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # replaced by the new, private entry
    if os.geteuid() == 0:  # (only root can give a file away)
        os.chown(path, 4242, -1)
        j3 = jitmod.Jit()
        assert j3.load(ir, name) and j3.compiler.stats["disk_hits"] == 0 and j3.compiler.disk.stats["unsafe"] == 1


def test_the_cache_is_capped(module, monkeypatch):
    ir, name = module
    monkeypatch.setenv("UG_DISK_CACHE_MAX_MB", "0")  # no room at all: every write trims it empty
    j = jitmod.Jit()
    j.load(ir, name)
    assert not _entry(j, ir, name).exists() and j.compiler.disk.stats["evicted"] == 1
