"""Random test data drawn from the running test's own generator.

A module's helpers cannot take the `rng` fixture, so the fixture (ug_core.testing.fixtures,
autouse) points `RNG` at each test's generator before the test runs: ``RNG.integers(...)`` and
``rand(shape)``, in a helper or in a test, draw from the generator the test's `rng` is, seeded from
the test's id, whichever tests ran before it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["RNG", "rand"]


class CurrentGenerator:
    """Forwards every call to the running test's generator (set with `use`)."""

    def __init__(self) -> None:
        self._generator = np.random.default_rng(0)  # outside a test (at import): a fixed one

    def use(self, generator: np.random.Generator) -> None:
        self._generator = generator

    def __getattr__(self, name: str) -> Any:
        return getattr(self._generator, name)


RNG = CurrentGenerator()


def rand(shape: int | tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """Standard normal values of `shape`, as `dtype`."""
    return RNG.standard_normal(shape).astype(dtype)
