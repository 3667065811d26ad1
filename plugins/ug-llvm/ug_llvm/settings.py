"""The cpu device's tunables: the UG_LLVM_* environment variables, read once at import.

A bad value does not fail the import: it is recorded (`strict=False`) and `check()` (the
plugin's probe) raises one ConfigError naming the variable, so `ug devices` shows cpu as not
usable and says why.
"""

from __future__ import annotations

from ug_core.kit import env_check, env_choice, env_int

# below this many (weighted) element visits a kernel runs on the calling thread. A hand-off to
# the pool cost 50-150 us here (waking a thread); measured in alternating processes against
# 1 << 18: sums of 128K and 256K float32 (work 0.26M, 0.53M) went 176 -> 30 and 193 -> 63 us
# on one thread, and kernels of 1-4M work were within noise either way
PARALLEL_MIN_WORK = env_int("UG_LLVM_PARALLEL_MIN_WORK", 1 << 20, minimum=0, strict=False)
# outer indices per global id in the outer-blocked lowering (column reductions): a multiple of
# every vector width, small enough that the per-block accumulators stay in L1
OUTER_BLOCK = env_int("UG_LLVM_OUTER_BLOCK", 64, minimum=0, strict=False)
# ... and for outputs at least this wide per thread: a block of 1024 columns reads 4 KiB of each
# row (one page) into 4 KiB of L1 accumulators, where 64 columns touch a page per 256 bytes.
# Measured on 4096 x 4096: column sum 6.4 -> 4.3 ms, softmax over axis 0 108 -> 32 ms; for
# narrow outputs it leaves too few blocks to share out (8192 x 256: 0.57 -> 0.77 ms).
WIDE_OUTER_BLOCK = env_int("UG_LLVM_WIDE_OUTER_BLOCK", 1024, minimum=0, strict=False)
# microseconds a pool worker spins for work before it sleeps (see pool.SpinPool; the number of
# looks at the job counter this takes is measured once, since a pause instruction lasts 10 ns
# on some x86 CPUs and 40+ on others: 2^14 pauses were 0.2 ms on the Sapphire Rapids CI host).
# Short: a sleeping worker wakes on a futex in about 20 us, and on a loaded 2-core machine a
# worker spinning a millisecond after each job took that core from the caller (a T1 training
# step, 40 rounds at load 4.6: median 22.6 ms spinning 1000 us, 19-20.5 with 100-300).
# 0: workers sleep at once (every launch then pays the wake-up)
SPIN_US = env_int("UG_LLVM_SPIN_US", 300, minimum=0, strict=False)
# threads a cpu device runs on: 0 (the default) for every core this process may use
# (cores.usable_cores); a process that shares the cores with others of its kind, as each worker
# process of a dask cluster does (ug_core.dask sets 1 there, as dask sets OMP_NUM_THREADS=1 for
# BLAS), takes fewer, so that the workers' pools do not contend for the same cores
THREADS = env_int("UG_LLVM_THREADS", 0, minimum=0, strict=False)
# matmul: "ug" (our packed gemm, ug_llvm.gemm) or "numpy" (numpy's BLAS on strided views)
MATMUL_IMPL = env_choice("UG_LLVM_MATMUL", "ug", ("ug", "numpy"), strict=False)


def check() -> None:
    """Raise a ConfigError naming every UG_LLVM_* variable with a bad value."""
    env_check("UG_LLVM_")
