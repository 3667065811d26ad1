"""A gpu loop program under construction, for the kit's own programs (kit.gpusort, kit.gpufft):
`count` workgroups of `local` threads on a grid split within the device's limits, the parameters,
the workgroup's and the thread's ids, and a guard skipping what runs past the end of a split grid."""

from __future__ import annotations

from ..loop_builder import LoopBuilder
from ..loop_ir import INDEX, Inst, LoopProgram, Opc, ParamSpec, Special
from ..lower import split_grid


class GridProgram:
    def __init__(self, params: tuple[ParamSpec, ...], count: int, local: int, max_grid: tuple[int, ...]):
        self.specs = params
        self.b = b = LoopBuilder()
        self.params = [b.emit(Opc.PARAM, spec.dtype, (), i) for i, spec in enumerate(params)]
        self.local = local
        self.grid = split_grid(count, max_grid)
        self.group = b.group_index(self.grid)
        self.lid = b.emit(Opc.SPECIAL, INDEX, (), (Special.LOCAL_ID, 0)) if local > 1 else b.const(0)
        self.guarded = False

    def guard(self, inside: Inst) -> None:
        """Run the rest only where `inside` holds (uniform in a workgroup where barriers follow)."""
        self.guarded = True
        self.b.if_(inside)

    def finish(self, name: str) -> LoopProgram:
        if self.guarded:
            self.b.close()
        program = LoopProgram(name, "gpu", self.specs, self.grid, (self.local,) + (1,) * (len(self.grid) - 1),
                              self.b.finish())
        program.verify()
        return program
