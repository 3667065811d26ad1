"""Native helpers of the kit's host sort (kit.hostsort, KitDevice.sort_kernels) for long rows.

A value sort of a long row on two threads is split by a pivot (count_ir, partition_ir: one pass,
each thread moving its half's elements to their side of the output), then each side is sorted by
numpy on its own thread: about a numpy sort plus one pass in all. Otherwise (more threads, an
index sort of 64-bit values, a lopsided split) each thread sorts a chunk with numpy, and pairs of
sorted runs are merged, each merge cut into one piece per thread (merge_ir). numpy has no merge:
its stable sort of the two runs side by side took that place, and it is a full merge sort (about
three times numpy's quicksort of as many elements), which made the sort of 16M float32 on two
threads 2-4x slower than one numpy sort. The merge is branch free: each step compares the heads
of the two runs, stores the one that sorts first (the first run's on ties: a stable merge) and
advances that run.

ug's order: a NaN after every number (a sorted run's NaNs are its tail: they are put after the
merge of the numbers, the first run's first); -0.0 and 0.0 are equal (the sort puts runs of
zeros back in their order afterwards). Two merges run at once, from the front and the back
(see merge_ir). One function per
dtype, compiled into the process's engine on first use (and cached on disk as any module is).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

# void merge(ptr a, i64 na, ptr b, i64 nb, ptr out): called without the GIL (the threads of the
# host sort merge their pieces at the same time)
_MERGE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)

# numpy dtype -> (LLVM type, comparison: "f" ordered float with NaN last, "s" signed, "u" unsigned)
_TYPES: dict[np.dtype, tuple[str, str]] = {
    np.dtype(np.float32): ("float", "f"), np.dtype(np.float64): ("double", "f"),
    np.dtype(np.int8): ("i8", "s"), np.dtype(np.int16): ("i16", "s"),
    np.dtype(np.int32): ("i32", "s"), np.dtype(np.int64): ("i64", "s"),
    np.dtype(np.uint8): ("i8", "u"), np.dtype(np.uint16): ("i16", "u"),
    np.dtype(np.uint32): ("i32", "u"), np.dtype(np.uint64): ("i64", "u"),
}


def merge_ir(name: str, ty: str, kind: str, itemsize: int, triple: str, data_layout: str) -> str:
    """LLVM IR of `void {name}(ptr a, i64 na, ptr b, i64 nb, ptr out)`: the stable merge of the
    sorted runs a[:na] and b[:nb] (na, nb >= 1; no NaN: SortKernels puts NaN tails after) into
    out[:na + nb] (which overlaps neither).

    Two merges run in one loop, one from the front (the smallest first, a's on ties) and one
    from the back (the largest first, b's on ties), total // 2 steps each (one more from the
    front for an odd total): a merge step waits for the compare of the loads its previous step
    chose, so one merge is latency bound, and two independent ones nearly double the rate. Each
    step is branch free; an index past a used-up run is clamped for the load and loses the
    compare."""
    if kind == "f":
        lt, gt = f"fcmp olt {ty}", f"fcmp ogt {ty}"
    else:
        lt, gt = f"icmp {kind}lt {ty}", f"icmp {kind}gt {ty}"
    return "\n".join([
        f'target triple = "{triple}"',
        f'target datalayout = "{data_layout}"',
        f"define void @{name}(ptr noalias readonly %a, i64 %na, ptr noalias readonly %b, i64 %nb, ptr noalias %out) {{",
        "entry:",
        "  %total = add i64 %na, %nb",
        "  %steps = lshr i64 %total, 1",
        "  %a.last = sub i64 %na, 1",
        "  %b.last = sub i64 %nb, 1",
        "  br label %loop",
        "loop:",
        "  %s = phi i64 [ 0, %entry ], [ %s.next, %body ]",
        "  %i = phi i64 [ 0, %entry ], [ %i.next, %body ]",      # front: taken from a, from b
        "  %j = phi i64 [ 0, %entry ], [ %j.next, %body ]",
        "  %p = phi i64 [ %na, %entry ], [ %p.next, %body ]",    # back: left in a, in b
        "  %q = phi i64 [ %nb, %entry ], [ %q.next, %body ]",
        "  %more = icmp ult i64 %s, %steps",
        "  br i1 %more, label %body, label %last",
        "body:",
        *_front_step(ty, lt, "f", "%i", "%j", "%i.next", "%j.next"),
        # the back step: out[p + q - 1] = the larger of a[p - 1], b[q - 1] (b's on ties)
        "  %a.room = icmp ugt i64 %p, 0",
        "  %b.gone = icmp eq i64 %q, 0",
        "  %p.1 = sub i64 %p, 1",
        "  %q.1 = sub i64 %q, 1",
        "  %ib = select i1 %a.room, i64 %p.1, i64 0",
        "  %jb = select i1 %b.gone, i64 0, i64 %q.1",
        f"  %pab = getelementptr inbounds {ty}, ptr %a, i64 %ib",
        f"  %vab = load {ty}, ptr %pab",
        f"  %pbb = getelementptr inbounds {ty}, ptr %b, i64 %jb",
        f"  %vbb = load {ty}, ptr %pbb",
        f"  %a.larger = {gt} %vab, %vbb",
        "  %a.wins = or i1 %b.gone, %a.larger",
        "  %take.a = and i1 %a.room, %a.wins",
        f"  %vback = select i1 %take.a, {ty} %vab, {ty} %vbb",
        "  %kb = add i64 %p, %q.1",
        f"  %pob = getelementptr inbounds {ty}, ptr %out, i64 %kb",
        f"  store {ty} %vback, ptr %pob",
        "  %back.a = zext i1 %take.a to i64",
        "  %back.b = xor i64 %back.a, 1",
        "  %p.next = sub i64 %p, %back.a",
        "  %q.next = sub i64 %q, %back.b",
        "  %s.next = add i64 %s, 1",
        "  br label %loop",
        "last:",   # an odd total: the middle element, one more step from the front
        "  %odd = trunc i64 %total to i1",
        "  br i1 %odd, label %middle, label %done",
        "middle:",
        *_front_step(ty, lt, "m", "%i", "%j", "%i.m", "%j.m"),
        "  br label %done",
        "done:",
        "  ret void",
        "}",
    ])


def _front_step(ty: str, lt: str, tag: str, i: str, j: str, i_next: str, j_next: str) -> list[str]:
    """A step of the merge from the front: out[i + j] = the smaller of a[i], b[j] (a's on ties)."""
    return [
        f"  %b.room.{tag} = icmp ult i64 {j}, %nb",
        f"  %a.gone.{tag} = icmp uge i64 {i}, %na",
        f"  %if.{tag} = select i1 %a.gone.{tag}, i64 %a.last, i64 {i}",
        f"  %jf.{tag} = select i1 %b.room.{tag}, i64 {j}, i64 %b.last",
        f"  %paf.{tag} = getelementptr inbounds {ty}, ptr %a, i64 %if.{tag}",
        f"  %vaf.{tag} = load {ty}, ptr %paf.{tag}",
        f"  %pbf.{tag} = getelementptr inbounds {ty}, ptr %b, i64 %jf.{tag}",
        f"  %vbf.{tag} = load {ty}, ptr %pbf.{tag}",
        f"  %b.smaller.{tag} = {lt} %vbf.{tag}, %vaf.{tag}",
        f"  %b.wins.{tag} = or i1 %a.gone.{tag}, %b.smaller.{tag}",
        f"  %take.b.{tag} = and i1 %b.room.{tag}, %b.wins.{tag}",
        f"  %vfront.{tag} = select i1 %take.b.{tag}, {ty} %vbf.{tag}, {ty} %vaf.{tag}",
        f"  %kf.{tag} = add i64 {i}, {j}",
        f"  %pof.{tag} = getelementptr inbounds {ty}, ptr %out, i64 %kf.{tag}",
        f"  store {ty} %vfront.{tag}, ptr %pof.{tag}",
        f"  %front.b.{tag} = zext i1 %take.b.{tag} to i64",
        f"  %front.a.{tag} = xor i64 %front.b.{tag}, 1",
        f"  {j_next} = add i64 {j}, %front.b.{tag}",
        f"  {i_next} = add i64 {i}, %front.a.{tag}",
    ]


def count_ir(name: str, ty: str, kind: str, triple: str, data_layout: str) -> str:
    """LLVM IR of `i64 {name}(ptr x, i64 n, {ty} pivot)`: how many of x[:n] are below pivot
    (a NaN is not: it sorts after every number). One vectorized pass."""
    below = f"fcmp olt {ty}" if kind == "f" else f"icmp {kind}lt {ty}"
    return "\n".join([
        f'target triple = "{triple}"',
        f'target datalayout = "{data_layout}"',
        f"define i64 @{name}(ptr noalias readonly %x, i64 %n, {ty} %pivot) {{",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [ 0, %entry ], [ %i.next, %body ]",
        "  %count = phi i64 [ 0, %entry ], [ %count.next, %body ]",
        "  %more = icmp slt i64 %i, %n",
        "  br i1 %more, label %body, label %done",
        "body:",
        f"  %p = getelementptr inbounds {ty}, ptr %x, i64 %i",
        f"  %v = load {ty}, ptr %p",
        f"  %below = {below} %v, %pivot",
        "  %one = zext i1 %below to i64",
        "  %count.next = add i64 %count, %one",
        "  %i.next = add nsw i64 %i, 1",
        "  br label %loop",
        "done:",
        "  ret i64 %count",
        "}",
    ])


def partition_ir(name: str, ty: str, kind: str, triple: str, data_layout: str) -> str:
    """LLVM IR of `void {name}(ptr x, i64 n, {ty} pivot, ptr low, ptr high)`: x[:n]'s elements
    below pivot to low[0, 1, ...] and the others (NaN among them) to high[0, 1, ...], in order;
    branch free: each element is stored once, at the place its compare picks."""
    below = f"fcmp olt {ty}" if kind == "f" else f"icmp {kind}lt {ty}"
    return "\n".join([
        f'target triple = "{triple}"',
        f'target datalayout = "{data_layout}"',
        f"define void @{name}(ptr noalias readonly %x, i64 %n, {ty} %pivot, ptr noalias %low, ptr noalias %high) {{",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [ 0, %entry ], [ %i.next, %body ]",
        "  %l = phi i64 [ 0, %entry ], [ %l.next, %body ]",
        "  %h = phi i64 [ 0, %entry ], [ %h.next, %body ]",
        "  %more = icmp slt i64 %i, %n",
        "  br i1 %more, label %body, label %done",
        "body:",
        f"  %p = getelementptr inbounds {ty}, ptr %x, i64 %i",
        f"  %v = load {ty}, ptr %p",
        f"  %below = {below} %v, %pivot",
        f"  %pl = getelementptr inbounds {ty}, ptr %low, i64 %l",
        f"  %ph = getelementptr inbounds {ty}, ptr %high, i64 %h",
        "  %to = select i1 %below, ptr %pl, ptr %ph",
        f"  store {ty} %v, ptr %to",
        "  %to.low = zext i1 %below to i64",
        "  %to.high = xor i64 %to.low, 1",
        "  %l.next = add i64 %l, %to.low",
        "  %h.next = add i64 %h, %to.high",
        "  %i.next = add nsw i64 %i, 1",
        "  br label %loop",
        "done:",
        "  ret void",
        "}",
    ])


_CTYPES: dict[np.dtype, Any] = {
    np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double,
    np.dtype(np.int8): ctypes.c_int8, np.dtype(np.int16): ctypes.c_int16,
    np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.uint8): ctypes.c_uint8, np.dtype(np.uint16): ctypes.c_uint16,
    np.dtype(np.uint32): ctypes.c_uint32, np.dtype(np.uint64): ctypes.c_uint64,
}


def _scalar(dtype: np.dtype, value: Any) -> Any:
    """value as the Python number ctypes passes as dtype (exactly: it is one of x's elements)."""
    return dtype.type(value).item()


class SortKernels:
    """The kit's SortKernels (kit.hostsort) for the cpu device. `merge(a, b, out) -> bool`: the
    stable merge of the sorted 1-d runs a and b into out (len(a) + len(b) elements, overlapping
    neither); `count_below`, `partition`: a split by a pivot. Each natively, without the GIL;
    False (None, nothing written) where it does not apply: a dtype without a native function
    (float16, bool, complex), or arrays that are not contiguous."""

    def __init__(self, jit: Any):
        self.jit = jit
        self._fns: dict[tuple[np.dtype, str], Any] = {}
        self._lock = threading.Lock()

    def _fn(self, dtype: np.dtype, what: str = "merge") -> Any:
        """The native `what` ("merge", "count", "partition") for dtype, loaded on first use; None
        for a dtype without one."""
        fn = self._fns.get((dtype, what))
        if fn is None and dtype in _TYPES:
            with self._lock:
                fn = self._fns.get((dtype, what))
                if fn is None:
                    ty, kind = _TYPES[dtype]
                    name = f"ug_sort_{what}_{dtype.name}"
                    triple, layout = self.jit.triple, self.jit.data_layout
                    if what == "merge":
                        ir, proto = merge_ir(name, ty, kind, dtype.itemsize, triple, layout), _MERGE_FN
                    elif what == "count":
                        ir = count_ir(name, ty, kind, triple, layout)
                        proto = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, _CTYPES[dtype])
                    else:
                        ir = partition_ir(name, ty, kind, triple, layout)
                        proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, _CTYPES[dtype],
                                                 ctypes.c_void_p, ctypes.c_void_p)
                    fn = self._fns[(dtype, what)] = proto(self.jit.load(ir, name))
        return fn

    def count_below(self, x: np.ndarray, pivot: np.generic) -> int | None:
        """How many elements of the contiguous 1-d x are below pivot (NaN is not); None where
        there is no native count (the dtype)."""
        fn = self._fn(x.dtype, "count")
        if fn is None or x.ndim != 1 or not x.flags.c_contiguous:
            return None
        return int(fn(x.ctypes.data, x.shape[0], _scalar(x.dtype, pivot)))

    def partition(self, x: np.ndarray, pivot: np.generic, low: np.ndarray, high: np.ndarray) -> bool:
        """x's elements below pivot to low, the others to high (each in order; their lengths
        must be what count_below says); False where there is no native partition."""
        fn = self._fn(x.dtype, "partition")
        if fn is None or not all(a.ndim == 1 and a.flags.c_contiguous and a.dtype == x.dtype for a in (x, low, high)):
            return False
        if low.shape[0] + high.shape[0] != x.shape[0]:
            raise ValueError(f"partition: {low.shape[0]} + {high.shape[0]} places for {x.shape[0]} elements")
        fn(x.ctypes.data, x.shape[0], _scalar(x.dtype, pivot), low.ctypes.data, high.ctypes.data)
        return True

    def merge(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> bool:
        if not (a.dtype == b.dtype == out.dtype and a.ndim == b.ndim == out.ndim == 1
                and out.shape[0] == a.shape[0] + b.shape[0]):
            raise ValueError(f"merge: runs {a.shape} {a.dtype} and {b.shape} {b.dtype} do not fit "
                             f"the output {out.shape} {out.dtype}")
        fn = self._fn(a.dtype)
        if fn is None or not (a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous):
            return False
        if a.dtype.kind == "f":   # the NaNs at the runs' ends: after every number, a's first
            nan = a.dtype.type(np.nan)   # (a Python float would make numpy search a float64 copy)
            na, nb = int(a.searchsorted(nan)), int(b.searchsorted(nan))
            out[na + nb:a.shape[0] + nb] = a[na:]
            out[a.shape[0] + nb:] = b[nb:]
            a, b, out = a[:na], b[:nb], out[:na + nb]
        if not a.shape[0] or not b.shape[0]:
            out[...] = b if not a.shape[0] else a
        else:
            fn(a.ctypes.data, a.shape[0], b.ctypes.data, b.shape[0], out.ctypes.data)
        return True
