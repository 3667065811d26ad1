"""ug.random's generator: Threefry-2x32, the keys (`key`, `split`, `fold_in`) and the raw
random bits every distribution is made from (see the package's doc for the counter scheme)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import dtypes, graph, scalars
from ..array_api import aliasing as _aliasing
from ..array_api.manipulation import stack
from ..shapes import shape_arg
from ..tensor import Tensor, resolve_device, tensor

__all__ = ["key", "split", "fold_in", "bits"]

U32, U64 = np.dtype(np.uint32), np.dtype(np.uint64)
I32, I64 = np.dtype(np.int32), np.dtype(np.int64)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_UINTS: dict[int, np.dtype] = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: U32, 64: U64}


# --- arguments ---------------------------------------------------------------------------------

def _check_key(k: Any, fn: str) -> Tensor:
    """The key as a uint32 tensor of shape (2,); anything else is a TypeError / ValueError naming it."""
    if not isinstance(k, Tensor):
        raise TypeError(f"ug.random.{fn}: key must be a ug tensor made by ug.random.key (uint32, shape (2,)), "
                        f"got {type(k).__name__}")
    if k.dtype != U32:
        raise TypeError(f"ug.random.{fn}: key must be uint32 (from ug.random.key), got dtype {k.dtype}")
    if k.shape != (2,):
        raise ValueError(f"ug.random.{fn}: key must have shape (2,), got shape {k.shape} "
                         f"(split(key, n) gives n keys: pass them one at a time, key[i])")
    return k


def _shape(shape: Any) -> tuple[int, ...]:
    return () if shape is None else shape_arg(shape)


def _c(value: Any, dtype: np.dtype, device: str) -> Tensor:
    """A constant folded into the kernel's code (the generator's own constants: few, fixed)."""
    return Tensor(graph.const(value, dtype, device))


# --- Threefry-2x32 -----------------------------------------------------------------------------

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA


def threefry2x32(k0: Tensor, k1: Tensor, x0: Tensor, x1: Tensor) -> tuple[Tensor, Tensor]:
    """Threefry-2x32, 20 rounds, of the counters (x0, x1) under the key words (k0, k1): uint32
    tensors that broadcast together. Random123's and JAX's `threefry2x32_p`."""
    dev = x0.device

    def rotl(x: Tensor, r: int) -> Tensor:
        return (x << _c(r, U32, dev)) | (x >> _c(32 - r, U32, dev))

    ks = (k0, k1, k0 ^ k1 ^ _c(_PARITY, U32, dev))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = rotl(x1, r) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + (ks[(i + 2) % 3] + _c(i + 1, U32, dev))
    return x0, x1


def _words(k: Tensor) -> tuple[Tensor, Tensor]:
    return k[0], k[1]


def _counters(shape: tuple[int, ...], device: str) -> tuple[Tensor, Tensor]:
    """Each element's flat (row-major) position as (high, low) uint32 words (JAX's iota_2x32_shape)."""
    n = math.prod(shape)
    if n <= 2**32:
        return _c(0, U32, device), Tensor(graph.iota(shape, U32, device))
    if n > 2**63:
        raise ValueError(f"ug.random: {n} random values (shape {shape}) is more than 2**63")
    i = Tensor(graph.iota(shape, I64, device))
    return (i >> _c(32, I64, device)).astype(U32), (i & _c(0xFFFFFFFF, I64, device)).astype(U32)


def _bits(k: Tensor, shape: tuple[int, ...], width: int) -> Tensor:
    hi, lo = _counters(shape, k.device)
    k0, k1 = _words(k)
    b0, b1 = threefry2x32(k0, k1, hi, lo)
    if width == 64:
        return (b0.astype(U64) << _c(32, U64, k.device)) | b1.astype(U64)
    out = b0 ^ b1
    if out.shape != shape:   # (a 0-d key word broadcast against a 0-d counter: shape ())
        out = out.reshape(shape)
    return out if width == 32 else out.astype(_UINTS[width])


# --- keys ----------------------------------------------------------------------------------------

def key(seed: int, device: str | None = None) -> Tensor:
    """A key (uint32, shape (2,)) from an integer seed: its high and low 32-bit words, as JAX's
    `random.PRNGKey(seed)` (seed in [-2**63, 2**64); a negative one taken mod 2**64, as JAX with
    64-bit ints)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"ug.random.key: seed must be an int, got {seed!r} ({type(seed).__name__})")
    s = int(seed)
    if not -2**63 <= s < 2**64:
        raise ValueError(f"ug.random.key: seed {s} is outside [-2**63, 2**64)")
    s %= 2**64
    return tensor(np.array([s >> 32, s & 0xFFFFFFFF], U32), device=resolve_device(device))


def split(key: Tensor, num: int | tuple[int, ...] = 2) -> Tensor:
    """`num` new keys from `key`, shape (num, 2) (or (*num, 2) for a shape): JAX's `random.split`,
    key i being Threefry(key, i)."""
    k = _check_key(key, "split")
    shape = _shape(num)
    k0, k1 = _words(k)
    hi, lo = _counters(shape, k.device)
    b0, b1 = threefry2x32(k0, k1, hi, lo)
    return stack([b0.reshape(shape) if b0.shape != shape else b0, b1.reshape(shape) if b1.shape != shape else b1],
                 axis=len(shape))


def fold_in(key: Tensor, data: int | Tensor) -> Tensor:
    """A new key from `key` and an integer (a step number, a layer index...), as JAX's
    `random.fold_in`: Threefry(key, (0, data as uint32)). `data`: a Python int in
    [-2**31, 2**32) or a 0-d integer tensor (cast to uint32, wrapping)."""
    k = _check_key(key, "fold_in")
    if isinstance(data, Tensor):
        if data.shape != () or data.dtype.kind not in "iu":
            raise TypeError(f"ug.random.fold_in: data must be an int or a 0-d integer tensor, "
                            f"got a {data.dtype} tensor of shape {data.shape}")
        d = data.to(k.device).astype(U32) if data.device != k.device else data.astype(U32)
    else:
        if isinstance(data, (bool, np.bool_)) or not isinstance(data, (int, np.integer)):
            raise TypeError(f"ug.random.fold_in: data must be an int, got {data!r}")
        if not -2**31 <= int(data) < 2**32:
            raise ValueError(f"ug.random.fold_in: data {int(data)} is outside [-2**31, 2**32)")
        # a kernel argument, not code: fold_in(key, step) for each step reuses one compiled kernel
        d = Tensor(scalars.scalar(int(data) % 2**32, U32, k.device))
    k0, k1 = _words(k)
    b0, b1 = threefry2x32(k0, k1, _c(0, U32, k.device), d)
    return stack([b0, b1])


# --- bits, uniform -------------------------------------------------------------------------------

def bits(key: Tensor, shape: Any = (), dtype: Any = U32) -> Tensor:
    """Random bits of an unsigned dtype (uint8, uint16, uint32, uint64), as JAX's `random.bits`."""
    k = _check_key(key, "bits")
    dt = dtypes.to_dtype(dtype)
    if dt.kind != "u":
        raise TypeError(f"ug.random.bits: dtype must be an unsigned int dtype, got {dt}")
    return _bits(k, _shape(shape), dt.itemsize * 8)


_aliasing.apply(globals(), __all__)   # numpy's aliasing rule: every result is a value of its own
