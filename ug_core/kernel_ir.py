"""Kernel IR: what one kernel computes, as expression DAGs over index spaces.

Every kernel has the same shape, which covers elementwise kernels, reductions and
"several reductions over one row, then an elementwise output" (softmax, layernorm):

    for each outer index o (the dims not in `axes`; parallel):
        for each reduction r, in order:          # a phase: loop over the `axes` dims
            acc_r = reduce over r.shape[axes] of r.expr   (r.expr may use acc_0..acc_{r-1})
        for each store s:                         # loop over s.shape[axes] (1 = no loop)
            buffer[s.buf][s.view(index)] = s.expr        (may use every acc)

A scan store (`Store.scan`, a kernel with one axis) stores the running value instead, in
order along the axis: acc = identity; for i: acc = combine(acc, s.expr(i)); out[i] = acc
(ops.SCANS; its accumulator is the store's output dtype, float16's float32).
A scatter store (its expression's root is a SCATTER, `Store.scatter`; a kernel with one axis)
fills the outer index's row of the output (rows of `slots`) with an identity, then for i in
order: row[slot(i)] = combine(row[slot(i)], value(i)) (ops.Op.SCATTER).

All index spaces have the kernel's rank n; on the dims not in `axes` they equal `outer`.
A GATHER reads argument `buf` at an element its operand computes (int64, in range: the
scheduler wraps and clamps it). A LOAD reads argument `buf` through a chain of views starting at the phase's index space
(0 where a view's mask rejects the index: nothing is read there); an IOTA is the element
index such a chain reaches (see ops.Op.IOTA);
with a slot, the element index is moved by a runtime offset (kernel_params: the kernel's
`offsets_arg` holds one per slot, so a view's offset is a value, not code).
An ACC is the finished value of a reduction for the current outer index: a reduction is
therefore computed once per row, never once per output element.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from . import dag
from .dtypes import name as dtype_name
from .ops import ALU, REDUCE, Op
from .view import View, ViewChain


class Expr:
    """One node of a kernel expression. Built only through `ExprBuilder`, which interns
    nodes so that equal subexpressions are the same object (computed once)."""

    __slots__ = ("op", "srcs", "arg", "dtype")

    def __init__(self, op: Op, srcs: tuple["Expr", ...], arg: Any, dtype: np.dtype):
        self.op = op
        self.srcs = srcs
        self.arg = arg
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Expr({self.op.name}, {self.dtype.name})"


class ExprBuilder:
    """Interning constructor for Expr: structurally equal nodes are one object."""

    def __init__(self) -> None:
        self._interned: dict[tuple[Any, ...], Expr] = {}

    def make(self, op: Op, srcs: tuple[Expr, ...], arg: Any, dtype: np.dtype) -> Expr:
        key = (op, tuple(id(s) for s in srcs), _hashable(arg), dtype)
        node = self._interned.get(key)
        if node is None:
            node = self._interned[key] = Expr(op, srcs, arg, dtype)
        return node

    def const(self, value: Any, dtype: np.dtype) -> Expr:
        return self.make(Op.CONST, (), dtype.type(value).item(), dtype)

    def load(self, buf: int, chain: ViewChain, dtype: np.dtype, slot: int | None = None) -> Expr:
        """Argument `buf` read through `chain`; with a `slot`, the element index is moved by
        the runtime offset held at that position of the kernel's offsets argument."""
        return self.make(Op.LOAD, (), (buf, chain, slot), dtype)

    def iota(self, chain: ViewChain, dtype: np.dtype, slot: int | None = None) -> Expr:
        """The index vector read through `chain`: the element index the chain reaches, as
        `dtype`, and 0 where a mask of the chain rejects the index; with a `slot`, the element
        index is moved by a runtime offset, as a load's."""
        return self.make(Op.IOTA, (), (chain, slot), dtype)

    def gather(self, buf: int, element: Expr, dtype: np.dtype) -> Expr:
        """Argument `buf` read at element `element` (an int64 expression, in range)."""
        assert element.dtype == np.dtype(np.int64), element.dtype
        return self.make(Op.GATHER, (element,), buf, dtype)

    def scatter(self, op: Op, slot: Expr, value: Expr, slots: int, identity: Any) -> Expr:
        """The root of a scatter store's expression (see ops.Op.SCATTER)."""
        assert slot.dtype == np.dtype(np.int64), slot.dtype
        return self.make(Op.SCATTER, (slot, value), (op, slots, identity), value.dtype)

    def acc(self, index: int, dtype: np.dtype) -> Expr:
        return self.make(Op.ACC, (), index, dtype)

    def alu(self, op: Op, srcs: tuple[Expr, ...], dtype: np.dtype) -> Expr:
        assert op in ALU and ALU[op].arity == len(srcs), op
        return self.make(op, srcs, None, dtype)

    def cast(self, src: Expr, dtype: np.dtype) -> Expr:
        if src.dtype == dtype:
            return src
        if src.op is Op.CONST:   # (a complex one cast to a real dtype: its real part, numpy's cast)
            return self.const(src.arg.real if isinstance(src.arg, complex) and dtype.kind != "c" else src.arg, dtype)
        return self.make(Op.CAST, (src,), dtype, dtype)

    def bitcast(self, src: Expr, dtype: np.dtype) -> Expr:
        return self.make(Op.BITCAST, (src,), dtype, dtype)


def _hashable(arg: Any) -> Any:
    # floats: distinguish 0.0/-0.0 and keep NaN equal to itself
    if isinstance(arg, float):
        return ("f", arg.hex())
    return arg


@dataclass(frozen=True)
class Reduction:
    op: Op                  # a reduction: Op.SUM, Op.RMAX, Op.RMIN or Op.PROD
    shape: tuple[int, ...]  # this phase's index space
    expr: Expr
    dtype: np.dtype


@dataclass(frozen=True)
class Store:
    buf: int                # argument index of the output buffer
    shape: tuple[int, ...]  # this phase's index space
    view: View              # index -> element of the output buffer
    expr: Expr
    slot: int | None = None  # the element index is moved by offsets argument [slot] (see Kernel)
    scan: Op | None = None   # a scan (ops.SCANS: Op.SUM or Op.PROD) of expr along the kernel's one axis

    @property
    def scatter(self) -> Expr | None:
        """The SCATTER root of a scatter store's expression (ops.Op.SCATTER), else None."""
        return self.expr if self.expr.op is Op.SCATTER else None


@dataclass(frozen=True)
class BufferArg:
    dtype: np.dtype
    size: int               # elements
    output: bool


@dataclass(frozen=True)
class Kernel:
    name: str
    args: tuple[BufferArg, ...]
    outer: tuple[int, ...]        # rank n; size 1 on `axes`
    axes: tuple[int, ...]         # the reduced dims, shared by every reduction
    reductions: tuple[Reduction, ...]
    stores: tuple[Store, ...]
    # the argument (an input of int32 or int64 elements) that holds the runtime offsets of the
    # loads and stores with a `slot`: a view's offset is a value, not code, so that `x[i]` for
    # every i is one compiled kernel (see kernel_params)
    offsets_arg: int | None = None

    @property
    def rank(self) -> int:
        return len(self.outer)

    def phases(self) -> Iterator[tuple[str, tuple[int, ...], Expr]]:
        for i, r in enumerate(self.reductions):
            yield f"r{i}", r.shape, r.expr
        for s in self.stores:
            yield f"store b{s.buf}", s.shape, s.expr

    def key(self) -> str:
        """The normalized kernel for the compile cache: buffers are numbered by position and
        the text holds every shape, stride, dtype and constant, but not the name. Kept on the
        kernel after the first call (a kernel is immutable; a schedule's alike kernels are one
        Kernel, see schedule.build.BuildCache, looked up once per item)."""
        key = self.__dict__.get("_key")
        if key is None:
            key = self._text(with_name=False)
            object.__setattr__(self, "_key", key)
        return key

    def __str__(self) -> str:
        return self._text(with_name=True)

    def _text(self, with_name: bool) -> str:
        head = f"kernel {self.name}" if with_name else "kernel"
        lines = [f"{head} outer={self.outer} axes={self.axes}"]
        for i, a in enumerate(self.args):
            lines.append(f"  b{i}: {'out' if a.output else 'in '} {dtype_name(a.dtype)}[{a.size}]")
        names: dict[int, str] = {}
        for i, r in enumerate(self.reductions):
            lines.append(f"  r{i} = {REDUCE[r.op].name} over {r.shape} as {dtype_name(r.dtype)}:")
            lines.extend(_expr_lines(r.expr, names, self))
        for s in self.stores:
            scan = "" if s.scan is None else f" scan {REDUCE[s.scan].name}"
            lines.append(f"  store b{s.buf}{scan} over {s.shape} at {s.view}{_moved(self, s.slot)}:")
            lines.extend(_expr_lines(s.expr, names, self))
        return "\n".join(lines)


def toposort(root: Expr) -> list[Expr]:
    """Nodes of the DAG under `root`, each once, operands before users."""
    return dag.toposort([root], lambda e: e.srcs)


def _moved(kernel: Kernel, slot: int | None) -> str:
    return "" if slot is None else f" + b{kernel.offsets_arg}[{slot}]"


def _expr_lines(root: Expr, names: dict[int, str], kernel: Kernel) -> list[str]:
    lines = []
    local: dict[int, str] = {}
    for node in toposort(root):
        name = f"%{len(names) + len(local)}"
        local[id(node)] = name
        if node.op is Op.LOAD:
            buf, chain, slot = node.arg
            desc = f"load b{buf} " + " -> ".join(str(v) for v in chain) + _moved(kernel, slot)
        elif node.op is Op.CONST:
            desc = f"const {node.arg!r}"
        elif node.op is Op.IOTA:
            chain, slot = node.arg
            desc = "iota " + " -> ".join(str(v) for v in chain) + _moved(kernel, slot)
        elif node.op is Op.ACC:
            desc = f"acc r{node.arg}"
        elif node.op is Op.GATHER:
            desc = f"load b{node.arg}[{local[id(node.srcs[0])]}]"
        elif node.op is Op.SCATTER:
            rop, slots, identity = node.arg
            desc = (f"scatter {REDUCE[rop].name} of {local[id(node.srcs[1])]} into slot {local[id(node.srcs[0])]} "
                    f"of a row of {slots} (from {identity!r})")
        elif node.op is Op.CAST:
            desc = f"cast {local[id(node.srcs[0])]}"
        elif node.op is Op.BITCAST:
            desc = f"bitcast {local[id(node.srcs[0])]}"
        else:
            desc = f"{ALU[node.op].symbol} " + ", ".join(local[id(s)] for s in node.srcs)
        lines.append(f"    {name} = {desc} : {dtype_name(node.dtype)}")
    lines.append(f"    yield {local[id(root)]}")
    names.update({k: v for k, v in local.items()})
    return lines
