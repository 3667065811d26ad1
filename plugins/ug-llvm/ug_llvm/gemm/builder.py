"""Structured IR emission for the gemm's functions: loops, branches and shared work counters as
context managers over the numbered values of render_ir.IRBuilder."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from ..render_ir import IRBuilder
from .config import FIELD, POINTER_FIELDS, GemmConfig


class Builder(IRBuilder):
    fields: dict[str, int] = FIELD   # the context's field indices (`units` reads two of them)

    def __init__(self, md_base: int) -> None:
        super().__init__(stem="%v")
        self.md_base = md_base          # numbers of this function's metadata nodes start here
        self.metadata: list[str] = []   # the loops' !llvm.loop nodes

    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"

    def smin(self, x: str, limit: str | int) -> str:
        """min(x, limit) of i64 values."""
        below = self.value(f"icmp slt i64 {x}, {limit}")
        return self.value(f"select i1 {below}, i64 {x}, i64 {limit}")

    def ctx_loads(self, names: list[str]) -> dict[str, str]:
        """The named fields of the context `%ctx` (see config.CTX_FIELDS)."""
        out = {}
        for name in names:
            p = self.value(f"getelementptr inbounds i64, ptr %ctx, i64 {FIELD[name]}")
            out[name] = self.value(f"load {'ptr' if name in POINTER_FIELDS else 'i64'}, ptr {p}, align 8")
        return out

    def packed_b_slot(self, local: str, batch: str) -> str:
        """Which packed B a batch entry's rows go to (pack_b) and come from (row_blocks): its own
        (all entries packed first), or, batch by batch (`b_local`), the thread's."""
        is_local = self.value(f"icmp ne i64 {local}, 0")
        return self.value(f"select i1 {is_local}, i64 %tid, i64 {batch}")

    def row_offset(self, table: str, row: str, stride: str) -> str:
        """The offset of an operand's row `row`: table[row] where the operand has a row table (a
        split operand: its rows are a flattening of dims no single stride walks, see
        problem.Problem), else row * stride."""
        name = self.fresh("R")
        has = self.value(f"icmp ne ptr {table}, null")
        self.emit(f"br i1 {has}, label %{name}.table, label %{name}.stride")
        self.label(f"{name}.table")
        at = self.value(f"getelementptr inbounds i64, ptr {table}, i64 {row}")
        looked = self.value(f"load i64, ptr {at}, align 8")
        self.emit(f"br label %{name}.join")
        self.label(f"{name}.stride")
        times = self.value(f"mul nsw i64 {row}, {stride}")
        self.emit(f"br label %{name}.join")
        self.label(f"{name}.join")
        return self.value(f"phi i64 [ {looked}, %{name}.table ], [ {times}, %{name}.stride ]")

    def load_widened(self, cfg: GemmConfig, base: str, offset: str, lanes: int = 1) -> str:
        """`lanes` elements of A's or B's dtype at base[offset] (any alignment), as the compute
        type (float16 operands are multiplied in float32)."""
        src, t = (cfg.src, cfg.t) if lanes == 1 else (f"<{lanes} x {cfg.src}>", f"<{lanes} x {cfg.t}>")
        p = self.value(f"getelementptr {cfg.src}, ptr {base}, i64 {offset}")
        x = self.value(f"load {src}, ptr {p}, align {cfg.source.itemsize}")
        return x if src == t else self.value(f"fpext {src} {x} to {t}")

    def function(self, name: str) -> str:
        """The text of `void name(ptr %ctx, i64 %units, i64 %chunk, i64 %tid)` with the body
        built so far, and its loops' metadata."""
        head = f"define void @{name}(ptr %ctx, i64 %units, i64 %chunk, i64 %tid) #0 {{\nentry:"
        return head + "\n" + "\n".join(self.lines) + "\n}\n" + "\n".join(self.metadata)

    @contextmanager
    def loop(self, start: str, end: str, step: str = "1", vectorizable: bool = False) -> Iterator[str]:
        """for (i = start; i < end; i += step) — yields i. The loop carries metadata that keeps
        LLVM's loop vectorizer off it (the gemm's loops are vectorized by hand), unless
        `vectorizable` (the attention kernel's softmax loops over its queries)."""
        name = self.fresh("L")
        pred = self.block
        self.emit(f"br label %{name}.head")
        self.label(f"{name}.head")
        i = f"%{name}.i"
        self.lines.append(f"  {i} = phi i64 [ {start}, %{pred} ], [ %{name}.next, %{name}.latch ]")
        self.emit(f"%{name}.c = icmp slt i64 {i}, {end}")
        self.emit(f"br i1 %{name}.c, label %{name}.body, label %{name}.exit")
        self.label(f"{name}.body")
        yield i
        self.emit(f"br label %{name}.latch")
        self.label(f"{name}.latch")
        self.emit(f"%{name}.next = add nsw i64 {i}, {step}")
        if vectorizable:
            self.emit(f"br label %{name}.head")
            self.label(f"{name}.exit")
            return
        md = self.md_base + self.n
        self.n += 1
        self.emit(f"br label %{name}.head, !llvm.loop !{md}")
        self.metadata.append(f"!{md} = distinct !{{!{md}, !90, !91}}")
        self.label(f"{name}.exit")

    @contextmanager
    def units(self, next_field: str, done_field: str) -> Iterator[str]:
        """Yields each unit u the thread takes of the function's `%units`, `%chunk` at a time:
        while ((s = atomic_fetch_add(ctx.next, chunk)) < units) { for (u = s; u < e; u++) body(u),
        e = min(s + chunk, units); atomic_fetch_add(ctx.done, e - s) }. The threads running this
        share the units through the counter, so a thread that is slowed down (a busy core on a
        shared machine) simply takes fewer; `done` counts the finished units (released: what the
        body wrote is visible to whoever reads the count, see pool.wait_until_ir)."""
        counter = self.value(f"getelementptr inbounds i64, ptr %ctx, i64 {self.fields[next_field]}")
        done = self.value(f"getelementptr inbounds i64, ptr %ctx, i64 {self.fields[done_field]}")
        total, chunk = "%units", "%chunk"
        name = self.fresh("C")
        self.emit(f"br label %{name}.head")
        self.label(f"{name}.head")
        start = f"%{name}.s"
        self.emit(f"{start} = atomicrmw add ptr {counter}, i64 {chunk} monotonic, align 8")
        self.emit(f"%{name}.more = icmp slt i64 {start}, {total}")
        self.emit(f"br i1 %{name}.more, label %{name}.take, label %{name}.exit")
        self.label(f"{name}.take")
        end = self.smin(self.value(f"add nsw i64 {start}, {chunk}"), total)
        with self.loop(start, end) as u:
            yield u
        finished = self.value(f"sub nsw i64 {end}, {start}")
        self.emit(f"%{name}.d = atomicrmw add ptr {done}, i64 {finished} release, align 8")
        self.emit(f"br label %{name}.head")
        self.label(f"{name}.exit")

    @contextmanager
    def branch(self, cond: str) -> Iterator["Else"]:
        """if (cond) { body } else { otherwise.body }: side effects only (no values flow out)."""
        name = self.fresh("B")
        self.emit(f"br i1 {cond}, label %{name}.then, label %{name}.else")
        self.label(f"{name}.then")
        other = Else(self, name)
        yield other
        if not other.done:
            self.emit(f"br label %{name}.join")
            self.label(f"{name}.else")
            self.emit(f"br label %{name}.join")
        self.label(f"{name}.join")


class Else:
    def __init__(self, b: Builder, name: str):
        self.b, self.name, self.done = b, name, False

    @contextmanager
    def otherwise(self) -> Iterator[None]:
        self.b.emit(f"br label %{self.name}.join")
        self.b.label(f"{self.name}.else")
        yield
        self.b.emit(f"br label %{self.name}.join")
        self.done = True
