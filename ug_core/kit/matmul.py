"""The core's matmul, as a kernel: what a kit device runs unless it brings a faster one.

out[b..., m, n] = sum_k a[b..., m, k] * b[b..., k, n] is one reduction over the index space
(b..., m, n, k): each operand is read through its view with a stride-0 dim for the index it
does not have. The lowering makes it a loop over k per output element (cpu) or a workgroup
per row (gpu): correct on any device, with none of a tuned GEMM's blocking.
"""

from __future__ import annotations

from ..specs import MatmulSpec
from ..kernel_ir import BufferArg, ExprBuilder, Kernel, Reduction, Store
from ..ops import Op
from ..view import View, contiguous_strides, prod


def matmul_kernel(spec: MatmulSpec, a_size: int, b_size: int) -> Kernel:
    """The kernel computing `spec` into argument 0 from arguments 1 (a) and 2 (b), whose
    buffers hold `a_size` and `b_size` elements."""
    out_shape, dtype = spec.out_shape, spec.dtype
    av, bv = spec.a_view, spec.b_view
    k = av.shape[-1]
    space = out_shape + (k,)
    a_in = View(space, av.strides[:-1] + (0, av.strides[-1]), av.offset)   # (b..., m, [n], k)
    b_in = View(space, bv.strides[:-2] + (0, bv.strides[-1], bv.strides[-2]), bv.offset)  # (b..., [m], n, k)
    eb = ExprBuilder()
    product = eb.alu(Op.MUL, (eb.load(1, (a_in,), dtype), eb.load(2, (b_in,), dtype)), dtype)
    outer = out_shape + (1,)
    rank = len(space)
    reduction = Reduction(Op.SUM, space, product, dtype)
    store = Store(0, outer, View(outer, contiguous_strides(outer)), eb.acc(0, dtype))
    args = (BufferArg(dtype, prod(out_shape), True), BufferArg(dtype, a_size, False), BufferArg(dtype, b_size, False))
    dims = "_".join(map(str, out_shape)) or "scalar"
    return Kernel(f"matmul_{dims}_{k}", args, outer, (rank - 1,), (reduction,), (store,))
