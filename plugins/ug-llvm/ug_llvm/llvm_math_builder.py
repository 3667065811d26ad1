"""The math library's IR builder: one function body, scalar or `lanes`-wide (the vector
variants of sin / cos), as SSA text."""

from __future__ import annotations

from .render_ir import FSUF, fconst


class MathFn:
    """A tiny SSA text builder for one function body, scalar or `lanes`-wide: types are given
    as scalar names ("float", "i32") and literal operands are splatted in vector mode."""

    def __init__(self, ty: str, lanes: int = 1):
        self.ty = ty
        self.lanes = lanes
        self.lines: list[str] = []
        self.n = 0
        self.calls: set[str] = set()

    def T(self, base: str) -> str:
        return base if self.lanes == 1 else f"<{self.lanes} x {base}>"

    def o(self, v: str, base: str) -> str:
        """An operand of scalar type `base`: literals become splats in vector mode."""
        return v if self.lanes == 1 or v.startswith("%") else f"splat ({base} {v})"

    def sfx(self, base: str) -> str:
        s = FSUF.get(base, base)
        return s if self.lanes == 1 else f"v{self.lanes}{s}"

    def _new(self, text: str) -> str:
        name = f"%t{self.n}"
        self.n += 1
        self.lines.append(f"  {name} = {text}")
        return name

    def c(self, v: float, ty: str | None = None) -> str:
        return fconst(v, ty or self.ty)

    def bin(self, op: str, a: str, b: str, ty: str | None = None) -> str:
        ty = ty or self.ty
        return self._new(f"{op} {self.T(ty)} {self.o(a, ty)}, {self.o(b, ty)}")

    def fadd(self, a, b, ty=None): return self.bin("fadd", a, b, ty)
    def fsub(self, a, b, ty=None): return self.bin("fsub", a, b, ty)
    def fmul(self, a, b, ty=None): return self.bin("fmul", a, b, ty)
    def fdiv(self, a, b, ty=None): return self.bin("fdiv", a, b, ty)

    def fneg(self, a: str, ty: str | None = None) -> str:
        ty = ty or self.ty
        return self._new(f"fneg {self.T(ty)} {self.o(a, ty)}")

    def intrinsic(self, name: str, *args: str, ty: str | None = None) -> str:
        ty = ty or self.ty
        T = self.T(ty)
        return self._new(f"call {T} @llvm.{name}.{self.sfx(ty)}(" + ", ".join(f"{T} {self.o(a, ty)}" for a in args) + ")")

    def fma(self, a: str, b: str, c: str, ty: str | None = None) -> str:
        return self.intrinsic("fmuladd", a, b, c, ty=ty)

    def poly(self, x: str, coeffs: list[float], ty: str | None = None) -> str:
        """Horner: coeffs[0] * x^n + ... + coeffs[n]."""
        acc = self.c(coeffs[0], ty)
        for k in coeffs[1:]:
            acc = self.fma(acc, x, self.c(k, ty), ty)
        return acc

    def fcmp(self, pred: str, a: str, b: str, ty: str | None = None) -> str:
        ty = ty or self.ty
        return self._new(f"fcmp {pred} {self.T(ty)} {self.o(a, ty)}, {self.o(b, ty)}")

    def icmp(self, pred: str, a: str, b: str, ty: str) -> str:
        return self._new(f"icmp {pred} {self.T(ty)} {self.o(a, ty)}, {self.o(b, ty)}")

    def select(self, c: str, a: str, b: str, ty: str | None = None) -> str:
        ty = ty or self.ty
        T = self.T(ty)
        return self._new(f"select {self.T('i1')} {self.o(c, 'i1')}, {T} {self.o(a, ty)}, {T} {self.o(b, ty)}")

    def conv(self, op: str, a: str, src: str, dst: str) -> str:
        return self._new(f"{op} {self.T(src)} {self.o(a, src)} to {self.T(dst)}")

    def ibin(self, op: str, a: str, b: str, ty: str) -> str:
        return self.bin(op, a, b, ty)

    def call(self, fn: str, *args: str, ty: str | None = None) -> str:
        ty = ty or self.ty
        self.calls.add(fn)
        T = self.T(ty)
        return self._new(f"call {T} @{fn}(" + ", ".join(f"{T} {self.o(a, ty)}" for a in args) + ")")

    def define(self, name: str, result: str, attrs: str = "#90", params: tuple[str, ...] = ("%x",)) -> str:
        body = "\n".join(self.lines)
        T = self.T(self.ty)
        args = ", ".join(f"{T} {p}" for p in params)
        return (f"define internal {T} @{name}({args}) {attrs} {{\nentry:\n{body}\n"
                f"  ret {T} {result}\n}}\n")
