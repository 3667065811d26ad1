"""CAST between the LLVM scalar types of loop IR values, with numpy's results on x86."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .render_alu import INT_BITS, const_text
from .render_ir import REG

if TYPE_CHECKING:
    from .render import LLVMRenderer

SIZE = {"half": 2, "float": 4, "double": 8, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "i1": 1}
_EXTEND = {"i": "sext", "u": "zext", "b": "zext"}          # an int of this kind, widened
_TO_FLOAT = {"i": "sitofp", "u": "uitofp", "b": "uitofp"}  # an int of this kind, as a float


def convert(r: "LLVMRenderer", x: str, src_dtype: np.dtype, dst_dtype: np.dtype) -> str:
    """The value `x` of dtype `src_dtype` as `dst_dtype` (ints of one width and either sign are
    one LLVM type: between them nothing changes)."""
    src, dst = REG[src_dtype], REG[dst_dtype]
    source, target = src_dtype.kind, dst_dtype.kind
    if src == dst:
        return x
    if src == "double" and dst == "half":
        return _double_to_half(r, x)
    if source == "f":
        if target == "f":
            return r.value(f"{'fpext' if SIZE[dst] > SIZE[src] else 'fptrunc'} {src} {x} to {dst}")
        if target == "b":
            return r.value(f"fcmp une {src} {x}, {const_text(0.0, src)}")
        return _float_to_int(r, x, src, dst_dtype)
    if target == "f":
        return r.value(f"{_TO_FLOAT[source]} {src} {x} to {dst}")
    if target == "b":
        return r.value(f"icmp ne {src} {x}, 0")
    return r.value(f"{_EXTEND[source] if INT_BITS[dst] > INT_BITS[src] else 'trunc'} {src} {x} to {dst}")


def _float_to_int(r: "LLVMRenderer", x: str, src: str, dst_dtype: np.dtype) -> str:
    """numpy on x86: a float becomes an int32 (int64 for 64-bit and uint32 results; uint64 above
    2**63 unsigned) whose low bits are kept; NaN and values out of that range give its INT_MIN
    (cvttss2si). Never poison, which fptosi / fptoui of such values are."""
    if src == "half":
        x, src = r.value(f"fpext half {x} to float"), "float"
    dst, bits = REG[dst_dtype], 8 * dst_dtype.itemsize
    wide = "i64" if bits == 64 or (dst_dtype.kind == "u" and bits == 32) else "i32"
    out = _in_range(r, x, src, "fptosi", -(2.0 ** (INT_BITS[wide] - 1)), 2.0 ** (INT_BITS[wide] - 1), wide,
                    -(1 << (INT_BITS[wide] - 1)))
    if dst_dtype.kind == "u" and bits == 64:   # [2**63, 2**64): unsigned
        out = _in_range(r, x, src, "fptoui", 2.0 ** 63, 2.0 ** 64, wide, out)
    return out if wide == dst else r.value(f"trunc {wide} {out} to {dst}")


def _in_range(r: "LLVMRenderer", x: str, src: str, instruction: str, lo: float, hi: float, ty: str,
              otherwise: int | str) -> str:
    """`instruction` (fptosi / fptoui) of x to `ty` where lo <= x < hi, else `otherwise`."""
    inside = r.value(f"and i1 {r.value(f'fcmp oge {src} {x}, {const_text(lo, src)}')}, "
                     f"{r.value(f'fcmp olt {src} {x}, {const_text(hi, src)}')}")
    safe = r.value(f"select i1 {inside}, {src} {x}, {src} {const_text(lo, src)}")
    return r.value(f"select i1 {inside}, {ty} {r.value(f'{instruction} {src} {safe} to {ty}')}, {ty} {otherwise}")


def _double_to_half(r: "LLVMRenderer", x: str) -> str:
    """Correctly rounded double -> half without the __truncdfhf2 libcall: round to float
    with round-to-odd (truncate, then set the last bit if inexact), then float -> half."""
    f = r.value(f"fptrunc double {x} to float")
    back = r.value(f"fpext float {f} to double")
    exact = r.value(f"fcmp ueq double {back}, {x}")
    bits = r.value(f"bitcast float {f} to i32")
    away = r.value(f"fcmp ogt double {r.intrinsic('fabs', 'double', back)}, {r.intrinsic('fabs', 'double', x)}")
    down = r.value(f"sub i32 {bits}, {r.value(f'zext i1 {away} to i32')}")
    odd = r.value(f"or i32 {down}, 1")
    bits = r.value(f"select i1 {exact}, i32 {bits}, i32 {odd}")
    f = r.value(f"bitcast i32 {bits} to float")
    return r.value(f"fptrunc float {f} to half")
