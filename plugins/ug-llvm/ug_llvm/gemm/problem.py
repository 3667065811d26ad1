"""One matmul as the gemm sees it: sizes, element strides and the operands' offsets per batch entry."""

from __future__ import annotations

import array
from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Problem:
    """One matmul in element units: C[b] (contiguous M x N rows) = A[b] @ B[b], where A[b] starts
    at offsets[3b] with strides (rsa, csa), B[b] at offsets[3b + 1] with (rsb, csb) and C[b] at
    offsets[3b + 2]. (An `array` of int64, not numpy: it is built on every matmul, and small
    matmuls are dominated by such Python costs.)

    A split operand (`a_rows`, `b_rows`: tables of M or K int64 offsets) has its rows at those
    offsets instead of at multiples of its row stride: rows that are a flattening of several dims
    no single stride walks (a convolution's im2col rows (channel, tap row, tap column), read in
    place from the image instead of from a copy laid out as a matrix)."""

    m: int
    n: int
    k: int
    rsa: int
    csa: int
    rsb: int
    csb: int
    offsets: array.array   # "q": 3 per batch entry
    a_rows: array.array | None = None
    b_rows: array.array | None = None

    @staticmethod
    def from_views(a_shape: tuple[int, ...], a_strides: tuple[int, ...], a_offset: int,
                   b_shape: tuple[int, ...], b_strides: tuple[int, ...], b_offset: int,
                   a_split: int = 1, b_split: int = 1) -> "Problem":
        """From the operands' strided views (same batch shape, element strides). Batches of A
        against one shared B (stride 0 over the batch) whose rows lie evenly spaced, the
        `x @ weight` case, become one tall A so B is packed once. `a_split` / `b_split`: how many
        dims (before the last) of A's / B's view make its rows (a split operand: see the class)."""
        if a_split > 1 or b_split > 1:
            return Problem._split(a_shape, a_strides, a_offset, b_shape, b_strides, b_offset, a_split, b_split)
        *batch, m, k = a_shape
        n = b_shape[-1]
        rsa, csa = a_strides[-2:]
        rsb, csb = b_strides[-2:]
        a_bs, b_bs = a_strides[:-2], b_strides[:-2]
        if batch and all(s == 0 for s in b_bs) and _rows_evenly_spaced(batch + [m], list(a_bs) + [rsa]):
            rows = int(np.prod(batch)) * m
            return Problem(rows, n, k, rsa, csa, rsb, csb, array.array("q", (a_offset, b_offset, 0)))
        if not batch:
            return Problem(m, n, k, rsa, csa, rsb, csb, array.array("q", (a_offset, b_offset, 0)))
        return Problem(m, n, k, rsa, csa, rsb, csb, _batch_offsets(batch, a_bs, a_offset, b_bs, b_offset, m * n))

    @staticmethod
    def _split(a_shape: tuple[int, ...], a_strides: tuple[int, ...], a_offset: int, b_shape: tuple[int, ...],
               b_strides: tuple[int, ...], b_offset: int, a_split: int, b_split: int) -> "Problem":
        a_rows, rsa, batch, a_bs = _row_table(a_shape, a_strides, a_split)
        b_rows, rsb, _, b_bs = _row_table(b_shape, b_strides, b_split)
        m, k, n = int(np.prod(a_shape[-1 - a_split:-1])), a_shape[-1], b_shape[-1]
        return Problem(m, n, k, rsa, a_strides[-1], rsb, b_strides[-1],
                       _batch_offsets(batch, a_bs, a_offset, b_bs, b_offset, m * n), a_rows, b_rows)

    @property
    def batch(self) -> int:
        return len(self.offsets) // 3


def _rows_evenly_spaced(shape: list[int], strides: list[int]) -> bool:
    """Whether dims `shape` (outermost first) with `strides` flatten to one dim of stride strides[-1]."""
    expected = strides[-1]
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True



def _row_table(shape: tuple[int, ...], strides: tuple[int, ...], split: int
               ) -> tuple[array.array | None, int, tuple[int, ...], tuple[int, ...]]:
    """An operand's rows: (their offsets as a table, or None where one stride walks them; that
    stride, or 0 with a table; the batch dims' shape; their strides). Its view's dims are
    (*batch, *row dims (`split` of them), column)."""
    batch, bs = tuple(shape[:-1 - split]), tuple(strides[:-1 - split])
    if split <= 1:
        return None, strides[-2], batch, bs
    dims, dstrides = shape[-1 - split:-1], strides[-1 - split:-1]
    idx = np.indices(dims, dtype=np.int64).reshape(len(dims), -1)
    table = np.asarray(dstrides, dtype=np.int64) @ idx
    return array.array("q", table.tobytes()), 0, batch, bs


def _batch_offsets(batch: Sequence[int], a_bs: Sequence[int], a_offset: int,
                   b_bs: Sequence[int], b_offset: int, out_size: int) -> "array.array[int]":
    """The (A offset, B offset, C offset) of each batch entry, C order over `batch`: the operands'
    offsets plus their batch strides, C's entries out_size apart."""
    nb = int(np.prod(batch))
    idx = np.indices(batch, dtype=np.int64).reshape(len(batch), nb)
    offsets = np.empty((nb, 3), dtype=np.int64)
    offsets[:, 0] = a_offset + np.array(a_bs, dtype=np.int64) @ idx
    offsets[:, 1] = b_offset + np.array(b_bs, dtype=np.int64) @ idx
    offsets[:, 2] = np.arange(nb, dtype=np.int64) * out_size
    return array.array("q", offsets.tobytes())
