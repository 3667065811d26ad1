"""ug as cubed's backend array library, with cubed's memory bound kept (issue 28):
`CUBED_BACKEND_ARRAY_API_MODULE=ug_core.cubed`.

This module is ug_core's namespace (every name is ug_core's) except that the reductions hand
back their results realized. Why: cubed bounds each task's memory (`allowed_mem`) by projecting
what one chunk at a time costs, and its reductions reduce the chunks of a task one after the
other (`_partial_reduce`: read a chunk, reduce it, concatenate with the running result, reduce
again). A ug reduction left lazy holds its input, so the running result would keep every chunk
the task has read alive until the task's end (measured: the mean and std of four 64 MB chunks in
one task peaked at 571 MB of RSS where cubed projected 201 MB). Realized, each chunk is dropped
as soon as it is reduced, as with numpy; element-wise work feeding a reduction still fuses into
its kernels. (`CUBED_BACKEND_ARRAY_API_MODULE=ug_core` works too, without this bound.)
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import ug_core as _ug
from .tensor import Tensor

REDUCTIONS = ("all", "any", "argmax", "argmin", "count_nonzero", "max", "mean", "min", "nanmax", "nanmean",
              "nanmin", "nanprod", "nanstd", "nansum", "nanvar", "prod", "std", "sum", "var", "vecdot")
"""ug_core's functions whose results this namespace realizes at once (each that ug_core has)."""


def _realizing(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def reduced(*args: Any, **kwargs: Any) -> Any:
        out = func(*args, **kwargs)
        if isinstance(out, Tensor):
            out.realize()
        return out
    return reduced


_wrapped = {name: _realizing(getattr(_ug, name)) for name in REDUCTIONS if callable(getattr(_ug, name, None))}
globals().update(_wrapped)


def __getattr__(name: str) -> Any:
    """Every other name: ug_core's."""
    return getattr(_ug, name)


def __dir__() -> list[str]:
    return sorted(set(dir(_ug)) | set(_wrapped))
