"""The `ref` device: runs the kernel IR with vectorized numpy.

It is the oracle for differential tests and the fallback when no backend is installed.
Each phase of a kernel is evaluated as whole arrays (never element by element): a LOAD
through a single view is a zero-copy `as_strided` view, a chain of views becomes a
fancy index, a reduction is one numpy reduce over the kernel's axes.
It is registered through the same hook as any external plugin (see `ug_register_devices`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import hookspecs
from .cache import Cache
from .device import Buffer, Device, DeviceSpec, Program
from .specs import FftSpec, MatmulSpec, SortSpec
from .dtypes import SUPPORTED
from .kernel_ir import Expr, Kernel, Store, toposort
from .kit.hostfft import run_numpy
from .kit.hostsort import sort_rows
from .ops import ALU, CONVERSIONS, INDEXED, LEAVES, REDUCE, SCANS, Op, check_exhaustive
from .view import View, ViewChain

VERSION = "1"

_HANDLED = set(ALU) | CONVERSIONS | LEAVES | INDEXED
check_exhaustive(_HANDLED | set(REDUCE), set(ALU) | CONVERSIONS | LEAVES | INDEXED | set(REDUCE), "ref device")


def strided(flat: np.ndarray, view: View, writeable: bool = False) -> np.ndarray:
    """The elements of a flat array seen through `view`, without copying."""
    if view.size == 0:
        return np.empty(view.shape, dtype=flat.dtype)
    item = flat.itemsize
    return as_strided(flat[view.offset:], view.shape, tuple(s * item for s in view.strides), writeable=writeable)


_INDICES: Cache[ViewChain, tuple[np.ndarray, np.ndarray]] = Cache(
    "ref.chain_indices", max_entries=512, max_bytes=64 << 20, size_of=lambda v: _owned(v[0]) + _owned(v[1]))
"""_chain_indices' results by chain: tier 0 (tiers.py) runs the same small kernels again and
again (scipy's permutation_test: hundreds of alike kernels, each loading its operands through
the same masked views), and recomputing a chain's index arrays was most of each run."""


def _owned(a: np.ndarray) -> int:
    """The bytes of the memory under `a` (a broadcast view's nbytes counts every repeat)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a.nbytes


def _chain_indices(chain: ViewChain) -> tuple[np.ndarray, np.ndarray]:
    """(linear source index, valid) for every index of chain[0].shape: where a view's mask
    rejects the index, valid is False and the linear index is 0. The arrays are shared
    (cached): read-only."""
    found = _INDICES.get(chain)
    if found is None:
        found = _compute_chain_indices(chain)
        for a in found:
            a.flags.writeable = False
        _INDICES.put(chain, found)
    return found


def _compute_chain_indices(chain: ViewChain) -> tuple[np.ndarray, np.ndarray]:
    first = chain[0]
    ndim = len(first.shape)
    linear: Any = np.int64(first.offset)
    valid: Any = np.bool_(not first.is_void)
    for d, (size, stride, (lo, hi)) in enumerate(zip(first.shape, first.strides, first.valid_ranges())):
        i = np.arange(size, dtype=np.int64).reshape((1,) * d + (size,) + (1,) * (ndim - d - 1))
        if stride:
            linear = linear + i * stride
        if (lo, hi) != (0, size):
            valid = valid & (lo <= i) & (i < hi)
    linear = np.broadcast_to(np.where(valid, linear, 0), first.shape)
    for view in chain[1:]:
        out: Any = np.int64(view.offset)
        rest = linear
        valid = valid & np.bool_(not view.is_void)
        for size, stride, cstride, (lo, hi) in zip(view.shape, view.strides, View.contiguous(view.shape).strides,
                                                   view.valid_ranges()):
            if size == 1:
                continue
            digit, rest = np.divmod(rest, cstride) if cstride else (rest, rest)
            out = out + digit * stride
            if (lo, hi) != (0, size):
                valid = valid & (lo <= digit) & (digit < hi)
        linear = np.broadcast_to(np.where(valid, out, 0), first.shape)
    return linear, np.broadcast_to(valid, first.shape)


def _load(flat: np.ndarray, chain: ViewChain) -> np.ndarray:
    if len(chain) == 1 and chain[0].mask is None:
        return strided(flat, chain[0])
    linear, valid = _chain_indices(chain)
    if not valid.any():
        return np.zeros(chain[0].shape, flat.dtype)
    return np.where(valid, flat[linear], flat.dtype.type(0))


def _iota(chain: ViewChain, dtype: np.dtype) -> np.ndarray:
    linear, _ = _chain_indices(chain)
    return linear.astype(dtype)   # (a copy: the cached indices stay read-only)


def _moved(view: View, slot: int | None, offsets: list[int]) -> View:
    """`view` with the runtime offset of its slot added (Kernel.offsets_arg)."""
    return view if slot is None else View(view.shape, view.strides, view.offset + offsets[slot], view.mask)


def _evaluate(root: Expr, arrays: list[np.ndarray], accs: list[np.ndarray], offsets: list[int]) -> np.ndarray:
    order = toposort(root)
    # readers left per node: an intermediate array is dropped after its last read, so a long
    # expression holds a few whole arrays at a time, not one per node
    readers: dict[int, int] = {}
    for node in order:
        for src in node.srcs:
            readers[id(src)] = readers.get(id(src), 0) + 1
    memo: dict[int, np.ndarray] = {}
    for node in order:
        op = node.op
        if op is Op.LOAD:
            buf, chain, slot = node.arg
            value = _load(arrays[buf], chain[:-1] + (_moved(chain[-1], slot, offsets),))
        elif op is Op.CONST:
            value = np.array(node.arg, dtype=node.dtype)
        elif op is Op.IOTA:
            chain, slot = node.arg
            value = _iota(chain[:-1] + (_moved(chain[-1], slot, offsets),), node.dtype)
        elif op is Op.ACC:
            value = accs[node.arg]
        elif op is Op.SCATTER:
            raise AssertionError("a SCATTER is a store's root (see _scatter)")
        elif op is Op.GATHER:  # (the element is in range: the scheduler clamped it)
            value = arrays[node.arg][memo[id(node.srcs[0])]]
        elif op is Op.CAST:
            value = _cast(memo[id(node.srcs[0])], node.dtype)
        elif op is Op.BITCAST:
            value = np.ascontiguousarray(memo[id(node.srcs[0])]).view(node.dtype)
        else:
            value = ALU[op].numpy(*(memo[id(s)] for s in node.srcs))
            value = np.asarray(value).astype(node.dtype, copy=False)
        memo[id(node)] = value
        for src in node.srcs:
            left = readers[id(src)] = readers[id(src)] - 1
            if left == 0:
                del memo[id(src)]
    return memo[id(root)]


def _cast(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """numpy's astype; of a complex value to a real dtype, its real part (numpy's, without its
    ComplexWarning), to bool its truth (either part nonzero)."""
    if value.dtype.kind == "c" and dtype.kind == "b":
        return value != 0
    if value.dtype.kind == "c" and dtype.kind != "c":
        value = value.real
    return value.astype(dtype)


_AT = {Op.SUM: np.add, Op.PROD: np.multiply, Op.RMAX: np.maximum, Op.RMIN: np.minimum}


def _scatter(s: Store, arrays: list[np.ndarray], accs: list[np.ndarray], offsets: list[int]) -> None:
    """A scatter store: each outer index's row filled with the identity, then combined with its
    values in order (ufunc.at is unbuffered and in order; a float max/min goes element by
    element, with ug's NaN and signed-zero rules)."""
    root = s.scatter
    assert root is not None
    rop, slots, identity = root.arg
    out = arrays[s.buf]
    slot, value = (np.broadcast_to(_evaluate(e, arrays, accs, offsets), s.shape) for e in root.srcs)
    value = value.astype(out.dtype)
    rows = out.reshape(-1, slots)
    rows[...] = identity
    combine = ALU[REDUCE[rop].combine].numpy
    for p in range(rows.shape[0]):
        if rop in (Op.SUM, Op.PROD) or out.dtype.kind != "f":
            _AT[rop].at(rows[p], slot[p], value[p])
        else:
            for k, v in zip(slot[p], value[p]):
                rows[p, k] = combine(rows[p, k], v)


def run_kernel(kernel: Kernel, arrays: list[np.ndarray]) -> None:
    """Execute a kernel on flat host arrays (one per argument)."""
    accs: list[np.ndarray] = []
    offsets = [] if kernel.offsets_arg is None else [int(v) for v in arrays[kernel.offsets_arg]]
    with np.errstate(all="ignore"):
        for r in kernel.reductions:
            value = np.broadcast_to(_evaluate(r.expr, arrays, accs, offsets), r.shape)
            accs.append(REDUCE[r.op].numpy(value, kernel.axes, True, r.dtype))
        for s in kernel.stores:
            if s.scatter is not None:
                _scatter(s, arrays, accs, offsets)
                continue
            value = np.broadcast_to(_evaluate(s.expr, arrays, accs, offsets), s.shape)
            if s.scan is not None:
                (axis,) = kernel.axes
                value = SCANS[s.scan](value, axis, value.dtype)
            if s.view.size:
                strided(arrays[s.buf], _moved(s.view, s.slot, offsets), writeable=True)[...] = value


class RefDevice(Device):
    name = "ref"
    version = VERSION
    dtypes = frozenset(SUPPORTED)

    def __init__(self) -> None:
        self._allocated = 0

    def allocate(self, nbytes: int) -> np.ndarray:
        self._allocated += nbytes
        return np.empty(nbytes, dtype=np.uint8)

    def free(self, handle: np.ndarray) -> None:
        self._allocated -= handle.nbytes

    def copy_in(self, handle: np.ndarray, src: np.ndarray) -> None:
        handle[: src.nbytes] = src.view(np.uint8).reshape(-1)

    def copy_out(self, handle: np.ndarray, dst: np.ndarray) -> None:
        dst.view(np.uint8).reshape(-1)[...] = handle[: dst.nbytes]

    def host_view(self, handle: np.ndarray, nbytes: int) -> np.ndarray:
        return handle[:nbytes]

    def wrap_host(self, array: np.ndarray) -> np.ndarray:
        return array.reshape(-1).view(np.uint8)

    def compile(self, kernel: Kernel) -> Program:
        return Program(kernel.name, kernel, source=str(kernel))

    def run(self, program: Program, buffers: list[Buffer]) -> None:
        run_kernel(program.handle, [self.array(b) for b in buffers])

    def matmul(self, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec) -> None:
        result = np.matmul(strided(self.array(a), spec.a_view), strided(self.array(b), spec.b_view))
        self.array(out)[...] = result.reshape(-1)

    def sort(self, out: Buffer, src: Buffer, spec: SortSpec) -> None:
        sort_rows(self.array(src).reshape(spec.rows, spec.n), self.array(out).reshape(spec.rows, spec.k), spec)

    def fft(self, out: Buffer, src: Buffer, spec: FftSpec) -> None:
        run_numpy(self.array(src), self.array(out), spec, wide=True)

    def memory_usage(self) -> int:
        return self._allocated

    @staticmethod
    def array(buffer: Buffer) -> np.ndarray:
        """The buffer's bytes as a flat typed array (no copy)."""
        return buffer.handle[: buffer.size * buffer.dtype.itemsize].view(buffer.dtype)


@hookspecs.hookimpl
def ug_register_devices(register: Any) -> None:
    register(DeviceSpec(name="ref", factory=RefDevice, plugin="ug_core.ref", version=VERSION, priority=1000,
                        description="numpy reference device (oracle and fallback)"))
