"""Loop IR (ug_core.loop_ir) -> LLVM IR text.

One kernel becomes one module with

    define void @<name>(ptr %args, i64 %start, i64 %end)

which loads the buffer pointers from `args` and runs the CPU program for every global
index in [start, end) (so a thread pool can split the range). The body lives in an internal
function whose buffer parameters are `noalias` (when the caller guarantees distinct
buffers), which lets the loop vectorizer work without runtime alias checks. A second entry,
`@<name>.all(ptr %args)`, runs the whole range (launches on the calling thread use it).

Instructions are rendered one by one (exhaustive dispatch over `Opc` and over the ALU ops);
accumulators become allocas (promoted by SROA/mem2reg), loops are header-tested
phi loops, bools are i1 in registers and one byte in memory, float16 math is done in
float32 (numpy's rule) and rounded back after each op.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ug_core.loop_ir import Inst, LoopProgram, Opc, Special, index_bound
from ug_core.ops import ALU, Op, check_exhaustive

from . import mathlib

REG = {np.dtype(np.float16): "half", np.dtype(np.float32): "float", np.dtype(np.float64): "double",
       np.dtype(np.int32): "i32", np.dtype(np.int64): "i64", np.dtype(bool): "i1"}
MEM = {**REG, np.dtype(bool): "i8"}
SIZE = {"half": 2, "float": 4, "double": 8, "i32": 4, "i64": 8, "i1": 1, "i8": 1}
FSUF = {"half": "f16", "float": "f32", "double": "f64"}
INT_BITS = {"i32": 32, "i64": 64}

FAST = "contract"                      # ordinary float arithmetic
ACC_FAST = "reassoc contract nsz"      # reduction accumulators: lets the vectorizer reorder the sum


class RenderError(Exception):
    """The loop IR holds something this renderer cannot express (an op on a dtype numpy never produces)."""


def _kind(ty: str) -> str:
    return "f" if ty in FSUF else ("b" if ty == "i1" else "i")


def const_text(value, ty: str) -> str:
    if ty in FSUF:
        return mathlib.fconst(float(value), ty)
    if ty == "i1":
        return "true" if value else "false"
    return str(int(value))


class _Renderer:
    def __init__(self, program: LoopProgram, name: str, noalias: bool, cpu: str, features: str, vector_bits: int = 0):
        self.p = program
        self.name = name
        self.noalias = noalias
        self.cpu, self.features = cpu, features
        self.vector_bits = vector_bits
        self.val: dict[int, str] = {}
        self.bounds: dict[int, int | None] = {}   # see _index_bound
        self.loop_metadata: list[str] = []        # !llvm.loop nodes of the block loops (see _endrange)
        self.ty: dict[int, str] = {}
        self.lines: list[str] = []
        self.allocas: list[str] = []
        self.block = "outer"
        self.n = 0
        self.math: set[str] = set()
        self.helpers: set[str] = set()
        self.call_attrs: dict[str, str] = {}

    # -- emission helpers
    def tmp(self, text: str) -> str:
        name = f"%t{self.n}"
        self.n += 1
        self.lines.append(f"  {name} = {text}")
        return name

    def emit(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")
        self.block = name

    def call(self, ret: str, fn: str, *args: tuple[str, str]) -> str:
        return self.tmp(f"call {ret} @{fn}(" + ", ".join(f"{t} {v}" for t, v in args) + ")")

    def intrinsic(self, name: str, ty: str, *vals: str) -> str:
        suffix = FSUF.get(ty) or ty
        return self.call(ty, f"llvm.{name}.{suffix}", *((ty, v) for v in vals))

    # -- top level
    def render(self) -> str:
        p = self.p
        for inst in p.instructions:
            handler = _OPC[inst.opc]
            out = handler(self, inst)
            if out is not None:
                self.val[id(inst)] = out
                if inst.dtype is not None:
                    self.ty[id(inst)] = REG[inst.dtype]
        params = []
        for i, spec in enumerate(p.params):
            attrs = ""
            if self.noalias:
                attrs = " noalias" + ("" if spec.is_output else " readonly")
            params.append(f"ptr{attrs} %p{i}")
        body = "\n".join(self.lines)
        allocas = "\n".join(self.allocas)
        loads = "\n".join(
            f"  %a{i}.p = getelementptr ptr, ptr %args, i64 {i}\n  %a{i} = load ptr, ptr %a{i}.p, align 8"
            for i in range(len(p.params)))
        call_args = ", ".join([f"ptr %a{i}" for i in range(len(p.params))] + ["i64 %start", "i64 %end"])
        width = f' "prefer-vector-width"="{self.vector_bits}"' if self.vector_bits else ""
        fn_attrs = (f'attributes #0 = {{ nounwind "target-cpu"="{self.cpu}" "target-features"="{self.features}" '
                    f'"no-trapping-math"="true"{width} }}\n')
        out = [
            f"; ug kernel {p.name}: global={p.global_size} target={p.target} noalias={self.noalias}",
            f"define internal void @{self.name}.body({', '.join(params + ['i64 %start', 'i64 %end'])}) #0 {{",
            "entry:",
            allocas,
            "  %nonempty = icmp slt i64 %start, %end",
            "  br i1 %nonempty, label %outer, label %exit",
            "outer:",
            "  %gid = phi i64 [ %start, %entry ], [ %gid.next, %outer.latch ]",
            body,
            f"  br label %outer.latch",
            "outer.latch:",
            "  %gid.next = add nsw i64 %gid, 1",
            "  %more = icmp slt i64 %gid.next, %end",
            "  br i1 %more, label %outer, label %exit",
            "exit:",
            "  ret void",
            "}",
            "",
            f"define void @{self.name}(ptr %args, i64 %start, i64 %end) #0 {{",
            loads,
            f"  call void @{self.name}.body({call_args})",
            "  ret void",
            "}",
            "",
            # the whole range in one call, for launches on the calling thread: ctypes converts one
            # argument instead of three (a fair share of the cost of launching a tiny kernel).
            # noinline at the call: the kernel is compiled once, not copied into this wrapper
            f"define void @{self.name}.all(ptr %args) #0 {{",
            f"  call void @{self.name}(ptr %args, i64 0, i64 {math.prod(p.global_size)}) #1",
            "  ret void",
            "}",
            "",
            fn_attrs,
            "attributes #1 = { noinline }\n",
            *(['!999 = !{!"llvm.loop.unroll.disable"}', *self.loop_metadata, ""] if self.loop_metadata else []),
        ]
        for h in sorted(self.helpers):
            out.append(_HELPERS[h]())
        if self.math:
            out.append(mathlib.definitions(self.math))
            out.append(mathlib.ATTRIBUTES)
        for fn, attrs in sorted(self.call_attrs.items()):
            out.append(f"attributes #{100 + sorted(mathlib.VECTORIZED_CALLS).index(fn)} = {{ {attrs} }}")
        return "\n".join(x for x in out if x is not None)

    def v(self, inst: Inst) -> str:
        return self.val[id(inst)]

    # -- opcodes
    def _const(self, inst: Inst) -> str:
        return const_text(inst.arg, REG[inst.dtype])

    def _param(self, inst: Inst) -> str:
        return f"%p{inst.arg}"

    def _special(self, inst: Inst) -> str:
        kind, dim = inst.arg
        if dim == 0 and kind in (Special.GLOBAL_ID, Special.GROUP_ID):
            return "%gid"
        return "0"  # local ids (local_size is 1 on cpu) and the unused dims

    def _range(self, inst: Inst) -> str:
        start, end = (self.v(s) for s in inst.srcs)
        k = inst.id
        pred = self.block
        self.emit(f"br label %r{k}.h")
        self.label(f"r{k}.h")
        self.emit(f"%i{k} = phi i64 [ {start}, %{pred} ], [ %i{k}.next, %r{k}.latch ]")
        self.emit(f"%c{k} = icmp slt i64 %i{k}, {end}")
        self.emit(f"br i1 %c{k}, label %r{k}.b, label %r{k}.x")
        self.label(f"r{k}.b")
        return f"%i{k}"

    def _endrange(self, inst: Inst) -> None:
        k = inst.srcs[0].id
        self.emit(f"br label %r{k}.latch")
        self.label(f"r{k}.latch")
        self.emit(f"%i{k}.next = add nsw i64 %i{k}, {inst.srcs[0].arg}")
        # a loop over blocks (step > 1: a blocked sum's blocks, an outer block's rows) holds a
        # loop that is unrolled whole already; unrolling this one too copied a 32768-element
        # row sum's body 32 times (33 KiB of code, more than the L1 instruction cache: 7 %
        # slower than a plain loop over the same memory)
        keep = ""
        if inst.srcs[0].arg > 1:
            md = 1000 + len(self.loop_metadata)
            self.loop_metadata.append(f"!{md} = distinct !{{!{md}, !999}}")
            keep = f", !llvm.loop !{md}"
        self.emit(f"br label %r{k}.h{keep}")
        self.label(f"r{k}.x")

    def _if(self, inst: Inst) -> None:
        k = inst.id
        self.emit(f"br i1 {self.v(inst.srcs[0])}, label %if{k}.t, label %if{k}.e")
        self.label(f"if{k}.t")

    def _endif(self, inst: Inst) -> None:
        k = inst.srcs[0].id
        self.emit(f"br label %if{k}.e")
        self.label(f"if{k}.e")

    def _gep(self, base: str, index: str, mem: str) -> str:
        return self.tmp(f"getelementptr inbounds {mem}, ptr {base}, i64 {index}")

    def _load_mem(self, base: str, index: str, dtype: np.dtype) -> str:
        mem = MEM[dtype]
        ptr = self._gep(base, index, mem)
        value = self.tmp(f"load {mem}, ptr {ptr}, align {SIZE[mem]}")
        if mem != REG[dtype]:  # bool byte -> i1
            value = self.tmp(f"icmp ne i8 {value}, 0")
        return value

    def _store_mem(self, base: str, index: str, value: str, dtype: np.dtype) -> None:
        mem = MEM[dtype]
        ptr = self._gep(base, index, mem)
        if mem != REG[dtype]:
            value = self.tmp(f"zext i1 {value} to i8")
        self.emit(f"store {mem} {value}, ptr {ptr}, align {SIZE[mem]}")

    def _load(self, inst: Inst) -> str:
        param, index = inst.srcs
        return self._load_mem(self.v(param), self.v(index), inst.dtype)

    def _store(self, inst: Inst) -> None:
        param, index, value = inst.srcs
        self._store_mem(self.v(param), self.v(index), self.v(value), param.dtype)

    def _alu(self, inst: Inst) -> str:
        op = inst.arg
        if op is Op.WHERE:
            c, a, b = (self.v(s) for s in inst.srcs)
            return self.tmp(f"select i1 {c}, {REG[inst.dtype]} {a}, {REG[inst.dtype]} {b}")
        ty = REG[inst.srcs[0].dtype]
        args = [self.v(s) for s in inst.srcs]
        kind = _kind(ty)
        if ty == "half":  # numpy computes float16 ops in float32 and rounds the result
            args = [self.tmp(f"fpext half {a} to float") for a in args]
            out = _FLOAT_OPS[op](self, "float", args)
            return out if ALU[op].returns_bool else self.tmp(f"fptrunc float {out} to half")
        table = _FLOAT_OPS if kind == "f" else _INT_OPS if kind == "i" else _BOOL_OPS
        return table[op](self, ty, args)

    def _idiv(self, inst: Inst) -> str:  # non-negative dividend, positive divisor
        return self._index_divide(inst, "udiv")

    def _mod(self, inst: Inst) -> str:
        return self._index_divide(inst, "urem")

    def _index_divide(self, inst: Inst, op: str) -> str:
        """Index / and % (non-negative operands). In 32 bits when both operands are known to fit
        (see _index_bound): a vector i64 division by a constant has no instruction and is
        scalarized, while an i32 one is a multiply and shifts (a bias add's `i % n` cost more than
        the rest of its kernel)."""
        a, b = (self.v(s) for s in inst.srcs)
        if all(_fits_i32(self._index_bound(s)) for s in inst.srcs):
            a32, b32 = (str(src.arg) if src.opc is Opc.CONST else self.tmp(f"trunc i64 {x} to i32")
                        for src, x in zip(inst.srcs, (a, b)))
            return self.tmp(f"zext i32 {self.tmp(f'{op} i32 {a32}, {b32}')} to i64")
        return self.tmp(f"{op} i64 {a}, {b}")

    def _index_bound(self, inst: Inst) -> int | None:
        return index_bound(inst, self.p.global_size, self.bounds)

    def _cast(self, inst: Inst) -> str:
        return self.convert(self.v(inst.srcs[0]), REG[inst.srcs[0].dtype], REG[inst.dtype])

    def _bitcast(self, inst: Inst) -> str:
        src, dst = REG[inst.srcs[0].dtype], REG[inst.dtype]
        return self.tmp(f"bitcast {src} {self.v(inst.srcs[0])} to {dst}")

    def convert(self, x: str, src: str, dst: str) -> str:
        if src == dst:
            return x
        ks, kd = _kind(src), _kind(dst)
        if src == "double" and dst == "half":
            return self._double_to_half(x)
        if ks == "f" and kd == "f":
            op = "fpext" if SIZE[dst] > SIZE[src] else "fptrunc"
            return self.tmp(f"{op} {src} {x} to {dst}")
        if ks == "f" and kd == "b":
            return self.tmp(f"fcmp une {src} {x}, {const_text(0.0, src)}")
        if ks == "f" and kd == "i":
            if src == "half":
                x, src = self.tmp(f"fpext half {x} to float"), "float"
            # numpy on x86: NaN and out-of-range values give INT_MIN (cvttss2si); no poison
            bits = INT_BITS[dst]
            lo, hi = const_text(-(2.0 ** (bits - 1)), src), const_text(2.0 ** (bits - 1), src)
            ok = self.tmp(f"fcmp oge {src} {x}, {lo}")
            ok2 = self.tmp(f"fcmp olt {src} {x}, {hi}")
            inr = self.tmp(f"and i1 {ok}, {ok2}")
            safe = self.tmp(f"select i1 {inr}, {src} {x}, {src} {const_text(0.0, src)}")
            conv = self.tmp(f"fptosi {src} {safe} to {dst}")
            return self.tmp(f"select i1 {inr}, {dst} {conv}, {dst} {-(1 << (bits - 1))}")
        if ks == "i" and kd == "f":
            return self.tmp(f"sitofp {src} {x} to {dst}")
        if ks == "b" and kd == "f":
            return self.tmp(f"uitofp i1 {x} to {dst}")
        if ks == "i" and kd == "i":
            op = "sext" if INT_BITS[dst] > INT_BITS[src] else "trunc"
            return self.tmp(f"{op} {src} {x} to {dst}")
        if ks == "b" and kd == "i":
            return self.tmp(f"zext i1 {x} to {dst}")
        if ks == "i" and kd == "b":
            return self.tmp(f"icmp ne {src} {x}, 0")
        raise RenderError(f"no cast from {src} to {dst}")

    def _double_to_half(self, x: str) -> str:
        """Correctly rounded double -> half without the __truncdfhf2 libcall: round to float
        with round-to-odd (truncate, then set the last bit if inexact), then float -> half."""
        f = self.tmp(f"fptrunc double {x} to float")
        back = self.tmp(f"fpext float {f} to double")
        exact = self.tmp(f"fcmp ueq double {back}, {x}")
        bits = self.tmp(f"bitcast float {f} to i32")
        away = self.tmp(f"fcmp ogt double {self.intrinsic('fabs', 'double', back)}, {self.intrinsic('fabs', 'double', x)}")
        down = self.tmp(f"sub i32 {bits}, {self.tmp(f'zext i1 {away} to i32')}")
        odd = self.tmp(f"or i32 {down}, 1")
        bits = self.tmp(f"select i1 {exact}, i32 {bits}, i32 {odd}")
        f = self.tmp(f"bitcast i32 {bits} to float")
        return self.tmp(f"fptrunc float {f} to half")

    # -- accumulators (half accumulates in float, like numpy's float16 sums)
    @staticmethod
    def _acc_ty(dtype: np.dtype) -> str:
        ty = REG[dtype]
        return "float" if ty == "half" else ty

    def _define_acc(self, inst: Inst) -> str:
        ty = self._acc_ty(inst.dtype)
        slot = f"%acc{inst.id}"
        self.allocas.append(f"  {slot} = alloca {ty}, align {SIZE[ty]}")
        self.emit(f"store {ty} {const_text(inst.arg, ty)}, ptr {slot}, align {SIZE[ty]}")
        return slot

    def _acc_update(self, inst: Inst) -> None:
        acc, value = inst.srcs
        ty = self._acc_ty(acc.dtype)
        slot = self.v(acc)
        x = self.v(value)
        if REG[acc.dtype] == "half":
            x = self.tmp(f"fpext half {x} to float")
        cur = self.tmp(f"load {ty}, ptr {slot}, align {SIZE[ty]}")
        op = inst.arg
        kind = _kind(ty)
        if kind == "f":
            if op is Op.ADD:
                new = self.tmp(f"fadd {ACC_FAST} {ty} {cur}, {x}")
            else:
                new = self.intrinsic("maximum" if op is Op.MAX else "minimum", ty, cur, x)
        elif kind == "i":
            new = (self.tmp(f"add {ty} {cur}, {x}") if op is Op.ADD
                   else self.intrinsic("smax" if op is Op.MAX else "smin", ty, cur, x))
        else:
            new = self.tmp(f"{'and' if op is Op.MIN else 'or'} i1 {cur}, {x}")
        self.emit(f"store {ty} {new}, ptr {slot}, align {SIZE[ty]}")

    def _acc_read(self, inst: Inst) -> str:
        ty = self._acc_ty(inst.dtype)
        value = self.tmp(f"load {ty}, ptr {self.v(inst.srcs[0])}, align {SIZE[ty]}")
        if REG[inst.dtype] == "half":
            value = self.tmp(f"fptrunc float {value} to half")
        return value

    # -- workgroup memory: on cpu (local_size 1) a private array per global id, e.g. the
    #    per-lane accumulators of the outer-blocked lowering
    def _define_local(self, inst: Inst) -> str:
        mem = MEM[inst.dtype]
        slot = f"%local{inst.id}"
        self.allocas.append(f"  {slot} = alloca [{inst.arg} x {mem}], align 64")
        return slot

    def _local_load(self, inst: Inst) -> str:
        local, index = inst.srcs
        return self._load_mem(self.v(local), self.v(index), inst.dtype)

    def _local_store(self, inst: Inst) -> None:
        local, index, value = inst.srcs
        self._store_mem(self.v(local), self.v(index), self.v(value), local.dtype)

    def _barrier(self, inst: Inst) -> None:
        self.lines.append("  ; barrier (one thread per workgroup on cpu)")


_OPC: dict[Opc, Callable[[_Renderer, Inst], str | None]] = {
    Opc.CONST: _Renderer._const,
    Opc.PARAM: _Renderer._param,
    Opc.SPECIAL: _Renderer._special,
    Opc.RANGE: _Renderer._range,
    Opc.ENDRANGE: _Renderer._endrange,
    Opc.IF: _Renderer._if,
    Opc.ENDIF: _Renderer._endif,
    Opc.LOAD: _Renderer._load,
    Opc.STORE: _Renderer._store,
    Opc.ALU: _Renderer._alu,
    Opc.IDIV: _Renderer._idiv,
    Opc.MOD: _Renderer._mod,
    Opc.CAST: _Renderer._cast,
    Opc.BITCAST: _Renderer._bitcast,
    Opc.DEFINE_ACC: _Renderer._define_acc,
    Opc.ACC_UPDATE: _Renderer._acc_update,
    Opc.ACC_READ: _Renderer._acc_read,
    Opc.DEFINE_LOCAL: _Renderer._define_local,
    Opc.LOCAL_LOAD: _Renderer._local_load,
    Opc.LOCAL_STORE: _Renderer._local_store,
    Opc.BARRIER: _Renderer._barrier,
}
check_exhaustive(_OPC, Opc, "llvm renderer")  # type: ignore[arg-type]


# --- ALU ops per operand kind. Each table covers every ALU op; combinations numpy never
# produces (exp of an int, bool division) raise RenderError, which becomes a CompileError.

Args = list[str]


def _unreachable(what: str):
    def fail(r: _Renderer, ty: str, args: Args) -> str:
        raise RenderError(f"{what} on {ty} (numpy never produces it)")
    return fail


def _fbin(opname: str):
    return lambda r, ty, a: r.tmp(f"{opname} {FAST} {ty} {a[0]}, {a[1]}")


def _fcmp(pred: str):
    return lambda r, ty, a: r.tmp(f"fcmp {pred} {ty} {a[0]}, {a[1]}")


def _fmath(name: str):
    """exp/log/tanh (and sin/cos in float32): the vectorizable mathlib versions."""
    def emit(r: _Renderer, ty: str, a: Args) -> str:
        fn = f"ug_{name}_{FSUF[ty]}"
        if fn in mathlib.FUNCTIONS:
            r.math.add(fn)
            attrs = mathlib.call_attributes(fn)
            if attrs:  # a call the loop vectorizer maps to the vector variant (VFABI)
                r.call_attrs[fn] = attrs
                return r.tmp(f"call {ty} @{fn}({ty} {a[0]}) #{100 + sorted(mathlib.VECTORIZED_CALLS).index(fn)}")
            return r.call(ty, fn, (ty, a[0]))
        return r.intrinsic(name, ty, a[0])  # libm (scalar)
    return emit


def _fpow(r: _Renderer, ty: str, a: Args) -> str:
    """float32 (and float16, computed in float32): mathlib's vectorizable pow; float64: libm."""
    if ty == "float":
        r.math.add("ug_pow_f32")
        return r.call(ty, "ug_pow_f32", (ty, a[0]), (ty, a[1]))
    return r.intrinsic("pow", ty, a[0], a[1])


_FLOAT_OPS: dict[Op, Callable[[_Renderer, str, Args], str]] = {
    Op.NEG: lambda r, ty, a: r.tmp(f"fneg {ty} {a[0]}"),
    Op.RECIP: lambda r, ty, a: r.tmp(f"fdiv {FAST} {ty} {const_text(1.0, ty)}, {a[0]}"),
    Op.EXP: _fmath("exp"),
    Op.LOG: _fmath("log"),
    Op.SQRT: lambda r, ty, a: r.intrinsic("sqrt", ty, a[0]),
    Op.SIN: _fmath("sin"),
    Op.COS: _fmath("cos"),
    Op.TANH: _fmath("tanh"),
    Op.ABS: lambda r, ty, a: r.intrinsic("fabs", ty, a[0]),
    Op.NOT: lambda r, ty, a: r.tmp(f"fcmp oeq {ty} {a[0]}, {const_text(0.0, ty)}"),
    Op.ADD: _fbin("fadd"),
    Op.SUB: _fbin("fsub"),
    Op.MUL: _fbin("fmul"),
    Op.DIV: _fbin("fdiv"),
    Op.POW: lambda r, ty, a: _fpow(r, ty, a),
    Op.MAX: lambda r, ty, a: r.intrinsic("maximum", ty, a[0], a[1]),
    Op.MIN: lambda r, ty, a: r.intrinsic("minimum", ty, a[0], a[1]),
    Op.CMPLT: _fcmp("olt"),
    Op.CMPLE: _fcmp("ole"),
    Op.CMPEQ: _fcmp("oeq"),
    Op.CMPNE: _fcmp("une"),
    Op.WHERE: _unreachable("where"),  # handled generically in _alu
}


def _int_recip(r: _Renderer, ty: str, a: Args) -> str:
    # ops.ALU[RECIP] on ints (numpy's reciprocal): 1 / x truncated for |x| == 1, INT_MIN for 0, else 0
    x = a[0]
    one = r.tmp(f"icmp eq {ty} {x}, 1")
    mone = r.tmp(f"icmp eq {ty} {x}, -1")
    zero = r.tmp(f"icmp eq {ty} {x}, 0")
    v = r.tmp(f"select i1 {zero}, {ty} {-(1 << (INT_BITS[ty] - 1))}, {ty} 0")
    v = r.tmp(f"select i1 {mone}, {ty} -1, {ty} {v}")
    return r.tmp(f"select i1 {one}, {ty} 1, {ty} {v}")


def _int_div(r: _Renderer, ty: str, a: Args) -> str:
    """ops.divide on ints: floor division, x // 0 == 0, INT_MIN // -1 == INT_MIN (wrapping).
    The divisor is made safe first: sdiv by 0 or INT_MIN by -1 is undefined in LLVM."""
    x, y = a
    zero = r.tmp(f"icmp eq {ty} {y}, 0")
    minus_one = r.tmp(f"icmp eq {ty} {y}, -1")
    unsafe = r.tmp(f"or i1 {zero}, {minus_one}")
    d = r.tmp(f"select i1 {unsafe}, {ty} 1, {ty} {y}")
    q = r.tmp(f"sdiv {ty} {x}, {d}")
    rem = r.tmp(f"srem {ty} {x}, {d}")
    inexact = r.tmp(f"icmp ne {ty} {rem}, 0")
    signs = r.tmp(f"xor i1 {r.tmp(f'icmp slt {ty} {rem}, 0')}, {r.tmp(f'icmp slt {ty} {d}, 0')}")
    down = r.tmp(f"and i1 {inexact}, {signs}")
    q = r.tmp(f"sub {ty} {q}, {r.tmp(f'zext i1 {down} to {ty}')}")
    q = r.tmp(f"select i1 {minus_one}, {ty} {r.tmp(f'sub {ty} 0, {x}')}, {ty} {q}")
    return r.tmp(f"select i1 {zero}, {ty} 0, {ty} {q}")


def _int_pow(r: _Renderer, ty: str, a: Args) -> str:
    r.helpers.add(f"ipow_{ty}")
    return r.call(ty, f"ug_ipow_{ty}", (ty, a[0]), (ty, a[1]))


def _ibin(opname: str):
    return lambda r, ty, a: r.tmp(f"{opname} {ty} {a[0]}, {a[1]}")


def _icmp(pred: str):
    return lambda r, ty, a: r.tmp(f"icmp {pred} {ty} {a[0]}, {a[1]}")


_INT_OPS: dict[Op, Callable[[_Renderer, str, Args], str]] = {
    Op.NEG: lambda r, ty, a: r.tmp(f"sub {ty} 0, {a[0]}"),
    Op.RECIP: _int_recip,
    Op.EXP: _unreachable("exp"),
    Op.LOG: _unreachable("log"),
    Op.SQRT: _unreachable("sqrt"),
    Op.SIN: _unreachable("sin"),
    Op.COS: _unreachable("cos"),
    Op.TANH: _unreachable("tanh"),
    Op.ABS: lambda r, ty, a: r.call(ty, f"llvm.abs.{ty}", (ty, a[0]), ("i1", "false")),
    Op.NOT: lambda r, ty, a: r.tmp(f"icmp eq {ty} {a[0]}, 0"),
    Op.ADD: _ibin("add"),
    Op.SUB: _ibin("sub"),
    Op.MUL: _ibin("mul"),
    Op.DIV: _int_div,
    Op.POW: _int_pow,
    Op.MAX: lambda r, ty, a: r.intrinsic("smax", ty, a[0], a[1]),
    Op.MIN: lambda r, ty, a: r.intrinsic("smin", ty, a[0], a[1]),
    Op.CMPLT: _icmp("slt"),
    Op.CMPLE: _icmp("sle"),
    Op.CMPEQ: _icmp("eq"),
    Op.CMPNE: _icmp("ne"),
    Op.WHERE: _unreachable("where"),
}

_BOOL_OPS: dict[Op, Callable[[_Renderer, str, Args], str]] = {
    Op.NEG: lambda r, ty, a: a[0],
    Op.RECIP: lambda r, ty, a: a[0],
    Op.EXP: _unreachable("exp"),
    Op.LOG: _unreachable("log"),
    Op.SQRT: _unreachable("sqrt"),
    Op.SIN: _unreachable("sin"),
    Op.COS: _unreachable("cos"),
    Op.TANH: _unreachable("tanh"),
    Op.ABS: lambda r, ty, a: a[0],
    Op.NOT: lambda r, ty, a: r.tmp(f"xor i1 {a[0]}, true"),
    Op.ADD: _ibin("or"),
    Op.SUB: _ibin("xor"),
    Op.MUL: _ibin("and"),
    Op.DIV: _unreachable("bool division"),
    Op.POW: _unreachable("bool power"),
    Op.MAX: _ibin("or"),
    Op.MIN: _ibin("and"),
    Op.CMPLT: _icmp("ult"),
    Op.CMPLE: _icmp("ule"),
    Op.CMPEQ: _icmp("eq"),
    Op.CMPNE: _icmp("ne"),
    Op.WHERE: _unreachable("where"),
}
for _table, _who in ((_FLOAT_OPS, "float"), (_INT_OPS, "int"), (_BOOL_OPS, "bool")):
    check_exhaustive(_table, ALU, f"llvm renderer ({_who} ALU ops)")  # type: ignore[arg-type]


def _ipow(ty: str) -> str:
    """Integer power by squaring (numpy semantics, wrapping); a negative exponent gives
    1 / b**-e truncated, 0 for b == 0 (ops.power; numpy raises instead)."""
    bits = INT_BITS[ty]
    return f"""define internal {ty} @ug_ipow_{ty}({ty} %b, {ty} %e) #0 {{
entry:
  %neg = icmp slt {ty} %e, 0
  br i1 %neg, label %negative, label %loop
loop:
  %r = phi {ty} [ 1, %entry ], [ %r2, %body ]
  %bb = phi {ty} [ %b, %entry ], [ %bb2, %body ]
  %ee = phi {ty} [ %e, %entry ], [ %ee2, %body ]
  %done = icmp eq {ty} %ee, 0
  br i1 %done, label %exit, label %body
body:
  %bit = and {ty} %ee, 1
  %odd = icmp ne {ty} %bit, 0
  %m = mul {ty} %r, %bb
  %r2 = select i1 %odd, {ty} %m, {ty} %r
  %bb2 = mul {ty} %bb, %bb
  %ee2 = lshr {ty} %ee, 1
  br label %loop
exit:
  ret {ty} %r
negative:
  %isone = icmp eq {ty} %b, 1
  %ismone = icmp eq {ty} %b, -1
  %eodd = trunc {ty} %e to i1
  %mv = select i1 %eodd, {ty} -1, {ty} 1
  %v1 = select i1 %ismone, {ty} %mv, {ty} 0
  %v = select i1 %isone, {ty} 1, {ty} %v1
  ret {ty} %v
}}
; {bits}-bit
"""


_HELPERS = {"ipow_i32": lambda: _ipow("i32"), "ipow_i64": lambda: _ipow("i64")}


def _fits_i32(bound: int | None) -> bool:
    return bound is not None and 0 <= bound < 2**31


def render(program: LoopProgram, name: str, *, noalias: bool = True, triple: str = "", data_layout: str = "",
           cpu: str = "", features: str = "", vector_bits: int = 0) -> str:
    """The LLVM module (text) for one loop program; the entry point is `@name` (args, start, end),
    and `@name.all` (args) runs the whole range. `vector_bits`: the vector width the vectorizers
    should prefer (0: the target's choice)."""
    head = []
    if triple:
        head.append(f'target triple = "{triple}"')
    if data_layout:
        head.append(f'target datalayout = "{data_layout}"')
    body = _Renderer(program, name, noalias, cpu, features, vector_bits).render()
    return "\n".join(head) + "\n\n" + body
