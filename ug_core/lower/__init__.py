"""Lowering: kernel IR (expressions over index spaces) -> loop IR (explicit loops and indices).

Shared by every backend; the backends only render the resulting `LoopProgram`.

The kernel's shape (see kernel_ir): for each outer index, the reductions run in order,
each over its phase's reduced extent, then each store runs over its own reduced extent.
The *outer index* is the linear index over the non-reduced dims; the *reduced index* of
a phase is the linear index over its reduced dims (the kernel's `axes`), row-major.

Strategies (which thread does what):

* cpu: one parallel index `global_id(0)` per outer index (global_size=(prod(outer),),
  local_size=(1,)); the backend splits that range over its threads. Each reduction is a
  serial loop with an accumulator; a long float sum is accumulated in blocks of
  `sum_block` elements (a partial sum per block, added into the total; past 32 blocks, into
  a partial per 32 blocks, and so on) so that its rounding error grows with the block and
  group sizes, not the number of elements.
* cpu, outer-blocked (option `outer_block` = B > 1, chosen when the kernel's loads read the
  reduced dims with a large stride but consecutive outer indices contiguously, e.g. a column
  sum): each global id runs B consecutive outer indices (the last one fewer), with one
  accumulator per index in a small array (DEFINE_LOCAL, B elements, private to the global
  id on cpu). The loop over the B indices is innermost in every phase:
  `for r in reduced: for b in block: acc[b] = combine(acc[b], x[r, o + b])`, so it reads
  memory contiguously and the backend vectorizes it; later phases read acc[b].
* gpu, thread per outer index (every phase's reduced extent is at most
  `gpu_serial_max_extent`, e.g. elementwise kernels): a flat global index
  group * local_size + local_id with a bounds check, then the same serial code as cpu.
* gpu, workgroup per outer index (long reductions): the workgroup's threads stride over
  the reduced extent (i = local_id, local_id + L, ...), each with a partial accumulator;
  partials are combined by a tree reduction in shared memory, and the result is read
  back by every thread, so later phases and stores can use it; they again stride over
  their extent. A thread's long float sum is blocked as on cpu.
* cpu, masked elementwise (no reduction, a mask on an outer dim, e.g. `pad(x) + 1`): each
  global id is a row (the outer dims but the innermost; with few rows, a chunk of one) and
  loops over the innermost dim, split at the masks' bounds (below).

A scan store (kernel_ir) runs its axis in order with a running accumulator, stored at each
step: on cpu serially per outer index (or, outer-blocked, one running value per lane in the
small array), on gpu always one thread per outer index (a long scan over few rows arrives
blocked into many rows: ug_core.array_api.scans).

`x ** c` for a constant c in {0, 0.5, 1..8} (and -1..-4 for floats) is multiplies (and a
reciprocal, or a sqrt) instead of POW (see emit._pow_by_multiplies).

Accumulators have the reduction's dtype, except float16 sums, which accumulate in
float32 (and are cast back once at the end).

Index math is int64: the outer / reduced linear index is unravelled into per-dim
indices with IDIV / MOD only where a view needs them (runs of dims that a view reads
contiguously are taken from the linear index in one piece), multiplications by stride 0
and dims of size 1 disappear, constants fold, and identical pure instructions are
computed once per block (CSE) and hoisted out of loops they do not depend on.
Strides may be negative. A view's mask (view.py) becomes a gate, the conjunction of
`lo <= i[d] < hi` over its restricted dims, and its loads GATED_LOADs: nothing is read where
the gate is false, whatever the (then meaningless) index. A kernel without masks has no
gates, so its loads stay plain (and vectorizable) LOADs. An IOTA (index vector) lowers to
its chain's element index, cast, and 0 where its gate is false.

Most gates never make it into the code: a loop over a dim that masks (of the views over the
phase index) restrict is split at the masks' bounds into consecutive loops, one per segment
between two bounds (a concat of 8 along a row: 8 loops, each reading one input), and in each
the mask tests on the dim are known true or false and fold: a gated load becomes a plain load
(which vectorizes) or 0, a select on a mask one of its values. That is the loop over a
phase's leading reduced dim (a reduction, each segment into a partial of its own; a store
loop) in every strategy, and the cpu row loop of masked elementwise kernels; on cpu the code
for an outer index also comes in versions, one per combination of the segments of the masked
outer dims (a pad's first, middle and last rows), each under an IF; at most MAX_COPIES copies
of a loop's body in all. A mask on another dim (a reduction's second reduced dim, a view
after a reshape, an outer dim on gpu, where a thread has one element) keeps its gate.

Modules, each importing only those above it:
- options: LowerOptions, what a backend says of its target;
- index: index arithmetic (IndexMath: view chains to elements, mask gates, loops split at the
  masks' bounds, versions) and the gpu grid (split_grid);
- emit: Lowering, one lowering's state, and what every strategy emits: a phase's expressions
  and stores;
- reduce: a reduction on one thread (segments, blocked float sums);
- scatter: scatter stores (one thread in order; a workgroup with atomics on a gpu);
- serial: a whole outer index on one thread (its reductions, then its stores);
- cpu, gpu: the strategies of each target;
- program: lower(), picking the strategy.
"""

from __future__ import annotations

from .cpu import ROW_CHUNK_MIN, ROW_MIN, ROW_PARALLELISM
from .emit import POW_MULTIPLY_MAX, POW_RECIPROCAL_MAX
from .gpu import GPU_SCAN_MIN
from .index import MAX_COPIES, split_grid
from .options import LowerOptions
from .program import lower
from .reduce import SUM_BLOCK_GROUP

__all__ = ["GPU_SCAN_MIN", "MAX_COPIES", "POW_MULTIPLY_MAX", "POW_RECIPROCAL_MAX", "ROW_CHUNK_MIN", "ROW_MIN",
           "ROW_PARALLELISM", "SUM_BLOCK_GROUP", "LowerOptions", "lower", "split_grid"]
