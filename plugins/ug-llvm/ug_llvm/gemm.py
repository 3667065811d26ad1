"""A packed GEMM of our own, rendered as LLVM IR: the cpu device's float32/float64 matmul.

    C[b, m, n] = sum_k A[b, m, k] * B[b, k, n]        A, B: any strides; C: contiguous rows

The classic blocked structure (Goto / BLIS):

* B is packed once per call into column panels NR wide: for each block of KC rows of B,
  panel `jr` holds B[pc:pc+kc, jr*NR:(jr+1)*NR] row after row, zero padded past N. The panels
  are packed in parallel (`pack_b`), then shared read-only by every thread.
* Each thread takes a range of row blocks (MC rows of one batch entry). Per KC block it packs
  its rows of A into MR-row panels (column after column, zero padded past M), a block that
  stays in L2, and runs the micro-kernel over every (B panel, A panel) pair: the B panel
  (KC x NR, L1 sized) stays put while the A panels stream past it.
* The micro-kernel keeps an MR x NR tile of C in vector registers (MR rows, NR = 2 vectors):
  per k it loads two vectors of B, broadcasts MR values of A and issues 2*MR FMAs. The first
  KC block stores the tile, later blocks add to C; edge tiles go through a stack tile so
  nothing past M or N is touched.

Why our own: numpy's OpenBLAS runs its own thread pool, so ug could not split the batch of an
attention matmul over cores, pack transposed views, or (later) fuse an epilogue. The register
tile and blocking come from the host's vector registers (`GemmConfig.for_host`).

Both entry points have the signature `void f(i64* ctx, i64 units, i64 chunk, i64 tid)`: `ctx`
holds the problem (see `CTX_FIELDS`); every thread runs the function, taking `chunk` of the
`units` (rows of B for `pack_b`, row blocks for `gemm`) at a time from a counter in `ctx` until
none are left (dynamic scheduling: a thread slowed by a busy core takes fewer); `tid` selects the
thread's A workspace.
"""

from __future__ import annotations

import array
import ctypes
import hashlib
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from .pool import wait_until_ir

# the i64 fields of the context array, in order (PackedGemm.run fills them)
CTX_FIELDS = ("a", "b", "c", "a_pack", "b_pack", "m", "n", "k", "rsa", "csa", "rsb", "csb", "ldc",
              "offsets", "row_starts", "units_per_batch", "npad", "a_pack_stride", "pack_next", "gemm_next",
              "epi_fn", "epi_args", "b_units", "g_units", "b_group", "pack_done", "gemm_done", "b_chunk")
_F = {name: i for i, name in enumerate(CTX_FIELDS)}
# the smallest row block (in MR-row panels) of a guided plan (PackedGemm.plan): a block streams
# the whole packed B through L2 once, so a tiny one is slow per row; it ends the schedule only
MIN_BLOCK_PANELS = 2

PREFETCH_B_BYTES = 2048  # how far ahead the micro-kernel prefetches the B panel (see _micro_kernel)
LLVM_TYPE = {np.dtype(np.float16): "half", np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


@dataclass(frozen=True)
class GemmConfig:
    dtype: np.dtype
    vector: int      # elements per vector register
    mr: int          # rows of the register tile
    kc: int          # rows of B per packed block (a B panel of kc x nr stays in L1)
    mc_max: int      # rows of A per packed block (mc x kc stays in L2)
    nv: int = 2      # vectors per tile row
    source: np.dtype = None  # type: ignore[assignment]  # A's and B's dtype (None: dtype); packing widens it

    def __post_init__(self) -> None:
        if self.source is None:
            object.__setattr__(self, "source", self.dtype)

    @property
    def nr(self) -> int:
        return self.nv * self.vector

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @staticmethod
    def for_host(dtype: np.dtype, features: str, source: np.dtype | None = None) -> "GemmConfig":
        """Tile sizes from the host's vector registers, measured on AVX-512 (Cascade Lake, 1 MiB
        L2): a 6 x 4-vector tile (24 accumulators + 4 B vectors + 1 broadcast of 32 registers)
        issues 34 instructions per 24 FMAs, against 38 for 12 x 2 vectors, and ran 10-15 %
        faster; kc = 2 KiB of each A row (512 float32) beat 128-384, mc = 480 rows. With 16
        registers (AVX/AVX2, SSE) the tile is 6 x 2 vectors (12 + 2 + 1)."""
        dtype = np.dtype(dtype)
        feats = set(features.split(","))
        if "+avx512f" in feats:
            width, mr, nv = 64, 6, 4
        elif "+avx" in feats:
            width, mr, nv = 32, 6, 2
        else:
            width, mr, nv = 16, 6, 2
        return GemmConfig(dtype, width // dtype.itemsize, mr, kc=2048 // dtype.itemsize, mc_max=480, nv=nv,
                          source=np.dtype(source or dtype))


class _Builder:
    """Minimal structured IR emission: numbered values, the current block's label, and loops
    (header-tested, with the induction variable's phi) and branches as context managers."""

    def __init__(self, md_base: int) -> None:
        self.lines: list[str] = []
        self.md_base = md_base          # numbers of this function's metadata nodes start here
        self.metadata: list[str] = []   # the loops' !llvm.loop nodes
        self.n = 0
        self.block = "entry"

    def v(self, text: str) -> str:
        name = f"%v{self.n}"
        self.n += 1
        self.lines.append(f"  {name} = {text}")
        return name

    def emit(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")
        self.block = name

    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"

    @contextmanager
    def loop(self, start: str, end: str, step: str = "1") -> Iterator[str]:
        """for (i = start; i < end; i += step) — yields i."""
        name = self.fresh("L")
        pred = self.block
        self.emit(f"br label %{name}.head")
        self.label(f"{name}.head")
        i = f"%{name}.i"
        self.lines.append(f"  {i} = phi i64 [ {start}, %{pred} ], [ %{name}.next, %{name}.latch ]")
        self.emit(f"%{name}.c = icmp slt i64 {i}, {end}")
        self.emit(f"br i1 %{name}.c, label %{name}.body, label %{name}.exit")
        self.label(f"{name}.body")
        yield i
        self.emit(f"br label %{name}.latch")
        self.label(f"{name}.latch")
        self.emit(f"%{name}.next = add nsw i64 {i}, {step}")
        md = self.md_base + self.n
        self.n += 1
        self.emit(f"br label %{name}.head, !llvm.loop !{md}")
        self.metadata.append(f"!{md} = distinct !{{!{md}, !90, !91}}")
        self.label(f"{name}.exit")

    @contextmanager
    def claimed(self, counter: str, total: str, chunk: str, done: str) -> Iterator[tuple[str, str]]:
        """while ((s = atomic_fetch_add(counter, chunk)) < total) { body(s, e = min(s + chunk, total));
        atomic_fetch_add(done, e - s) }: the threads running this share the units through the
        counter, so a thread that is slowed down (a busy core on a shared machine) simply takes
        fewer; `done` counts the finished units (released: what the body wrote is visible to
        whoever reads the count, see pool.wait_until_ir)."""
        name = self.fresh("C")
        self.emit(f"br label %{name}.head")
        self.label(f"{name}.head")
        start = f"%{name}.s"
        self.emit(f"{start} = atomicrmw add ptr {counter}, i64 {chunk} monotonic, align 8")
        self.emit(f"%{name}.more = icmp slt i64 {start}, {total}")
        self.emit(f"br i1 %{name}.more, label %{name}.take, label %{name}.exit")
        self.label(f"{name}.take")
        end0 = self.v(f"add nsw i64 {start}, {chunk}")
        short = self.v(f"icmp slt i64 {end0}, {total}")
        end = self.v(f"select i1 {short}, i64 {end0}, i64 {total}")
        yield start, end
        finished = self.v(f"sub nsw i64 {end}, {start}")
        self.emit(f"%{name}.d = atomicrmw add ptr {done}, i64 {finished} release, align 8")
        self.emit(f"br label %{name}.head")
        self.label(f"{name}.exit")

    @contextmanager
    def branch(self, cond: str) -> Iterator["_Else"]:
        """if (cond) { body } else { otherwise.body }: side effects only (no values flow out)."""
        name = self.fresh("B")
        self.emit(f"br i1 {cond}, label %{name}.then, label %{name}.else")
        self.label(f"{name}.then")
        other = _Else(self, name)
        yield other
        if not other.done:
            self.emit(f"br label %{name}.join")
            self.label(f"{name}.else")
            self.emit(f"br label %{name}.join")
        self.label(f"{name}.join")


class _Else:
    def __init__(self, b: _Builder, name: str):
        self.b, self.name, self.done = b, name, False

    @contextmanager
    def otherwise(self) -> Iterator[None]:
        self.b.emit(f"br label %{self.name}.join")
        self.b.label(f"{self.name}.else")
        yield
        self.b.emit(f"br label %{self.name}.join")
        self.done = True


def _attributes(cpu: str, features: str) -> str:
    return (f'attributes #0 = {{ nounwind "target-cpu"="{cpu}" "target-features"="{features}" '
            f'"no-trapping-math"="true" }}')


def _ctx_loads(b: _Builder, names: list[str]) -> dict[str, str]:
    out = {}
    for name in names:
        p = b.v(f"getelementptr inbounds i64, ptr %ctx, i64 {_F[name]}")
        if name in ("a", "b", "c", "a_pack", "b_pack", "offsets", "row_starts", "epi_fn", "epi_args"):
            out[name] = b.v(f"load ptr, ptr {p}, align 8")
        else:
            out[name] = b.v(f"load i64, ptr {p}, align 8")
    return out


def _micro_kernel(cfg: GemmConfig, name: str) -> str:
    """void micro(ptr ap, ptr bp, i64 kc, ptr c, i64 ldc, i64 rows, i64 cols, i1 accumulate)"""
    t, vw, mr, nr = LLVM_TYPE[cfg.dtype], cfg.vector, cfg.mr, cfg.nr
    vt = f"<{vw} x {t}>"
    fma = f"@llvm.fma.v{vw}{'f32' if t == 'float' else 'f64'}"
    es = cfg.itemsize
    nv = cfg.nv
    tiles = [(r, j) for r in range(mr) for j in range(nv)]
    lines = [
        f"define internal void @{name}(ptr noalias readonly %ap, ptr noalias readonly %bp, i64 %kc, ptr noalias %c, "
        f"i64 %ldc, i64 %rows, i64 %cols, i1 %accumulate) #0 {{",
        "entry:",
        f"  %tile = alloca [{mr * nr} x {t}], align 64",
        *_prefetch_c(cfg),
        "  br label %loop",
        "loop:",
        "  %k = phi i64 [ 0, %entry ], [ %k.next, %loop ]",
    ]
    for r, j in tiles:
        lines.append(f"  %acc.{r}.{j} = phi {vt} [ zeroinitializer, %entry ], [ %acc.{r}.{j}.n, %loop ]")
    lines += [
        f"  %bo = mul nuw nsw i64 %k, {nr}",
        f"  %bptr = getelementptr inbounds {t}, ptr %bp, i64 %bo",
        *[f"  %bptr{j} = getelementptr inbounds {t}, ptr %bptr, i64 {j * vw}" for j in range(nv)],
        *[f"  %b{j} = load {vt}, ptr %bptr{j}, align {min(64, vw * es)}" for j in range(nv)],
        f"  %ao = mul nuw nsw i64 %k, {mr}",
    ]
    # the B panel (kc x NR) streams from L2: fetch its row PREFETCH_B_BYTES ahead into L1 (a
    # prefetch past the panel's end is harmless). Same process, AVX-512 float32: 1024^3 on one
    # thread 114.8 -> 119.3 GFLOP/s, 2048^3 on two 231.7 -> 239.7 (4 or 16 rows ahead: less)
    ahead = max(1, PREFETCH_B_BYTES // (nr * es))
    lines += [f"  %pfb = getelementptr {t}, ptr %bptr, i64 {ahead * nr}"]
    for j in range(0, nr * es, 64):
        lines += [f"  %pfb{j} = getelementptr i8, ptr %pfb, i64 {j}",
                  f"  call void @llvm.prefetch.p0(ptr %pfb{j}, i32 0, i32 3, i32 1)"]

    for r in range(mr):
        lines += [
            f"  %aptr{r} = getelementptr inbounds {t}, ptr %ap, i64 %ao",
            f"  %aptr{r}.r = getelementptr inbounds {t}, ptr %aptr{r}, i64 {r}",
            f"  %a{r} = load {t}, ptr %aptr{r}.r, align {es}",
            f"  %a{r}.i = insertelement {vt} poison, {t} %a{r}, i64 0",
            f"  %a{r}.s = shufflevector {vt} %a{r}.i, {vt} poison, <{vw} x i32> zeroinitializer",
        ]
        for j in range(nv):
            lines.append(f"  %acc.{r}.{j}.n = call {vt} {fma}({vt} %a{r}.s, {vt} %b{j}, {vt} %acc.{r}.{j})")
    lines += [
        "  %k.next = add nuw nsw i64 %k, 1",
        "  %more = icmp slt i64 %k.next, %kc",
        "  br i1 %more, label %loop, label %done, !llvm.loop !0",
        "done:",
        f"  %full.r = icmp eq i64 %rows, {mr}",
        f"  %full.c = icmp eq i64 %cols, {nr}",
        "  %full = and i1 %full.r, %full.c",
        "  br i1 %full, label %store.full, label %store.part",
        "store.full:",
        "  br i1 %accumulate, label %full.add, label %full.set",
    ]
    for mode in ("add", "set"):
        lines.append(f"full.{mode}:")
        for r in range(mr):
            lines += [
                f"  %{mode}.ro{r} = mul nsw i64 %ldc, {r}",
                f"  %{mode}.row{r} = getelementptr inbounds {t}, ptr %c, i64 %{mode}.ro{r}",
            ]
            for j in range(nv):
                p = f"%{mode}.p{r}.{j}"
                lines.append(f"  {p} = getelementptr inbounds {t}, ptr %{mode}.row{r}, i64 {j * vw}")
                value = f"%acc.{r}.{j}.n"
                if mode == "add":
                    lines += [f"  %add.old{r}.{j} = load {vt}, ptr {p}, align {es}",
                              f"  %add.new{r}.{j} = fadd {vt} %add.old{r}.{j}, {value}"]
                    value = f"%add.new{r}.{j}"
                lines.append(f"  store {vt} {value}, ptr {p}, align {es}")
        lines.append("  ret void")
    # edge tile: registers -> stack tile -> the rows x cols corner of C
    lines.append("store.part:")
    for r, j in tiles:
        lines += [f"  %tp{r}.{j} = getelementptr inbounds {t}, ptr %tile, i64 {r * nr + j * vw}",
                  f"  store {vt} %acc.{r}.{j}.n, ptr %tp{r}.{j}, align {min(64, vw * es)}"]
    lines += [
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
        "}",
    ]
    return "\n".join(lines)


def _prefetch_c(cfg: GemmConfig) -> list[str]:
    """Prefetch the C tile (first and last byte of each row) while the k loop runs: its loads
    at the end would otherwise stall on memory."""
    t, es = LLVM_TYPE[cfg.dtype], cfg.itemsize
    lines = []
    for r in range(cfg.mr):
        lines += [f"  %pf.o{r} = mul nsw i64 %ldc, {r}",
                  f"  %pf.r{r} = getelementptr {t}, ptr %c, i64 %pf.o{r}",
                  f"  %pf.e{r} = getelementptr {t}, ptr %pf.r{r}, i64 {cfg.nr - 1}",
                  f"  call void @llvm.prefetch.p0(ptr %pf.r{r}, i32 1, i32 3, i32 1)",
                  f"  call void @llvm.prefetch.p0(ptr %pf.e{r}, i32 1, i32 3, i32 1)"]
    del es
    return lines


def _widen(b: _Builder, value: str, src: str, dst: str) -> str:
    """An operand as the compute type (float16 operands are multiplied in float32)."""
    return value if src == dst else b.v(f"fpext {src} {value} to {dst}")


def _pack_b(cfg: GemmConfig, name: str) -> str:
    """Pack the rows of B into b_pack: row k of B goes, NR elements at a time, into every
    panel of its KC block. A unit is `b_group` rows (unit u = batch * groups + g): one row,
    read along B's rows (B is usually row-major) with the writes filling whole panel lines; or,
    where B's columns are contiguous instead (x @ w.T), VW rows, read VW elements down each
    column and transposed in registers (_pack_b_columns)."""
    t, nr, kcmax, vw = LLVM_TYPE[cfg.dtype], cfg.nr, cfg.kc, cfg.vector
    b = _Builder(md_base=1000)
    c = _ctx_loads(b, ["b", "b_pack", "n", "k", "rsb", "csb", "offsets", "npad", "b_group"])
    full_panels = b.v(f"sdiv i64 {c['n']}, {nr}")
    npanels = b.v(f"sdiv i64 {c['npad']}, {nr}")
    knpad = b.v(f"mul nsw i64 {c['k']}, {c['npad']}")
    gk = b.v(f"add nsw i64 {c['k']}, {c['b_group']}")
    gk1 = b.v(f"sub nsw i64 {gk}, 1")
    groups = b.v(f"sdiv i64 {gk1}, {c['b_group']}")
    counter = b.v(f"getelementptr inbounds i64, ptr %ctx, i64 {_F['pack_next']}")
    done = b.v(f"getelementptr inbounds i64, ptr %ctx, i64 {_F['pack_done']}")
    with b.claimed(counter, "%units", "%chunk", done) as (u0, u1), b.loop(u0, u1) as u:
        batch = b.v(f"sdiv i64 {u}, {groups}")
        g = b.v(f"srem i64 {u}, {groups}")
        k0 = b.v(f"mul nsw i64 {g}, {c['b_group']}")
        k1a = b.v(f"add nsw i64 {k0}, {c['b_group']}")
        past = b.v(f"icmp sgt i64 {k1a}, {c['k']}")
        k1 = b.v(f"select i1 {past}, i64 {c['k']}, i64 {k1a}")
        oi = b.v(f"mul nsw i64 {batch}, 3")
        oi1 = b.v(f"add nsw i64 {oi}, 1")
        op = b.v(f"getelementptr inbounds i64, ptr {c['offsets']}, i64 {oi1}")
        boff = b.v(f"load i64, ptr {op}, align 8")
        bbase = b.v(f"getelementptr {LLVM_TYPE[cfg.source]}, ptr {c['b']}, i64 {boff}")
        dbase = b.v(f"mul nsw i64 {batch}, {knpad}")
        dbatch = b.v(f"getelementptr inbounds {t}, ptr {c['b_pack']}, i64 {dbase}")
        # a whole group of VW rows down contiguous columns (b_group is VW only then, and a
        # KC block holds whole groups): the full panels as VW x VW transposes, then each row's rest
        rows = b.v(f"sub nsw i64 {k1}, {k0}")
        whole = b.v(f"icmp eq i64 {rows}, {vw}")
        grouped = b.v(f"icmp eq i64 {c['b_group']}, {vw}")
        columns = b.v(f"and i1 {whole}, {grouped}")
        with b.branch(columns) as rowwise:
            place, pstride = _pack_b_layout(b, cfg, c, k0)
            dst = b.v(f"getelementptr inbounds {t}, ptr {dbatch}, i64 {place}")
            with b.loop("0", full_panels) as jr:
                _pack_b_columns(b, cfg, bbase, c["csb"], k0, jr, dst, pstride)
            with b.loop(k0, k1) as k:
                _pack_b_row(b, cfg, c, bbase, dbatch, k, full_panels, npanels)
            with rowwise.otherwise():
                with b.loop(k0, k1) as k:
                    _pack_b_row(b, cfg, c, bbase, dbatch, k, "0", npanels)
    b.emit("ret void")
    head = f"define void @{name}(ptr %ctx, i64 %units, i64 %chunk, i64 %tid) #0 {{\nentry:"
    return head + "\n" + "\n".join(b.lines) + "\n}\n" + "\n".join(b.metadata)


def _pack_b_layout(b: _Builder, cfg: GemmConfig, c: dict[str, str], k: str) -> tuple[str, str]:
    """Where row k of B goes in its batch entry's packed B, as (the offset of that row in the
    first panel of its block, the distance between two panels of the block). Block pc holds
    the KC rows around k (the last block may be short: kc rows) and is npad wide, its panels
    of kc x NR one after the other; row k is row k - pc of each."""
    kcmax, nr = cfg.kc, cfg.nr
    blk = b.v(f"sdiv i64 {k}, {kcmax}")
    pc = b.v(f"mul nsw i64 {blk}, {kcmax}")
    kin = b.v(f"sub nsw i64 {k}, {pc}")
    o1 = b.v(f"mul nsw i64 {pc}, {c['npad']}")
    o3 = b.v(f"mul nsw i64 {kin}, {nr}")
    place = b.v(f"add nsw i64 {o1}, {o3}")
    rest = b.v(f"sub nsw i64 {c['k']}, {pc}")
    small = b.v(f"icmp slt i64 {rest}, {kcmax}")
    kc = b.v(f"select i1 {small}, i64 {rest}, i64 {kcmax}")
    return place, b.v(f"mul nsw i64 {kc}, {nr}")


def _pack_b_row(b: _Builder, cfg: GemmConfig, c: dict[str, str], bbase: str, dbatch: str, k: str,
                first: str, npanels: str) -> None:
    """Row k of B into panels [first, npanels): the full panels of a unit-stride row as vector
    copies, the rest element by element, zeros past N."""
    t, nr, es = LLVM_TYPE[cfg.dtype], cfg.nr, cfg.itemsize
    src, ses = LLVM_TYPE[cfg.source], cfg.source.itemsize
    so = b.v(f"mul nsw i64 {k}, {c['rsb']}")
    srow = b.v(f"getelementptr {src}, ptr {bbase}, i64 {so}")
    place, pstride = _pack_b_layout(b, cfg, c, k)
    drow = b.v(f"getelementptr inbounds {t}, ptr {dbatch}, i64 {place}")
    unit_stride = b.v(f"icmp eq i64 {c['csb']}, 1")
    full_panels = b.v(f"sdiv i64 {c['n']}, {nr}")
    vec_end = b.v(f"select i1 {unit_stride}, i64 {full_panels}, i64 {first}")
    with b.loop(first, vec_end) as jr:  # full panels of a unit-stride row: vector copies
        col0 = b.v(f"mul nsw i64 {jr}, {nr}")
        sp = b.v(f"getelementptr {src}, ptr {srow}, i64 {col0}")
        x = _widen(b, b.v(f"load <{nr} x {src}>, ptr {sp}, align {ses}"), f"<{nr} x {src}>", f"<{nr} x {t}>")
        po = b.v(f"mul nsw i64 {jr}, {pstride}")
        dp = b.v(f"getelementptr inbounds {t}, ptr {drow}, i64 {po}")
        b.emit(f"store <{nr} x {t}> {x}, ptr {dp}, align {math.gcd(64, nr * es)}")
    with b.loop(vec_end, npanels) as jr:  # the rest: element by element, zeros past N
        col0 = b.v(f"mul nsw i64 {jr}, {nr}")
        po = b.v(f"mul nsw i64 {jr}, {pstride}")
        dpanel = b.v(f"getelementptr inbounds {t}, ptr {drow}, i64 {po}")
        with b.loop("0", str(nr)) as j:
            col = b.v(f"add nsw i64 {col0}, {j}")
            dp = b.v(f"getelementptr inbounds {t}, ptr {dpanel}, i64 {j}")
            inside = b.v(f"icmp slt i64 {col}, {c['n']}")
            with b.branch(inside) as zero:
                sj = b.v(f"mul nsw i64 {col}, {c['csb']}")
                sp = b.v(f"getelementptr {src}, ptr {srow}, i64 {sj}")
                y = _widen(b, b.v(f"load {src}, ptr {sp}, align {ses}"), src, t)
                b.emit(f"store {t} {y}, ptr {dp}, align {es}")
                with zero.otherwise():
                    b.emit(f"store {t} 0.0, ptr {dp}, align {es}")


def _pack_b_columns(b: _Builder, cfg: GemmConfig, bbase: str, csb: str, k0: str, jr: str, dst: str, pstride: str) -> None:
    """Rows k0 .. k0+VW of full panel jr, from columns that are contiguous in memory: per VW
    columns, one vector load down each column, a VW x VW transpose in registers, one vector
    store per row. `dst`: row k0 of the first panel of k0's block; panels `pstride` apart
    (_pack_b_layout)."""
    t, src, vw, nr, es, ses = LLVM_TYPE[cfg.dtype], LLVM_TYPE[cfg.source], cfg.vector, cfg.nr, cfg.itemsize, cfg.source.itemsize
    vt = f"<{vw} x {t}>"
    po = b.v(f"mul nsw i64 {jr}, {pstride}")
    dpanel = b.v(f"getelementptr inbounds {t}, ptr {dst}, i64 {po}")
    col0 = b.v(f"mul nsw i64 {jr}, {nr}")
    for q in range(cfg.nv):
        cols = []
        for jj in range(vw):
            col = b.v(f"add nsw i64 {col0}, {q * vw + jj}")
            so = b.v(f"mul nsw i64 {col}, {csb}")
            so2 = b.v(f"add nsw i64 {so}, {k0}")
            sp = b.v(f"getelementptr {src}, ptr {bbase}, i64 {so2}")
            cols.append(_widen(b, b.v(f"load <{vw} x {src}>, ptr {sp}, align {ses}"), f"<{vw} x {src}>", vt))
        for kk, row in enumerate(_transpose(b, cols, vt, vw)):
            dp = b.v(f"getelementptr inbounds {t}, ptr {dpanel}, i64 {kk * nr + q * vw}")
            b.emit(f"store {vt} {row}, ptr {dp}, align {es}")


def _transpose(b: _Builder, rows: list[str], vt: str, n: int) -> list[str]:
    """The n x n matrix whose rows are the vectors `rows`, transposed (Eklundh's exchange: for
    h = n/2, n/4, ..., 1, rows i and i + h swap their off-diagonal h x h blocks): n * log2(n)
    two-input shuffles."""
    rows = list(rows)
    h = n // 2
    while h:
        lo = ", ".join(f"i32 {col if col & h == 0 else n + col - h}" for col in range(n))
        hi = ", ".join(f"i32 {col + h if col & h == 0 else n + col}" for col in range(n))
        for i in range(n):
            if i & h == 0:
                x, y = rows[i], rows[i + h]
                rows[i] = b.v(f"shufflevector {vt} {x}, {vt} {y}, <{n} x i32> <{lo}>")
                rows[i + h] = b.v(f"shufflevector {vt} {x}, {vt} {y}, <{n} x i32> <{hi}>")
        h //= 2
    return rows


def _gemm(cfg: GemmConfig, name: str, micro: str) -> str:
    """The row blocks (unit u = batch * units_per_batch + block), with A workspace `tid`."""
    t, mr, nr, kcmax, es, vw = LLVM_TYPE[cfg.dtype], cfg.mr, cfg.nr, cfg.kc, cfg.itemsize, cfg.vector
    src, ses = LLVM_TYPE[cfg.source], cfg.source.itemsize
    b = _Builder(md_base=100000)
    c = _ctx_loads(b, ["a", "b_pack", "c", "a_pack", "m", "n", "k", "rsa", "csa", "ldc", "offsets", "row_starts",
                       "units_per_batch", "npad", "a_pack_stride", "epi_fn", "epi_args"])
    has_epilogue = b.v(f"icmp ne ptr {c['epi_fn']}, null")
    wo = b.v(f"mul nsw i64 %tid, {c['a_pack_stride']}")
    ap = b.v(f"getelementptr inbounds {t}, ptr {c['a_pack']}, i64 {wo}")
    npanels = b.v(f"sdiv i64 {c['npad']}, {nr}")
    knpad = b.v(f"mul nsw i64 {c['k']}, {c['npad']}")
    counter = b.v(f"getelementptr inbounds i64, ptr %ctx, i64 {_F['gemm_next']}")
    done = b.v(f"getelementptr inbounds i64, ptr %ctx, i64 {_F['gemm_done']}")
    with b.claimed(counter, "%units", "%chunk", done) as (u0, u1), b.loop(u0, u1) as u:
        batch = b.v(f"sdiv i64 {u}, {c['units_per_batch']}")
        blk = b.v(f"srem i64 {u}, {c['units_per_batch']}")
        # rows [row_starts[blk], row_starts[blk + 1]) of this batch entry (PackedGemm.plan)
        sp0 = b.v(f"getelementptr inbounds i64, ptr {c['row_starts']}, i64 {blk}")
        i0 = b.v(f"load i64, ptr {sp0}, align 8")
        sp1 = b.v(f"getelementptr inbounds i64, ptr {sp0}, i64 1")
        i1 = b.v(f"load i64, ptr {sp1}, align 8")
        mc = b.v(f"sub nsw i64 {i1}, {i0}")
        mp1 = b.v(f"add nsw i64 {mc}, {mr - 1}")
        mpanels = b.v(f"sdiv i64 {mp1}, {mr}")
        oi = b.v(f"mul nsw i64 {batch}, 3")
        aop = b.v(f"getelementptr inbounds i64, ptr {c['offsets']}, i64 {oi}")
        aoff = b.v(f"load i64, ptr {aop}, align 8")
        oi2 = b.v(f"add nsw i64 {oi}, 2")
        cop = b.v(f"getelementptr inbounds i64, ptr {c['offsets']}, i64 {oi2}")
        coff = b.v(f"load i64, ptr {cop}, align 8")
        abase = b.v(f"getelementptr {src}, ptr {c['a']}, i64 {aoff}")
        crow0 = b.v(f"mul nsw i64 {i0}, {c['ldc']}")
        coff2 = b.v(f"add nsw i64 {coff}, {crow0}")
        cbase = b.v(f"getelementptr inbounds {t}, ptr {c['c']}, i64 {coff2}")
        bo = b.v(f"mul nsw i64 {batch}, {knpad}")
        bpb = b.v(f"getelementptr inbounds {t}, ptr {c['b_pack']}, i64 {bo}")
        with b.loop("0", c["k"], str(kcmax)) as pc:
            rest = b.v(f"sub nsw i64 {c['k']}, {pc}")
            small = b.v(f"icmp slt i64 {rest}, {kcmax}")
            kc = b.v(f"select i1 {small}, i64 {rest}, i64 {kcmax}")
            pcs = b.v(f"mul nsw i64 {pc}, {c['csa']}")
            # pack this thread's rows of A: panel ip holds rows i0+ip*mr .. +mr, column after column
            with b.loop("0", mpanels) as ip:
                pbase = b.v(f"mul nsw i64 {ip}, {mr * 1}")
                pofs = b.v(f"mul nsw i64 {pbase}, {kc}")
                pdst = b.v(f"getelementptr inbounds {t}, ptr {ap}, i64 {pofs}")
                prow0 = b.v(f"add nsw i64 {i0}, {pbase}")
                # a whole panel of rows along unit-stride columns: VW columns at a time, as vectors
                # (_pack_a_columns); what is left, element by element (and zeros past M)
                pend = b.v(f"add nsw i64 {pbase}, {mr}")
                whole = b.v(f"icmp sle i64 {pend}, {mc}")
                along = b.v(f"icmp eq i64 {c['csa']}, 1")
                vectors = b.v(f"and i1 {whole}, {along}")
                kv0 = b.v(f"and i64 {kc}, -{vw}")
                kv1 = b.v(f"select i1 {vectors}, i64 {kv0}, i64 0")
                with b.loop("0", kv1, str(vw)) as k:
                    _pack_a_columns(b, cfg, abase, prow0, c["rsa"], pcs, k, pdst)
                # a whole panel of rows that are contiguous (A transposed): MR elements per column
                down = b.v(f"icmp eq i64 {c['rsa']}, 1")
                rows_down = b.v(f"and i1 {whole}, {down}")
                kv = b.v(f"select i1 {rows_down}, i64 {kc}, i64 {kv1}")
                with b.loop("0", b.v(f"select i1 {rows_down}, i64 {kc}, i64 0")) as k:
                    _pack_a_column(b, cfg, abase, prow0, c["csa"], pcs, k, pdst)
                with b.loop("0", str(mr)) as r:
                    lrow = b.v(f"add nsw i64 {pbase}, {r}")
                    inside = b.v(f"icmp slt i64 {lrow}, {mc}")
                    rdst = b.v(f"getelementptr inbounds {t}, ptr {pdst}, i64 {r}")
                    with b.branch(inside) as zero:
                        grow = b.v(f"add nsw i64 {i0}, {lrow}")
                        so = b.v(f"mul nsw i64 {grow}, {c['rsa']}")
                        so2 = b.v(f"add nsw i64 {so}, {pcs}")
                        srow = b.v(f"getelementptr {src}, ptr {abase}, i64 {so2}")
                        with b.loop(kv, kc) as k:
                            sk = b.v(f"mul nsw i64 {k}, {c['csa']}")
                            sp = b.v(f"getelementptr {src}, ptr {srow}, i64 {sk}")
                            x = _widen(b, b.v(f"load {src}, ptr {sp}, align {ses}"), src, t)
                            dk = b.v(f"mul nsw i64 {k}, {mr}")
                            dp = b.v(f"getelementptr inbounds {t}, ptr {rdst}, i64 {dk}")
                            b.emit(f"store {t} {x}, ptr {dp}, align {es}")
                        with zero.otherwise():
                            with b.loop("0", kc) as k:
                                dk = b.v(f"mul nsw i64 {k}, {mr}")
                                dp = b.v(f"getelementptr inbounds {t}, ptr {rdst}, i64 {dk}")
                                b.emit(f"store {t} 0.0, ptr {dp}, align {es}")
            accumulate = b.v(f"icmp ne i64 {pc}, 0")
            o1 = b.v(f"mul nsw i64 {pc}, {c['npad']}")
            bblock = b.v(f"getelementptr inbounds {t}, ptr {bpb}, i64 {o1}")
            with b.loop("0", npanels) as jr:
                col0 = b.v(f"mul nsw i64 {jr}, {nr}")
                po = b.v(f"mul nsw i64 {col0}, {kc}")
                bpanel = b.v(f"getelementptr inbounds {t}, ptr {bblock}, i64 {po}")
                cleft = b.v(f"sub nsw i64 {c['n']}, {col0}")
                cl = b.v(f"icmp slt i64 {cleft}, {nr}")
                cols = b.v(f"select i1 {cl}, i64 {cleft}, i64 {nr}")
                ccol = b.v(f"getelementptr inbounds {t}, ptr {cbase}, i64 {col0}")
                with b.loop("0", mpanels) as ip:
                    row0 = b.v(f"mul nsw i64 {ip}, {mr}")
                    rleft = b.v(f"sub nsw i64 {mc}, {row0}")
                    rl = b.v(f"icmp slt i64 {rleft}, {mr}")
                    rows = b.v(f"select i1 {rl}, i64 {rleft}, i64 {mr}")
                    ao = b.v(f"mul nsw i64 {row0}, {kc}")
                    apanel = b.v(f"getelementptr inbounds {t}, ptr {ap}, i64 {ao}")
                    co = b.v(f"mul nsw i64 {row0}, {c['ldc']}")
                    ctile = b.v(f"getelementptr inbounds {t}, ptr {ccol}, i64 {co}")
                    b.emit(f"call void @{micro}(ptr {apanel}, ptr {bpanel}, i64 {kc}, ptr {ctile}, i64 {c['ldc']}, "
                           f"i64 {rows}, i64 {cols}, i1 {accumulate})")
        # this block of C's rows is final: the epilogue kernel (a ranged kernel entry, see
        # PackedGemm.run) over their elements, while they are still in cache
        with b.branch(has_epilogue):
            e0 = b.v(f"add nsw i64 {coff}, {crow0}")
            rows_n = b.v(f"mul nsw i64 {mc}, {c['ldc']}")
            e1 = b.v(f"add nsw i64 {e0}, {rows_n}")
            b.emit(f"call void {c['epi_fn']}(ptr {c['epi_args']}, i64 {e0}, i64 {e1})")
    b.emit("ret void")
    head = f"define void @{name}(ptr %ctx, i64 %units, i64 %chunk, i64 %tid) #0 {{\nentry:"
    return head + "\n" + "\n".join(b.lines) + "\n}\n" + "\n".join(b.metadata)


def _pack_a_columns(b: _Builder, cfg: GemmConfig, abase: str, row0: str, rsa: str, col0: str, k: str, dst: str) -> None:
    """Columns k .. k+VW of a panel's MR rows of A (row-major along those columns) into the
    packed panel at `dst`: one vector load per row, then one shuffle that interleaves them
    column after column (packed[kk * MR + r] = A[row0 + r, col0 + k + kk]), one store of
    MR * VW elements. The element-by-element copy it replaces was 5-6 % of a 1024^3 product on
    one thread and a quarter of a 64^3 one: a scalar load and a scalar store 24 bytes apart per
    element."""
    t, src, mr, vw, es, ses = LLVM_TYPE[cfg.dtype], LLVM_TYPE[cfg.source], cfg.mr, cfg.vector, cfg.itemsize, cfg.source.itemsize
    vt = f"<{vw} x {t}>"
    rows = []
    for r in range(mr):
        grow = b.v(f"add nsw i64 {row0}, {r}")
        so = b.v(f"mul nsw i64 {grow}, {rsa}")
        so2 = b.v(f"add nsw i64 {so}, {col0}")
        so3 = b.v(f"add nsw i64 {so2}, {k}")
        sp = b.v(f"getelementptr {src}, ptr {abase}, i64 {so3}")
        rows.append(_widen(b, b.v(f"load <{vw} x {src}>, ptr {sp}, align {ses}"), f"<{vw} x {src}>", vt))
    # concatenate the rows (padded with poison to a power of two) pairwise into one long vector,
    # where row r is elements [r * VW, (r + 1) * VW)
    width = vw
    while len(rows) & (len(rows) - 1):
        rows.append("poison")
    while len(rows) > 1:
        mask = ", ".join(f"i32 {i}" for i in range(2 * width))
        rows = [b.v(f"shufflevector <{width} x {t}> {x}, <{width} x {t}> {y}, <{2 * width} x i32> <{mask}>")
                for x, y in zip(rows[::2], rows[1::2])]
        width *= 2
    order = ", ".join(f"i32 {r * vw + kk}" for kk in range(vw) for r in range(mr))
    packed = b.v(f"shufflevector <{width} x {t}> {rows[0]}, <{width} x {t}> poison, <{mr * vw} x i32> <{order}>")
    offset = b.v(f"mul nsw i64 {k}, {mr}")
    dp = b.v(f"getelementptr inbounds {t}, ptr {dst}, i64 {offset}")
    b.emit(f"store <{mr * vw} x {t}> {packed}, ptr {dp}, align {es}")


def _pack_a_column(b: _Builder, cfg: GemmConfig, abase: str, row0: str, csa: str, block: str, k: str, dst: str) -> None:
    """Column k of a panel's MR rows of A (from `block`, the KC block's first column times csa)
    where those rows are contiguous (A stored transposed): one MR-element load and store
    (element by element, it was MR loads csa apart)."""
    t, src, mr, es, ses = LLVM_TYPE[cfg.dtype], LLVM_TYPE[cfg.source], cfg.mr, cfg.itemsize, cfg.source.itemsize
    so = b.v(f"mul nsw i64 {k}, {csa}")
    so1 = b.v(f"add nsw i64 {so}, {block}")
    so2 = b.v(f"add nsw i64 {so1}, {row0}")
    sp = b.v(f"getelementptr {src}, ptr {abase}, i64 {so2}")
    x = _widen(b, b.v(f"load <{mr} x {src}>, ptr {sp}, align {ses}"), f"<{mr} x {src}>", f"<{mr} x {t}>")
    offset = b.v(f"mul nsw i64 {k}, {mr}")
    dp = b.v(f"getelementptr inbounds {t}, ptr {dst}, i64 {offset}")
    b.emit(f"store <{mr} x {t}> {x}, ptr {dp}, align {es}")


def _serial(prefix: str) -> str:
    """`{prefix}_serial(ctx)`: both phases on the calling thread, all units (b_units rows of B,
    g_units row blocks). One pointer argument: a ctypes call of it costs about a third of a
    call with four typed arguments (0.6-1.0 against 3.1-3.6 us here), and small matmuls would
    pay two of those."""
    return "\n".join([
        f"define void @{prefix}_serial(ptr %ctx) #0 {{",
        f"  %bp = getelementptr inbounds i64, ptr %ctx, i64 {_F['b_units']}",
        "  %bu = load i64, ptr %bp, align 8",
        f"  %gp = getelementptr inbounds i64, ptr %ctx, i64 {_F['g_units']}",
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
        f"  %bp = getelementptr inbounds i64, ptr %ctx, i64 {_F['b_units']}",
        "  %bu = load i64, ptr %bp, align 8",
        f"  %cp = getelementptr inbounds i64, ptr %ctx, i64 {_F['b_chunk']}",
        "  %bc = load i64, ptr %cp, align 8",
        f"  %gp = getelementptr inbounds i64, ptr %ctx, i64 {_F['g_units']}",
        "  %gu = load i64, ptr %gp, align 8",
        f"  call void @{prefix}_pack_b(ptr %ctx, i64 %bu, i64 %bc, i64 %tid)",
        f"  %pd = getelementptr inbounds i64, ptr %ctx, i64 {_F['pack_done']}",
        "  call void @ug_gemm_wait(ptr %pd, i64 %bu)",
        f"  call void @{prefix}_gemm(ptr %ctx, i64 %gu, i64 1, i64 %tid)",
        "  %first = icmp eq i64 %tid, 0",
        "  br i1 %first, label %wait, label %out",
        "wait:",
        f"  %gd = getelementptr inbounds i64, ptr %ctx, i64 {_F['gemm_done']}",
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
    t = LLVM_TYPE[cfg.dtype]
    suffix = "f32" if t == "float" else "f64"
    micro = f"{prefix}_micro"
    return "\n\n".join([
        f"; ug packed gemm {cfg}",
        f'target triple = "{triple}"',
        f'target datalayout = "{data_layout}"',
        _micro_kernel(cfg, micro),
        _pack_b(cfg, f"{prefix}_pack_b"),
        _gemm(cfg, f"{prefix}_gemm", micro),
        _serial(prefix),
        _parallel(prefix, triple),
        f"declare <{cfg.vector} x {t}> @llvm.fma.v{cfg.vector}{suffix}(<{cfg.vector} x {t}>, <{cfg.vector} x {t}>, <{cfg.vector} x {t}>)",
        "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)",
        '!0 = distinct !{!0, !1}\n!1 = !{!"llvm.loop.unroll.count", i32 4}',
        # the packing and blocking loops stay plain loops: vectorizing and unrolling them
        # tripled the compile time (1.1 s -> 0.4 s cold per dtype) for no measurable speed
        '!90 = !{!"llvm.loop.vectorize.enable", i1 false}\n!91 = !{!"llvm.loop.unroll.disable"}',
        _attributes(cpu, features),
    ])


# --- running it ----------------------------------------------------------------------------------

_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
_SERIAL = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # (an untyped call would pass an int as a 32-bit C int)
_PARALLEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)

# runs fn(tid) once on each of `threads` threads, tid 0 on the calling one; need not wait for the
# others (the gemm's fn(0) returns when all the work is done, see _parallel)
OnThreads = Callable[[Callable[[int], None], int], None]


@dataclass(frozen=True)
class Problem:
    """One matmul in element units: C[b] (contiguous M x N rows) = A[b] @ B[b], where A[b] starts
    at offsets[3b] with strides (rsa, csa), B[b] at offsets[3b + 1] with (rsb, csb) and C[b] at
    offsets[3b + 2]. (An `array` of int64, not numpy: it is built on every matmul, and small
    matmuls are dominated by such Python costs.)"""

    m: int
    n: int
    k: int
    rsa: int
    csa: int
    rsb: int
    csb: int
    offsets: array.array   # "q": 3 per batch entry

    @staticmethod
    def from_views(a_shape: tuple[int, ...], a_strides: tuple[int, ...], a_offset: int,
                   b_shape: tuple[int, ...], b_strides: tuple[int, ...], b_offset: int) -> "Problem":
        """From the operands' strided views (same batch shape, element strides). Batches of A
        against one shared B (stride 0 over the batch) whose rows lie evenly spaced, the
        `x @ weight` case, become one tall A so B is packed once."""
        *batch, m, k = a_shape
        n = b_shape[-1]
        rsa, csa = a_strides[-2:]
        rsb, csb = b_strides[-2:]
        a_bs, b_bs = a_strides[:-2], b_strides[:-2]
        if batch and all(s == 0 for s in b_bs) and _rows_evenly_spaced(batch + [m], list(a_bs) + [rsa]):
            rows = int(np.prod(batch)) * m
            return Problem(rows, n, k, rsa, csa, rsb, csb, array.array("q", (a_offset, b_offset, 0)))
        if not batch:
            return Problem(m, n, k, rsa, csa, rsb, csb, array.array("q", (a_offset, b_offset, 0)))
        nb = int(np.prod(batch))
        idx = np.indices(batch, dtype=np.int64).reshape(len(batch), nb)
        offsets = np.empty((nb, 3), dtype=np.int64)
        offsets[:, 0] = a_offset + np.array(a_bs, dtype=np.int64) @ idx
        offsets[:, 1] = b_offset + np.array(b_bs, dtype=np.int64) @ idx
        offsets[:, 2] = np.arange(nb, dtype=np.int64) * (m * n)
        return Problem(m, n, k, rsa, csa, rsb, csb, array.array("q", offsets.tobytes()))

    @property
    def batch(self) -> int:
        return len(self.offsets) // 3


def _rows_evenly_spaced(shape: list[int], strides: list[int]) -> bool:
    """Whether dims `shape` (outermost first) with `strides` flatten to one dim of stride strides[-1]."""
    expected = strides[-1]
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


_EPI_FN, _EPI_ARGS, _PACK_NEXT, _GEMM_NEXT = _F["epi_fn"], _F["epi_args"], _F["pack_next"], _F["gemm_next"]
_PACK_DONE, _GEMM_DONE = _F["pack_done"], _F["gemm_done"]
assert CTX_FIELDS[:5] == ("a", "b", "c", "a_pack", "b_pack")  # (run sets them by position)
# a problem whose workspace is at most this many bytes keeps its context and a workspace of
# its own between calls (_Setup.spare): taking a workspace from the device's pool and building
# the context were a third of the Python around a 64^3 product. (Such workspaces are the
# gemm's, like its code: not device buffers, at most 2 * 256 of them, 64 MiB in all.)
SPARE_WORKSPACE = 1 << 17
MAX_SETUPS = 256


def _own_workspace(nbytes: int) -> tuple[np.ndarray, int]:
    """A 64-byte aligned workspace owned by the gemm (freed with the array)."""
    block = np.empty(nbytes + 64, np.uint8)
    address = block.ctypes.data
    return block, address + (-address) % 64


@dataclass(frozen=True)
class _Setup:
    problem: Problem      # kept alive: setups are found by its id
    starts: array.array   # row block starts (the ctx points at them)
    ctx: array.array      # the context without the pointers (a, b, c, workspaces, epilogue)
    workspace: int        # bytes: the A panels of each thread, then the packed B at b_pack_at
    b_pack_at: int
    # (workspace, context, its address) of earlier calls, for the next ones: one per call
    # running at the same time, two at most, and only for workspaces <= SPARE_WORKSPACE
    spare: list[tuple[Any, array.array, int]] = field(default_factory=list)


class PackedGemm:
    """The compiled gemm for one dtype on this host, and how to run it over a thread pool."""

    def __init__(self, jit: Any, dtype: np.dtype, cfg: GemmConfig | None = None, source: np.dtype | None = None):
        """dtype: the compute and C dtype; source: A's and B's (default: dtype)."""
        self.cfg = cfg or GemmConfig.for_host(dtype, jit.features, source)
        ir = render_module(self.cfg, "ug_gemm", jit.triple, jit.data_layout, jit.cpu, jit.features)
        prefix = "ug_gemm_" + hashlib.sha256(ir.encode()).hexdigest()[:16]
        ir = ir.replace("@ug_gemm_", f"@{prefix}_")
        self.ir = ir
        # (id(problem), threads) -> what run needs of them (see _setup)
        self._setups: dict[tuple[int, int], _Setup] = {}
        # one module, loaded (compiled, or read from the disk cache) once for its three entries
        self.pack_b = _ENTRY(jit.load(ir, f"{prefix}_pack_b"))
        self.gemm = _ENTRY(jit.address(f"{prefix}_gemm"))
        self.serial = _SERIAL(jit.address(f"{prefix}_serial"))
        self.parallel = _PARALLEL(jit.address(f"{prefix}_parallel"))

    def plan(self, p: Problem, threads: int) -> array.array:
        """The row blocks of one batch entry, as their starts (multiples of MR, then M): the
        threads take (batch entry, block) units from a shared counter.

        One thread: blocks of at most mc_max rows. Threads and few batch entries: blocks that
        shrink towards the end (guided: each a 1/(2*threads) share of the rows left, within
        [MIN_BLOCK_PANELS, mc_max]), so a thread that comes late or runs on a busy core leaves
        the others at most one small block to wait for. With equal blocks of a quarter of each
        thread's share, a 1024^3 matmul on 2 threads ended with one thread idle for 1.6-2.7 ms
        of 12-14. Many batch entries share out evenly by themselves: equal blocks."""
        mr = self.cfg.mr
        panels = -(-p.m // mr)
        most = max(1, self.cfg.mc_max // mr)
        sizes: list[int] = []
        if threads <= 1 or p.batch >= 4 * threads:
            blocks = -(-panels // most)
            sizes = [panels // blocks + (1 if i < panels % blocks else 0) for i in range(blocks)]
        else:
            left = panels
            while left:
                size = min(left, most, max(MIN_BLOCK_PANELS, -(-left // (2 * threads))))
                sizes.append(size)
                left -= size
        starts = array.array("q", [0])
        for size in sizes:
            starts.append(min(p.m, starts[-1] + size * mr))
        return starts

    def run(self, p: Problem, a: int, b: int, c: int, alloc: Callable[[int], tuple[Any, int]],
            release: Callable[[Any], None], on_threads: OnThreads, threads: int,
            epilogue: tuple[int, int] = (0, 0)) -> None:
        """C = A @ B for pointers a, b, c; `alloc(nbytes) -> (handle, pointer)` gives 64-byte
        aligned workspaces, `release(handle)` takes them back. `epilogue`: (the address of a
        kernel's ranged entry `void f(i8** args, i64 start, i64 end)`, the address of its
        argument array), called on the elements [start, end) of C (row-major, over the whole
        batch) of each block of rows as soon as they are final; (0, 0): none."""
        setup = self._setups.get((id(p), threads))
        if setup is None or setup.problem is not p:
            setup = self._setup(p, threads)
        if threads > 1:
            self._run_parallel(setup, a, b, c, alloc, release, on_threads, threads, epilogue)
            return
        try:  # a context with its workspace from an earlier call (small problems only, see _Setup)
            ws, ctx, ctx_ptr = setup.spare.pop()
        except IndexError:
            ws, ws_ptr = _own_workspace(setup.workspace) if setup.workspace <= SPARE_WORKSPACE else alloc(setup.workspace)
            ctx = setup.ctx[:]  # a copy per call: the counters in it are the threads' shared state
            ctx[3], ctx[4] = ws_ptr, ws_ptr + setup.b_pack_at
            ctx_ptr = ctx.buffer_info()[0]
        ctx[0], ctx[1], ctx[2] = a, b, c
        ctx[_EPI_FN], ctx[_EPI_ARGS] = epilogue
        ctx[_PACK_NEXT] = ctx[_GEMM_NEXT] = ctx[_PACK_DONE] = ctx[_GEMM_DONE] = 0
        try:
            self.serial(ctx_ptr)
        finally:
            if setup.workspace > SPARE_WORKSPACE:
                release(ws)
            elif len(setup.spare) < 2:
                setup.spare.append((ws, ctx, ctx_ptr))

    def _run_parallel(self, setup: "_Setup", a: int, b: int, c: int, alloc: Callable[[int], tuple[Any, int]],
                      release: Callable[[Any], None], on_threads: OnThreads, threads: int,
                      epilogue: tuple[int, int]) -> None:
        """The product on `threads` threads, each running the parallel entry on a context of
        its own for this call. The caller's thread returns once all the work is done; another
        thread may start after that (on_threads need not wait for it), finds nothing left and
        leaves: it touches only the context (kept alive by its closure), never the workspace,
        which is therefore given back at once."""
        ws, ws_ptr = alloc(setup.workspace)
        try:
            ctx = setup.ctx[:]
            ctx[0], ctx[1], ctx[2], ctx[3], ctx[4] = a, b, c, ws_ptr, ws_ptr + setup.b_pack_at
            ctx[_EPI_FN], ctx[_EPI_ARGS] = epilogue
            ctx_ptr, parallel = ctx.buffer_info()[0], self.parallel

            def work(tid: int, ctx: array.array = ctx) -> None:  # (ctx: alive while a thread may read it)
                parallel(ctx_ptr, tid)
            on_threads(work, threads)
        finally:
            release(ws)

    def _setup(self, p: Problem, threads: int) -> "_Setup":
        """What `run` needs of a problem on some threads that does not change between calls (a
        ug.jit replay runs the same problem every call, and for a small matmul this Python
        was a good part of the call): the row blocks, the workspace (A panels per thread, then
        the packed B) and the context with every field but the pointers filled in."""
        cfg = self.cfg
        npad = -(-p.n // cfg.nr) * cfg.nr
        starts = self.plan(p, threads)
        blocks = len(starts) - 1
        widest = max(starts[i + 1] - starts[i] for i in range(blocks))
        a_stride = -(-widest // cfg.mr) * cfg.mr * min(cfg.kc, p.k)
        b_pack_at = -(-threads * a_stride * cfg.itemsize // 64) * 64
        # pack_b's unit: one row of B, or VW rows where B's columns are contiguous (see _pack_b)
        group = cfg.vector if p.rsb == 1 and p.csb != 1 and cfg.kc % cfg.vector == 0 else 1
        b_rows, units = p.batch * -(-p.k // group), p.batch * blocks
        ctx = array.array("q", (0, 0, 0, 0, 0, p.m, p.n, p.k, p.rsa, p.csa, p.rsb, p.csb, p.n,
                                p.offsets.buffer_info()[0], starts.buffer_info()[0], blocks, npad, a_stride, 0, 0,
                                0, 0, b_rows, units, group, 0, 0, max(1, b_rows // (8 * threads))))
        setup = _Setup(p, starts, ctx, b_pack_at + p.batch * p.k * npad * cfg.itemsize, b_pack_at)
        if len(self._setups) >= MAX_SETUPS:  # bounded: problems of dropped schedules go eventually
            self._setups.clear()
        self._setups[id(p), threads] = setup
        return setup
