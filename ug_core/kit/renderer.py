"""The renderer base: loop IR -> source, one method per opcode, checked when defined.

A backend's renderer subclasses `Renderer` (or `CStyleRenderer`, for the C family) and gives
a method `op_<opcode>` for every loop IR opcode (`op_const`, `op_range`, ...). When a class
that says it is complete (`complete = True`, the default for subclasses) lacks one, defining
it raises TypeError: a backend fails at import, naming what it misses, the day the core adds
an opcode, not when a kernel first needs it.

The renderer walks the program once, in order (loop IR is SSA and needs no analysis: see
ug_core.loop_ir), keeping the text it gives each value in `names`.

A renderer declares the op-set version it was written for (`op_set_version`, ug_core.opset) and
the semantics it guards itself (`capabilities`): the core hands it that version's opcodes and ALU
ops only (legalizing newer ones into them) and guards every semantic it did not declare, so a
backend keeps working, unchanged, when the core grows. The completeness check asks for the
opcodes of its version, not of today's loop IR.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, ClassVar, Iterable, Mapping

from ..device import RenderError
from ..legalize import CAPABILITIES, rendered
from ..loop_ir import Inst, LoopProgram, Opc
from ..ops import OPERAND_KINDS, Op, check_exhaustive
from ..opset import DEFAULT, op_set

__all__ = ["Renderer", "RenderError", "check_alu_tables", "handler_name", "renderer_class"]


def handler_name(opc: Opc) -> str:
    return "op_" + opc.name.lower()


class Renderer:
    """Base of every renderer: dispatch by opcode through a table built at class creation."""

    complete: ClassVar[bool] = False   # subclasses are checked unless they set this False
    dispatch: ClassVar[dict[Opc, Callable[["Renderer", Inst], None]]] = {}
    # the loop IR op-set version the renderer was written for (ug_core.opset.VERSIONS): the core
    # hands it only that version's instructions. Declare it: the default, opset.DEFAULT, is the
    # version current when versions began, and stays so as the core grows
    op_set_version: ClassVar[int] = DEFAULT
    # what it does itself that the core would otherwise do for it (ug_core.legalize.CAPABILITIES):
    # the semantics it guards (ug_core.opset.GUARDS: SAFE_INT_DIVISION, ...), NATIVE_F16, NATIVE_MATH
    capabilities: ClassVar[frozenset[str]] = frozenset()
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
        opcodes = op_set(cls.op_set_version).opcodes   # (a ValueError for an unknown version)
        unknown = frozenset(cls.capabilities) - CAPABILITIES
        if unknown:
            raise ValueError(f"renderer {cls.__module__}.{cls.__qualname__}: unknown capabilities {sorted(unknown)} "
                             f"(known: {sorted(CAPABILITIES)})")
        table = {opc: getattr(cls, handler_name(opc), None) for opc in Opc}
        missing = [handler_name(opc) for opc, fn in table.items() if fn is None and opc in opcodes]
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


def check_alu_tables(handled: Mapping[str, Iterable[Op]], who: str, version: int = DEFAULT) -> None:
    """Raise at import time unless a renderer's ALU ops, per operand kind (each of
    ug_core.ops.OPERAND_KINDS that has any in op-set `version`: float, int, uint, bool; complex
    values are split into real ones first), cover every op it must spell on that kind
    (ug_core.legalize.rendered): the ops of the version it was written for, not today's."""
    missing = {kind for kind in OPERAND_KINDS if rendered(kind, version)} - set(handled)
    if missing:
        raise NotImplementedError(f"{who} has no ALU ops for operand kinds {sorted(missing)}")
    for kind, ops in handled.items():
        check_exhaustive(ops, rendered(kind, version), f"{who} ({kind} operands)")


def renderer_class(factory: Callable[[], Renderer]) -> type[Renderer]:
    """The Renderer class a device's renderer factory makes (the class itself, a
    functools.partial of it, or any callable, which is called once to see)."""
    if isinstance(factory, type):
        return factory
    if isinstance(factory, functools.partial) and isinstance(factory.func, type):
        return factory.func
    return type(factory())
