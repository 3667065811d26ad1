"""The gemm's tile sizes for this host, and the layout of the context its entries read."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# the i64 fields of the context array, in order (PackedGemm.run fills them)
CTX_FIELDS = ("a", "b", "c", "a_pack", "b_pack", "m", "n", "k", "rsa", "csa", "rsb", "csb", "ldc",
              "offsets", "row_starts", "units_per_batch", "npad", "a_pack_stride", "pack_next", "gemm_next",
              "epi_fn", "epi_args", "b_units", "g_units", "b_group", "pack_done", "gemm_done", "b_chunk",
              "a_rows", "b_rows", "n_batch", "b_local")
FIELD = {name: i for i, name in enumerate(CTX_FIELDS)}
POINTER_FIELDS = frozenset({"a", "b", "c", "a_pack", "b_pack", "offsets", "row_starts", "epi_fn", "epi_args",
                            "a_rows", "b_rows"})

# rows of A per row block (GemmConfig.for_host): a multiple of the tiles' MR (6, 8 and 12 rows)
MC_ROWS = 72
# bytes of each A row per KC block (GemmConfig.for_host)
KC_BYTES = 4096

LLVM_TYPE = {np.dtype(np.float16): "half", np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


@dataclass(frozen=True)
class GemmConfig:
    dtype: np.dtype
    vector: int      # elements per vector register
    mr: int          # rows of the register tile
    kc: int          # rows of B per packed block (a B panel of kc x nr streams from L2)
    mc_max: int      # rows of A per packed block (mc x kc stays in L2)
    nv: int = 2      # vectors per tile row
    source: np.dtype = None  # type: ignore[assignment]  # A's and B's dtype (None: dtype); packing widens it

    def __post_init__(self) -> None:
        if self.source is None:
            object.__setattr__(self, "source", self.dtype)

    @property
    def nr(self) -> int:
        return self.nv * self.vector

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def t(self) -> str:
        """The LLVM type of the compute (and C) dtype."""
        return LLVM_TYPE[self.dtype]

    @property
    def src(self) -> str:
        """The LLVM type of A's and B's dtype."""
        return LLVM_TYPE[self.source]

    @staticmethod
    def for_host(dtype: np.dtype, features: str, source: np.dtype | None = None) -> "GemmConfig":
        """Tile sizes from the host's vector registers, measured on AVX-512 (Cascade Lake, 1 MiB
        L2): a 6 x 4-vector tile (24 accumulators + 4 B vectors + 1 broadcast of 32 registers)
        issues 34 instructions per 24 FMAs, against 38 for 12 x 2 vectors, and ran 10-15 %
        faster. With 16 registers (AVX/AVX2, SSE) the tile is 6 x 2 vectors (12 + 2 + 1).

        kc = 4 KiB of each A row (1024 float32, 512 float64): with blocks of MC_ROWS rows it beat
        2 KiB on every shape tried (one thread, alternating in one process on the host below,
        float32: 1024^3 14.6 -> 14.1 ms, 2048^3 115.2 -> 110.8, 300^3 0.57 -> 0.49, 4096 x 256 x
        4096 55.3 -> 54.4, 256 x 4096 x 256 4.01 -> 3.91; float64 1024^3 29.8 -> 27.9); 3 KiB
        in between. (2 KiB was chosen with blocks of 480 rows, on an older host.)

        mc = MC_ROWS rows per block: a block's rows of C (mc x N) then stay in L2 from one KC
        block to the next (the later blocks add to them), and its packed A is small beside the
        B panels passing through; the whole packed B is read again from L3 per block, which the
        micro-kernel's fetch of the next B panel hides. Measured on AVX-512 (Sapphire Rapids
        class, 2 MiB L2, 48 KiB L1), one thread, alternating in one process, float32 unless
        said: 1024^3 15.2 -> 14.1 ms (mc 480 -> 72), 2048^3 114.9 -> 106.4, float64 1024^3
        32.7 -> 28.9, 4096 x 256 x 4096 62.7 -> 56.4, 8192 x 512 x 512 28.7 -> 27.4; 48-96 rows
        within noise of each other, 120 and more slower (480 was the best on an older host
        whose gemm did not fetch the next B panel ahead)."""
        dtype = np.dtype(dtype)
        feats = set(features.split(","))
        if "+avx512f" in feats:
            width, mr, nv = 64, 6, 4
        elif "+avx" in feats:
            width, mr, nv = 32, 6, 2
        else:
            width, mr, nv = 16, 6, 2
        return GemmConfig(dtype, width // dtype.itemsize, mr, kc=KC_BYTES // dtype.itemsize, mc_max=MC_ROWS, nv=nv,
                          source=np.dtype(source or dtype))
