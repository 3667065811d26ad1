"""View offsets as kernel arguments: `x[i]` and `x[i] = v` for every i run one compiled kernel.

A view's offset (where `x[i]`, `x[a:b]` or a written region starts in its buffer) is part of
the index math the scheduler puts in a kernel, so each distinct offset would be a distinct
kernel: a loop writing `x[i] = v` for 1000 values of i compiled 1000 kernels. This pass runs
on each scheduled kernel, after every decision that looks at offsets (in-place writes, their
alignment): each load and index vector (`arange(n)[i]`) whose view chain ends at a nonzero
offset, and each store into a region at one, gets a slot in one extra input argument, a small
int32 (int64 past 2**31) buffer holding the offsets; the kernel's views start at 0 and the
lowering adds the slot's value.
The kernel's key (`Kernel.key`) then holds slots, not values, so the compile caches hit.

Offset 0 stays in the code (most kernels read whole buffers and keep their exact code), as
folded scalars do; the buffers come from the scalar cache (`scalars.scalar_cache`), so a
value used again is the same buffer.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import dag
from .graph import Node
from .kernel_ir import BufferArg, Expr, ExprBuilder, Kernel, Reduction, toposort
from .ops import Op
from .scalars import scalar_cache
from .view import View, ViewChain

_INT32 = np.iinfo(np.int32)


def _at_zero(view: View) -> View:
    return View(view.shape, view.strides, 0, view.mask)


def _moved_chain(e: Expr) -> ViewChain | None:
    """The view chain of a load or an index vector whose offset can be a slot's value, else None.
    (Not a bool index vector: that is a mask's indicator, whose offset 1 is its value, True,
    which the lowering folds into the mask's tests.)"""
    if e.op is Op.LOAD:
        return e.arg[1]
    return e.arg[0] if e.op is Op.IOTA and e.dtype != np.dtype(bool) else None


def _has_offsets(kernel: Kernel) -> bool:
    if any(s.view.offset for s in kernel.stores):
        return True
    roots = [r.expr for r in kernel.reductions] + [s.expr for s in kernel.stores]
    return any((chain := _moved_chain(e)) is not None and chain[-1].offset
               for e in dag.toposort(roots, lambda e: e.srcs))


def parametrize_offsets(kernel: Kernel, device: str) -> tuple[Kernel, Node | None]:
    """`kernel` with its nonzero buffer offsets moved into an offsets argument (appended last),
    and the node holding their values (None, and `kernel` itself, where there are none)."""
    if kernel.offsets_arg is not None or not _has_offsets(kernel):
        return kernel, None
    values: list[int] = []
    eb = ExprBuilder()
    memo: dict[int, Expr] = {}

    def rebuild(root: Expr) -> Expr:
        for e in toposort(root):  # operands first; interned nodes (one load) get one slot
            if id(e) in memo:
                continue
            chain = _moved_chain(e)
            if chain is not None:
                slot = None
                if chain[-1].offset != 0:
                    slot = len(values)
                    values.append(chain[-1].offset)
                    chain = chain[:-1] + (_at_zero(chain[-1]),)
                memo[id(e)] = eb.load(e.arg[0], chain, e.dtype, slot) if e.op is Op.LOAD else eb.iota(chain, e.dtype, slot)
            else:
                memo[id(e)] = eb.make(e.op, tuple(memo[id(s)] for s in e.srcs), e.arg, e.dtype)
        return memo[id(root)]

    reductions = tuple(Reduction(r.op, r.shape, rebuild(r.expr), r.dtype) for r in kernel.reductions)
    stores = []
    for s in kernel.stores:
        expr = rebuild(s.expr)
        if s.view.offset != 0:
            stores.append(dataclasses.replace(s, view=_at_zero(s.view), expr=expr, slot=len(values)))
            values.append(s.view.offset)
        else:
            stores.append(dataclasses.replace(s, expr=expr))
    if not values:
        return kernel, None
    # (a masked view's offset may be negative: a pad's is minus its leading width)
    dtype = np.dtype(np.int32 if _INT32.min <= min(values) and max(values) <= _INT32.max else np.int64)
    holder = scalar_cache.node(np.array(values, dtype=dtype), device)
    args = kernel.args + (BufferArg(dtype, len(values), False),)
    moved = dataclasses.replace(kernel, args=args, reductions=reductions, stores=tuple(stores),
                                offsets_arg=len(kernel.args))
    return moved, holder

