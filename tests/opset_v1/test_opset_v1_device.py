"""A backend written for op-set version 1 (c_v1_device.py: the C backend of 2026-11-23) passes the
device conformance kit on today's core, and no program crashes it (issue 26: such a backend
refused to load, or died of SIGFPE, as the core grew).

The kit runs in a subprocess (as tests/legacy does), on the device registered in-process by the
pytest plugin `-p c_v1_device`. The whole kit compiles some 5,500 C kernels the first time (10
minutes on two busy cores; 80 s once they are in the disk cache: 2659 passed, 1217 skipped for
dtypes version 1 lacks); this runs 15 of its modules (-m "not slow": about 2,600 kernels, 3
minutes cold, 1808 passed), which touch every op, dtype, view and reduction of the kit and every
legalization into version 1 (GATED_LOAD from pads and concats, products, rounding, bitwise ops
and shifts, fmod through floor_divide and remainder of floats, scans, gathers, scatters, sorts).
`UG_OPSET_V1_WHOLE_KIT=1` runs all of it.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if not any(shutil.which(cc) for cc in [os.environ.get("CC") or "cc", "gcc", "clang"]):
    pytest.skip("no C compiler (the version-1 backend compiles C)", allow_module_level=True)
MODULES = ["test_ops", "test_int_ops", "test_semantics", "test_scalar_semantics", "test_dtypes", "test_reduce",
           "test_views", "test_view_semantics", "test_lowering_on_device", "test_scan", "test_gather", "test_scatter",
           "test_argreduce", "test_sorting", "test_matmul"]


def _env() -> dict[str, str]:
    # UG_TIER=1: every kernel runs compiled (on tier 0, a host-memory device's new kernel would run
    # as numpy's evaluation of its IR, and the backend's C would not be what ran)
    return {**os.environ, "PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", ""), "UG_TIER": "1"}


def test_a_version_1_backend_passes_the_conformance_kit():
    whole = os.environ.get("UG_OPSET_V1_WHOLE_KIT") == "1"
    modules = ["ug_core.testing"] if whole else [f"ug_core.testing.{m}" for m in MODULES]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "c_v1_device", "-p", "no:cacheprovider",
                           *([] if whole else ["-m", "not slow"]), "--ug-device", "c_v1", "--pyargs", *modules],
                          capture_output=True, text=True, env=_env(), cwd=HERE, timeout=10800 if whole else 1800)
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    passed = int(re.search(r"(\d+) passed", tail).group(1))   # type: ignore[union-attr]
    assert passed > (2000 if whole else 900), tail   # the modules really ran on the device, not skipped


PROGRAM = r"""
import numpy as np, ug_core as ug, c_v1_device
from ug_core.ops import ALU, Op

def check(got, want, what):
    got = got.numpy()
    assert got.dtype == want.dtype and np.array_equal(got, want), (what, got, want)

def conversion(v, dt):   # ops.CONVERSIONS: through an int32 / int64, INT_MIN where NaN or out of its range
    wide = np.dtype(np.int64 if np.dtype(dt).itemsize == 8 else np.int32)
    bits = 8 * wide.itemsize
    inside = (v >= -2.0 ** (bits - 1)) & (v < 2.0 ** (bits - 1))
    return np.where(inside, np.trunc(np.where(inside, v, 0)).astype(wide), np.iinfo(wide).min).astype(dt)

for dt in (np.int32, np.int64):
    info = np.iinfo(dt)
    a = np.array([7, -7, 0, info.min, info.min, info.max, 5, -1], dt)
    b = np.array([0, 0, 0, -1, 0, -1, 2, 0], dt)
    x, y = ug.tensor(a, device="c_v1"), ug.tensor(b, device="c_v1")
    with np.errstate(all="ignore"):
        check(x // y, a // b, "//")
        check(x % y, a % b, "%")
        check(ug.floor_divide(x, y), np.floor_divide(a, b), "floor_divide")
        e = np.array([-1, -2, -3, 0, 1, -1, -2, -5], dt)
        check(x ** ug.tensor(e, device="c_v1"), ALU[Op.POW].numpy(a, e), "** negative")   # (ops.power's: numpy refuses)
        counts = np.array([-1, 40, 70, 31, 63, 64, -64, 3], dt)
        n = ug.tensor(counts, device="c_v1")
        check(x << n, np.left_shift(a, counts), "<<")
        check(x >> n, np.right_shift(a, counts), ">>")
        check(x & y, a & b, "&")
        check(x | n, a | counts, "|")
        check(x ^ n, a ^ counts, "^")
        check(~x, ~a, "~")
    f = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 1e19, -1e19, 2.5, -2.5], np.float64)
    for src in (np.float64, np.float32):
        v = f.astype(src)
        with np.errstate(all="ignore"):   # (numpy's own on x86-64)
            want = conversion(v.astype(np.float64), dt)
        check(ug.tensor(v, device="c_v1").astype(dt), want, f"astype {np.dtype(src)} -> {np.dtype(dt)}")
print("ok")
"""


def test_programs_that_would_trap_in_c_run_on_the_version_1_backend():
    """Integer division and remainder by zero and INT_MIN // -1 (SIGFPE in C), shifts past the
    width, negative integer powers, float -> int conversions of NaN and of values out of range:
    numpy's values (ops.py's), and the process lives (a separate one: a trap would kill pytest)."""
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=_env(), cwd=HERE,
                          timeout=900)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), (done.returncode, done.stdout, done.stderr)


def test_without_the_guard_the_same_division_traps():
    """The guard is what keeps the backend alive: declare that the renderer handles division by
    zero itself (which it does not: `a / b` in C) and the same program dies of SIGFPE."""
    program = r"""
import numpy as np, ug_core as ug, c_v1_device
from ug_core.kit import SAFE_INT_DIVISION
c_v1_device.CV1Renderer.capabilities = frozenset({SAFE_INT_DIVISION})
x = ug.tensor(np.array([7, -7], np.int32), device="c_v1")
print((x // ug.tensor(np.array([0, 0], np.int32), device="c_v1")).numpy())
"""
    env = {**_env(), "UG_C_V1_DISK_CACHE": "0"}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, cwd=HERE, timeout=900)
    assert done.returncode == -signal.SIGFPE, (done.returncode, done.stdout, done.stderr)
