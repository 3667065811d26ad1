"""The plugin surface: in-process plugins, broken entry points, unusable devices, the CLI."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ug_core as ug
from ug_core.plugins import Registry, registry
from ug_core.ref import RefDevice

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class FakePlugin:
    """A third-party-style plugin registered in-process: a device that counts its launches."""

    def __init__(self):
        self.runs = 0

    @ug.hookimpl
    def ug_register_devices(self, register):
        plugin = self

        class CountingDevice(RefDevice):
            version = "fake-1"

            def run(self, program, buffers):
                plugin.runs += 1
                super().run(program, buffers)

        register(ug.DeviceSpec(name="fake", factory=CountingDevice, plugin="fake-plugin", version="fake-1", priority=500))

        def broken():
            raise RuntimeError("no such hardware here")

        register(ug.DeviceSpec(name="fake-broken", factory=broken, plugin="fake-plugin", version="0"))


@pytest.fixture
def fake_plugin():
    plugin = FakePlugin()
    registry.register_plugin(plugin, name="fake-plugin")
    yield plugin
    registry.pm.unregister(plugin)
    registry.unregister_device("fake")
    registry.unregister_device("fake-broken")


def test_in_process_plugin_device_runs_kernels(fake_plugin):
    assert "fake" in ug.devices()
    assert "fake-broken" not in ug.devices()
    x = ug.tensor(np.arange(6, dtype=np.float32), device="fake")
    y = (x * 2 + 1).exp().sum()
    assert y.device == "fake"
    np.testing.assert_allclose(y.item(), np.exp(np.arange(6) * 2 + 1).sum(), rtol=1e-5)
    assert fake_plugin.runs >= 1


def test_copy_between_plugin_devices(fake_plugin):
    x = ug.tensor(np.arange(5, dtype=np.float32), device="ref")
    y = (x + 1).to("fake") * 3
    assert [i.kind for i in ug.schedule(y).items] == ["kernel", "copy", "kernel"]
    np.testing.assert_allclose(y.numpy(), (np.arange(5) + 1) * 3)
    assert y.to("ref").device == "ref"


def test_unusable_device_reason_is_reported(fake_plugin):
    rows = {r.name: r for r in registry.status()}
    assert rows["fake"].usable
    assert not rows["fake-broken"].usable
    assert "no such hardware here" in rows["fake-broken"].reason
    with pytest.raises(ValueError, match="no such hardware here"):
        ug.tensor([1.0], device="fake-broken")


def test_unknown_device_lists_available():
    with pytest.raises(ValueError) as e:
        ug.tensor([1.0], device="nope")
    assert "ref" in str(e.value) and "nope" in str(e.value)


def test_unsupported_dtype_is_a_clear_error(fake_plugin):
    class F32Only(RefDevice):
        dtypes = frozenset({np.dtype(np.float32)})

    registry.register(ug.DeviceSpec(name="f32only", factory=F32Only, plugin="test"))
    try:
        ug.tensor([1.0], device="f32only")
        with pytest.raises(TypeError, match="float64"):
            ug.tensor(np.zeros(2), device="f32only")
        x = ug.tensor([1.0], device="f32only")
        with pytest.raises(TypeError, match="int64"):
            x.astype(np.int64)
    finally:
        registry.unregister_device("f32only")


def _fake_dist(tmp_path, module_body):
    """A site dir with a distribution whose `ug` entry point is the given module."""
    (tmp_path / "ugtestplugin.py").write_text(textwrap.dedent(module_body))
    dist = tmp_path / "ugtestplugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ugtestplugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ug]\nugtestplugin = ugtestplugin\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))
    env.pop("UG_PLUGINS", None)
    env.pop("UG_DISABLE_PLUGINS", None)
    return env


def test_broken_entry_point_is_reported_not_fatal(tmp_path):
    env = _fake_dist(tmp_path, "raise ImportError('missing native library libfoo.so')\n")
    code = "import ug_core as ug; print('DEVICES', ug.devices())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "DEVICES" in out.stdout and "'ref'" in out.stdout
    assert "ugtestplugin" in out.stderr and "libfoo.so" in out.stderr   # the warning
    cli = subprocess.run([sys.executable, "-m", "ug_core", "devices"], env=env, capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert "ugtestplugin" in cli.stdout and "libfoo.so" in cli.stdout


def test_entry_point_plugin_is_loaded_and_can_be_disabled(tmp_path):
    env = _fake_dist(tmp_path, """
        import ug_core as ug
        from ug_core.ref import RefDevice

        @ug.hookimpl
        def ug_register_devices(register):
            register(ug.DeviceSpec(name="epdev", factory=RefDevice, plugin="ugtestplugin", version="0.1", priority=5))
    """)
    code = "import ug_core as ug, numpy as np; print(ug.devices()); print((ug.tensor([1.0, 2.0]) * 2).numpy())"
    env["UG_PLUGINS"] = "ugtestplugin"   # only this plugin (other backends may be installed)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "['epdev', 'ref']"   # preferred first
    assert "[2. 4.]" in out.stdout
    del env["UG_PLUGINS"]
    env["UG_DISABLE_PLUGINS"] = "ugtestplugin"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "epdev" not in out.stdout.splitlines()[0]
    del env["UG_DISABLE_PLUGINS"]
    env["UG_PLUGINS"] = "other"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.splitlines()[0] == "['ref']"


def test_fresh_registry_loads_ref_through_the_hook():
    reg = Registry()
    assert reg.usable()[-1] == "ref"
    assert reg.pm.has_plugin("ref")


def test_cli_devices_table():
    out = subprocess.run([sys.executable, "-m", "ug_core", "devices"], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr
    assert "device" in out.stdout and "plugin" in out.stdout and "ref" in out.stdout and "usable" in out.stdout


@pytest.mark.parametrize("level,expect", [(1, "schedule:"), (2, "kernel"), (3, "source")])
def test_debug_levels(level, expect):
    code = "import ug_core as ug, numpy as np; x = ug.tensor(np.ones((4, 4), np.float32), device='ref'); x.softmax().numpy()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=ROOT, UG_DEBUG=str(level)))
    assert out.returncode == 0, out.stderr
    assert expect in out.stderr
    if level >= 1:
        assert "ms" in out.stderr          # timings
    if level >= 2:
        assert "loop IR" in out.stderr     # the lowered IR


def test_compile_error_carries_the_source():
    class Broken(RefDevice):
        version = "broken-1"

        def compile(self, kernel):
            raise ValueError("backend cannot do this")

    registry.register(ug.DeviceSpec(name="brokencc", factory=Broken, plugin="test"))
    try:
        x = ug.tensor(np.ones(4, np.float32), device="brokencc")
        with pytest.raises(ug.CompileError) as e:
            (x.exp() + 1).numpy()
        assert "backend cannot do this" in str(e.value)
        assert "exp" in e.value.source and "kernel" in e.value.source
    finally:
        registry.unregister_device("brokencc")
