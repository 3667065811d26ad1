"""A sample of cubed's own test suite with ug as cubed's backend array library (issue 28):
CUBED_BACKEND_ARRAY_API_MODULE=ug_core.cubed (ug_core with reductions realized), cubed's Array API functions, linear algebra and indexing on
its single-threaded executor (the full suite, every executor, with numpy and with ug, is in
docs/scaling-out.md). Each failure must be one the list below explains:

- test_var / test_std (some parameters): cubed's tests build their input from Python floats, and
  the backend's default floating dtype makes it: ug's is float32 (docs/array-api.md), numpy's
  float64; the tests compare with numpy's float64 result exactly (`assert_array_equal`), so the
  float32 variance differs in the last digits. With a float64 input the results agree.
cubed fixes its backend when it is imported, so the suite runs in a process of its own."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

EXPLAINED = {
    r"test_var\[.*\]|test_var_int|test_std\[.*\]": "ug's default floating dtype is float32 (numpy's float64); the "
                                                    "tests compare a float32 variance with numpy's float64 exactly",
}
MIN_PASSED = 230   # 239 pass with cubed 0.27.0 (19 fail, all explained)


def test_cubed_suite_sample_with_ug_as_the_backend(tmp_path):
    pytest.importorskip("cubed")
    report = tmp_path / "cubed.xml"
    env = dict(os.environ, CUBED_BACKEND_ARRAY_API_MODULE="ug_core.cubed")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=line", f"--junitxml={report}",
         "--pyargs", "cubed.tests.test_array_api", "cubed.tests.test_linalg", "cubed.tests.test_indexing",
         "-m", "not cloud and not slow", "-k", "not dask and not processes and not threads and not lithops"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    assert report.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    passed, unexplained = 0, []
    for case in ET.parse(report).iter("testcase"):
        outcome = {child.tag for child in case}
        if outcome & {"failure", "error"}:
            if not any(re.fullmatch(p, case.get("name", "")) for p in EXPLAINED):
                unexplained.append(f"{case.get('classname')}::{case.get('name')}")
        elif "skipped" not in outcome:
            passed += 1
    assert not unexplained, f"cubed tests failing with ug as the backend, not explained: {unexplained}"
    assert passed >= MIN_PASSED, (passed, done.stdout[-2000:])
