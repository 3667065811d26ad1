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
(see merge_ir).

An index sort of 32-bit (or narrower) values is an LSD radix sort (codes_ir, scatter_ir): each
value's 32-bit code, whose unsigned order is ug's order (see _code), above its position in one
uint64 item, sorted by three 11-bit digits of the code, low first; each pass is stable, so the
whole is the stable argsort. A top-k of few (topk_ir) scans each row once, keeping the k best so
far. One function per dtype, compiled into the process's engine on first use (and cached on disk as any module is).
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
        *_head(triple, data_layout),
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


def _head(triple: str, data_layout: str) -> list[str]:
    """The module's first lines: the target's triple and data layout."""
    return [f'target triple = "{triple}"', f'target datalayout = "{data_layout}"']


def _loop_ir(triple: str, data_layout: str, define: str, carried: list[tuple[str, str, str]], body: list[str],
             done: list[str]) -> str:
    """LLVM IR of the function `define` (its `define ... {` line) whose body is one loop of %i
    over [0, %n): `carried` values (name, type, initial value; the body defines `{name}.next`)
    and the straight-line `body` per step (no branches: its block is %body), then `done`."""
    return "\n".join([
        *_head(triple, data_layout),
        define,
        "entry:",
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [ 0, %entry ], [ %i.next, %body ]",
        *(f"  {name} = phi {ty} [ {init}, %entry ], [ {name}.next, %body ]" for name, ty, init in carried),
        "  %more = icmp slt i64 %i, %n",
        "  br i1 %more, label %body, label %done",
        "body:",
        *body,
        "  %i.next = add nsw i64 %i, 1",
        "  br label %loop",
        "done:",
        *done,
        "}",
    ])


def count_ir(name: str, ty: str, kind: str, triple: str, data_layout: str) -> str:
    """LLVM IR of `i64 {name}(ptr x, i64 n, {ty} pivot)`: how many of x[:n] are below pivot
    (a NaN is not: it sorts after every number). One vectorized pass."""
    below = f"fcmp olt {ty}" if kind == "f" else f"icmp {kind}lt {ty}"
    return _loop_ir(triple, data_layout, f"define i64 @{name}(ptr noalias readonly %x, i64 %n, {ty} %pivot) {{",
                    [("%count", "i64", "0")], [
                        f"  %p = getelementptr inbounds {ty}, ptr %x, i64 %i",
                        f"  %v = load {ty}, ptr %p",
                        f"  %below = {below} %v, %pivot",
                        "  %one = zext i1 %below to i64",
                        "  %count.next = add i64 %count, %one",
                    ], ["  ret i64 %count"])


def partition_ir(name: str, ty: str, kind: str, triple: str, data_layout: str) -> str:
    """LLVM IR of `void {name}(ptr x, i64 n, {ty} pivot, ptr low, ptr high)`: x[:n]'s elements
    below pivot to low[0, 1, ...] and the others (NaN among them) to high[0, 1, ...], in order;
    branch free: each element is stored once, at the place its compare picks."""
    below = f"fcmp olt {ty}" if kind == "f" else f"icmp {kind}lt {ty}"
    return _loop_ir(triple, data_layout,
                    f"define void @{name}(ptr noalias readonly %x, i64 %n, {ty} %pivot, ptr noalias %low, "
                    "ptr noalias %high) {", [("%l", "i64", "0"), ("%h", "i64", "0")], [
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
                    ], ["  ret void"])


# The radix argsort (kit.hostsort, HostSort._radix_argsort) sorts 32-bit codes whose unsigned order
# is ug's order of the values, in three passes of these digits (low first: an LSD radix sort, stable)
RADIX_BITS = 11
RADIX_SHIFTS = (0, 11, 22)   # the last digit is the top 10 bits
RADIX_BUCKETS = 1 << RADIX_BITS

# numpy dtype -> LLVM type and kind, for the dtypes with a 32-bit code (radix sort, top-k)
_CODED: dict[np.dtype, tuple[str, str]] = {
    np.dtype(np.float32): ("float", "f"), np.dtype(np.int32): ("i32", "s"), np.dtype(np.uint32): ("i32", "u"),
}


def _code(ty: str, kind: str, v: str, tag: str) -> list[str]:
    """Lines computing `%code.{tag}` (i32) from the value `v`: an unsigned order that is ug's
    order of the values. A float's bits with the sign bit set when positive and every bit
    flipped when negative; -0.0 is 0.0 first (equal values, one code); every NaN the largest
    code, after +inf. A signed int with its sign bit flipped; an unsigned one as it is."""
    if kind == "u":
        return [f"  %code.{tag} = or i32 {v}, 0"]
    if kind == "s":
        return [f"  %code.{tag} = xor i32 {v}, -2147483648"]
    return [
        f"  %z.{tag} = fadd {ty} {v}, 0.0",   # (no fast-math flag: -0.0 + 0.0 is 0.0)
        f"  %bits.{tag} = bitcast {ty} %z.{tag} to i32",
        f"  %neg.{tag} = icmp slt i32 %bits.{tag}, 0",
        f"  %inv.{tag} = xor i32 %bits.{tag}, -1",
        f"  %pos.{tag} = or i32 %bits.{tag}, -2147483648",
        f"  %num.{tag} = select i1 %neg.{tag}, i32 %inv.{tag}, i32 %pos.{tag}",
        f"  %nan.{tag} = fcmp uno {ty} {v}, 0.0",
        f"  %code.{tag} = select i1 %nan.{tag}, i32 -1, i32 %num.{tag}",
    ]


def codes_ir(name: str, ty: str, kind: str, triple: str, data_layout: str) -> str:
    """LLVM IR of `void {name}(ptr x, i64 n, i32 base, i32 flip, ptr items, ptr hist)`: the
    radix sort's first pass. items[i] (i64) = the code of x[i] (see _code) xor flip (all ones:
    a descending sort) above base + i, and the counts of each of the three digits of the codes
    added to hist (i32[3][RADIX_BUCKETS]). (A key and its position in one item: a pass writes
    one stream per bucket, not two; two 4-byte streams per bucket were 3x slower than one of
    8-byte items, the stores of 4096 streams missing the TLB.)"""
    body = [f"  %p = getelementptr inbounds {ty}, ptr %x, i64 %i", f"  %v = load {ty}, ptr %p",
            *_code(ty, kind, "%v", "v"),
            "  %key = xor i32 %code.v, %flip",
            "  %i32 = trunc i64 %i to i32",
            "  %at = add i32 %base, %i32",
            "  %key64 = zext i32 %key to i64",
            "  %high = shl i64 %key64, 32",
            "  %at64 = zext i32 %at to i64",
            "  %item = or i64 %high, %at64",
            "  %pk = getelementptr inbounds i64, ptr %items, i64 %i",
            "  store i64 %item, ptr %pk"]
    for d, shift in enumerate(RADIX_SHIFTS):
        body += [f"  %s{d} = lshr i32 %key, {shift}",
                 f"  %d{d} = and i32 %s{d}, {RADIX_BUCKETS - 1}",
                 f"  %e{d} = zext i32 %d{d} to i64",
                 f"  %h{d} = add i64 %e{d}, {d * RADIX_BUCKETS}",
                 f"  %ph{d} = getelementptr inbounds i32, ptr %hist, i64 %h{d}",
                 f"  %c{d} = load i32, ptr %ph{d}",
                 f"  %c{d}.1 = add i32 %c{d}, 1",
                 f"  store i32 %c{d}.1, ptr %ph{d}"]
    return _loop_ir(triple, data_layout,
                    f"define void @{name}(ptr noalias readonly %x, i64 %n, i32 %base, i32 %flip, ptr noalias %items, "
                    "ptr noalias %hist) {", [], body, ["  ret void"])


def scatter_ir(name: str, mode: str, triple: str, data_layout: str) -> str:
    """LLVM IR of `void {name}(ptr items, i64 n, i64 shift, ptr offsets, ptr out, i64 mid,
    i64 next_shift, ptr next_hist)`: a pass of the radix sort. Each item (i64: a code above a
    position), in order, goes to out at offsets[its code's digit at shift] (i64[RADIX_BUCKETS]),
    which then moves on by one; the count of its digit at next_shift is added to next_hist
    (i32[2][RADIX_BUCKETS]: [0] the places below mid, [1] the others: the next pass's halves).
    mode "count" does all that; "plain" counts nothing (one thread: the next pass's counts are
    the first pass's); "last" writes only the positions (the low 32 bits, as i64)."""
    body = ["  %pk = getelementptr inbounds i64, ptr %items, i64 %i", "  %item = load i64, ptr %pk",
            "  %sh = lshr i64 %item, %shift",
            f"  %d = and i64 %sh, {RADIX_BUCKETS - 1}",
            "  %po = getelementptr inbounds i64, ptr %off, i64 %d",
            "  %o = load i64, ptr %po",
            "  %o.1 = add i64 %o, 1",
            "  store i64 %o.1, ptr %po",
            "  %pio = getelementptr inbounds i64, ptr %out, i64 %o"]
    if mode == "last":
        body += ["  %at = and i64 %item, 4294967295", "  store i64 %at, ptr %pio"]
    else:
        body += ["  store i64 %item, ptr %pio"]
    if mode == "count":
        body += ["  %high = icmp uge i64 %o, %mid",
                 f"  %half = select i1 %high, i64 {RADIX_BUCKETS}, i64 0",
                 "  %nsh = lshr i64 %item, %next_shift",
                 f"  %nd = and i64 %nsh, {RADIX_BUCKETS - 1}",
                 "  %hx = add i64 %half, %nd",
                 "  %ph = getelementptr inbounds i32, ptr %next_hist, i64 %hx",
                 "  %hc = load i32, ptr %ph",
                 "  %hc.1 = add i32 %hc, 1",
                 "  store i32 %hc.1, ptr %ph"]
    return _loop_ir(triple, data_layout,
                    f"define void @{name}(ptr noalias readonly %items, i64 %n, i64 %shift, ptr noalias %off, "
                    "ptr noalias %out, i64 %mid, i64 %next_shift, ptr noalias %next_hist) {", [], body, ["  ret void"])


def topk_budget(n: int, k: int) -> int:
    """How many insertions a row of the top-k may take before it is given up (topk_ir): twice
    what a random row takes, about k * ln(n / k) (89 for k = 16 of 4096; its deviation about
    the root of that); a row sorted the wrong way is given up after this many insertions of k
    moves each (for k = 16 of 4096: 179, in a few microseconds)."""
    return 7 * k * max(1, (n // k).bit_length() - 1) // 5


TOPK_BLOCK = 64
"""The top-k's scan compares this many elements (four vectors) with the threshold at a time."""


def topk_ir(name: str, ty: str, kind: str, largest: bool, triple: str, data_layout: str) -> str:
    """LLVM IR of `void {name}(ptr x, i64 rows, i64 n, i64 k, i64 budget, ptr out_idx, ptr out_val,
    ptr codes, ptr places, ptr finished)`: the k largest (smallest) of each row of x (rows x n,
    contiguous), largest (smallest) first, equal values by position (NaN after every number),
    into out_idx (i64 rows x k: positions) and out_val (their values), and finished[row] (i8) = 1;
    codes (i32[k]) and places (i64[k]) are scratch. A row that needs more than `budget`
    insertions after its first k elements (a row arranged against the floor below and sorted
    the wrong way: every element beats the k-th best so far, each insertion moving up to k) is
    given up: finished[row] = 0, its output undefined, for the caller to sort another way.

    One pass per row, keeping the k best so far in order (codes: see _code, flipped for the
    smallest: the best has the largest code; ties go after: the earlier element first): the
    first k elements are inserted, then blocks of TOPK_BLOCK elements are compared with the
    k-th best's value at once (SIMD), and only the elements of a block that may beat it (the
    set bits of the compare's mask) are read again, one by one, each comparing its code with
    the k-th best's and inserted when larger. (Reading every element of such a block again cost
    3x: with k = 16 of 4096, some element of 38 of the 64 blocks of a random row passes.) The
    block's compare of values (NaN passes: unordered) lets through every element whose code is
    larger.

    A floor first (k <= 16, n >= 16): the row read once in vectors of 16, each lane keeping its
    best element; the worst of the 16 picks is reached by 16 elements or more, so by each of
    the k best, and while it is above the k-th best so far, the blocks compare with it (on a
    random row of 4096, by estimate, some 30 elements reach it, against about 89 insertions
    without it; a row sorted the wrong way has its best 16 in its last vector: the floor is
    its 16th best)."""
    w = 16
    vec = f"<{w} x {ty}>"
    if kind == "f":
        passes, reaches = (f"fcmp {'ugt' if largest else 'ult'} {vec}", f"fcmp {'uge' if largest else 'ule'} {vec}")
        beats = f"fcmp {'ogt' if largest else 'olt'} {vec}"   # (a NaN never replaces a lane's pick)
    else:
        passes = f"icmp {kind}{'gt' if largest else 'lt'} {vec}"
        reaches = f"icmp {kind}{'ge' if largest else 'le'} {vec}"
        beats = passes
    flip = "0" if largest else "-1"
    code_fn = [
        f"define internal i32 @{name}.code({ty} %v) alwaysinline {{",
        *_code(ty, kind, "%v", "v"),
        f"  %key = xor i32 %code.v, {flip}",
        "  ret i32 %key",
        "}",
    ]
    # insert (c, i) into codes/places[:last + 1] (sorted, the largest code first), dropping places[last]
    insert_fn = [
        f"define internal void @{name}.insert(ptr noalias %codes, ptr noalias %places, i64 %last, i32 %c, i64 %i) {{",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %j = phi i64 [ %last, %entry ], [ %j.1, %shift ]",
        "  %top = icmp eq i64 %j, 0",
        "  br i1 %top, label %place, label %look",
        "look:",
        "  %j.1 = sub i64 %j, 1",
        "  %pc = getelementptr inbounds i32, ptr %codes, i64 %j.1",
        "  %cc = load i32, ptr %pc",
        "  %worse = icmp ult i32 %cc, %c",
        "  br i1 %worse, label %shift, label %place",
        "shift:",
        "  %pp = getelementptr inbounds i64, ptr %places, i64 %j.1",
        "  %pv = load i64, ptr %pp",
        "  %qc = getelementptr inbounds i32, ptr %codes, i64 %j",
        "  store i32 %cc, ptr %qc",
        "  %qp = getelementptr inbounds i64, ptr %places, i64 %j",
        "  store i64 %pv, ptr %qp",
        "  br label %loop",
        "place:",
        "  %rc = getelementptr inbounds i32, ptr %codes, i64 %j",
        "  store i32 %c, ptr %rc",
        "  %rp = getelementptr inbounds i64, ptr %places, i64 %j",
        "  store i64 %i, ptr %rp",
        "  ret void",
        "}",
    ]
    # x[i] against the k-th best's code, inserted when larger: whether it was
    try_fn = [
        f"define internal i1 @{name}.try(ptr noalias %x, i64 %i, i64 %k, ptr noalias %codes, ptr noalias %places) "
        "alwaysinline {",
        "entry:",
        "  %last = sub i64 %k, 1",
        "  %pt = getelementptr inbounds i32, ptr %codes, i64 %last",
        f"  %p = getelementptr inbounds {ty}, ptr %x, i64 %i",
        f"  %v = load {ty}, ptr %p",
        f"  %c = call i32 @{name}.code({ty} %v)",
        "  %t = load i32, ptr %pt",
        "  %better = icmp ugt i32 %c, %t",
        "  br i1 %better, label %in, label %out",
        "in:",
        f"  call void @{name}.insert(ptr %codes, ptr %places, i64 %last, i32 %c, i64 %i)",
        "  ret i1 true",
        "out:",
        "  ret i1 false",
        "}",
    ]
    # x[from:to] one by one
    scalar_fn = [
        f"define internal void @{name}.scalar(ptr noalias %x, i64 %from, i64 %to, i64 %k, ptr noalias %codes, "
        "ptr noalias %places) {",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [ %from, %entry ], [ %i.1, %body ]",
        "  %more = icmp slt i64 %i, %to",
        "  br i1 %more, label %body, label %done",
        "body:",
        f"  %in = call i1 @{name}.try(ptr %x, i64 %i, i64 %k, ptr %codes, ptr %places)",
        "  %i.1 = add i64 %i, 1",
        "  br label %loop",
        "done:",
        "  ret void",
        "}",
    ]
    # the elements x[base + j] for the set bits j of mask, one by one: how many were inserted
    bits_fn = [
        f"define internal i64 @{name}.bits(ptr noalias %x, i64 %base, i64 %mask, i64 %k, ptr noalias %codes, "
        "ptr noalias %places) {",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %m = phi i64 [ %mask, %entry ], [ %m.1, %body ]",
        "  %added = phi i64 [ 0, %entry ], [ %added.1, %body ]",
        "  %more = icmp ne i64 %m, 0",
        "  br i1 %more, label %body, label %done",
        "body:",
        "  %j = call i64 @llvm.cttz.i64(i64 %m, i1 true)",
        "  %m.0 = sub i64 %m, 1",
        "  %m.1 = and i64 %m, %m.0",
        "  %i = add i64 %base, %j",
        f"  %in = call i1 @{name}.try(ptr %x, i64 %i, i64 %k, ptr %codes, ptr %places)",
        "  %one = zext i1 %in to i64",
        "  %added.1 = add i64 %added, %one",
        "  br label %loop",
        "done:",
        "  ret i64 %added",
        "}",
        "declare i64 @llvm.cttz.i64(i64, i1)",
    ]
    loads = []
    for u in range(TOPK_BLOCK // w):
        loads += [f"  %at{u} = add i64 %i, {u * w}",
                  f"  %pv{u} = getelementptr inbounds {ty}, ptr %x, i64 %at{u}",
                  f"  %v{u} = load {vec}, ptr %pv{u}, align 4",
                  f"  %g{u} = {passes} %v{u}, %ts",
                  f"  %e{u} = {reaches} %v{u}, %fs",
                  f"  %m{u} = select i1 %use.floor, <{w} x i1> %e{u}, <{w} x i1> %g{u}",
                  f"  %b{u} = bitcast <{w} x i1> %m{u} to i{w}",
                  f"  %z{u} = zext i{w} %b{u} to i64",
                  f"  %s{u} = shl i64 %z{u}, {u * w}"]
    ors = ["  %o1 = or i64 %s0, %s1", "  %o2 = or i64 %s2, %s3", "  %mask = or i64 %o1, %o2"]
    row_fn = [
        f"define internal i1 @{name}.row(ptr noalias %x, i64 %n, i64 %k, i64 %budget, ptr noalias %codes, "
        "ptr noalias %places) {",
        "entry:",
        "  br label %fill",
        "fill:",
        "  %m = phi i64 [ 0, %entry ], [ %m.1, %fill.body ]",
        "  %filling = icmp slt i64 %m, %k",
        "  br i1 %filling, label %fill.body, label %scan",
        "fill.body:",
        f"  %fp = getelementptr inbounds {ty}, ptr %x, i64 %m",
        f"  %fv = load {ty}, ptr %fp",
        f"  %fc = call i32 @{name}.code({ty} %fv)",
        f"  call void @{name}.insert(ptr %codes, ptr %places, i64 %m, i32 %fc, i64 %m)",
        "  %m.1 = add i64 %m, 1",
        "  br label %fill",
        # a floor: each of the w lanes' best element over the row's whole vectors; the worst of
        # those w is reached by at least w >= k elements, so every one of the k best reaches it
        "scan:",
        "  %last = sub i64 %k, 1",
        "  %plast = getelementptr inbounds i64, ptr %places, i64 %last",
        f"  %r0 = load {vec}, ptr %x, align 4",
        "  br label %lanes",
        "lanes:",
        f"  %lj = phi i64 [ {w}, %scan ], [ %lj.1, %lanes.body ]",
        f"  %pick = phi {vec} [ %r0, %scan ], [ %pick.1, %lanes.body ]",
        f"  %lj.1 = add i64 %lj, {w}",
        "  %lfits = icmp sle i64 %lj.1, %n",
        "  br i1 %lfits, label %lanes.body, label %floor",
        "lanes.body:",
        f"  %lp = getelementptr inbounds {ty}, ptr %x, i64 %lj",
        f"  %lv = load {vec}, ptr %lp, align 4",
        f"  %lb = {beats} %lv, %pick",
        f"  %pick.1 = select <{w} x i1> %lb, {vec} %lv, {vec} %pick",
        "  br label %lanes",
        "floor:",
        "  br label %worst",
        "worst:",
        "  %wl = phi i64 [ 0, %floor ], [ %wl.1, %worst ]",
        "  %wc = phi i32 [ -1, %floor ], [ %wc.1, %worst ]",
        f"  %wv = phi {ty} [ 0{'.0' if kind == 'f' else ''}, %floor ], [ %wv.1, %worst ]",
        f"  %lane = extractelement {vec} %pick, i64 %wl",
        f"  %lc = call i32 @{name}.code({ty} %lane)",
        "  %lower = icmp ule i32 %lc, %wc",
        "  %wc.1 = select i1 %lower, i32 %lc, i32 %wc",
        f"  %wv.1 = select i1 %lower, {ty} %lane, {ty} %wv",
        "  %wl.1 = add i64 %wl, 1",
        f"  %wdone = icmp eq i64 %wl.1, {w}",
        "  br i1 %wdone, label %floored, label %worst",
        "floored:",
        f"  %f0 = insertelement {vec} undef, {ty} %wv.1, i64 0",
        f"  %fs = shufflevector {vec} %f0, {vec} undef, <{w} x i32> zeroinitializer",
        "  br label %block",
        "block:",
        "  %i = phi i64 [ %k, %floored ], [ %end, %pass ], [ %end, %slow ]",
        "  %left = phi i64 [ %budget, %floored ], [ %left, %pass ], [ %left.1, %slow ]",
        "  %end = add i64 %i, " + str(TOPK_BLOCK),
        "  %fits = icmp sle i64 %end, %n",
        "  br i1 %fits, label %check, label %tail",
        "check:",
        # the block's compare: with the floor while it is above the k-th best so far (elements
        # reaching it), else with the k-th best's value (elements beating it)
        "  %tcp = getelementptr inbounds i32, ptr %codes, i64 %last",
        "  %tc = load i32, ptr %tcp",
        "  %use.floor = icmp ugt i32 %wc.1, %tc",
        "  %ti = load i64, ptr %plast",
        f"  %tp = getelementptr inbounds {ty}, ptr %x, i64 %ti",
        f"  %t = load {ty}, ptr %tp",
        f"  %t0 = insertelement {vec} undef, {ty} %t, i64 0",
        f"  %ts = shufflevector {vec} %t0, {vec} undef, <{w} x i32> zeroinitializer",
        *loads,
        *ors,
        "  %any = icmp ne i64 %mask, 0",
        "  br i1 %any, label %slow, label %pass",
        "pass:",
        "  br label %block",
        "slow:",
        f"  %added = call i64 @{name}.bits(ptr %x, i64 %i, i64 %mask, i64 %k, ptr %codes, ptr %places)",
        "  %left.1 = sub i64 %left, %added",
        "  %spent = icmp slt i64 %left.1, 0",
        "  br i1 %spent, label %give.up, label %block",
        "give.up:",
        "  ret i1 false",
        "tail:",
        f"  call void @{name}.scalar(ptr %x, i64 %i, i64 %n, i64 %k, ptr %codes, ptr %places)",
        "  ret i1 true",
        "}",
    ]
    main_fn = [
        f"define void @{name}(ptr noalias readonly %x, i64 %rows, i64 %n, i64 %k, i64 %budget, ptr noalias %out_idx, "
        "ptr noalias %out_val, ptr noalias %codes, ptr noalias %places, ptr noalias %finished) {",
        "entry:",
        "  br label %row",
        "row:",
        "  %r = phi i64 [ 0, %entry ], [ %r.1, %copied ]",
        "  %more = icmp slt i64 %r, %rows",
        "  br i1 %more, label %sort, label %done",
        "sort:",
        "  %off = mul i64 %r, %n",
        f"  %p = getelementptr inbounds {ty}, ptr %x, i64 %off",
        f"  %ok = call i1 @{name}.row(ptr %p, i64 %n, i64 %k, i64 %budget, ptr %codes, ptr %places)",
        "  %ok8 = zext i1 %ok to i8",
        "  %pd = getelementptr inbounds i8, ptr %finished, i64 %r",
        "  store i8 %ok8, ptr %pd",
        "  %out = mul i64 %r, %k",
        "  br label %copy",
        "copy:",
        "  %j = phi i64 [ 0, %sort ], [ %j.1, %copy.body ]",
        "  %copying = icmp slt i64 %j, %k",
        "  br i1 %copying, label %copy.body, label %copied",
        "copy.body:",
        "  %pj = getelementptr inbounds i64, ptr %places, i64 %j",
        "  %at = load i64, ptr %pj",
        "  %o = add i64 %out, %j",
        "  %po = getelementptr inbounds i64, ptr %out_idx, i64 %o",
        "  store i64 %at, ptr %po",
        f"  %pv = getelementptr inbounds {ty}, ptr %p, i64 %at",
        f"  %v = load {ty}, ptr %pv",
        f"  %pw = getelementptr inbounds {ty}, ptr %out_val, i64 %o",
        f"  store {ty} %v, ptr %pw",
        "  %j.1 = add i64 %j, 1",
        "  br label %copy",
        "copied:",
        "  %r.1 = add i64 %r, 1",
        "  br label %row",
        "done:",
        "  ret void",
        "}",
    ]
    return "\n".join([*_head(triple, data_layout), *code_fn, *insert_fn, *try_fn, *scalar_fn, *bits_fn, *row_fn,
                      *main_fn])


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
        """The native `what` ("merge", "count", "partition"; "codes", "scatter_count",
        "scatter_plain", "scatter_last": the radix sort's; "topk_largest", "topk_smallest") for
        dtype, loaded on first use; None for a dtype without one."""
        fn = self._fns.get((dtype, what))
        if fn is None and dtype in (_CODED if what.startswith(("codes", "topk")) else _TYPES):
            with self._lock:
                fn = self._fns.get((dtype, what))
                if fn is None:
                    fn = self._fns[(dtype, what)] = self._compile(dtype, what)
        return fn

    def _compile(self, dtype: np.dtype, what: str) -> Any:
        """The ctypes function of the native `what` for dtype (see _fn), compiled or loaded."""
        ty, kind = _TYPES[dtype]
        name = f"ug_sort_{what}_{dtype.name}"
        triple, layout = self.jit.triple, self.jit.data_layout
        ptr, i64 = ctypes.c_void_p, ctypes.c_int64
        if what == "merge":
            ir, proto = merge_ir(name, ty, kind, dtype.itemsize, triple, layout), _MERGE_FN
        elif what == "count":
            ir = count_ir(name, ty, kind, triple, layout)
            proto = ctypes.CFUNCTYPE(i64, ptr, i64, _CTYPES[dtype])
        elif what == "partition":
            ir = partition_ir(name, ty, kind, triple, layout)
            proto = ctypes.CFUNCTYPE(None, ptr, i64, _CTYPES[dtype], ptr, ptr)
        elif what == "codes":
            ir = codes_ir(name, ty, kind, triple, layout)
            proto = ctypes.CFUNCTYPE(None, ptr, i64, ctypes.c_uint32, ctypes.c_uint32, ptr, ptr)
        elif what.startswith("scatter"):   # (of uint64 items whatever the dtype: one function each)
            name = f"ug_sort_radix_{what}"
            ir = scatter_ir(name, what.split("_")[1], triple, layout)
            proto = ctypes.CFUNCTYPE(None, ptr, i64, i64, ptr, ptr, i64, i64, ptr)
        else:
            ir = topk_ir(name, ty, kind, what == "topk_largest", triple, layout)
            proto = ctypes.CFUNCTYPE(None, ptr, i64, i64, i64, i64, ptr, ptr, ptr, ptr, ptr)
        return proto(self.jit.load(ir, name))

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

    def radix_codes(self, x: np.ndarray, base: int, descending: bool, items: np.ndarray, hist: np.ndarray) -> bool:
        """The radix argsort's first pass over the contiguous 1-d x (float32, int32, uint32):
        items (uint64) = the codes of x (see _code; flipped when descending) above base +
        position, and the counts of the codes' three digits added to hist (uint32, 3 x
        RADIX_BUCKETS). False (nothing written) for another dtype."""
        fn = self._fn(x.dtype, "codes")
        if fn is None or x.ndim != 1 or not _contiguous(x, (items, np.uint64), (hist, np.uint32)):
            return False
        if not (items.shape == x.shape and hist.shape == (3, RADIX_BUCKETS)):
            raise ValueError(f"radix_codes: items {items.shape} and counts {hist.shape} do not fit {x.shape}")
        fn(x.ctypes.data, x.shape[0], base, 0xFFFF_FFFF if descending else 0, items.ctypes.data, hist.ctypes.data)
        return True

    def radix_scatter(self, items: np.ndarray, shift: int, offsets: np.ndarray, out: np.ndarray, mid: int,
                      next_shift: int, next_hist: np.ndarray | None) -> bool:
        """A pass of the radix argsort: each item (uint64: a code above a position), in order,
        to out at offsets[its code's digit at shift] (int64, RADIX_BUCKETS, moved on as they
        are used: the places of the digits' first items, which out must have room after), the
        code's digit at next_shift counted in next_hist (uint32, 2 x RADIX_BUCKETS: [0] the
        items placed below mid, [1] the others; None: not counted). out int64: the last pass,
        the positions only (next_hist unused)."""
        last = out.dtype == np.int64
        if not (items.ndim == 1 and _contiguous(items, (items, np.uint64), (offsets, np.int64), (out, out.dtype))
                and out.dtype in (np.int64, np.uint64)):
            return False
        if offsets.shape != (RADIX_BUCKETS,) or (next_hist is not None and next_hist.shape != (2, RADIX_BUCKETS)):
            raise ValueError(f"radix_scatter: offsets {offsets.shape} and counts "
                             f"{None if next_hist is None else next_hist.shape} are not "
                             f"({RADIX_BUCKETS},) and (2, {RADIX_BUCKETS})")
        if next_hist is not None and not _contiguous(next_hist, (next_hist, np.uint32)):
            return False
        mode = "last" if last else "plain" if next_hist is None else "count"
        fn = self._fn(np.dtype(np.uint32), f"scatter_{mode}")
        fn(items.ctypes.data, items.shape[0], 32 + shift, offsets.ctypes.data, out.ctypes.data, mid, 32 + next_shift,
           None if next_hist is None else next_hist.ctypes.data)
        return True

    def topk(self, x: np.ndarray, k: int, largest: bool, out_idx: np.ndarray, out_val: np.ndarray) -> np.ndarray | None:
        """The k largest (smallest) of each row of the contiguous 2-d x (float32, int32, uint32),
        the largest (smallest) first, equal values by position, NaN after every number: their
        positions into out_idx (int64, rows x k) and values into out_val (x's dtype). Returns
        which rows are done (bool per row; a row given up, see topk_ir, is for the caller);
        None (nothing written) where it does not apply."""
        fn = self._fn(x.dtype, "topk_largest" if largest else "topk_smallest")
        if fn is None or x.ndim != 2 or not _contiguous(x, (out_idx, np.int64), (out_val, x.dtype)):
            return None
        rows, n = x.shape
        if not (0 < k <= 16 <= n and out_idx.shape == out_val.shape == (rows, k)):   # (16: see topk_ir's floor)
            raise ValueError(f"topk: k={k} of rows of {n} into {out_idx.shape} and {out_val.shape} "
                             "(k from 1 to 16, rows of 16 or more)")
        codes, places, done = np.empty(k, np.uint32), np.empty(k, np.int64), np.zeros(rows, np.bool_)
        fn(x.ctypes.data, rows, n, k, topk_budget(n, k), out_idx.ctypes.data, out_val.ctypes.data, codes.ctypes.data,
           places.ctypes.data, done.ctypes.data)
        return done


def _contiguous(x: np.ndarray, *others: tuple[np.ndarray, np.dtype | type]) -> bool:
    """Whether x and the others are C-contiguous, the others of their dtypes."""
    return x.flags.c_contiguous and all(a.flags.c_contiguous and a.dtype == dt for a, dt in others)
