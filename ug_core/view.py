"""Strided, masked views: every movement op (reshape, permute, expand, slice, flip, pad) is a View.

A View maps an index in `shape` to a linear element offset into its source:
    offset + sum(i[d] * strides[d])
The source is either a buffer or, for a View inside the graph, the *contiguous* layout
of the node it views. Views compose (`compose`) when the result is again one strided
view; when it is not (e.g. flattening a transpose), callers keep a chain of views and
the lowering unravels the linear index with div/mod between them.

Strides may be negative (a flip, a slice with a negative step). A view may carry a `mask`:
per dimension the valid range [lo, hi) of the index; an index outside it reads 0 (False)
and nothing is loaded (pad, and concat as a select of padded inputs). Only the valid indices
need map into the source: `offset + sum(i[d] * strides[d])` is an element of it for those,
and may be anything (negative, past the end) for the others, so no lowering may read
memory, divide, or assume a sign there but under the mask's condition.

Canonical form (so that equal layouts compare equal): a size-1 dimension has stride 0; an
empty view has no offset; a mask that lets every index through is None; a view that lets
none through ("void": it reads zeros only) has strides 0, offset 0 and every range empty,
which for a 0-d view is the mask () (a 0-d view's mask is None or that).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Mask = tuple[tuple[int, int], ...]
"""Per dimension, the valid index range [lo, hi)."""


def prod(xs: tuple[int, ...] | list[int]) -> int:
    return math.prod(xs)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides: list[int] = []
    acc = 1
    for size in reversed(shape):
        strides.append(acc if size != 1 else 0)
        acc *= size
    return tuple(reversed(strides))


def affine_range(lo: int, hi: int, base: int, step: int) -> tuple[int, int]:
    """The j (an interval [a, b), maybe empty) for which lo <= base + j * step < hi; step != 0."""
    if step > 0:
        return -((base - lo) // step), -((base - hi) // step)
    k = -step
    return (base - hi) // k + 1, (base - lo) // k + 1


_CONTIGUOUS: "dict[tuple[int, ...], View]" = {}
"""View.contiguous's views by shape (of Python ints), up to 4,096 shapes."""


@dataclass(frozen=True, slots=True)   # (no __dict__: the frontend keeps tens of thousands of views)
class View:
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0
    mask: Mask | None = None

    def __post_init__(self) -> None:
        # canonical form: see the module doc (the frontend makes tens of thousands of views for
        # a graph of thousands of small ops: the common case, a tuple of strides of a shape with
        # no 1, no 0 and no mask, leaves at once)
        shape = self.shape
        if 1 in shape or type(self.strides) is not tuple:
            strides = tuple([0 if s == 1 else st for s, st in zip(shape, self.strides)])
            if strides != self.strides:
                object.__setattr__(self, "strides", strides)
        if 0 in shape:
            object.__setattr__(self, "strides", (0,) * len(self.shape))
            object.__setattr__(self, "offset", 0)
            object.__setattr__(self, "mask", None)
            return
        if self.mask is None:
            return
        mask = tuple((max(lo, 0), min(hi, size)) for (lo, hi), size in zip(self.mask, self.shape))
        if not mask and self.shape == () and self.mask == ():  # a void 0-d view
            object.__setattr__(self, "offset", 0)
            return
        if any(lo >= hi for lo, hi in mask):
            object.__setattr__(self, "strides", (0,) * len(self.shape))
            object.__setattr__(self, "offset", 0)
            object.__setattr__(self, "mask", ((0, 0),) * len(self.shape))
        elif all(r == (0, size) for r, size in zip(mask, self.shape)):
            object.__setattr__(self, "mask", None)
        else:
            object.__setattr__(self, "mask", mask)

    @staticmethod
    def contiguous(shape: tuple[int, ...]) -> "View":
        if type(shape) is tuple:
            known = _CONTIGUOUS.get(shape)
            if known is not None and known.shape == shape and all(type(d) is int for d in shape):
                return known
        view = View(tuple(shape), contiguous_strides(tuple(shape)), 0)
        if type(shape) is tuple and len(_CONTIGUOUS) < 4096 and all(type(d) is int for d in shape):
            _CONTIGUOUS[shape] = view   # (views are immutable: one per shape serves every caller)
        return view

    @staticmethod
    def void(shape: tuple[int, ...]) -> "View":
        """A view reading zeros only."""
        return View(tuple(shape), (0,) * len(shape), 0, ((0, 0),) * len(shape))

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def is_void(self) -> bool:
        """Nothing valid: every element reads 0 (a canonical mask is never partly empty)."""
        return self.mask is not None and all(lo >= hi for lo, hi in self.mask)

    @property
    def is_contiguous(self) -> bool:
        return self.offset == 0 and self.mask is None and self.strides == contiguous_strides(self.shape)

    def valid_ranges(self) -> Mask:
        """The mask, or the full range of every dim."""
        return self.mask if self.mask is not None else tuple((0, s) for s in self.shape)

    def bounds(self) -> tuple[int, int]:
        """(first, last + 1) of the source elements the valid indices read; (0, 0) for none."""
        if self.size == 0 or self.is_void:
            return 0, 0
        first = last = self.offset
        for (lo, hi), st in zip(self.valid_ranges(), self.strides):
            a, b = lo * st, (hi - 1) * st
            first += min(a, b)
            last += max(a, b)
        return first, last + 1

    def span(self) -> int:
        """Number of source elements from offset to the last one this view touches, plus one
        (the buffer extent a view with non-negative strides needs past its offset)."""
        return self.bounds()[1] - self.offset if self.size and not self.is_void else 0

    def __str__(self) -> str:
        mask = f", mask={self.mask}" if self.mask is not None else ""
        return f"View(shape={self.shape}, strides={self.strides}, offset={self.offset}{mask})"

    # --- movement ops: each returns a new View over the same source ---------------------

    def permute(self, axes: tuple[int, ...]) -> "View":
        mask = None if self.mask is None else tuple(self.mask[a] for a in axes)
        return View(tuple(self.shape[a] for a in axes), tuple(self.strides[a] for a in axes), self.offset, mask)

    def expand(self, shape: tuple[int, ...]) -> "View":
        strides = tuple(st if old == new else 0 for old, new, st in zip(self.shape, shape, self.strides))
        mask = None
        if self.mask is not None:  # a size-1 dim's range is (0, 1) or empty: it stays full or empty
            mask = tuple(r if old == new else (0, new if r[1] > r[0] else 0)
                         for r, old, new in zip(self.mask, self.shape, shape))
        return View(tuple(shape), strides, self.offset, mask)

    def slice(self, starts: tuple[int, ...], sizes: tuple[int, ...], steps: tuple[int, ...]) -> "View":
        """Index start + j * step (j < size) along each dim; a step may be negative."""
        offset = self.offset + sum(b * st for b, st in zip(starts, self.strides))
        strides = tuple(st * k for st, k in zip(self.strides, steps))
        mask = None
        if self.mask is not None:
            mask = tuple(affine_range(lo, hi, b, k) if n else (0, 0)
                         for (lo, hi), b, k, n in zip(self.mask, starts, steps, sizes))
        return View(tuple(sizes), strides, offset, mask)

    def index(self, dim: int, i: int) -> "View":
        """Fix dimension `dim` to position `i` and drop it."""
        shape = self.shape[:dim] + self.shape[dim + 1:]
        mask = None
        if self.mask is not None:
            lo, hi = self.mask[dim]
            if not lo <= i < hi:
                return View.void(shape)
            mask = self.mask[:dim] + self.mask[dim + 1:]
            if not mask:
                mask = None  # a 0-d view whose one index is valid
        return View(shape, self.strides[:dim] + self.strides[dim + 1:], self.offset + i * self.strides[dim], mask)

    def flip(self, axes: tuple[int, ...]) -> "View":
        """The index along each of `axes` reversed."""
        offset = self.offset + sum((self.shape[a] - 1) * self.strides[a] for a in axes)
        strides = tuple(-st if d in axes else st for d, st in enumerate(self.strides))
        mask = None
        if self.mask is not None:
            mask = tuple((n - hi, n - lo) if d in axes else (lo, hi)
                         for d, ((lo, hi), n) in enumerate(zip(self.mask, self.shape)))
        return View(self.shape, strides, offset, mask)

    def pad(self, widths: tuple[tuple[int, int], ...]) -> "View":
        """`before` invalid indices in front of each dim and `after` behind it (both >= 0)."""
        if not self.shape:
            return self
        shape = tuple(n + b + a for n, (b, a) in zip(self.shape, widths))
        offset = self.offset - sum(b * st for (b, _), st in zip(widths, self.strides))
        mask = tuple((lo + b, hi + b) for (lo, hi), (b, _) in zip(self.valid_ranges(), widths))
        if self.size == 0:
            mask = ((0, 0),) * len(shape)
        return View(shape, self.strides, offset, mask)

    def reshape(self, shape: tuple[int, ...]) -> "View | None":
        """The same elements in row-major order under a new shape, or None if no single strided view does it."""
        if self.is_contiguous:
            return View.contiguous(shape)
        return compose(View.contiguous(shape), self)


def _collapse(view: View) -> list[tuple[int, int, tuple[int, int] | None]]:
    """(size, stride, valid range or None) per dim of `view`, dropping size-1 dims and merging
    unmasked dims that are contiguous with respect to each other (so that fewer carries can
    happen). A dim whose mask restricts it stays a dim of its own."""
    dims: list[tuple[int, int, tuple[int, int] | None]] = []
    ranges = view.valid_ranges()
    for size, stride, (lo, hi) in zip(view.shape, view.strides, ranges):
        if size == 1:
            continue
        rng = None if (lo, hi) == (0, size) else (lo, hi)
        if dims and rng is None and dims[-1][2] is None and dims[-1][1] == stride * size:
            prev_size = dims[-1][0]
            dims[-1] = (prev_size * size, stride, None)
        else:
            dims.append((size, stride, rng))
    return dims


def compose(outer: View, inner: View) -> View | None:
    """One view equal to reading `inner` through `outer`, or None when none exists.

    `outer` indexes the contiguous layout of `inner.shape`; `inner` indexes the source.
    Works on outer's valid region only (its mask: the rest reads 0 whatever it maps to):
    it writes the offset of the region's first index and each outer stride (its size; a
    negative stride is the digits of its size, subtracted) as mixed-radix digits over inner's
    (collapsed) dims; if every inner digit stays within its dim over the region, the map is
    affine and the digits give the new strides. Inner's mask becomes a range on the one outer
    dim that moves each masked inner dim (None when several do).
    """
    if outer.is_void or inner.is_void:
        return View.void(outer.shape)
    if inner.size == 0 or outer.size == 0:
        return View(outer.shape, (0,) * len(outer.shape), 0)
    if inner.is_contiguous:
        return View(outer.shape, outer.strides, outer.offset + inner.offset, outer.mask)
    dims = _collapse(inner)
    sizes = [s for s, _, _ in dims]
    # contiguous strides over the collapsed sizes (no size-1 dims remain, so no zeros)
    cstrides = tuple(prod(sizes[i + 1:]) for i in range(len(sizes)))

    def digits(value: int) -> list[int] | None:
        out = []
        for size, cst in zip(sizes, cstrides):
            d, value = divmod(value, cst)
            if d >= size:
                return None
            out.append(d)
        return out if value == 0 else None

    ranges = outer.valid_ranges()
    start = outer.offset + sum(lo * st for (lo, _), st in zip(ranges, outer.strides))
    base = digits(start) if start >= 0 else None
    if base is None:
        return None
    low, high = list(base), list(base)       # each digit's extremes over the valid region
    moves: list[list[tuple[int, int]]] = [[] for _ in dims]  # per digit: (outer dim, signed digit step)
    new_strides = []
    for d, ((lo, hi), stride) in enumerate(zip(ranges, outer.strides)):
        if hi - lo <= 1 or stride == 0:
            new_strides.append(0)  # (one valid index: its element is the start's)
            continue
        ds = digits(abs(stride))
        if ds is None:
            return None
        sign = 1 if stride > 0 else -1
        for m, digit in enumerate(ds):
            if digit:
                reach = (hi - lo - 1) * digit
                if sign > 0:
                    high[m] += reach
                else:
                    low[m] -= reach
                moves[m].append((d, sign * digit))
        new_strides.append(sign * sum(digit * st for digit, (_, st, _) in zip(ds, dims)))
    if any(lo < 0 or hi >= s for lo, hi, s in zip(low, high, sizes)):
        return None
    mask = list(ranges)
    for (_, _, rng), b, moved in zip(dims, base, moves):
        if rng is None:
            continue
        if not moved:
            if not rng[0] <= b < rng[1]:
                return View.void(outer.shape)
            continue
        if len(moved) > 1:
            return None
        d, step = moved[0]
        a, c = affine_range(rng[0], rng[1], b, step)
        lo, hi = mask[d]
        mask[d] = (max(lo, ranges[d][0] + a), min(hi, ranges[d][0] + c))
    first = inner.offset + sum(digit * st for digit, (_, st, _) in zip(base, dims))
    offset = first - sum(lo * st for (lo, _), st in zip(ranges, new_strides))
    return View(outer.shape, tuple(new_strides), offset, tuple(mask) if mask else None)  # (0-d: all valid)


ViewChain = tuple[View, ...]
"""Views applied one after another: chain[0].shape is the index space being read; each
view maps into the contiguous layout of the next one's shape; the last maps into the
source buffer. An index that any view's mask rejects reads 0."""


def chain_push(chain: ViewChain, view: View) -> ViewChain:
    """Append `view` (which maps the current target's contiguous layout onwards) to the chain,
    merging it into the last view when possible."""
    if not chain:
        return (view,)
    merged = compose(chain[-1], view)
    if merged is not None:
        return chain[:-1] + (merged,)
    return chain + (view,)


def chain_masked(chain: ViewChain) -> bool:
    """Whether some index of the chain may read 0 through a mask."""
    return any(v.mask is not None for v in chain)


def indicator(chain: ViewChain) -> ViewChain:
    """The chain with its last view reading the element at position 1 everywhere (strides 0):
    read from an index vector (Op.IOTA), it is 1 where every mask of `chain` holds, else 0."""
    last = chain[-1]
    return chain[:-1] + (View(last.shape, (0,) * len(last.shape), 1, last.mask),)
