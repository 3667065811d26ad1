"""Packing B: every thread copies rows of B into the shared packed B, panel by panel.

Packed B, per batch entry: for each block of KC rows, npad / NR panels of kc x NR (row after row,
zero padded past N), one after the other. The gemm's threads share out the rows (see
Builder.claimed), then read the panels in the micro-kernel.
"""

from __future__ import annotations

import math

from .builder import Builder
from .config import GemmConfig


def pack_b(cfg: GemmConfig, name: str) -> str:
    """Pack the rows of B into b_pack: row k of B goes, NR elements at a time, into every
    panel of its KC block. A unit is `b_group` rows (unit u = batch * groups + g): one row,
    read along B's rows (B is usually row-major) with the writes filling whole panel lines; or,
    where B's columns are contiguous instead (x @ w.T), VW rows, read VW elements down each
    column and transposed in registers (_pack_b_columns)."""
    t, nr, vw = cfg.t, cfg.nr, cfg.vector
    b = Builder(md_base=1000)
    c = b.ctx_loads(["b", "b_pack", "n", "k", "rsb", "csb", "offsets", "npad", "b_group", "b_rows", "b_local"])
    full_panels = b.value(f"sdiv i64 {c['n']}, {nr}")
    npanels = b.value(f"sdiv i64 {c['npad']}, {nr}")
    knpad = b.value(f"mul nsw i64 {c['k']}, {c['npad']}")
    gk = b.value(f"add nsw i64 {c['k']}, {c['b_group']}")
    gk1 = b.value(f"sub nsw i64 {gk}, 1")
    groups = b.value(f"sdiv i64 {gk1}, {c['b_group']}")
    with b.units("pack_next", "pack_done") as u:
        batch = b.value(f"sdiv i64 {u}, {groups}")
        g = b.value(f"srem i64 {u}, {groups}")
        k0 = b.value(f"mul nsw i64 {g}, {c['b_group']}")
        k1a = b.value(f"add nsw i64 {k0}, {c['b_group']}")
        past = b.value(f"icmp sgt i64 {k1a}, {c['k']}")
        k1 = b.value(f"select i1 {past}, i64 {c['k']}, i64 {k1a}")
        oi = b.value(f"mul nsw i64 {batch}, 3")
        oi1 = b.value(f"add nsw i64 {oi}, 1")
        op = b.value(f"getelementptr inbounds i64, ptr {c['offsets']}, i64 {oi1}")
        boff = b.value(f"load i64, ptr {op}, align 8")
        bbase = b.value(f"getelementptr {cfg.src}, ptr {c['b']}, i64 {boff}")
        dbase = b.value(f"mul nsw i64 {b.packed_b_slot(c['b_local'], batch)}, {knpad}")
        dbatch = b.value(f"getelementptr inbounds {t}, ptr {c['b_pack']}, i64 {dbase}")
        # a whole group of VW rows down contiguous columns (b_group is VW only then, and a
        # KC block holds whole groups): the full panels as VW x VW transposes, then each row's rest
        rows = b.value(f"sub nsw i64 {k1}, {k0}")
        whole = b.value(f"icmp eq i64 {rows}, {vw}")
        grouped = b.value(f"icmp eq i64 {c['b_group']}, {vw}")
        columns = b.value(f"and i1 {whole}, {grouped}")
        with b.branch(columns) as rowwise:
            place, pstride = _pack_b_layout(b, cfg, c, k0)
            dst = b.value(f"getelementptr inbounds {t}, ptr {dbatch}, i64 {place}")
            with b.loop("0", full_panels) as jr:
                _pack_b_columns(b, cfg, bbase, c["csb"], k0, jr, dst, pstride)
            with b.loop(k0, k1) as k:
                _pack_b_row(b, cfg, c, bbase, dbatch, k, full_panels, npanels)
            with rowwise.otherwise():
                with b.loop(k0, k1) as k:
                    _pack_b_row(b, cfg, c, bbase, dbatch, k, "0", npanels)
    b.emit("ret void")
    return b.function(name)


def _pack_b_layout(b: Builder, cfg: GemmConfig, c: dict[str, str], k: str) -> tuple[str, str]:
    """Where row k of B goes in its batch entry's packed B, as (the offset of that row in the
    first panel of its block, the distance between two panels of the block). Block pc holds
    the KC rows around k (the last block may be short: kc rows) and is npad wide, its panels
    of kc x NR one after the other; row k is row k - pc of each."""
    kcmax, nr = cfg.kc, cfg.nr
    blk = b.value(f"sdiv i64 {k}, {kcmax}")
    pc = b.value(f"mul nsw i64 {blk}, {kcmax}")
    kin = b.value(f"sub nsw i64 {k}, {pc}")
    o1 = b.value(f"mul nsw i64 {pc}, {c['npad']}")
    o3 = b.value(f"mul nsw i64 {kin}, {nr}")
    place = b.value(f"add nsw i64 {o1}, {o3}")
    kc = b.smin(b.value(f"sub nsw i64 {c['k']}, {pc}"), kcmax)
    return place, b.value(f"mul nsw i64 {kc}, {nr}")


def _pack_b_row(b: Builder, cfg: GemmConfig, c: dict[str, str], bbase: str, dbatch: str, k: str,
                first: str, npanels: str) -> None:
    """Row k of B into panels [first, npanels): the full panels of a unit-stride row as vector
    copies, the rest element by element, zeros past N."""
    t, nr, es = cfg.t, cfg.nr, cfg.itemsize
    so = b.row_offset(c["b_rows"], k, c["rsb"])
    srow = b.value(f"getelementptr {cfg.src}, ptr {bbase}, i64 {so}")
    place, pstride = _pack_b_layout(b, cfg, c, k)
    drow = b.value(f"getelementptr inbounds {t}, ptr {dbatch}, i64 {place}")
    unit_stride = b.value(f"icmp eq i64 {c['csb']}, 1")
    full_panels = b.value(f"sdiv i64 {c['n']}, {nr}")
    vec_end = b.value(f"select i1 {unit_stride}, i64 {full_panels}, i64 {first}")
    with b.loop(first, vec_end) as jr:  # full panels of a unit-stride row: vector copies
        col0 = b.value(f"mul nsw i64 {jr}, {nr}")
        x = b.load_widened(cfg, srow, col0, nr)
        po = b.value(f"mul nsw i64 {jr}, {pstride}")
        dp = b.value(f"getelementptr inbounds {t}, ptr {drow}, i64 {po}")
        b.emit(f"store <{nr} x {t}> {x}, ptr {dp}, align {math.gcd(64, nr * es)}")
    with b.loop(vec_end, npanels) as jr:  # the rest: element by element, zeros past N
        col0 = b.value(f"mul nsw i64 {jr}, {nr}")
        po = b.value(f"mul nsw i64 {jr}, {pstride}")
        dpanel = b.value(f"getelementptr inbounds {t}, ptr {drow}, i64 {po}")
        with b.loop("0", str(nr)) as j:
            col = b.value(f"add nsw i64 {col0}, {j}")
            dp = b.value(f"getelementptr inbounds {t}, ptr {dpanel}, i64 {j}")
            inside = b.value(f"icmp slt i64 {col}, {c['n']}")
            with b.branch(inside) as zero:
                sj = b.value(f"mul nsw i64 {col}, {c['csb']}")
                y = b.load_widened(cfg, srow, sj)
                b.emit(f"store {t} {y}, ptr {dp}, align {es}")
                with zero.otherwise():
                    b.emit(f"store {t} 0.0, ptr {dp}, align {es}")


def _pack_b_columns(b: Builder, cfg: GemmConfig, bbase: str, csb: str, k0: str, jr: str, dst: str, pstride: str) -> None:
    """Rows k0 .. k0+VW of full panel jr, from columns that are contiguous in memory: per VW
    columns, one vector load down each column, a VW x VW transpose in registers, one vector
    store per row. `dst`: row k0 of the first panel of k0's block; panels `pstride` apart
    (_pack_b_layout)."""
    t, vw, nr, es = cfg.t, cfg.vector, cfg.nr, cfg.itemsize
    vt = f"<{vw} x {t}>"
    po = b.value(f"mul nsw i64 {jr}, {pstride}")
    dpanel = b.value(f"getelementptr inbounds {t}, ptr {dst}, i64 {po}")
    col0 = b.value(f"mul nsw i64 {jr}, {nr}")
    # the panel's NV column vectors as a loop, not unrolled: one VW x VW transpose in the IR
    # (VW loads, VW log2 VW shuffles, VW stores) instead of NV of them, which made this
    # function the biggest of the module (on AVX-512 float32: 64 loads, 256 shuffles)
    with b.loop("0", str(cfg.nv)) as q:
        qcol = b.value(f"mul nsw i64 {q}, {vw}")
        col_q = b.value(f"add nsw i64 {col0}, {qcol}")
        dq = b.value(f"getelementptr inbounds {t}, ptr {dpanel}, i64 {qcol}")
        cols = []
        for jj in range(vw):
            col = b.value(f"add nsw i64 {col_q}, {jj}")
            so = b.value(f"mul nsw i64 {col}, {csb}")
            so2 = b.value(f"add nsw i64 {so}, {k0}")
            cols.append(b.load_widened(cfg, bbase, so2, vw))
        for kk, row in enumerate(_transpose(b, cols, vt, vw)):
            dp = b.value(f"getelementptr inbounds {t}, ptr {dq}, i64 {kk * nr}")
            b.emit(f"store {vt} {row}, ptr {dp}, align {es}")


def _transpose(b: Builder, rows: list[str], vt: str, n: int) -> list[str]:
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
                rows[i] = b.value(f"shufflevector {vt} {x}, {vt} {y}, <{n} x i32> <{lo}>")
                rows[i + h] = b.value(f"shufflevector {vt} {x}, {vt} {y}, <{n} x i32> <{hi}>")
        h //= 2
    return rows
