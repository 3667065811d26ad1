"""The schedule's data: the items it runs (a kernel, a matmul, a custom op, a copy, a sort, an
fft, an attention) and the Schedule that lists them in order. Plain data, no decisions: the
other modules of the package make them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..specs import AttentionSpec, FftSpec, MatmulSpec, SortSpec
from ..dtypes import name as dtype_name
from ..graph import Node
from ..kernel_ir import Kernel


class ScheduleError(RuntimeError):
    """The graph cannot be scheduled (e.g. a cycle created by in-place writes)."""


@dataclass
class KernelItem:
    kernel: Kernel
    buffers: list[Node]          # in the kernel's argument order; outputs first
    outputs: list[Node]
    fused: list[str] = field(default_factory=list)
    alias: dict[Node, Node] = field(default_factory=dict)   # output -> node whose buffer it writes in place
    reduces: list[Node] = field(default_factory=list)       # REDUCE (and SCAN) nodes computed inside
    kind: str = "kernel"

    def describe(self) -> str:
        outs = ", ".join(f"{n.shape}" for n in self.outputs)
        red = f", {len(self.kernel.reductions)} reduction(s) over axes {self.kernel.axes}" if self.kernel.reductions else ""
        ops = " ".join(self.fused) if self.fused else "copy"
        return f"kernel {self.kernel.name}: -> {outs}{red}; fuses [{ops}]"


@dataclass
class MatmulItem:
    out: Node
    a: Node
    b: Node
    spec: MatmulSpec
    kind: str = "matmul"

    @property
    def buffers(self) -> list[Node]:
        return [self.out, self.a, self.b]

    @property
    def outputs(self) -> list[Node]:
        return [self.out]

    def describe(self) -> str:
        return f"matmul {self.spec.a_view.shape} @ {self.spec.b_view.shape} -> {self.out.shape} {dtype_name(self.out.dtype)}"


@dataclass
class CustomItem:
    out: Node
    inputs: list[Node]
    fn: Callable[..., Any]
    kind: str = "custom"

    @property
    def buffers(self) -> list[Node]:
        return [self.out, *self.inputs]

    @property
    def outputs(self) -> list[Node]:
        return [self.out]

    def describe(self) -> str:
        name = getattr(self.fn, "__name__", type(self.fn).__name__)
        return f"custom {name}({', '.join(str(n.shape) for n in self.inputs)}) -> {self.out.shape}"


@dataclass
class _OneSourceItem:
    """An item that makes `out` from the buffer of one node `src`."""
    out: Node
    src: Node

    @property
    def buffers(self) -> list[Node]:
        return [self.out, self.src]

    @property
    def outputs(self) -> list[Node]:
        return [self.out]


@dataclass
class CopyItem(_OneSourceItem):
    kind: str = "copy"

    def describe(self) -> str:
        return f"copy {self.src.shape} {self.src.device} -> {self.out.device}"


@dataclass
class SortItem(_OneSourceItem):
    spec: SortSpec
    kind: str = "sort"

    def describe(self) -> str:
        s = self.spec
        what = "argsort" if s.indices else "sort"
        top = f", first {s.k}" if s.k < s.n else ""
        return f"{what} {s.rows} rows of {s.n}{top}{' descending' if s.descending else ''}"


@dataclass
class FftItem(_OneSourceItem):
    spec: FftSpec
    kind: str = "fft"

    def describe(self) -> str:
        s = self.spec
        what = ("irfft" if s.inverse else "hfft") if s.real_out and s.onesided else \
            ("ihfft" if s.inverse else "rfft") if s.onesided else ("ifft" if s.inverse else "fft")
        resized = f" from {s.n_in}" if s.n_in != s.n_used else ""
        return f"{what} {s.rows} rows of {s.n}{resized} {dtype_name(s.dtype)} ({s.norm})"


@dataclass
class AttentionItem:
    """A device's fused attention (Device.attention): out from q, k, v (and an additive mask),
    read through the views in `spec`."""
    out: Node
    inputs: list[Node]    # q, k, v[, mask]: the buffers the spec's views read
    spec: AttentionSpec
    kind: str = "attention"

    @property
    def buffers(self) -> list[Node]:
        return [self.out, *self.inputs]

    @property
    def outputs(self) -> list[Node]:
        return [self.out]

    def describe(self) -> str:
        s = self.spec
        mask = ", mask" if s.mask_view is not None else ""
        return (f"attention q {s.q_view.shape} k {s.k_view.shape} v {s.v_view.shape}{mask}"
                f"{', causal' if s.causal else ''} -> {self.out.shape} {dtype_name(self.out.dtype)}")


Item = KernelItem | MatmulItem | CustomItem | CopyItem | SortItem | FftItem | AttentionItem


@dataclass
class Schedule:
    items: list[Item]
    targets: list[Node]
    # lazy nodes whose new buffer an in-place assign took over and overwrote: they are left
    # lazy (a later read computes them again) rather than given a buffer holding another value
    clobbered: set[Node] = field(default_factory=set)
    # an original node of the graph -> the node the schedule computes in its place (the
    # device pass's stand-ins, see schedule.device_pass); empty where nothing was rewritten
    replaced: dict[Node, Node] = field(default_factory=dict)

    def adopt_stand_ins(self) -> None:
        """Give each original node its stand-in's buffer, once the run gave the stand-in one:
        the same value, shape and dtype (a user's tensor holds the original)."""
        for original, stand_in in self.replaced.items():
            if stand_in.buffer is not None and original.buffer is None:
                original.set_buffer(stand_in.buffer)

    @property
    def kernels(self) -> list[KernelItem]:
        return [i for i in self.items if isinstance(i, KernelItem)]

    def __str__(self) -> str:
        counts: dict[str, int] = {}
        for item in self.items:
            counts[item.kind] = counts.get(item.kind, 0) + 1
        summary = ", ".join(f"{n} {k}{'' if n == 1 else 's'}" for k, n in counts.items()) or "nothing to do"
        lines = [f"schedule: {summary}"]
        lines += [f"  [{i}] {item.describe()}" for i, item in enumerate(self.items)]
        return "\n".join(lines)
