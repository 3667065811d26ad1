"""Small matmuls as an ordinary reduction kernel.

For a few thousand multiply-adds the packed gemm is all overhead: two packing passes into
NR-wide panels, edge tiles through the stack, workspaces, a context array (27 us for 8 x 8 x 8
through ug.jit, against 4.4 us for the same product written as `(a[..., None] * b).sum()`).
So the device runs them as the kernel the scheduler would build for that expression: the index
space (batch..., m, k, n) with k reduced, n innermost (so the cpu lowering vectorizes over
columns), reading A and B through their matmul views. It goes through the normal compile path
(lowering, LLVM, disk cache) like any other kernel.
"""

from __future__ import annotations

import numpy as np

from ug_core.kit import (BufferArg, ExprBuilder, Kernel, MatmulSpec, Op, Reduction, Store, View, chain_push,
                         contiguous_strides)

# at most this many multiply-adds (batch * m * n * k) a matmul runs as a reduction kernel:
# measured through ug.jit on this machine, 8^3 4.4 us against 37 us for the packed gemm,
# 16^3 14 us against 39 us, 32^3 68 us against 50 us
SMALL_MATMUL_MACS = 1 << 13


def matmul_kernel(spec: MatmulSpec, out_size: int, a_size: int, b_size: int) -> Kernel:
    """out[batch..., i, j] = sum_k a[batch..., i, k] * b[batch..., k, j], all in spec.dtype
    (the caller checks that the operands have it), read through spec.a_view / spec.b_view
    (buffers of a_size / b_size elements)."""
    *batch_list, m, k = spec.a_view.shape
    n = spec.b_view.shape[-1]
    batch = tuple(batch_list)
    space = batch + (m, k, n)
    outer = batch + (m, 1, n)
    dtype = np.dtype(spec.dtype)
    ca = contiguous_strides(batch + (m, k))
    cb = contiguous_strides(batch + (k, n))
    co = contiguous_strides(batch + (m, n))
    # index (batch..., i, kk, j) -> the contiguous layout of each view's shape -> the buffer
    a_chain = chain_push((View(space, ca[:-2] + (ca[-2], ca[-1], 0)),), spec.a_view)
    b_chain = chain_push((View(space, cb[:-2] + (0, cb[-2], cb[-1])),), spec.b_view)
    eb = ExprBuilder()
    product = eb.alu(Op.MUL, (eb.load(1, a_chain, dtype), eb.load(2, b_chain, dtype)), dtype)
    reduction = Reduction(Op.SUM, space, product, dtype)
    store = Store(0, outer, View(outer, co[:-1] + (0, co[-1])), eb.acc(0, dtype))
    args = (BufferArg(dtype, out_size, True), BufferArg(dtype, a_size, False), BufferArg(dtype, b_size, False))
    dims = "_".join(str(d) for d in batch + (m, n))
    return Kernel(f"mm_{dims}", args, outer, (len(batch) + 1,), (reduction,), (store,))
