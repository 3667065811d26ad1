"""The gemm's LLVM module: the micro-kernel, the packing of B, the row blocks, and the two
entries the driver calls, `_serial` (one thread) and `_parallel` (each of the pool's threads)."""

from __future__ import annotations

from ..pool import wait_until_ir
from ..render_ir import FSUF
from .config import CTX_FIELDS, FIELD, GemmConfig
from .micro_kernel import micro_kernel
from .pack_b import pack_b
from .row_blocks import row_blocks


def _serial(prefix: str) -> str:
    """`{prefix}_serial(ctx)`: both phases on the calling thread, all units (b_units rows of B,
    g_units row blocks). One pointer argument: a ctypes call of it costs about a third of a
    call with four typed arguments (0.6-1.0 against 3.1-3.6 us here), and small matmuls would
    pay two of those."""
    return "\n".join([
        f"define void @{prefix}_serial(ptr %ctx) #0 {{",
        f"  %bp = getelementptr inbounds i64, ptr %ctx, i64 {FIELD['b_units']}",
        "  %bu = load i64, ptr %bp, align 8",
        f"  %gp = getelementptr inbounds i64, ptr %ctx, i64 {FIELD['g_units']}",
        "  %gu = load i64, ptr %gp, align 8",
        f"  call void @{prefix}_pack_b(ptr %ctx, i64 %bu, i64 %bu, i64 0)",
        f"  call void @{prefix}_gemm(ptr %ctx, i64 %gu, i64 %gu, i64 0)",
        "  ret void",
        "}",
    ])


def _parallel(prefix: str, triple: str) -> str:
    """`{prefix}_parallel(ctx, tid)`: what each of the threads runs, both phases in one go (one
    hand-off to the pool per product instead of one per phase: a hand-off cost 50-150 us here,
    more than a 128^3 product takes on one thread). Packing B is shared out in `b_chunk` rows;
    the gemm's row blocks start once every packing unit is done (pack_done), not once every
    thread has arrived: a thread that starts late finds the work taken and leaves. Thread 0 (the
    caller) returns only when every row block is done (gemm_done), so the caller need not wait
    for the other threads, only for the work they took."""
    return "\n".join([
        f"define void @{prefix}_parallel(ptr %ctx, i64 %tid) #0 {{",
        f"  %bp = getelementptr inbounds i64, ptr %ctx, i64 {FIELD['b_units']}",
        "  %bu = load i64, ptr %bp, align 8",
        f"  %cp = getelementptr inbounds i64, ptr %ctx, i64 {FIELD['b_chunk']}",
        "  %bc = load i64, ptr %cp, align 8",
        f"  %gp = getelementptr inbounds i64, ptr %ctx, i64 {FIELD['g_units']}",
        "  %gu = load i64, ptr %gp, align 8",
        f"  call void @{prefix}_pack_b(ptr %ctx, i64 %bu, i64 %bc, i64 %tid)",
        f"  %pd = getelementptr inbounds i64, ptr %ctx, i64 {FIELD['pack_done']}",
        "  call void @ug_gemm_wait(ptr %pd, i64 %bu)",
        f"  call void @{prefix}_gemm(ptr %ctx, i64 %gu, i64 1, i64 %tid)",
        "  %first = icmp eq i64 %tid, 0",
        "  br i1 %first, label %wait, label %out",
        "wait:",
        f"  %gd = getelementptr inbounds i64, ptr %ctx, i64 {FIELD['gemm_done']}",
        "  call void @ug_gemm_wait(ptr %gd, i64 %gu)",
        "  br label %out",
        "out:",
        "  ret void",
        "}",
        wait_until_ir("ug_gemm_wait", triple),
    ])


def _batch_by_batch(prefix: str) -> str:
    """`{prefix}_local(ctx, tid)`: what each thread runs (the caller as tid 0, also alone) on a
    problem of many batch entries that each have their own B (a batched product, a convolution's
    per-image im2col rows): the threads take whole batch entries from a counter (gemm_next), and
    for each pack its B into their own packed-B slot (b_local) and run all its row blocks right
    away, on a copy of the context whose counters cover that entry's units only. The packed B of
    every entry, packed before any row block ran, was as big as B itself (a convolution's
    weight gradient: 53 MB) and went out to memory and back; one entry's stays in L2. Thread 0
    returns when every entry is done (gemm_done)."""
    n = len(CTX_FIELDS)
    f = FIELD
    return "\n".join([
        f"define void @{prefix}_local(ptr %ctx, i64 %tid) #0 {{",
        "entry:",
        f"  %priv = alloca [{n} x i64], align 8",
        f"  call void @llvm.memcpy.p0.p0.i64(ptr align 8 %priv, ptr align 8 %ctx, i64 {8 * n}, i1 false)",
        f"  %nbp = getelementptr inbounds i64, ptr %ctx, i64 {f['n_batch']}",
        "  %nb = load i64, ptr %nbp, align 8",
        f"  %bup = getelementptr inbounds i64, ptr %ctx, i64 {f['b_units']}",
        "  %bu = load i64, ptr %bup, align 8",
        "  %groups = sdiv i64 %bu, %nb",
        f"  %gup = getelementptr inbounds i64, ptr %ctx, i64 {f['g_units']}",
        "  %gu = load i64, ptr %gup, align 8",
        "  %blocks = sdiv i64 %gu, %nb",
        f"  %next = getelementptr inbounds i64, ptr %ctx, i64 {f['gemm_next']}",
        f"  %done = getelementptr inbounds i64, ptr %ctx, i64 {f['gemm_done']}",
        f"  %ppack = getelementptr inbounds i64, ptr %priv, i64 {f['pack_next']}",
        f"  %pgemm = getelementptr inbounds i64, ptr %priv, i64 {f['gemm_next']}",
        "  br label %take",
        "take:",
        "  %b = atomicrmw add ptr %next, i64 1 monotonic, align 8",
        "  %more = icmp slt i64 %b, %nb",
        "  br i1 %more, label %run, label %finish",
        "run:",
        "  %p0 = mul nsw i64 %b, %groups",
        "  %p1 = add nsw i64 %p0, %groups",
        "  store i64 %p0, ptr %ppack, align 8",
        f"  call void @{prefix}_pack_b(ptr %priv, i64 %p1, i64 %groups, i64 %tid)",
        "  %g0 = mul nsw i64 %b, %blocks",
        "  %g1 = add nsw i64 %g0, %blocks",
        "  store i64 %g0, ptr %pgemm, align 8",
        f"  call void @{prefix}_gemm(ptr %priv, i64 %g1, i64 %blocks, i64 %tid)",
        "  %d = atomicrmw add ptr %done, i64 1 release, align 8",
        "  br label %take",
        "finish:",
        "  %first = icmp eq i64 %tid, 0",
        "  br i1 %first, label %wait, label %out",
        "wait:",
        "  call void @ug_gemm_wait(ptr %done, i64 %nb)",
        "  br label %out",
        "out:",
        "  ret void",
        "}",
        "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)",
    ])


def render_module(cfg: GemmConfig, prefix: str, triple: str, data_layout: str, cpu: str, features: str) -> str:
    """The module defining `{prefix}_pack_b`, `{prefix}_gemm`, `{prefix}_serial` and
    `{prefix}_parallel`."""
    t, vw = cfg.t, cfg.vector
    vt = f"<{vw} x {t}>"
    micro = f"{prefix}_micro"
    direct = f"{prefix}_micro_direct" if cfg.src == cfg.t else None
    return "\n\n".join([
        f"; ug packed gemm {cfg}",
        f'target triple = "{triple}"',
        f'target datalayout = "{data_layout}"',
        micro_kernel(cfg, micro, fetch_next=True),
        micro_kernel(cfg, direct, direct=True) if direct else "",
        pack_b(cfg, f"{prefix}_pack_b"),
        row_blocks(cfg, f"{prefix}_gemm", micro, direct),
        _serial(prefix),
        _parallel(prefix, triple),
        _batch_by_batch(prefix),
        f"declare {vt} @llvm.fma.v{vw}{FSUF[t]}({vt}, {vt}, {vt})",
        "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)",
        '!0 = distinct !{!0, !1}\n!1 = !{!"llvm.loop.unroll.count", i32 4}',
        # the packing and blocking loops stay plain loops: vectorizing and unrolling them
        # tripled the compile time (1.1 s -> 0.4 s cold per dtype) for no measurable speed
        '!90 = !{!"llvm.loop.vectorize.enable", i1 false}\n!91 = !{!"llvm.loop.unroll.disable"}',
        f'attributes #0 = {{ nounwind "target-cpu"="{cpu}" "target-features"="{features}" '
        f'"no-trapping-math"="true" }}',
    ])
