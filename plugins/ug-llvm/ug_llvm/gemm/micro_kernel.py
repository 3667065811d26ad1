"""The micro-kernel: an MR x NR tile of C in vector registers, over one KC block.

    void micro(ptr ap, ptr bp, i64 kc, ptr c, i64 ldc, i64 rows, i64 cols, i1 accumulate[, ptr next])

`ap`: an A panel (MR rows, column after column), `bp`: a B panel (NR columns, row after row);
per k two (NV) vectors of B, MR broadcasts of A and MR * NV FMAs. The tile is stored to C, or
added to it (`accumulate`: a KC block after the first); an edge tile (rows < MR or cols < NR)
goes through a stack tile so nothing past M or N is touched. The gemm's (not the attention's)
takes a last argument `ptr next`: memory it fetches into L2 meanwhile (the next B panel).
"""

from __future__ import annotations

from ..render_ir import FSUF
from .config import GemmConfig

PREFETCH_B_BYTES = 2048  # how far ahead the micro-kernel prefetches the B panel (see micro_kernel)


def micro_kernel(cfg: GemmConfig, name: str, direct: bool = False, fetch_next: bool = False) -> str:
    """The micro-kernel; `direct`: reading A where it is (element (r, k) at ap[r * ars + k * acs],
    rows past `rows` reading the last one) instead of from a packed panel, for a product one B
    panel wide, where packing A copied each element to use it once (see row_blocks).
    `fetch_next`: last arguments `ptr %next, i64 %nstep`: memory from `next` on is fetched
    into L2 while the tile is computed, one cache line per k, at next + k * nstep (nstep <= 64:
    every line up to next + kc * nstep)."""
    t, mr, nr = cfg.t, cfg.mr, cfg.nr
    a_args = "ptr noalias readonly %ap, i64 %ars, i64 %acs" if direct else "ptr noalias readonly %ap"
    lines = [
        f"define internal void @{name}({a_args}, ptr noalias readonly %bp, i64 %kc, ptr noalias %c, "
        f"i64 %ldc, i64 %rows, i64 %cols, i1 %accumulate{', ptr %next, i64 %nstep' if fetch_next else ''}) #0 {{",
        "entry:",
        f"  %tile = alloca [{mr * nr} x {t}], align 64",
        *_prefetch_c(cfg),
        *(_direct_rows(cfg) if direct else []),
        "  br label %loop",
        *_k_loop(cfg, direct, fetch_next),
        "done:",
        f"  %full.r = icmp eq i64 %rows, {mr}",
        f"  %full.c = icmp eq i64 %cols, {nr}",
        "  %full = and i1 %full.r, %full.c",
        "  br i1 %full, label %store.full, label %store.part",
        "store.full:",
        "  br i1 %accumulate, label %full.add, label %full.set",
        *_store_full(cfg, "add"),
        *_store_full(cfg, "set"),
        *_store_edge(cfg),
        "}",
    ]
    return "\n".join(lines)


def _vector(cfg: GemmConfig) -> str:
    return f"<{cfg.vector} x {cfg.t}>"


def _tiles(cfg: GemmConfig) -> list[tuple[int, int]]:
    """(row, vector) of the accumulators %acc.r.j"""
    return [(r, j) for r in range(cfg.mr) for j in range(cfg.nv)]


def _direct_rows(cfg: GemmConfig) -> list[str]:
    """Pointers %arow.r to the A rows a direct micro-kernel reads (rows past `rows`: the last)."""
    lines = ["  %last = sub nsw i64 %rows, 1"]
    for r in range(cfg.mr):
        lines += [f"  %rin{r} = icmp slt i64 {r}, %rows",
                  f"  %rsel{r} = select i1 %rin{r}, i64 {r}, i64 %last",
                  f"  %roff{r} = mul nsw i64 %rsel{r}, %ars",
                  f"  %arow{r} = getelementptr inbounds {cfg.t}, ptr %ap, i64 %roff{r}"]
    return lines


def _k_loop(cfg: GemmConfig, direct: bool = False, fetch_next: bool = False) -> list[str]:
    """Block `loop`, once per k: the accumulators += A[:, k] (broadcast) * B[k, :]."""
    t, vw, mr, nr, nv, es = cfg.t, cfg.vector, cfg.mr, cfg.nr, cfg.nv, cfg.itemsize
    vt = _vector(cfg)
    fma = f"@llvm.fma.v{vw}{FSUF[t]}"
    lines = ["loop:", "  %k = phi i64 [ 0, %entry ], [ %k.next, %loop ]"]
    for r, j in _tiles(cfg):
        lines.append(f"  %acc.{r}.{j} = phi {vt} [ zeroinitializer, %entry ], [ %acc.{r}.{j}.n, %loop ]")
    lines += [
        f"  %bo = mul nuw nsw i64 %k, {nr}",
        f"  %bptr = getelementptr inbounds {t}, ptr %bp, i64 %bo",
        *[f"  %bptr{j} = getelementptr inbounds {t}, ptr %bptr, i64 {j * vw}" for j in range(nv)],
        *[f"  %b{j} = load {vt}, ptr %bptr{j}, align {min(64, vw * es)}" for j in range(nv)],
        "  %ao = mul nsw i64 %k, %acs" if direct else f"  %ao = mul nuw nsw i64 %k, {mr}",
    ]
    # the B panel (kc x NR) streams from L2: fetch its row PREFETCH_B_BYTES ahead into L1 (a
    # prefetch past the panel's end is harmless). Same process, AVX-512 float32: 1024^3 on one
    # thread 114.8 -> 119.3 GFLOP/s, 2048^3 on two 231.7 -> 239.7 (4 or 16 rows ahead: less)
    ahead = max(1, PREFETCH_B_BYTES // (nr * es))
    lines += [f"  %pfb = getelementptr {t}, ptr %bptr, i64 {ahead * nr}"]
    for j in range(0, nr * es, 64):
        lines += [f"  %pfb{j} = getelementptr i8, ptr %pfb, i64 {j}",
                  f"  call void @llvm.prefetch.p0(ptr %pfb{j}, i32 0, i32 3, i32 1)"]
    if fetch_next:
        # one cache line per k of what the caller reads next (`next`, see row_blocks._multiply),
        # into L2: the next B panel, which came from L3 at the first A panel's pace, 256 bytes
        # per 24 FMAs, faster than L3 delivers them. One thread, alternating in one process:
        # 1024^3 16.2 -> 15.2 ms (the 2-thread plan's blocks), 2048^3 133.8 -> 127.2 ms
        lines += ["  %nx.o = mul nuw nsw i64 %k, %nstep",
                  "  %nx = getelementptr i8, ptr %next, i64 %nx.o",
                  "  call void @llvm.prefetch.p0(ptr %nx, i32 0, i32 2, i32 1)"]
    for r in range(mr):
        lines += [
            f"  %aptr{r} = getelementptr inbounds {t}, ptr {f'%arow{r}' if direct else '%ap'}, i64 %ao",
            f"  %aptr{r}.r = getelementptr inbounds {t}, ptr %aptr{r}, i64 {0 if direct else r}",
            f"  %a{r} = load {t}, ptr %aptr{r}.r, align {es}",
            f"  %a{r}.i = insertelement {vt} poison, {t} %a{r}, i64 0",
            f"  %a{r}.s = shufflevector {vt} %a{r}.i, {vt} poison, <{vw} x i32> zeroinitializer",
        ]
        for j in range(nv):
            lines.append(f"  %acc.{r}.{j}.n = call {vt} {fma}({vt} %a{r}.s, {vt} %b{j}, {vt} %acc.{r}.{j})")
    return lines + [
        "  %k.next = add nuw nsw i64 %k, 1",
        "  %more = icmp slt i64 %k.next, %kc",
        "  br i1 %more, label %loop, label %done, !llvm.loop !0",
    ]


def _store_full(cfg: GemmConfig, mode: str) -> list[str]:
    """Block `full.<mode>`: a whole tile stored into C ("set") or added to it ("add")."""
    t, vw, es = cfg.t, cfg.vector, cfg.itemsize
    vt = _vector(cfg)
    lines = [f"full.{mode}:"]
    for r in range(cfg.mr):
        lines += [
            f"  %{mode}.ro{r} = mul nsw i64 %ldc, {r}",
            f"  %{mode}.row{r} = getelementptr inbounds {t}, ptr %c, i64 %{mode}.ro{r}",
        ]
        for j in range(cfg.nv):
            p = f"%{mode}.p{r}.{j}"
            lines.append(f"  {p} = getelementptr inbounds {t}, ptr %{mode}.row{r}, i64 {j * vw}")
            value = f"%acc.{r}.{j}.n"
            if mode == "add":
                lines += [f"  %add.old{r}.{j} = load {vt}, ptr {p}, align {es}",
                          f"  %add.new{r}.{j} = fadd {vt} %add.old{r}.{j}, {value}"]
                value = f"%add.new{r}.{j}"
            lines.append(f"  store {vt} {value}, ptr {p}, align {es}")
    return lines + ["  ret void"]


def _store_edge(cfg: GemmConfig) -> list[str]:
    """Block `store.part`: an edge tile, registers -> stack tile -> the rows x cols corner of C."""
    t, vw, nr, es = cfg.t, cfg.vector, cfg.nr, cfg.itemsize
    lines = ["store.part:"]
    for r, j in _tiles(cfg):
        lines += [f"  %tp{r}.{j} = getelementptr inbounds {t}, ptr %tile, i64 {r * nr + j * vw}",
                  f"  store {_vector(cfg)} %acc.{r}.{j}.n, ptr %tp{r}.{j}, align {min(64, vw * es)}"]
    return lines + [
        "  br label %er.head",
        "er.head:",
        "  %r = phi i64 [ 0, %store.part ], [ %r.next, %ec.exit ]",
        "  %r.more = icmp slt i64 %r, %rows",
        "  br i1 %r.more, label %ec.head, label %exit",
        "ec.head:",
        "  %j = phi i64 [ 0, %er.head ], [ %j.next, %ec.body ]",
        "  %j.more = icmp slt i64 %j, %cols",
        "  br i1 %j.more, label %ec.body, label %ec.exit",
        "ec.body:",
        f"  %to.r = mul nsw i64 %r, {nr}",
        "  %to = add nsw i64 %to.r, %j",
        f"  %tptr = getelementptr inbounds {t}, ptr %tile, i64 %to",
        f"  %tv = load {t}, ptr %tptr, align {es}",
        "  %co.r = mul nsw i64 %r, %ldc",
        "  %co = add nsw i64 %co.r, %j",
        f"  %cptr = getelementptr inbounds {t}, ptr %c, i64 %co",
        f"  %cold = load {t}, ptr %cptr, align {es}",
        f"  %cbase = select i1 %accumulate, {t} %cold, {t} 0.0",
        f"  %cnew = fadd {t} %cbase, %tv",
        f"  store {t} %cnew, ptr %cptr, align {es}",
        "  %j.next = add nsw i64 %j, 1",
        "  br label %ec.head",
        "ec.exit:",
        "  %r.next = add nsw i64 %r, 1",
        "  br label %er.head",
        "exit:",
        "  ret void",
    ]


def _prefetch_c(cfg: GemmConfig) -> list[str]:
    """Prefetch the C tile (every cache line of each row, and the row's last byte: a row need
    not start on a line) while the k loop runs: its loads at the end would otherwise stall on
    memory. (The first and last byte of each row only, as before, left the middle lines of a
    64-float row to miss: 1024^3 on one thread, alternating in one process, 16.09 -> 15.72 ms.)"""
    t = cfg.t
    lines = []
    row_bytes = cfg.nr * cfg.itemsize
    for r in range(cfg.mr):
        lines += [f"  %pf.o{r} = mul nsw i64 %ldc, {r}",
                  f"  %pf.r{r} = getelementptr {t}, ptr %c, i64 %pf.o{r}"]
        for off in [*range(0, row_bytes, 64), row_bytes - 1]:
            lines += [f"  %pf.r{r}.{off} = getelementptr i8, ptr %pf.r{r}, i64 {off}",
                      f"  call void @llvm.prefetch.p0(ptr %pf.r{r}.{off}, i32 1, i32 3, i32 1)"]
    return lines
