"""numpy definitions of ug's composed ops, the oracles the tests compare the devices with.

Each is computed in float64 (near-exact for float32 and float16 arguments) and returns float64:
a test casts the result to the dtype it compares.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["gelu", "log_softmax", "sigmoid", "softmax"]


def sigmoid(x) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def gelu(x) -> np.ndarray:
    """GELU's tanh approximation, as ug's `Tensor.gelu` defines it."""
    x = np.asarray(x, np.float64)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def softmax(a, axis: int = -1) -> np.ndarray:
    a = np.asarray(a, np.float64)
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(a, axis: int = -1) -> np.ndarray:
    a = np.asarray(a, np.float64)
    m = a.max(axis=axis, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(axis=axis, keepdims=True))
