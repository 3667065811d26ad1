"""Lowering: kernel IR (expressions over index spaces) -> loop IR (explicit loops and indices).

Shared by every backend; the backends only render the resulting `LoopProgram`.

The kernel's shape (see kernel_ir): for each outer index, the reductions run in order,
each over its phase's reduced extent, then each store runs over its own reduced extent.
The *outer index* is the linear index over the non-reduced dims; the *reduced index* of
a phase is the linear index over its reduced dims (the kernel's `axes`), row-major.

Strategies (which thread does what):

* cpu: one parallel index `global_id(0)` per outer index (global_size=(prod(outer),),
  local_size=(1,)); the backend splits that range over its threads. Each reduction is a
  serial loop with an accumulator; a long float sum is accumulated in blocks of
  `sum_block` elements (a partial sum per block, added into the total; past 32 blocks, into
  a partial per 32 blocks, and so on) so that its rounding error grows with the block and
  group sizes, not the number of elements.
* cpu, outer-blocked (option `outer_block` = B > 1, chosen when the kernel's loads read the
  reduced dims with a large stride but consecutive outer indices contiguously, e.g. a column
  sum): each global id runs B consecutive outer indices (the last one fewer), with one
  accumulator per index in a small array (DEFINE_LOCAL, B elements, private to the global
  id on cpu). The loop over the B indices is innermost in every phase:
  `for r in reduced: for b in block: acc[b] = combine(acc[b], x[r, o + b])`, so it reads
  memory contiguously and the backend vectorizes it; later phases read acc[b].
* gpu, thread per outer index (every phase's reduced extent is at most
  `gpu_serial_max_extent`, e.g. elementwise kernels): a flat global index
  group * local_size + local_id with a bounds check, then the same serial code as cpu.
* gpu, workgroup per outer index (long reductions): the workgroup's threads stride over
  the reduced extent (i = local_id, local_id + L, ...), each with a partial accumulator;
  partials are combined by a tree reduction in shared memory, and the result is read
  back by every thread, so later phases and stores can use it; they again stride over
  their extent. A thread's long float sum is blocked as on cpu.

`x ** c` for a constant c in {0, 0.5, 1..8} (and -1..-4 for floats) is multiplies (and a
reciprocal, or a sqrt) instead of POW (see _pow_by_multiplies).

Accumulators have the reduction's dtype, except float16 sums, which accumulate in
float32 (and are cast back once at the end).

Index math is int64: the outer / reduced linear index is unravelled into per-dim
indices with IDIV / MOD only where a view needs them (runs of dims that a view reads
contiguously are taken from the linear index in one piece), multiplications by stride 0
and dims of size 1 disappear, constants fold, and identical pure instructions are
computed once per block (CSE) and hoisted out of loops they do not depend on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from . import dtypes
from .kernel_ir import Expr, Kernel, Reduction, Store, toposort
from .loop_ir import ACC_COMBINE, BOOL, INDEX, OPENS, PURE, Inst, LoopProgram, Opc, ParamSpec, Special
from .ops import ALU, LEAVES, REDUCE, Op, check_exhaustive
from .view import View, ViewChain, prod


@dataclass(frozen=True)
class LowerOptions:
    target: str = "cpu"                    # "cpu" or "gpu"
    local_size: int = 256                  # gpu: threads per workgroup (an upper bound; small rows use fewer)
    max_global_size: tuple[int, int, int] = (65535, 65535, 65535)  # gpu: workgroups per dim (Vulkan's guaranteed minimum)
    sum_block: int = 1024                  # cpu/serial: float sums longer than this accumulate per block
    gpu_serial_max_extent: int = 16        # gpu: reduced extents up to this run serially, one thread per outer index
    outer_block: int = 0                   # cpu: B > 1 enables the outer-blocked strategy where loads favour it
    outer_block_always: bool = False       # cpu: use it whenever B > 1 and there is a reduction (tests)

    def __post_init__(self) -> None:
        if self.target not in ("cpu", "gpu"):
            raise ValueError(f"unknown lowering target {self.target!r}")
        if self.local_size < 1 or self.sum_block < 1 or self.outer_block < 0 or not 1 <= len(self.max_global_size) <= 3:
            raise ValueError(f"bad lowering options {self}")


def lower(kernel: Kernel, opts: LowerOptions = LowerOptions()) -> LoopProgram:
    """The loop program computing `kernel` for `opts.target`."""
    return _Lowerer(kernel, opts).run()


# --- the instruction builder: scoped CSE, constant folding, hoisting -----------------------


def _key_arg(arg: Any) -> Any:
    # floats: distinguish 0.0 / -0.0 and keep NaN equal to itself
    if isinstance(arg, float):
        return ("f", arg.hex())
    return arg


class _Scope:
    """An open block: its instructions so far (nested blocks appear when they close) and
    the pure instructions placed in it, by structural key, for CSE."""

    def __init__(self, opener: Inst | None):
        self.opener = opener
        self.items: list[Inst | tuple[Inst, list, Inst]] = []
        self.cache: dict[tuple, Inst] = {}


class _Builder:
    """Emits instructions into nested blocks.

    A pure instruction goes into the innermost block that holds one of its operands
    (so loop-invariant math lands before the loop), but never above an open IF (the
    condition may be what makes it meaningful). It is appended there right away; since
    a nested block is only appended to its parent when it closes, the hoisted
    instruction lands before the loop that needed it."""

    def __init__(self) -> None:
        self.scopes: list[_Scope] = [_Scope(None)]
        self.level: dict[int, int] = {}  # id(inst) -> index of the scope holding it

    # -- core
    def emit(self, opc: Opc, dtype: np.dtype | None, srcs: tuple[Inst, ...] = (), arg: Any = None) -> Inst:
        if opc in PURE:
            key = (opc, dtype, tuple(id(s) for s in srcs), _key_arg(arg))
            for scope in reversed(self.scopes):
                found = scope.cache.get(key)
                if found is not None:
                    return found
            level = self._pure_level(srcs)
        else:
            level = len(self.scopes) - 1
        inst = Inst(opc, dtype, srcs, arg)
        scope = self.scopes[level]
        scope.items.append(inst)
        self.level[id(inst)] = level
        if opc in PURE:
            scope.cache[key] = inst
        return inst

    def _pure_level(self, srcs: tuple[Inst, ...]) -> int:
        if not srcs:
            return 0
        floor = max((i for i, s in enumerate(self.scopes) if s.opener is not None and s.opener.opc is Opc.IF), default=0)
        return max(floor, *(self.level[id(s)] for s in srcs))

    def load(self, param: Inst, index: Inst, dtype: np.dtype, read_only: bool) -> Inst:
        """A LOAD; loads of a buffer the kernel never writes are reused while visible."""
        if not read_only:
            return self.emit(Opc.LOAD, dtype, (param, index))
        key = (Opc.LOAD, dtype, id(param), id(index))
        for scope in reversed(self.scopes):
            found = scope.cache.get(key)
            if found is not None:
                return found
        inst = self.emit(Opc.LOAD, dtype, (param, index))
        self.scopes[-1].cache[key] = inst
        return inst

    def open(self, opc: Opc, dtype: np.dtype | None, srcs: tuple[Inst, ...], arg: Any = None) -> Inst:
        opener = Inst(opc, dtype, srcs, arg)
        self.scopes.append(_Scope(opener))
        self.level[id(opener)] = len(self.scopes) - 1  # a RANGE counter lives in its body
        return opener

    def close(self) -> None:
        scope = self.scopes.pop()
        assert scope.opener is not None, "close() without open()"
        closer = Inst(OPENS[scope.opener.opc], None, (scope.opener,))
        self.scopes[-1].items.append((scope.opener, scope.items, closer))

    def finish(self) -> list[Inst]:
        assert len(self.scopes) == 1, "unclosed blocks"
        out: list[Inst] = []
        # nested blocks written out in order, with a stack of the blocks' remaining items (a
        # nested function calling itself would be a reference cycle, freed only by the GC)
        stack: list[Iterator[Inst | tuple[Inst, list, Inst]]] = [iter(self.scopes[0].items)]
        closers: list[Inst] = []
        while stack:
            item = next(stack[-1], None)
            if item is None:
                stack.pop()
                if closers:
                    out.append(closers.pop())
            elif isinstance(item, tuple):
                opener, body, closer = item
                out.append(opener)
                stack.append(iter(body))
                closers.append(closer)
            else:
                out.append(item)
        for pos, inst in enumerate(out):
            inst.id = pos
        return out

    # -- blocks
    def range(self, start: Inst, end: Inst, step: int = 1) -> Inst:
        return self.open(Opc.RANGE, INDEX, (start, end), step)

    def if_(self, cond: Inst) -> Inst:
        return self.open(Opc.IF, None, (cond,))

    # -- values, with folding for int64 index math
    def const(self, value: Any, dtype: np.dtype = INDEX) -> Inst:
        return self.emit(Opc.CONST, dtype, (), dtype.type(value).item())

    @staticmethod
    def _const_of(x: Inst) -> int | None:
        return x.arg if x.opc is Opc.CONST else None

    def add(self, a: Inst, b: Inst) -> Inst:
        ca, cb = self._const_of(a), self._const_of(b)
        if ca is not None and cb is not None:
            return self.const(ca + cb)
        if ca is not None:  # constants on the right, so that a+c and c+a are one instruction
            a, b, ca, cb = b, a, cb, ca
        if cb == 0:
            return a
        return self.emit(Opc.ALU, INDEX, (a, b), Op.ADD)

    def mul(self, a: Inst, c: int) -> Inst:
        ca = self._const_of(a)
        if ca is not None:
            return self.const(ca * c)
        if c == 0:
            return self.const(0)
        if c == 1:
            return a
        return self.emit(Opc.ALU, INDEX, (a, self.const(c)), Op.MUL)

    def idiv(self, a: Inst, c: int) -> Inst:
        ca = self._const_of(a)
        if ca is not None:
            return self.const(ca // c)
        return a if c == 1 else self.emit(Opc.IDIV, INDEX, (a, self.const(c)))

    def mod(self, a: Inst, c: int) -> Inst:
        ca = self._const_of(a)
        if ca is not None:
            return self.const(ca % c)
        return self.const(0) if c == 1 else self.emit(Opc.MOD, INDEX, (a, self.const(c)))

    def alu(self, op: Op, srcs: tuple[Inst, ...], dtype: np.dtype) -> Inst:
        return self.emit(Opc.ALU, dtype, srcs, op)

    def cast(self, x: Inst, dtype: np.dtype) -> Inst:
        if x.dtype == dtype:
            return x
        if x.opc is Opc.CONST:
            return self.const(x.arg, dtype)
        return self.emit(Opc.CAST, dtype, (x,))


# --- lowering -------------------------------------------------------------------------------


@dataclass
class _PhaseIndex:
    """Where one phase is: the outer linear index and the phase's reduced linear index,
    and the dims each of them unravels into (only dims of size > 1)."""

    shape: tuple[int, ...]
    outer_lin: Inst
    outer_dims: tuple[int, ...]
    red_lin: Inst | None
    red_dims: tuple[int, ...]
    lane: Inst | None = None   # outer-blocked cpu: the index b in the block (selects acc[b])


@dataclass(frozen=True)
class _LaneAcc:
    """A reduction's results for a block of outer indices: `local[b]`, accumulated in its
    dtype and read as `dtype` (outer-blocked cpu strategy)."""

    local: Inst
    dtype: np.dtype


F16, F32 = np.dtype(np.float16), np.dtype(np.float32)


def _acc_dtype(r: Reduction) -> np.dtype:
    """The accumulator's dtype: float16 sums accumulate in float32 (float16 has ~3 digits)."""
    return F32 if r.op is Op.SUM and r.dtype == F16 else r.dtype


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _split_grid(count: int, limits: tuple[int, ...]) -> tuple[int, ...]:
    """Workgroups per dim covering `count` (x first, spilling to y, z); the product may exceed
    `count` by less than one row of dim 0, so callers bounds-check when it does."""
    dims: list[int] = []
    rest = count
    for limit in limits:
        dims.append(min(rest, limit))
        rest = -(-rest // dims[-1])
        if rest == 1:
            return tuple(dims)
    raise ValueError(f"{count} workgroups exceed the grid limit {limits}")


SUM_BLOCK_GROUP = 32
"""A blocked float sum adds at most this many block sums into one partial before the partial is
added into the next level's (see _Lowerer._sum_blocks)."""

# Expr op -> how to lower it; dispatch must cover every op a kernel expression can hold
_EXPR_OPS = set(ALU) | {Op.CAST} | set(LEAVES)


class _Lowerer:
    def __init__(self, kernel: Kernel, opts: LowerOptions):
        self.k = kernel
        self.opts = opts
        self.b = _Builder()
        self.axes = tuple(sorted(kernel.axes))
        self.outer_dims = tuple(d for d, s in enumerate(kernel.outer) if d not in self.axes and s > 1)
        self.n_outer = prod(kernel.outer)
        self.params: list[Inst] = []
        self.moved: list[Inst] = []  # the runtime offset of each slot (Kernel.offsets_arg), as INDEX
        self.accs: list[Inst | _LaneAcc] = []  # finished value of each reduction, for the current outer index
        self.lane: Inst | None = None  # outer-blocked cpu: the current index in the block
        self.global_size: tuple[int, ...] = (0,)
        self.local_size: tuple[int, ...] = (1,)

    # -- entry
    def run(self) -> LoopProgram:
        specs = tuple(ParamSpec(a.dtype, a.output, a.size) for a in self.k.args)
        if self.n_outer > 0:
            self.params = [self.b.emit(Opc.PARAM, a.dtype, (), i) for i, a in enumerate(self.k.args)]
            if self.k.offsets_arg is not None:  # read once, before any loop
                offsets = self.k.args[self.k.offsets_arg]
                self.moved = [self.b.cast(self.b.load(self.params[self.k.offsets_arg], self.b.const(j), offsets.dtype, True), INDEX)
                              for j in range(offsets.size)]
            if self.opts.target == "cpu":
                self._lower_cpu()
            elif max(self._extents(), default=0) <= self.opts.gpu_serial_max_extent:
                self._lower_gpu_thread_per_outer()
            else:
                self._lower_gpu_workgroup_per_outer()
        program = LoopProgram(self.k.name, self.opts.target, specs, self.global_size, self.local_size,
                              self.b.finish())
        program.verify()
        return program

    def _extent(self, shape: tuple[int, ...]) -> int:
        """Number of reduced-index positions of a phase."""
        return prod([shape[d] for d in self.axes])

    def _extents(self) -> list[int]:
        return [self._extent(shape) for _, shape, _ in self.k.phases()]

    # -- strategies
    def _lower_cpu(self) -> None:
        if self.opts.outer_block > 1 and self._wants_outer_block():
            self._lower_cpu_outer_blocked(self.opts.outer_block)
            return
        self.global_size, self.local_size = (self.n_outer,), (1,)
        outer = self.b.emit(Opc.SPECIAL, INDEX, (), (Special.GLOBAL_ID, 0))
        self._serial_phases(outer)

    # -- cpu, a block of consecutive outer indices per global id
    def _wants_outer_block(self) -> bool:
        """Whether the outer-blocked strategy pays: the reductions' loads read consecutive
        outer indices contiguously and the reduced index with a large stride (so the serial
        loop over the reduced index is neither cache-friendly nor vectorizable)."""
        if not self.outer_dims:
            return False
        reductions = [r for r in self.k.reductions if self._extent(r.shape) > 1]
        if not reductions:
            return False
        if self.opts.outer_block_always:
            return True
        return _prefers_outer_block(reductions, self.axes, self.outer_dims[-1])

    def _lower_cpu_outer_blocked(self, block: int) -> None:
        b = self.b
        n = self.n_outer
        self.global_size, self.local_size = (-(-n // block),), (1,)
        gid = b.emit(Opc.SPECIAL, INDEX, (), (Special.GLOBAL_ID, 0))
        base = b.mul(gid, block)
        if n % block:  # the last block holds n % block indices
            count = b.alu(Op.MIN, (b.add(b.mul(gid, -block), b.const(n)), b.const(block)), INDEX)
        else:
            count = b.const(block)

        def lanes() -> Inst:  # opens `for lane in block`; returns the outer index base + lane
            self.lane = b.range(b.const(0), count)
            return b.add(base, self.lane)

        def lanes_only() -> Inst:  # the same loop, for code that only touches acc[lane]
            self.lane = b.range(b.const(0), count)
            return self.lane

        def end_lanes() -> None:
            b.close()
            self.lane = None

        for r in self.k.reductions:
            self.accs.append(self._lane_reduce(r, block, lanes, lanes_only, end_lanes))
        for s in self.k.stores:
            e = self._extent(s.shape)
            if e == 0:
                continue
            i = b.range(b.const(0), b.const(e)) if e > 1 else None
            self._store(s, lanes(), i)
            end_lanes()
            if i is not None:
                b.close()

    def _lane(self) -> Inst:
        """The lane index of the open `for lane in block` loop (outer-blocked cpu lowering)."""
        assert self.lane is not None, "no lane loop is open"
        return self.lane

    def _lane_reduce(self, r: Reduction, block: int, lanes: Callable[[], Inst], lanes_only: Callable[[], Inst],
                     end_lanes: Callable[[], None]) -> Inst | _LaneAcc:
        b = self.b
        e = self._extent(r.shape)
        init = self._identity(r)
        combine = REDUCE[r.op].combine
        if e == 0:
            return b.const(init, r.dtype)
        dt = _acc_dtype(r)
        acc = b.emit(Opc.DEFINE_LOCAL, dt, (), block)

        def fill(local: Inst) -> None:
            lanes_only()
            b.emit(Opc.LOCAL_STORE, None, (local, self._lane(), b.const(init, dt)))
            end_lanes()

        def update(local: Inst, i: Inst) -> None:
            outer = lanes()
            value = self._phase_value(r.expr, r.shape, outer, i, dt)
            cur = b.emit(Opc.LOCAL_LOAD, dt, (local, self._lane()))
            b.emit(Opc.LOCAL_STORE, None, (local, self._lane(), b.alu(combine, (cur, value), dt)))
            end_lanes()

        if e == 1:
            outer = lanes()
            b.emit(Opc.LOCAL_STORE, None, (acc, self._lane(), self._phase_value(r.expr, r.shape, outer, None, dt)))
            end_lanes()
            return _LaneAcc(acc, r.dtype)
        fill(acc)
        sizes = self._sum_blocks(r, dt, e)

        def accumulate(into: Inst, lo: Inst, end: Inst, level: int) -> None:
            if level == len(sizes):
                i = b.range(lo, end)
                update(into, i)
                b.close()
                return
            # blocked summation, as in _serial_reduce: a partial sum per lane per block of rows
            part = b.emit(Opc.DEFINE_LOCAL, dt, (), block)
            start = b.range(lo, end, sizes[level])
            fill(part)
            stop = b.add(start, b.const(sizes[level]))
            if e % sizes[level]:
                stop = b.alu(Op.MIN, (stop, b.const(e)), INDEX)
            accumulate(part, start, stop, level + 1)
            lanes_only()
            total = b.alu(combine, (b.emit(Opc.LOCAL_LOAD, dt, (into, self._lane())),
                                    b.emit(Opc.LOCAL_LOAD, dt, (part, self._lane()))), dt)
            b.emit(Opc.LOCAL_STORE, None, (into, self._lane(), total))
            end_lanes()
            b.close()

        accumulate(acc, b.const(0), b.const(e), 0)
        del accumulate  # it refers to itself: a reference cycle, which only the cyclic GC frees
        return _LaneAcc(acc, r.dtype)

    def _lower_gpu_thread_per_outer(self) -> None:
        b = self.b
        local = min(self.opts.local_size, self.n_outer)
        grid = _split_grid(-(-self.n_outer // local), self.opts.max_global_size)
        self.global_size, self.local_size = grid, (local,) + (1,) * (len(grid) - 1)
        gidx = b.add(b.mul(self._group_linear(grid), local), self._local_id(local))
        guarded = prod(grid) * local != self.n_outer
        if guarded:  # the last workgroup(s) run past the end
            b.if_(b.alu(Op.CMPLT, (gidx, b.const(self.n_outer)), BOOL))
        self._serial_phases(gidx)
        if guarded:
            b.close()

    def _lower_gpu_workgroup_per_outer(self) -> None:
        b = self.b
        # no more threads than the longest phase can keep busy
        local = min(self.opts.local_size, _next_pow2(max(self._extents())))
        grid = _split_grid(self.n_outer, self.opts.max_global_size)
        self.global_size, self.local_size = grid, (local,) + (1,) * (len(grid) - 1)
        # one shared array per reduction, so that reading one reduction's result never
        # races with the next reduction's writes (no barrier needed between them)
        shared = [b.emit(Opc.DEFINE_LOCAL, _acc_dtype(r), (), local) if local > 1 else None for r in self.k.reductions]
        row = self._group_linear(grid)
        lid = self._local_id(local)
        guarded = prod(grid) != self.n_outer
        if guarded:  # uniform per workgroup, so the barriers inside stay legal
            b.if_(b.alu(Op.CMPLT, (row, b.const(self.n_outer)), BOOL))
        for r, smem in zip(self.k.reductions, shared):
            self.accs.append(self._cooperative_reduce(r, row, lid, local, smem))
        for s in self.k.stores:
            e = self._extent(s.shape)
            if e == 0:
                continue
            if e == 1 and local > 1:  # one element: thread 0 writes it
                b.if_(b.alu(Op.CMPEQ, (lid, b.const(0)), BOOL))
                self._store(s, row, None)
                b.close()
            elif e == 1:
                self._store(s, row, None)
            else:
                i = b.range(lid, b.const(e), local)
                self._store(s, row, i)
                b.close()
        if guarded:
            b.close()

    def _group_linear(self, grid: tuple[int, ...]) -> Inst:
        """Linear workgroup index: x + X * (y + Y * z)."""
        b = self.b
        lin = b.const(0)
        for dim in reversed(range(len(grid))):
            gid = b.emit(Opc.SPECIAL, INDEX, (), (Special.GROUP_ID, dim)) if grid[dim] > 1 else b.const(0)
            lin = b.add(b.mul(lin, grid[dim]), gid)
        return lin

    def _local_id(self, local: int) -> Inst:
        return self.b.emit(Opc.SPECIAL, INDEX, (), (Special.LOCAL_ID, 0)) if local > 1 else self.b.const(0)

    # -- phases, one thread doing a whole outer index
    def _serial_phases(self, outer: Inst) -> None:
        b = self.b
        for r in self.k.reductions:
            self.accs.append(self._serial_reduce(r, outer))
        for s in self.k.stores:
            e = self._extent(s.shape)
            if e == 1:
                self._store(s, outer, None)
            elif e > 1:
                i = b.range(b.const(0), b.const(e))
                self._store(s, outer, i)
                b.close()

    def _serial_reduce(self, r: Reduction, outer: Inst) -> Inst:
        b = self.b
        e = self._extent(r.shape)
        init = self._identity(r)
        combine = REDUCE[r.op].combine
        if e == 0:
            return b.const(init, r.dtype)
        if e == 1:  # combine(identity, v) == v
            return self._phase_value(r.expr, r.shape, outer, None, r.dtype)
        dt = _acc_dtype(r)
        acc = b.emit(Opc.DEFINE_ACC, dt, (), init)
        sizes = self._sum_blocks(r, dt, e)

        def accumulate(into: Inst, lo: Inst, end: Inst, level: int) -> None:
            if level == len(sizes):
                i = b.range(lo, end)
                b.emit(Opc.ACC_UPDATE, None, (into, self._phase_value(r.expr, r.shape, outer, i, dt)), combine)
                b.close()
                return
            # blocked summation: a partial sum per block, added into the enclosing one
            start = b.range(lo, end, sizes[level])
            part = b.emit(Opc.DEFINE_ACC, dt, (), init)
            stop = b.add(start, b.const(sizes[level]))
            if e % sizes[level]:
                stop = b.alu(Op.MIN, (stop, b.const(e)), INDEX)
            accumulate(part, start, stop, level + 1)
            b.emit(Opc.ACC_UPDATE, None, (into, b.emit(Opc.ACC_READ, dt, (part,))), combine)
            b.close()

        accumulate(acc, b.const(0), b.const(e), 0)
        del accumulate  # (a reference cycle otherwise, as above)
        return b.cast(b.emit(Opc.ACC_READ, dt, (acc,)), r.dtype)

    def _sum_blocks(self, r: Reduction, dt: np.dtype, count: int) -> list[int]:
        """Block sizes (outermost first) of a blocked float sum of `count` values: `sum_block`,
        then groups of SUM_BLOCK_GROUP blocks while more remain, so that each partial sum adds
        at most about that many values (the error grows with the largest number of additions
        into one partial: ~1e-6 for a 1M-element float32 sum with one level, ~2e-7 with two).
        Empty: not a float sum, or too short to block."""
        if r.op is not Op.SUM or dt.kind != "f" or count <= self.opts.sum_block:
            return []
        sizes = [self.opts.sum_block]
        while count > sizes[0] * SUM_BLOCK_GROUP:
            sizes.insert(0, sizes[0] * SUM_BLOCK_GROUP)
        return sizes

    # -- phases, a workgroup sharing one outer index
    def _cooperative_reduce(self, r: Reduction, row: Inst, lid: Inst, local: int, smem: Inst | None) -> Inst:
        b = self.b
        e = self._extent(r.shape)
        init = self._identity(r)
        combine = REDUCE[r.op].combine
        if e == 0:
            return b.const(init, r.dtype)
        if e == 1:  # every thread computes the single value itself: no communication
            return self._phase_value(r.expr, r.shape, row, None, r.dtype)
        dt = _acc_dtype(r)
        # each thread: partial over i = lid, lid + local, ... (threads past e keep the identity);
        # a long float sum in blocks of `local` * size, as in _serial_reduce
        sizes = [size * local for size in self._sum_blocks(r, dt, -(-e // local))]

        def accumulate(into: Inst, lo: Inst, end: Inst, level: int) -> None:
            if level == len(sizes):
                i = b.range(b.add(lo, lid), end, local)
                b.emit(Opc.ACC_UPDATE, None, (into, self._phase_value(r.expr, r.shape, row, i, dt)), combine)
                b.close()
                return
            start = b.range(lo, end, sizes[level])
            block_part = b.emit(Opc.DEFINE_ACC, dt, (), init)
            stop = b.add(start, b.const(sizes[level]))
            if e % sizes[level]:
                stop = b.alu(Op.MIN, (stop, b.const(e)), INDEX)
            accumulate(block_part, start, stop, level + 1)
            b.emit(Opc.ACC_UPDATE, None, (into, b.emit(Opc.ACC_READ, dt, (block_part,))), combine)
            b.close()

        part = b.emit(Opc.DEFINE_ACC, dt, (), init)
        accumulate(part, b.const(0), b.const(e), 0)
        del accumulate  # (a reference cycle otherwise, as in _lane_reduce)
        partial = b.emit(Opc.ACC_READ, dt, (part,))
        if smem is None:  # a single thread: its partial is the result
            return b.cast(partial, r.dtype)
        # tree: every slot [0, local) is written before the first barrier; each step folds the
        # upper part [half, n) onto [0, n - half) and halves n (rounding up: any `local` works)
        b.emit(Opc.LOCAL_STORE, None, (smem, lid, partial))
        b.emit(Opc.BARRIER, None)
        n = local
        while n > 1:
            half = (n + 1) // 2
            b.if_(b.alu(Op.CMPLT, (lid, b.const(n - half)), BOOL))
            mine = b.emit(Opc.LOCAL_LOAD, dt, (smem, lid))
            other = b.emit(Opc.LOCAL_LOAD, dt, (smem, b.add(lid, b.const(half))))
            b.emit(Opc.LOCAL_STORE, None, (smem, lid, b.alu(combine, (mine, other), dt)))
            b.close()
            b.emit(Opc.BARRIER, None)
            n = half
        # broadcast: after the last barrier every thread reads the total
        return b.cast(b.emit(Opc.LOCAL_LOAD, dt, (smem, b.const(0))), r.dtype)

    # -- phase bodies
    def _identity(self, r: Reduction) -> Any:
        return r.dtype.type(dtypes.identity(REDUCE[r.op].name, r.dtype)).item()

    def _phase(self, shape: tuple[int, ...], outer: Inst, red: Inst | None) -> _PhaseIndex:
        assert len(shape) == self.k.rank and all(
            shape[d] == self.k.outer[d] for d in range(self.k.rank) if d not in self.axes), (shape, self.k.outer)
        red_dims = tuple(d for d in self.axes if shape[d] > 1)
        assert (red is None) == (not red_dims), (shape, red)
        return _PhaseIndex(shape, outer, self.outer_dims, red, red_dims, self.lane)

    def _phase_value(self, expr: Expr, shape: tuple[int, ...], outer: Inst, red: Inst | None,
                     dtype: np.dtype) -> Inst:
        return self.b.cast(self._expr(expr, self._phase(shape, outer, red)), dtype)

    def _store(self, s: Store, outer: Inst, red: Inst | None) -> None:
        index = self._phase(s.shape, outer, red)
        out_dtype = self.k.args[s.buf].dtype
        value = self.b.cast(self._expr(s.expr, index), out_dtype)
        self.b.emit(Opc.STORE, None, (self.params[s.buf], self._view_index(s.view, index, self._moved(s.slot)), value))

    def _expr(self, root: Expr, index: _PhaseIndex) -> Inst:
        """Lower one phase's expression; each (interned) node once."""
        done: dict[int, Inst] = {}
        for node in toposort(root):
            done[id(node)] = self._EXPR[node.op](self, node, [done[id(s)] for s in node.srcs], index)
        return done[id(root)]

    def _expr_load(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        buf, chain, slot = node.arg
        read_only = not self.k.args[buf].output
        return self.b.load(self.params[buf], self._chain_index(chain, index, self._moved(slot)), node.dtype, read_only)

    def _moved(self, slot: int | None) -> Inst | None:
        return None if slot is None else self.moved[slot]

    def _expr_const(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        return self.b.const(node.arg, node.dtype)

    def _expr_acc(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        acc = self.accs[node.arg]
        if isinstance(acc, _LaneAcc):
            assert index.lane is not None, "a per-lane accumulator read outside the lane loop"
            value = self.b.cast(self.b.emit(Opc.LOCAL_LOAD, acc.local.dtype, (acc.local, index.lane)), acc.dtype)
            return self.b.cast(value, node.dtype)
        return self.b.cast(acc, node.dtype)

    def _expr_cast(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        return self.b.cast(srcs[0], node.dtype)

    def _expr_alu(self, node: Expr, srcs: list[Inst], index: _PhaseIndex) -> Inst:
        if node.op is Op.POW and srcs[1].opc is Opc.CONST:
            by_multiplies = _pow_by_multiplies(self.b, srcs[0], srcs[1].arg)
            if by_multiplies is not None:
                return by_multiplies
        return self.b.alu(node.op, tuple(srcs), node.dtype)

    _EXPR: dict[Op, Callable[..., Inst]] = {
        Op.LOAD: _expr_load, Op.CONST: _expr_const, Op.ACC: _expr_acc, Op.CAST: _expr_cast,
        **dict.fromkeys(ALU, _expr_alu),
    }

    # -- index math
    def _chain_index(self, chain: ViewChain, index: _PhaseIndex, moved: Inst | None) -> Inst:
        """Buffer element index read by a LOAD: the first view maps the phase index; each
        later view maps the previous view's result, a linear index into its shape's contiguous
        layout, which is unravelled over that shape. `moved`: a runtime offset added to the
        last view's (a slot, see kernel_params)."""
        if len(chain) == 1:
            return self._view_index(chain[0], index, moved)
        lin = self._view_index(chain[0], index)
        for k, view in enumerate(chain[1:], 2):
            dims = [(size, stride) for size, stride in zip(view.shape, view.strides) if size != 1]
            terms = self._linear_terms(lin, [s for s, _ in dims], [st for _, st in dims])
            lin = self._sum(self._offset(view, moved if k == len(chain) else None), terms)
        return lin

    def _offset(self, view: View, moved: Inst | None) -> Inst:
        return self.b.const(view.offset) if moved is None else self.b.add(moved, self.b.const(view.offset))

    def _view_index(self, view: View, index: _PhaseIndex, moved: Inst | None = None) -> Inst:
        """offset + sum(i[d] * stride[d]) over the phase index. The outer part comes first
        so that it is one loop-invariant value, shared by every view with the same one."""
        assert view.shape == index.shape, (view.shape, index.shape)
        outer = self._linear_terms(index.outer_lin, [view.shape[d] for d in index.outer_dims],
                                   [view.strides[d] for d in index.outer_dims])
        base = self._sum(self._offset(view, moved), outer)
        if index.red_lin is None:
            return base
        red = self._linear_terms(index.red_lin, [view.shape[d] for d in index.red_dims],
                                 [view.strides[d] for d in index.red_dims])
        return self._sum(base, red)

    def _linear_terms(self, lin: Inst, sizes: list[int], strides: list[int]) -> list[Inst]:
        """sum(digit[d] * strides[d]) where digit = `lin` unravelled over `sizes` (row-major,
        lin < prod(sizes)), as a list of terms. A run of dims that is contiguous in the view
        (stride[d] == stride[d+1] * size[d+1]) is one digit: (lin // inner) % run_extent,
        where the division is skipped for the last dims and the modulo for the first."""
        b = self.b
        terms = []
        g = 0
        while g < len(sizes):
            h = g
            while h + 1 < len(sizes) and strides[h] == strides[h + 1] * sizes[h + 1]:
                h += 1
            if strides[h] != 0:  # broadcast runs read the same element: no term
                digit = b.idiv(lin, prod(sizes[h + 1:]))
                if g > 0:
                    digit = b.mod(digit, prod(sizes[g:h + 1]))
                terms.append(b.mul(digit, strides[h]))
            g = h + 1
        return terms

    def _sum(self, first: Inst, terms: list[Inst]) -> Inst:
        for t in terms:
            first = self.b.add(first, t)
        return first


# --- powers with a constant exponent ----------------------------------------------------------

POW_MULTIPLY_MAX = 8
"""x ** n for a constant integer 0 <= n <= this is computed by multiplies (squaring: at most 4
for n = 7): a general pow is an exp and a log, 3-15x the time of x * x. Each multiply adds half
an ulp, so n stays small: x**8 is within 4 ulp of the correctly rounded power."""
POW_RECIPROCAL_MAX = 4
"""x ** -n for 1 <= n <= this is (1 / x) ** n, float only (within 4 ulp too). The reciprocal
comes first: 1 / (x ** n) would round x ** n in the subnormals for x near 1e-19 and lose
precision there, while (1 / x) ** n underflows or overflows only where x ** -n does."""


def _pow_by_multiplies(b: _Builder, x: Inst, exponent: Any) -> Inst | None:
    """x ** exponent (a constant) without POW, or None where POW must compute it. Matches
    numpy's pow on the edge cases: x ** 0 == 1 (NaN too), (-0.0) ** 3 == -0.0, (-0.0) ** -1 ==
    -inf, (+-inf) ** n, NaN; x ** 0.5 is sqrt(x), as ops.power defines it for a constant 0.5."""
    dtype = x.dtype
    if dtype.kind not in "fi" or isinstance(exponent, bool) or not math.isfinite(exponent):
        return None
    if dtype.kind == "f" and exponent == 0.5:
        return b.alu(Op.SQRT, (x,), dtype)
    if exponent != int(exponent):
        return None
    n = int(exponent)
    if n == 0:
        return b.const(1, dtype)
    if n < 0:
        if dtype.kind != "f" or -n > POW_RECIPROCAL_MAX:
            return None  # int: ops.power's rule for negative exponents (POW renders it)
        x, n = b.alu(Op.RECIP, (x,), dtype), -n
    if n > POW_MULTIPLY_MAX:
        return None
    result: Inst | None = None
    square = x
    while True:  # binary powering: the squares of x, times those of n's bits
        if n & 1:
            result = square if result is None else b.alu(Op.MUL, (result, square), dtype)
        n >>= 1
        if not n:
            return result
        square = b.alu(Op.MUL, (square, square), dtype)


# --- choosing the outer-blocked cpu strategy ------------------------------------------------


def _chain_offset(chain: ViewChain, idx: tuple[int, ...]) -> int:
    """The buffer element a view chain reads at phase index `idx`."""
    view = chain[0]
    lin = view.offset + sum(i * st for i, st in zip(idx, view.strides))
    for view in chain[1:]:
        digits = []
        for size in reversed(view.shape):
            digits.append(lin % size if size else 0)
            lin = lin // size if size else 0
        lin = view.offset + sum(d * st for d, st in zip(reversed(digits), view.strides))
    return lin


def _load_strides(chain: ViewChain) -> list[int]:
    """Element distance between neighbours along each phase dim (at the origin)."""
    rank = len(chain[0].shape)
    origin = _chain_offset(chain, (0,) * rank)
    strides = []
    for d in range(rank):
        if chain[0].shape[d] < 2:
            strides.append(0)
            continue
        unit = tuple(int(k == d) for k in range(rank))
        strides.append(abs(_chain_offset(chain, unit) - origin))
    return strides


def _prefers_outer_block(reductions: list[Reduction], axes: tuple[int, ...], inner_outer: int) -> bool:
    """Loads vote: a load whose innermost reduced dim is contiguous prefers the serial loop
    (it vectorizes); one that reads the innermost outer dim contiguously but the reduced
    index with a stride prefers blocking over outer indices."""
    votes = 0
    for r in reductions:
        red = [d for d in axes if r.shape[d] > 1]
        for node in toposort(r.expr):
            if node.op is not Op.LOAD:
                continue
            strides = _load_strides(node.arg[1])
            s_red = strides[red[-1]]
            if s_red == 1:
                votes -= 1
            elif s_red > 1 and strides[inner_outer] == 1:
                votes += 1
    return votes > 0


check_exhaustive(_Lowerer._EXPR, _EXPR_OPS, "lowering of kernel expressions")
check_exhaustive(ACC_COMBINE, {r.combine for r in REDUCE.values()}, "loop IR accumulator combine ops")
