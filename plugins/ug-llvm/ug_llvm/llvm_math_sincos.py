"""float32 sin and cos for the math library, evaluated in double: |x| = n pi/2 + r with
|r| <= pi/4 by Cody-Waite with pi/2 in three parts for |x| < 2**19 (the core's, ug_core.mathlib:
n * part is exact in double there), by Payne-Hanek with 192 bits of 2/pi (the core's) above, so
huge arguments are right too; then Taylor polynomials in r."""

from __future__ import annotations

import math

from ug_core.kit import mathlib as core_math

from .llvm_math_builder import MathFn

_TWO_OVER_PI = core_math.TWO_OVER_PI
# the fast reduction's range: one part of pi/2 (a multiply-subtract) was accurate enough below 120
# only, so every vector with a lane in [120, 2**19) ran lane by lane through Payne-Hanek (1M sin of
# [120, 1e4): 38 ms against numpy's 9); three parts take it to the core's Cody-Waite limit
_FAST_LIMIT = float(core_math.CODY_WAITE_LIMIT)
_PIO2 = core_math.PIO2


def inv_pio2_table() -> list[int]:
    """32-bit windows of the bits of 2/pi, 8 new bits per entry (for Payne-Hanek on float32):
    the core's 192 bits of 2/pi (eight 24-bit pieces) as one integer, floor(2/pi * 2**192)."""
    bits = sum(int(math.ldexp(p, 24 * (i + 1))) << 24 * (7 - i) for i, p in enumerate(_TWO_OVER_PI))
    return [(bits >> (184 - 8 * i)) & 0xFFFFFFFF for i in range(24)]


INV_PIO2_GLOBAL = ("@ug_inv_pio2 = internal unnamed_addr constant [24 x i32] ["
                   + ", ".join(f"i32 {v - (1 << 32) if v >= 1 << 31 else v}" for v in inv_pio2_table()) + "], align 4\n")


def sincos_f32(which: str, lanes: int = 1) -> tuple[str, set[str]]:
    """sin or cos of a float32, computed in double: |x| = n*pi/2 + r, |r| <= pi/4.

    Scalar (lanes=1): both reductions, chosen by select. Vector (the VFABI variants): the
    fast reduction only; if any lane has |x| >= 2**19 (or is inf), that vector is redone lane by
    lane with the scalar function, so the table lookups never slow down the common case."""
    f = MathFn("float", lanes)
    x = "%x"
    D = "double"
    ax = f.intrinsic("fabs", x)
    ad = f.conv("fpext", ax, "float", D)
    # fast reduction (|x| < 2**19): r = x - n P1 - n P2 - n P3, pi/2 = P1 + P2 + P3 (+ 8.5e-32),
    # each n * Pi exact (33-bit parts, n < 2**19): r's error is below 1e-25 (absolutely)
    nf = f.intrinsic("rint", f.fmul(ad, f.c(0.63661977236758134308, D), D), ty=D)
    r = ad
    for part in _PIO2[:3]:
        r = f.fma(nf, f.c(-part, D), r, D)
    n = f.conv("fptosi", nf, D, "i32")
    big = f.fcmp("oge", ax, f.c(_FAST_LIMIT))
    if lanes == 1:
        r_big, n_big = _payne_hanek(f, ax)
        r = f.select(big, r_big, r, D)
        n = f.select(big, n_big, n, "i32")
    # sin(r), cos(r) on |r| <= pi/4 (Taylor in double: error < 1e-10)
    r2 = f.fmul(r, r, D)
    ps = f.poly(r2, [(-1) ** k / math.factorial(2 * k + 1) for k in range(6, 0, -1)], D)
    s = f.fma(f.fmul(ps, r2, D), r, r, D)
    pc = f.poly(r2, [(-1) ** k / math.factorial(2 * k) for k in range(6, 0, -1)], D)
    c = f.fma(pc, r2, f.c(1.0, D), D)
    if which == "cos":
        n = f.ibin("add", n, "1", "i32")  # cos(y) = sin(y + pi/2)
    q = f.ibin("and", n, "3", "i32")
    odd = f.icmp("ne", f.ibin("and", q, "1", "i32"), "0", "i32")
    neg = f.icmp("ne", f.ibin("and", q, "2", "i32"), "0", "i32")
    v = f.select(odd, c, s, D)
    v = f.select(neg, f.fneg(v, D), v, D)
    out = f.conv("fptrunc", v, D, "float")
    if which == "sin":  # odd function: sin(x) = sign(x) sin(|x|)
        sign = f.ibin("and", f.conv("bitcast", x, "float", "i32"), str(-(1 << 31)), "i32")
        out = f.conv("bitcast", f.ibin("xor", f.conv("bitcast", out, "float", "i32"), sign, "i32"), "i32", "float")
    finite = f.fcmp("olt", ax, f.c(float("inf")))
    out = f.select(finite, out, f.fsub(x, x))
    name = f"ug_{which}_f32"
    if lanes == 1:
        return f.define(name, out, "#92"), f.calls
    result = _redo_slow_lanes(f, name, out, ax)
    return f.define(f"{name}_v{lanes}", result, "#91"), f.calls


def _payne_hanek(f: MathFn, ax: str) -> tuple[str, str]:
    """(r, n) for |x| >= 2**19, scalar: an exact 2.62 fixed-point product with 96 bits of 2/pi
    from the table (INV_PIO2_GLOBAL), r in double."""
    xi = f.conv("bitcast", ax, "float", "i32")
    idx = f.ibin("and", f.ibin("lshr", xi, "26", "i32"), "15", "i32")
    shift = f.ibin("and", f.ibin("lshr", xi, "23", "i32"), "7", "i32")
    mant = f.ibin("shl", f.ibin("or", f.ibin("and", xi, str(0xFFFFFF), "i32"), str(0x800000), "i32"), shift, "i32")
    idx64 = f.conv("zext", idx, "i32", "i64")
    words = []
    for off in (0, 4, 8):
        at = f.ibin("add", idx64, str(off), "i64") if off else idx64
        p = f._new(f"getelementptr inbounds [24 x i32], ptr @ug_inv_pio2, i64 0, i64 {at}")
        words.append(f._new(f"load i32, ptr {p}, align 4"))
    res0 = f.ibin("mul", mant, words[0], "i32")
    m64 = f.conv("zext", mant, "i32", "i64")
    res1 = f.ibin("mul", m64, f.conv("zext", words[1], "i32", "i64"), "i64")
    res2 = f.ibin("mul", m64, f.conv("zext", words[2], "i32", "i64"), "i64")
    res0 = f.ibin("or", f.ibin("lshr", res2, "32", "i64"), f.ibin("shl", f.conv("zext", res0, "i32", "i64"), "32", "i64"), "i64")
    res0 = f.ibin("add", res0, res1, "i64")
    n64 = f.ibin("lshr", f.ibin("add", res0, str(1 << 61), "i64"), "62", "i64")
    res0 = f.ibin("sub", res0, f.ibin("shl", n64, "62", "i64"), "i64")
    r = f.fmul(f.conv("sitofp", res0, "i64", "double"), f.c(3.4061215800865545e-19, "double"), "double")  # pi / 2^63
    return r, f.conv("trunc", n64, "i64", "i32")


def _redo_slow_lanes(f: MathFn, name: str, out: str, ax: str) -> str:
    """A vector variant's result: `out`, or where any lane is big or not finite, the vector
    redone lane by lane with the scalar function `name`."""
    lanes = f.lanes
    slow = f.fcmp("uge", ax, f.c(_FAST_LIMIT))
    anyslow = f._new(f"call i1 @llvm.vector.reduce.or.v{lanes}i1(<{lanes} x i1> {slow})")
    T = f.T("float")
    f.lines.append(f"  br i1 {anyslow}, label %slow, label %done")
    f.lines.append("slow:")
    acc = out
    for i in range(lanes):
        lane = f._new(f"extractelement {T} %x, i32 {i}")
        res = f._new(f"call float @{name}(float {lane})")
        acc = f._new(f"insertelement {T} {acc}, float {res}, i32 {i}")
    f.lines.append("  br label %done")
    f.lines.append("done:")
    f.calls.add(name)
    return f._new(f"phi {T} [ {out}, %entry ], [ {acc}, %slow ]")
