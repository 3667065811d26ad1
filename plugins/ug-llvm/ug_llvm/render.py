"""Loop IR (ug_core.loop_ir) -> LLVM IR text.

One kernel becomes one module with

    define void @<name>(ptr %args, i64 %start, i64 %end)

which loads the buffer pointers from `args` and runs the CPU program for every global
index in [start, end) (so a thread pool can split the range). The body lives in an internal
function whose buffer parameters are `noalias` (when the caller guarantees distinct
buffers), which lets the loop vectorizer work without runtime alias checks. A second entry,
`@<name>.all(ptr %args)`, runs the whole range (launches on the calling thread use it).

`LLVMRenderer` is a kit Renderer: one `op_<opcode>` method per loop IR opcode, each returning
the name of the value it defines (None for statements). The ALU ops are in render_alu, casts in
render_cast. Accumulators become allocas (promoted by SROA/mem2reg), loops are header-tested
phi loops, bools are i1 in registers and one byte in memory, float16 math is done in float32
(numpy's rule) and rounded back after each op.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ug_core.kit import (ALU, CLOSES, FLOAT, OPENS, SAFE_FLOAT_TO_INT, SAFE_INT_DIVISION, SAFE_INT_POW, SAFE_SHIFTS, Inst,
                         LoopProgram, Op, Opc, RenderError, Renderer, Special, index_bound)

from . import mathlib
from .render_alu import alu, const_text, ipow_definition
from .render_cast import SIZE, convert
from .render_ir import FSUF, MEM, REG, IRBuilder, pipeline_mark

__all__ = ["LLVMRenderer", "LLVMTarget", "RenderError", "render"]

ACC_FAST = "reassoc contract nsz"      # reduction accumulators: lets the vectorizer reorder the sum
# a scan's running value (stored at every step, _running_accs): reordered too, but every zero
# keeps its sign (nsz let LLVM fold the -0.0 a running sum starts from plus a 0.0 to -0.0, so
# cumulative_sum(include_initial=True) began with -0.0)
ACC_RUNNING = "reassoc contract"
_ACC_FLOAT = {Op.ADD: "fadd", Op.MUL: "fmul"}
_ATOMIC_RMW = {Op.ADD: "add", Op.MAX: "max", Op.MIN: "min"}   # (max/min: "u" first for unsigned)


@dataclass(frozen=True)
class LLVMTarget:
    """The machine a module is for ("" leaves the triple / layout / cpu to LLVM's defaults)."""

    triple: str = ""
    data_layout: str = ""
    cpu: str = ""
    features: str = ""


class LLVMRenderer(Renderer, IRBuilder):
    """Renders one program (a fresh instance per program: the module's needs accumulate)."""

    # render_alu's divisions, ipow and shifts and render_cast's float -> int guard these themselves
    capabilities = frozenset({SAFE_INT_DIVISION, SAFE_INT_POW, SAFE_SHIFTS, SAFE_FLOAT_TO_INT})
    entry_names = "hash"   # one engine holds every kernel of the process: a symbol per distinct module

    def __init__(self, target: LLVMTarget, noalias: bool = True, vector_bits: int = 0, pipeline: int | None = None):
        """noalias: the caller passes distinct buffers; vector_bits: the vector width the
        vectorizers should prefer (0: the target's choice); pipeline: the LLVM pipeline level to
        optimize the module at (None: the compiler's, see render_ir.pipeline_mark)."""
        Renderer.__init__(self)
        IRBuilder.__init__(self, stem="%t", block="outer")
        self.target, self.noalias, self.vector_bits = target, noalias, vector_bits
        self.pipeline = pipeline
        self.bounds: dict[int, int | None] = {}   # index_bound's memo (see _index_divide)
        self.loop_metadata: list[str] = []        # !llvm.loop nodes of the block loops (see op_endrange)
        self.allocas: list[str] = []
        self.math: set[str] = set()               # mathlib functions called
        self.ipow_types: set[tuple[str, bool]] = set()   # (int type, unsigned) whose ug_ipow / ug_upow is called
        self.call_attrs: dict[str, str] = {}      # mathlib function -> its call-site attributes
        self.running: set[int] = set()            # accumulators read in their loop (_running_accs)
        self.row = 0                              # the row length the global id loop is split at (_row_length)

    def walk(self, program: LoopProgram) -> None:
        """As the kit's, keeping the name each op_ method returns for its value (None: a statement)."""
        dispatch = self.dispatch
        for inst in program.instructions:
            out = dispatch[inst.opc](self, inst)
            if out is not None:
                self.names[id(inst)] = out

    def rename_entry(self, source: str, old: str, new: str) -> str:
        """The module with its entries (`@old`, `@old.body`, `@old.all`) named `new`."""
        return source.replace("@" + old, "@" + new)

    # -- the module
    def render(self, program: LoopProgram, name: str) -> str:
        """The module for `program`: entries `@name` (args, start, end) and `@name.all` (args)."""
        self.program = program
        self.running = _running_accs(program)
        self.row = _row_length(program)
        self.walk(program)
        head = [pipeline_mark(self.pipeline).rstrip("\n")] if self.pipeline is not None else []
        head += [f'target triple = "{self.target.triple}"'] if self.target.triple else []
        if self.target.data_layout:
            head.append(f'target datalayout = "{self.target.data_layout}"')
        return "\n".join(head) + "\n\n" + "\n".join(self._functions(name) + self._module_tail())

    def _functions(self, name: str) -> list[str]:
        p = self.program
        params = [f"ptr{' noalias' + ('' if spec.is_output else ' readonly') if self.noalias else ''} %p{i}"
                  for i, spec in enumerate(p.params)]
        loads = "\n".join(
            f"  %a{i}.p = getelementptr ptr, ptr %args, i64 {i}\n  %a{i} = load ptr, ptr %a{i}.p, align 8"
            for i in range(len(p.params)))
        call_args = ", ".join([f"ptr %a{i}" for i in range(len(p.params))] + ["i64 %start", "i64 %end"])
        return [
            f"; ug kernel {p.name}: global={p.global_size} target={p.target} noalias={self.noalias}",
            f"define internal void @{name}.body({', '.join(params + ['i64 %start', 'i64 %end'])}) #0 {{",
            "entry:",
            "\n".join(self.allocas),
            "  %nonempty = icmp slt i64 %start, %end",
            *(self._row_loop() if self.row else [
                "  br i1 %nonempty, label %outer, label %exit",
                "outer:",
                "  %gid = phi i64 [ %start, %entry ], [ %gid.next, %outer.latch ]",
                "\n".join(self.lines),
                "  br label %outer.latch",
                "outer.latch:",
                "  %gid.next = add nsw i64 %gid, 1",
                "  %more = icmp slt i64 %gid.next, %end",
                "  br i1 %more, label %outer, label %exit"]),
            "exit:",
            "  ret void",
            "}",
            "",
            f"define void @{name}(ptr %args, i64 %start, i64 %end) #0 {{",
            loads,
            f"  call void @{name}.body({call_args})",
            "  ret void",
            "}",
            "",
            # the whole range in one call, for launches on the calling thread: ctypes converts one
            # argument instead of three (a fair share of the cost of launching a tiny kernel).
            # noinline at the call: the kernel is compiled once, not copied into this wrapper
            f"define void @{name}.all(ptr %args) #0 {{",
            f"  call void @{name}(ptr %args, i64 0, i64 {math.prod(p.global_size)}) #1",
            "  ret void",
            "}",
            "",
        ]

    def _row_loop(self) -> list[str]:
        """The range [start, end) as a loop over rows of `self.row` global ids (%row, from
        start's row to end - 1's) around a loop over the ids of each row inside the range (%col,
        at least one: the first row from start's column, the last up to end's), %gid = %row *
        row + %col. The body reads `gid // row` and `gid % row` (and divisions by multiples of
        the row) off %row and %col (op_idiv, op_mod): the inner loop's loads at %col are then
        contiguous and those at %row invariant, where on the flat gid LLVM's vectorizer took
        `gid % row` for a contiguous load only under a runtime check that the whole range stays
        in one row, which any range longer than a row failed (it ran the scalar loop)."""
        k = self.row
        return [
            "  br i1 %nonempty, label %rows.pre, label %exit",
            "rows.pre:",
            f"  %row.first = udiv i64 %start, {k}",
            "  %last = add nsw i64 %end, -1",
            f"  %row.last = udiv i64 %last, {k}",
            "  br label %rows",
            "rows:",
            "  %row = phi i64 [ %row.first, %rows.pre ], [ %row.next, %rows.latch ]",
            f"  %row.base = mul nsw i64 %row, {k}",
            "  %col.lo.0 = sub nsw i64 %start, %row.base",
            "  %col.lo = call i64 @llvm.smax.i64(i64 %col.lo.0, i64 0)",
            "  %col.hi.0 = sub nsw i64 %end, %row.base",
            f"  %col.hi = call i64 @llvm.smin.i64(i64 %col.hi.0, i64 {k})",
            "  br label %outer",
            "outer:",
            "  %col = phi i64 [ %col.lo, %rows ], [ %col.next, %outer.latch ]",
            "  %gid = add nsw i64 %row.base, %col",
            "\n".join(self.lines),
            "  br label %outer.latch",
            "outer.latch:",
            "  %col.next = add nsw i64 %col, 1",
            "  %more = icmp slt i64 %col.next, %col.hi",
            "  br i1 %more, label %outer, label %rows.latch",
            "rows.latch:",
            "  %row.next = add nsw i64 %row, 1",
            "  %rows.more = icmp ule i64 %row.next, %row.last",
            "  br i1 %rows.more, label %rows, label %exit",
        ]

    def _module_tail(self) -> list[str]:
        """Attributes, loop metadata, and the helper and math functions the kernel calls."""
        t = self.target
        width = f' "prefer-vector-width"="{self.vector_bits}"' if self.vector_bits else ""
        out = [f'attributes #0 = {{ nounwind "target-cpu"="{t.cpu}" "target-features"="{t.features}" '
               f'"no-trapping-math"="true"{width} }}\n',
               "attributes #1 = { noinline }\n"]
        if self.loop_metadata:
            out += ['!999 = !{!"llvm.loop.unroll.disable"}', *self.loop_metadata, ""]
        out += [ipow_definition(ty, unsigned) for ty, unsigned in sorted(self.ipow_types)]
        if self.math:
            out += [mathlib.definitions(self.math), mathlib.ATTRIBUTES]
        out += [f"attributes #{mathlib.call_attribute_group(fn)} = {{ {attrs} }}"
                for fn, attrs in sorted(self.call_attrs.items())]
        return out

    # -- values and control flow
    def op_const(self, inst: Inst) -> str:
        return const_text(inst.arg, REG[inst.dtype])

    def op_param(self, inst: Inst) -> str:
        return f"%p{inst.arg}"

    def op_special(self, inst: Inst) -> str:
        kind_, dim = inst.arg
        if dim == 0 and kind_ in (Special.GLOBAL_ID, Special.GROUP_ID):
            return "%gid"
        return "0"  # local ids (local_size is 1 on cpu) and the unused dims

    def op_range(self, inst: Inst) -> str:
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

    def op_endrange(self, inst: Inst) -> None:
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

    def op_if(self, inst: Inst) -> None:
        k = inst.id
        self.emit(f"br i1 {self.v(inst.srcs[0])}, label %if{k}.t, label %if{k}.e")
        self.label(f"if{k}.t")

    def op_endif(self, inst: Inst) -> None:
        k = inst.srcs[0].id
        self.emit(f"br label %if{k}.e")
        self.label(f"if{k}.e")

    # -- memory: buffers, and workgroup memory (on cpu, local_size 1: a private array per
    #    global id, e.g. the per-lane accumulators of the outer-blocked lowering)
    def op_load(self, inst: Inst) -> str:
        base, index = inst.srcs[:2]
        mem = MEM[inst.dtype]
        ptr = self.value(f"getelementptr inbounds {mem}, ptr {self.v(base)}, i64 {self.v(index)}")
        value = self.value(f"load {mem}, ptr {ptr}, align {SIZE[mem]}")
        if mem != REG[inst.dtype]:  # bool byte -> i1
            value = self.value(f"icmp ne i8 {value}, 0")
        return value

    def op_gated_load(self, inst: Inst) -> str:
        """A branch around the load and a phi of it and 0: nothing is read (the address is not
        even formed) where the gate is false. The loop vectorizer if-converts it into a masked
        load."""
        k = inst.id
        before = self.block
        self.emit(f"br i1 {self.v(inst.srcs[2])}, label %gl{k}.t, label %gl{k}.e")
        self.label(f"gl{k}.t")
        value = self.op_load(inst)
        loaded_in = self.block
        self.emit(f"br label %gl{k}.e")
        self.label(f"gl{k}.e")
        ty = REG[inst.dtype]
        return self.value(f"phi {ty} [ {value}, %{loaded_in} ], [ {const_text(0, ty)}, %{before} ]")

    def op_store(self, inst: Inst) -> None:
        base, index, value = inst.srcs
        mem = MEM[base.dtype]
        ptr = self.value(f"getelementptr inbounds {mem}, ptr {self.v(base)}, i64 {self.v(index)}")
        x = self.v(value)
        if mem != REG[base.dtype]:
            x = self.value(f"zext i1 {x} to i8")
        self.emit(f"store {mem} {x}, ptr {ptr}, align {SIZE[mem]}")

    def op_atomic(self, inst: Inst) -> None:
        base, index, value = inst.srcs
        ty = REG[base.dtype]
        ptr = self.value(f"getelementptr inbounds {ty}, ptr {self.v(base)}, i64 {self.v(index)}")
        rmw = _ATOMIC_RMW[inst.arg] if inst.arg is Op.ADD else ("" if base.dtype.kind == "i" else "u") + _ATOMIC_RMW[inst.arg]
        self.value(f"atomicrmw {rmw} ptr {ptr}, {ty} {self.v(value)} monotonic, align {SIZE[ty]}")

    def op_define_local(self, inst: Inst) -> str:
        slot = f"%local{inst.id}"
        self.allocas.append(f"  {slot} = alloca [{inst.arg} x {MEM[inst.dtype]}], align 64")
        return slot

    op_local_load = op_load
    op_local_store = op_store

    def op_barrier(self, inst: Inst) -> None:
        self.lines.append("  ; barrier (one thread per workgroup on cpu)")

    # -- arithmetic
    def op_alu(self, inst: Inst) -> str:
        op = inst.arg
        if op is Op.WHERE:
            c, a, b = (self.v(s) for s in inst.srcs)
            return self.value(f"select i1 {c}, {REG[inst.dtype]} {a}, {REG[inst.dtype]} {b}")
        ty = REG[inst.srcs[0].dtype]
        args = [self.v(s) for s in inst.srcs]
        if ty == "half":  # numpy computes float16 ops in float32 and rounds the result
            out = alu(self, op, FLOAT, "float", [self.value(f"fpext half {a} to float") for a in args])
            return out if ALU[op].returns_bool else self.value(f"fptrunc float {out} to half")
        return alu(self, op, inst.srcs[0].dtype.kind, ty, args)

    def op_idiv(self, inst: Inst) -> str:  # non-negative dividend, positive divisor
        if self.row and _divides_gid(inst, self.row):   # gid // (m * row) = row // m
            m = inst.srcs[1].arg // self.row
            return "%row" if m == 1 else self._divide("%row", str(m), "udiv")
        return self._index_divide(inst, "udiv")

    def op_mod(self, inst: Inst) -> str:
        if self.row and _divides_gid(inst, self.row):   # gid % (m * row) = (row % m) * row + col
            m = inst.srcs[1].arg // self.row
            if m == 1:
                return "%col"
            high = self.value(f"mul nuw nsw i64 {self._divide('%row', str(m), 'urem')}, {self.row}")
            return self.value(f"add nuw nsw i64 {high}, %col")
        return self._index_divide(inst, "urem")

    def _divide(self, a: str, b: str, op: str) -> str:
        """%row `op` a constant: in 32 bits where the global size fits (see _index_divide)."""
        if _fits_i32(math.prod(self.program.global_size)):
            a32 = self.value(f"trunc i64 {a} to i32")
            return self.value(f"zext i32 {self.value(f'{op} i32 {a32}, {b}')} to i64")
        return self.value(f"{op} i64 {a}, {b}")

    def _index_divide(self, inst: Inst, op: str) -> str:
        """Index / and % (non-negative operands). In 32 bits when both operands are known to fit
        (see index_bound): a vector i64 division by a constant has no instruction and is
        scalarized, while an i32 one is a multiply and shifts (a bias add's `i % n` cost more than
        the rest of its kernel)."""
        a, b = (self.v(s) for s in inst.srcs)
        if all(_fits_i32(index_bound(s, self.program.global_size, self.bounds)) for s in inst.srcs):
            a32, b32 = (str(src.arg) if src.opc is Opc.CONST else self.value(f"trunc i64 {x} to i32")
                        for src, x in zip(inst.srcs, (a, b)))
            return self.value(f"zext i32 {self.value(f'{op} i32 {a32}, {b32}')} to i64")
        return self.value(f"{op} i64 {a}, {b}")

    def op_cast(self, inst: Inst) -> str:
        return convert(self, self.v(inst.srcs[0]), inst.srcs[0].dtype, inst.dtype)

    def op_bitcast(self, inst: Inst) -> str:
        return self.value(f"bitcast {REG[inst.srcs[0].dtype]} {self.v(inst.srcs[0])} to {REG[inst.dtype]}")

    # -- accumulators (half accumulates in float, like numpy's float16 sums)
    def op_define_acc(self, inst: Inst) -> str:
        ty = _acc_ty(inst.dtype)
        slot = f"%acc{inst.id}"
        self.allocas.append(f"  {slot} = alloca {ty}, align {SIZE[ty]}")
        self.emit(f"store {ty} {const_text(inst.arg, ty)}, ptr {slot}, align {SIZE[ty]}")
        return slot

    def op_acc_update(self, inst: Inst) -> None:
        """acc = acc `op` value; float sums and products may be reassociated (ACC_FAST), so
        the loop vectorizes, which a reduction's order allows (see ug_core.ops); a scan's keeps
        the signs of its zeros (ACC_RUNNING)."""
        acc, value = inst.srcs
        ty = _acc_ty(acc.dtype)
        slot = self.v(acc)
        x = self.v(value)
        if REG[acc.dtype] == "half":
            x = self.value(f"fpext half {x} to float")
        cur = self.value(f"load {ty}, ptr {slot}, align {SIZE[ty]}")
        op = inst.arg
        flags = ACC_RUNNING if acc.id in self.running else ACC_FAST
        if (op is Op.ADD and acc.dtype.kind == "f" and ty != "half" and value.opc is Opc.ALU and value.arg is Op.MUL
                and REG[value.dtype] == ty):
            # a sum of products (a dot product, a variance): one fma per element where the target
            # has it; the product's rounding is one of the sum's, whose order is free already
            a, b = (self.v(s) for s in value.srcs)
            new = self.value(f"call {flags} {ty} @llvm.fmuladd.{FSUF[ty]}({ty} {a}, {ty} {b}, {ty} {cur})")
        elif acc.dtype.kind == "f" and op in _ACC_FLOAT:  # reassociable: the loop vectorizes
            new = self.value(f"{_ACC_FLOAT[op]} {flags} {ty} {cur}, {x}")
        else:
            new = alu(self, op, acc.dtype.kind, ty, [cur, x])
        self.emit(f"store {ty} {new}, ptr {slot}, align {SIZE[ty]}")

    def op_acc_read(self, inst: Inst) -> str:
        ty = _acc_ty(inst.dtype)
        value = self.value(f"load {ty}, ptr {self.v(inst.srcs[0])}, align {SIZE[ty]}")
        if REG[inst.dtype] == "half":
            value = self.value(f"fptrunc float {value} to half")
        return value


def _acc_ty(dtype: np.dtype) -> str:
    ty = REG[dtype]
    return "float" if ty == "half" else ty


def _fits_i32(bound: int | None) -> bool:
    return bound is not None and 0 <= bound < 2**31


ROW_MIN = 8
"""_row_length: the shortest row the loop over the global ids is split at (a shorter one leaves its
inner loop too little for a vector; the flat loop's divisions then cost about as much)."""


def _is_gid(inst: Inst) -> bool:
    return inst.opc is Opc.SPECIAL and inst.arg[0] in (Special.GLOBAL_ID, Special.GROUP_ID) and inst.arg[1] == 0


def _divides_gid(inst: Inst, row: int) -> bool:
    """`gid // c` or `gid % c` for a constant c, a multiple of `row`."""
    a, b = inst.srcs
    return _is_gid(a) and b.opc is Opc.CONST and isinstance(b.arg, int) and b.arg > 0 and b.arg % row == 0


def _row_length(program: LoopProgram) -> int:
    """The row length (> 1) at which the loop over the global ids is split into rows (see
    LLVMRenderer._row_loop), 0 for the flat loop: the smallest constant that an elementwise
    program (no loops of its own) divides its global id by or takes it modulo, when that is
    ROW_MIN or more and less than the global size. A broadcast operand (`x + b[None, :]`,
    `a[:, None] * b[None, :]`, arange rows and columns) is read at such an index."""
    if len(program.global_size) != 1 or any(inst.opc is Opc.RANGE for inst in program.instructions):
        return 0
    divisors = [inst.srcs[1].arg for inst in program.instructions
                if inst.opc in (Opc.IDIV, Opc.MOD) and _is_gid(inst.srcs[0]) and inst.srcs[1].opc is Opc.CONST
                and isinstance(inst.srcs[1].arg, int) and inst.srcs[1].arg > 0]
    row = min(divisors, default=0)
    return row if ROW_MIN <= row < program.global_size[0] else 0


def _running_accs(program: LoopProgram) -> set[int]:
    """The accumulators read inside the loop that updates them: a scan's running value, stored
    at every step, so each of its values is a result."""
    depth = 0
    defined: dict[int, int] = {}
    running: set[int] = set()
    for inst in program.instructions:
        if inst.opc in CLOSES:
            depth -= 1
        elif inst.opc is Opc.DEFINE_ACC:
            defined[inst.id] = depth
        elif inst.opc is Opc.ACC_READ and depth > defined.get(inst.srcs[0].id, depth):
            running.add(inst.srcs[0].id)
        if inst.opc in OPENS:
            depth += 1
    return running


def render(program: LoopProgram, name: str, *, noalias: bool = True, triple: str = "", data_layout: str = "",
           cpu: str = "", features: str = "", vector_bits: int = 0) -> str:
    """The LLVM module (text) for one loop program (see LLVMRenderer)."""
    target = LLVMTarget(triple, data_layout, cpu, features)
    return LLVMRenderer(target, noalias, vector_bits).render(program, name)
