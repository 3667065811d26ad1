"""Matmul on the cuda device: cuBLAS when its wheel is installed and the layout suits it,
else ug-cuda's own tiled shared-memory kernel (any dtype, any strides, broadcast batch dims).

cuBLAS (`pip install ug-cuda[cublas]`, the nvidia-cublas-cu12 wheel) is loaded with ctypes
through cuda-pathfinder; it is used for float32 / float64 (S/Dgemm) and float16 (GemmEx,
float32 accumulation) with at most one batch dim (after merging) and operands with a unit
stride in one of their two matrix dims. TF32 is not used (cuBLAS's default math mode), so
float32 results match numpy's precision.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ug_core.kit import INT_CTYPES, INT_WRAP, Buffer, MatmulSpec, env_flag, prod

from .render import CTYPE, PRELUDE
from .runtime import ctypes_array

TILE = 16
MAXB = 6  # batch dims handled in the kernel; more are looped over on the host

# per dtype: (accumulator type, load a value into it, store it back)
_ACC = {
    np.dtype(np.float16): ("float", "ug_h2f({})", "ug_f2h({})"),
    np.dtype(np.float32): ("float", "{}", "{}"),
    np.dtype(np.float64): ("double", "{}", "{}"),
    # ints wrap: summed in their unsigned twin (at least unsigned int, as C promotes narrower ones)
    **{dt: (u, f"({u}){{}}", f"({INT_CTYPES[dt]}){{}}") for dt, u in INT_WRAP.items()},
    np.dtype(bool): ("unsigned int", "(unsigned int){}", "({} != 0u)"),   # or of ands
}


def kernel_source(dtype: np.dtype) -> tuple[str, str]:
    """CUDA C of the tiled matmul for `dtype`; returns (source, function name)."""
    dtype = np.dtype(dtype)
    acc, load, store = _ACC[dtype]
    t = CTYPE[dtype]
    name = f"ug_matmul_{dtype.name}"
    src = PRELUDE + f"""
struct ug_mm_args {{
  long long M, N, K, batch;
  long long a_off, a_sm, a_sk, b_off, b_sk, b_sn;
  long long bshape[{MAXB}], a_bs[{MAXB}], b_bs[{MAXB}];
  int nb, pad;
}};
extern "C" __global__ void __launch_bounds__({TILE * TILE}) {name}({t}* __restrict__ out, const {t}* __restrict__ a,
    const {t}* __restrict__ b, const ug_mm_args p) {{
  __shared__ {acc} As[{TILE}][{TILE} + 1];
  __shared__ {acc} Bs[{TILE}][{TILE} + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  // every loop bound below depends on block indices only: the barriers are uniform
  for (long long bi = blockIdx.z; bi < p.batch; bi += gridDim.z) {{
    long long ao = p.a_off, bo = p.b_off, rest = bi;
    for (int d = p.nb - 1; d >= 0; --d) {{
      const long long i = rest % p.bshape[d];
      rest /= p.bshape[d];
      ao += i * p.a_bs[d];
      bo += i * p.b_bs[d];
    }}
    for (long long m0 = (long long)blockIdx.y * {TILE}; m0 < p.M; m0 += (long long)gridDim.y * {TILE}) {{
      for (long long n0 = (long long)blockIdx.x * {TILE}; n0 < p.N; n0 += (long long)gridDim.x * {TILE}) {{
        const long long m = m0 + ty, n = n0 + tx;
        {acc} sum = 0;
        for (long long k0 = 0; k0 < p.K; k0 += {TILE}) {{
          const long long ka = k0 + tx, kb = k0 + ty;
          As[ty][tx] = (m < p.M && ka < p.K) ? ({acc}){load.format("a[ao + m * p.a_sm + ka * p.a_sk]")} : ({acc})0;
          Bs[ty][tx] = (kb < p.K && n < p.N) ? ({acc}){load.format("b[bo + kb * p.b_sk + n * p.b_sn]")} : ({acc})0;
          __syncthreads();
          #pragma unroll
          for (int kk = 0; kk < {TILE}; ++kk) sum += As[ty][kk] * Bs[kk][tx];
          __syncthreads();
        }}
        if (m < p.M && n < p.N) out[(bi * p.M + m) * p.N + n] = {store.format("sum")};
      }}
    }}
  }}
}}
"""
    return src, name


class _Args(ctypes.Structure):
    _fields_ = [(f, ctypes.c_longlong) for f in ("M", "N", "K", "batch", "a_off", "a_sm", "a_sk", "b_off", "b_sk", "b_sn")] + [
        ("bshape", ctypes.c_longlong * MAXB), ("a_bs", ctypes.c_longlong * MAXB), ("b_bs", ctypes.c_longlong * MAXB),
        ("nb", ctypes.c_int), ("pad", ctypes.c_int)]


def _batch_layout(spec: MatmulSpec) -> tuple[list[int], list[int], list[int]]:
    """Batch dims of the output with each operand's stride (0 where it broadcasts), size-1 dims
    dropped and dims that both operands step through contiguously merged."""
    out_b = list(spec.out_shape[:-2])

    def strides(view: Any) -> list[int]:
        bs = list(view.strides[:-2])
        bshape = list(view.shape[:-2])
        pad = len(out_b) - len(bs)
        bs = [0] * pad + [s if n != 1 else 0 for s, n in zip(bs, bshape)]
        return bs

    a_bs, b_bs = strides(spec.a_view), strides(spec.b_view)
    dims = [(n, sa, sb) for n, sa, sb in zip(out_b, a_bs, b_bs) if n != 1]
    merged: list[tuple[int, int, int]] = []
    for n, sa, sb in dims:
        if merged:
            pn, psa, psb = merged[-1]
            if psa == sa * n and psb == sb * n:
                merged[-1] = (pn * n, sa, sb)
                continue
        merged.append((n, sa, sb))
    return [d[0] for d in merged], [d[1] for d in merged], [d[2] for d in merged]


def run(device: Any, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec) -> None:
    M, N = spec.out_shape[-2], spec.out_shape[-1]
    K = spec.a_view.shape[-1]
    if prod(spec.out_shape) == 0:
        return
    dtype = np.dtype(spec.dtype)
    bshape, a_bs, b_bs = _batch_layout(spec)
    if K == 0:  # sum over nothing: zeros
        device.copy_in(out.handle, np.zeros(prod(spec.out_shape), dtype))
        return
    if _cublas_matmul(device, out, a, b, spec, M, N, K, bshape, a_bs, b_bs):
        return
    _, func = device.cached(("matmul", dtype), lambda: device.load_source(*kernel_source(dtype)))
    # more batch dims than the kernel takes: loop over the leading ones here
    lead = max(0, len(bshape) - MAXB)
    inner = bshape[lead:]
    per_call = prod(inner)
    import itertools
    for idx in itertools.product(*[range(n) for n in bshape[:lead]]):
        a_extra = sum(i * s for i, s in zip(idx, a_bs[:lead]))
        b_extra = sum(i * s for i, s in zip(idx, b_bs[:lead]))
        out_extra = 0
        for i, n in zip(idx, bshape[:lead]):
            out_extra = out_extra * n + i
        out_extra *= per_call * M * N
        args = _Args(M=M, N=N, K=K, batch=per_call,
                     a_off=spec.a_view.offset + a_extra, a_sm=spec.a_view.strides[-2], a_sk=spec.a_view.strides[-1],
                     b_off=spec.b_view.offset + b_extra, b_sk=spec.b_view.strides[-2], b_sn=spec.b_view.strides[-1],
                     nb=len(inner))
        for d, (n, sa, sb) in enumerate(zip(inner, a_bs[lead:], b_bs[lead:])):
            args.bshape[d], args.a_bs[d], args.b_bs[d] = n, sa, sb
        out_ptr = out.handle.ptr + out_extra * dtype.itemsize
        values = ctypes_array(ctypes.c_uint64, 3)(out_ptr, a.handle.ptr, b.handle.ptr)
        base = ctypes.addressof(values)
        params = ctypes_array(ctypes.c_void_p, 4)(base, base + 8, base + 16, ctypes.addressof(args))
        grid = (min(-(-N // TILE), 2**31 - 1), min(-(-M // TILE), 65535), min(per_call, 65535))
        device.runtime.call(func, grid, (TILE, TILE, 1), params)


# --- cuBLAS ---------------------------------------------------------------------------------

_CUBLAS_OP_N, _CUBLAS_OP_T = 0, 1
_CUDA_R_16F, _CUDA_R_32F = 2, 0
_CUBLAS_COMPUTE_32F = 68
_CUBLAS_GEMM_DEFAULT = -1


def _load_cublas() -> Any:
    """libcublas from the nvidia-cublas-cu12 wheel (or the system), or None."""
    if not env_flag("UG_CUDA_CUBLAS", True):
        return None
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        path = load_nvidia_dynamic_lib("cublas").abs_path
        return ctypes.CDLL(path)
    except Exception:
        try:
            return ctypes.CDLL("libcublas.so.12")
        except OSError:
            return None


class _Blas:
    def __init__(self, lib: Any, device: Any):
        self.lib = lib
        handle = ctypes.c_void_p()
        device.context.current()
        if lib.cublasCreate_v2(ctypes.byref(handle)) != 0:
            raise RuntimeError("cublasCreate failed")
        self.handle = handle
        lib.cublasSetStream_v2(handle, ctypes.c_void_p(device.context.stream_handle))


def _matrix(rows: int, cols: int, sr: int, sc: int) -> tuple[bool, int] | None:
    """(row_major, ld) if a rows x cols matrix with these strides is a BLAS operand, else None."""
    if sc == 1 or cols == 1:
        ld = sr if rows > 1 else cols
        if ld >= max(cols, 1):
            return True, ld
    if sr == 1 or rows == 1:
        ld = sc if cols > 1 else rows
        if ld >= max(rows, 1):
            return False, ld
    return None


def _cublas_matmul(device: Any, out: Buffer, a: Buffer, b: Buffer, spec: MatmulSpec, M: int, N: int, K: int,
                   bshape: list[int], a_bs: list[int], b_bs: list[int]) -> bool:
    dtype = np.dtype(spec.dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)) or len(bshape) > 1:
        return False
    if max(M, N, K) >= 2**31:
        return False
    am = _matrix(M, K, spec.a_view.strides[-2], spec.a_view.strides[-1])
    bm = _matrix(K, N, spec.b_view.strides[-2], spec.b_view.strides[-1])
    if am is None or bm is None:
        return False
    if device._blas is None:
        lib = _load_cublas()
        device._blas = _Blas(lib, device) if lib is not None else False
    if device._blas is False:
        return False
    blas: _Blas = device._blas
    batch = bshape[0] if bshape else 1
    sa, sb = (a_bs[0], b_bs[0]) if bshape else (0, 0)
    item = dtype.itemsize
    # row-major out = a @ b  <=>  column-major out^T = b^T a^T: cuBLAS gets (b, a) swapped
    op_b = _CUBLAS_OP_N if bm[0] else _CUBLAS_OP_T
    op_a = _CUBLAS_OP_N if am[0] else _CUBLAS_OP_T
    A = ctypes.c_void_p(b.handle.ptr + spec.b_view.offset * item)
    B = ctypes.c_void_p(a.handle.ptr + spec.a_view.offset * item)
    C = ctypes.c_void_p(out.handle.ptr)
    device.context.current()
    lib = blas.lib
    if dtype == np.dtype(np.float16):
        one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
        status = lib.cublasGemmStridedBatchedEx(
            blas.handle, op_b, op_a, N, M, K, ctypes.byref(one),
            A, _CUDA_R_16F, bm[1], ctypes.c_longlong(sb), B, _CUDA_R_16F, am[1], ctypes.c_longlong(sa),
            ctypes.byref(zero), C, _CUDA_R_16F, N, ctypes.c_longlong(M * N), batch,
            _CUBLAS_COMPUTE_32F, _CUBLAS_GEMM_DEFAULT)
    else:
        scalar = ctypes.c_float if dtype == np.dtype(np.float32) else ctypes.c_double
        fn = lib.cublasSgemmStridedBatched if dtype == np.dtype(np.float32) else lib.cublasDgemmStridedBatched
        one, zero = scalar(1.0), scalar(0.0)
        status = fn(blas.handle, op_b, op_a, N, M, K, ctypes.byref(one),
                    A, bm[1], ctypes.c_longlong(sb), B, am[1], ctypes.c_longlong(sa),
                    ctypes.byref(zero), C, N, ctypes.c_longlong(M * N), batch)
    if status != 0:
        raise RuntimeError(f"cuBLAS gemm failed with status {status}")
    return True
