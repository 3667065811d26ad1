"""ug.jit: trace a function once per input signature, then replay its compiled schedule.

The first call with a given signature runs the function lazily (the trace), schedules and
compiles what it computes, and remembers which buffer slots hold the inputs and outputs. Later
calls with that signature skip the Python function and the scheduler: they bind the new input
buffers to those slots and run the compiled steps.

What a replay computes: what calling the function would, or the call raises.

- Arguments form a pytree: the positional and keyword arguments, and tuples, lists and dicts in
  them (namedtuples too). Each tensor in it is an input. The signature (the trace key) is, per
  tensor, its place in the tree, shape, dtype and device, and per other value its place, type and
  value: floats by repr (0.0 and -0.0 differ), numpy arrays by dtype, shape and bytes, and other
  unhashable values by repr. A value that is new traces the function again.
- Outputs may be any pytree of tensors and Python values; a Python value is returned as the
  trace made it.
- Writes (`t.assign(v)`, `t[idx] = v`) to an argument or to a tensor of the enclosing scope are
  made by every replay, on that call's tensor: afterwards it holds what running the function
  would have given it. A replay writes only buffers it makes, so a written tensor gets a new
  buffer each call (a tensor read from it before keeps the old value, as when run eagerly).
- Views (numpy's, see tensor.TensorView) follow their base: a view the function makes of an
  argument and writes writes the argument; a view passed as an argument is one input (its value
  at the call), and a write to it reaches its base on every call (the function gets a plain
  tensor of the view's value, written back into the view after the call); a view the function
  returns is returned as a value of its own.
- Tensors of the enclosing scope that the function reads (weights, say) are read by each
  replay as they are then: a lazy one is realized first, and one whose shape or dtype changed
  makes the call trace again. The trace finds them as the tensors made before the call that
  hold the values its graph reads, and keeps them; a Python name bound to another tensor is not
  seen (as in jax). A lazy constant one (a `ug.full` never realized) is compiled into the
  kernels; a write to it makes the next call trace again.
- While the function is traced nothing runs. `t.realize()` and `ug.realize(...)` leave tensors
  lazy, and reading the value of an argument or of any lazy tensor to Python (`.numpy()`,
  `.item()`, `float()`, `int()`, `bool()`, `numpy.asarray`) raises TracerValueError naming the
  function and the line of the read: a value read then would be frozen into every replay.
  Realized tensors from outside the function can be read; what is read is then part of the
  trace, like any Python value the function computes.
- A jitted function called while another one is traced runs its Python function in the outer
  trace (inlined), so nested jitted functions compose.
- A function keeps its `max_traces` most recently used traces (64 unless given) and warns once
  (RetraceWarning) when it has been traced more than 8 times, naming what changed.

A tensor the function makes and stores outside itself (in a global, an attribute) is not an
output: a replay does not store a new one there.

Each call returns new output tensors, so earlier results stay valid. A function that
compiled to one kernel keeps its last output, and when the caller has dropped it and nothing
reads it any more (see `fast_replay._kernel_replay`), the next call writes into it and returns it
again: that spares building a buffer, node and tensor per call (about 1.5 us of a tiny replay).
So a jitted function holds one output buffer between calls, as a cache.


The package: dispatch.py (`jit` itself: keys each call and picks its trace, or traces), pytree.py
(arguments and results as pytrees, the trace key), tracer.py (the hooks tensor.py calls while a
function is traced, and the error naming the user's line), trace.py (a call traced, scheduled
and compiled into a Trace), retrace.py (RetraceWarning: what changed), records.py (what a trace
keeps), replay.py (the general replay), fast_replay.py (the one-kernel and one-matmul ones) and
precompile.py (ug.precompile and `jit(fn).lower`: compile a call's kernels without running it).
"""

from ..tensor import TracerValueError
from .dispatch import DEFAULT_MAX_TRACES, jit
from .precompile import Precompiled, precompile
from .retrace import RetraceWarning

__all__ = ["DEFAULT_MAX_TRACES", "Precompiled", "RetraceWarning", "TracerValueError", "jit", "precompile"]
