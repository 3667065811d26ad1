"""ug.random's permutations: `permutation` (a shuffle by sorting random keys) and `choice`."""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from .. import graph
from ..array_api import aliasing as _aliasing
from ..array_api.indexing import take
from ..array_api.searching import searchsorted
from ..array_api.sorting import argsort
from ..tensor import Tensor
from .distributions import gumbel, randint, uniform
from .threefry import I64, _bits, _check_key, _shape, split

__all__ = ["permutation", "choice"]

# --- permutations --------------------------------------------------------------------------------

def _shuffled(k: Tensor, x: Tensor) -> Tensor:
    """x (1-d) in a random order: JAX's _shuffle, sorting by random 32-bit keys (stable), as many
    rounds as make ties between 32-bit keys unlikely (one round up to 1625 elements)."""
    n = x.shape[0]
    rounds = int(np.ceil(3 * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        k, sub = split(k)
        x = take(x, argsort(_bits(sub, (n,), 32), stable=True), axis=0)
    return x


def permutation(key: Tensor, x: int | Tensor, axis: int = 0) -> Tensor:
    """A random permutation of range(x) (an int: int64 values), or x's slices along `axis` in a
    random order (JAX's `random.permutation`, one order for the whole axis)."""
    k = _check_key(key, "permutation")
    if isinstance(x, Tensor):
        if x.ndim == 0:
            raise ValueError("ug.random.permutation: x must be an int or a tensor of at least 1 dimension, "
                             "got a 0-d tensor")
        ax = operator.index(axis)
        if not -x.ndim <= ax < x.ndim:
            raise ValueError(f"ug.random.permutation: axis {axis} is out of range for shape {x.shape}")
        ax %= x.ndim
        order = _shuffled(k, Tensor(graph.iota((x.shape[ax],), I64, k.device)))
        return take(x, order, axis=ax)
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"ug.random.permutation: x must be an int or a tensor, got {x!r}")
    if int(x) < 0:
        raise ValueError(f"ug.random.permutation: x must be >= 0, got {x}")
    return _shuffled(k, Tensor(graph.iota((int(x),), I64, k.device)))


def choice(key: Tensor, a: int | Tensor, shape: Any = (), replace: bool = True, p: Tensor | None = None,
           axis: int = 0) -> Tensor:
    """Random elements of range(a) (an int) or slices of a along `axis`, as JAX's `random.choice`:
    with replacement, uniform (randint) or by the probabilities p (a cumulative sum searched with
    uniform numbers); without, the first of a permutation, or with p the `draws` largest of
    gumbel + log(p) (the Gumbel top-k trick: a sample without replacement by weights)."""
    k = _check_key(key, "choice")
    shp = _shape(shape)
    if isinstance(a, Tensor):
        if a.ndim == 0:
            raise ValueError("ug.random.choice: a must be an int or a tensor of at least 1 dimension")
        ax = operator.index(axis)
        if not -a.ndim <= ax < a.ndim:
            raise ValueError(f"ug.random.choice: axis {axis} is out of range for shape {a.shape}")
        ax %= a.ndim
        n = a.shape[ax]
    else:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"ug.random.choice: a must be an int or a tensor, got {a!r}")
        n, ax = int(a), 0
    draws = math.prod(shp)
    if n <= 0 and draws > 0:
        raise ValueError(f"ug.random.choice: cannot take a sample from an empty set (a = {a!r})")
    if not replace and draws > n:
        raise ValueError(f"ug.random.choice: cannot take {draws} samples from {n} without replacement")
    if p is not None:
        if not isinstance(p, Tensor) or p.shape != (n,) or p.dtype.kind != "f":
            raise ValueError(f"ug.random.choice: p must be a float tensor of shape ({n},), got "
                             f"{getattr(p, 'dtype', type(p).__name__)} {getattr(p, 'shape', '')}")
        if not replace:
            g = -gumbel(k, (n,), p.dtype) - p.log()
            index = argsort(g, stable=True)[:draws].reshape(shp)
            return index if not isinstance(a, Tensor) else \
                take(a, index.reshape(-1), axis=ax).reshape(a.shape[:ax] + shp + a.shape[ax + 1:])
        cumulative = p.cumsum()
        r = cumulative[-1] * (1.0 - uniform(k, shp, p.dtype))
        index = searchsorted(cumulative, r).astype(I64)
    elif replace:
        index = randint(k, shp, 0, n, I64) if n > 0 else Tensor(graph.const(0, I64, k.device, shp))
    else:
        index = permutation(k, n)[:draws].reshape(shp)
    if not isinstance(a, Tensor):
        return index
    return take(a, index.reshape(-1), axis=ax).reshape(a.shape[:ax] + shp + a.shape[ax + 1:])


_aliasing.apply(globals(), __all__)   # numpy's aliasing rule: every result is a value of its own
