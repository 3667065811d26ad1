"""dropout: zero elements at random (a ug.random key says which), scale the rest by 1 / (1 - p)."""

from __future__ import annotations

import numbers

import numpy as np

from .. import random as _random
from ..tensor import Tensor
from ..tensor_arith import where


def dropout(key: Tensor, x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """x with each element zeroed with probability p and the others scaled by 1 / (1 - p), so the
    expectation is x's (inverted dropout, as torch's and flax's). The mask is
    `ug.random.bernoulli(key, 1 - p, x.shape)`: computed in the kernel that reads x, the same for
    the same key on every device. training=False or p=0: x's value (a new tensor); p=1: zeros.
    Differentiable in x (the gradient is the same mask and scale)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"dropout: x must be a ug tensor, got {type(x).__name__}")
    if x.dtype.kind != "f":
        raise TypeError(f"dropout: x must be a float tensor, got dtype {x.dtype}")
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, numbers.Real):
        raise TypeError(f"dropout: p must be a number in [0, 1], got {p!r}")
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p!r}")
    _random._check_key(key, "dropout")   # (checked even when not training: a wrong key is a bug either way)
    if not training or float(p) == 0.0:
        return Tensor(x.node)
    keep = _random.bernoulli(key, 1.0 - float(p), x.shape)   # (p = 1: never True)
    scale = 1.0 / (1.0 - float(p)) if float(p) < 1.0 else 0.0
    return where(keep, x * scale, 0.0)
