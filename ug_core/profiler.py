"""`ug.profile()`: what ran, where the time went (compiling or running), as a table and as a
Chrome trace; the same table is what `UG_DEBUG=1` prints after each schedule run.

    with ug.profile() as p:
        model(x).numpy()
    print(p.table())                      # one row per distinct item: calls, compile and run time, GB/s
    p.export_chrome_trace("trace.json")   # open in ui.perfetto.dev or chrome://tracing

What is recorded (`Event.kind`):
- every schedule item run: "kernel", "matmul" (with its epilogue, when one step), "sort", "fft",
  "attention", "custom", "copy"; its device, the bytes of the buffers it reads and writes, its
  floating-point operations where they are known (matmul: 2*m*n*k; attention: both products),
  and its time, waiting for the device after it (a profiled run is a synchronous run);
- "schedule": one run of a schedule's items (a realize, or a `ug.jit` call), the parent of
  those items in the trace;
- "compile": a kernel compiled through the compile cache (lowering, rendering and the
  backend), an event of its own, apart from the runs: its `source` says whether the backend
  compiled it ("compiled") or loaded it from its disk cache ("disk cache");
- "backend compile": a kit backend turning source into a binary or loading it from the disk
  cache; inside a "compile", or inside a run item when a device compiles on first use (a GEMM,
  a GPU sort pass): that time counts as the item's compile time, not its run time;
- "compile schedule": the compiles of one schedule's new kernels, the parent of those.

Recording is process-wide: a profile records what every thread runs while it is active (the
trace gives each thread its own track). Profiles nest: each active profile records every
event. While no profile is active, the runtime pays one check per schedule run or jit call.

Long compiles show progress: a schedule whose new kernels take more than PROGRESS_AFTER_S
seconds to compile prints a line on stderr every PROGRESS_EVERY_S seconds and one when done.
`UG_COMPILE_PROGRESS=0` turns that off, `=1` on; unset, it is on where stderr is a terminal
or a Jupyter kernel (so not under pytest, which captures stderr).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, TextIO

__all__ = ["Event", "Profile", "ProfileTable", "StepInfo", "profile"]

active: tuple["Profile", ...] = ()
"""The profiles recording now. The runtime reads this once per schedule run or jit call and
takes its timed path while it is not empty; replaced whole (under _lock), never mutated."""

_lock = threading.Lock()
_local = threading.local()   # .nested: compile ns inside the item running on this thread (or None)

PROGRESS_AFTER_S = 2.0
"""A schedule's compile phase shows progress once it has taken this long."""
PROGRESS_EVERY_S = 1.0
"""Seconds between two progress lines."""


@dataclass(slots=True)
class Event:
    """One thing that happened: an item run, a compile, a schedule run (see the module doc for
    the kinds). Times are `time.perf_counter_ns()` values."""

    kind: str
    name: str           # the kernel's name; "matmul", "sort"...; the function of a custom op; a schedule's label
    device: str         # the device's name ("" for a schedule run)
    start_ns: int
    end_ns: int
    thread: int         # threading.get_ident() of the thread it ran on
    bytes: int = 0      # an item's buffers, read and written (each counted once)
    flops: int = 0      # floating-point operations, where known (0: not)
    compile_ns: int = 0  # of an item: backend compiles while it ran (first use), not counted as run time
    detail: str = ""    # what the item computes (its schedule line), a compile's source
    program: int = 0    # id of the compiled program: a kernel item and its "compile" event share it

    @property
    def seconds(self) -> float:
        """Wall time from start to end."""
        return (self.end_ns - self.start_ns) / 1e9

    @property
    def run_seconds(self) -> float:
        """Wall time, less the backend compiles that happened inside it."""
        return (self.end_ns - self.start_ns - self.compile_ns) / 1e9


@dataclass(frozen=True, slots=True)
class StepInfo:
    """What the profiler needs to know of a compiled schedule's step, worked out once when the
    schedule is compiled (the runtime's _step_info), so that replays can be profiled too."""

    kind: str
    name: str
    device: str
    devices: tuple[Any, ...]    # Device objects to wait for after the step
    uses: tuple[int, ...]       # buffer slots it reads or writes (its bytes)
    flops: int
    detail: str
    program: int = 0            # id of its compiled program (kernels), see Event.program


# --- recording ----------------------------------------------------------------------------


def record(event: Event) -> None:
    """Give an event to every active profile."""
    for p in active:
        p._add(event)


def begin_item() -> int | None:
    """Start counting the backend compiles of the item about to run on this thread; returns
    the outer count, for end_item."""
    outer = getattr(_local, "nested", None)
    _local.nested = 0
    return outer


def end_item(outer: int | None) -> int:
    """The compile ns counted since begin_item (the outer count is restored)."""
    inner: int = _local.nested
    _local.nested = outer
    return inner


def backend_compiled(backend: str, name: str, source: str, start_ns: int) -> None:
    """A kit backend compiled `name` (source "compiled") or loaded it from its disk cache ("disk
    cache"), from start_ns until now (ug_core.kit.CachedCompiler). Counted into the running
    item's compile time, and into the enclosing compile's source."""
    end = time.perf_counter_ns()
    nested = getattr(_local, "nested", None)
    if nested is not None:
        _local.nested = nested + (end - start_ns)
    sources = getattr(_local, "sources", None)
    if sources is not None:
        sources.append(source)
    if active:
        record(Event("backend compile", name, backend, start_ns, end, threading.get_ident(), detail=source))


def compile_begin() -> int:
    """Before CompileCache compiles a kernel: the start time, for kernel_compiled; from now on
    this thread's backend compiles note whether they compiled or read the disk cache."""
    _local.sources = []
    return time.perf_counter_ns()


def kernel_compiled(name: str, device: str, program: object, start_ns: int, debug: int) -> None:
    """A kernel was compiled through the compile cache (CompileCache.get), from start_ns (see
    compile_begin) until now: an event for the active profiles, a line for UG_DEBUG >= 1 (cold
    compile or disk cache, as the backend said), a tick of the compile phase's progress."""
    end = time.perf_counter_ns()
    sources = getattr(_local, "sources", None) or []
    _local.sources = None
    source = "+".join(sorted(set(sources)))    # 'compiled', 'disk cache', both, or '' (not a kit backend)
    ms = (end - start_ns) / 1e6
    how = {"compiled": "cold compile", "disk cache": "from the disk cache"}.get(source, source)
    if debug >= 1:
        log(f"compiled {name} on {device} in {ms:.2f} ms" + (f" ({how})" if how else ""))
    if active:
        record(Event("compile", name, device, start_ns, end, threading.get_ident(), detail=source, program=id(program)))
    phase = _current_phase()
    if phase is not None:
        phase.tick(name, end)


def log(text: str) -> None:
    """UG_DEBUG's output: a line on stderr."""
    print(text, file=sys.stderr, flush=True)


# --- progress of long compiles --------------------------------------------------------------


_phases: list["_CompilePhase"] = []


def _current_phase() -> "_CompilePhase | None":
    """The compile phase a compile belongs to: the innermost of this thread, else (a compile in
    a worker thread) the most recently begun one."""
    phases = _phases
    if not phases:
        return None
    me = threading.get_ident()
    for phase in reversed(phases):
        if phase.thread == me:
            return phase
    return phases[-1]


def _progress_wanted() -> bool:
    setting = os.environ.get("UG_COMPILE_PROGRESS", "").strip().lower()
    if setting in ("0", "false", "no", "off"):
        return False
    if setting in ("1", "true", "yes", "on"):
        return True
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty or "ipykernel" in sys.modules


class _CompilePhase:
    """The compiles of one schedule (compile_phase): counts them, prints progress once they
    take long, and is the "compile schedule" event of the trace."""

    def __init__(self, kernels: int):
        self.kernels = kernels            # kernels in the schedule (cached ones too)
        # where progress goes (None: nowhere), decided once the phase is long (`undecided`
        # until then), so that a short one never reads the environment or asks for a tty
        self.stream: TextIO | None = None
        self.undecided = kernels > 1
        self.thread = threading.get_ident()
        self.start_ns = time.perf_counter_ns()
        self.compiled = 0
        self.shown_ns = 0                 # when the last progress line was printed (0: none yet)
        self.lock = threading.Lock()

    def tick(self, name: str, now_ns: int) -> None:
        with self.lock:
            self.compiled += 1
            if self.stream is None and not self.undecided:
                return
            elapsed = (now_ns - self.start_ns) / 1e9
            since = (now_ns - self.shown_ns) / 1e9 if self.shown_ns else elapsed
            if elapsed >= PROGRESS_AFTER_S and since >= PROGRESS_EVERY_S:
                if self.undecided:
                    self.undecided = False
                    self.stream = sys.stderr if _progress_wanted() else None
                if self.stream is None:
                    return
                self.shown_ns = now_ns
                self._say(f"ug: compiling kernels: {self.compiled} new of this schedule's {self.kernels} in "
                          f"{elapsed:.1f} s (last {name}; UG_COMPILE_PROGRESS=0 hides this)")

    def end(self) -> None:
        end = time.perf_counter_ns()
        if self.shown_ns:
            self._say(f"ug: compiled {self.compiled} new kernels in {(end - self.start_ns) / 1e9:.1f} s")
        if self.compiled and active:
            record(Event("compile schedule", f"compile {self.compiled} new kernel(s)", "", self.start_ns, end, self.thread,
                         detail=f"of {self.kernels} kernels"))

    def _say(self, text: str) -> None:
        assert self.stream is not None
        try:
            print(text, file=self.stream, flush=True)
        except (OSError, ValueError):   # a closed stream: progress is not worth an error
            self.stream = None


class compile_phase:
    """`with compile_phase(n):` around compiling a schedule of n kernels (runtime.compile_schedule)."""

    __slots__ = ("kernels", "phase")

    def __init__(self, kernels: int):
        self.kernels = kernels

    def __enter__(self) -> None:
        self.phase = _CompilePhase(self.kernels)
        with _lock:
            _phases.append(self.phase)

    def __exit__(self, *exc: object) -> None:
        with _lock:
            _phases.remove(self.phase)
        self.phase.end()


# --- the profile ----------------------------------------------------------------------------


class Profile:
    """The events recorded while it was active (`with ug.profile() as p:`); see the module doc.

    `events` is the list of Events in the order they ended; `table()` summarizes them,
    `chrome_trace()` / `export_chrome_trace(path)` give them to a trace viewer."""

    def __init__(self, thread_only: bool = False):
        """thread_only: record only what the thread that enters it runs (UG_DEBUG's own)."""
        self.events: list[Event] = []
        self.thread_names: dict[int, str] = {}
        self._only = thread_only
        self._thread: int | None = None
        self._entered = False
        self._start_ns = 0
        self._end_ns = 0
        self._events_lock = threading.Lock()

    def __enter__(self) -> "Profile":
        global active
        if self._entered:
            raise RuntimeError("this ug.profile() is already recording (make a new one to nest profiles)")
        self._entered = True
        self._thread = threading.get_ident()
        self._start_ns = time.perf_counter_ns()
        with _lock:
            active = active + (self,)
        if len(active) == 1:
            _forget_fast_paths()
        return self

    def __exit__(self, *exc: object) -> None:
        global active
        with _lock:
            active = tuple(p for p in active if p is not self)
        self._end_ns = time.perf_counter_ns()

    def _add(self, event: Event) -> None:
        if self._only and event.thread != self._thread:
            return
        with self._events_lock:
            if event.thread not in self.thread_names:
                self.thread_names[event.thread] = _thread_name(event.thread)
            self.events.append(event)

    # -- summaries
    @property
    def compile_seconds(self) -> float:
        """Time spent compiling: the "compile" events, and the backend compiles inside items."""
        return (sum(e.end_ns - e.start_ns for e in self.events if e.kind == "compile")
                + sum(e.compile_ns for e in self.events if e.kind in ITEM_KINDS)) / 1e9

    @property
    def run_seconds(self) -> float:
        """Time spent running items (waiting for their devices), less compiles inside them."""
        return sum(e.end_ns - e.start_ns - e.compile_ns for e in self.events if e.kind in ITEM_KINDS) / 1e9

    def table(self, per_run: bool = False) -> "ProfileTable":
        """The summary: one row per distinct item (kind, name, device, what it computes) with
        its calls, compile time, run time, bytes and GB/s or GFLOP/s; compiles of kernels no
        item ran are rows of their own. per_run: one row per item run instead (UG_DEBUG's
        table). `print(p.table())`; `.rows` has the numbers."""
        return ProfileTable(self.events, per_run)

    def chrome_trace(self) -> dict[str, Any]:
        """The events in the Chrome Trace Event Format (what export_chrome_trace writes); time
        0 is the profile's start (or the start of a run already going on then, if earlier)."""
        origin = min([self._start_ns] + [e.start_ns for e in self.events])
        return chrome_trace(self.events, self.thread_names, origin)

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> str:
        """Write the trace as JSON to `path` (Perfetto, chrome://tracing and speedscope open it);
        returns the path."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.chrome_trace(), f)
        return os.fspath(path)


def profile() -> Profile:
    """A profiler: `with ug.profile() as p:` records every schedule item run and every kernel
    compile in the process until the block ends (see ug_core.profiler); then `print(p.table())`
    and `p.export_chrome_trace("trace.json")`."""
    return Profile()


def _thread_name(ident: int) -> str:
    for t in threading.enumerate():
        if t.ident == ident:
            return t.name
    return f"thread {ident}"


_fast_path_forgetters: list[Any] = []   # weak references to functions (ug.jit's, see forget_on_profile)


def forget_on_profile(forget: Any) -> None:
    """Register a function (weakly) that drops a cached fast path when profiling starts:
    ug.jit's last-call replay, which would otherwise bypass the profiled path."""
    import weakref
    with _lock:
        _fast_path_forgetters[:] = [r for r in _fast_path_forgetters if r() is not None]
        _fast_path_forgetters.append(weakref.ref(forget))


def _forget_fast_paths() -> None:
    with _lock:
        refs = list(_fast_path_forgetters)
    for ref in refs:
        fn = ref()
        if fn is not None:
            fn()


# --- the table ------------------------------------------------------------------------------


ITEM_KINDS = frozenset({"kernel", "matmul", "sort", "fft", "attention", "custom", "copy"})


class ProfileTable:
    """Profile.table()'s result: `str()` is the text, `rows` the numbers (a dict per row:
    kind, name, device, detail, calls, compile_s, run_s, bytes, gbps, gflops; gbps/gflops None
    where not meaningful)."""

    def __init__(self, events: list[Event], per_run: bool):
        self.per_run = per_run
        self.rows = _rows(events, per_run)

    def __str__(self) -> str:
        return format_rows(self.rows, self.per_run)

    def __repr__(self) -> str:
        return str(self)


def _rows(events: list[Event], per_run: bool) -> list[dict[str, Any]]:
    items = [e for e in events if e.kind in ITEM_KINDS]
    compiles = [e for e in events if e.kind == "compile"]
    compile_of: dict[int, int] = {}     # program -> compile ns (a kernel item's compile)
    for c in compiles:
        compile_of[c.program] = compile_of.get(c.program, 0) + (c.end_ns - c.start_ns)
    rows: list[dict[str, Any]] = []
    by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
    claimed: set[int] = set()
    for e in sorted(items, key=lambda e: e.start_ns):
        key: tuple[Any, ...] = (len(rows),) if per_run else (e.kind, e.name, e.device, e.detail, e.program)
        row = by_key.get(key)
        if row is None:
            compile_ns = 0
            if e.program and e.program not in claimed:   # (its compile counts once, on its first row)
                claimed.add(e.program)
                compile_ns = compile_of.get(e.program, 0)
            row = by_key[key] = {"kind": e.kind, "name": e.name, "device": e.device, "detail": e.detail, "calls": 0,
                                 "compile_s": compile_ns / 1e9, "run_s": 0.0, "bytes": 0, "flops": 0}
            rows.append(row)
        row["calls"] += 1
        row["run_s"] += (e.end_ns - e.start_ns - e.compile_ns) / 1e9
        row["compile_s"] += e.compile_ns / 1e9
        row["bytes"] += e.bytes
        row["flops"] += e.flops
    for c in compiles:   # compiles of kernels no recorded item ran (yet)
        if c.program not in claimed:
            how = f" ({c.detail})" if c.detail else ""
            rows.append({"kind": "compile", "name": c.name, "device": c.device, "detail": f"{c.name}: compiled, not run{how}",
                         "calls": 0, "compile_s": (c.end_ns - c.start_ns) / 1e9,
                         "run_s": 0.0, "bytes": 0, "flops": 0})
    for row in rows:
        run = row["run_s"]
        row["gflops"] = row["flops"] / run / 1e9 if row["flops"] and run > 0 else None
        row["gbps"] = row["bytes"] / run / 1e9 if row["bytes"] and run > 0 and row["kind"] not in ("custom",) else None
    return rows


def _bytes_text(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def format_rows(rows: list[dict[str, Any]], per_run: bool) -> str:
    """The table's text: per_run (UG_DEBUG, one row per item of one run) or grouped (a
    profile's summary, with calls and the mean)."""
    head = ["#", "kind", "device"] + ([] if per_run else ["calls"]) + ["compile ms", "run ms"]
    head += [] if per_run else ["mean ms"]
    head += ["bytes", "GB/s", "GFLOP/s", "item"]
    lines = []
    for i, r in enumerate(rows):
        cells = [str(i), r["kind"], r["device"]] + ([] if per_run else [str(r["calls"])])
        cells += [f"{r['compile_s'] * 1e3:.3f}" if r["compile_s"] else "-", f"{r['run_s'] * 1e3:.3f}" if r["calls"] else "-"]
        if not per_run:
            cells.append(f"{r['run_s'] * 1e3 / r['calls']:.3f}" if r["calls"] else "-")
        cells += [_bytes_text(r["bytes"]) if r["bytes"] else "-", f"{r['gbps']:.2f}" if r["gbps"] is not None else "-",
                  f"{r['gflops']:.2f}" if r["gflops"] is not None else "-"]
        cells.append(r["detail"] or r["name"])
        lines.append(cells)
    compile_total = sum(r["compile_s"] for r in rows)
    run_total = sum(r["run_s"] for r in rows)
    total = ["", "total", ""] + ([] if per_run else [str(sum(r["calls"] for r in rows))])
    total += [f"{compile_total * 1e3:.3f}" if compile_total else "-", f"{run_total * 1e3:.3f}"] + ([] if per_run else [""])
    total += [_bytes_text(sum(r["bytes"] for r in rows)), "", "", ""]
    lines.append(total)
    widths = [max(len(x[c]) for x in [head] + lines) for c in range(len(head) - 1)]
    numeric = {h for h in head if h not in ("kind", "device", "item")}

    def fmt(cells: list[str]) -> str:
        parts = [c.rjust(w) if h in numeric else c.ljust(w) for c, w, h in zip(cells, widths, head)]
        return ("  " + "  ".join(parts) + "  " + cells[-1]).rstrip()
    return "\n".join([fmt(head)] + [fmt(x) for x in lines])


# --- the Chrome trace ---------------------------------------------------------------------


def chrome_trace(events: list[Event], thread_names: dict[int, str], origin_ns: int) -> dict[str, Any]:
    """The Chrome Trace Event Format (the JSON object form): a complete event ("ph": "X") per
    Event, ts and dur in microseconds from `origin_ns`, tid a small number per thread, and
    metadata events ("ph": "M") naming the process and the threads. Per thread, events are
    sorted by start, a parent (a schedule run, a compile) before what it contains."""
    pid = os.getpid()
    tids: dict[int, int] = {}
    for e in sorted(events, key=lambda e: e.start_ns):
        tids.setdefault(e.thread, len(tids) + 1)
    out: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "ug"}}]
    for thread, tid in tids.items():
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                    "args": {"name": thread_names.get(thread, f"thread {thread}")}})
    for e in sorted(events, key=lambda e: (tids[e.thread], e.start_ns, -e.end_ns)):
        args: dict[str, Any] = {}
        if e.device:
            args["device"] = e.device
        if e.detail:
            args["detail"] = e.detail
        if e.kind in ITEM_KINDS:
            run_s = (e.end_ns - e.start_ns - e.compile_ns) / 1e9
            args["bytes"] = e.bytes
            if e.compile_ns:
                args["compile_ms"] = e.compile_ns / 1e6
            if e.bytes and run_s > 0:
                args["GB/s"] = round(e.bytes / run_s / 1e9, 3)
            if e.flops:
                args["flops"] = e.flops
                if run_s > 0:
                    args["GFLOP/s"] = round(e.flops / run_s / 1e9, 3)
        out.append({"name": e.name, "cat": e.kind, "ph": "X", "ts": (e.start_ns - origin_ns) / 1e3,
                    "dur": (e.end_ns - e.start_ns) / 1e3, "pid": pid, "tid": tids[e.thread], "args": args})
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "otherData": {"producer": "ug.profile", "clock": "time.perf_counter_ns"}}

