"""Render a Chrome trace (as `ug.profile().export_chrome_trace` writes it) as one self-contained
HTML page: a timeline per thread, nested events stacked, colored by category, with a time axis
and tooltips. No network and no trace viewer needed; docs/profiling.md's picture is this page
screenshotted by headless Chromium:

    python scripts/trace_to_html.py trace.json trace.html [--from MS --to MS] [--title TEXT]
    chromium --headless --screenshot=trace.png --window-size=1400,560 file://$PWD/trace.html

It draws complete ("X") events only and reads thread names from the metadata ("M") events.
Perfetto (ui.perfetto.dev) and chrome://tracing open the same JSON file interactively.
"""

from __future__ import annotations

import argparse
import html
import json
from pathlib import Path

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>%(title)s</title>
<style>
body { font: 12px sans-serif; margin: 12px; background: #fff; color: #222; }
h1 { font-size: 15px; margin: 0 0 6px 0; }
#legend span { display: inline-block; margin-right: 14px; }
#legend i { display: inline-block; width: 11px; height: 11px; margin-right: 4px; vertical-align: -1px; }
svg text { font: 11px sans-serif; pointer-events: none; }
</style></head>
<body><h1>%(title)s</h1><div id="legend"></div><svg id="tl"></svg>
<script>
const trace = %(trace)s;
const view = %(view)s;   // [from_ms, to_ms] or null: the whole trace
const colors = {"schedule": "#9e9e9e", "kernel": "#4e79a7", "matmul": "#f28e2b", "sort": "#59a14f",
  "fft": "#b07aa1", "attention": "#e15759", "custom": "#76b7b2", "copy": "#edc948",
  "compile": "#d37295", "backend compile": "#fabfd2", "compile schedule": "#bab0ac"};
const events = trace.traceEvents.filter(e => e.ph === "X");
const names = {};
for (const e of trace.traceEvents) if (e.ph === "M" && e.name === "thread_name") names[e.tid] = e.args.name;
let t0 = view ? view[0] * 1000 : Math.min(...events.map(e => e.ts));
let t1 = view ? view[1] * 1000 : Math.max(...events.map(e => e.ts + e.dur));
const W = window.innerWidth - 40, left = 110, rowH = 20, laneGap = 14;
const x = ts => left + (ts - t0) / (t1 - t0) * (W - left - 10);
const svg = document.getElementById("tl"), NS = "http://www.w3.org/2000/svg";
function el(tag, attrs, parent) { const n = document.createElementNS(NS, tag);
  for (const k in attrs) n.setAttribute(k, attrs[k]); (parent || svg).appendChild(n); return n; }
let y = 30;
for (let i = 0; i <= 10; i++) {   // the time axis
  const ts = t0 + (t1 - t0) * i / 10, px = x(ts);
  el("line", {x1: px, x2: px, y1: 18, y2: 2000, stroke: "#eee"});
  el("text", {x: px, y: 12, "text-anchor": i === 0 ? "start" : i === 10 ? "end" : "middle"}).textContent = (ts / 1000).toFixed(1) + " ms";   // (from the profile's start)
}
const tids = [...new Set(events.map(e => e.tid))].sort((a, b) => a - b);
for (const tid of tids) {
  const evs = events.filter(e => e.tid === tid).sort((a, b) => a.ts - b.ts || b.dur - a.dur);
  const stack = [], placed = [];
  for (const e of evs) {   // depth = how many events it is nested in
    while (stack.length && e.ts >= stack[stack.length - 1].ts + stack[stack.length - 1].dur) stack.pop();
    placed.push([e, stack.length]); stack.push(e);
  }
  const depth = Math.max(1, ...placed.map(p => p[1] + 1));
  el("text", {x: 4, y: y + 14}).textContent = names[tid] || ("thread " + tid);
  for (const [e, d] of placed) {
    if (e.ts + e.dur < t0 || e.ts > t1) continue;
    const a = Math.max(x(e.ts), left), b = Math.min(x(e.ts + e.dur), W - 10), w = Math.max(b - a, 1);
    const r = el("rect", {x: a, y: y + d * rowH, width: w, height: rowH - 2, fill: colors[e.cat] || "#888"});
    el("title", {}, r).textContent = e.cat + ": " + e.name + " (" + (e.dur / 1000).toFixed(3) + " ms)\\n" +
      JSON.stringify(e.args);
    if (w > 40) {
      const label = el("text", {x: a + 3, y: y + d * rowH + 13, fill: "#fff"});
      label.textContent = (e.cat === "schedule" || e.name.startsWith(e.cat) ? "" : e.cat + " ") + e.name + " " + (e.dur / 1000).toFixed(2) + " ms";
      const room = Math.floor((w - 6) / 6);
      if (label.textContent.length > room) label.textContent = label.textContent.slice(0, Math.max(room - 1, 0)) + "…";
    }
  }
  y += depth * rowH + laneGap;
}
svg.setAttribute("width", W); svg.setAttribute("height", y);
const legend = document.getElementById("legend");
for (const cat of [...new Set(events.map(e => e.cat))]) {
  const s = document.createElement("span"); s.innerHTML = '<i style="background:' + (colors[cat] || "#888") + '"></i>' + cat;
  legend.appendChild(s);
}
</script></body></html>
"""


def render(trace: dict, title: str, view: tuple[float, float] | None = None) -> str:
    """The HTML page drawing `trace` (view: the milliseconds from the trace's origin to show)."""
    data = json.dumps(trace).replace("</", "<\\/")   # (no "</script>" inside the script)
    return PAGE % {"title": html.escape(title), "trace": data, "view": json.dumps(list(view) if view else None)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--title", default="ug.profile() trace")
    parser.add_argument("--from", dest="start", type=float, help="first millisecond shown")
    parser.add_argument("--to", dest="end", type=float, help="last millisecond shown")
    args = parser.parse_args()
    trace = json.loads(args.trace.read_text())
    view = (args.start, args.end) if args.start is not None and args.end is not None else None
    args.out.write_text(render(trace, args.title, view))


if __name__ == "__main__":
    main()
