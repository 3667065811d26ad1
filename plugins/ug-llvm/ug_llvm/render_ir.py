"""LLVM IR text, line by line: numbered SSA values and labelled blocks of one function.

The kernel renderer, the packed gemm's builder and the math library all write their function
bodies through this: `value` names what an instruction computes, `emit` writes a statement,
`label` opens a block (and remembers it, for the phis of the loops that start there).
"""

from __future__ import annotations

import struct

import numpy as np

FSUF = {"half": "f16", "float": "f32", "double": "f64"}   # the intrinsic suffix of a float type
# the LLVM type of a dtype's values (ints of either signedness share it: the instructions say
# which) and of its elements in memory (a bool is an i1 in registers, a byte in memory)
REG = {np.dtype(np.float16): "half", np.dtype(np.float32): "float", np.dtype(np.float64): "double",
       **{np.dtype(f"{sign}int{bits}"): f"i{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64)},
       np.dtype(bool): "i1"}
MEM = {**REG, np.dtype(bool): "i8"}


def fconst(value: float, ty: str) -> str:
    """An exact LLVM literal for a half/float/double constant."""
    if ty == "half":
        return "0xH%04X" % int(np.array(value, dtype=np.float16).view(np.uint16))
    if ty == "float":  # round to float32 first: LLVM requires the literal to be exact in the type
        value = struct.unpack("<f", struct.pack("<f", value))[0]
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]


class IRBuilder:
    def __init__(self, stem: str, block: str = "entry") -> None:
        self.lines: list[str] = []
        self.stem = stem      # values are named stem0, stem1, ...
        self.n = 0
        self.block = block    # the block the next line goes into

    def value(self, text: str) -> str:
        """`%name = text`; returns the name."""
        name = f"{self.stem}{self.n}"
        self.n += 1
        self.lines.append(f"  {name} = {text}")
        return name

    def emit(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")
        self.block = name

    def call(self, ret: str, fn: str, *args: tuple[str, str]) -> str:
        """`call ret @fn(type value, ...)`"""
        return self.value(f"call {ret} @{fn}(" + ", ".join(f"{t} {v}" for t, v in args) + ")")

    def intrinsic(self, name: str, ty: str, *vals: str) -> str:
        """`llvm.<name>` on the scalar type `ty` (all operands of that type)."""
        return self.call(ty, f"llvm.{name}.{FSUF.get(ty) or ty}", *((ty, v) for v in vals))


PIPELINE_MARK = "; ug-pipeline: O"
"""A module whose text starts with this and a digit (`; ug-pipeline: O1`) is optimized by that
level's LLVM pipeline instead of the compiler's default (jit.OPT_LEVEL); the mark is part of the
text, so of the disk cache's key. Code generation stays at jit.OPT_LEVEL."""


def pipeline_mark(level: int) -> str:
    """The first line that makes jit.ObjectCompiler optimize a module at `level` (0-3)."""
    if level not in (0, 1, 2, 3):
        raise ValueError(f"LLVM pipeline level must be 0-3, got {level!r}")
    return f"{PIPELINE_MARK}{level}\n"
