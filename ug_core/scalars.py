"""Python scalars in the graph: folded into a kernel's code, or passed to it as an argument.

Each distinct constant in a kernel's code makes a distinct kernel, compiled anew (tens of ms)
and kept in the compile caches. So a scalar the user gives (`x * c`, `x[i] = c`,
`full(shape, c)`, `where(m, c, x)`, `maximum(x, c)`) becomes a runtime input: a realized 0-d
BUFFER node whose one-element device buffer holds the value. The scheduler, the structure key
(structure.graph_key), ug.jit and every backend treat it as an ordinary kernel argument, so a new
value runs the kernel compiled for the last one.

Only values where folding changes the code stay in it (`folds`): 0, 1, -1, 2 and 0.5 (a backend
may turn `x * 1`, `x + 0`, `x * 2`, `x * 0.5` into less work) and every bool; and the exponent
of `x ** e` when it is an integer or a half-integer (tensor.POW_FOLDED_EXPONENTS: the lowering
turns small ones into multiplies). Constants the library builds itself (gelu's coefficients,
mean's count) use `graph.const` directly: they are always folded, and there are few of them.

The nodes are kept per (device, dtype, bits of the value) in a bounded LRU, so a value used
again (in the same graph or a later one) is the same kernel argument and the same buffer: one
argument, not two that alias (an aliased call takes a slower, separately compiled entry on cpu),
and no new allocation. Bits, not values, name an entry: -0.0 and 0.0, and NaNs with other
payloads, are different values to a kernel. A cached node must never be written: the tensor
layer gives no user a tensor on it (a 0-d `full` gets a buffer of its own).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes
from .cache import Cache
from .device import Buffer
from .env import env_int
from .graph import Node, const, from_buffer
from .ops import Op
from .plugins import registry

MAX_CACHED_SCALARS = env_int("UG_MAX_CACHED_SCALARS", 1024, minimum=0)
"""How many scalar buffers are kept (`$UG_MAX_CACHED_SCALARS`; an entry: one node and a
one-element device buffer, which on some devices is one driver allocation of a limited number).
An evicted value still works where it is in use; using it again allocates a new buffer."""

_FOLDED_VALUES = (0, 1, -1, 2, 0.5)


class _ScalarCache:
    """The kept scalar nodes by (registry generation, device name, dtype, shape, value bits), a
    `cache.Cache` of at most MAX_CACHED_SCALARS, least recently used out first (a kernel's view
    offsets are kept here too: a small 1-d array each, see kernel_params). (A device registered
    again under its name is another device, hence the generation in the key, as for the
    runtime's kept schedules.)"""

    def __init__(self) -> None:
        self.nodes: Cache[tuple[int, str, np.dtype, tuple[int, ...], bytes], Node] = Cache(
            "scalars.buffers", max_entries=MAX_CACHED_SCALARS)

    def node(self, value: np.generic | np.ndarray, device: str) -> Node:
        dtype = value.dtype
        key = (registry.generation, device, dtype, value.shape, value.tobytes())
        found = self.nodes.get(key)
        if found is not None:
            return found
        # allocate and copy outside the cache's lock: a device's copy_in may wait for queued work
        node = from_buffer(private_buffer(value, device), value.shape)
        self.nodes.put(key, node)
        return node

    def clear(self) -> None:
        self.nodes.clear()


scalar_cache = _ScalarCache()


def private_buffer(value: np.generic | np.ndarray, device: str) -> Buffer:
    """A new buffer on `device` holding `value` (of its dtype; one element for a scalar)."""
    flat = np.asarray(value).reshape(-1)
    return Buffer(registry.get(device), flat.size, value.dtype).copy_in(flat)


def folds(value: np.generic) -> bool:
    """Whether the scalar `value` stays in the kernel's code (see the module docstring)."""
    if value.dtype.kind == "b":
        return True
    if value.dtype.kind == "c":   # a complex one whose parts fold (the legalization splits it into two constants)
        return bool(value.imag == 0 and not np.signbit(value.imag) and folds(value.real))
    if value.dtype.kind == "f" and value == 0:
        return not np.signbit(value)  # +0.0 folds; -0.0 is a parameter (a renderer need not spell it)
    return bool(value in _FOLDED_VALUES)


def typed(value: Any, dtype: np.dtype) -> np.generic:
    """`value` as a numpy scalar of `dtype`, exactly where dtype holds it (dtypes.operand: a
    Python int out of an integer dtype's range is an OverflowError)."""
    return dtypes.operand(value, dtype)


def scalar(value: Any, dtype: np.dtype, device: str) -> Node:
    """The 0-d node of `dtype` for a user's scalar (a Python or numpy one, converted by `typed`;
    a write converts it with dtypes.written first): a folded constant (`folds`) or the kept
    buffer node that holds it."""
    v = typed(value, dtype)
    if folds(v):
        return const(v.item(), dtype, device)
    return scalar_cache.node(v, device)


def parameter(node: Node) -> Node:
    """`node` itself, or, when it is a 0-d constant that does not fold, the kept buffer node
    holding its value: for a user's scalar that was made a CONST to take part in dtype
    promotion and casts first (tensor_arith._binary)."""
    if node.op is not Op.CONST or node.shape != ():
        return node
    v = typed(node.arg, node.dtype)
    return node if folds(v) else scalar_cache.node(v, node.device)

