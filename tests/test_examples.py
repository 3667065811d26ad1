"""The examples run as a user runs them, and do what they say."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_train_digits_reaches_97_percent():
    """examples/train_digits.py trains its CNN on scikit-learn's digits to >= 97% test accuracy
    (README's training example), printing a progress bar with the loss per epoch."""
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "train_digits.py")], capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    accuracy = re.search(r"test accuracy: ([0-9.]+)", run.stdout)
    assert accuracy is not None, run.stdout[-2000:]
    assert float(accuracy.group(1)) >= 0.97, run.stdout[-2000:]
    assert "loss=" in run.stderr and "epoch 15/15" in run.stderr   # tqdm's bar, on stderr


def test_readme_training_snippet_trains():
    """README's "Training" snippet, as written: the jitted SGD step lowers the loss and replays."""
    import numpy as np
    import ug_core as ug
    readme = (ROOT / "README.md").read_text()
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "value_and_grad" in b)
    scope = {"ug": ug}
    exec(compile(snippet, "README.md", "exec"), scope)
    rng = np.random.default_rng(0)
    p = {"w": ug.tensor(rng.standard_normal((4, 1, 3, 3)).astype(np.float32) * 0.3), "b": ug.zeros((4,))}
    x = ug.tensor(rng.standard_normal((16, 1, 6, 6)).astype(np.float32))
    y = ug.tensor(rng.integers(0, 4, 16))
    losses = [float(scope["step"](p, x, y)) for _ in range(20)]
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < losses[0] - 0.02, losses
