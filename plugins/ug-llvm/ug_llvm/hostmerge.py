"""A native merge of two sorted runs, for the kit's host sort (kit.hostsort, KitDevice.host_merge).

The host sort splits a long row over the threads: each sorts a chunk with numpy, then pairs of
sorted runs are merged, each merge cut into one piece per thread. numpy has no merge: its stable
sort of the two runs side by side took that place, and it is a full merge sort (about three times
numpy's quicksort of as many elements), which made the split sort of 16M float32 on two threads
2-4x slower than one numpy sort. This merge is one branch-free pass: each step compares the heads
of the two runs, stores the one that sorts first (the first run's on ties: a stable merge) and
advances that run; the rest of whichever run is left is copied.

ug's order: a NaN after every number (`before(b, a)`: b < a, or a is NaN and b is not); -0.0 and
0.0 are equal (the sort puts runs of zeros back in their order afterwards). One function per
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
    sorted runs a[:na] and b[:nb] into out[:na + nb] (which overlaps neither)."""
    if kind == "f":
        before = ["  %lt = fcmp olt " + ty + " %vb, %va",
                  "  %a.nan = fcmp uno " + ty + " %va, %va",
                  "  %b.num = fcmp ord " + ty + " %vb, %vb",
                  "  %nan.first = and i1 %a.nan, %b.num",
                  "  %take.b = or i1 %lt, %nan.first"]
    else:
        before = [f"  %take.b = icmp {'slt' if kind == 's' else 'ult'} {ty} %vb, %va"]
    return "\n".join([
        f'target triple = "{triple}"',
        f'target datalayout = "{data_layout}"',
        "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)",
        f"define void @{name}(ptr noalias readonly %a, i64 %na, ptr noalias readonly %b, i64 %nb, ptr noalias %out) {{",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [ 0, %entry ], [ %i.next, %body ]",
        "  %j = phi i64 [ 0, %entry ], [ %j.next, %body ]",
        "  %has.a = icmp slt i64 %i, %na",
        "  %has.b = icmp slt i64 %j, %nb",
        "  %both = and i1 %has.a, %has.b",
        "  br i1 %both, label %body, label %tail",
        "body:",
        f"  %pa = getelementptr inbounds {ty}, ptr %a, i64 %i",
        f"  %va = load {ty}, ptr %pa",
        f"  %pb = getelementptr inbounds {ty}, ptr %b, i64 %j",
        f"  %vb = load {ty}, ptr %pb",
        *before,
        f"  %v = select i1 %take.b, {ty} %vb, {ty} %va",
        "  %k = add i64 %i, %j",
        f"  %po = getelementptr inbounds {ty}, ptr %out, i64 %k",
        f"  store {ty} %v, ptr %po",
        "  %step.b = zext i1 %take.b to i64",
        "  %step.a = xor i64 %step.b, 1",
        "  %j.next = add i64 %j, %step.b",
        "  %i.next = add i64 %i, %step.a",
        "  br label %loop",
        "tail:",   # one run is used up: the rest of the other follows (one of the copies is empty)
        "  %k.tail = add i64 %i, %j",
        f"  %to = getelementptr inbounds {ty}, ptr %out, i64 %k.tail",
        f"  %from.a = getelementptr inbounds {ty}, ptr %a, i64 %i",
        "  %left.a = sub i64 %na, %i",
        f"  %bytes.a = mul i64 %left.a, {itemsize}",
        "  call void @llvm.memcpy.p0.p0.i64(ptr %to, ptr %from.a, i64 %bytes.a, i1 false)",
        f"  %to.b = getelementptr inbounds {ty}, ptr %to, i64 %left.a",
        f"  %from.b = getelementptr inbounds {ty}, ptr %b, i64 %j",
        "  %left.b = sub i64 %nb, %j",
        f"  %bytes.b = mul i64 %left.b, {itemsize}",
        "  call void @llvm.memcpy.p0.p0.i64(ptr %to.b, ptr %from.b, i64 %bytes.b, i1 false)",
        "  ret void",
        "}",
    ])


class HostMerge:
    """`merge(a, b, out) -> bool`: the stable merge of the sorted 1-d runs a and b into out
    (len(a) + len(b) elements, overlapping neither), natively; False (nothing written) where it
    does not apply: a dtype without a native merge, or arrays that are not contiguous."""

    def __init__(self, jit: Any):
        self.jit = jit
        self._fns: dict[np.dtype, Any] = {}
        self._lock = threading.Lock()

    def _fn(self, dtype: np.dtype) -> Any:
        fn = self._fns.get(dtype)
        if fn is None and dtype in _TYPES:
            with self._lock:
                fn = self._fns.get(dtype)
                if fn is None:
                    ty, kind = _TYPES[dtype]
                    name = f"ug_merge_{dtype.name}"
                    ir = merge_ir(name, ty, kind, dtype.itemsize, self.jit.triple, self.jit.data_layout)
                    fn = self._fns[dtype] = _MERGE_FN(self.jit.load(ir, name))
        return fn

    def __call__(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> bool:
        if not (a.dtype == b.dtype == out.dtype and a.ndim == b.ndim == out.ndim == 1
                and out.shape[0] == a.shape[0] + b.shape[0]):
            raise ValueError(f"merge: runs {a.shape} {a.dtype} and {b.shape} {b.dtype} do not fit "
                             f"the output {out.shape} {out.dtype}")
        fn = self._fn(a.dtype)
        if fn is None or not (a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous):
            return False
        if out.shape[0]:
            fn(a.ctypes.data, a.shape[0], b.ctypes.data, b.shape[0], out.ctypes.data)
        return True
