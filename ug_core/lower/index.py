"""Index arithmetic for the lowering: where a phase is (_PhaseIndex), the element a view chain
reads there and the gate of its masks (IndexMath), loops split at the masks' bounds so that
their tests fold, and the workgroup grid of a gpu launch (split_grid)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Iterator

from .. import dag
from ..kernel_ir import Expr
from ..loop_builder import LoopBuilder
from ..loop_ir import BOOL, Inst, Opc
from ..ops import Op
from ..view import View, ViewChain, prod


@dataclass
class _PhaseIndex:
    """Where one phase is: the outer linear index and the phase's reduced linear index,
    and the dims each of them unravels into (only dims of size > 1)."""

    shape: tuple[int, ...]
    outer_lin: Inst
    outer_dims: tuple[int, ...]
    red_lin: Inst | None
    red_dims: tuple[int, ...]
    lane: Inst | None = None   # outer-blocked cpu: the index b in the block (selects acc[b])


Known = dict[int, tuple[int, int]]
"""Per phase dim, a range [a, b) its index is known to lie in, for the code being emitted (a loop
segment or a version, see IndexMath.segments and IndexMath.versions)."""


@dataclass(frozen=True)
class _Cuts:
    """How to split a loop over a linear index whose leading digit is dim `dim` (the index moves
    `inner` per step of the digit): at `bounds` (0 = c0 < c1 < ... < cn = the dim's size), the
    points where a mask on the dim starts or ends, so that in each segment [c_k, c_k+1) of the
    dim every mask test on it is known true or false."""

    dim: int
    bounds: tuple[int, ...]
    inner: int = 1


def _first_views(roots: list[Expr]) -> list[View]:
    """The masked first views (over the phase index) of the loads and index vectors under `roots`."""
    out = []
    for node in dag.toposort(roots, lambda e: e.srcs):
        chain = node.arg[1] if node.op is Op.LOAD else node.arg[0] if node.op is Op.IOTA else None
        if chain is not None and chain[0].mask is not None:
            out.append(chain[0])
    return out


def _mask_bounds(views: list[View], dim: int, size: int) -> tuple[int, ...]:
    """0, `size`, and every point between where the mask of one of `views` on `dim` starts or ends."""
    points = {0, size}
    for v in views:
        points.update(x for x in v.valid_ranges()[dim] if 0 < x < size)
    return tuple(sorted(points))


MAX_COPIES = 32
"""The most copies of a loop's body that splitting makes (its segments, times the versions of the
code around it, see IndexMath.versions): each is compiled on its own (a softmax over a concat of
8 compiles in 3x the time of one over a plain row), so a loop with more segments keeps its
gates, and the outer dims that would make more versions too."""


def _cuts(views: list[View], dim: int, size: int, inner: int = 1) -> _Cuts | None:
    """Where the masks of `views` split a loop over `dim` (see _Cuts); None: nowhere, or in more
    than MAX_COPIES segments."""
    bounds = _mask_bounds(views, dim, size)
    return _Cuts(dim, bounds, inner) if 2 < len(bounds) <= MAX_COPIES + 1 else None


def _copies(cuts: _Cuts | None) -> int:
    """The loops a loop split at `cuts` becomes."""
    return 1 if cuts is None else len(cuts.bounds) - 1


class IndexMath:
    """The index arithmetic of one lowering: written with `b`, for a kernel whose outer
    shape is `outer`; `known` holds what the loop segments and versions being emitted tell of
    the phase index (see `segments` and `versions`)."""

    def __init__(self, b: LoopBuilder, outer: tuple[int, ...]):
        self.b = b
        self.outer = outer
        self.known: Known = {}

    # -- loops split at the masks' bounds
    def loop(self, lo: Inst, end: Inst, cuts: _Cuts | None, step: int = 1,
             lane: Inst | None = None) -> Iterator[Inst]:
        """`for i in range(lo + lane, end, step)` (lo a multiple of step), split at `cuts` (see
        segments): yields each loop's counter while its body is open."""
        for start, stop in self.segments(lo, end, cuts, step, lane):
            yield self.b.range(start, stop, step)
            self.b.close()

    def segments(self, lo: Inst, end: Inst, cuts: _Cuts | None, step: int = 1,
                 lane: Inst | None = None) -> Iterator[tuple[Inst, Inst]]:
        """The (start, end) of each loop that runs `for i in range(lo + lane, end, step)` (lo a
        multiple of step): one loop, or split at `cuts` into one loop per segment of the cut
        dim, in order, each knowing its segment (self.known) while the caller emits it, so that
        the mask tests on the dim fold: a gated load becomes a load or 0, a select on a mask
        one of its values."""
        b = self.b
        if cuts is None:
            yield (lo if lane is None else b.add(lo, lane)), end
            return
        for a, z in zip(cuts.bounds, cuts.bounds[1:]):
            start = b.max(lo, b.const(a * cuts.inner))
            if lane is not None:  # the first index >= start that is lane (mod step)
                behind = b.add(b.add(lane, b.const(step)), b.mul(b.mod(start, step), -1))
                start = b.add(start, b.mod(behind, step))
            stop = b.min(end, b.const(z * cuts.inner))
            if start.opc is Opc.CONST and stop.opc is Opc.CONST and start.arg >= stop.arg:
                continue
            self.known[cuts.dim] = (a, z)
            yield start, stop
            del self.known[cuts.dim]

    def versions(self, dims: tuple[int, ...], digit: Callable[[int], Inst], exprs: list[Expr],
                 copies: int) -> Iterator[None]:
        """cpu: the code for an outer index once per combination of the segments of the outer
        `dims` (see _Cuts) that the masks in `exprs` cut, each under an IF on its segments and
        knowing them (self.known), so that a pad's first row, a concat's parts along an outer
        dim, ... each get code without those mask tests. Dims from the innermost while the
        versions, times the `copies` of a loop body each holds, stay within MAX_COPIES; yields
        once per version, with its IF open."""
        views = _first_views(exprs)
        chosen: list[tuple[int, tuple[int, ...]]] = []
        for d in reversed(dims):
            cuts = _cuts(views, d, self.outer[d])
            if cuts is not None and copies * _copies(cuts) <= MAX_COPIES:
                chosen.append((d, cuts.bounds))
                copies *= _copies(cuts)
        versions: list[Known] = [{}]
        for d, bounds in chosen:
            versions = [{**v, d: seg} for v in versions for seg in zip(bounds, bounds[1:])]
        for facts in versions:
            cond: Inst | None = None
            for d, (a, z) in facts.items():
                cond = self.range_test(functools.partial(digit, d), a, z, (0, self.outer[d]), cond)
            if cond is not None:
                self.b.if_(cond)
            self.known.update(facts)
            yield
            for d in facts:
                del self.known[d]
            if cond is not None:
                self.b.close()

    # -- index math
    def chain_index(self, chain: ViewChain, index: _PhaseIndex, moved: Inst | None) -> tuple[Inst, Inst | None]:
        """(buffer element index, gate) read by a LOAD: the first view maps the phase index;
        each later view maps the previous view's result, a linear index into its shape's
        contiguous layout, which is unravelled over that shape. `moved`: a runtime offset added
        to the last view's (a slot, see kernel_params). The gate (None: always true) is where
        every view's mask holds; elsewhere the element index may be anything."""
        first = chain[0]
        gate = self.mask_gate(first, lambda d: self.phase_digit(index, d), None, self.known)
        if gate is not None and gate.opc is Opc.CONST:  # (false: nothing is read, the index is moot)
            return self.b.const(0), gate
        if len(chain) == 1:
            return self.view_index(first, index, moved), gate
        lin = self.view_index(first, index)
        for k, view in enumerate(chain[1:], 2):
            dims = [(size, stride) for size, stride in zip(view.shape, view.strides) if size != 1]
            if view.mask is not None:
                gate = self.mask_gate(view, functools.partial(self.digit, lin, view.shape), gate)
            terms = self.linear_terms(lin, [s for s, _ in dims], [st for _, st in dims])
            lin = self.sum_terms(self.offset(view, moved if k == len(chain) else None), terms)
        return lin, gate

    def mask_gate(self, view: View, digit: Callable[[int], Inst], gate: Inst | None,
                  known: Known | None = None) -> Inst | None:
        """`gate` and the condition that the index of each dim d (`digit(d)`) is in view's mask;
        None where that always holds, the constant False where it never does. `known`: per dim, a
        range [a, b) the index lies in, which decides the tests it settles."""
        if view.mask is None:
            return gate
        for d, ((lo, hi), size) in enumerate(zip(view.mask, view.shape)):
            a, z = (known or {}).get(d, (0, size))
            if lo >= z or hi <= a:
                return self.b.const(False, BOOL)
            gate = self.range_test(functools.partial(digit, d), lo, hi, (a, z), gate)
        return gate

    def range_test(self, index: Callable[[], Inst], lo: int, hi: int, known: tuple[int, int],
                   gate: Inst | None) -> Inst | None:
        """`gate` and lo <= index() < hi, for an index known to lie in [known[0], known[1]): the
        tests that this does not settle."""
        b = self.b
        tests = ([b.alu(Op.CMPLE, (b.const(lo), index()), BOOL)] if lo > known[0] else []) + (
            [b.alu(Op.CMPLT, (index(), b.const(hi)), BOOL)] if hi < known[1] else [])
        for test in tests:  # (bool MUL is `and`)
            gate = test if gate is None else b.alu(Op.MUL, (gate, test), BOOL)
        return gate

    def phase_digit(self, index: _PhaseIndex, d: int) -> Inst:
        """The index along dim d of the phase: a digit of the outer or the reduced linear index."""
        if d in index.outer_dims:
            dims, lin = index.outer_dims, index.outer_lin
        elif d in index.red_dims and index.red_lin is not None:
            dims, lin = index.red_dims, index.red_lin
        else:
            return self.b.const(0)  # a dim of size 1
        return self.digit(lin, tuple(index.shape[x] for x in dims), dims.index(d))

    def digit(self, lin: Inst, sizes: tuple[int, ...], d: int) -> Inst:
        """Digit d of `lin` unravelled over `sizes` (row-major; lin < prod(sizes) where it matters)."""
        digit = self.b.idiv(lin, prod(sizes[d + 1:]))
        return digit if all(s == 1 for s in sizes[:d]) else self.b.mod(digit, sizes[d])

    def offset(self, view: View, moved: Inst | None) -> Inst:
        return self.b.const(view.offset) if moved is None else self.b.add(moved, self.b.const(view.offset))

    def view_index(self, view: View, index: _PhaseIndex, moved: Inst | None = None) -> Inst:
        """offset + sum(i[d] * stride[d]) over the phase index. The outer part comes first
        so that it is one loop-invariant value, shared by every view with the same one."""
        assert view.shape == index.shape, (view.shape, index.shape)
        outer = self.linear_terms(index.outer_lin, [view.shape[d] for d in index.outer_dims],
                                   [view.strides[d] for d in index.outer_dims])
        base = self.sum_terms(self.offset(view, moved), outer)
        if index.red_lin is None:
            return base
        red = self.linear_terms(index.red_lin, [view.shape[d] for d in index.red_dims],
                                 [view.strides[d] for d in index.red_dims])
        return self.sum_terms(base, red)

    def linear_terms(self, lin: Inst, sizes: list[int], strides: list[int]) -> list[Inst]:
        """sum(digit[d] * strides[d]) where digit = `lin` unravelled over `sizes` (row-major,
        lin < prod(sizes)), as a list of terms. A run of dims that is contiguous in the view
        (stride[d] == stride[d+1] * size[d+1]) is one digit: (lin // inner) % run_extent,
        where the division is skipped for the last dims and the modulo for the first."""
        b = self.b
        terms = []
        g = 0
        while g < len(sizes):
            h = g
            while h + 1 < len(sizes) and strides[h] == strides[h + 1] * sizes[h + 1]:
                h += 1
            if strides[h] != 0:  # broadcast runs read the same element: no term
                digit = b.idiv(lin, prod(sizes[h + 1:]))
                if g > 0:
                    digit = b.mod(digit, prod(sizes[g:h + 1]))
                terms.append(b.mul(digit, strides[h]))
            g = h + 1
        return terms

    def sum_terms(self, first: Inst, terms: list[Inst]) -> Inst:
        for t in terms:
            first = self.b.add(first, t)
        return first


# --- the gpu grid ------------------------------------------------------------------------------


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def split_grid(count: int, limits: tuple[int, ...]) -> tuple[int, ...]:
    """Workgroups per dim covering `count` (x first, spilling to y, z); the product may exceed
    `count` by less than one row of dim 0, so callers bounds-check when it does."""
    dims: list[int] = []
    rest = count
    for limit in limits:
        dims.append(min(rest, limit))
        rest = -(-rest // dims[-1])
        if rest == 1:
            return tuple(dims)
    raise ValueError(f"{count} workgroups exceed the grid limit {limits}")
