"""CAST between the LLVM scalar types of loop IR values, with numpy's results on x86."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ug_core.kit import RenderError

from .render_alu import INT_BITS, const_text, kind

if TYPE_CHECKING:
    from .render import LLVMRenderer

SIZE = {"half": 2, "float": 4, "double": 8, "i32": 4, "i64": 8, "i1": 1, "i8": 1}


def convert(r: "LLVMRenderer", x: str, src: str, dst: str) -> str:
    """The value `x` of type `src` as `dst`."""
    if src == dst:
        return x
    if src == "double" and dst == "half":
        return _double_to_half(r, x)
    kinds = kind(src), kind(dst)
    if kinds == ("f", "i"):
        return _float_to_int(r, x, src, dst)
    if kinds not in _CONVERSIONS:
        raise RenderError(f"no cast from {src} to {dst}")
    return r.value(_CONVERSIONS[kinds](x, src, dst))


# (source kind, destination kind) -> the instruction, for (value, source type, destination type)
_CONVERSIONS: dict[tuple[str, str], Callable[[str, str, str], str]] = {
    ("f", "f"): lambda x, s, d: f"{'fpext' if SIZE[d] > SIZE[s] else 'fptrunc'} {s} {x} to {d}",
    ("f", "b"): lambda x, s, d: f"fcmp une {s} {x}, {const_text(0.0, s)}",
    ("i", "f"): lambda x, s, d: f"sitofp {s} {x} to {d}",
    ("b", "f"): lambda x, s, d: f"uitofp i1 {x} to {d}",
    ("i", "i"): lambda x, s, d: f"{'sext' if INT_BITS[d] > INT_BITS[s] else 'trunc'} {s} {x} to {d}",
    ("b", "i"): lambda x, s, d: f"zext i1 {x} to {d}",
    ("i", "b"): lambda x, s, d: f"icmp ne {s} {x}, 0",
}


def _float_to_int(r: "LLVMRenderer", x: str, src: str, dst: str) -> str:
    """numpy on x86: NaN and out-of-range values give INT_MIN (cvttss2si); never poison."""
    if src == "half":
        x, src = r.value(f"fpext half {x} to float"), "float"
    bits = INT_BITS[dst]
    lo, hi = const_text(-(2.0 ** (bits - 1)), src), const_text(2.0 ** (bits - 1), src)
    ok = r.value(f"fcmp oge {src} {x}, {lo}")
    ok2 = r.value(f"fcmp olt {src} {x}, {hi}")
    inr = r.value(f"and i1 {ok}, {ok2}")
    safe = r.value(f"select i1 {inr}, {src} {x}, {src} {const_text(0.0, src)}")
    conv = r.value(f"fptosi {src} {safe} to {dst}")
    return r.value(f"select i1 {inr}, {dst} {conv}, {dst} {-(1 << (bits - 1))}")


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
