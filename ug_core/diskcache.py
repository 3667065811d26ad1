"""Where backends keep their on-disk caches of compiled kernels, and the switch to turn them off."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(backend: str, override_env: str) -> Path:
    """`$<override_env>` if set, else `$XDG_CACHE_HOME/ug/<backend>` (default `~/.cache/ug/<backend>`)."""
    explicit = os.environ.get(override_env)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ug" / backend


def enabled(env_var: str) -> bool:
    """False when `$<env_var>` is 0/false/no/off (the cache is on by default)."""
    return os.environ.get(env_var, "1").strip().lower() not in ("0", "false", "no", "off")
