"""Packing A: each thread copies its block of rows of A, per KC block, into MR-row panels
(column after column, zero padded past M) in its own workspace, which stays in L2 while the
micro-kernel streams the panels past each B panel."""

from __future__ import annotations

from dataclasses import dataclass

from .builder import Builder
from .config import GemmConfig


@dataclass(frozen=True)
class RowBlock:
    """IR values of one unit of the gemm's work: a block of rows of one batch entry."""

    i0: str        # its first row
    mc: str        # its number of rows
    mpanels: str   # its number of MR-row panels
    abase: str     # A of its batch entry
    c_first: str   # the offset in C of its first element
    cbase: str     # its first row of C
    bpb: str       # the packed B of its batch entry


def pack_a_block(b: Builder, cfg: GemmConfig, c: dict[str, str], rows: RowBlock, ap: str, kc: str, pcs: str) -> None:
    """The block's rows of A, columns [pc, pc + kc) (`pcs`: pc times csa), into the panels at
    `ap`: panel ip holds rows i0+ip*mr .. +mr, column after column."""
    t, mr, vw = cfg.t, cfg.mr, cfg.vector
    with b.loop("0", rows.mpanels) as ip:
        pbase = b.value(f"mul nsw i64 {ip}, {mr}")
        pofs = b.value(f"mul nsw i64 {pbase}, {kc}")
        pdst = b.value(f"getelementptr inbounds {t}, ptr {ap}, i64 {pofs}")
        prow0 = b.value(f"add nsw i64 {rows.i0}, {pbase}")
        # a whole panel of rows along unit-stride columns: VW columns at a time, as vectors
        # (_pack_a_columns); what is left, element by element (and zeros past M)
        pend = b.value(f"add nsw i64 {pbase}, {mr}")
        whole = b.value(f"icmp sle i64 {pend}, {rows.mc}")
        along = b.value(f"icmp eq i64 {c['csa']}, 1")
        vectors = b.value(f"and i1 {whole}, {along}")
        kv0 = b.value(f"and i64 {kc}, -{vw}")
        kv1 = b.value(f"select i1 {vectors}, i64 {kv0}, i64 0")
        # the panel's row offsets, once (rows past the block's last read its last: unused then)
        last = b.value(f"add nsw i64 {rows.i0}, {rows.mc}")
        last1 = b.value(f"sub nsw i64 {last}, 1")
        offsets = [b.row_offset(c["a_rows"], b.smin(b.value(f"add nsw i64 {prow0}, {r}"), last1), c["rsa"])
                   for r in range(mr)]
        with b.loop("0", kv1, str(vw)) as k:
            _pack_a_columns(b, cfg, rows.abase, offsets, pcs, k, pdst)
        # a whole panel of rows that are contiguous (A transposed): MR elements per column
        down = b.value(f"icmp eq i64 {c['rsa']}, 1")
        rows_down = b.value(f"and i1 {whole}, {down}")
        kv = b.value(f"select i1 {rows_down}, i64 {kc}, i64 {kv1}")
        with b.loop("0", b.value(f"select i1 {rows_down}, i64 {kc}, i64 0")) as k:
            _pack_a_column(b, cfg, rows.abase, prow0, c["csa"], pcs, k, pdst)
        _pack_a_rest(b, cfg, c, rows, pbase, pdst, kv, kc, pcs)


def _pack_a_rest(b: Builder, cfg: GemmConfig, c: dict[str, str], rows: RowBlock, pbase: str, pdst: str,
                 kv: str, kc: str, pcs: str) -> None:
    """Columns [kv, kc) of the panel at row `pbase` of the block, element by element: what the
    vector copies left, and zeros for the rows past M."""
    t, src, mr, es = cfg.t, cfg.src, cfg.mr, cfg.itemsize
    with b.loop("0", str(mr)) as r:
        lrow = b.value(f"add nsw i64 {pbase}, {r}")
        inside = b.value(f"icmp slt i64 {lrow}, {rows.mc}")
        rdst = b.value(f"getelementptr inbounds {t}, ptr {pdst}, i64 {r}")
        with b.branch(inside) as zero:
            grow = b.value(f"add nsw i64 {rows.i0}, {lrow}")
            so = b.row_offset(c["a_rows"], grow, c["rsa"])
            so2 = b.value(f"add nsw i64 {so}, {pcs}")
            srow = b.value(f"getelementptr {src}, ptr {rows.abase}, i64 {so2}")
            with b.loop(kv, kc) as k:
                sk = b.value(f"mul nsw i64 {k}, {c['csa']}")
                x = b.load_widened(cfg, srow, sk)
                dk = b.value(f"mul nsw i64 {k}, {mr}")
                dp = b.value(f"getelementptr inbounds {t}, ptr {rdst}, i64 {dk}")
                b.emit(f"store {t} {x}, ptr {dp}, align {es}")
            with zero.otherwise():
                with b.loop("0", kc) as k:
                    dk = b.value(f"mul nsw i64 {k}, {mr}")
                    dp = b.value(f"getelementptr inbounds {t}, ptr {rdst}, i64 {dk}")
                    b.emit(f"store {t} 0.0, ptr {dp}, align {es}")


def _pack_a_columns(b: Builder, cfg: GemmConfig, abase: str, offsets: list[str], col0: str, k: str, dst: str) -> None:
    """Columns k .. k+VW of a panel's MR rows of A (row-major along those columns; the rows at
    `offsets`) into the packed panel at `dst`: one vector load per row, then one shuffle that interleaves them
    column after column (packed[kk * MR + r] = A[row0 + r, col0 + k + kk]), one store of
    MR * VW elements. The element-by-element copy it replaces was 5-6 % of a 1024^3 product on
    one thread and a quarter of a 64^3 one: a scalar load and a scalar store 24 bytes apart per
    element."""
    t, mr, vw, es = cfg.t, cfg.mr, cfg.vector, cfg.itemsize
    rows = []
    for r in range(mr):
        so2 = b.value(f"add nsw i64 {offsets[r]}, {col0}")
        so3 = b.value(f"add nsw i64 {so2}, {k}")
        rows.append(b.load_widened(cfg, abase, so3, vw))
    # concatenate the rows (padded with poison to a power of two) pairwise into one long vector,
    # where row r is elements [r * VW, (r + 1) * VW)
    width = vw
    while len(rows) & (len(rows) - 1):
        rows.append("poison")
    while len(rows) > 1:
        mask = ", ".join(f"i32 {i}" for i in range(2 * width))
        rows = [b.value(f"shufflevector <{width} x {t}> {x}, <{width} x {t}> {y}, <{2 * width} x i32> <{mask}>")
                for x, y in zip(rows[::2], rows[1::2])]
        width *= 2
    order = ", ".join(f"i32 {r * vw + kk}" for kk in range(vw) for r in range(mr))
    packed = b.value(f"shufflevector <{width} x {t}> {rows[0]}, <{width} x {t}> poison, <{mr * vw} x i32> <{order}>")
    offset = b.value(f"mul nsw i64 {k}, {mr}")
    dp = b.value(f"getelementptr inbounds {t}, ptr {dst}, i64 {offset}")
    b.emit(f"store <{mr * vw} x {t}> {packed}, ptr {dp}, align {es}")


def _pack_a_column(b: Builder, cfg: GemmConfig, abase: str, row0: str, csa: str, block: str, k: str, dst: str) -> None:
    """Column k of a panel's MR rows of A (from `block`, the KC block's first column times csa)
    where those rows are contiguous (A stored transposed): one MR-element load and store
    (element by element, it was MR loads csa apart)."""
    t, mr, es = cfg.t, cfg.mr, cfg.itemsize
    so = b.value(f"mul nsw i64 {k}, {csa}")
    so1 = b.value(f"add nsw i64 {so}, {block}")
    so2 = b.value(f"add nsw i64 {so1}, {row0}")
    x = b.load_widened(cfg, abase, so2, mr)
    offset = b.value(f"mul nsw i64 {k}, {mr}")
    dp = b.value(f"getelementptr inbounds {t}, ptr {dst}, i64 {offset}")
    b.emit(f"store <{mr} x {t}> {x}, ptr {dp}, align {es}")
