"""The gemm entry: the threads take row blocks (unit u = batch * units_per_batch + block) from a
shared counter; per KC block of k each packs its rows of A into its workspace (`tid`) and runs
the micro-kernel over every (B panel, A panel) pair, then the epilogue on the finished rows."""

from __future__ import annotations

from .builder import Builder
from .config import GemmConfig
from .pack_a import RowBlock, pack_a_block


def row_blocks(cfg: GemmConfig, name: str, micro: str, direct: str | None = None) -> str:
    """`direct`: the micro-kernel that reads A where it is (micro_kernel's `direct`), used where
    B is one panel wide (N <= NR) and A has no row table: there packing A copied every element of
    A to use it once (a (256, 512) @ (512, 10) spent as long packing A as multiplying)."""
    t, nr, kcmax = cfg.t, cfg.nr, cfg.kc
    b = Builder(md_base=100000)
    c = b.ctx_loads(["a", "b_pack", "c", "a_pack", "m", "n", "k", "rsa", "csa", "ldc", "offsets", "row_starts",
                     "units_per_batch", "npad", "a_pack_stride", "epi_fn", "epi_args", "a_rows", "b_local"])
    has_epilogue = b.value(f"icmp ne ptr {c['epi_fn']}, null")
    wo = b.value(f"mul nsw i64 %tid, {c['a_pack_stride']}")
    ap = b.value(f"getelementptr inbounds {t}, ptr {c['a_pack']}, i64 {wo}")
    npanels = b.value(f"sdiv i64 {c['npad']}, {nr}")
    knpad = b.value(f"mul nsw i64 {c['k']}, {c['npad']}")
    one_panel = b.value(f"icmp eq i64 {npanels}, 1")
    no_table = b.value(f"icmp eq ptr {c['a_rows']}, null")
    in_place = b.value(f"and i1 {one_panel}, {no_table}") if direct else "false"
    with b.units("gemm_next", "gemm_done") as u:
        rows = _row_block(b, cfg, c, u, knpad)
        with b.loop("0", c["k"], str(kcmax)) as pc:
            kc = b.smin(b.value(f"sub nsw i64 {c['k']}, {pc}"), kcmax)
            pcs = b.value(f"mul nsw i64 {pc}, {c['csa']}")
            with b.branch(in_place) as packed:
                if direct:
                    _multiply(b, cfg, c, rows, ap, pc, kc, npanels, direct, pcs)
                with packed.otherwise():
                    pack_a_block(b, cfg, c, rows, ap, kc, pcs)
                    _multiply(b, cfg, c, rows, ap, pc, kc, npanels, micro)
        # this block of C's rows is final: the epilogue kernel (a ranged kernel entry, see
        # PackedGemm.run) over their elements, while they are still in cache
        with b.branch(has_epilogue):
            rows_n = b.value(f"mul nsw i64 {rows.mc}, {c['ldc']}")
            end = b.value(f"add nsw i64 {rows.c_first}, {rows_n}")
            b.emit(f"call void {c['epi_fn']}(ptr {c['epi_args']}, i64 {rows.c_first}, i64 {end})")
    b.emit("ret void")
    return b.function(name)


def _row_block(b: Builder, cfg: GemmConfig, c: dict[str, str], u: str, knpad: str) -> RowBlock:
    """Unit u: rows [row_starts[blk], row_starts[blk + 1]) of batch entry u / units_per_batch
    (see PackedGemm.plan), blk = u % units_per_batch."""
    t, mr = cfg.t, cfg.mr
    batch = b.value(f"sdiv i64 {u}, {c['units_per_batch']}")
    blk = b.value(f"srem i64 {u}, {c['units_per_batch']}")
    sp0 = b.value(f"getelementptr inbounds i64, ptr {c['row_starts']}, i64 {blk}")
    i0 = b.value(f"load i64, ptr {sp0}, align 8")
    sp1 = b.value(f"getelementptr inbounds i64, ptr {sp0}, i64 1")
    i1 = b.value(f"load i64, ptr {sp1}, align 8")
    mc = b.value(f"sub nsw i64 {i1}, {i0}")
    mp1 = b.value(f"add nsw i64 {mc}, {mr - 1}")
    mpanels = b.value(f"sdiv i64 {mp1}, {mr}")
    oi = b.value(f"mul nsw i64 {batch}, 3")
    aop = b.value(f"getelementptr inbounds i64, ptr {c['offsets']}, i64 {oi}")
    aoff = b.value(f"load i64, ptr {aop}, align 8")
    oi2 = b.value(f"add nsw i64 {oi}, 2")
    cop = b.value(f"getelementptr inbounds i64, ptr {c['offsets']}, i64 {oi2}")
    coff = b.value(f"load i64, ptr {cop}, align 8")
    abase = b.value(f"getelementptr {cfg.src}, ptr {c['a']}, i64 {aoff}")
    crow0 = b.value(f"mul nsw i64 {i0}, {c['ldc']}")
    c_first = b.value(f"add nsw i64 {coff}, {crow0}")
    cbase = b.value(f"getelementptr inbounds {t}, ptr {c['c']}, i64 {c_first}")
    bo = b.value(f"mul nsw i64 {b.packed_b_slot(c['b_local'], batch)}, {knpad}")
    bpb = b.value(f"getelementptr inbounds {t}, ptr {c['b_pack']}, i64 {bo}")
    return RowBlock(i0, mc, mpanels, abase, c_first, cbase, bpb)


def _multiply(b: Builder, cfg: GemmConfig, c: dict[str, str], rows: RowBlock, ap: str, pc: str, kc: str,
              npanels: str, micro: str, direct_pcs: str | None = None) -> None:
    """The block's rows of C (+)= its packed A (at `ap`) times KC block pc of packed B: the
    micro-kernel over every (B panel, A panel) pair, the B panel in the outer loop (it stays in
    L2, and in L1 for a short kc, while the A panels stream past it). The first KC block stores, later ones add.
    `direct_pcs` (pc times csa): `micro` reads A in place, from the block's rows at column pc.
    Packed, the micro-kernel calls over each B panel also fetch the next one into L2 (a
    panel's first pass read it from L3 or memory at the micro-kernel's pace, see micro_kernel)."""
    t, mr, nr = cfg.t, cfg.mr, cfg.nr
    accumulate = b.value(f"icmp ne i64 {pc}, 0")
    o1 = b.value(f"mul nsw i64 {pc}, {c['npad']}")
    bblock = b.value(f"getelementptr inbounds {t}, ptr {rows.bpb}, i64 {o1}")
    # the panel read next is fetched while the block's calls over this one run, spread over
    # all of them: call ip fetches kc lines' worth from ip * kc * nstep on (one prefetch per k,
    # nstep bytes apart), nstep = ceil(row_bytes / mpanels) bytes, at most a line so that no
    # line is skipped; calls past the next panel's end fetch their own panel (in cache
    # already: a load slot per k, no traffic). Fetching it all in the first NR * itemsize / 64
    # calls (a kc-line burst each) drew on memory faster than it delivers where the packed B
    # is not in cache, with blocks of 12 panels. One thread, alternating in one process, float32:
    # 2048^3 122.8 -> 110.0 ms, 144 x 2304 x 3136 21.2 -> 19.0, 64 x 4096 x 4096 28.3 -> 26.3,
    # 1024^3 14.3 -> 14.1; 16 x (1024 x 64 x 1024) and 32 x (144 x 288 x 624) within 1 %
    row_bytes = nr * cfg.itemsize
    spread = b.value(f"sdiv i64 {b.value(f'add nsw i64 {rows.mpanels}, {row_bytes - 1}')}, {rows.mpanels}")
    nstep = b.smin(spread, 64)
    psize = b.value(f"mul nsw i64 {kc}, {nr}")
    last_block = b.value(f"icmp sge i64 {b.value(f'add nsw i64 {pc}, {kc}')}, {c['k']}")
    last_panel = b.value(f"sub nsw i64 {npanels}, 1")
    with b.loop("0", npanels) as jr:
        col0 = b.value(f"mul nsw i64 {jr}, {nr}")
        po = b.value(f"mul nsw i64 {col0}, {kc}")
        bpanel = b.value(f"getelementptr inbounds {t}, ptr {bblock}, i64 {po}")
        # the panel the micro-kernels read next: the next one in the packed B (the next KC
        # block's first after a block's last), or after the last, the first (the next row block's)
        after = b.value(f"getelementptr {t}, ptr {bpanel}, i64 {psize}")
        wrap = b.value(f"and i1 {last_block}, {b.value(f'icmp eq i64 {jr}, {last_panel}')}")
        bnext = b.value(f"select i1 {wrap}, ptr {rows.bpb}, ptr {after}")
        cols = b.smin(b.value(f"sub nsw i64 {c['n']}, {col0}"), nr)
        ccol = b.value(f"getelementptr inbounds {t}, ptr {rows.cbase}, i64 {col0}")
        with b.loop("0", rows.mpanels) as ip:
            row0 = b.value(f"mul nsw i64 {ip}, {mr}")
            height = b.smin(b.value(f"sub nsw i64 {rows.mc}, {row0}"), mr)
            if direct_pcs is None:
                ao = b.value(f"mul nsw i64 {row0}, {kc}")
                apanel = b.value(f"getelementptr inbounds {t}, ptr {ap}, i64 {ao}")
                a_args = f"ptr {apanel}"
            else:   # A in place: row i0 + row0, column pc
                grow = b.value(f"add nsw i64 {rows.i0}, {row0}")
                ro = b.value(f"mul nsw i64 {grow}, {c['rsa']}")
                ao = b.value(f"add nsw i64 {ro}, {direct_pcs}")
                apanel = b.value(f"getelementptr {t}, ptr {rows.abase}, i64 {ao}")
                a_args = f"ptr {apanel}, i64 {c['rsa']}, i64 {c['csa']}"
            co = b.value(f"mul nsw i64 {row0}, {c['ldc']}")
            ctile = b.value(f"getelementptr inbounds {t}, ptr {ccol}, i64 {co}")
            fetch = ""
            if direct_pcs is None:
                nofs = b.value(f"mul nsw i64 {ip}, {b.value(f'mul nsw i64 {kc}, {nstep}')}")
                part = b.value(f"icmp slt i64 {b.value(f'mul nsw i64 {ip}, {nstep}')}, {row_bytes}")
                nptr = b.value(f"getelementptr i8, ptr {bnext}, i64 {nofs}")
                fetch = f", ptr {b.value(f'select i1 {part}, ptr {nptr}, ptr {bpanel}')}, i64 {nstep}"
            b.emit(f"call void @{micro}({a_args}, ptr {bpanel}, i64 {kc}, ptr {ctile}, i64 {c['ldc']}, "
                   f"i64 {height}, i64 {cols}, i1 {accumulate}{fetch})")
