"""Strided views: every movement op (reshape, permute, expand, slice, index) is a View.

A View maps an index in `shape` to a linear element offset into its source:
    offset + sum(i[d] * strides[d])
The source is either a buffer or, for a View inside the graph, the *contiguous* layout
of the node it views. Views compose (`compose`) when the result is again one strided
view; when it is not (e.g. flattening a transpose), callers keep a chain of views and
the lowering unravels the linear index with div/mod between them.

Strides are never negative (slices take positive steps only); a size-1 dimension always
has stride 0 so that equal layouts compare equal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def prod(xs: tuple[int, ...] | list[int]) -> int:
    return math.prod(xs)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides: list[int] = []
    acc = 1
    for size in reversed(shape):
        strides.append(acc if size != 1 else 0)
        acc *= size
    return tuple(reversed(strides))


@dataclass(frozen=True)
class View:
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    def __post_init__(self) -> None:
        # canonical form: size-1 dims have stride 0; an empty view has no offset
        strides = tuple(0 if s == 1 else st for s, st in zip(self.shape, self.strides))
        object.__setattr__(self, "strides", strides)
        if prod(self.shape) == 0:
            object.__setattr__(self, "strides", (0,) * len(self.shape))
            object.__setattr__(self, "offset", 0)

    @staticmethod
    def contiguous(shape: tuple[int, ...]) -> "View":
        return View(tuple(shape), contiguous_strides(tuple(shape)), 0)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def is_contiguous(self) -> bool:
        return self.offset == 0 and self.strides == contiguous_strides(self.shape)

    def span(self) -> int:
        """Number of source elements from offset to the last one this view touches, plus one."""
        if self.size == 0:
            return 0
        return 1 + sum((s - 1) * st for s, st in zip(self.shape, self.strides))

    def __str__(self) -> str:
        return f"View(shape={self.shape}, strides={self.strides}, offset={self.offset})"

    # --- movement ops: each returns a new View over the same source ---------------------

    def permute(self, axes: tuple[int, ...]) -> "View":
        return View(tuple(self.shape[a] for a in axes), tuple(self.strides[a] for a in axes), self.offset)

    def expand(self, shape: tuple[int, ...]) -> "View":
        strides = tuple(st if old == new else 0 for old, new, st in zip(self.shape, shape, self.strides))
        return View(tuple(shape), strides, self.offset)

    def slice(self, starts: tuple[int, ...], sizes: tuple[int, ...], steps: tuple[int, ...]) -> "View":
        offset = self.offset + sum(b * st for b, st in zip(starts, self.strides))
        strides = tuple(st * k for st, k in zip(self.strides, steps))
        return View(tuple(sizes), strides, offset)

    def index(self, dim: int, i: int) -> "View":
        """Fix dimension `dim` to position `i` and drop it."""
        return View(
            self.shape[:dim] + self.shape[dim + 1:],
            self.strides[:dim] + self.strides[dim + 1:],
            self.offset + i * self.strides[dim],
        )

    def reshape(self, shape: tuple[int, ...]) -> "View | None":
        """The same elements in row-major order under a new shape, or None if no single strided view does it."""
        if self.is_contiguous:
            return View.contiguous(shape)
        return compose(View.contiguous(shape), self)


def _collapse(view: View) -> list[tuple[int, int]]:
    """(size, stride) per dim of `view`, dropping size-1 dims and merging dims that are
    contiguous with respect to each other (so that fewer carries can happen)."""
    dims: list[tuple[int, int]] = []
    for size, stride in zip(view.shape, view.strides):
        if size == 1:
            continue
        if dims and dims[-1][1] == stride * size:
            prev_size, _ = dims[-1]
            dims[-1] = (prev_size * size, stride)
        else:
            dims.append((size, stride))
    return dims


def compose(outer: View, inner: View) -> View | None:
    """One view equal to reading `inner` through `outer`, or None when none exists.

    `outer` indexes the contiguous layout of `inner.shape`; `inner` indexes the source.
    Works by writing outer's offset and each outer stride as mixed-radix digits over
    inner's (collapsed) dims; if no combination of outer indices carries from one inner
    dim into the next, the map is affine and the digits give the new strides.
    """
    if inner.size == 0 or outer.size == 0:
        return View(outer.shape, (0,) * len(outer.shape), 0)
    if inner.is_contiguous:
        return View(outer.shape, outer.strides, outer.offset + inner.offset)
    dims = _collapse(inner)
    sizes = [s for s, _ in dims]
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

    base = digits(outer.offset)
    if base is None:
        return None
    reach = list(base)
    new_strides = []
    for size, stride in zip(outer.shape, outer.strides):
        if size == 1 or stride == 0:
            new_strides.append(0)
            continue
        ds = digits(stride)
        if ds is None:
            return None
        for m, d in enumerate(ds):
            reach[m] += (size - 1) * d
        new_strides.append(sum(d * st for d, (_, st) in zip(ds, dims)))
    if any(r >= s for r, s in zip(reach, sizes)):
        return None
    offset = inner.offset + sum(d * st for d, (_, st) in zip(base, dims))
    return View(outer.shape, tuple(new_strides), offset)


ViewChain = tuple[View, ...]
"""Views applied one after another: chain[0].shape is the index space being read; each
view maps into the contiguous layout of the next one's shape; the last maps into the
source buffer."""


def chain_push(chain: ViewChain, view: View) -> ViewChain:
    """Append `view` (which maps the current target's contiguous layout onwards) to the chain,
    merging it into the last view when possible."""
    if not chain:
        return (view,)
    merged = compose(chain[-1], view)
    if merged is not None:
        return chain[:-1] + (merged,)
    return chain + (view,)
