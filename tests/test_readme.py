"""The README's usage snippet runs, and what it says about its schedule is what ug.schedule shows."""

import contextlib
import io
import os
import re

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _usage_snippet() -> str:
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    snippet = next(b for b in blocks if "ug.schedule(y)" in b)
    return snippet


def test_readme_snippet_schedule_matches_its_comment(device, monkeypatch):
    snippet = _usage_snippet()
    claim = next(line for line in snippet.splitlines() if "print(ug.schedule(y))" in line).split("#", 1)[1]
    matmuls = int(re.search(r"(\d+) matmuls?", claim).group(1))
    kernels = int(re.search(r"(\d+) kernels?", claim).group(1))
    monkeypatch.setenv("UG_DEVICE", device)   # the snippet uses the preferred device
    scope: dict = {}
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        exec(compile(snippet, "README.md", "exec"), scope)
    assert scope["y"].device == device
    # what print(ug.schedule(y)) printed: a summary line, then one "[i] kind ..." line per item
    lines = printed.getvalue().splitlines()
    items = [line for line in lines if re.match(r"\s*\[\d+\] ", line)]
    kinds = [re.match(r"\s*\[\d+\] (\w+)", line).group(1) for line in items]
    assert (kinds.count("matmul"), kinds.count("kernel")) == (matmuls, kernels), (claim, lines)
    # "one is the whole softmax": its max, exp, sum and division are one kernel
    if "whole softmax" in claim:
        assert all(op in items[-1] for op in ("max", "exp", "sum", "/")), items[-1]
    np.testing.assert_allclose(scope["y"].numpy().sum(axis=-1), 1, rtol=1e-5)
