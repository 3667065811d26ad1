"""Accuracy of the float32 transcendentals on every device, in ulps, against numpy's float64
functions (near-exact for float32 arguments), over a wide sweep: random arguments over the
whole range, arguments near 1 and near multiples of pi/2, tiny, huge and subnormal ones, the
range where exp's result is subnormal, and the special values.

The limit is 4 ulp for exp, log, sin, cos and tanh, and sqrt must be correctly rounded.
The run's summary ends with the table of the largest errors per device (`ulp_table`).
(tests/test_ulp.py holds ug_core.mathlib's own measurement, in the loop IR interpreter.)"""
from __future__ import annotations

import numpy as np
import pytest

import ug_core as ug

FUNCTIONS = ("exp", "log", "sin", "cos", "tanh", "sqrt")
MAX_ULP = {"exp": 4.0, "log": 4.0, "sin": 4.0, "cos": 4.0, "tanh": 4.0, "sqrt": 0.5}
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.4028235e38, -3.4028235e38, 1.4e-45, -1.4e-45,
            1.1754942e-38, 1.17549435e-38]


def sweep(name: str) -> np.ndarray:
    """The float32 arguments at which `name` is measured."""
    rng = np.random.default_rng(11)
    sign = lambda n: np.where(rng.random(n) < 0.5, -1.0, 1.0)  # noqa: E731
    subnormal = np.concatenate([[1.4e-45, 2.8e-45, 1e-40, 1.1754942e-38], 10.0 ** rng.uniform(-45, -38, 3000)])
    subnormal = np.concatenate([subnormal, -subnormal])
    tiny = sign(6000) * 10.0 ** rng.uniform(-38, -3, 6000)
    near_one = np.concatenate([1 + np.arange(-400, 400) * 2.0 ** -24, rng.uniform(0.9, 1.1, 6000)])
    everywhere = 10.0 ** rng.uniform(-38, 38.5, 100_000)
    parts: list = {
        "exp": [rng.uniform(-104, 89, 100_000), rng.uniform(-1, 1, 20_000), tiny, subnormal,
                np.linspace(-103.98, -87.3, 20_000), np.linspace(87.0, 88.8, 2000)],   # subnormal and huge results
        "log": [everywhere, near_one, np.abs(tiny), np.abs(subnormal), rng.uniform(0, 10, 10_000), -everywhere[:200]],
        "sin": [rng.uniform(-10, 10, 100_000), rng.uniform(-1e4, 1e4, 20_000), sign(20_000) * 10.0 ** rng.uniform(4, 38.5, 20_000),
                tiny, subnormal, np.arange(-300, 300) * (np.pi / 2), np.arange(1, 300) * (np.pi / 2) * 2.0 ** 20],
        "tanh": [rng.uniform(-10, 10, 100_000), rng.uniform(-1, 1, 20_000), tiny, subnormal, rng.uniform(-100, 100, 2000),
                 [1e-6, -1e-6, 1e-4, 0.5493, 0.62499, 0.625, 0.62501, 9.0, 9.01, 20.0, 50.0]],
        "sqrt": [everywhere, near_one, np.abs(tiny), np.abs(subnormal), -everywhere[:100], rng.uniform(0, 4, 10_000)],
    }["sin" if name == "cos" else name]
    with np.errstate(over="ignore"):
        return np.concatenate([np.asarray(p, np.float64).ravel() for p in parts] + [SPECIALS]).astype(np.float32)


def ulp_errors(got: np.ndarray, x: np.ndarray, name: str) -> np.ndarray:
    """|got - exact| in ulps of the float32 result; 0 where got is the correctly rounded value
    (or both are NaN), inf where a special value (NaN, inf) is wrong."""
    with np.errstate(all="ignore"):
        exact = getattr(np, name)(x.astype(np.float64))
        rounded = exact.astype(np.float32)
        spacing = np.maximum(np.spacing(np.abs(rounded)).astype(np.float64), 2.0 ** -149)
        err = np.abs(got.astype(np.float64) - exact) / spacing
    correct = (got == rounded) | (np.isnan(got) & np.isnan(rounded))
    err[correct] = 0.0
    special = np.isnan(got) | np.isnan(rounded) | np.isinf(got) | np.isinf(rounded)
    err[~correct & special] = np.inf
    return err


_TABLE: dict[str, dict[str, tuple[float, float]]] = {}


def measure(device: str, name: str) -> tuple[float, float]:
    """(largest error in ulps, the argument where it is)."""
    found = _TABLE.setdefault(device, {}).get(name)
    if found is None:
        x = sweep(name)
        got = getattr(ug.tensor(x, device=device), name)().numpy()
        assert got.dtype == np.float32
        err = ulp_errors(got, x, name)
        worst = int(np.argmax(err))
        found = _TABLE[device][name] = (float(err[worst]), float(x[worst]))
    return found


@pytest.mark.parametrize("name", FUNCTIONS)
def test_float32_ulp_error(device, name, record_property):
    worst, at = measure(device, name)
    record_property(f"max_ulp_{name}", worst)
    assert worst <= MAX_ULP[name], f"{device} {name}: {worst:.3g} ulp at x={at!r} (limit {MAX_ULP[name]})"


def ulp_table() -> list[str]:
    """The largest errors measured in this run, one line per device (the kit's conftest prints
    them in the run's summary: a report, not a test of its own)."""
    return [f"max ulp error, float32, {device}: " + "  ".join(f"{n} {row[n][0]:.3g}" for n in FUNCTIONS if n in row)
            for device, row in _TABLE.items()]


