#!/usr/bin/env python
"""Run tinygrad's own op tests (test/test_ops.py, class TestOps) on ug through a name translation.

Each TestOps test calls ``helper_test_op(shapes, torch_fn, tinygrad_fn)``: it runs the op in torch
and in "tinygrad", compares the forward values and (unless ``forward_only``) the gradients from
``out.sum().gradient(*inputs)``. Here ``tinygrad`` is ``tests/tinygrad_compat/shim.py``, which maps
tinygrad's Tensor API onto ug_core and computes nothing itself, so the counts measure ug's op
coverage and correctness as a tinygrad user would meet them.

Usage (from the repository root; needs torch, and network access to PyPI the first time):

    python scripts/tinygrad_ops.py                  # forward + backward, all TestOps tests
    python scripts/tinygrad_ops.py --forward-only   # forward values only (FORWARD_ONLY=1)
    python scripts/tinygrad_ops.py -k conv -v       # a subset, printing each failure
    python scripts/tinygrad_ops.py --json out.json  # per-test outcome and reason

The test file is not vendored: the first run downloads tinygrad's sdist from PyPI with
``pip download tinygrad==VERSION --no-binary :all: --no-deps`` and keeps test/test_ops.py and
tinygrad's LICENSE (MIT) in the cache (``$UG_TINYGRAD_CACHE``, default ~/.cache/ug/tinygrad-tests).
0.12.0 is the newest release whose sdist ships its tests (0.13 and 0.14 ship only test_tiny.py);
``--test-file`` runs another copy, e.g. a git checkout's test/test_ops.py at tag v0.14.0.

Output: one line per failing test with its reason category, then the counts, the categories and
the missing ops ordered by how many tests they fail. Categories:
  missing op        the shim found no ug function for a tinygrad op (MissingOp), named
  wrong value       forward (or backward) values, shape or dtype differ from torch
  other error       ug raised (TypeError, ValueError, ...) building or running the op
  error behaviour   the test expected an exception that was not raised, or a different type
  timeout           the test ran past --timeout seconds
each prefixed "backward:" when it happened while differentiating.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
import unittest
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VERSION = "0.12.0"


def fetch_test_file(version: str, cache: Path) -> Path:
    """test/test_ops.py of tinygrad ``version``, from the cache or from its PyPI sdist."""
    dest = cache / version
    target = dest / "test_ops.py"
    if target.exists():
        return target
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", f"tinygrad=={version}", "--no-binary", ":all:",
                        "--no-deps", "--no-build-isolation", "-q", "-d", tmp], check=True)
        sdists = list(Path(tmp).glob("tinygrad-*.tar.gz"))
        if not sdists:
            raise SystemExit(f"pip download gave no tinygrad sdist for {version}")
        with tarfile.open(sdists[0]) as tar:
            names = {Path(m.name).relative_to(Path(m.name).parts[0]).as_posix(): m for m in tar.getmembers()
                     if len(Path(m.name).parts) > 1}
            if "test/test_ops.py" not in names:
                raise SystemExit(f"tinygrad {version}'s sdist has no test/test_ops.py; pick another --version "
                                 f"(0.12.0 has it) or pass --test-file")
            for name, out in (("test/test_ops.py", "test_ops.py"), ("LICENSE", "LICENSE")):
                f = tar.extractfile(names[name])
                assert f is not None
                (dest / out).write_bytes(f.read())
    return target


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout("test ran past the time limit")


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in out:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def classify(exc: BaseException, tb: str, backward: bool, shim: Any) -> tuple[str, str]:
    """(category, detail) of one failing test's exception."""
    prefix = "backward: " if backward else ""
    for e in _chain(exc):
        if isinstance(e, shim.MissingOp):
            return prefix + "missing op", e.op
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, _Timeout):
        return prefix + "timeout", ""
    if msg.startswith("forward pass failed") or msg.startswith("backward pass tensor"):
        kind = "shape" if "shape mismatch" in msg else "dtype" if "dtype mismatch" in msg else "values"
        return ("backward: " if msg.startswith("backward") else "") + "wrong value", f"{kind}: {str(exc)[:300]}"
    if "helper_test_exception" in tb or isinstance(exc, AssertionError) and "not raised" in msg:
        return prefix + "error behaviour", f"{type(exc).__name__}: {msg[:200]}"
    if isinstance(exc, AssertionError):
        return prefix + "wrong value", f"assert: {msg[:300]}"
    return prefix + "other error", f"{type(exc).__name__}: {msg[:200]}"


class _Result(unittest.TestResult):
    """Keeps the first failing exception (also of subtests) with its traceback."""

    def __init__(self) -> None:
        super().__init__()
        self.exc: BaseException | None = None
        self.tb = ""
        self.skip_reason: str | None = None

    def _keep(self, err: Any) -> None:
        if self.exc is None:
            self.exc = err[1]
            self.tb = "".join(traceback.format_exception(*err))

    def addError(self, test: Any, err: Any) -> None:  # noqa: N802
        self._keep(err)

    def addFailure(self, test: Any, err: Any) -> None:  # noqa: N802
        self._keep(err)

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:  # noqa: N802
        if err is not None:
            self._keep(err)

    def addSkip(self, test: Any, reason: str) -> None:  # noqa: N802
        self.skip_reason = reason

    def addUnexpectedSuccess(self, test: Any) -> None:  # noqa: N802
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", default=DEFAULT_VERSION, help="tinygrad release whose test_ops.py to run")
    ap.add_argument("--test-file", type=Path, help="run this test_ops.py instead of downloading one")
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("UG_TINYGRAD_CACHE",
                                                                       Path.home() / ".cache/ug/tinygrad-tests")))
    ap.add_argument("--forward-only", action="store_true", help="compare forward values only (FORWARD_ONLY=1)")
    ap.add_argument("--classes", default="TestOps", help="comma-separated test classes (default TestOps)")
    ap.add_argument("-k", action="append", default=[], help="run tests whose name contains this (repeatable)")
    ap.add_argument("--timeout", type=int, default=180, help="seconds per test")
    ap.add_argument("--device", help="ug device (sets UG_DEVICE)")
    ap.add_argument("--json", type=Path, help="write per-test results here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each failure's traceback tail")
    ap.add_argument("--min-passed", type=int, default=0,
                    help="exit 1 when fewer tests pass (the test command's floor: a regression fails it)")
    args = ap.parse_args(argv)

    if args.forward_only:
        os.environ["FORWARD_ONLY"] = "1"
    if args.device:
        os.environ["UG_DEVICE"] = args.device
    path = args.test_file or fetch_test_file(args.version, args.cache)

    sys.path.insert(0, str(ROOT / "tests" / "tinygrad_compat"))
    import shim  # noqa: E402 - after UG_DEVICE is set
    shim.install()
    spec = importlib.util.spec_from_file_location("tinygrad_test_ops", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    # a test's gradient check runs inside helper_test_op: mark each call's start and successful
    # end, so a failure is "backward" only when it happened while differentiating
    original_helper = mod.helper_test_op

    def helper_test_op(*a: Any, **kw: Any) -> Any:
        shim.reset_phase()
        out = original_helper(*a, **kw)
        shim.reset_phase()
        return out

    mod.helper_test_op = helper_test_op
    loader = unittest.TestLoader()
    tests: list[unittest.TestCase] = []
    for cls_name in args.classes.split(","):
        tests.extend(loader.loadTestsFromTestCase(getattr(mod, cls_name)))
    if args.k:
        tests = [t for t in tests if any(k in t.id() for k in args.k)]

    signal.signal(signal.SIGALRM, _alarm)
    rows: list[dict[str, Any]] = []
    t_start = time.monotonic()
    for test in tests:
        name = test.id().split(".", 1)[1]
        shim.reset_phase()
        result = _Result()
        t0 = time.monotonic()
        signal.alarm(args.timeout)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                test.run(result)
        except _Timeout as e:  # raised outside the test method (setUp/teardown)
            result.exc, result.tb = e, ""
        finally:
            signal.alarm(0)
        row: dict[str, Any] = {"test": name, "seconds": round(time.monotonic() - t0, 2)}
        if result.skip_reason is not None:
            row.update(outcome="skipped", reason=result.skip_reason)
        elif result.exc is None:
            row.update(outcome="passed")
        else:
            cat, detail = classify(result.exc, result.tb, shim.in_backward(), shim)
            row.update(outcome="failed", category=cat, detail=detail)
            print(f"FAIL {name}: [{cat}] {detail[:160]}", flush=True)
            if args.verbose:
                print("    " + "\n    ".join(result.tb.strip().splitlines()[-8:]), flush=True)
        rows.append(row)

    counts = collections.Counter(r["outcome"] for r in rows)
    cats = collections.Counter(r["category"] for r in rows if r["outcome"] == "failed")
    missing = collections.Counter(r["detail"] for r in rows if r.get("category", "").endswith("missing op"))
    mode = "forward only" if args.forward_only else "forward + backward"
    print(f"\ntinygrad test_ops ({path}) on ug, {mode}: {len(rows)} tests in {time.monotonic() - t_start:.0f}s")
    print("failures by category:")
    for cat, n in cats.most_common():
        print(f"  {n:4d}  {cat}")
    print("missing ops by failing tests:")
    for op, n in missing.most_common():
        print(f"  {n:4d}  {op}")
    if args.json:
        args.json.write_text(json.dumps({"mode": mode, "test_file": str(path), "counts": counts, "tests": rows}, indent=1))
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    if counts["passed"] < args.min_passed:
        print(f"error: {counts['passed']} passed, fewer than --min-passed {args.min_passed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
