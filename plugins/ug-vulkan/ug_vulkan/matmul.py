"""The matmul kernel: a tiled shared-memory program, written directly in loop IR.

out[b, m, n] = sum_k a[b, m, k] * b[b, k, n] for any operand views (strides, offsets, stride-0
broadcast batch dims). Each workgroup computes a T x T output tile: per K-step, its T*T threads
stage one T x T tile of A and of B in workgroup memory (zero-padded at the edges, so any
shape works), synchronize, and accumulate T products each. Batches run over the third grid
dimension, looping when there are more batches than workgroups allowed in z.

The program has barriers inside (workgroup-uniform) loops, which the shared lowering never
produces, so it is not passed through `LoopProgram.verify`; the SPIR-V renderer handles it.
"""

from __future__ import annotations

import numpy as np

from ug_core.kit import BOOL, INDEX, Inst, LoopBuilder, LoopProgram, MatmulSpec, Op, Opc, ParamSpec, Special, prod


def _stage(b: LoopBuilder, tile: Inst, slot: Inst, fill: Inst, inside: Inst, k: Inst, K: int,
           source: tuple[Inst, Inst, int], dtype: np.dtype, acc_dtype: np.dtype) -> None:
    """tile[slot] = param[line + k * k_stride] (source: param, line, k_stride) where `inside`
    and k < K, else `fill`: one thread's element of a staged tile."""
    param, line, k_stride = source
    b.emit(Opc.LOCAL_STORE, None, (tile, slot, fill))
    b.if_(b.alu(Op.MUL, (inside, b.alu(Op.CMPLT, (k, b.const(K)), BOOL)), BOOL))
    value = b.emit(Opc.LOAD, dtype, (param, b.add(line, b.mul(k, k_stride))))
    b.emit(Opc.LOCAL_STORE, None, (tile, slot, b.cast(value, acc_dtype)))
    b.close()


def acc_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def batch_strides(view_shape: tuple[int, ...], view_strides: tuple[int, ...], batch: tuple[int, ...]) -> list[int]:
    """Per output batch dim, the operand's stride (0 where it broadcasts or lacks the dim)."""
    nb = len(view_shape) - 2
    out = []
    for d in range(len(batch)):
        j = d - (len(batch) - nb)
        out.append(view_strides[j] if j >= 0 and view_shape[j] != 1 else 0)
    return out


def build(spec: MatmulSpec, tile: int, max_groups: tuple[int, int, int]) -> LoopProgram:
    a_view, b_view = spec.a_view, spec.b_view
    out_shape = tuple(spec.out_shape)
    batch = out_shape[:-2]
    M, N = out_shape[-2], out_shape[-1]
    K = a_view.shape[-1]
    B = prod(batch)
    dt = np.dtype(spec.dtype)
    acc_dt = acc_dtype(dt)
    T = tile
    gx, gy = -(-N // T), -(-M // T)
    if gx > max_groups[0] or gy > max_groups[1]:
        raise ValueError(f"matmul {M}x{K} @ {K}x{N} needs {gx}x{gy} workgroups of {T}x{T}, "
                         f"more than the device's maxComputeWorkGroupCount {max_groups[:2]}")
    gz = max(1, min(B, max_groups[2]))
    params = (ParamSpec(dt, True, prod(out_shape)),
              ParamSpec(dt, False, a_view.offset + a_view.span()),
              ParamSpec(dt, False, b_view.offset + b_view.span()))
    b = LoopBuilder()
    p_out, p_a, p_b = (b.emit(Opc.PARAM, dt, (), i) for i in range(3))
    lx = b.emit(Opc.SPECIAL, INDEX, (), (Special.LOCAL_ID, 0))
    ly = b.emit(Opc.SPECIAL, INDEX, (), (Special.LOCAL_ID, 1))
    col = b.add(b.mul(b.emit(Opc.SPECIAL, INDEX, (), (Special.GROUP_ID, 0)), T), lx)
    row = b.add(b.mul(b.emit(Opc.SPECIAL, INDEX, (), (Special.GROUP_ID, 1)), T), ly)
    gz_id = b.emit(Opc.SPECIAL, INDEX, (), (Special.GROUP_ID, 2))
    a_tile = b.emit(Opc.DEFINE_LOCAL, acc_dt, (), T * T)
    b_tile = b.emit(Opc.DEFINE_LOCAL, acc_dt, (), T * T)
    zero = b.const(0, acc_dt)
    row_ok = b.alu(Op.CMPLT, (row, b.const(M)), BOOL)
    col_ok = b.alu(Op.CMPLT, (col, b.const(N)), BOOL)
    my_slot = b.add(b.mul(ly, T), lx)
    a_bs = batch_strides(a_view.shape, a_view.strides, batch)
    b_bs = batch_strides(b_view.shape, b_view.strides, batch)

    bi = b.range(gz_id, b.const(B), gz)
    a_base, b_base = b.const(a_view.offset), b.const(b_view.offset)
    for d, size in enumerate(batch):
        if size == 1:
            continue
        digit = b.mod(b.idiv(bi, prod(batch[d + 1:])), size)
        if a_bs[d]:
            a_base = b.add(a_base, b.mul(digit, a_bs[d]))
        if b_bs[d]:
            b_base = b.add(b_base, b.mul(digit, b_bs[d]))
    sam, sak = a_view.strides[-2], a_view.strides[-1]
    sbk, sbn = b_view.strides[-2], b_view.strides[-1]
    a_row = b.add(a_base, b.mul(row, sam))
    b_col = b.add(b_base, b.mul(col, sbn))
    acc = b.emit(Opc.DEFINE_ACC, acc_dt, (), acc_dt.type(0).item())
    k0 = b.range(b.const(0), b.const(K), T)
    # stage A[row, k0 + lx] and B[k0 + ly, col] (zero outside the matrices)
    _stage(b, a_tile, my_slot, zero, row_ok, b.add(k0, lx), K, (p_a, a_row, sak), dt, acc_dt)
    _stage(b, b_tile, my_slot, zero, col_ok, b.add(k0, ly), K, (p_b, b_col, sbk), dt, acc_dt)
    b.emit(Opc.BARRIER, None)
    kk = b.range(b.const(0), b.const(T))
    x = b.emit(Opc.LOCAL_LOAD, acc_dt, (a_tile, b.add(b.mul(ly, T), kk)))
    y = b.emit(Opc.LOCAL_LOAD, acc_dt, (b_tile, b.add(b.mul(kk, T), lx)))
    b.emit(Opc.ACC_UPDATE, None, (acc, b.alu(Op.MUL, (x, y), acc_dt)), Op.ADD)
    b.close()
    b.emit(Opc.BARRIER, None)
    b.close()
    total = b.emit(Opc.ACC_READ, acc_dt, (acc,))
    b.if_(b.alu(Op.MUL, (row_ok, col_ok), BOOL))
    out_index = b.add(b.add(b.mul(bi, M * N), b.mul(row, N)), col)
    b.emit(Opc.STORE, None, (p_out, out_index, b.cast(total, dt)))
    b.close()
    b.close()
    name = f"matmul_{'x'.join(map(str, batch)) or '1'}_{M}_{K}_{N}"
    return LoopProgram(name, "gpu", params, (gx, gy, gz), (T, T, 1), b.finish())
