"""The renderer base: loop IR -> source, one method per opcode, checked when defined.

A backend's renderer subclasses `Renderer` (or `CStyleRenderer`, for the C family) and gives
a method `op_<opcode>` for every loop IR opcode (`op_const`, `op_range`, ...). When a class
that says it is complete (`complete = True`, the default for subclasses) lacks one, defining
it raises TypeError: a backend fails at import, naming what it misses, the day the core adds
an opcode, not when a kernel first needs it.

The renderer walks the program once, in order (loop IR is SSA and needs no analysis: see
ug_core.loop_ir), keeping the text it gives each value in `names`.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Iterable, Mapping

from ..device import RenderError
from ..legalize import rendered
from ..loop_ir import Inst, LoopProgram, Opc
from ..ops import OPERAND_KINDS, Op, check_exhaustive

__all__ = ["Renderer", "RenderError", "check_alu_tables", "handler_name"]


def handler_name(opc: Opc) -> str:
    return "op_" + opc.name.lower()


class Renderer:
    """Base of every renderer: dispatch by opcode through a table built at class creation."""

    complete: ClassVar[bool] = False   # subclasses are checked unless they set this False
    dispatch: ClassVar[dict[Opc, Callable[["Renderer", Inst], None]]] = {}
    # the output promises that the kernel's buffers are distinct (noalias, __restrict__): the kit
    # then compiles, on the first launch that passes one buffer twice (an in-place write), a
    # variant rendered with `noalias` set False (the allocator's handles must then be hashable,
    # equal where the memory is the same). An attribute: a renderer may set it per instance
    noalias: bool = False
    # how the kit names the entry point (kit.render_entry): "kernel", after the kernel's name (an
    # identifier: kit.c_name), or "hash", after a hash of the source, for a runtime that loads every
    # program into one namespace (ug-llvm's one JIT engine a process): one symbol per distinct program
    entry_names: ClassVar[str] = "kernel"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "complete" not in cls.__dict__:
            cls.complete = True
        table = {opc: getattr(cls, handler_name(opc), None) for opc in Opc}
        missing = [handler_name(opc) for opc, fn in table.items() if fn is None]
        if cls.complete and missing:
            raise TypeError(f"renderer {cls.__module__}.{cls.__qualname__} has no method for loop IR "
                            f"opcode(s): {', '.join(missing)}")
        cls.dispatch = {opc: fn for opc, fn in table.items() if fn is not None}

    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def v(self, inst: Inst) -> str:
        """The text naming `inst`'s value."""
        return self.names[id(inst)]

    def render(self, program: LoopProgram, name: str) -> Any:
        """The source of `program` as a function called `name`: text, or whatever the backend's
        Compiler takes (Vulkan's is a SPIR-V module object)."""
        raise NotImplementedError

    def rename_entry(self, source: Any, old: str, new: str) -> Any:
        """`source` with its entry point renamed from `old` to `new` (entry_names = "hash")."""
        return source.replace(old, new)

    def walk(self, program: LoopProgram) -> None:
        """Render every instruction, in order."""
        dispatch = self.dispatch
        for inst in program.instructions:
            dispatch[inst.opc](self, inst)


def check_alu_tables(handled: Mapping[str, Iterable[Op]], who: str) -> None:
    """Raise at import time unless a renderer's ALU ops, per operand kind (each of
    ug_core.ops.OPERAND_KINDS that has any: float, int, uint, bool; complex values are split into real
    ones first), cover every op it must spell on that
    kind (ug_core.legalize.rendered)."""
    missing = {kind for kind in OPERAND_KINDS if rendered(kind)} - set(handled)
    if missing:
        raise NotImplementedError(f"{who} has no ALU ops for operand kinds {sorted(missing)}")
    for kind, ops in handled.items():
        check_exhaustive(ops, rendered(kind), f"{who} ({kind} operands)")
