"""Vectorizable math functions, emitted as plain LLVM IR.

`llvm.exp.f32` and friends lower to scalar libm calls, which stop the loop vectorizer. These
functions are branch-free (range reduction + polynomial, special cases by `select`), so once
inlined into a kernel's loop they vectorize like any other arithmetic.

float32: exp, log, tanh (single precision, Cephes-style minimax polynomials, ~1 ulp),
sin, cos (evaluated in double after an exact range reduction: Cody-Waite for |x| < 120,
Payne-Hanek with a 192-bit table of 2/pi otherwise, so huge arguments are right too).
float64: exp, log, tanh (fdlibm / Cephes coefficients, a few ulp). float32 pow goes through the
float64 exp and log. float64 sin/cos and pow use libm (scalar).

Each function is `internal` and `alwaysinline`; a module only gets the ones it calls
(`definitions(names)` follows dependencies).
"""

from __future__ import annotations

import struct


def fconst(value: float, ty: str) -> str:
    """An exact LLVM literal for a float/double/half constant."""
    if ty == "half":
        import numpy as np

        return "0xH%04X" % int(np.array(value, dtype=np.float16).view(np.uint16))
    if ty == "float":  # round to float32 first: LLVM requires the literal to be exact in the type
        value = struct.unpack("<f", struct.pack("<f", value))[0]
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]


_FSUFFIX = {"float": "f32", "double": "f64"}


class _Fn:
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
        s = _FSUFFIX.get(base, base)
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


# ---------------------------------------------------------------------------------- exp


def _exp_f32() -> tuple[str, set[str]]:
    f = _Fn("float")
    x = "%x"
    lo = f.fcmp("olt", x, f.c(-104.0))
    xc = f.select(lo, f.c(-104.0), x)
    hi = f.fcmp("ogt", xc, f.c(89.0))
    xc = f.select(hi, f.c(89.0), xc)
    n = f.intrinsic("rint", f.fmul(xc, f.c(1.44269504088896341)))
    r = f.fma(n, f.c(-0.693359375), xc)
    r = f.fma(n, f.c(2.12194440e-4), r)
    z = f.fmul(r, r)
    p = f.poly(r, [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                   1.6666665459e-1, 5.0000001201e-1])
    y = f.fadd(f.fma(p, z, r), f.c(1.0))
    y = _scale2(f, y, n, "float", "i32", 127, 23)
    nan = f.fcmp("uno", x, x)
    return f.define("ug_exp_f32", f.select(nan, x, y)), f.calls


def _scale2(f: _Fn, y: str, n: str, fty: str, ity: str, bias: int, mant: int) -> str:
    """y * 2^n for integral n (as a float) in a range where n/2 is a normal exponent."""
    ni = f.conv("fptosi", n, fty, ity)
    n1 = f.ibin("ashr", ni, "1", ity)
    n2 = f.ibin("sub", ni, n1, ity)
    s1 = f.conv("bitcast", f.ibin("shl", f.ibin("add", n1, str(bias), ity), str(mant), ity), ity, fty)
    s2 = f.conv("bitcast", f.ibin("shl", f.ibin("add", n2, str(bias), ity), str(mant), ity), ity, fty)
    return f.fmul(f.fmul(y, s1, fty), s2, fty)


def _exp_f64() -> tuple[str, set[str]]:
    f = _Fn("double")
    x = "%x"
    lo = f.fcmp("olt", x, f.c(-746.0))
    xc = f.select(lo, f.c(-746.0), x)
    hi = f.fcmp("ogt", xc, f.c(710.0))
    xc = f.select(hi, f.c(710.0), xc)
    n = f.intrinsic("rint", f.fmul(xc, f.c(1.4426950408889634)))
    r = f.fma(n, f.c(-6.93147180369123816490e-01), xc)
    r = f.fma(n, f.c(-1.90821492927058770002e-10), r)
    # Taylor to r^13 on |r| <= ln2/2: truncation < 0.05 ulp
    import math

    coeffs = [1.0 / math.factorial(k) for k in range(13, 1, -1)]
    p = f.poly(r, coeffs)
    z = f.fmul(r, r)
    y = f.fadd(f.fma(p, z, r), f.c(1.0))
    y = _scale2(f, y, n, "double", "i64", 1023, 52)
    nan = f.fcmp("uno", x, x)
    return f.define("ug_exp_f64", f.select(nan, x, y)), f.calls


# ---------------------------------------------------------------------------------- log


def _log_special(f: _Fn, x: str, y: str) -> str:
    inf = f.c(float("inf"))
    y = f.select(f.fcmp("oeq", x, inf), inf, y)
    y = f.select(f.fcmp("oeq", x, f.c(0.0)), f.c(float("-inf")), y)
    y = f.select(f.fcmp("olt", x, f.c(0.0)), f.c(float("nan")), y)
    return f.select(f.fcmp("uno", x, x), x, y)


def _log_f32() -> tuple[str, set[str]]:
    f = _Fn("float")
    x = "%x"
    den = f.fcmp("olt", x, f.c(1.17549435e-38))
    xs = f.select(den, f.fmul(x, f.c(8388608.0)), x)
    eadj = f.select(den, "-23", "0", "i32")
    bits = f.conv("bitcast", xs, "float", "i32")
    e = f.ibin("sub", f.ibin("lshr", bits, "23", "i32"), "126", "i32")
    e = f.ibin("add", e, eadj, "i32")
    m = f.conv("bitcast", f.ibin("or", f.ibin("and", bits, str(0x807FFFFF - (1 << 32)), "i32"), str(0x3F000000), "i32"),
               "i32", "float")
    small = f.fcmp("olt", m, f.c(0.707106781186547524))
    e = f.ibin("sub", e, f.conv("zext", small, "i1", "i32"), "i32")
    m = f.select(small, f.fadd(m, m), m)
    m = f.fsub(m, f.c(1.0))
    fe = f.conv("sitofp", e, "i32", "float")
    z = f.fmul(m, m)
    p = f.poly(m, [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
                   -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1])
    y = f.fmul(f.fmul(p, m), z)
    y = f.fma(fe, f.c(-2.12194440e-4), y)
    y = f.fma(z, f.c(-0.5), y)
    r = f.fadd(m, y)
    r = f.fma(fe, f.c(0.693359375), r)
    return f.define("ug_log_f32", _log_special(f, x, r)), f.calls


def _log_f64() -> tuple[str, set[str]]:
    f = _Fn("double")
    x = "%x"
    den = f.fcmp("olt", x, f.c(2.2250738585072014e-308))
    xs = f.select(den, f.fmul(x, f.c(18014398509481984.0)), x)
    eadj = f.select(den, "-54", "0", "i64")
    bits = f.conv("bitcast", xs, "double", "i64")
    e = f.ibin("sub", f.ibin("lshr", bits, "52", "i64"), "1022", "i64")
    e = f.ibin("add", e, eadj, "i64")
    m = f.conv("bitcast", f.ibin("or", f.ibin("and", bits, str(0x800FFFFFFFFFFFFF - (1 << 64)), "i64"),
                                 str(0x3FE0000000000000), "i64"), "i64", "double")
    small = f.fcmp("olt", m, f.c(0.70710678118654752440))
    e = f.ibin("sub", e, f.conv("zext", small, "i1", "i64"), "i64")
    m = f.select(small, f.fadd(m, m), m)
    fm = f.fsub(m, f.c(1.0))
    k = f.conv("sitofp", e, "i64", "double")
    s = f.fdiv(fm, f.fadd(fm, f.c(2.0)))
    z = f.fmul(s, s)
    w = f.fmul(z, z)
    t1 = f.fmul(w, f.poly(w, [1.531383769920937332e-01, 2.222219843214978396e-01, 3.999999999940941908e-01]))
    t2 = f.fmul(z, f.poly(w, [1.479819860511658591e-01, 1.818357216161805012e-01, 2.857142874366239149e-01,
                              6.666666666666735130e-01]))
    R = f.fadd(t2, t1)
    hfsq = f.fmul(f.fmul(fm, fm), f.c(0.5))
    # k*ln2_hi - ((hfsq - (s*(hfsq+R) + k*ln2_lo)) - f)
    inner = f.fma(k, f.c(1.90821492927058770002e-10), f.fmul(s, f.fadd(hfsq, R)))
    r = f.fsub(f.fmul(k, f.c(6.93147180369123816490e-01)), f.fsub(f.fsub(hfsq, inner), fm))
    return f.define("ug_log_f64", _log_special(f, x, r)), f.calls


# ---------------------------------------------------------------------------------- pow


def _pow_f32() -> tuple[str, set[str]]:
    """powf(x, y) = exp(y * log|x|) evaluated in double: log's and exp's errors of a few double
    ulp, scaled by |y log x| < 150, stay far below half a float ulp, so the result is the
    correctly rounded one but for rare double-rounding ties. The special cases follow C99
    (numpy's powf): sign for odd integer y, NaN for x < 0 and non-integer y, and 1 for y = 0,
    x = 1, and |x| = 1 with infinite y."""
    f = _Fn("float")
    x, y = "%x", "%y"
    ax = f.intrinsic("fabs", x)
    l = f.call("ug_log_f64", f.conv("fpext", ax, "float", "double"), ty="double")
    t = f.fmul(f.conv("fpext", y, "float", "double"), l, "double")
    r = f.conv("fptrunc", f.call("ug_exp_f64", t, ty="double"), "double", "float")
    y_int = f.fcmp("oeq", f.intrinsic("floor", y), y)            # true for +-inf (even), false for NaN
    half = f.fmul(y, f.c(0.5))
    y_odd = f.ibin("and", y_int, f.fcmp("une", f.intrinsic("floor", half), half), "i1")
    x_sign = f.icmp("slt", f.conv("bitcast", x, "float", "i32"), "0", "i32")   # -0 and -inf too
    r = f.select(f.ibin("and", y_odd, x_sign, "i1"), f.fneg(r), r)
    x_neg_finite = f.ibin("and", f.fcmp("olt", x, f.c(0.0)), f.fcmp("one", ax, f.c(float("inf"))), "i1")
    bad = f.ibin("and", x_neg_finite, f.ibin("xor", y_int, "true", "i1"), "i1")
    r = f.select(bad, f.c(float("nan")), r)
    unit = f.ibin("and", f.fcmp("oeq", ax, f.c(1.0)), f.fcmp("oeq", f.intrinsic("fabs", y), f.c(float("inf"))), "i1")
    one = f.ibin("or", f.ibin("or", f.fcmp("oeq", x, f.c(1.0)), f.fcmp("oeq", y, f.c(0.0)), "i1"), unit, "i1")
    return f.define("ug_pow_f32", f.select(one, f.c(1.0), r), params=("%x", "%y")), f.calls


# ---------------------------------------------------------------------------------- tanh


def _tanh_f32() -> tuple[str, set[str]]:
    f = _Fn("float")
    x = "%x"
    a = f.intrinsic("fabs", x)
    e = f.call("ug_exp_f32", f.fadd(a, a))
    big = f.fsub(f.c(1.0), f.fdiv(f.c(2.0), f.fadd(e, f.c(1.0))))
    big = f.intrinsic("copysign", big, x)
    z = f.fmul(x, x)
    p = f.poly(z, [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1])
    small = f.fma(f.fmul(p, z), x, x)
    small = f.select(f.fcmp("olt", a, f.c(2.0 ** -12)), x, small)  # rounds to x; keeps -0 (-0 + +0 is +0)
    return f.define("ug_tanh_f32", f.select(f.fcmp("oge", a, f.c(0.625)), big, small)), f.calls


def _tanh_f64() -> tuple[str, set[str]]:
    f = _Fn("double")
    x = "%x"
    a = f.intrinsic("fabs", x)
    e = f.call("ug_exp_f64", f.fadd(a, a))
    big = f.fsub(f.c(1.0), f.fdiv(f.c(2.0), f.fadd(e, f.c(1.0))))
    big = f.intrinsic("copysign", big, x)
    z = f.fmul(x, x)
    P = f.poly(z, [-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3])
    Q = f.poly(z, [1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3])
    small = f.fma(f.fmul(z, f.fdiv(P, Q)), x, x)
    small = f.select(f.fcmp("olt", a, f.c(2.0 ** -27)), x, small)  # rounds to x; keeps -0 (-0 + +0 is +0)
    return f.define("ug_tanh_f64", f.select(f.fcmp("oge", a, f.c(0.625)), big, small)), f.calls


# ---------------------------------------------------------------------------------- sin / cos (float32)


def _inv_pio2_table() -> list[int]:
    """32-bit windows of the bits of 2/pi, 8 new bits per entry (for Payne-Hanek on float32)."""

    def arctan_inv(x: int, one: int) -> int:
        s, t, n, sign = 0, one // x, 1, 1
        while t:
            s += sign * (t // n)
            t //= x * x
            n += 2
            sign = -sign
        return s

    prec = 420
    one = 1 << prec
    pi = 4 * (4 * arctan_inv(5, one) - arctan_inv(239, one))  # pi * 2^prec
    bits = 200
    frac = (2 << (bits + prec)) // pi                        # floor(2/pi * 2^bits)
    return [(frac >> (bits - 8 * (i + 1))) & 0xFFFFFFFF for i in range(24)]


INV_PIO2_GLOBAL = ("@ug_inv_pio2 = internal unnamed_addr constant [24 x i32] ["
                   + ", ".join(f"i32 {v - (1 << 32) if v >= 1 << 31 else v}" for v in _inv_pio2_table()) + "], align 4\n")


def _sincos_f32(which: str, lanes: int = 1) -> tuple[str, set[str]]:
    """sin or cos of a float32, computed in double: |x| = n*pi/2 + r, |r| <= pi/4.

    Scalar (lanes=1): both reductions, chosen by select. Vector (the VFABI variants): the
    fast reduction only; if any lane has |x| >= 120 (or is inf), that vector is redone lane by
    lane with the scalar function, so the table lookups never slow down the common case."""
    f = _Fn("float", lanes)
    x = "%x"
    D = "double"
    ax = f.intrinsic("fabs", x)
    ad = f.conv("fpext", ax, "float", D)
    # fast reduction (|x| < 120): one multiply-subtract with pi/2 in double is accurate enough
    nf = f.intrinsic("rint", f.fmul(ad, f.c(0.63661977236758134308, D), D), ty=D)
    r = f.fma(nf, f.c(-1.5707963267948966, D), ad, D)
    n = f.conv("fptosi", nf, D, "i32")
    big = f.fcmp("oge", ax, f.c(120.0))
    if lanes == 1:
        # Payne-Hanek (|x| >= 120): exact 2.62 fixed-point product with 96 bits of 2/pi
        xi = f.conv("bitcast", ax, "float", "i32")
        idx = f.ibin("and", f.ibin("lshr", xi, "26", "i32"), "15", "i32")
        shift = f.ibin("and", f.ibin("lshr", xi, "23", "i32"), "7", "i32")
        mant = f.ibin("shl", f.ibin("or", f.ibin("and", xi, str(0xFFFFFF), "i32"), str(0x800000), "i32"), shift, "i32")
        idx64 = f.conv("zext", idx, "i32", "i64")
        words = []
        for off in (0, 4, 8):
            i = f.ibin("add", idx64, str(off), "i64") if off else idx64
            p = f._new(f"getelementptr inbounds [24 x i32], ptr @ug_inv_pio2, i64 0, i64 {i}")
            words.append(f._new(f"load i32, ptr {p}, align 4"))
        res0 = f.ibin("mul", mant, words[0], "i32")
        m64 = f.conv("zext", mant, "i32", "i64")
        res1 = f.ibin("mul", m64, f.conv("zext", words[1], "i32", "i64"), "i64")
        res2 = f.ibin("mul", m64, f.conv("zext", words[2], "i32", "i64"), "i64")
        res0 = f.ibin("or", f.ibin("lshr", res2, "32", "i64"), f.ibin("shl", f.conv("zext", res0, "i32", "i64"), "32", "i64"), "i64")
        res0 = f.ibin("add", res0, res1, "i64")
        n64 = f.ibin("lshr", f.ibin("add", res0, str(1 << 61), "i64"), "62", "i64")
        res0 = f.ibin("sub", res0, f.ibin("shl", n64, "62", "i64"), "i64")
        r_big = f.fmul(f.conv("sitofp", res0, "i64", D), f.c(3.4061215800865545e-19, D), D)  # pi / 2^63
        n_big = f.conv("trunc", n64, "i64", "i32")
        r = f.select(big, r_big, r, D)
        n = f.select(big, n_big, n, "i32")
    # sin(r), cos(r) on |r| <= pi/4 (Taylor in double: error < 1e-10)
    import math

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
    # any lane big or not finite -> redo this vector with the scalar function
    slow = f.fcmp("uge", ax, f.c(120.0))
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
    result = f._new(f"phi {T} [ {out}, %entry ], [ {acc}, %slow ]")
    f.calls.add(name)
    return f.define(f"{name}_v{lanes}", result, "#91"), f.calls


VECTOR_LANES = (4, 8, 16)
# scalar functions with vector variants (VFABI): calls to them stay calls until the loop
# vectorizer replaces them by the variant of its chosen width
VECTORIZED_CALLS = {"ug_sin_f32", "ug_cos_f32"}


def call_attributes(name: str) -> str:
    """The call-site attribute naming the vector variants of `name` ("" if it has none)."""
    if name not in VECTORIZED_CALLS:
        return ""
    variants = ",".join(f"_ZGV_LLVM_N{n}v_{name}({name}_v{n})" for n in VECTOR_LANES)
    return f'"vector-function-abi-variant"="{variants}"'


_BUILDERS = {
    "ug_exp_f32": _exp_f32, "ug_exp_f64": _exp_f64,
    "ug_log_f32": _log_f32, "ug_log_f64": _log_f64,
    "ug_tanh_f32": _tanh_f32, "ug_tanh_f64": _tanh_f64,
    "ug_pow_f32": _pow_f32,
    "ug_sin_f32": lambda: _sincos_f32("sin"), "ug_cos_f32": lambda: _sincos_f32("cos"),
    **{f"ug_{w}_f32_v{n}": (lambda w=w, n=n: _sincos_f32(w, n)) for w in ("sin", "cos") for n in VECTOR_LANES},
}
_CACHE: dict[str, tuple[str, set[str]]] = {}

FUNCTIONS = frozenset(_BUILDERS)

ATTRIBUTES = (
    'attributes #90 = { alwaysinline nounwind willreturn "no-trapping-math"="true" }\n'
    'attributes #91 = { nounwind willreturn memory(none) "no-trapping-math"="true" }\n'
    'attributes #92 = { noinline nounwind willreturn memory(none) "no-trapping-math"="true" }\n'
)


def definitions(names: set[str]) -> str:
    """IR text defining the named functions and everything they call."""
    todo, done = list(names), {}
    while todo:
        name = todo.pop()
        if name in done:
            continue
        if name not in _CACHE:
            _CACHE[name] = _BUILDERS[name]()
        text, calls = _CACHE[name]
        done[name] = text
        todo.extend(calls)
        if name in VECTORIZED_CALLS:
            todo.extend(f"{name}_v{n}" for n in VECTOR_LANES)
    out = "".join(done[n] for n in sorted(done))
    keep = sorted(n for n in done if n.rsplit("_", 1)[-1][:1] == "v" and n.rsplit("_", 1)[-1][1:].isdigit())
    if keep:  # vector variants have no caller until the loop vectorizer runs: keep them alive
        out += (f"@llvm.compiler.used = appending global [{len(keep)} x ptr] ["
                + ", ".join(f"ptr @{n}" for n in keep) + '], section "llvm.metadata"\n')
    if any(n.startswith(("ug_sin", "ug_cos")) for n in done):
        out = INV_PIO2_GLOBAL + out
    return out
