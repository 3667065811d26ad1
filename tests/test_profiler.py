"""ug.profile() (ug_core/profiler.py) on the ref device: every item kind is recorded and listed
by the table, compiles are events of their own (present on a cold cache, absent warm), the
Chrome trace is well formed, replays (realize's and ug.jit's) are recorded while a profile is
active and cost nothing otherwise, profiles nest and record every thread, UG_DEBUG=1 prints the
same table, and long compiles show progress."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import ug_core as ug
from ug_core import profiler, runtime, steps
from ug_core.plugins import registry
from ug_core.ref import RefDevice
from ug_core.testing.test_profile import check_chrome_trace


@pytest.fixture
def ref2():
    """A second host device, so that a transfer is a copy item."""
    registry.register(ug.DeviceSpec(name="ref2", factory=RefDevice, plugin="test"))
    yield "ref2"
    registry.unregister_device("ref2")


def _double(out, a):
    out[...] = a * 2


def test_every_item_kind_is_recorded_and_tabled(compile_cache, ref2):
    rng = np.random.default_rng(0)
    a_np, b_np = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
    a, b = ug.tensor(a_np, device="ref"), ug.tensor(b_np, device="ref")
    with ug.profile() as p:
        results = [
            ((a @ b).exp(), np.exp(a_np @ b_np)),
            (ug.sort(a, axis=1), np.sort(a_np, axis=1)),
            (ug.fft.fft(a, axis=1), np.fft.fft(a_np, axis=1)),
            (ug.custom(_double, [a], a.shape, a.dtype), a_np * 2),
            (a.to(ref2), a_np),
        ]
        values = [t.numpy() for t, _ in results]
    for value, (_, want) in zip(values, results):
        if want is not None:
            np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5)
    kinds = {e.kind for e in p.events}
    # (ref has no fused attention item: ug_core/testing/test_profile.py checks it where a device has one)
    assert {"kernel", "matmul", "sort", "fft", "custom", "copy", "compile", "schedule"} <= kinds
    items = [e for e in p.events if e.kind in profiler.ITEM_KINDS]
    table = p.table()
    text = str(table)
    assert sum(r["calls"] for r in table.rows) == len(items)
    for e in items:
        assert e.detail in text and e.bytes > 0 and e.end_ns >= e.start_ns
        assert e.device == ("ref2" if e.kind == "copy" else "ref")
    (mm,) = [e for e in items if e.kind == "matmul"]
    assert mm.flops == 2 * 6 * 5 * 4
    (cp,) = [e for e in items if e.kind == "copy"]
    assert cp.bytes == 2 * 6 * 5 * 4   # read from ref, written on ref2
    assert "custom _double((6, 5))" in text and [e.name for e in items if e.kind == "custom"] == ["test_profiler._double"]
    assert p.compile_seconds > 0 and p.run_seconds > 0


def test_table_groups_repeated_items_and_counts_compiles_once(compile_cache):
    x = ug.tensor(np.arange(23, dtype=np.float32), device="ref")
    with ug.profile() as p:
        for _ in range(3):
            (x * 3.0 - 1.0).numpy()
    rows = p.table().rows
    assert len(rows) == 1 and rows[0]["calls"] == 3 and rows[0]["kind"] == "kernel"
    compiles = [e for e in p.events if e.kind == "compile"]
    assert len(compiles) == 1 and rows[0]["compile_s"] == pytest.approx(compiles[0].seconds)
    assert rows[0]["bytes"] == 3 * (23 * 4 + 23 * 4 + 4)   # x, the result, the scalar 3.0 (1.0 is folded)
    assert "calls" in str(p.table()) and "mean ms" in str(p.table())


def test_a_kernel_compiled_but_not_run_is_a_compile_row(compile_cache):
    x = ug.tensor(np.ones(31, np.float32), device="ref")
    with ug.profile() as p:
        runtime.compile_schedule(ug.schedule((x * 7.0).exp()))   # compiled, never run
    (row,) = p.table().rows
    assert row["kind"] == "compile" and row["calls"] == 0 and row["compile_s"] > 0 and "compiled, not run" in row["detail"]
    assert p.run_seconds == 0 and p.compile_seconds == pytest.approx(row["compile_s"])


def test_compile_events_on_a_cold_cache_only(compile_cache):
    x = ug.tensor(np.ones((13, 17), np.float32), device="ref")
    x.realize()
    with ug.profile() as cold:
        x.max(axis=0).numpy()
    with ug.profile() as warm:
        x.max(axis=0).numpy()   # the same graph structure: the realize replay
    (compile_event,) = [e for e in cold.events if e.kind == "compile"]
    (item,) = [e for e in cold.events if e.kind == "kernel"]
    assert compile_event.program == item.program and compile_event.end_ns <= item.start_ns
    assert [e.kind for e in warm.events] == ["kernel", "schedule"]
    assert warm.events[1].name == "realize (replay)"
    assert [e["cat"] for e in check_chrome_trace(warm.chrome_trace())] == ["schedule", "kernel"]


def test_chrome_trace_file(compile_cache, tmp_path):
    x = ug.tensor(np.ones((19, 3), np.float32), device="ref")
    with ug.profile() as p:
        (x.exp() @ x.T).sum(axis=0).numpy()
    path = tmp_path / "t.json"
    assert p.export_chrome_trace(path) == str(path)
    trace = json.loads(path.read_text())
    events = check_chrome_trace(trace)
    by_cat = {}
    for ev in events:
        by_cat.setdefault(ev["cat"], []).append(ev)
    (run,) = by_cat["schedule"]
    assert len(by_cat["kernel"]) + len(by_cat["matmul"]) == len([e for e in p.events if e.kind in profiler.ITEM_KINDS])
    for ev in by_cat["kernel"] + by_cat["matmul"]:   # items nest in their schedule run
        assert run["ts"] <= ev["ts"] and ev["ts"] + ev["dur"] <= run["ts"] + run["dur"] + 1e-3
        assert ev["args"]["device"] == "ref" and ev["args"]["bytes"] > 0
    assert by_cat["matmul"][0]["args"]["flops"] == 2 * 19 * 3 * 19 and "GFLOP/s" in by_cat["matmul"][0]["args"]
    assert len(by_cat["compile"]) == len(by_cat["kernel"]) and by_cat["compile schedule"]
    meta = [ev for ev in trace["traceEvents"] if ev["ph"] == "M"]
    assert {"process_name", "thread_name"} == {ev["name"] for ev in meta}


def test_jit_calls_are_recorded_only_while_profiling(compile_cache):
    f = ug.jit(lambda a, b: a * b + 1)
    x, y = ug.tensor(np.arange(8, dtype=np.float32), device="ref"), ug.tensor(np.ones(8, np.float32), device="ref")
    f(x, y)
    f(x, y)   # now the last call's fast replay
    with ug.profile() as p:
        outs = [f(x, y).numpy() for _ in range(4)]
    for out in outs:
        np.testing.assert_array_equal(out, np.arange(8) + 1)
    runs = [e for e in p.events if e.kind == "schedule"]
    assert len(runs) == 4 and all(e.name == "ug.jit replay" for e in runs)
    assert len([e for e in p.events if e.kind == "kernel"]) == 4
    assert profiler.active == ()
    np.testing.assert_array_equal(f(x, y).numpy(), np.arange(8) + 1)   # the fast path again, unrecorded
    assert len(p.events) == 8


def test_a_jit_trace_inside_a_profile_records_its_compile_and_first_run(compile_cache):
    f = ug.jit(lambda a: (a - 2.5).abs().sum())
    x = ug.tensor(np.arange(29, dtype=np.float32), device="ref")
    with ug.profile() as p:
        assert f(x).item() == pytest.approx(np.abs(np.arange(29) - 2.5).sum())
    kinds = [e.kind for e in p.events]
    assert kinds.count("compile") == 1 and kinds.count("kernel") == 1 and kinds.count("schedule") == 1


def test_no_timed_path_while_off(compile_cache, monkeypatch):
    """Off, neither a realize (first or replayed) nor a jit call takes the timed path."""
    def boom(*args, **kwargs):
        raise AssertionError("timed path taken without a profile")
    monkeypatch.setattr(steps, "run_timed", boom)
    x = ug.tensor(np.ones(10, np.float32), device="ref")
    for _ in range(2):
        (x + 2.0).numpy()
    f = ug.jit(lambda a: a * 4.0)
    for _ in range(3):
        f(x)
    assert profiler.active == ()


def test_profiles_nest_and_a_profile_is_entered_once(compile_cache):
    x = ug.tensor(np.ones(7, np.float32), device="ref")
    with ug.profile() as outer:
        (x + 1.0).numpy()
        with ug.profile() as inner:
            (x * 5.0).numpy()
            with pytest.raises(RuntimeError, match="already recording"):
                inner.__enter__()
        (x - 1.0).numpy()
    assert len([e for e in outer.events if e.kind == "kernel"]) == 3
    assert len([e for e in inner.events if e.kind == "kernel"]) == 1
    assert profiler.active == ()


def test_profile_records_every_thread(compile_cache):
    xs = [ug.tensor(np.full(11, i, np.float32), device="ref") for i in range(3)]
    barrier = threading.Barrier(3)
    results = {}

    def work(i):
        barrier.wait()
        results[i] = (xs[i] * 2.0).numpy()
    with ug.profile() as p:
        threads = [threading.Thread(target=work, args=(i,), name=f"worker-{i}") for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for i in range(3):
        np.testing.assert_array_equal(results[i], np.full(11, 2 * i))
    assert len({e.thread for e in p.events if e.kind == "kernel"}) == 3
    trace = p.chrome_trace()
    check_chrome_trace(trace)
    names = {ev["args"]["name"] for ev in trace["traceEvents"] if ev["name"] == "thread_name"}
    assert {"worker-0", "worker-1", "worker-2"} <= names


def test_an_item_that_raises_leaves_the_profile_usable(compile_cache):
    def bad(out, a):
        raise ValueError("nope")
    x = ug.tensor(np.ones(5, np.float32), device="ref")
    with ug.profile() as p:
        with pytest.raises(ValueError, match="nope"):
            ug.custom(bad, [x], x.shape, x.dtype).numpy()
        (x + 3.0).numpy()
    assert [e.kind for e in p.events if e.kind in profiler.ITEM_KINDS] == ["kernel"]
    assert profiler.active == ()


def test_ug_debug_prints_the_profile_table(compile_cache, monkeypatch, capsys):
    monkeypatch.setenv("UG_DEBUG", "1")
    x = ug.tensor(np.ones((9, 4), np.float32), device="ref")
    (x.exp() @ x.T).numpy()
    err = capsys.readouterr().err
    assert "schedule:" in err and "compiled " in err and " on ref in " in err
    header = next(line for line in err.splitlines() if "compile ms" in line)
    assert header.split() == ["#", "kind", "device", "compile", "ms", "run", "ms", "bytes", "GB/s", "GFLOP/s", "item"]
    assert "matmul (9, 4) @ (4, 9)" in err and "total" in err


def test_long_compiles_show_progress(compile_cache, monkeypatch, capsys):
    monkeypatch.setattr(profiler, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(profiler, "PROGRESS_EVERY_S", 0.0)
    x = ug.tensor(np.ones((3, 41), np.float32), device="ref")

    def many_kernels():   # a schedule of several new kernels (each sort cuts the fusion)
        return ug.sort(ug.sort(x.exp(), axis=1) * 2.0 + x, axis=1).sum(axis=1).numpy()
    monkeypatch.setenv("UG_COMPILE_PROGRESS", "1")
    many_kernels()
    err = capsys.readouterr().err
    assert "ug: compiling kernels: 1 new" in err and "ug: compiled " in err and "new kernels in" in err
    compile_cache.clear()
    monkeypatch.setenv("UG_COMPILE_PROGRESS", "0")
    many_kernels()
    assert "ug: compil" not in capsys.readouterr().err
    compile_cache.clear()
    monkeypatch.delenv("UG_COMPILE_PROGRESS")
    many_kernels()   # unset: only on a terminal or in Jupyter, and pytest's stderr is neither
    assert "ug: compil" not in capsys.readouterr().err


def test_backend_compiles_inside_an_item_count_as_its_compile_time():
    """A device that compiles on first use (a GEMM) reports it through the kit's CachedCompiler:
    the time goes to the item's compile_ns and is a nested "backend compile" event."""
    with ug.profile() as p:
        outer = profiler.begin_item()
        start = profiler.time.perf_counter_ns()
        profiler.backend_compiled("test", "gemm_x", "compiled", start)
        spent = profiler.end_item(outer)
    assert outer is None and spent > 0
    (ev,) = p.events
    assert ev.kind == "backend compile" and ev.detail == "compiled" and ev.end_ns - ev.start_ns == spent


def test_trace_to_html_embeds_the_trace_safely(compile_cache, tmp_path):
    """scripts/trace_to_html.py (the docs' picture): the page carries every event, and an event
    name holding "</script>" cannot end the page's script."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "scripts" / "trace_to_html.py"
    spec = importlib.util.spec_from_file_location("trace_to_html", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = ug.tensor(np.ones(6, np.float32), device="ref")
    with ug.profile() as p:
        (x + 4.0).numpy()
    trace = p.chrome_trace()
    trace["traceEvents"].append({"name": "</script><b>", "cat": "kernel", "ph": "X", "ts": 0, "dur": 1, "pid": 1,
                                 "tid": 1, "args": {}})
    page = module.render(trace, "a <title>", (0.0, 1.0))
    assert page.count("</script>") == 1 and "<\\/script>" in page and "a &lt;title&gt;" in page
    embedded = page.split("const trace = ", 1)[1].split(";\nconst view", 1)[0]
    assert json.loads(embedded.replace("<\\/", "</")) == trace
