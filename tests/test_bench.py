"""`ug bench` runs every workload end to end (tiny sizes) and checks ug against numpy."""

import ug_core as ug
from ug_core.bench import WORKLOADS, main, run_bench


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
