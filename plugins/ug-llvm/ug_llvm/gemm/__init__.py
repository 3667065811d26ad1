"""A packed GEMM of our own, rendered as LLVM IR: the cpu device's float32/float64 matmul.

    C[b, m, n] = sum_k A[b, m, k] * B[b, k, n]        A, B: any strides; C: contiguous rows

The classic blocked structure (Goto / BLIS):

* B is packed once per call into column panels NR wide: for each block of KC rows of B,
  panel `jr` holds B[pc:pc+kc, jr*NR:(jr+1)*NR] row after row, zero padded past N. The panels
  are packed in parallel (`pack_b`), then shared read-only by every thread.
* Each thread takes a range of row blocks (MC rows of one batch entry). Per KC block it packs
  its rows of A into MR-row panels (column after column, zero padded past M), a block that
  stays in L2, and runs the micro-kernel over every (B panel, A panel) pair: the B panel
  (KC x NR, in L2, its next rows fetched into L1 ahead) stays put while the A panels stream
  past it. The block's rows of C stay in L2 from one KC block to the next (see
  GemmConfig.for_host for the sizes).
* The micro-kernel keeps an MR x NR tile of C in vector registers (MR rows, NR = 2 vectors):
  per k it loads two vectors of B, broadcasts MR values of A and issues 2*MR FMAs. The first
  KC block stores the tile, later blocks add to C; edge tiles go through a stack tile so
  nothing past M or N is touched.

Why our own: numpy's OpenBLAS runs its own thread pool, so ug could not split the batch of an
attention matmul over cores, pack transposed views, or (later) fuse an epilogue. The register
tile and blocking come from the host's vector registers (`GemmConfig.for_host`).

Both entry points have the signature `void f(i64* ctx, i64 units, i64 chunk, i64 tid)`: `ctx`
holds the problem (see `CTX_FIELDS`); every thread runs the function, taking `chunk` of the
`units` (rows of B for `pack_b`, row blocks for `gemm`) at a time from a counter in `ctx` until
none are left (dynamic scheduling: a thread slowed by a busy core takes fewer); `tid` selects the
thread's A workspace.

The modules, by job: `config` (tile sizes, the context's layout), `problem` (a matmul's shape
and strides), `builder` (structured IR emission), `micro_kernel`, `pack_b` and `pack_a` (the
packing), `row_blocks` (the threads' loop over row blocks), `module` (the whole LLVM module and
its entries) and `driver` (PackedGemm: compiling it and running it on a thread pool).
"""

from .config import CTX_FIELDS, GemmConfig
from .driver import OnThreads, PackedGemm
from .module import render_module
from .problem import Problem

__all__ = ["CTX_FIELDS", "GemmConfig", "OnThreads", "PackedGemm", "Problem", "render_module"]
