"""The scheduler: decide which nodes get a buffer, group everything else into kernels.

Rules (see the kernel_ir docstring for the kernel shape they target):
- every elementwise chain is fused into the kernel that consumes it, up to a bound on a
  kernel's size (MAX_KERNEL_SIZE): a longer one gets intermediates realized, so that it runs
  as kernels of bounded size (a chain of 100,000 ops too);
- a reduction fuses with its elementwise producers and with elementwise consumers of its
  result when they iterate over the same rows: the kernel then computes the reduction once
  per row (an accumulator) and reuses it, e.g. softmax and layernorm are one kernel each;
- a reduction that cannot be fused that way, or that two kernels would need, gets a buffer
  (it is never recomputed per output element, nor once per consuming kernel); where only a
  chain of elementwise ops and reshapes of its own size reads it, the chain's last node gets
  the buffer and its kernel computes the reduction (buffers._lifted: `mean(x) - mean(y)`
  read by a concat is one stored value, not two);
- a scan (Op.SCAN) is a kernel of its own (a scan store, see kernel_ir) that fuses its
  elementwise producers and the reductions over its rows; its readers load its buffer, but a
  target that only reshapes it is stored by the scan's kernel itself;
- matmul, custom and cross-device copy are schedule items of their own;
- independent outputs with the same iteration space share one kernel (ug.realize(a, b)) when
  they are as deep in the graph of kernels (see _depths); a write and a scatter are kernels of
  their own, except that a full elementwise write shares its kernel with the elementwise roots
  that read its new value where they compute it (an optimizer's m, v and p updates: one kernel,
  see _write_clusters);
- items come out in topological order; an assign that writes a buffer in place runs after
  every item of the schedule that reads the old value, and a cycle is a clear error.

Modules, each importing only those above it:
- items: the schedule's data (KernelItem, MatmulItem, ..., Schedule, ScheduleError);
- nodes: the walk of the graph a schedule computes (walk, unrealized);
- operands: the nodes that are items of their own and the views their operands are read through;
- build: one kernel from the graph under its roots (_KernelBuilder, _build); kernels alike
  built once per schedule, looked up by the structure of what they fuse (BuildCache: ~1,000
  alike resamples of scipy's permutation_test schedule in time linear in the graph);
- buffers: which nodes get buffers (the kernel size and argument bounds among the reasons);
- assign: which writes go in place;
- fuse: the kernels, roots merged by write clusters and depth;
- order: the items in a topological order that in-place writes respect;
- device_pass: the forms a device cannot run rewritten for it first (a scan's rows or a
  scatter's parts longer than its loop limit), so the frontend's graph is device-neutral;
- create: create_schedule, the device pass, then the passes above until they agree.
"""

from __future__ import annotations

from .build import INDEX, ITEM_OPS, scatter_identity
from .buffers import MAX_KERNEL_SIZE
from .create import create_schedule
from .fuse import MAX_MERGED_ROOTS
from .items import (AttentionItem, CopyItem, CustomItem, FftItem, Item, KernelItem, MatmulItem, Schedule, ScheduleError,
                    SortItem)
from .nodes import unrealized, walk
from .order import _order

__all__ = ["INDEX", "ITEM_OPS", "MAX_KERNEL_SIZE", "MAX_MERGED_ROOTS", "AttentionItem", "CopyItem", "CustomItem", "FftItem",
           "Item", "KernelItem", "MatmulItem", "Schedule", "ScheduleError", "SortItem", "create_schedule",
           "scatter_identity", "unrealized", "walk"]
