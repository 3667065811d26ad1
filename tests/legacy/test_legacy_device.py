"""A backend written against the pre-kit `ug.Device` interface still installs and passes the
device suite (issue 12: the kit is an addition, not a replacement of the low-level path)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_an_old_style_device_passes_the_conformance_kit():
    env = {**os.environ, "PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", "")}
    modules = ["ug_core.testing.test_ops", "ug_core.testing.test_reduce", "ug_core.testing.test_views",
               "ug_core.testing.test_lowering_on_device", "ug_core.testing.test_semantics", "ug_core.testing.test_matmul"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "legacy_device", "-p", "no:cacheprovider",
                           "-m", "not slow", "--ug-device", "legacy", "--pyargs", *modules],
                          capture_output=True, text=True, env=env, cwd=HERE, timeout=900)
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    passed = int(re.search(r"(\d+) passed", tail).group(1))
    assert passed > 500, tail   # the modules really ran on the device, not skipped
