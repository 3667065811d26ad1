"""A test-only interpreter for loop IR programs (ug_core.loop_ir), executing them with numpy.

Execution model: every thread of every workgroup runs at once, in lockstep (SIMT). A value
is an array over the *lanes* of the block that computes it (or a numpy scalar when it is
the same on every lane, e.g. a CONST); a lane starts as one thread.

* IF keeps the lanes whose condition holds (a mask, compressed to the lanes' indices).
* RANGE runs all its iterations at once: each lane becomes one lane per iteration of its
  own range (parent-major, then iteration order). This is sound for the loops the
  lowering emits, whose iterations only interact through accumulators; a loop that reads
  an accumulator it also updates (a scan) runs its iterations one at a time (see below).
* ACC_UPDATE from inside a loop folds the iterations' values into the accumulator with
  `ufunc.at`, which applies them one at a time in lane order, i.e. in iteration order, in
  the accumulator's dtype: float32 sums round exactly as a sequential float32 loop does.
* A RANGE whose body loads from a buffer it stores into (a scatter's in-order combine:
  row[slot] = combine(row[slot], value)) runs its iterations one at a time.
* A RANGE whose body updates shared memory in place (a LOCAL_LOAD and a LOCAL_STORE of
  the same array, the store's index not depending on the loop's counter: a per-lane
  accumulator array, as the outer-blocked cpu lowering emits), or that reads an accumulator
  register it updates (ACC_READ of an accumulator defined outside the loop, a scan's running
  value), runs its iterations one at a time instead. A LOCAL_STORE whose lanes write one slot twice at once (a loop-carried
  dependency the above misses) raises `InterpError`.
* BARRIER is satisfied by lockstep execution; the interpreter instead *checks* that
  shared memory is used race-free: a LOCAL_LOAD of a slot that another thread wrote since
  the last barrier, a LOCAL_STORE to a slot that another thread read or wrote since the
  last barrier, a read of a never-written slot, a barrier that not every thread of a
  workgroup reaches, or a barrier in a loop all raise `InterpError`.
* LOAD / STORE / LOCAL_LOAD / LOCAL_STORE indices are bounds-checked, and stored values must
  have the buffer's dtype.

Usage: `run(program, buffers)` with one flat numpy array per parameter (in place).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ug_core.loop_ir import ACC_COMBINE, LoopProgram, Opc, OPENS, Special
from ug_core.ops import ALU, Op, check_exhaustive


class InterpError(RuntimeError):
    pass


_COMBINE = {Op.ADD: np.add, Op.MUL: np.multiply, Op.MAX: ALU[Op.MAX].numpy, Op.MIN: ALU[Op.MIN].numpy}   # ops.py's meaning
_UFUNC = {Op.ADD: np.add, Op.MUL: np.multiply, Op.MAX: np.maximum, Op.MIN: np.minimum}


def _combine_at(op: Op, arr: np.ndarray, idx: np.ndarray, v: np.ndarray) -> None:
    """arr[idx[i]] = combine(arr[idx[i]], v[i]) for each i in order. numpy's maximum/minimum
    leave a zero's sign to chance: a zero result is -0.0 (MIN) or +0.0 (MAX) if any combined
    value was, as ops.maximum / ops.minimum say."""
    before = arr.copy()
    v = np.broadcast_to(v, np.shape(idx))
    _UFUNC[op].at(arr, idx, v)
    if arr.dtype.kind != "f" or op is Op.ADD:
        return
    negative = op is Op.MIN
    preferred = (before == 0) & (np.signbit(before) == negative)
    np.logical_or.at(preferred, idx, (v == 0) & (np.signbit(v) == negative))
    zero = arr == 0
    arr[zero & preferred] = -0.0 if negative else 0.0
    arr[zero & ~preferred] = 0.0 if negative else -0.0
check_exhaustive(_COMBINE, ACC_COMBINE, "loop_interp accumulators")


class _Ctx:
    """A set of lanes: `n` of them, each mapped to a lane of the parent block and to a thread."""

    __slots__ = ("n", "parent", "to_parent", "thread", "in_loop", "maps", "cache")

    def __init__(self, parent: "_Ctx | None", to_parent: np.ndarray | None, thread: np.ndarray, in_loop: bool):
        self.n = len(thread)
        self.parent = parent
        self.to_parent = to_parent
        self.thread = thread
        self.in_loop = in_loop
        self.maps: dict[int, np.ndarray] = {}
        self.cache: dict[int, Any] = {}

    def child(self, idx: np.ndarray, in_loop: bool) -> "_Ctx":
        return _Ctx(self, idx, self.thread[idx], in_loop)

    def map_to(self, ancestor: "_Ctx") -> np.ndarray:
        """For each lane here, the index of its lane in `ancestor`."""
        found = self.maps.get(id(ancestor))
        if found is None:
            assert self.parent is not None, "not an ancestor"
            if self.parent is ancestor:
                found = self.to_parent
            else:
                found = self.parent.map_to(ancestor)[self.to_parent]
            self.maps[id(ancestor)] = found
        return found


def _uniform(x: Any) -> bool:
    return np.ndim(x) == 0


def _typed(x: Any, dtype: np.dtype) -> Any:
    if _uniform(x):
        return np.asarray(x).astype(dtype)[()]
    return np.asarray(x).astype(dtype, copy=False)


class _Local:
    """One workgroup-shared array per workgroup, with race bookkeeping per slot."""

    def __init__(self, groups: int, n: int, dtype: np.dtype):
        self.n = n
        self.data = np.zeros(groups * n, dtype)
        self.written_epoch = np.full(groups * n, -1, np.int64)
        self.writer = np.full(groups * n, -1, np.int64)
        self.read_epoch = np.full(groups * n, -1, np.int64)
        self.reader = np.full(groups * n, -1, np.int64)  # -2: several threads


def _per_slot_threads(flat: np.ndarray, thread: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct slots touched, and the min / max thread touching each."""
    order = np.argsort(flat, kind="stable")
    fs, ts = flat[order], thread[order]
    slots, start = np.unique(fs, return_index=True)
    return slots, np.minimum.reduceat(ts, start), np.maximum.reduceat(ts, start)


class _Interp:
    def __init__(self, program: LoopProgram, buffers: list[np.ndarray]):
        self.p = program
        self.insts = program.instructions
        if len(buffers) != len(program.params):
            raise InterpError(f"{len(buffers)} buffers for {len(program.params)} params")
        for i, (buf, spec) in enumerate(zip(buffers, program.params)):
            if buf.dtype != spec.dtype or buf.ndim != 1 or buf.size < spec.size:
                raise InterpError(f"buffer {i}: {buf.dtype}[{buf.shape}] does not fit {spec}")
        self.buffers = buffers
        self.vals: dict[int, tuple[_Ctx | None, Any]] = {}
        self.accs: dict[int, tuple[_Ctx, np.ndarray]] = {}
        self.locals: dict[int, _Local] = {}
        self.epoch = 0
        self.local_threads = math.prod(program.local_size)
        self.groups = math.prod(program.global_size)
        self.match = self._match_blocks()
        self.serial = self._serial_ranges()

    # -- static checks
    def _match_blocks(self) -> dict[int, int]:
        match, stack = {}, []
        for pos, inst in enumerate(self.insts):
            if inst.opc in OPENS:
                stack.append(pos)
            elif inst.opc in (Opc.ENDRANGE, Opc.ENDIF):
                match[stack.pop()] = pos
        return match

    def _serial_ranges(self) -> set[int]:
        """Loops carrying a dependency through shared memory or an accumulator they read (see
        the module docstring)."""
        deps: dict[int, frozenset[int]] = {}  # inst id -> the RANGE counters it depends on
        for pos, inst in enumerate(self.insts):
            d = frozenset().union(*(deps.get(s.id, frozenset()) for s in inst.srcs))
            deps[pos] = d | {pos} if inst.opc is Opc.RANGE else d
        serial = set()
        for pos, end in self.match.items():
            if self.insts[pos].opc is not Opc.RANGE:
                continue
            body = self.insts[pos + 1:end]
            loaded = {i.srcs[0].id for i in body if i.opc is Opc.LOCAL_LOAD}
            read = {i.srcs[0].id for i in body if i.opc is Opc.ACC_READ and i.srcs[0].id < pos}
            buffers_read = {i.srcs[0].id for i in body if i.opc in (Opc.LOAD, Opc.GATED_LOAD)}
            if any(i.opc is Opc.LOCAL_STORE and i.srcs[0].id in loaded and pos not in deps[i.srcs[1].id]
                   for i in body) or any(i.opc is Opc.ACC_UPDATE and i.srcs[0].id in read for i in body) \
                    or any(i.opc is Opc.STORE and i.srcs[0].id in buffers_read for i in body):
                serial.add(pos)
        return serial

    # -- values
    def get(self, inst: Any, ctx: _Ctx) -> Any:
        vctx, value = self.vals[inst.id]
        if vctx is ctx or vctx is None or _uniform(value):  # None: same on every lane (a buffer)
            return value
        cached = ctx.cache.get(inst.id)
        if cached is None:
            cached = ctx.cache[inst.id] = value[ctx.map_to(vctx)]
        return cached

    def lanes(self, inst: Any, ctx: _Ctx) -> np.ndarray:
        return np.broadcast_to(self.get(inst, ctx), (ctx.n,))

    def set(self, inst: Any, ctx: _Ctx, value: Any) -> None:
        self.vals[inst.id] = (ctx, value)

    # -- execution
    def run(self) -> None:
        if self.p.is_empty:
            return
        threads = self.groups * self.local_threads
        root = _Ctx(None, None, np.arange(threads, dtype=np.int64), in_loop=False)
        with np.errstate(all="ignore"):
            self.block(0, len(self.insts), root)

    def block(self, lo: int, hi: int, ctx: _Ctx) -> None:
        pos = lo
        while pos < hi:
            inst = self.insts[pos]
            if pos in self.serial:
                end = self.match[pos]
                self._serial_range(inst, ctx, pos + 1, end)
                pos = end + 1
            elif inst.opc in OPENS:
                end = self.match[pos]
                child = self._HANDLERS[inst.opc](self, inst, ctx)
                if child.n:
                    self.block(pos + 1, end, child)
                pos = end + 1
            else:
                self._HANDLERS[inst.opc](self, inst, ctx)
                pos += 1

    def _const(self, inst, ctx):
        self.set(inst, ctx, np.asarray(inst.arg, inst.dtype)[()])

    def _param(self, inst, ctx):
        self.vals[inst.id] = (None, self.buffers[inst.arg])

    def _special(self, inst, ctx):
        kind, dim = inst.arg
        gsize, lsize = self.p.global_size, self.p.local_size
        group = ctx.thread // self.local_threads
        local = ctx.thread % self.local_threads
        gid = (group // math.prod(gsize[:dim])) % gsize[dim]
        lid = (local // math.prod(lsize[:dim])) % lsize[dim]
        value = {Special.GROUP_ID: gid, Special.LOCAL_ID: lid, Special.GLOBAL_ID: gid * lsize[dim] + lid}[kind]
        self.set(inst, ctx, value.astype(np.int64))

    def _range(self, inst, ctx) -> _Ctx:
        start, end = (self.lanes(s, ctx).astype(np.int64) for s in inst.srcs)
        step = inst.arg
        counts = np.maximum(0, (end - start + step - 1) // step)
        owner = np.repeat(np.arange(ctx.n), counts)
        first = np.cumsum(counts) - counts
        counter = start[owner] + (np.arange(len(owner)) - first[owner]) * step
        child = ctx.child(owner, in_loop=True)
        self.set(inst, child, counter)
        return child

    def _serial_range(self, inst, ctx, lo: int, hi: int) -> None:
        start, end = (self.lanes(s, ctx).astype(np.int64) for s in inst.srcs)
        step = inst.arg
        counts = np.maximum(0, (end - start + step - 1) // step)
        for it in range(int(counts.max(initial=0))):
            owner = np.flatnonzero(counts > it)
            child = ctx.child(owner, in_loop=True)
            self.set(inst, child, start[owner] + it * step)
            self.block(lo, hi, child)

    def _if(self, inst, ctx) -> _Ctx:
        return ctx.child(np.flatnonzero(self.lanes(inst.srcs[0], ctx)), in_loop=ctx.in_loop)

    def _end(self, inst, ctx):
        raise AssertionError("block ends are consumed by block()")

    def _index(self, inst, ctx, size: int) -> Any:
        idx = self.get(inst, ctx)
        if np.any(idx < 0) or np.any(idx >= size):
            bad = np.asarray(idx)[(np.asarray(idx) < 0) | (np.asarray(idx) >= size)]
            raise InterpError(f"index out of bounds [0, {size}): {bad[:5]} at %{inst.id}")
        return idx

    def _load(self, inst, ctx):
        buf = self.get(inst.srcs[0], ctx)
        self.set(inst, ctx, buf[self._index(inst.srcs[1], ctx, self.p.params[inst.srcs[0].arg].size)])

    def _gated_load(self, inst, ctx):
        """Only the lanes whose gate holds read (bounds-checked); the others get 0."""
        param, index, gate = inst.srcs
        buf = self.get(param, ctx)
        on = np.broadcast_to(self.get(gate, ctx), (ctx.n,))
        idx = np.broadcast_to(self.get(index, ctx), (ctx.n,))
        size = self.p.params[param.arg].size
        if np.any(on & ((idx < 0) | (idx >= size))):
            raise InterpError(f"gated index out of bounds [0, {size}): {idx[on & ((idx < 0) | (idx >= size))][:5]} at %{inst.id}")
        self.set(inst, ctx, np.where(on, buf[np.where(on, idx, 0)] if buf.size else buf.dtype.type(0), buf.dtype.type(0)))

    def _store(self, inst, ctx):
        param, index, value = inst.srcs
        buf = self.get(param, ctx)
        idx = self._index(index, ctx, self.p.params[param.arg].size)
        val = self.get(value, ctx)
        if np.asarray(val).dtype != buf.dtype:
            raise InterpError(f"store of {np.asarray(val).dtype} into {buf.dtype} at %{inst.id}")
        buf[np.broadcast_to(idx, (ctx.n,))] = np.broadcast_to(val, (ctx.n,))

    def _atomic(self, inst, ctx):
        param, index, value = inst.srcs
        buf = self.get(param, ctx)
        idx = np.broadcast_to(self._index(index, ctx, self.p.params[param.arg].size), (ctx.n,))
        val = np.broadcast_to(np.asarray(self.get(value, ctx), buf.dtype), (ctx.n,))
        {Op.ADD: np.add, Op.MAX: np.maximum, Op.MIN: np.minimum}[inst.arg].at(buf, idx, val)   # (duplicates combine)

    def _alu(self, inst, ctx):
        args = [self.get(s, ctx) for s in inst.srcs]
        self.set(inst, ctx, _typed(ALU[inst.arg].numpy(*args), inst.dtype))

    def _idiv(self, inst, ctx):
        self.set(inst, ctx, _typed(np.floor_divide(*(self.get(s, ctx) for s in inst.srcs)), inst.dtype))

    def _mod(self, inst, ctx):
        self.set(inst, ctx, _typed(np.mod(*(self.get(s, ctx) for s in inst.srcs)), inst.dtype))

    def _cast(self, inst, ctx):
        self.set(inst, ctx, _typed(self.get(inst.srcs[0], ctx), inst.dtype))

    def _bitcast(self, inst, ctx):
        value = self.get(inst.srcs[0], ctx)
        bits = np.asarray(value, dtype=inst.srcs[0].dtype).reshape(-1).view(inst.dtype)
        self.set(inst, ctx, bits[0] if _uniform(value) else bits)

    def _define_acc(self, inst, ctx):
        self.accs[inst.id] = (ctx, np.full(ctx.n, inst.arg, inst.dtype))

    def _acc_update(self, inst, ctx):
        acc, value = inst.srcs
        actx, arr = self.accs[acc.id]
        v = self.lanes(value, ctx)
        if actx is ctx:
            arr[...] = _COMBINE[inst.arg](arr, v)
        else:  # one update per iteration, applied in order
            _combine_at(inst.arg, arr, ctx.map_to(actx), v)

    def _acc_read(self, inst, ctx):
        actx, arr = self.accs[inst.srcs[0].id]
        self.set(inst, ctx, arr.copy() if actx is ctx else arr[ctx.map_to(actx)])

    def _define_local(self, inst, ctx):
        self.locals[inst.id] = _Local(self.groups, inst.arg, inst.dtype)

    def _local_slots(self, local: _Local, index, ctx) -> np.ndarray:
        idx = np.broadcast_to(self._index(index, ctx, local.n), (ctx.n,))
        return (ctx.thread // self.local_threads) * local.n + idx

    def _local_load(self, inst, ctx):
        local = self.locals[inst.srcs[0].id]
        flat = self._local_slots(local, inst.srcs[1], ctx)
        t = ctx.thread
        if np.any(local.written_epoch[flat] < 0):
            raise InterpError(f"%{inst.id}: read of never-written shared memory")
        if np.any((local.written_epoch[flat] == self.epoch) & (local.writer[flat] != t)):
            raise InterpError(f"%{inst.id}: read of shared memory another thread wrote since the last barrier")
        slots, lo, hi = _per_slot_threads(flat, t)
        reader = np.where(lo != hi, -2, lo)
        again = (local.read_epoch[slots] == self.epoch) & (local.reader[slots] != reader)
        local.reader[slots] = np.where(again, -2, reader)
        local.read_epoch[slots] = self.epoch
        self.set(inst, ctx, local.data[flat])

    def _local_store(self, inst, ctx):
        local = self.locals[inst.srcs[0].id]
        flat = self._local_slots(local, inst.srcs[1], ctx)
        t = ctx.thread
        raced = (local.written_epoch[flat] == self.epoch) & (local.writer[flat] != t)
        raced |= (local.read_epoch[flat] == self.epoch) & (local.reader[flat] != t)
        _, lo, hi = _per_slot_threads(flat, t)
        if np.any(raced) or np.any(lo != hi):
            raise InterpError(f"%{inst.id}: write to shared memory another thread used since the last barrier")
        if len(np.unique(flat)) != len(flat):
            raise InterpError(f"%{inst.id}: lanes write one shared-memory slot at once (a loop-carried dependency)")
        local.data[flat] = self.lanes(inst.srcs[2], ctx)
        local.written_epoch[flat] = self.epoch
        local.writer[flat] = t

    def _barrier(self, inst, ctx):
        if ctx.in_loop:
            raise InterpError(f"%{inst.id}: barrier inside a loop")
        counts = np.bincount(ctx.thread // self.local_threads, minlength=self.groups)
        if np.any((counts != 0) & (counts != self.local_threads)):
            raise InterpError(f"%{inst.id}: barrier not reached by every thread of a workgroup")
        self.epoch += 1

    _HANDLERS = {
        Opc.CONST: _const, Opc.PARAM: _param, Opc.SPECIAL: _special,
        Opc.RANGE: _range, Opc.ENDRANGE: _end, Opc.IF: _if, Opc.ENDIF: _end,
        Opc.LOAD: _load, Opc.GATED_LOAD: _gated_load, Opc.STORE: _store, Opc.ATOMIC: _atomic, Opc.ALU: _alu, Opc.IDIV: _idiv, Opc.MOD: _mod,
        Opc.CAST: _cast, Opc.BITCAST: _bitcast, Opc.DEFINE_ACC: _define_acc, Opc.ACC_UPDATE: _acc_update,
        Opc.ACC_READ: _acc_read, Opc.DEFINE_LOCAL: _define_local, Opc.LOCAL_LOAD: _local_load,
        Opc.LOCAL_STORE: _local_store, Opc.BARRIER: _barrier,
    }


check_exhaustive(_Interp._HANDLERS, Opc, "loop_interp")  # type: ignore[arg-type]


def run(program: LoopProgram, buffers: list[np.ndarray]) -> None:
    """Execute `program` on flat numpy buffers (one per param, modified in place)."""
    _Interp(program, buffers).run()
