"""Reading settings from environment variables, with errors that name the variable.

Backends read their settings (UG_LLVM_*, UG_VULKAN_*, UG_CUDA_*) through these helpers so that a
mistyped value is a `ConfigError` saying which variable holds what and what it accepts, instead of
a bare `int()` error or a silently ignored value.

Settings read at import time (module constants) use ``strict=False``: a bad value is recorded and
the default returned, because raising at import would make the whole plugin fail to load (its
device would vanish from ``ug devices``). The plugin's device probe then calls `check(prefix)`,
which raises the recorded errors, so the device is reported as "not usable" with the variable's
name, and using it raises that error.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

# variable name -> what is wrong with its value, for values read with strict=False
_invalid: dict[str, str] = {}


class ConfigError(ValueError):
    """An environment variable holds a value ug cannot use."""


def _bad(name: str, message: str, strict: bool) -> None:
    if strict:
        raise ConfigError(message)
    _invalid[name] = message


def env_int(name: str, default: int, *, minimum: int | None = None, strict: bool = True) -> int:
    """$name as an integer (the default when unset or blank), at least `minimum` if given."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        _bad(name, f"{name}={raw!r} is not an integer (default {default})", strict)
        return default
    if minimum is not None and value < minimum:
        _bad(name, f"{name}={raw!r} must be at least {minimum} (default {default})", strict)
        return default
    return value


def env_choice(name: str, default: str, choices: Iterable[str], *, strict: bool = True) -> str:
    """$name, which must be one of `choices` (the default when unset or blank)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    options = tuple(choices)
    if raw not in options:
        _bad(name, f"{name}={raw!r} is not one of {', '.join(options)} (default {default})", strict)
        return default
    return raw


def env_flag(name: str, default: bool, *, strict: bool = True) -> bool:
    """$name as a boolean: 1/true/yes/on or 0/false/no/off, any case (the default when unset or blank)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    _bad(name, f"{name}={raw!r} is not a boolean: use one of {'/'.join(_TRUE)} or {'/'.join(_FALSE)} "
               f"(default {'1' if default else '0'})", strict)
    return default


def env_set(name: str, choices: Iterable[str], *, strict: bool = True) -> set[str]:
    """$name as a comma-separated subset of `choices` (empty when unset)."""
    options = tuple(choices)
    values = {v.strip() for v in os.environ.get(name, "").split(",") if v.strip()}
    unknown = sorted(values - set(options))
    if unknown:
        _bad(name, f"{name} names unknown value(s) {', '.join(map(repr, unknown))}; it takes a comma-separated "
                   f"list of {', '.join(options)}", strict)
        return values & set(options)
    return values


def check(prefix: str) -> None:
    """Raise one ConfigError for every bad value recorded (strict=False) under a variable
    whose name starts with `prefix`."""
    problems = [message for name, message in sorted(_invalid.items()) if name.startswith(prefix)]
    if problems:
        raise ConfigError("; ".join(problems))
