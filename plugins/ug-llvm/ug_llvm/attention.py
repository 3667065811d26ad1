"""The cpu device's fused attention (Device.attention): softmax(q k^T * scale + mask) v in one
pass over the keys per block of query rows, the (L, S) scores never stored (flash attention).

One unit of work is MB query rows of one batch entry (MB = the gemm's NR, one B panel wide).
Everything is computed transposed, so that the softmax runs across the MB queries of a vector
register instead of along a row (no horizontal reductions) and its probabilities are already a
B panel of the packed gemm's micro-kernel (gemm.micro_kernel), which does both products:

* pack the unit's queries as a B panel Qp (E rows of MB, zero past L);
* per block of KB keys (causal: only up to the block's last query): pack the keys as A panels
  (MR keys, column after column over E) and V^T as A panels (MR of V's columns, column after
  column over the block's keys); S^T (KB x MB) = K Q^T by the micro-kernel;
* online softmax per query (lane j): x = S^T[c, j] * scale + mask (or -inf past the diagonal),
  m' = max(m, max_c x), the accumulated O^T column and the running sum l scaled by
  exp(m - m'), p = exp(x - m') written over S^T, l += sum_c p;
* O^T (Ev x MB) += V^T P^T by the micro-kernel, with S^T as its B panel;
* at the end out[j, e] = O^T[e, j] / l[j]. A query that keeps no key (every x is -inf) has
  l = 0: NaN, as softmax of an all -inf row (torch's).

Tier 0 (ug_core.tiers): the module takes 1-2 s of LLVM to compile (O3, the micro-kernel inlined
twice), which a first call would wait for. While the module of a dtype is not compiled, `run`
computes the attention with numpy instead (`_numpy_attention`: the scores of a few batch entries
at a time, BLAS for both products) and the module compiles on the tiers' background thread; the
runs after it is loaded use it. numpy's sums and exp may differ from the module's in the last
bits, within the kit's tolerances. Tier mode "1" compiles before the first run, "0" stays on
numpy; ug.precompile compiles the module ahead (`prepare`).

The queries' running max uses 0 in place of -inf while a query has kept no key, so that
exp(x - m') is exp(-inf) = 0, not NaN. The threads take units from a shared counter (the gemm's
builder.units), each in a workspace of its own (`tid`).
"""

from __future__ import annotations

import array
import ctypes
import hashlib
import math
import os
import struct
import sys
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from ug_core.kit import AttentionSpec, Buffer, View, compile_in_background, env_int, tier_mode

from . import mathlib
from .gemm.builder import Builder
from .gemm.config import GemmConfig
from .gemm.micro_kernel import micro_kernel
from .memory import array_of
from .pool import wait_until_ir
from .render_ir import FSUF, fconst

if TYPE_CHECKING:
    from .device import CPUDevice

_ALIGN = {"float": 4, "double": 8}
KB = 256   # keys per block: S^T (KB x MB) and the packed keys stay in L2
FIELDS = ("q", "k", "v", "mask", "out", "ws", "offsets", "l", "s", "e", "ev", "qrs", "qcs", "krs", "kcs",
          "vrs", "vcs", "mrs", "mcs", "ors", "ocs", "blocks", "scale", "causal", "next", "done", "ws_stride",
          "units", "o_kp", "o_vp", "o_st", "o_ot", "o_m", "o_l", "o_x", "o_a",
          "kpack", "vpack", "kblocks", "pk_stride", "pv_stride", "pnext", "pdone", "punits")
FIELD = {name: i for i, name in enumerate(FIELDS)}
POINTERS = frozenset({"q", "k", "v", "mask", "out", "ws", "offsets", "kpack", "vpack"})
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# at least this much work (multiply-adds) to share out over the threads
PARALLEL_MIN_MACS = 1 << 21

_SERIAL = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_PARALLEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)


class _B(Builder):
    """The gemm's builder, with the context's fields of this module (vectorizable loops, the
    softmax's over the MB queries: `loop(..., vectorizable=True)`)."""

    fields = FIELD

    def ctx(self, names: list[str]) -> dict[str, str]:
        out = {}
        for name in names:
            p = self.value(f"getelementptr inbounds i64, ptr %ctx, i64 {FIELD[name]}")
            out[name] = self.value(f"load {'ptr' if name in POINTERS else 'i64'}, ptr {p}, align 8")
        return out

    def at(self, t: str, base: str, index: str) -> str:
        return self.value(f"getelementptr inbounds {t}, ptr {base}, i64 {index}")

    def ld(self, t: str, p: str) -> str:
        return self.value(f"load {t}, ptr {p}, align {_ALIGN[t]}")

    def mul(self, a: str, b: str) -> str:
        return self.value(f"mul nsw i64 {a}, {b}")

    def add(self, a: str, b: str) -> str:
        return self.value(f"add nsw i64 {a}, {b}")


def _attention(cfg: GemmConfig, name: str, micro: str) -> str:
    t, mr, mb, es = cfg.t, cfg.mr, cfg.nr, cfg.itemsize
    fs = FSUF[t]
    ninf = fconst(-math.inf, t)
    b = _B(md_base=200000)
    c = b.ctx(list(FIELDS[:24]) + ["ws_stride", "o_st", "o_ot", "o_m", "o_l", "o_x", "o_a", "kpack", "vpack",
                                   "kblocks", "pk_stride", "pv_stride"])
    scale_p = b.value(f"getelementptr inbounds i64, ptr %ctx, i64 {FIELD['scale']}")
    scale = b.value(f"load double, ptr {scale_p}, align 8")
    if t != "double":
        scale = b.value(f"fptrunc double {scale} to {t}")
    causal = b.value(f"icmp ne i64 {c['causal']}, 0")
    has_mask = b.value(f"icmp ne ptr {c['mask']}, null")
    ws = b.at(t, c["ws"], b.mul("%tid", c["ws_stride"]))
    qp = ws
    st, ot = (b.at(t, ws, c[f"o_{n}"]) for n in ("st", "ot"))
    mx, lsum, mloc, alpha = (b.at(t, ws, c[f"o_{n}"]) for n in ("m", "l", "x", "a"))
    e_n, ev = c["e"], c["ev"]
    evpad = b.mul(b.value(f"sdiv i64 {b.add(ev, str(mr - 1))}, {mr}"), str(mr))
    with b.units("next", "done") as u:
        batch = b.value(f"sdiv i64 {u}, {c['blocks']}")
        blk = b.value(f"srem i64 {u}, {c['blocks']}")
        r0 = b.mul(blk, str(mb))
        nq = b.smin(b.value(f"sub nsw i64 {c['l']}, {r0}"), mb)
        offs = [b.value(f"load i64, ptr {b.at('i64', c['offsets'], b.add(b.mul(batch, '5'), str(i)))}, align 8")
                for i in range(5)]
        qbase = b.at(t, c["q"], b.add(offs[0], b.mul(r0, c["qrs"])))
        kbase = b.at(t, c["k"], offs[1])
        vbase = b.at(t, c["v"], offs[2])
        mbase = b.value(f"getelementptr {t}, ptr {c['mask']}, i64 {b.add(offs[3], b.mul(r0, c['mrs']))}")
        obase = b.at(t, c["out"], b.add(offs[4], b.mul(r0, c["ors"])))
        # Qp[e, j] = q[r0 + j, e] (0 past the last query)
        with b.loop("0", e_n) as e:
            row = b.at(t, qp, b.mul(e, str(mb)))
            col = b.at(t, qbase, b.mul(e, c["qcs"]))
            with b.loop("0", str(mb)) as j:
                inside = b.value(f"icmp slt i64 {j}, {nq}")
                jj = b.value(f"select i1 {inside}, i64 {j}, i64 0")
                x = b.value(f"load {t}, ptr {b.at(t, col, b.mul(jj, c['qrs']))}, align {es}")
                b.emit(f"store {t} {b.value(f'select i1 {inside}, {t} {x}, {t} 0.0')}, ptr {b.at(t, row, j)}, align {es}")
        with b.loop("0", str(mb), vectorizable=True) as j:
            b.emit(f"store {t} {ninf}, ptr {b.at(t, mx, j)}, align {es}")
            b.emit(f"store {t} 0.0, ptr {b.at(t, lsum, j)}, align {es}")
        with b.loop("0", b.mul(evpad, str(mb)), vectorizable=True) as i:
            b.emit(f"store {t} 0.0, ptr {b.at(t, ot, i)}, align {es}")
        # causal: the keys up to the unit's last query
        last = b.add(r0, nq)
        kend = b.value(f"select i1 {causal}, i64 {b.smin(last, c['s'])}, i64 {c['s']}")
        with b.loop("0", kend, str(KB)) as c0:
            kb = b.smin(b.value(f"sub nsw i64 {kend}, {c0}"), KB)
            kpanels = b.value(f"sdiv i64 {b.add(kb, str(mr - 1))}, {mr}")
            # this key block's panels (packed once per batch entry, _pack; causal: kb may be fewer)
            kfull = b.smin(b.value(f"sub nsw i64 {c['s']}, {c0}"), KB)
            pblock = b.add(b.mul(batch, c["kblocks"]), b.value(f"sdiv i64 {c0}, {KB}"))
            kp = b.at(t, c["kpack"], b.mul(pblock, c["pk_stride"]))
            vp = b.at(t, c["vpack"], b.mul(pblock, c["pv_stride"]))
            # S^T = K Q^T
            with b.loop("0", kpanels) as p:
                a = b.at(t, kp, b.mul(p, b.mul(str(mr), e_n)))
                out = b.at(t, st, b.mul(p, str(mr * mb)))
                b.emit(f"call void @{micro}(ptr {a}, ptr {qp}, i64 {e_n}, ptr {out}, i64 {mb}, i64 {mr}, i64 {mb}, i1 0)")
            # scale, mask, the block's max per query
            with b.loop("0", str(mb), vectorizable=True) as j:
                b.emit(f"store {t} {b.value(f'load {t}, ptr {b.at(t, mx, j)}, align {es}')}, ptr {b.at(t, mloc, j)}, align {es}")
            with b.loop("0", kb) as kk:
                srow = b.at(t, st, b.mul(kk, str(mb)))
                key = b.add(c0, kk)
                mcol = b.value(f"getelementptr {t}, ptr {mbase}, i64 {b.mul(key, c['mcs'])}")
                with b.loop("0", str(mb), vectorizable=True) as j:
                    sp = b.at(t, srow, j)
                    x = b.value(f"fmul {t} {b.value(f'load {t}, ptr {sp}, align {es}')}, {scale}")
                    inside = b.value(f"icmp slt i64 {j}, {nq}")
                    use_mask = b.value(f"and i1 {inside}, {has_mask}")
                    jj = b.value(f"select i1 {use_mask}, i64 {j}, i64 0")
                    mp = b.value(f"getelementptr {t}, ptr {mcol}, i64 {b.mul(jj, c['mrs'])}")
                    mp = b.value(f"select i1 {has_mask}, ptr {mp}, ptr {sp}")   # (no mask: a harmless load)
                    mval = b.value(f"load {t}, ptr {mp}, align {es}")
                    x2 = b.value(f"fadd {t} {x}, {mval}")
                    x = b.value(f"select i1 {has_mask}, {t} {x2}, {t} {x}")
                    after = b.value(f"icmp sgt i64 {key}, {b.add(r0, j)}")
                    cut = b.value(f"and i1 {causal}, {after}")
                    x = b.value(f"select i1 {cut}, {t} {ninf}, {t} {x}")
                    b.emit(f"store {t} {x}, ptr {sp}, align {es}")
                    lp = b.at(t, mloc, j)
                    m = b.value(f"call {t} @llvm.maximum.{fs}({t} {b.value(f'load {t}, ptr {lp}, align {es}')}, {t} {x})")
                    b.emit(f"store {t} {m}, ptr {lp}, align {es}")
            # rescale what was summed so far: exp(m - m'), m' = 0 while a query has kept no key
            with b.loop("0", str(mb), vectorizable=True) as j:
                new = b.value(f"load {t}, ptr {b.at(t, mloc, j)}, align {es}")
                none = b.value(f"fcmp oeq {t} {new}, {ninf}")
                use = b.value(f"select i1 {none}, {t} 0.0, {t} {new}")
                old = b.value(f"load {t}, ptr {b.at(t, mx, j)}, align {es}")
                al = b.value(f"call {t} @ug_exp_{fs}({t} {b.value(f'fsub {t} {old}, {use}')})")
                b.emit(f"store {t} {new}, ptr {b.at(t, mx, j)}, align {es}")
                b.emit(f"store {t} {use}, ptr {b.at(t, mloc, j)}, align {es}")
                b.emit(f"store {t} {al}, ptr {b.at(t, alpha, j)}, align {es}")
                lp = b.at(t, lsum, j)
                b.emit(f"store {t} {b.value(f'fmul {t} {b.ld(t, lp)}, {al}')}, ptr {lp}, align {es}")
            with b.loop("0", ev) as e:
                orow = b.at(t, ot, b.mul(e, str(mb)))
                with b.loop("0", str(mb), vectorizable=True) as j:
                    op = b.at(t, orow, j)
                    al = b.value(f"load {t}, ptr {b.at(t, alpha, j)}, align {es}")
                    b.emit(f"store {t} {b.value(f'fmul {t} {b.ld(t, op)}, {al}')}, ptr {op}, align {es}")
            # p = exp(x - m'), over S^T; l += p
            with b.loop("0", kb) as kk:
                srow = b.at(t, st, b.mul(kk, str(mb)))
                with b.loop("0", str(mb), vectorizable=True) as j:
                    sp = b.at(t, srow, j)
                    m = b.value(f"load {t}, ptr {b.at(t, mloc, j)}, align {es}")
                    pv = b.value(f"call {t} @ug_exp_{fs}({t} {b.value(f'fsub {t} {b.ld(t, sp)}, {m}')})")
                    b.emit(f"store {t} {pv}, ptr {sp}, align {es}")
                    lp = b.at(t, lsum, j)
                    b.emit(f"store {t} {b.value(f'fadd {t} {b.ld(t, lp)}, {pv}')}, ptr {lp}, align {es}")
            # O^T += V^T P^T
            with b.loop("0", b.value(f"sdiv i64 {evpad}, {mr}")) as p:
                a = b.at(t, vp, b.mul(p, b.mul(str(mr), kfull)))   # (the panels' width: the whole block's keys)
                out = b.at(t, ot, b.mul(p, str(mr * mb)))
                b.emit(f"call void @{micro}(ptr {a}, ptr {st}, i64 {kb}, ptr {out}, i64 {mb}, i64 {mr}, i64 {mb}, i1 1)")
        # out[r0 + j, e] = O^T[e, j] / l[j]
        with b.loop("0", ev) as e:
            orow = b.at(t, ot, b.mul(e, str(mb)))
            ocol = b.at(t, obase, b.mul(e, c["ocs"]))
            with b.loop("0", nq) as j:
                x = b.value(f"load {t}, ptr {b.at(t, orow, j)}, align {es}")
                den = b.value(f"load {t}, ptr {b.at(t, lsum, j)}, align {es}")
                b.emit(f"store {t} {b.value(f'fdiv {t} {x}, {den}')}, ptr {b.at(t, ocol, b.mul(j, c['ors']))}, align {es}")
    b.emit("ret void")
    return b.function(name)


def _pack(cfg: GemmConfig, name: str) -> str:
    """Unit u = (batch entry, key block): its keys as A panels (MR keys, column after column over
    E) and V^T as A panels (MR of V's columns, column after column over the block's keys), into
    the shared packed areas (`kpack`, `vpack`), read by every block of queries of that entry."""
    t, mr, es = cfg.t, cfg.mr, cfg.itemsize
    b = _B(md_base=300000)
    c = b.ctx(["k", "v", "offsets", "s", "e", "ev", "krs", "kcs", "vrs", "vcs", "kpack", "vpack", "kblocks",
               "pk_stride", "pv_stride"])
    e_n, ev = c["e"], c["ev"]
    evpad = b.mul(b.value(f"sdiv i64 {b.add(ev, str(mr - 1))}, {mr}"), str(mr))
    with b.units("pnext", "pdone") as u:
        batch = b.value(f"sdiv i64 {u}, {c['kblocks']}")
        c0 = b.mul(b.value(f"srem i64 {u}, {c['kblocks']}"), str(KB))
        kb = b.smin(b.value(f"sub nsw i64 {c['s']}, {c0}"), KB)
        kbpad = b.mul(b.value(f"sdiv i64 {b.add(kb, str(mr - 1))}, {mr}"), str(mr))
        offs = [b.value(f"load i64, ptr {b.at('i64', c['offsets'], b.add(b.mul(batch, '5'), str(i)))}, align 8")
                for i in (1, 2)]
        kbase = b.at(t, c["k"], offs[0])
        vbase = b.at(t, c["v"], offs[1])
        kp = b.at(t, c["kpack"], b.mul(u, c["pk_stride"]))
        vp = b.at(t, c["vpack"], b.mul(u, c["pv_stride"]))
        # Kp: panel p holds keys c0 + p*MR + i at [e*MR + i] (0 past the block)
        with b.loop("0", kbpad) as kk:
            p = b.value(f"sdiv i64 {kk}, {mr}")
            i = b.value(f"srem i64 {kk}, {mr}")
            dst = b.at(t, kp, b.add(b.mul(p, b.mul(str(mr), e_n)), i))
            valid = b.value(f"icmp slt i64 {kk}, {kb}")
            key = b.value(f"select i1 {valid}, i64 {b.add(c0, kk)}, i64 0")
            src = b.at(t, kbase, b.mul(key, c["krs"]))
            with b.loop("0", e_n) as e:
                x = b.value(f"load {t}, ptr {b.at(t, src, b.mul(e, c['kcs']))}, align {es}")
                x = b.value(f"select i1 {valid}, {t} {x}, {t} 0.0")
                b.emit(f"store {t} {x}, ptr {b.at(t, dst, b.mul(e, str(mr)))}, align {es}")
        # Vp: panel p holds V's columns p*MR + i at [c*MR + i] (0 past Ev)
        with b.loop("0", kb) as kk:
            src = b.at(t, vbase, b.mul(b.add(c0, kk), c["vrs"]))
            with b.loop("0", evpad) as e:
                p = b.value(f"sdiv i64 {e}, {mr}")
                i = b.value(f"srem i64 {e}, {mr}")
                valid = b.value(f"icmp slt i64 {e}, {ev}")
                ee = b.value(f"select i1 {valid}, i64 {e}, i64 0")
                x = b.value(f"load {t}, ptr {b.at(t, src, b.mul(ee, c['vcs']))}, align {es}")
                x = b.value(f"select i1 {valid}, {t} {x}, {t} 0.0")
                at = b.add(b.mul(p, b.mul(str(mr), kb)), b.add(b.mul(kk, str(mr)), i))
                b.emit(f"store {t} {x}, ptr {b.at(t, vp, at)}, align {es}")
    b.emit("ret void")
    return b.function(name)


def render_module(cfg: GemmConfig, prefix: str, triple: str, data_layout: str, cpu: str, features: str) -> str:
    """The module defining `{prefix}_rows(ctx, units, chunk, tid)` (the units a thread takes),
    `{prefix}_serial(ctx)` and `{prefix}_parallel(ctx, tid)` (as the gemm's: thread 0 returns once
    every unit is done)."""
    t, vw = cfg.t, cfg.vector
    vt = f"<{vw} x {t}>"
    micro = f"{prefix}_micro"
    units = (f"  %up = getelementptr inbounds i64, ptr %ctx, i64 {FIELD['units']}\n  %u = load i64, ptr %up, align 8\n"
             f"  %pup = getelementptr inbounds i64, ptr %ctx, i64 {FIELD['punits']}\n  %pu = load i64, ptr %pup, align 8")
    return "\n\n".join([
        f"; ug fused attention {cfg}",
        f'target triple = "{triple}"',
        f'target datalayout = "{data_layout}"',
        micro_kernel(cfg, micro),
        _attention(cfg, f"{prefix}_rows", micro),
        _pack(cfg, f"{prefix}_pack"),
        f"define void @{prefix}_serial(ptr %ctx) #0 {{\n{units}\n"
        f"  call void @{prefix}_pack(ptr %ctx, i64 %pu, i64 %pu, i64 0)\n"
        f"  call void @{prefix}_rows(ptr %ctx, i64 %u, i64 %u, i64 0)\n  ret void\n}}",
        f"define void @{prefix}_parallel(ptr %ctx, i64 %tid) #0 {{\n{units}\n"
        f"  call void @{prefix}_pack(ptr %ctx, i64 %pu, i64 1, i64 %tid)\n"
        f"  %pdp = getelementptr inbounds i64, ptr %ctx, i64 {FIELD['pdone']}\n"
        f"  call void @{prefix}_wait(ptr %pdp, i64 %pu)\n"
        f"  call void @{prefix}_rows(ptr %ctx, i64 %u, i64 1, i64 %tid)\n"
        "  %first = icmp eq i64 %tid, 0\n  br i1 %first, label %wait, label %out\nwait:\n"
        f"  %dp = getelementptr inbounds i64, ptr %ctx, i64 {FIELD['done']}\n"
        f"  call void @{prefix}_wait(ptr %dp, i64 %u)\n  br label %out\nout:\n  ret void\n}}",
        wait_until_ir(f"{prefix}_wait", triple),
        mathlib.definitions({f"ug_exp_{FSUF[t]}"}),
        mathlib.ATTRIBUTES,
        f"declare {vt} @llvm.fma.v{vw}{FSUF[t]}({vt}, {vt}, {vt})",
        f"declare {t} @llvm.maximum.{FSUF[t]}({t}, {t})",
        "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)",
        '!0 = distinct !{!0, !1}\n!1 = !{!"llvm.loop.unroll.count", i32 4}',
        '!90 = !{!"llvm.loop.vectorize.enable", i1 false}\n!91 = !{!"llvm.loop.unroll.disable"}',
        f'attributes #0 = {{ nounwind "target-cpu"="{cpu}" "target-features"="{features}" '
        f'"no-trapping-math"="true" }}',
    ])


def _round(n: int) -> int:
    return -(-n // 16) * 16   # segments start 64-byte aligned (16 elements of 4 or 8 bytes)


class _Compiled:
    """The module for one dtype, loaded."""

    def __init__(self, jit: Any, dtype: np.dtype):
        self.cfg = GemmConfig.for_host(dtype, jit.features)
        ir = render_module(self.cfg, "ug_attn", jit.triple, jit.data_layout, jit.cpu, jit.features)
        prefix = "ug_attn_" + hashlib.sha256(ir.encode()).hexdigest()[:16]
        ir = ir.replace("@ug_attn_", f"@{prefix}_")
        self.ir = ir
        self.serial = _SERIAL(jit.load(ir, f"{prefix}_serial", f"attention module {np.dtype(dtype).name}"))
        self.parallel_address = jit.address(f"{prefix}_parallel")
        self.parallel = _PARALLEL(self.parallel_address)


class HostAttention:
    """The cpu device's `attention`: the module compiled on first use per dtype, a context per
    spec (kept, like the gemm's plans: ug.jit replays pass the same spec every call)."""

    def __init__(self, device: "CPUDevice"):
        self.device = device
        self._compiled: dict[np.dtype, _Compiled] = {}
        self._lock = threading.Lock()   # (the background thread compiles modules too)
        # tier 0: per dtype, (the process that queued it, the background compile of its module)
        self._background: dict[np.dtype, tuple[int, Any]] = {}
        self._plans: dict[int, tuple[AttentionSpec, array.array, np.ndarray, int, int, int]] = {}

    def supports(self, spec: AttentionSpec) -> bool:
        return spec.dtype in DTYPES

    def _module(self, dtype: np.dtype) -> _Compiled:
        mod = self._compiled.get(dtype)
        if mod is None:
            with self._lock:
                mod = self._compiled.get(dtype)
                if mod is None:
                    mod = self._compiled[dtype] = _Compiled(self.device.jit, dtype)
        return mod

    def _on_numpy(self, dtype: np.dtype) -> bool:
        """Tier 0 (see the module docstring): whether a run whose module is not compiled yet
        goes to numpy (tier mode "auto" until the module's background compile is done; "0")."""
        mode = tier_mode()
        if mode != "auto":
            return mode == "0"
        queued = self._background.get(dtype)
        # (done and still no module: it failed, and compiling here raises why; a task queued
        # before a fork is lost in the child, which queues its own)
        return queued is None or queued[0] != os.getpid() or not queued[1].done

    def _queue(self, dtype: np.dtype) -> None:
        """After a tier-0 run in mode "auto": the module's compile queued in the background
        (after the run, so that the first run's numpy does not share the cores with LLVM)."""
        queued = self._background.get(dtype)
        if tier_mode() == "auto" and (queued is None or queued[0] != os.getpid()):
            task = compile_in_background(f"attention module {dtype.name}", lambda: self._module(dtype),
                                         env_int("UG_DEBUG", 0, strict=False))
            self._background[dtype] = (os.getpid(), task)

    def _plan(self, spec: AttentionSpec, cfg: GemmConfig, threads: int) -> tuple[array.array, np.ndarray, int, int]:
        """(the context but its pointers, the batch entries' offsets, a thread's workspace and the
        packed keys' and values' size, in elements), worked out once per spec and threads."""
        hit = self._plans.get(id(spec))
        if hit is not None and hit[0] is spec and hit[4] == threads:
            return hit[1], hit[2], hit[3], hit[5]
        mr, mb = cfg.mr, cfg.nr
        *batch, n_q, e = spec.q_view.shape
        n_k, ev = spec.v_view.shape[-2:]
        nb = int(np.prod(batch, dtype=np.int64)) if batch else 1
        # per batch entry, the element offsets of q, k, v, the mask and out
        index = np.indices(tuple(batch), dtype=np.int64).reshape(len(batch), -1) if batch else np.zeros((0, 1), np.int64)
        out_strides = _contiguous(spec.out_shape)
        views = [spec.q_view, spec.k_view, spec.v_view, spec.mask_view]
        offsets = np.zeros((nb, 5), np.int64)
        for col, view in enumerate(views):
            if view is not None:
                offsets[:, col] = view.offset + np.asarray(view.strides[:-2], np.int64) @ index if batch else view.offset
        offsets[:, 4] = np.asarray(out_strides[:-2], np.int64) @ index if batch else 0
        offsets = np.ascontiguousarray(offsets)
        kbpad = -(-KB // mr) * mr
        evpad = -(-ev // mr) * mr
        sizes = {"qp": e * mb, "st": kbpad * mb, "ot": evpad * mb, "m": mb, "l": mb, "x": mb, "a": mb}
        at, segment = 0, {}
        for name, size in sizes.items():
            segment[name] = at
            at += _round(size)
        blocks = -(-n_q // mb)
        kblocks = -(-n_k // KB)
        # after the threads' workspaces: every batch entry's keys and V^T, packed per key block
        pk_stride, pv_stride = _round(kbpad * e), _round(evpad * KB)
        mask = spec.mask_view
        ctx = array.array("q", [0] * len(FIELDS))
        values = {"offsets": offsets.ctypes.data, "l": n_q, "s": n_k, "e": e, "ev": ev,
                  "qrs": spec.q_view.strides[-2], "qcs": spec.q_view.strides[-1],
                  "krs": spec.k_view.strides[-2], "kcs": spec.k_view.strides[-1],
                  "vrs": spec.v_view.strides[-2], "vcs": spec.v_view.strides[-1],
                  "mrs": mask.strides[-2] if mask else 0, "mcs": mask.strides[-1] if mask else 0,
                  "ors": out_strides[-2], "ocs": out_strides[-1], "blocks": blocks,
                  "scale": struct.unpack("<q", struct.pack("<d", spec.scale))[0], "causal": int(spec.causal),
                  "ws_stride": at, "units": nb * blocks, "kblocks": kblocks, "pk_stride": pk_stride,
                  "pv_stride": pv_stride, "punits": nb * kblocks,
                  **{f"o_{n}": segment[n] for n in ("st", "ot", "m", "l", "x", "a")}}
        for name, value in values.items():
            ctx[FIELD[name]] = int(value)
        if len(self._plans) >= 4096:
            self._plans.clear()
        packed = nb * kblocks * (pk_stride + pv_stride)
        self._plans[id(spec)] = (spec, ctx, offsets, at, threads, packed)
        return ctx, offsets, at, packed

    def prepare(self, spec: AttentionSpec) -> bool:
        """Compile (or load) the module `run` uses for this spec's dtype, running nothing
        (ug.precompile); whether there is one."""
        if not self.supports(spec):
            return False
        self._module(spec.dtype)
        return True

    def run(self, out: Buffer, q: Buffer, k: Buffer, v: Buffer, mask: Buffer | None, spec: AttentionSpec) -> None:
        if not out.size:
            return
        mod = self._compiled.get(spec.dtype)
        if mod is None:
            if self._on_numpy(spec.dtype):
                _numpy_attention(out, q, k, v, mask, spec)
                self._queue(spec.dtype)
                if env_int("UG_DEBUG", 0, strict=False):
                    print(f"  tier 0 (numpy) attention {spec.out_shape} {spec.dtype.name}: the module is not compiled yet",
                          file=sys.stderr, flush=True)
                return
            mod = self._module(spec.dtype)
        runtime = self.device.runtime
        n_q, e = spec.q_view.shape[-2:]
        macs = out.size // max(1, spec.v_view.shape[-1]) * spec.k_view.shape[-2] * (e + spec.v_view.shape[-1])
        threads = runtime.threads if macs >= PARALLEL_MIN_MACS and runtime.pool is not None else 1
        base, offsets, ws_stride, packed = self._plan(spec, mod.cfg, threads)
        ctx = base[:]   # a copy per call: the counters in it are the threads' shared state
        block = self.device.allocate((ws_stride * threads + packed) * spec.dtype.itemsize)
        try:
            for name, buf in (("q", q), ("k", k), ("v", v), ("mask", mask), ("out", out)):
                ctx[FIELD[name]] = buf.handle.ptr if buf is not None else 0
            ctx[FIELD["ws"]] = block.ptr
            ctx[FIELD["kpack"]] = block.ptr + ws_stride * threads * spec.dtype.itemsize
            ctx[FIELD["vpack"]] = ctx[FIELD["kpack"]] + base[FIELD["pk_stride"]] * base[FIELD["kblocks"]] * len(offsets) * spec.dtype.itemsize
            ctx_ptr = ctx.buffer_info()[0]
            if threads <= 1:
                mod.serial(ctx_ptr)
            else:
                parallel = mod.parallel

                def work(tid: int, ctx: array.array = ctx, offsets: np.ndarray = offsets) -> None:
                    parallel(ctx_ptr, tid)
                runtime.on_threads(work, threads, native=(parallel, mod.parallel_address, ctx_ptr, (ctx, offsets)))
        finally:
            self.device.free(block)


# scores (elements) of the batch entries tier 0 computes at a time
NUMPY_CHUNK = 1 << 22


def _numpy_attention(out: Buffer, q: Buffer, k: Buffer, v: Buffer, mask: Buffer | None, spec: AttentionSpec) -> None:
    """Tier 0's attention: what the module computes (AttentionSpec), with numpy on the buffers'
    host memory, a few batch entries' scores at a time (NUMPY_CHUNK), in the operands' dtype."""
    *batch, n_q, e = spec.q_view.shape
    n_k, ev = spec.v_view.shape[-2:]
    nb = int(np.prod(batch, dtype=np.int64)) if batch else 1

    def operand(buf: Buffer, view: View, rows: int, cols: int) -> np.ndarray:
        flat = array_of(buf)
        item = flat.itemsize
        x = np.ndarray(view.shape, flat.dtype, flat, view.offset * item, tuple(s * item for s in view.strides))
        return np.broadcast_to(x, tuple(batch) + (rows, cols)).reshape(nb, rows, cols)   # (a copy only where it must)
    qs, ks, vs = operand(q, spec.q_view, n_q, e), operand(k, spec.k_view, n_k, e), operand(v, spec.v_view, n_k, ev)
    ms = operand(mask, spec.mask_view, n_q, n_k) if mask is not None and spec.mask_view is not None else None
    dst = array_of(out).reshape(nb, n_q, ev)
    above = np.triu(np.ones((n_q, n_k), dtype=bool), 1) if spec.causal else None
    step = max(1, NUMPY_CHUNK // max(1, n_q * n_k))
    for b0 in range(0, nb, step):
        b1 = min(nb, b0 + step)
        scores = np.matmul(qs[b0:b1], ks[b0:b1].swapaxes(-1, -2))
        scores *= scores.dtype.type(spec.scale)
        if ms is not None:
            scores += ms[b0:b1]
        if above is not None:
            scores[:, above] = -np.inf
        # a query that keeps no key: max -inf, and -inf - -inf is NaN (the module's result)
        with np.errstate(invalid="ignore"):
            scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        total = scores.sum(axis=-1, keepdims=True)
        np.divide(np.matmul(scores, vs[b0:b1]), total, out=dst[b0:b1])


def _contiguous(shape: tuple[int, ...]) -> list[int]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return strides[::-1]
