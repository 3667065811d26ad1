"""lower(): one kernel's loop program, by the strategy its target and shape call for."""

from __future__ import annotations

from ..kernel_ir import Kernel
from ..loop_ir import INDEX, LoopProgram, Opc, ParamSpec
from .cpu import lower_cpu
from .emit import Lowering
from .gpu import is_long_gpu_scan, lower_gpu_scan, lower_gpu_thread_per_outer, lower_gpu_workgroup_per_outer
from .options import LowerOptions
from .scatter import lower_gpu_scatter


def lower(kernel: Kernel, opts: LowerOptions = LowerOptions()) -> LoopProgram:
    """The loop program computing `kernel` for `opts.target`."""
    lw = Lowering(kernel, opts)
    b, k = lw.b, lw.k
    specs = tuple(ParamSpec(a.dtype, a.output, a.size) for a in k.args)
    if lw.n_outer > 0:
        lw.params = [b.emit(Opc.PARAM, a.dtype, (), i) for i, a in enumerate(k.args)]
        if k.offsets_arg is not None:  # read once, before any loop
            offsets = k.args[k.offsets_arg]
            lw.moved = [b.cast(b.load(lw.params[k.offsets_arg], b.const(j), offsets.dtype, True), INDEX)
                        for j in range(offsets.size)]
        if opts.target == "cpu":
            lower_cpu(lw)
        elif any(s.scatter is not None for s in k.stores):
            lower_gpu_scatter(lw)
        elif is_long_gpu_scan(lw):
            lower_gpu_scan(lw)
        elif (max(lw.extents(), default=0) <= opts.gpu_serial_max_extent
              or any(s.scan is not None for s in k.stores)):
            # (a scan: one thread runs each outer index's scan in order; a long one over few
            # rows arrives blocked into many rows, see ug_core.array_api.scans)
            lower_gpu_thread_per_outer(lw)
        else:
            lower_gpu_workgroup_per_outer(lw)
    program = LoopProgram(k.name, opts.target, specs, lw.global_size, lw.local_size, b.finish())
    program.verify()
    return program
