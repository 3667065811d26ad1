"""Scans (cumulative sums and products, ops.SCANS) as graphs.

A scan is one Op.SCAN node: a kernel per scan, each outer index (row) scanned in order along the
axis by one thread. A long axis over few rows would leave all but one thread idle, so it is
blocked instead, as three kernels (blocked_scan), all but a small one parallel.
"""

from __future__ import annotations

import numpy as np

from .. import graph
from ..blocked_scan import blocked
from ..graph import Node
from ..ops import Op
from ..view import prod

SPLIT_MIN_LENGTH = 1 << 16
"""A scan at least this long over at most SPLIT_MAX_ROWS rows is blocked (as long reductions are
split, see tensor_reduce.SPLIT_MIN_ELEMENTS)."""
SPLIT_MAX_ROWS = 16


def scan(x: Node, op: Op, axis: int, dtype: np.dtype) -> Node:
    """The inclusive scan of `x` (cast to `dtype`) along `axis` (normalized, of x's rank >= 1).
    The choice depends on the shape only (the graph is the same on every device); rows longer
    than a device can loop over are blocked by the scheduler's device pass."""
    x = graph.cast(x, dtype)
    n = x.shape[axis]
    rows = prod([s for d, s in enumerate(x.shape) if d != axis])
    if n < SPLIT_MIN_LENGTH or rows > SPLIT_MAX_ROWS:
        return graph.scan(x, op, axis, dtype)
    return blocked(x, op, axis, dtype)
