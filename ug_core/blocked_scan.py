"""A scan as three kernels: the blocked form of a scan along a long axis (see array_api.scans).

    totals[k]  = combine of block k                      (a reduction over each block)
    prefix[k]  = combine of totals[0 .. k-1]             (a scan of the totals shifted by one)
    out[k, j]  = scan of block k, seeded: its first value combined with prefix[k] first

Every kernel is parallel but the small second. Two callers build it: the frontend, for a long
axis over few rows (parallelism, the same on every device), and the scheduler's device pass, for
rows longer than a device can loop over (Device.max_loop_iterations). The blocked order rounds
differently from numpy's sequential one, within what ops.SCANS allows.
"""

from __future__ import annotations

import math

import numpy as np

from . import graph
from .dtypes import BOOL, identity
from .graph import Node
from .ops import Op, REDUCE
from .view import View


def block_length(n: int) -> int:
    """The block length of a blocked scan of `n` values: about sqrt(n) (as many blocks as values
    in each, which bounds the rounding error of both the prefix and the blocks' scans), a
    divisor of n where one is near, so that the result needs no padding and no copy."""
    target = 1 << (math.isqrt(n) - 1).bit_length()
    return next((b for b in range(target, target // 4, -1) if n % b == 0), target)


def _first_of_block(node: Node, shape: tuple[int, ...]) -> Node:
    """`node` (shape[:-1] + (1,)) read at index 0 of the last dim of `shape`, 0 (False) elsewhere."""
    widths = ((0, 0),) * (len(shape) - 1) + ((0, shape[-1] - 1),)
    return graph.view(node, View.contiguous(node.shape).pad(widths))


def blocked(x: Node, op: Op, axis: int, dtype: np.dtype) -> Node:
    shape, rank = x.shape, len(x.shape)
    n = shape[axis]
    block = block_length(n)
    blocks = -(-n // block)
    padded = blocks * block
    keep = [d for d in range(rank) if d != axis]
    kept = tuple(shape[d] for d in keep)
    k = len(kept)  # the blocks' dim; k + 1 is the dim along each block
    last = View.contiguous(shape).permute(tuple(keep + [axis]))
    if padded > n:  # zeros behind the end: they reach only the outputs that are dropped
        last = last.pad(((0, 0),) * k + ((0, padded - n),))
    rows = graph.view(graph.view(x, last), View.contiguous(kept + (blocks, block)))
    totals = graph.reduce(rows, op, (k + 1,), dtype)  # kept + (blocks, 1)
    # the totals shifted one block on: the first block's reads the identity
    ones = (1,) * (k + 2)
    before = View.contiguous(totals.shape).pad(((0, 0),) * k + ((1, 0), (0, 0))).slice((0,) * (k + 2), totals.shape, ones)
    shifted = graph.view(totals, before)
    # a masked view reads 0: a sum's identity, but another's (a product's 1, a max's -inf) is
    # selected where it reads nothing
    unit = identity(REDUCE[op].name, dtype)
    if op is not Op.SUM:
        valid = graph.view(graph.const(True, BOOL, x.device, totals.shape), before)
        shifted = graph.alu(Op.WHERE, (valid, shifted, graph.const(unit, dtype, x.device, totals.shape)), dtype)
    seed = _first_of_block(graph.scan(shifted, op, k, dtype), rows.shape)
    if op is not Op.SUM:
        first = _first_of_block(graph.const(True, BOOL, x.device, totals.shape), rows.shape)
        seed = graph.alu(Op.WHERE, (first, seed, graph.const(unit, dtype, x.device, rows.shape)), dtype)
    out = graph.scan(graph.alu(REDUCE[op].combine, (rows, seed), dtype), op, k + 1, dtype)
    flat = graph.view(out, View.contiguous(kept + (padded,)))
    if padded > n:
        flat = graph.view(flat, View.contiguous(flat.shape).slice((0,) * (k + 1), kept + (n,), (1,) * (k + 1)))
    inverse = tuple(int(i) for i in np.argsort(keep + [axis]))
    return graph.view(flat, View.contiguous(flat.shape).permute(inverse))
