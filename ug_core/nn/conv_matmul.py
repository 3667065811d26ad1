"""The im2col matmuls of a convolution with their own gradients (see conv.py).

- Where the device's matmul reads split operands (MatmulSpec.b_split, the cpu's gemm), a
  stride-1 2-d convolution computes its output over whole rows of the input (`_whole_row_cols`,
  the extra columns cropped off): the im2col matrix is then a view the matmul reads in place,
  and neither the product nor the weight's gradient reads a copy of it.
- The weight's gradient of the im2col form is (cols @ g^T)^T (`_weight_dims_vjp`): the gemm's
  faster orientation.
"""

from __future__ import annotations

from ..array_api.manipulation import flip, pad
from ..autodiff import define_vjp
from ..plugins import registry
from ..tensor import Tensor
from ..tensor_arith import matmul
from ..view import View


def _whole_rows(xp: Tensor, nd: int, stride: tuple[int, ...]) -> bool:
    """Whether a 2-d convolution computes its output over whole rows of the (padded) input and
    lets the matmul read the im2col matrix in place (_whole_row_cols): stride 1, on a device
    whose matmul reads split operands (MatmulSpec.b_split)."""
    return nd == 2 and stride == (1, 1) and registry.get(xp.device).reads_split_operands()


def _whole_row_cols(xq: Tensor, kernel: tuple[int, ...], dilation: tuple[int, ...], oh: int, groups: int) -> Tensor:
    """The im2col matrix of a stride-1 2-d convolution as a view of xq (N, C, H, W), positions
    over whole rows: (N, groups, C / groups * kh * kw, oh * W), element (g, (c, i, j), y * W + x)
    = xq[g * C / groups + c, y + i * dh, x + j * dw] for every x < W (the last (kw - 1) * dw of
    each row read on into the next row, and past the last one into rows below that xq must have:
    those columns of the product are cropped off). Its positions are one dim of stride 1, its
    rows (c, i, j) a split operand (MatmulSpec.b_split)."""
    n, c, hq, w = xq.shape
    (kh, kw), (dh, dw) = kernel, dilation
    view = View((n, groups, c // groups, kh, kw, oh * w), (c * hq * w, c // groups * hq * w, hq * w, dh * w, dw, 1))
    cols = xq.reshape(n, c, hq * w)._view(view, writeable=False)
    return cols.reshape(n, groups, c // groups * kh * kw, oh * w)


def _whole_row_conv(xp: Tensor, wm: Tensor, bias: Tensor | None, kernel: tuple[int, ...], dilation: tuple[int, ...],
                    outs: tuple[int, ...]) -> Tensor:
    """A stride-1 2-d convolution of xp (N, C, H, W, padded) with wm (groups, O / groups, taps)
    computed over whole rows of xp (_whole_row_cols): the matmul reads the im2col matrix in place
    instead of a copy prod(kernel) times the image's size (conv2 of `ug bench`'s T2: 21 MB
    written and read twice a step), and the extra columns are cropped off. xp gets the zero rows
    below that the last windows read. Its own VJP: the weight's gradient is (cols @ g^T)^T on the
    whole-row cotangent (zeros in the cropped columns); the input's is the full correlation of
    that cotangent with the flipped kernel, another whole-row convolution read in place, so
    neither W^T @ g (prod(kernel) times the image: 23 MB for T2's conv2) nor its col2im is ever
    stored (single thread: 4.9 + 2.5 ms -> 4.7 ms). The bias's gradient sums the whole-row cotangent, which the matmuls read from a
    buffer (summing the cropped one recomputed the expression that gives it in the reduction)."""
    n, c, h, w = xp.shape
    groups, o_g, taps = wm.shape
    (kh, kw), (dh, dw) = kernel, dilation
    oh, ow = outs
    extra = -(-((kw - 1) * dw) // w)
    xq = pad(xp, [(0, 0), (0, 0), (0, extra), (0, 0)]) if extra else xp
    hq = h + extra
    prod = matmul(wm, _whole_row_cols(xq, kernel, dilation, oh, groups))   # (N, groups, O/g, oh * W)
    out = prod.reshape(n, groups * o_g, oh, w)[..., :ow]
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)

    def vjp(g: Tensor, out: Tensor, wm: Tensor, xq: Tensor, *bias: Tensor) -> tuple[Tensor, ...]:
        # the cotangent over whole rows (zeros in the cropped columns), flat per channel, with
        # `front` zeros before it and zeros after, as far as the input's gradient below reads
        front = (kh - 1) * dh * w + (kw - 1) * dw
        length = hq * w + front
        flat = pad(g, [(0, 0), (0, 0), (0, 0), (0, w - ow)]).reshape(n, groups * o_g, oh * w)
        gp = pad(flat, [(0, 0), (0, 0), (front, length - front - oh * w)])
        wide = gp[..., front:front + oh * w].reshape(n, groups, o_g, oh * w)
        cols = _whole_row_cols(xq, kernel, dilation, oh, groups)
        dw_ = matmul(cols, wide.mT).mT.sum(axis=0)                          # (groups, O/g, taps)
        # the input's gradient: the full correlation of the cotangent with the flipped kernel,
        # itself a whole-row convolution over gp (rows (o, i, j) read gp at q + i * dh * W + j * dw
        # for the flipped tap), which the matmul reads in place as a split operand too
        taps_t = gp.reshape(n, groups, o_g, length)._view(
            View((n, groups, o_g, kh, kw, hq * w), (groups * o_g * length, o_g * length, length, dh * w, dw, 1)),
            writeable=False).reshape(n, groups, o_g * kh * kw, hq * w)
        flipped = flip(wm.reshape(groups, o_g, c // groups, kh, kw), axis=(3, 4)).permute(0, 2, 1, 3, 4)
        dx = matmul(flipped.reshape(groups, c // groups, o_g * kh * kw), taps_t).reshape(n, c, hq, w)
        if not bias:
            return dw_, dx
        # (the positions' sums first: one reduction over axes (0, 3) took 0.59 ms on T2's conv2
        # cotangent, these two 0.22)
        return dw_, dx, wide.sum(axis=3).sum(axis=0).reshape(groups * o_g)
    return define_vjp(out, [wm, xq] + ([bias] if bias is not None else []), vjp)


def _weight_dims_vjp(g: Tensor, out: Tensor, w: Tensor, cols: Tensor) -> tuple[Tensor, Tensor]:
    """The VJP of w @ cols (w's batch dims broadcast against the leading ones of cols): the
    weight's gradient as (cols @ g^T)^T, summed over the broadcast batch, and the columns' as
    w^T @ g. cols @ g^T (M = taps) is the product the cpu gemm runs faster than g @ cols^T
    (M = out channels, few rows, and the columns read transposed): 8.7 against 14.1 ms for
    conv2 of ug bench's T2 (taps 144, 64 x 576 positions, 32 channels) on one core."""
    full = matmul(cols, g.mT).mT                                   # (*batch, O, taps)
    lead = full.ndim - w.ndim
    dw = full.sum(axis=tuple(range(lead))) if lead else full
    return dw, matmul(w.mT, g)


def _weight_matmul(w: Tensor, cols: Tensor) -> Tensor:
    """w @ cols with the VJP of _weight_dims_vjp."""
    return define_vjp(matmul(w, cols), [w, cols], _weight_dims_vjp)
