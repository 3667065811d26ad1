"""`ug bench` runs every workload end to end (tiny sizes) and checks ug against numpy."""

import numpy as np
import pytest

from ug_bench.bench import WORKLOADS, main, run_bench


def test_bench_small_all_workloads_match_numpy(device):
    lines = []
    # the peers of this run are numpy and torch: JAX's and tinygrad's rows have tests of their own
    results = run_bench([device], None, scale=64, repeat=1, torch_compile=False, out=lines.append,
                        peer_names=("numpy", "torch"))
    assert {w.name for w, _, _ in results} == {w.name for w in WORKLOADS}
    for w, rows, _ in results:
        ug_rows = [r for r in rows if r.impl == f"ug:{device}"]
        assert ug_rows and ug_rows[0].seconds is not None, (w.name, ug_rows[0].note)
        assert ug_rows[0].ok, w.name
    assert any("x vs numpy" in line for line in lines)


def test_bench_cli_quick(capsys):
    assert main(["--device", "ref", "--workloads", "W1,W8a", "--scale", "256", "--repeat", "1", "--no-torch-compile"]) == 0
    out = capsys.readouterr().out
    assert "machine:" in out and "W1" in out and "W8a" in out and "ug:ref" in out


def test_bench_command_quiets_openblas_spinning(monkeypatch):
    # `ug bench` restarts itself with OpenBLAS's idle threads sleeping (their spinning halves
    # the speed of whatever is timed after numpy); --blas-spin or a set variable keep it as is
    import subprocess
    import sys

    from ug_bench.bench import BLAS_SPIN_ENV, quiet_blas_command

    monkeypatch.delenv(BLAS_SPIN_ENV, raising=False)
    assert quiet_blas_command(["--repeat", "1"])[-2:] == ["--repeat", "1"]
    assert quiet_blas_command(["--blas-spin"]) is None
    monkeypatch.setenv(BLAS_SPIN_ENV, "28")
    assert quiet_blas_command([]) is None
    monkeypatch.delenv(BLAS_SPIN_ENV)
    done = subprocess.run([sys.executable, "-c", "import sys; from ug_core.cli import main; sys.exit(main())",
                           "bench", "--device", "ref", "--workloads", "W8a", "--scale", "256", "--repeat", "1",
                           "--no-torch-compile", "--peers", "numpy"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{BLAS_SPIN_ENV}=4" in done.stdout and "ug:ref" in done.stdout


def test_ug_bench_is_a_command_of_the_plugin(capsys):
    # registered through ug_register_commands; called from Python (not a command line), it runs
    # in this process instead of restarting it
    from ug_core.cli import main as ug_main

    argv = ["bench", "--device", "ref", "--workloads", "W8a", "--scale", "256", "--repeat", "1", "--no-torch-compile",
            "--peers", "numpy"]
    assert ug_main(argv) == 0
    assert "ug:ref" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        ug_main(["--help"])
    assert "benchmark ug against numpy/torch" in capsys.readouterr().out


def test_bench_labels_show_the_scaled_sizes():
    import re

    lines = []
    run_bench(["ref"], ["W1", "W3", "W5a", "W6a", "W7", "W8a"], scale=16, repeat=1, torch_compile=False, out=lines.append,
              peer_names=("numpy",))
    labels = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in lines if line.startswith("| W")}
    assert labels["W1"] == "exp(x)*sin(x)+x*x, 1M"          # 16M / 16
    assert labels["W3"] == "row softmax 256x4096"
    assert labels["W5a"] == "sum of 2M"
    assert labels["W6a"] == "matmul 64x1024x1024"
    assert labels["W7"] == "attention 16h x 64 x 64"
    assert labels["W8a"] == "tiny add (64 el.)"             # not scaled
    assert not any(re.search(r"\b16M\b|\b32M\b|4096x4096|1024\^3", label) for label in labels.values())


def test_bench_labels_at_full_size():
    rng = np.random.default_rng(0)
    by_name = {w.name: w for w in WORKLOADS}
    w1 = by_name["W1"]
    assert w1.title([np.broadcast_to(np.float32(0), (16 * 2**20,))]) == "exp(x)*sin(x)+x*x, 16M"
    assert by_name["W6b"].title([np.empty((2048, 2048), np.float32)] * 2) == "matmul 2048^3"
    assert by_name["W4"].title(by_name["W4"].make_inputs(rng, 8)) == "layernorm 1024x1024 (+w,b)"


# --- JAX and tinygrad, the optional peers ---------------------------------------------------------


def _rows(results, impl):
    return {w.name: r for w, rows, _ in results for r in rows if r.impl == impl}


def test_jax_computes_every_workload_like_numpy():
    # JAX (jax.jit; eagerly on the rows whose output shape depends on the data) on every W row:
    # each result agrees with numpy's and is timed
    pytest.importorskip("jax")
    results = run_bench([], None, scale=256, repeat=1, torch_compile=False, out=lambda line: None, peer_names=("jax",))
    rows = _rows(results, "jax")
    assert set(rows) == {w.name for w in WORKLOADS}
    bad = {name: r.note for name, r in rows.items() if not (r.ok and r.seconds is not None)}
    assert not bad, bad


def _tinygrad_or_skip():
    from ug_bench import peers

    pytest.importorskip("tinygrad")
    try:
        return peers.tinygrad()
    except peers.Unavailable as e:   # installed, but no clang or libLLVM to compile with
        pytest.skip(str(e))


def test_tinygrad_computes_the_workloads_it_spells_its_own_way(monkeypatch):
    # tinygrad compiles each workload for 1-3 s on this machine, so the test takes the rows where
    # it is spelled differently from ug (pad, cat, var, round/clip, argmax, cumsum) and one it
    # lacks (bincount); each of the others ran at full size for docs/benchmarks.md
    _tinygrad_or_skip()
    from ug_bench import workloads

    monkeypatch.setitem(workloads.TINYGRAD_LIMITS, "cumsum", 2**12)   # W11 at this scale: 64K elements
    names = ["W4", "W9", "W10", "W12", "W13", "W14", "W19", "W11"]
    lines = []
    results = run_bench(["ref"], names, scale=256, repeat=1, torch_compile=False, out=lines.append,
                        peer_names=("numpy", "tinygrad"))
    rows = _rows(results, "tinygrad")
    assert set(rows) == set(names)
    for name in ["W4", "W9", "W10", "W12", "W13", "W14"]:
        assert rows[name].ok and rows[name].seconds is not None, (name, rows[name].note)
    assert rows["W19"].seconds is None and rows["W19"].note == "skipped: tinygrad has no bincount"
    assert rows["W11"].seconds is None and "cumsum grows as n^2" in rows["W11"].note
    # the best peer is chosen among every peer that ran, tinygrad included
    assert any(line.startswith("| W") and ("x vs tinygrad" in line or "x vs numpy" in line) for line in lines)


def test_missing_peers_are_skipped_with_a_note(monkeypatch):
    # without JAX or tinygrad (or where they cannot run) their rows say so; the rest runs
    from ug_bench import peers

    def missing(name):
        def fail(*args, **kwargs):
            raise peers.Unavailable(f"{name} not installed (No module named '{name}')")
        return fail
    monkeypatch.setattr(peers, "jax_numpy", missing("jax"))
    monkeypatch.setattr(peers, "tinygrad", missing("tinygrad"))
    lines = []
    results = run_bench(["ref"], ["W1"], scale=256, repeat=1, torch_compile=False, out=lines.append,
                        peer_names=("numpy", "jax", "tinygrad"))
    (w, rows, _), = results
    by_impl = {r.impl: r for r in rows}
    assert by_impl["jax"].seconds is None and by_impl["jax"].note == "skipped: jax not installed (No module named 'jax')"
    assert by_impl["tinygrad"].note.startswith("skipped: tinygrad not installed")
    assert by_impl["ug:ref"].ok and by_impl["ug:ref"].seconds is not None
    assert any("x vs numpy" in line for line in lines)


def test_a_peer_that_disagrees_with_numpy_is_reported_not_timed(monkeypatch):
    from ug_bench import bench

    def wrong_jax(fn, inputs, jit=True):
        return lambda: fn(np, *inputs) + 1.0   # off by one everywhere
    monkeypatch.setattr(bench.peers, "jax_runner", wrong_jax)
    lines = []
    results = run_bench(["ref"], ["W1"], scale=256, repeat=1, torch_compile=False, out=lines.append,
                        peer_names=("numpy", "jax"))
    rows = {r.impl: r for r in results[0][1]}
    assert not rows["jax"].ok and rows["jax"].seconds is None
    assert rows["jax"].note == "MISMATCH against numpy: not timed"
    jax_line = next(line for line in lines if "| jax " in line)
    assert "MISMATCH" in jax_line
    ug_line = next(line for line in lines if "ug:ref" in line)
    assert "x vs numpy" in ug_line   # the wrong peer is not the best


def test_bench_rejects_unknown_peers(capsys):
    with pytest.raises(SystemExit):
        main(["--device", "ref", "--workloads", "W8a", "--peers", "numpy,mxnet"])
    assert "unknown peers ['mxnet']" in capsys.readouterr().err


def test_tinygrad_limits_name_the_sizes():
    from ug_bench.workloads import PeerLacks, w11, w21

    class Big:   # what the limit reads of a tinygrad tensor: its element count
        def numel(self):
            return 16 * 2**20
    with pytest.raises(PeerLacks, match="cumsum grows as n.2 .one-hot.: 16M elements > 1M"):
        w11("tinygrad", Big())
    with pytest.raises(PeerLacks, match="masked_select grows as n.2 .one-hot.: 16M elements > 256K"):
        w21("tinygrad", Big())


# --- ug bench --compile ---------------------------------------------------------------------------


def test_cold_start_children_get_empty_caches_of_their_own(tmp_path, monkeypatch):
    # the variables each implementation reads for its compilation cache point into the child's
    # new directory (ug's is checked through ug itself); a user's own UG_*_CACHE_DIR is dropped
    import subprocess
    import sys

    from ug_bench.coldstart import fresh_cache_env

    monkeypatch.setenv("UG_LLVM_CACHE_DIR", "/somewhere/warm")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/somewhere/warm/jax")
    env = fresh_cache_env(str(tmp_path))
    assert "UG_LLVM_CACHE_DIR" not in env and "JAX_COMPILATION_CACHE_DIR" not in env
    assert env["JAX_ENABLE_COMPILATION_CACHE"] == "false"
    for key in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "CACHEDB"):
        assert env[key].startswith(str(tmp_path)), key
    where = subprocess.run([sys.executable, "-c", "from ug_core.diskcache import cache_dir; "
                            "print(cache_dir('llvm', 'UG_LLVM_CACHE_DIR'))"], env=env, capture_output=True,
                           text=True, timeout=120)
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip() == str(tmp_path / "ug" / "llvm")


def test_bench_compile_prints_cold_compile_per_implementation(capsys):
    # one workload, one fresh process per implementation: ug on ref and JAX where installed
    from ug_bench.coldstart import run_cold

    peers = ["jax"] if _usable_jax() else []
    lines = []
    assert run_cold(["ref"], ["W8b"], scale=256, repeat=1, peer_names=peers, out=lines.append) == 0
    rows = [line for line in lines if line.startswith("| W8b")]
    assert len(rows) == 1 + len(peers)
    ug_row = next(line for line in rows if "ug:ref" in line)
    cells = [c.strip() for c in ug_row.split("|")]
    assert cells[4].endswith(" s") and cells[7].endswith(" s") and cells[-1] == "ok"
    if peers:
        assert "x vs jax" in ug_row


def _usable_jax():
    from ug_bench import peers

    try:
        peers.jax_numpy()
        return True
    except peers.Unavailable:
        return False
