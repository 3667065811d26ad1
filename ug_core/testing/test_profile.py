"""ug.profile() on every device: each item run is recorded with its device, bytes and time, a
kernel compiled on a cold cache is a compile event of its own (absent when warm), and the
Chrome trace is well formed (`check_chrome_trace`, which tests/test_profiler.py uses too)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

import ug_core as ug
from ug_core import profiler
from ug_core.kit import KitDevice
from ug_core.plugins import registry

from .data import rand

_PHASE_FIELDS = {"X": {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}, "M": {"name", "ph", "pid", "tid", "args"}}


def check_chrome_trace(trace: Any) -> list[dict[str, Any]]:
    """Assert that `trace` (parsed JSON) is a Chrome Trace Event Format object trace viewers
    open: a "traceEvents" list of complete ("X") and metadata ("M") events with the fields of
    their phase; numbers where numbers go; non-negative durations; per (pid, tid), X events in
    start order and properly nested (each one inside the one it starts in, or after it); every
    tid named by a thread_name event. Returns the X events."""
    assert isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list), "no traceEvents list"
    complete: list[dict[str, Any]] = []
    named: set[tuple[int, int]] = set()
    for ev in trace["traceEvents"]:
        assert isinstance(ev, dict) and ev.get("ph") in _PHASE_FIELDS, ev
        missing = _PHASE_FIELDS[ev["ph"]] - set(ev)
        assert not missing, f"event {ev} lacks {sorted(missing)}"
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int) and isinstance(ev["args"], dict), ev
        assert isinstance(ev["name"], str) and ev["name"], ev
        if ev["ph"] == "M":
            assert ev["name"] in ("process_name", "thread_name") and isinstance(ev["args"].get("name"), str), ev
            if ev["name"] == "thread_name":
                named.add((ev["pid"], ev["tid"]))
            continue
        assert isinstance(ev["cat"], str) and ev["cat"], ev
        for field in ("ts", "dur"):
            assert isinstance(ev[field], (int, float)) and not isinstance(ev[field], bool), ev
        assert ev["dur"] >= 0, ev
        complete.append(ev)
    tol = 1e-3   # µs: ts and dur are ns / 1000 in floating point
    for track in {(e["pid"], e["tid"]) for e in complete}:
        assert track in named, f"thread {track} has no thread_name event"
        stack: list[dict[str, Any]] = []
        last_ts = -float("inf")
        for ev in (e for e in complete if (e["pid"], e["tid"]) == track):
            assert ev["ts"] >= last_ts - tol, f"events out of order on {track}: {ev}"
            last_ts = ev["ts"]
            while stack and ev["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - tol:
                stack.pop()
            if stack:
                outer = stack[-1]
                assert ev["ts"] + ev["dur"] <= outer["ts"] + outer["dur"] + tol, \
                    f"{ev['name']} ({ev['cat']}) overlaps {outer['name']} ({outer['cat']}) without nesting in it"
            stack.append(ev)
    return complete


def test_profile_records_items_and_cold_compiles(device, compile_cache, tmp_path):
    # a shape no other test uses, so that the kernel is compiled in this profile
    x = ug.tensor(rand((37, 29)), device=device)
    x.realize()
    with ug.profile() as cold:
        y = (x * 3.0 + 1.0).sum(axis=1)
        got = y.numpy()
    np.testing.assert_allclose(got, (x.numpy() * 3 + 1).sum(axis=1), rtol=1e-5)
    items = [e for e in cold.events if e.kind == "kernel"]
    assert len(items) == 1 and items[0].device == device
    # x, the sum, and the one-element buffer holding 3.0 (a kernel argument; 1.0 is folded in)
    assert items[0].bytes == 37 * 29 * 4 + 37 * 4 + 4 and items[0].end_ns >= items[0].start_ns
    compiles = [e for e in cold.events if e.kind == "compile"]
    assert [c.program for c in compiles] == [items[0].program] and compiles[0].device == device
    if isinstance(registry.get(device), KitDevice):   # the kit says whether it compiled or read its disk cache
        assert compiles[0].detail in ("compiled", "disk cache"), compiles[0]
    row = cold.table().rows[0]
    assert row["calls"] == 1 and abs(row["compile_s"] - compiles[0].seconds) < 1e-9 and row["gbps"] > 0

    with ug.profile() as warm:
        (x * 3.0 + 1.0).sum(axis=1).numpy()   # the same structure: the replay path, no compile
    assert [e.kind for e in warm.events if e.kind != "schedule"] == ["kernel"]
    assert warm.events[0].program == items[0].program
    path = tmp_path / "trace.json"
    cold.export_chrome_trace(path)
    events = check_chrome_trace(json.loads(path.read_text()))
    assert {"kernel", "compile", "schedule"} <= {e["cat"] for e in events}


def test_profile_records_a_matmul_with_its_flops(device, compile_cache):
    a, b = ug.tensor(rand((16, 24)), device=device), ug.tensor(rand((24, 8)), device=device)
    ug.realize(a, b)
    with ug.profile() as p:
        (a @ b).numpy()
    (mm,) = [e for e in p.events if e.kind == "matmul"]
    assert mm.flops == 2 * 16 * 24 * 8 and mm.bytes == (16 * 24 + 24 * 8 + 16 * 8) * 4 and mm.device == device
    assert p.table().rows[0]["gflops"] > 0
    assert profiler.active == ()


def test_profile_records_a_fused_attention_with_its_flops(device, compile_cache):
    q = ug.tensor(rand((2, 5, 8)), device=device)
    k, v = ug.tensor(rand((2, 7, 8)), device=device), ug.tensor(rand((2, 7, 6)), device=device)
    ug.realize(q, k, v)
    out = ug.nn.scaled_dot_product_attention(q, k, v)
    fused = [item for item in ug.schedule(out).items if item.kind == "attention"]
    with ug.profile() as p:
        out.numpy()
    attention = [e for e in p.events if e.kind == "attention"]
    assert len(attention) == len(fused)   # one where the device has a fused attention, else none
    for e in attention:
        assert e.flops == 2 * 2 * 5 * 7 * (8 + 6) and e.device == device
