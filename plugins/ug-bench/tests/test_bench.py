"""`ug bench` runs every workload end to end (tiny sizes) and checks ug against numpy."""

import numpy as np
import pytest

from ug_bench.bench import WORKLOADS, main, run_bench


def test_bench_small_all_workloads_match_numpy(device):
    lines = []
    results = run_bench([device], None, scale=64, repeat=1, torch_compile=False, out=lines.append)
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
                           "--no-torch-compile"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{BLAS_SPIN_ENV}=4" in done.stdout and "ug:ref" in done.stdout


def test_ug_bench_is_a_command_of_the_plugin(capsys):
    # registered through ug_register_commands; called from Python (not a command line), it runs
    # in this process instead of restarting it
    from ug_core.cli import main as ug_main

    argv = ["bench", "--device", "ref", "--workloads", "W8a", "--scale", "256", "--repeat", "1", "--no-torch-compile"]
    assert ug_main(argv) == 0
    assert "ug:ref" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        ug_main(["--help"])
    assert "benchmark ug against numpy/torch" in capsys.readouterr().out


def test_bench_labels_show_the_scaled_sizes():
    import re

    lines = []
    run_bench(["ref"], ["W1", "W3", "W5a", "W6a", "W7", "W8a"], scale=16, repeat=1, torch_compile=False, out=lines.append)
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
