"""Reverse-mode differentiation of the lazy graph: ug.grad, ug.value_and_grad, ug.vjp, ug.jvp,
ug.gradients and ug.stop_gradient.

A function's result is a lazy graph over its arguments; its gradient is more graph. `vjp` runs the
function on fresh handles of its arguments (identity views: the graph then tells the uses of
each argument apart from anything captured that was computed from the same tensor), walks the
result's graph from the result back to those handles, and applies each op's vector-Jacobian
product (the rules sit next to the ops' meanings in ops.py: ALU[op].vjp, REDUCE[op].vjp,
SCAN_VJP, STRUCTURAL_VJP; autodiff/rules.py holds their helpers). The cotangents it builds are lazy
tensors: the backward graph fuses and compiles like any other, and under ug.jit a whole
training step is one compiled schedule.

Rules of the road (as JAX's):
- Gradients flow through float and complex values only. Integer and bool results (comparisons,
  argmax, indices, bitwise ops) carry none, and differentiating with respect to an integer argument is
  a TypeError. Piecewise-constant float ops (floor, round, floor division, sign) have zero
  gradient.
- Ties: max / min reductions and maximum / minimum split the gradient equally between equal
  elements; cummax / cummin give it to the element the running extreme was taken from (the
  last of equal ones, torch's rule); sort / topk to the element each output came from.
- A complex value is the pair of reals (re, im): its cotangent is dL/dre + i dL/dim, so the
  gradient of a real loss with respect to a complex input is torch's (twice the conjugate
  Wirtinger derivative; JAX's is its conjugate). See docs/autodiff.md.
- An index (gather's, scatter's, sort's indices) gets no gradient; a gather's transpose is a
  scatter-add and a scatter-add's a gather.
- `ug.custom` ops are differentiated by the `vjp` given to `ug.custom`, or raise a TypeError.
- A value realized while the function runs (`.numpy()` of an intermediate, a boolean mask)
  keeps its graph until the gradient is built, so nothing silently stops a gradient.

The package: reverse.py (the walk from the result back to the arguments, and the public
functions), rules.py (the helpers the rules in ops.py call: the `d` they are given),
view_vjp.py (a view's transpose).
"""

from ..custom import define_vjp
from .reverse import grad, gradients, jvp, keep_graph, stop_gradient, value_and_grad, vjp

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "gradients", "stop_gradient", "keep_graph", "define_vjp"]
