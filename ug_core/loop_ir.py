"""Loop IR: what every backend renders. A flat list of typed, SSA-style instructions.

`ug_core.lower` turns a kernel (expression DAGs over index spaces, see kernel_ir) into a
`LoopProgram`; each backend (LLVM, SPIR-V, CUDA C) only translates instructions one by one.
The IR is deliberately explicit so that rendering needs no analysis:

* Every instruction that produces a value is that value (SSA): operands are earlier
  instructions. A value is visible from its definition to the end of the block that
  holds it; a block is the body of a RANGE ... ENDRANGE or IF ... ENDIF.
* Index math is int64 (`INDEX`): CONST, ALU (ADD, MUL, MIN, CMPLT, ...), IDIV and MOD.
  IDIV and MOD see a positive constant divisor and, wherever their result is used, a
  non-negative dividend, so C-style truncation and floor semantics agree. (Past a masked
  view, an index that its mask rejects may be negative; what IDIV / MOD make of it then only
  feeds a GATED_LOAD's index, whose gate is false there. A renderer must not trap on it.)
* The only mutable state besides the buffers is an accumulator register (DEFINE_ACC,
  updated by ACC_UPDATE, read by ACC_READ) and workgroup shared memory (DEFINE_LOCAL).
  So there are no phi nodes: a renderer maps an accumulator to a variable (C), an
  alloca (LLVM; mem2reg promotes it) or a Function-storage OpVariable (SPIR-V).
* Launch geometry is static: `global_size` workgroups (up to 3 dims) of `local_size`
  threads. SPECIAL reads group_id / local_id / global_id (= group_id * local_size +
  local_id) of one dim. A CPU program has local_size (1,) and uses global_id(0) only:
  the backend splits that range over its threads however it likes.
* BARRIER synchronizes the threads of a workgroup (and makes shared-memory writes
  visible). The lowering only places it where control flow is uniform across the
  workgroup: never inside a RANGE, only inside IFs whose condition is the same for
  every thread of the workgroup.

Opcodes (operands in parentheses, `arg` after the semicolon):

    CONST        (; python scalar)                  a constant of `dtype`
    PARAM        (; argument index)                 pointer to buffer argument i; dtype = element dtype
    SPECIAL      (; (Special, dim))                 int64 thread / workgroup id
    RANGE        (start, end; step)                 int64 counter of `for i in range(start, end, step)`, step > 0
    ENDRANGE     (range)                            closes the loop body
    IF           (cond)                             cond is bool
    ENDIF        (if)                               closes the IF body
    LOAD         (param, index)                     param[index]
    GATED_LOAD   (param, index, gate)               param[index] if gate (bool) else 0 (False); where
                                                    the gate is false nothing is read, and `index`
                                                    may be anything (a masked view's, see view.py)
    STORE        (param, index, value)              param[index] = value
    ATOMIC       (param, index, value; ops.Op)      param[index] = combine(param[index], value) as one
                                                    atomic step (relaxed order): ADD, MAX or MIN of
                                                    32- or 64-bit ints, where the target has them
                                                    (LowerOptions.atomic_int_bits); exact, so the
                                                    order of a kernel's updates does not matter
    ALU          (srcs...; ops.Op)                  elementwise math, numpy semantics in `dtype`
    IDIV, MOD    (a, b)                             int64 a // b, a % b
    CAST         (x)                                convert to `dtype`
    BITCAST      (x)                                the bits of x read as `dtype` (same width, no
                                                    bool); lets the core's math library
                                                    (ug_core.mathlib) build and take apart floats
    DEFINE_ACC   (; init scalar)                    an accumulator register holding `init`
    ACC_UPDATE   (acc, value; ops.Op ADD/MAX/MIN)   acc = combine(acc, value)
    ACC_READ     (acc)                              the register's current value
    DEFINE_LOCAL (; n elements)                     workgroup shared array of `dtype`
    LOCAL_LOAD   (local, index)                     local[index]
    LOCAL_STORE  (local, index, value)              local[index] = value
    BARRIER      ()                                 workgroup barrier (memory + execution)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .ops import ALU, Op, check_exhaustive

INDEX = np.dtype(np.int64)
BOOL = np.dtype(bool)
_PARTS = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}


class Opc(enum.Enum):
    CONST = enum.auto()
    PARAM = enum.auto()
    SPECIAL = enum.auto()
    RANGE = enum.auto()
    ENDRANGE = enum.auto()
    IF = enum.auto()
    ENDIF = enum.auto()
    LOAD = enum.auto()
    GATED_LOAD = enum.auto()
    STORE = enum.auto()
    ATOMIC = enum.auto()
    ALU = enum.auto()
    IDIV = enum.auto()
    MOD = enum.auto()
    CAST = enum.auto()
    BITCAST = enum.auto()
    DEFINE_ACC = enum.auto()
    ACC_UPDATE = enum.auto()
    ACC_READ = enum.auto()
    DEFINE_LOCAL = enum.auto()
    LOCAL_LOAD = enum.auto()
    LOCAL_STORE = enum.auto()
    BARRIER = enum.auto()


class Special(enum.Enum):
    GROUP_ID = "group_id"    # workgroup index in [0, global_size[dim])
    LOCAL_ID = "local_id"    # thread index in its workgroup, [0, local_size[dim])
    GLOBAL_ID = "global_id"  # group_id * local_size[dim] + local_id


# the ops an ACC_UPDATE may combine with (the reductions' combine ops)
ACC_COMBINE = frozenset({Op.ADD, Op.MUL, Op.MAX, Op.MIN})
# the ops an ATOMIC may combine with
ATOMIC_COMBINE = frozenset({Op.ADD, Op.MAX, Op.MIN})

# instructions that produce no value
NO_VALUE = frozenset({Opc.ENDRANGE, Opc.ENDIF, Opc.STORE, Opc.ATOMIC, Opc.ACC_UPDATE, Opc.LOCAL_STORE, Opc.BARRIER})
# instructions that open / close a block
OPENS = {Opc.RANGE: Opc.ENDRANGE, Opc.IF: Opc.ENDIF}
CLOSES = frozenset(OPENS.values())
# pure instructions: no side effect, result depends only on operands (safe to CSE and hoist)
PURE = frozenset({Opc.CONST, Opc.PARAM, Opc.SPECIAL, Opc.ALU, Opc.IDIV, Opc.MOD, Opc.CAST, Opc.BITCAST})


class Inst:
    """One instruction; if it produces a value, it *is* that value (SSA)."""

    __slots__ = ("opc", "dtype", "srcs", "arg", "id")

    def __init__(self, opc: Opc, dtype: np.dtype | None, srcs: tuple["Inst", ...] = (), arg: Any = None):
        self.opc = opc
        # the value's dtype; None only for the instructions that make no value (NO_VALUE), which
        # nothing reads a dtype from: typed as a dtype so that every value's use needs no check
        self.dtype: np.dtype = dtype  # type: ignore[assignment]
        self.srcs = srcs
        self.arg = arg
        self.id = -1  # position-based name, set when the program is finalized

    def __repr__(self) -> str:
        return f"Inst({self.opc.name}, %{self.id}, {self.dtype.name if self.dtype is not None else '-'})"


def _fmt_arg(inst: Inst) -> str:
    """The text of an instruction after its result name; one case per opcode."""
    ops = ", ".join(f"%{s.id}" for s in inst.srcs)
    return _FORMAT[inst.opc](inst, ops)


def _fmt_const(inst: Inst, ops: str) -> str:
    return f"const {inst.arg!r}"


def _fmt_special(inst: Inst, ops: str) -> str:
    kind, dim = inst.arg
    return f"special {kind.value}.{dim}"


def _fmt_range(inst: Inst, ops: str) -> str:
    start, end = inst.srcs
    return f"range %{start.id} .. %{end.id} step {inst.arg}"


_FORMAT = {
    Opc.CONST: _fmt_const,
    Opc.PARAM: lambda i, ops: f"param {i.arg}",
    Opc.SPECIAL: _fmt_special,
    Opc.RANGE: _fmt_range,
    Opc.ENDRANGE: lambda i, ops: f"endrange {ops}",
    Opc.IF: lambda i, ops: f"if {ops}",
    Opc.ENDIF: lambda i, ops: "endif",
    Opc.LOAD: lambda i, ops: f"load {ops}",
    Opc.GATED_LOAD: lambda i, ops: f"gated_load {ops}",
    Opc.STORE: lambda i, ops: f"store {ops}",
    Opc.ATOMIC: lambda i, ops: f"atomic.{i.arg.name.lower()} {ops}",
    Opc.ALU: lambda i, ops: f"{i.arg.name.lower()} {ops}",
    Opc.IDIV: lambda i, ops: f"idiv {ops}",
    Opc.MOD: lambda i, ops: f"mod {ops}",
    Opc.CAST: lambda i, ops: f"cast {ops}",
    Opc.BITCAST: lambda i, ops: f"bitcast {ops}",
    Opc.DEFINE_ACC: lambda i, ops: f"define_acc {i.arg!r}",
    Opc.ACC_UPDATE: lambda i, ops: f"acc_update.{i.arg.name.lower()} {ops}",
    Opc.ACC_READ: lambda i, ops: f"acc_read {ops}",
    Opc.DEFINE_LOCAL: lambda i, ops: f"define_local [{i.arg}]",
    Opc.LOCAL_LOAD: lambda i, ops: f"local_load {ops}",
    Opc.LOCAL_STORE: lambda i, ops: f"local_store {ops}",
    Opc.BARRIER: lambda i, ops: "barrier",
}
check_exhaustive(_FORMAT, Opc, "loop_ir printer")  # type: ignore[arg-type]


def index_bound(inst: Inst, global_size: tuple[int, ...], memo: dict[int, int | None] | None = None) -> int | None:
    """The largest value an index instruction can take in a program of `global_size` (None:
    unknown). Index values are never negative: global ids are below the global size, loop
    indices below their end, `%` below its divisor, `//` at most its dividend. `memo` (by
    instruction id) spares walking shared operands again."""
    if memo is not None and inst.id in memo:
        return memo[inst.id]
    bound: int | None = None
    if inst.opc is Opc.CONST and isinstance(inst.arg, int) and inst.arg >= 0:
        bound = inst.arg  # (a negative constant could make a sum's bound too low: unknown)
    elif inst.opc is Opc.SPECIAL:
        kind, dim = inst.arg
        if kind in (Special.GLOBAL_ID, Special.GROUP_ID) and dim < len(global_size):
            bound = global_size[dim] - 1
        elif kind is Special.LOCAL_ID:
            bound = 0
    elif inst.opc is Opc.RANGE:
        end = index_bound(inst.srcs[1], global_size, memo)
        bound = None if end is None else end - 1
    elif inst.opc is Opc.MOD:
        divisor = index_bound(inst.srcs[1], global_size, memo)
        bound = None if divisor is None else divisor - 1
    elif inst.opc is Opc.IDIV:
        bound = index_bound(inst.srcs[0], global_size, memo)
    elif inst.opc is Opc.ALU and inst.dtype == INDEX and inst.arg in (Op.ADD, Op.MUL, Op.MIN, Op.MAX):
        parts = [index_bound(x, global_size, memo) for x in inst.srcs]
        known = [x for x in parts if x is not None]
        if inst.arg is Op.MIN and known:
            bound = min(known)
        elif len(known) == len(parts):
            if inst.arg is Op.ADD:
                bound = known[0] + known[1]
            elif inst.arg is Op.MUL:
                bound = known[0] * known[1]
            elif inst.arg is Op.MAX:
                bound = max(known)
    if memo is not None:
        memo[inst.id] = bound
    return bound


@dataclass(frozen=True)
class ParamSpec:
    dtype: np.dtype
    is_output: bool
    size: int  # elements


@dataclass
class LoopProgram:
    name: str
    target: str                          # "cpu" or "gpu"
    params: tuple[ParamSpec, ...]        # in the kernel's argument order
    global_size: tuple[int, ...]         # workgroups per dim; a product of 0 means "launch nothing"
    local_size: tuple[int, ...]          # threads per workgroup per dim (same rank as global_size)
    instructions: list[Inst] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not self.instructions or any(g == 0 for g in self.global_size)

    def __str__(self) -> str:
        params = ", ".join(f"b{i}: {'out' if p.is_output else 'in'} {p.dtype.name}[{p.size}]"
                           for i, p in enumerate(self.params))
        lines = [f"program {self.name} target={self.target} global={self.global_size} "
                 f"local={self.local_size}", f"  params: {params}"]
        depth = 1
        for inst in self.instructions:
            if inst.opc in CLOSES:
                depth -= 1
            text = _fmt_arg(inst)
            if inst.dtype is not None and inst.opc not in NO_VALUE:
                text = f"%{inst.id} = {text} : {inst.dtype.name}"
            lines.append("  " * depth + text)
            if inst.opc in OPENS:
                depth += 1
        return "\n".join(lines)

    def verify(self) -> None:
        """Check structure and types; raises AssertionError with the offending instruction."""
        verify(self)


def _check(cond: bool, inst: Inst, why: str) -> None:
    if not cond:
        raise AssertionError(f"loop IR: {why}: %{inst.id} {_fmt_arg(inst)}")


def _sig_none(inst: Inst) -> None:
    _check(len(inst.srcs) == 0, inst, "takes no operands")


def _sig_special(inst: Inst) -> None:
    _sig_none(inst)
    kind, dim = inst.arg
    _check(isinstance(kind, Special) and 0 <= dim < 3 and inst.dtype == INDEX, inst, "bad special")


def _sig_index_ops(inst: Inst) -> None:
    _check(all(s.dtype == INDEX for s in inst.srcs) and inst.dtype == INDEX, inst, "index op on non-int64")


def _sig_range(inst: Inst) -> None:
    _check(len(inst.srcs) == 2 and isinstance(inst.arg, int) and inst.arg > 0, inst, "bad range")
    _sig_index_ops(inst)


def _sig_if(inst: Inst) -> None:
    _check(len(inst.srcs) == 1 and inst.srcs[0].dtype == BOOL, inst, "IF needs one bool operand")


def _sig_close(opener: Opc):
    why = f"must close a {opener.name}"

    def check(inst: Inst) -> None:
        _check(len(inst.srcs) == 1 and inst.srcs[0].opc is opener, inst, why)
    return check


def _sig_memory(base: Opc, has_value: bool):
    why = f"needs a {base.name} and an int64 index"

    def check(inst: Inst) -> None:
        _check(len(inst.srcs) == 2 + has_value, inst, "operand count")
        _check(inst.srcs[0].opc is base and inst.srcs[1].dtype == INDEX, inst, why)
        elem = inst.srcs[0].dtype
        if has_value:
            _check(inst.srcs[2].dtype == elem, inst, "stored value dtype differs from the memory's")
        else:
            _check(inst.dtype == elem, inst, "loaded dtype differs from the memory's")
    return check


def _sig_gated_load(inst: Inst) -> None:
    _check(len(inst.srcs) == 3, inst, "operand count")
    param, index, gate = inst.srcs
    _check(param.opc is Opc.PARAM and index.dtype == INDEX and gate.dtype == BOOL, inst,
           "needs a PARAM, an int64 index and a bool gate")
    _check(inst.dtype == param.dtype, inst, "loaded dtype differs from the memory's")


def _sig_alu(inst: Inst) -> None:
    _check(inst.arg in ALU and ALU[inst.arg].arity == len(inst.srcs), inst, "bad ALU op / arity")
    if ALU[inst.arg].returns_bool:
        _check(inst.dtype == BOOL, inst, "comparison must return bool")
    if inst.arg is Op.WHERE:
        _check(inst.srcs[0].dtype == BOOL and inst.srcs[1].dtype == inst.srcs[2].dtype == inst.dtype, inst, "bad where")
        return
    if inst.arg in (Op.REAL, Op.IMAG):   # complex -> its part dtype
        _check(inst.srcs[0].dtype in _PARTS and inst.dtype == _PARTS[inst.srcs[0].dtype], inst, "bad complex part")
        return
    if inst.arg is Op.COMPLEX:           # two parts of one float dtype -> its complex dtype
        _check(inst.dtype in _PARTS and inst.srcs[0].dtype == inst.srcs[1].dtype == _PARTS[inst.dtype], inst,
               "bad complex")
        return
    # no implicit conversions: operands share one dtype, which is also the result's (but for comparisons)
    first = inst.srcs[0].dtype
    _check(all(s.dtype == first for s in inst.srcs), inst, "operands of different dtypes")
    _check(ALU[inst.arg].returns_bool or inst.dtype == first, inst, "result dtype differs from the operands'")


def _sig_bitcast(inst: Inst) -> None:
    _check(len(inst.srcs) == 1, inst, "bitcast takes one operand")
    src = inst.srcs[0].dtype
    _check(src != BOOL and inst.dtype != BOOL and src.itemsize == inst.dtype.itemsize, inst,
           "bitcast needs two non-bool dtypes of one width")


def _sig_acc_update(inst: Inst) -> None:
    acc, value = inst.srcs
    _check(acc.opc is Opc.DEFINE_ACC and value.dtype == acc.dtype and inst.arg in ACC_COMBINE, inst, "bad acc update")


def _sig_atomic(inst: Inst) -> None:
    _sig_memory(Opc.PARAM, has_value=True)(inst)
    _check(inst.arg in ATOMIC_COMBINE and inst.srcs[0].dtype.kind in "iu" and inst.srcs[0].dtype.itemsize in (4, 8),
           inst, "an atomic adds, maxes or mins 32- or 64-bit ints")


def _sig_acc_read(inst: Inst) -> None:
    _check(len(inst.srcs) == 1 and inst.srcs[0].opc is Opc.DEFINE_ACC and inst.dtype == inst.srcs[0].dtype,
           inst, "bad acc read")


_SIGNATURES = {
    Opc.CONST: _sig_none,
    Opc.PARAM: _sig_none,
    Opc.SPECIAL: _sig_special,
    Opc.RANGE: _sig_range,
    Opc.ENDRANGE: _sig_close(Opc.RANGE),
    Opc.IF: _sig_if,
    Opc.ENDIF: _sig_close(Opc.IF),
    Opc.LOAD: _sig_memory(Opc.PARAM, has_value=False),
    Opc.GATED_LOAD: _sig_gated_load,
    Opc.STORE: _sig_memory(Opc.PARAM, has_value=True),
    Opc.ATOMIC: _sig_atomic,
    Opc.ALU: _sig_alu,
    Opc.IDIV: _sig_index_ops,
    Opc.MOD: _sig_index_ops,
    Opc.CAST: lambda inst: _check(len(inst.srcs) == 1, inst, "cast takes one operand"),
    Opc.BITCAST: _sig_bitcast,
    Opc.DEFINE_ACC: _sig_none,
    Opc.ACC_UPDATE: _sig_acc_update,
    Opc.ACC_READ: _sig_acc_read,
    Opc.DEFINE_LOCAL: lambda inst: _check(not inst.srcs and isinstance(inst.arg, int) and inst.arg > 0, inst, "bad local"),
    Opc.LOCAL_LOAD: _sig_memory(Opc.DEFINE_LOCAL, has_value=False),
    Opc.LOCAL_STORE: _sig_memory(Opc.DEFINE_LOCAL, has_value=True),
    Opc.BARRIER: _sig_none,
}
check_exhaustive(_SIGNATURES, Opc, "loop_ir verifier")  # type: ignore[arg-type]


def verify(program: LoopProgram) -> None:
    """Every operand is defined earlier in an enclosing block; blocks nest; operand types fit;
    barriers are never inside a loop."""
    visible: list[set[int]] = [set()]   # ids of instructions visible in each open block
    open_blocks: list[Inst] = []
    for pos, inst in enumerate(program.instructions):
        _check(inst.id == pos, inst, f"id {inst.id} is not its position {pos}")
        for src in inst.srcs:
            if not any(id(src) in block for block in visible):
                _check(False, inst, f"operand %{src.id} not visible here")
        _SIGNATURES[inst.opc](inst)
        if inst.opc is Opc.BARRIER:
            _check(all(b.opc is not Opc.RANGE for b in open_blocks), inst, "barrier inside a loop")
        if inst.opc in CLOSES:
            _check(bool(open_blocks) and inst.srcs[0] is open_blocks[-1], inst, "closes the wrong block")
            open_blocks.pop()
            visible.pop()
        if inst.opc in OPENS:
            open_blocks.append(inst)
            visible.append({id(inst)})  # the RANGE counter is visible in its body only
        else:
            visible[-1].add(id(inst))
    if open_blocks:
        raise AssertionError(f"loop IR: unclosed block %{open_blocks[-1].id}")
    n_dims = len(program.global_size)
    if not (1 <= n_dims <= 3 and len(program.local_size) == n_dims):
        raise AssertionError(f"loop IR: bad launch geometry {program.global_size} x {program.local_size}")
