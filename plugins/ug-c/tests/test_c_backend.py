"""ug-c's own tests: what the core suite (run on device `c` like on every device) does not
check. The kit's parts it uses are tested in tests/test_kit.py."""

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

import ug_core as ug
from ug_core.device import CompileError
from ug_core.dtypes import SUPPORTED
from ug_core.kit import KitDevice

pytest.importorskip("ug_c")
from ug_c import device as c_device  # noqa: E402


def test_registered_usable_and_built_on_the_kit():
    assert "c" in ug.devices()
    dev = ug.registry.get("c")
    assert isinstance(dev, KitDevice) and dev.info.lower_options.target == "cpu"
    out = subprocess.run([sys.executable, "-m", "ug_core.cli", "devices"], capture_output=True, text=True).stdout
    assert any(line.startswith("c ") and "usable" in line for line in out.splitlines())


def test_generated_source_and_results():
    x = ug.tensor(np.linspace(-3, 3, 50, dtype=np.float32), device="c")
    y = (x * 2.5).exp() - ug.maximum(x, 0.5)
    kernel = ug.schedule(y).kernels[0].kernel
    source = ug.registry.get("c").render(kernel)
    assert "void " in source and "gid_start" in source and "expf(" in source
    np.testing.assert_allclose(y.numpy(), np.exp(x.numpy() * 2.5) - np.maximum(x.numpy(), 0.5), rtol=1e-6)


def test_float16_is_computed_in_float32_by_the_core_legalization():
    """C99 has no half type: the kit legalizes float16 arithmetic into float32, and the dialect
    spells only the conversions (C_SOFT_HALF), correctly rounded from float64 too."""
    values = np.array([1.0, -2.5, 65504.0, 65519.99, 65520.0, 1e-7, 2.0**-24 * 1.5, -0.0, np.inf, np.nan, 3.14159])
    x = ug.tensor(values, device="c")
    with np.errstate(over="ignore"):
        want = values.astype(np.float16), values.astype(np.float16) ** 2 + values.astype(np.float16)
    np.testing.assert_array_equal(x.astype(np.float16).numpy(), want[0])
    h = ug.tensor(want[0], device="c")
    np.testing.assert_array_equal((h * h + h).numpy(), want[1])
    source = ug.registry.get("c").render(ug.schedule(h * h).kernels[0].kernel)
    assert "ug_half_to_float(" in source and "ug_double_to_half(" in source


def test_it_holds_every_ug_dtype_and_others_are_a_clear_error():
    assert ug.registry.get("c").dtypes == frozenset(SUPPORTED)
    with pytest.raises(TypeError, match="longdouble|float128"):
        ug.tensor(np.ones(4, np.longdouble), device="c")
    # complex values are pairs of floats to the renderer (the core's legalization): no C complex type
    source = ug.registry.get("c").render(ug.schedule(ug.tensor(np.ones(4, np.complex64), device="c") * 2j).kernels[0].kernel)
    assert "complex" not in source


def test_compile_errors_carry_the_source(monkeypatch):
    compiler = c_device.CCompiler()
    with pytest.raises(CompileError) as info:
        compiler.compile("void broken(void **args, long long gid_start, long long gid_end) { nonsense; }", "broken")
    assert "nonsense" in info.value.source and "failed" in str(info.value)


def test_no_compiler_is_an_unusable_reason(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(RuntimeError, match="no C compiler"):
        c_device.find_compiler()


def test_libraries_come_from_the_disk_cache_and_corrupt_ones_are_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("UG_C_CACHE_DIR", str(tmp_path))
    kernel = ug.schedule(ug.tensor(np.ones(8, np.float32), device="c") * 3.25).kernels[0].kernel
    first = c_device.make_device("test")
    first.compile(kernel)
    assert first.compiler.stats == {"compiled": 1, "disk_hits": 0}
    second = c_device.make_device("test")
    second.compile(kernel)
    assert second.compiler.stats == {"compiled": 0, "disk_hits": 1}
    (entry,) = [p for p in tmp_path.iterdir() if p.suffix == ".so"]
    magic = b"ug-c\n"
    data = entry.read_bytes()
    library = data[len(magic) + 32:]
    cut = library[: len(library) // 2]  # a truncated library whose checksum matches: only the ELF check sees it
    entry.write_bytes(magic + hashlib.sha256(cut).digest() + cut)
    os.chmod(entry, 0o600)
    third = c_device.make_device("test")
    program = third.compile(kernel)
    assert third.compiler.disk.stats["corrupt"] == 1 and third.compiler.stats == {"compiled": 1, "disk_hits": 0}
    assert len(kernel.args) == 3  # out, x, the scalar 3.25
    buffers = [ug.Buffer(third, 8, np.float32), ug.Buffer(third, 8, np.float32).copy_in(np.ones(8, np.float32)),
               ug.Buffer(third, 1, np.float32).copy_in(np.array([3.25], np.float32))]
    third.run(program, buffers)
    np.testing.assert_array_equal(buffers[0].numpy(), np.full(8, 3.25, np.float32))


def test_a_dropped_program_unloads_its_library():
    """A loaded kernel's library is closed once nothing holds the kernel (its Program, its
    launchers): libraries kept loaded forever exhausted the process's memory mappings
    (vm.max_map_count) after some 10,000 kernels. Freed by reference counting, without the
    garbage collector (no per-library ctypes class, which is a reference cycle)."""
    import gc

    def mapped() -> set[str]:
        with open("/proc/self/maps") as f:
            return {line.split()[-2] if line.rstrip().endswith("(deleted)") else line.split()[-1]
                    for line in f if "ug-c-" in line}
    dev = ug.registry.get("c")
    x = ug.tensor(np.arange(37, dtype=np.float32), device="c")
    kernel = ug.schedule((x * 3.0).exp() + 0.25).kernels[0].kernel
    before = mapped()
    program = dev.compile(kernel)
    loaded = mapped() - before
    assert loaded, "the kernel's library should be mapped while its program lives"
    launch = dev.launcher(program)
    del program
    assert mapped() - before == loaded   # the launcher still holds it
    gc.disable()
    try:
        del launch
        assert not (mapped() & loaded)
    finally:
        gc.enable()


def test_editing_the_prelude_changes_the_identity_so_no_stale_library_is_reused(tmp_path, monkeypatch):
    """The prelude is compiled into every library but is not part of the source the cache keys:
    it must be in the compiler's identity, or a library built with an old prelude is reused."""
    monkeypatch.setenv("UG_C_CACHE_DIR", str(tmp_path))
    x = ug.tensor(np.ones(8, np.float32), device="c")
    kernel = ug.schedule(x * 2.0).kernels[0].kernel

    def compiled() -> tuple[str, str, dict]:   # (identity, cache key, compile stats) of a new device
        dev = c_device.make_device("test")
        dev.compile(kernel)
        return dev.compiler.compiler.identity(), dev.compiler.key(*dev.render_entry(dev.lower(kernel))), dev.compiler.stats
    identity, key, _ = compiled()
    monkeypatch.setattr(c_device, "PRELUDE", c_device.PRELUDE + "\n/* edited */\n")
    new_identity, new_key, stats = compiled()
    assert new_identity != identity and new_key != key
    assert stats == {"compiled": 1, "disk_hits": 0}   # built again, with the new prelude
