"""RetraceWarning: a jitted function traced many times, and what changed in its arguments."""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Callable

import numpy as np

from ..tensor import Tensor
from .records import sig_text
from .tracer import _fn_label, _outside_frame

RETRACE_WARNING_AFTER = 8
"""A jitted function traced more often than this warns once (RetraceWarning)."""


class RetraceWarning(UserWarning):
    """A jitted function was traced many times: the shapes, dtypes or static values of its
    arguments keep changing (each new one compiles again)."""


# --- what changed, for RetraceWarning -----------------------------------------------------


def _positional_names(fn: Callable[..., Any], n: int) -> list[str]:
    """Names for the first n positional arguments of fn: its parameters', else args[i]."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin or a callable without a signature
        params = []
    names: list[str] = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            names += [f"{p.name}[{i}]" for i in range(max(n - len(names), 0))]
            break
    names += [f"args[{i}]" for i in range(len(names), n)]
    return names[:n]


def _describe(value: Any, path: str, out: list[tuple[str, str]]) -> None:
    if isinstance(value, Tensor):
        out.append((path, f"a tensor of {sig_text(value._node.sig)}"))
    elif isinstance(value, (tuple, list)) and value:
        for i, v in enumerate(value):
            _describe(v, f"{path}[{i}]", out)
    elif isinstance(value, dict) and value:
        for k, v in value.items():
            _describe(v, f"{path}[{k!r}]", out)
    elif isinstance(value, np.ndarray):
        out.append((path, f"an array of shape {value.shape} {value.dtype.name} (bytes hash {hash(value.tobytes()) & 0xFFFFFF:06x})"))
    else:
        text = repr(value)
        out.append((path, f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"))


def _describe_arguments(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, description) of every leaf of a call's arguments."""
    out: list[tuple[str, str]] = []
    for name, a in zip(_positional_names(fn, len(args)), args):
        _describe(a, name, out)
    for name in sorted(kwargs):
        _describe(kwargs[name], name, out)
    return out


def _what_changed(before: list[tuple[str, str]] | None, now: list[tuple[str, str]]) -> str:
    if before is None:
        return "it was called for the first time"
    for (path_before, was), (path, is_now) in zip(before, now):
        if path_before != path:
            return f"its arguments' structure changed: `{path}` where `{path_before}` was"
        if was != is_now:
            return f"argument `{path}` changed from {was} to {is_now}"
    if len(before) != len(now):
        return f"its arguments' structure changed: {len(now)} leaves where there were {len(before)}"
    return ("its arguments differ from the previous trace's in a way their description does not show "
            "(one tensor passed in several places, or a trace dropped to keep max_traces)")


class _TraceHistory:
    """How often a jitted function was traced, and what its last trace's arguments were."""

    def __init__(self, fn: Callable[..., Any], max_traces: int):
        self.fn = fn
        self.max_traces = max_traces
        self.count = 0
        self.warned = False
        self.last: list[tuple[str, str]] | None = None

    def traced(self, args: tuple[Any, ...], kwargs: dict[str, Any], stale: str | None) -> None:
        self.count += 1
        described = _describe_arguments(self.fn, args, kwargs)
        if self.count > RETRACE_WARNING_AFTER and not self.warned:
            self.warned = True
            why = f"{stale}" if stale is not None else _what_changed(self.last, described)
            _warn(RetraceWarning(
                f"ug.jit: {_fn_label(self.fn)} has been traced {self.count} times (each trace runs the "
                f"Python function, schedules and compiles); this time because {why}. Arguments whose "
                f"shapes, dtypes or Python values keep changing trace again: pass changing numbers as "
                f"tensors, or use a few fixed shapes. (It keeps its {self.max_traces} most recently used "
                f"traces; this warning is given once.)"))
        self.last = described


def _warn(warning: Warning) -> None:
    """warnings.warn, attributed to the user's line that called into ug."""
    frame, _ = _outside_frame()
    if frame is None:
        warnings.warn(warning, stacklevel=2)
        return
    warnings.warn_explicit(warning, type(warning), frame.f_code.co_filename, frame.f_lineno,
                           module=frame.f_globals.get("__name__"))
