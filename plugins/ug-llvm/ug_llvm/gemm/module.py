"""The gemm's LLVM module: the micro-kernel, the packing of B, the row blocks, and the two
entries the driver calls, `_serial` (one thread) and `_parallel` (each of the pool's threads)."""

from __future__ import annotations

from ..pool import wait_until_ir
from ..render_ir import FSUF
from .config import FIELD, GemmConfig
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
        micro_kernel(cfg, micro),
        micro_kernel(cfg, direct, direct=True) if direct else "",
        pack_b(cfg, f"{prefix}_pack_b"),
        row_blocks(cfg, f"{prefix}_gemm", micro, direct),
        _serial(prefix),
        _parallel(prefix, triple),
        f"declare {vt} @llvm.fma.v{vw}{FSUF[t]}({vt}, {vt}, {vt})",
        "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)",
        '!0 = distinct !{!0, !1}\n!1 = !{!"llvm.loop.unroll.count", i32 4}',
        # the packing and blocking loops stay plain loops: vectorizing and unrolling them
        # tripled the compile time (1.1 s -> 0.4 s cold per dtype) for no measurable speed
        '!90 = !{!"llvm.loop.vectorize.enable", i1 false}\n!91 = !{!"llvm.loop.unroll.disable"}',
        f'attributes #0 = {{ nounwind "target-cpu"="{cpu}" "target-features"="{features}" '
        f'"no-trapping-math"="true" }}',
    ])
