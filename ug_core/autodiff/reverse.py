"""Reverse mode: the walk from a result back to the nodes to differentiate (applying each op's
rule, the rules' helpers being rules.py), and the public functions built on it: ug.grad,
ug.value_and_grad, ug.vjp, ug.jvp, ug.gradients, ug.stop_gradient, ug.keep_graph."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .. import graph
from ..graph import Node
from ..jit.pytree import _map_tensors
from ..ops import ALU, NO_DERIVATIVE, STRUCTURAL_VJP
from ..tensor import Tensor, tensor, zeros
from . import rules as _rules


# --- the walk ---------------------------------------------------------------------------------


class keep_graph:
    """A context in which a realize keeps the graph of what it computes (graph.set_buffer drops
    a node's sources otherwise, to free memory), so that ug.gradients can still differentiate a
    value realized inside it: `with ug.keep_graph(): loss = f(w); print(loss.numpy());
    (gw,) = ug.gradients(loss, [w])`. ug.grad and ug.vjp need none: they run their function
    inside one (an intermediate read to Python there, a printed loss or a boolean mask's values,
    does not cut the gradient's path), and keep the graph they differentiate. Inside it, ug.jit
    functions run lazily, as part of the caller's graph (a replay's results have no graph).
    The kept sources are let go when the outermost one ends."""

    def __enter__(self) -> "keep_graph":
        graph.kept_sources.depth += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        keeper = graph.kept_sources
        keeper.depth -= 1
        if keeper.depth == 0:
            keeper.nodes = {}


Sources = Callable[[Node], "tuple[Node, ...]"]


def _sources(node: Node) -> tuple[Node, ...]:
    """A node's sources, or those it had when a realize dropped them under keep_graph; for a
    value with its own derivative (define_vjp), that rule's inputs."""
    own = graph.derivatives.get(node)
    if own is not None:
        return own[0]
    return node.srcs or graph.kept_sources.nodes.get(node, ())


def _walk(roots: Sequence[Node], sources: Sources = _sources) -> list[Node]:
    """The nodes the roots depend on, sources before their users (no recursion: graphs may be
    100,000 ops deep). A detached node (stop_gradient) is a leaf."""
    order: list[Node] = []
    seen: set[int] = set()
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack: list[tuple[Node, int]] = [(root, 0)]
        while stack:
            node, i = stack[-1]
            srcs = () if node in graph.detached else sources(node)
            if i < len(srcs):
                stack[-1] = (node, i + 1)
                src = srcs[i]
                if id(src) not in seen:
                    seen.add(id(src))
                    stack.append((src, 0))
            else:
                stack.pop()
                order.append(node)
    return order


def _rule(node: Node, g: Tensor, srcs: tuple[Node, ...]) -> tuple[Tensor | None, ...]:
    out = Tensor(node)
    args = tuple(Tensor(s) for s in srcs)
    own = graph.derivatives.get(node)
    if own is not None:
        return tuple(own[1](g, out, *args))
    if node.op in ALU:
        return tuple(ALU[node.op].vjp(_rules, g, out, *args))
    return tuple(STRUCTURAL_VJP[node.op](_rules, g, out, args, node.arg))


def _backward(roots: Sequence[tuple[Node, Tensor]], wrt: Sequence[Node], sources: Sources = _sources
              ) -> list[Tensor | None]:
    """The cotangents of the `wrt` nodes given each root's cotangent (None: no path)."""
    order = _walk([r for r, _ in roots], sources)
    targets = {id(n) for n in wrt}
    # which nodes lie on a path from a target to a root, through float values
    on_path: set[int] = set()
    for node in order:
        if node.dtype.kind not in "fc":
            continue
        if id(node) in targets or (node not in graph.detached and any(id(s) in on_path for s in sources(node))):
            on_path.add(id(node))
    cotangents: dict[int, Tensor] = {}
    for node, root_ct in roots:
        if id(node) in on_path:
            _accumulate(cotangents, node, root_ct)
    found: dict[int, Tensor] = {}
    for node in reversed(order):
        g = cotangents.pop(id(node), None)
        if g is None:
            continue
        if id(node) in targets:
            found[id(node)] = g
        if node.op in NO_DERIVATIVE or node in graph.detached:
            continue
        srcs = sources(node)
        if not any(id(s) in on_path for s in srcs):
            continue
        for src, src_ct in zip(srcs, _rule(node, g, srcs)):
            if src_ct is not None and id(src) in on_path:
                _accumulate(cotangents, src, src_ct)
    return [found.get(id(n)) for n in wrt]


def _accumulate(cotangents: dict[int, Tensor], node: Node, ct: Tensor) -> None:
    if ct.shape != node.shape:
        raise AssertionError(f"a derivative rule gave shape {ct.shape} for a {node!r}")
    if ct.dtype != node.dtype:
        ct = ct.astype(node.dtype)
    old = cotangents.get(id(node))
    cotangents[id(node)] = ct if old is None else old + ct


# --- the public functions -----------------------------------------------------------------------


def stop_gradient(x: Any) -> Tensor:
    """x's value, with no gradient flowing back through it (JAX's stop_gradient, torch's
    detach): a constant to every derivative. Lazy and free (no copy)."""
    t = x if isinstance(x, Tensor) else _as_primal(x)
    return Tensor(graph.detach(t.node))


def gradients(output: Tensor, wrt: Sequence[Tensor], cotangent: Tensor | None = None, *,
              allow_unused: bool = False) -> list[Tensor]:
    """The gradients of `output` with respect to the tensors `wrt` (torch.autograd.grad's
    meaning): each tensor is identified by its value now (its current graph node), and every
    path from it to `output` counts. `cotangent` (output's shape) defaults to 1 for a
    one-element output. A tensor that `output` does not depend on raises ValueError, unless
    allow_unused (then its gradient is zeros). For functions, prefer ug.grad / ug.vjp: they tell
    an argument apart from what was computed from it before the call."""
    if not isinstance(output, Tensor):
        raise TypeError(f"gradients: output must be a Tensor, got {type(output).__name__}")
    wrt = list(wrt)
    for i, t in enumerate(wrt):
        if not isinstance(t, Tensor):
            raise TypeError(f"gradients: wrt[{i}] must be a Tensor, got {type(t).__name__}")
        _check_float(t, f"wrt[{i}]")
    ct = _cotangent_for(output, cotangent, "gradients")
    nodes = [t.node for t in wrt]
    found = _backward([(output.node, ct)], nodes)
    out: list[Tensor] = []
    for i, (t, g) in enumerate(zip(wrt, found)):
        if g is None:
            if not allow_unused:
                raise ValueError(f"gradients: output does not depend on wrt[{i}] (shape {t.shape}); "
                                 f"pass allow_unused=True to get zeros for it")
            g = zeros(t.shape, t.dtype, t.device)
        out.append(g)
    return out


def _check_float(t: Tensor, what: str) -> None:
    if t.dtype.kind not in "fc":
        raise TypeError(f"differentiation needs floating-point inputs: {what} has dtype {t.dtype.name} "
                        f"(cast it with .astype(ug.float32), or leave it out of argnums)")


def _cotangent_for(out: Tensor, cotangent: Tensor | None, fn: str) -> Tensor:
    if cotangent is None:
        if out.size != 1:
            raise ValueError(f"{fn}: the output has shape {out.shape}: a cotangent is needed unless it has one "
                             f"element (grad's function must return a scalar)")
        _check_float(out, "the output")
        if out.dtype.kind == "c":
            raise TypeError(f"{fn}: the output is complex ({out.dtype.name}): a gradient needs a real-valued "
                            f"function (take .real, abs(), ...), or pass a cotangent (ug.vjp)")
        return Tensor(graph.const(1, out.dtype, out.device, out.shape))
    ct = cotangent if isinstance(cotangent, Tensor) else _as_like(cotangent, out)
    if ct.shape != out.shape:
        raise ValueError(f"{fn}: cotangent shape {ct.shape} does not match the output's {out.shape}")
    return ct.astype(out.dtype) if ct.dtype != out.dtype else ct


def _as_like(value: Any, like: Tensor) -> Tensor:
    arr = np.asarray(value)
    return tensor(arr.astype(like.dtype) if arr.dtype != like.dtype else arr, device=like.device)


def _tree_leaves(tree: Any) -> list[Tensor]:
    leaves: list[Tensor] = []

    def note(t: Tensor) -> Tensor:
        leaves.append(t)
        return t
    _map_tensors(tree, note)
    return leaves


def _treereplace(tree: Any, new: Sequence[Any]) -> Any:
    it = iter(new)
    return _map_tensors(tree, lambda t: next(it))


def _handle(t: Tensor) -> Tensor:
    """A fresh name for t's value: an identity view node, so uses through it are told apart from
    every other use of t's node (a captured value computed from it, another argument)."""
    return Tensor(graph.name(t.node))


def _as_primal(value: Any) -> Any:
    """An argument tree with numpy arrays and Python floats as tensors (JAX accepts both)."""
    if isinstance(value, (np.ndarray, float, np.floating)):
        return tensor(value)
    return _map_tensors(value, lambda t: t)


def vjp(fn: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """(fn(*primals), vjp_fn) or, with has_aux, (out, vjp_fn, aux) where fn returns (out, aux):
    vjp_fn(cotangent tree like out) returns one cotangent tree per primal (JAX's jax.vjp).
    Primals are pytrees (tuples, lists, dicts) of float tensors; numpy arrays and Python floats
    are taken as tensors."""
    primals = tuple(_as_primal(p) for p in primals)
    leaves = _tree_leaves(primals)
    for i, t in enumerate(leaves):
        _check_float(t, f"input {i} (shape {t.shape})")
    handles = [_handle(t) for t in leaves]
    # the arguments' nodes now: a write to an argument inside fn (t[0] = 5) gives its handle a
    # new node (the write's), and the gradient is the argument's, from before the write
    wrt = [h.node for h in handles]
    with keep_graph():
        result = fn(*_treereplace(primals, handles))
        out, aux = _split_aux(result, has_aux)
        out_leaves = _tree_leaves(out)
        out_nodes = [t.node for t in out_leaves]
        # the graph as it is now: the outputs (or anything in between) may be realized before
        # vjp_fn is called, and a realize drops a node's sources
        graph_now = {id(n): (n, _sources(n)) for n in _walk(out_nodes)}
    for i, t in enumerate(out_leaves):
        _check_float(t, f"output {i} (shape {t.shape})")

    def sources(node: Node) -> tuple[Node, ...]:
        entry = graph_now.get(id(node))
        return entry[1] if entry is not None else _sources(node)

    def vjp_fn(cotangent: Any) -> tuple[Any, ...]:
        cts = [cotangent] if isinstance(cotangent, Tensor) or cotangent is None else _tree_leaves(cotangent)
        if len(cts) != len(out_nodes):
            raise ValueError(f"vjp: {len(cts)} cotangents for {len(out_nodes)} outputs")
        roots = [(n, _cotangent_for(Tensor(n), c, "vjp")) for n, c in zip(out_nodes, cts)]
        found = _backward(roots, wrt, sources)
        grads = [g if g is not None else zeros(t.shape, t.dtype, t.device) for g, t in zip(found, leaves)]
        return tuple(_treereplace(primals, grads))
    if has_aux:
        return out, vjp_fn, aux
    return out, vjp_fn


def _split_aux(result: Any, has_aux: bool) -> tuple[Any, Any]:
    if not has_aux:
        return result, None
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise TypeError("has_aux=True: the function must return a pair (output, aux)")
    return result[0], result[1]


def _argnums(argnums: int | Sequence[int], n: int) -> tuple[tuple[int, ...], bool]:
    single = isinstance(argnums, (int, np.integer))
    nums = (int(argnums),) if single else tuple(int(a) for a in argnums)  # type: ignore[union-attr,arg-type]
    for a in nums:
        if not -n <= a < n:
            raise ValueError(f"argnums {argnums!r} is out of range for a call with {n} positional arguments")
    return tuple(a % n for a in nums), single


def value_and_grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable[..., Any]:
    """A function returning (fn(*args), the gradient of fn with respect to args[argnums]) (JAX's
    jax.value_and_grad): fn returns a one-element float tensor (or (it, aux) with has_aux: then
    ((value, aux), grad)); the gradient has the argument's pytree structure (a tuple of them
    for a sequence of argnums). The value and the gradients are lazy tensors."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums, single = _argnums(argnums, len(args))

        def partial(*diff: Any) -> Any:
            full = list(args)
            for a, v in zip(nums, diff):
                full[a] = v
            return fn(*full, **kwargs)
        result = vjp(partial, *(args[a] for a in nums), has_aux=has_aux)
        out, pullback = result[0], result[1]
        if not isinstance(out, Tensor) or out.size != 1:
            what = f"shape {out.shape}" if isinstance(out, Tensor) else type(out).__name__
            raise TypeError(f"grad: the function must return a scalar (one-element) tensor, got {what}; "
                            f"use ug.vjp for other outputs")
        grads = pullback(None)
        g = grads[0] if single else tuple(grads)
        return ((out, result[2]), g) if has_aux else (out, g)
    wrapper.__name__ = f"value_and_grad({getattr(fn, '__name__', 'fn')})"
    wrapper.__doc__ = fn.__doc__
    return wrapper


def grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The gradient of fn (returning a one-element float tensor) with respect to its positional
    argument(s) `argnums` (JAX's jax.grad): grad(fn)(*args) has the argument's pytree structure;
    with has_aux (fn returns (value, aux)), (gradient, aux). Lazy: the backward graph fuses like
    any other, and composes with ug.jit (either way round) and with itself (grad(grad(f)))."""
    vg = value_and_grad(fn, argnums, has_aux)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        (value, g) = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    wrapper.__name__ = f"grad({getattr(fn, '__name__', 'fn')})"
    wrapper.__doc__ = fn.__doc__
    return wrapper


def jvp(fn: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """(fn(*primals), the directional derivative of fn along `tangents`) (JAX's jax.jvp). Forward
    mode by transposing the reverse mode: vjp's function u -> J^T u is linear in u, and its own
    VJP at the tangents t is J t. The extra graph is lazy and fuses."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals and {len(tangents)} tangents")
    out, pullback = vjp(fn, *primals)
    out_leaves = _tree_leaves(out)
    dummies = [zeros(t.shape, t.dtype, t.device) for t in out_leaves]
    _, transpose = vjp(lambda *us: pullback(_treereplace(out, us)), *dummies)
    t_out = transpose(tuple(_as_primal(t) for t in tangents))
    return out, _treereplace(out, list(t_out))
