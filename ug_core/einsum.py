"""einsum: numpy's and torch's Einstein summation, lowered to views, reductions and matmuls.

Each operand is first brought to distinct labels: a label repeated in one operand is its
diagonal (one strided view), a size-1 dim whose label is longer elsewhere is dropped (it
broadcasts), and a label no other operand nor the output has is summed away. Then operands are
contracted two at a time, in a greedy order (the pair whose result is smallest first): the
labels both share and something later needs are batch dims, those both share and nothing later
needs are contracted, so the pair is a (batch, M, K) @ (batch, K, N) matmul of permuted,
reshaped views; a pair with nothing to contract is a broadcast product. The last operand is
summed over what the output lacks and permuted to the output's order. Everything is built from
differentiable ops (views, sum, mul, matmul).
"""

from __future__ import annotations

import math
import operator
import string
from typing import Any, Hashable, Sequence

from .tensor import Tensor
from .tensor_arith import matmul
from .view import View, contiguous_strides

Label = Hashable
"""A letter, or ("...", j) for the j-th ellipsis dim counted from the right."""

_LETTERS = string.ascii_uppercase + string.ascii_lowercase


def _sublist(items: Any, where: str) -> str:
    """numpy's and torch's sublist form (ints 0..51, Ellipsis) as subscript letters."""
    out = []
    for item in items:
        if item is Ellipsis:
            out.append("...")
            continue
        try:
            k = operator.index(item)
        except TypeError:
            raise TypeError(f"einsum: {where} must hold ints in [0, 52) or Ellipsis, got {item!r}") from None
        if not 0 <= k < 52:
            raise ValueError(f"einsum: {where} must hold ints in [0, 52) or Ellipsis, got {k}")
        out.append(_LETTERS[k])
    return "".join(out)


def _parse_term(term: str, ndim: int | None, subscripts: str, where: str) -> list[Label]:
    """The labels of one term; ndim (an operand's rank) sizes its ellipsis, None for the output
    (whose ellipsis is ("...", None), expanded by the caller)."""
    if term.count("...") > 1 or term.replace("...", "").count(".") != 0:
        raise ValueError(f"einsum: {where} of {subscripts!r} has a '.' that is not one '...' ellipsis")
    head, dots, tail = term.partition("...")
    for ch in head + tail:
        if ch not in _LETTERS:
            raise ValueError(f"einsum: {where} of {subscripts!r} has {ch!r}: subscripts are letters a-z, A-Z")
    if ndim is None:
        return [*head, *((("...", None),) if dots else ()), *tail]
    n_dots = ndim - len(head) - len(tail)
    if (n_dots != 0 and not dots) or n_dots < 0:
        raise ValueError(f"einsum: {where} of {subscripts!r} names {len(head) + len(tail)} dims "
                         f"{'(and an ellipsis) ' if dots else ''}but its operand has {ndim}")
    return [*head, *(("...", j) for j in reversed(range(n_dots))), *tail]


def _diagonal(x: Tensor, labels: list[Label], subscripts: str, k: int) -> tuple[Tensor, list[Label]]:
    """x with each repeated label's dims read along their diagonal (one strided view)."""
    unique: list[Label] = []
    for lab in labels:
        if lab not in unique:
            unique.append(lab)
    if len(unique) == len(labels):
        return x, labels
    strides = contiguous_strides(x.shape)
    shape, new_strides = [], []
    for lab in unique:
        dims = [d for d, other in enumerate(labels) if other == lab]
        sizes = {x.shape[d] for d in dims}
        if len(sizes) > 1:
            raise ValueError(f"einsum: operand {k} (shape {x.shape}) repeats label {lab!r} of {subscripts!r} "
                             f"over dims of different sizes {sorted(sizes)}")
        shape.append(x.shape[dims[0]])
        new_strides.append(sum(strides[d] for d in dims))
    return x._view(View(tuple(shape), tuple(new_strides)), writeable=False), unique


def _sum(x: Tensor, labels: list[Label], drop: set[Label]) -> tuple[Tensor, list[Label]]:
    axes = tuple(d for d, lab in enumerate(labels) if lab in drop)
    if not axes:
        return x, labels
    return x.sum(axis=axes), [lab for lab in labels if lab not in drop]


def _arranged(x: Tensor, labels: list[Label], order: list[Label]) -> Tensor:
    """x permuted to `order` (which holds all of x's labels)."""
    perm = [labels.index(lab) for lab in order]
    return x.permute(perm) if perm != list(range(len(perm))) else x


def _contract(a: Tensor, la: list[Label], b: Tensor, lb: list[Label], keep: set[Label],
              sizes: dict[Label, int]) -> tuple[Tensor, list[Label]]:
    """a * b summed over the labels both have and `keep` lacks; the result's labels."""
    batch = [lab for lab in la if lab in lb and lab in keep]
    summed = [lab for lab in la if lab in lb and lab not in keep]
    a_only = [lab for lab in la if lab not in lb]
    b_only = [lab for lab in lb if lab not in la]
    out_labels = batch + a_only + b_only
    if not summed:
        # a broadcast product: each operand permuted to the result's order, size 1 where it lacks a label
        ea = _arranged(a, la, batch + a_only).reshape(*(sizes[x] for x in batch + a_only), *(1,) * len(b_only))
        eb = _arranged(b, lb, batch + b_only).reshape(*(sizes[x] for x in batch), *(1,) * len(a_only),
                                                      *(sizes[x] for x in b_only))
        return ea * eb, out_labels
    nb, m, k, n = (math.prod(sizes[x] for x in group) for group in (batch, a_only, summed, b_only))
    ma = _arranged(a, la, batch + a_only + summed).reshape(nb, m, k)
    mb = _arranged(b, lb, batch + summed + b_only).reshape(nb, k, n)
    prod = matmul(ma, mb)
    return prod.reshape(*(sizes[x] for x in out_labels)), out_labels


def einsum(subscripts: Any, *operands: Any) -> Tensor:
    """Einstein summation over ug tensors, as numpy.einsum and torch.einsum: 'ij,jk->ik' (explicit
    output) or 'ij,jk' (implicit: the labels seen once, sorted, after the ellipsis dims), '...'
    for broadcast leading dims, a label repeated in one operand for its diagonal ('ii->i'), and
    size-1 dims broadcasting against their label's size elsewhere. Ellipsis dims the output lacks
    are summed (torch's rule). Also the sublist form einsum(a, [0, 1], b, [1, 2], [0, 2]) and
    torch's einsum(subscripts, [a, b]). Contractions are matmuls, in a greedy pairwise order."""
    if not isinstance(subscripts, str):
        # the sublist form: op0, sublist0, op1, sublist1, ..., [output sublist]
        args = (subscripts, *operands)
        ops = list(args[0::2][:len(args) // 2])
        terms = [_sublist(s, f"sublist {i}") for i, s in enumerate(args[1::2][:len(args) // 2])]
        spec = ",".join(terms) + ("->" + _sublist(args[-1], "the output sublist") if len(args) % 2 else "")
        return einsum(spec, *ops)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for i, op in enumerate(operands):
        if not isinstance(op, Tensor):
            raise TypeError(f"einsum: operand {i} must be a ug Tensor, got {type(op).__name__}")
    if not operands:
        raise ValueError("einsum: needs at least one operand")
    spec = subscripts.replace(" ", "")
    lhs, arrow, rhs = spec.partition("->")
    if "->" in rhs or "-" in lhs or ">" in lhs or "-" in rhs or ">" in rhs:
        raise ValueError(f"einsum: subscripts {subscripts!r} must have at most one '->'")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum: subscripts {subscripts!r} name {len(terms)} operands, but {len(operands)} "
                         f"were given")
    labels = [_parse_term(t, op.ndim, subscripts, f"term {i}") for i, (t, op) in enumerate(zip(terms, operands))]
    ell = max((sum(1 for lab in ls if isinstance(lab, tuple)) for ls in labels), default=0)
    if arrow:
        raw = _parse_term(rhs, None, subscripts, "the output")
        out: list[Label] = []
        for lab in raw:
            if lab == ("...", None):
                out.extend(("...", j) for j in reversed(range(ell)))
            elif lab in out:
                raise ValueError(f"einsum: the output of {subscripts!r} repeats label {lab!r}")
            elif not any(lab in ls for ls in labels):
                raise ValueError(f"einsum: the output of {subscripts!r} has label {lab!r} that no operand has")
            else:
                out.append(lab)
    else:
        counts: dict[Label, int] = {}
        for ls in labels:
            for lab in ls:
                counts[lab] = counts.get(lab, 0) + 1
        once = sorted(str(lab) for lab, c in counts.items() if not isinstance(lab, tuple) and c == 1)
        out = [("...", j) for j in reversed(range(ell))]
        out.extend(once)
    # sizes: equal, or 1 where another operand's is larger (broadcast)
    sizes: dict[Label, int] = {}
    items: list[tuple[Tensor, list[Label]]] = []
    for k, (op, ls) in enumerate(zip(operands, labels)):
        x, ls = _diagonal(op, ls, subscripts, k)
        for lab, n in zip(ls, x.shape):
            seen = sizes.get(lab)
            if seen is not None and seen != n and seen != 1 and n != 1:
                name = "an ellipsis dim" if isinstance(lab, tuple) else f"label {lab!r}"
                raise ValueError(f"einsum: {name} of {subscripts!r} has sizes {seen} and {n} (operand {k}, shape "
                                 f"{op.shape}), which do not broadcast")
            sizes[lab] = n if seen is None or seen == 1 else seen
        items.append((x, ls))
    # a size-1 dim whose label is longer elsewhere broadcasts: drop it (its one element is the sum)
    for k, (x, ls) in enumerate(items):
        ones = [lab for lab, n in zip(ls, x.shape) if n == 1 and sizes[lab] != 1]
        if ones:
            items[k] = (x.reshape(*(n for lab, n in zip(ls, x.shape) if lab not in ones)),
                        [lab for lab in ls if lab not in ones])
    out_set = set(out)

    def needed(skip: Sequence[int]) -> set[Label]:
        """The labels the output or an operand but those of `skip` has."""
        keep = set(out_set)
        for j, (_, ls) in enumerate(items):
            if j not in skip:
                keep.update(ls)
        return keep

    # what one operand alone has and the output lacks: summed first
    for k, (x, ls) in enumerate(items):
        items[k] = _sum(x, ls, set(ls) - needed([k]))
    while len(items) > 1:
        best: tuple[int, int, int] | None = None
        for i in range(len(items)):
            for j in range(i + 1, len(items)):
                keep = needed([i, j])
                size = math.prod(sizes[lab] for lab in set(items[i][1]) | set(items[j][1]) if lab in keep)
                if best is None or size < best[0]:
                    best = (size, i, j)
        assert best is not None
        _, i, j = best
        keep = needed([i, j])
        (a, la), (b, lb) = items[i], items[j]
        merged = _contract(a, la, b, lb, keep, sizes)
        items = [it for k, it in enumerate(items) if k not in (i, j)] + [merged]
    x, ls = items[0]
    x, ls = _sum(x, ls, set(ls) - out_set)
    return Tensor(_arranged(x, ls, out).node)   # a value of its own (never a view of an operand)
