"""What a backend tells the lowering about its target (LowerOptions)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LowerOptions:
    target: str = "cpu"                    # "cpu" or "gpu"
    local_size: int = 256                  # gpu: threads per workgroup (an upper bound; small rows use fewer)
    max_global_size: tuple[int, int, int] = (65535, 65535, 65535)  # gpu: workgroups per dim (Vulkan's guaranteed minimum)
    sum_block: int = 1024                  # cpu/serial: float sums longer than this accumulate per block
    gpu_serial_max_extent: int = 16        # gpu: reduced extents up to this run serially, one thread per outer index
    outer_block: int = 0                   # cpu: B > 1 enables the outer-blocked strategy where loads favour it
    outer_block_always: bool = False       # cpu: use it whenever B > 1 and there is a reduction (tests)
    atomic_int_bits: tuple[int, ...] = ()  # gpu: int widths with atomic add/max/min on buffers (loop_ir ATOMIC)

    def __post_init__(self) -> None:
        if self.target not in ("cpu", "gpu"):
            raise ValueError(f"unknown lowering target {self.target!r}")
        if self.local_size < 1 or self.sum_block < 1 or self.outer_block < 0 or not 1 <= len(self.max_global_size) <= 3:
            raise ValueError(f"bad lowering options {self}")
