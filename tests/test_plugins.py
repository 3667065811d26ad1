"""The plugin surface: in-process plugins, broken entry points, unusable devices, the CLI."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ug_core as ug
import ug_core.plugins
from ug_core.cli import main as ug_main
from ug_core.hookspecs import CommandSpec
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
    if level >= 2:   # ref runs kernel IR itself: no loop IR to show (test_legalize checks a device that lowers)
        assert "kernel IR (ref)" in out.stderr and "loop IR" not in out.stderr


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


# --- one bad plugin never takes anything else down ------------------------------------------


@pytest.fixture
def only_ref(monkeypatch):
    """Fresh Registry instances load no entry points (fast, and only ref besides the test's own)."""
    monkeypatch.setenv("UG_PLUGINS", "")
    monkeypatch.delenv("UG_DISABLE_PLUGINS", raising=False)
    monkeypatch.delenv("UG_DEVICE", raising=False)


class _RaisingHookPlugin:
    """A plugin whose hook registers a device and then raises (or exits)."""

    def __init__(self, error):
        self.error = error

    @ug.hookimpl
    def ug_register_devices(self, register):
        register(ug.DeviceSpec(name="half-registered", factory=RefDevice, plugin="raising", priority=1))
        raise self.error


@pytest.mark.parametrize("error", [RuntimeError("boom in register"), SystemExit(3)], ids=["raises", "sys.exit"])
def test_hook_that_raises_is_a_broken_plugin_and_ref_survives(error, only_ref):
    reg = Registry()
    reg.pm.register(_RaisingHookPlugin(error), name="raising")   # as if loaded from an entry point
    with pytest.warns(RuntimeWarning, match="raising"):
        usable = reg.usable()
    assert usable == ["ref"]                 # nothing half-registered, ref still there
    assert reg.usable() == ["ref"]           # and on later calls too
    rows = {r.entry_point: r for r in reg.status()}
    assert not rows["raising"].usable and "broken plugin" in rows["raising"].reason
    assert ("boom in register" if isinstance(error, RuntimeError) else "sys.exit") in rows["raising"].reason
    assert rows["ref"].usable
    assert not reg.pm.has_plugin("raising")  # no further hook calls into it


def test_in_process_plugin_whose_hook_raises_is_reported(only_ref):
    reg = Registry()
    with pytest.warns(RuntimeWarning, match="boom in register"):
        reg.register_plugin(_RaisingHookPlugin(RuntimeError("boom in register")), name="raising")
    assert reg.usable() == ["ref"]
    assert "boom in register" in reg.broken_plugins["raising"]


def test_factory_returning_none_is_an_unusable_device_not_a_crash(only_ref):
    reg = Registry()
    reg.register(ug.DeviceSpec(name="nothing", factory=lambda: None, plugin="test", priority=1))
    assert reg.usable() == ["ref"]
    rows = {r.name: r for r in reg.status()}
    assert not rows["nothing"].usable and "returned NoneType, not a ug.Device" in rows["nothing"].reason
    with pytest.raises(ug.DeviceUnavailableError, match="not a ug.Device"):
        reg.get("nothing")


def test_keyboard_interrupt_in_a_factory_is_not_swallowed(only_ref):
    def interrupted():
        raise KeyboardInterrupt

    reg = Registry()
    reg.register(ug.DeviceSpec(name="ctrl-c", factory=interrupted, plugin="test"))
    with pytest.raises(KeyboardInterrupt):
        reg.usable()


_BAD_PLUGINS = {
    "exits-at-import": ("import sys\nsys.exit(7)\n", "sys.exit"),
    "hook-raises": ("""
        import ug_core as ug

        @ug.hookimpl
        def ug_register_devices(register):
            raise RuntimeError('cannot talk to the frobnicator')
    """, "frobnicator"),
    "factory-returns-none": ("""
        import ug_core as ug

        @ug.hookimpl
        def ug_register_devices(register):
            register(ug.DeviceSpec(name="nonedev", factory=lambda: None, plugin="ugtestplugin", priority=1))
    """, "not a ug.Device"),
    "command-hook-raises": ("""
        import ug_core as ug
        from ug_core.ref import RefDevice

        @ug.hookimpl
        def ug_register_devices(register):
            register(ug.DeviceSpec(name="cmddev", factory=RefDevice, plugin="ugtestplugin", priority=1))

        @ug.hookimpl
        def ug_register_commands(register):
            raise RuntimeError('no commands today')
    """, "its ug_register_commands hook raised RuntimeError: no commands today"),
}


@pytest.mark.parametrize("kind", list(_BAD_PLUGINS))
def test_bad_entry_point_plugin_is_a_row_in_ug_devices(tmp_path, kind):
    body, reason = _BAD_PLUGINS[kind]
    env = _fake_dist(tmp_path, body)
    cli = subprocess.run([sys.executable, "-m", "ug_core", "devices"], env=env, capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert reason in cli.stdout, cli.stdout
    rows = {line.split()[0] + " " + line.split()[1]: line for line in cli.stdout.splitlines() if line.strip()}
    assert "usable" in rows["ref ref"] and "not usable" not in rows["ref ref"]
    code = "import ug_core as ug, numpy as np; print('DEVICES', ug.devices()); print((ug.tensor([1.0, 2.0]) * 2).numpy())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "'ref'" in out.stdout and "[2. 4.]" in out.stdout


class _NamedPlugin:
    def __init__(self, plugin, priority):
        self.plugin, self.priority = plugin, priority

    @ug.hookimpl
    def ug_register_devices(self, register):
        register(ug.DeviceSpec(name="dup", factory=RefDevice, plugin=self.plugin, version=self.plugin,
                               priority=self.priority))


@pytest.mark.parametrize("priorities,winner", [((50, 60), "plugin-a"), ((60, 50), "plugin-b"), ((50, 50), "plugin-a")])
def test_duplicate_device_names_resolve_by_priority_then_name(priorities, winner, only_ref):
    a, b = _NamedPlugin("plugin-a", priorities[0]), _NamedPlugin("plugin-b", priorities[1])
    for order in ((a, b), (b, a)):   # the loading order does not matter
        reg = Registry()
        with pytest.warns(RuntimeWarning, match="'dup' is registered by both"):
            for p in order:
                reg.register_plugin(p, name=p.plugin)
        assert reg.specs["dup"].plugin == winner
        assert reg.get("dup").name == "dup"
        rows = [r for r in reg.status() if r.name == "dup"]
        assert [r.plugin for r in rows if r.usable] == [winner]
        loser = next(r for r in rows if not r.usable)
        assert loser.plugin != winner and "shadowed" in loser.reason and winner in loser.reason
        reg.unregister_device("dup")   # the shadowed one takes its place
        assert reg.specs["dup"].plugin == loser.plugin


def test_unknown_plugin_names_in_env_warn_with_the_known_ones(monkeypatch):
    from importlib import metadata

    installed = sorted(ep.name for ep in metadata.entry_points(group="ug"))
    for variable in ("UG_PLUGINS", "UG_DISABLE_PLUGINS"):
        monkeypatch.delenv("UG_PLUGINS", raising=False)
        monkeypatch.delenv("UG_DISABLE_PLUGINS", raising=False)
        monkeypatch.setenv(variable, "no-such-plugin,ref")
        reg = Registry()
        with pytest.warns(RuntimeWarning, match=f"{variable} names unknown plugin.*'no-such-plugin'") as caught:
            reg.load()
        message = str(caught[0].message)
        assert "entry-point names" in message and all(name in message for name in installed)
        assert "'ref'" not in message.split(";")[0]   # ref is a known (built-in) name


def test_unknown_ug_device_warns_with_the_known_ones(monkeypatch):
    monkeypatch.setenv("UG_PLUGINS", "")   # nothing but ref: fast
    monkeypatch.setenv("UG_DEVICE", "gpu0")
    reg = Registry()
    with pytest.warns(RuntimeWarning, match="UG_DEVICE='gpu0' is not a registered device.*ref"):
        assert reg.usable() == ["ref"]


def test_ug_devices_shows_entry_point_names_and_skipped_plugins(tmp_path):
    env = _fake_dist(tmp_path, "raise ImportError('never imported')\n")
    env["UG_DISABLE_PLUGINS"] = "ugtestplugin"
    cli = subprocess.run([sys.executable, "-m", "ug_core", "devices"], env=env, capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert "entry point" in cli.stdout.splitlines()[0]
    skipped = next(line for line in cli.stdout.splitlines() if "ugtestplugin" in line)
    assert "disabled by UG_DISABLE_PLUGINS" in skipped and "never imported" not in cli.stdout
    assert "take entry-point names" in cli.stdout


# --- `ug` commands that plugins contribute (ug_register_commands) ------------------------------


class _CommandPlugin:
    """A plugin contributing the given `ug` commands, then raising `error` if one is given."""

    def __init__(self, *commands, error=None):
        self.commands, self.error = commands, error

    @ug.hookimpl
    def ug_register_commands(self, register):
        for command in self.commands:
            register(command)
        if self.error is not None:
            raise self.error


def _greet_command(name="greet"):
    """A command whose arguments ug parses (it declares them with add_arguments)."""

    def add_arguments(parser):
        parser.add_argument("--who", default="world")

    def run(args):
        print(f"hello {args.who} {args.argv} {args.from_command_line}")
        return 3

    return CommandSpec(name=name, help="say hello", run=run, add_arguments=add_arguments)


def _echo_command(name="echo"):
    """A command that parses its own arguments (no add_arguments): it gets the raw rest."""
    return CommandSpec(name=name, help="print its arguments", run=lambda args: print("echo", args.argv))


@pytest.fixture
def cli_registry(only_ref, monkeypatch):
    """A fresh registry (ref and the test's plugins) that `ug_core.cli.main` uses."""
    reg = Registry()
    monkeypatch.setattr(ug_core.plugins, "registry", reg)
    return reg


def test_plugin_commands_run_and_are_listed_in_help(cli_registry, capsys):
    cli_registry.register_plugin(_CommandPlugin(_greet_command(), _echo_command()), name="greeter")
    assert ug_main(["greet", "--who", "ug"]) == 3
    assert capsys.readouterr().out == "hello ug ['--who', 'ug'] False\n"
    assert ug_main(["echo", "--who", "-h", "x"]) == 0   # not parsed by ug, --help included
    assert capsys.readouterr().out == "echo ['--who', '-h', 'x']\n"
    with pytest.raises(SystemExit) as exited:
        ug_main(["--help"])
    assert exited.value.code == 0
    listing = capsys.readouterr().out
    assert all(word in listing for word in ("devices", "demo", "greet", "say hello", "echo", "print its arguments"))
    with pytest.raises(SystemExit):
        ug_main(["greet", "--help"])
    assert "--who" in capsys.readouterr().out


@pytest.mark.parametrize("error", [RuntimeError("no commands today"), SystemExit(4)], ids=["raises", "sys.exit"])
def test_command_hook_that_raises_is_a_broken_plugin_not_a_crash(error, cli_registry, capsys):
    cli_registry.register_plugin(_CommandPlugin(_echo_command(), error=error), name="broken-commands")
    cli_registry.register_plugin(_CommandPlugin(_greet_command()), name="greeter")
    with pytest.warns(RuntimeWarning, match="'broken-commands' is broken: its ug_register_commands hook raised"):
        assert ug_main(["devices"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "broken-commands" in line)
    assert "broken plugin" in row and ("no commands today" if isinstance(error, RuntimeError) else "sys.exit") in row
    assert "preferred device: ref" in out
    assert ug_main(["greet"]) == 3                    # the other plugin's command works
    with pytest.raises(SystemExit) as exited:          # what the hook registered before raising is not kept
        ug_main(["echo"])
    assert exited.value.code == 2


def test_command_name_clashes_are_reported_and_the_first_kept(cli_registry, capsys):
    cli_registry.register_plugin(_CommandPlugin(_greet_command()), name="first")
    cli_registry.register_plugin(_CommandPlugin(_echo_command("greet"), _echo_command("devices")), name="second")
    with pytest.warns(RuntimeWarning) as caught:
        assert ug_main(["greet"]) == 3
    messages = [str(w.message) for w in caught]
    assert any("'second'" in m and "'greet'" in m and "plugin 'first'" in m for m in messages), messages
    assert any("'second'" in m and "'devices'" in m and "a built-in command" in m for m in messages), messages
    capsys.readouterr()
    assert ug_main(["devices"]) == 0                  # still the built-in one
    assert "preferred device: ref" in capsys.readouterr().out


def test_command_whose_add_arguments_raises_is_left_out(cli_registry, capsys):
    def conflicting(parser):
        parser.add_argument("--x")
        parser.add_argument("--x")   # argparse.ArgumentError: conflicting option string

    bad = CommandSpec(name="bad", help="declares --x twice", run=lambda args: 0, add_arguments=conflicting)
    cli_registry.register_plugin(_CommandPlugin(bad, _greet_command()), name="mixed")
    with pytest.warns(RuntimeWarning, match="command 'bad' is left out: its add_arguments raised ArgumentError"):
        assert ug_main(["greet"]) == 3
        with pytest.raises(SystemExit):
            ug_main(["bad"])


def test_unknown_command_names_the_plugins_not_loaded(cli_registry, capsys):
    cli_registry.load()
    if not cli_registry.skipped_plugins:
        pytest.skip("no plugin installed for UG_PLUGINS to leave out")
    with pytest.raises(SystemExit):
        ug_main(["bench"])
    err = capsys.readouterr().err
    assert "plugins not loaded (UG_PLUGINS, UG_DISABLE_PLUGINS)" in err and "invalid choice: 'bench'" in err


def test_entry_point_plugin_command(tmp_path):
    env = _fake_dist(tmp_path, """
        import ug_core as ug
        from ug_core.hookspecs import CommandSpec

        @ug.hookimpl
        def ug_register_commands(register):
            register(CommandSpec(name="hello", help="greets from a plugin", run=lambda args: print("hello", args.argv)))
    """)
    out = subprocess.run([sys.executable, "-m", "ug_core", "hello", "a", "--b"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "hello ['a', '--b']\n"
    listing = subprocess.run([sys.executable, "-m", "ug_core", "--help"], env=env, capture_output=True, text=True,
                             timeout=120)
    assert listing.returncode == 0 and "greets from a plugin" in listing.stdout, listing.stderr


# --- devices() does not start hardware --------------------------------------------------------


class _CountingSpec:
    """A spec whose probe and factory count their calls."""

    def __init__(self, name, probe_error=None, factory_error=None, priority=1):
        self.probes = self.factories = 0

        def probe():
            self.probes += 1
            if probe_error:
                raise RuntimeError(probe_error)

        def factory():
            self.factories += 1
            if factory_error:
                raise RuntimeError(factory_error)
            return RefDevice()

        self.spec = ug.DeviceSpec(name=name, factory=factory, plugin="test", priority=priority, probe=probe)


def test_devices_probes_and_creates_on_first_use(only_ref):
    reg = Registry()
    lazy = _CountingSpec("lazy")
    reg.register(lazy.spec)
    assert reg.usable() == ["lazy", "ref"] and reg.usable() == ["lazy", "ref"]
    assert (lazy.probes, lazy.factories) == (1, 0)        # probed once, not created
    reg.get("lazy")
    reg.get("lazy")
    assert (lazy.probes, lazy.factories) == (1, 1)


def test_failed_probe_is_unusable_and_never_created(only_ref):
    reg = Registry()
    absent = _CountingSpec("absent", probe_error="libabsent.so: cannot open shared object file")
    reg.register(absent.spec)
    assert reg.usable() == ["ref"]
    with pytest.raises(ug.DeviceUnavailableError, match="libabsent.so"):
        reg.get("absent")
    assert absent.factories == 0


def test_device_that_fails_to_start_after_its_probe_is_skipped_and_reported(only_ref):
    reg = Registry()
    flaky = _CountingSpec("flaky", factory_error="no GPU in this container")
    reg.register(flaky.spec)
    assert reg.usable() == ["flaky", "ref"]               # its probe passed
    assert reg.preferred() == "ref"                       # the preferred device falls through to one that starts
    assert reg.usable() == ["ref"]                        # and it is left out from now on
    with pytest.raises(ug.DeviceUnavailableError, match="no GPU in this container"):
        reg.get("flaky")
    assert flaky.factories == 1
    row = next(r for r in reg.status() if r.name == "flaky")
    assert not row.usable and "no GPU in this container" in row.reason


def test_devices_initialize_true_creates_each_device(only_ref):
    reg = Registry()
    flaky = _CountingSpec("flaky", factory_error="no GPU")
    reg.register(flaky.spec)
    assert reg.usable(initialize=True) == ["ref"]


def test_devices_does_not_start_the_installed_backends():
    code = "import ug_core as ug; names = ug.devices(); print(names, sorted(ug.registry.devices))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("['ref']"), out.stdout   # only ref (no probe: its factory is free) was created


# --- backend settings: a bad value is an error naming the variable -------------------------------


def test_bad_ug_llvm_setting_is_an_error_naming_the_variable(tmp_path):
    pytest.importorskip("ug_llvm")
    env = dict(os.environ, PYTHONPATH=ROOT, UG_PLUGINS="llvm", UG_LLVM_OUTER_BLOCK="sixty-four")
    cli = subprocess.run([sys.executable, "-m", "ug_core", "devices"], env=env, capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    cpu = next(line for line in cli.stdout.splitlines() if line.startswith("cpu "))
    assert "not usable" in cpu and "UG_LLVM_OUTER_BLOCK='sixty-four' is not an integer" in cpu, cli.stdout
    code = textwrap.dedent("""
        import ug_core as ug
        print(ug.devices())
        try:
            ug.tensor([1.0], device="cpu")
        except ug.DeviceUnavailableError as e:
            print("ERROR", e)
    """)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "['ref']"
    assert "ERROR" in out.stdout and "UG_LLVM_OUTER_BLOCK" in out.stdout
    assert "UG_LLVM_OUTER_BLOCK" in out.stderr   # warned, not silent


def test_env_helpers_name_the_variable(monkeypatch):
    from ug_core import env

    monkeypatch.setenv("UG_TEST_INT", "12x")
    with pytest.raises(ug.ConfigError, match="UG_TEST_INT='12x' is not an integer"):
        env.env_int("UG_TEST_INT", 3)
    monkeypatch.setenv("UG_TEST_INT", "-1")
    with pytest.raises(ug.ConfigError, match="UG_TEST_INT='-1' must be at least 0"):
        env.env_int("UG_TEST_INT", 3, minimum=0)
    monkeypatch.setenv("UG_TEST_INT", " 7 ")
    assert env.env_int("UG_TEST_INT", 3) == 7
    monkeypatch.setenv("UG_TEST_FLAG", "maybe")
    with pytest.raises(ug.ConfigError, match="UG_TEST_FLAG='maybe' is not a boolean"):
        env.env_flag("UG_TEST_FLAG", False)
    monkeypatch.setenv("UG_TEST_CHOICE", "blas")
    with pytest.raises(ug.ConfigError, match="UG_TEST_CHOICE='blas' is not one of ug, numpy"):
        env.env_choice("UG_TEST_CHOICE", "ug", ("ug", "numpy"))
    monkeypatch.setenv("UG_TEST_SET", "int64,int63")
    with pytest.raises(ug.ConfigError, match="UG_TEST_SET names unknown value.*'int63'"):
        env.env_set("UG_TEST_SET", ("int64", "float64"))
    # read at import (strict=False): the default now, the error from check(prefix) later
    assert env.env_int("UG_TEST_INT_LAX", 5, strict=False) == 5
    monkeypatch.setenv("UG_TESTLAX_N", "x")
    assert env.env_int("UG_TESTLAX_N", 5, strict=False) == 5
    with pytest.raises(ug.ConfigError, match="UG_TESTLAX_N='x'"):
        env.check("UG_TESTLAX_")
    monkeypatch.delitem(env._invalid, "UG_TESTLAX_N")


def test_bad_ug_vulkan_setting_is_an_error_naming_the_variable(monkeypatch):
    settings = pytest.importorskip("ug_vulkan.settings")
    monkeypatch.setenv("UG_VULKAN_DISABLE", "int64,fp64")
    with pytest.raises(ug.ConfigError, match="UG_VULKAN_DISABLE names unknown value.*'fp64'"):
        settings.check_settings()
    monkeypatch.delenv("UG_VULKAN_DISABLE")
    monkeypatch.setenv("UG_VULKAN_DEVICE", "first")
    with pytest.raises(ug.ConfigError, match="UG_VULKAN_DEVICE='first'"):
        settings.check_settings()
