#!/usr/bin/env python3
"""The README's install, as a new user runs it, in a fresh virtual environment (scripts/test.sh runs this).

1. build the wheelhouse (scripts/build_wheelhouse.py) into a temporary directory;
2. `python -m venv` there, and in it `pip install --find-links WHEELHOUSE "ug-core[llvm,vulkan]==VERSION"`
   (numpy, pluggy, llvmlite, vulkan come from the package index);
   with a second --find-links directory offering higher versions of the same names (9.9.9 decoys:
   what anyone could upload to the index under names that are not yet ours, docs/publishing.md);
3. check from pip's installation report that every ug-* distribution came from the wheelhouse at
   VERSION (the pins of ug-core's extras are what keeps the decoys out);
4. outside the checkout and without PYTHONPATH, so nothing is imported from the source tree:
   compute on the `cpu` device and compare with numpy, and run `ug devices`, which must list `cpu`
   usable from ug-llvm and a row of ug-vulkan (its device is usable where a Vulkan driver is).

Exits non-zero, saying what is wrong, on any failure. `--keep DIR` leaves the wheelhouse and the
environment in DIR to look at.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from urllib.parse import unquote, urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_wheelhouse  # noqa: E402  (this directory's module)

EXTRAS = ("llvm", "vulkan")
# what the new environment runs: a fused computation on the cpu device against numpy
PROGRAM = """
import numpy as np, ug_core as ug, sys
assert ug.__file__.startswith(sys.prefix), f"ug_core imported from {ug.__file__}, not the environment {sys.prefix}"
a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
x = ug.tensor(a, device="cpu")
y = (x @ x.T).softmax(axis=-1) + x.sum()
e = np.exp(a @ a.T - (a @ a.T).max(axis=-1, keepdims=True))
np.testing.assert_allclose(y.numpy(), e / e.sum(axis=-1, keepdims=True) + a.sum(), rtol=1e-5)
print("computed on", y.device, "with ug-core", ug.__version__)
"""


DECOY_VERSION = "9.9.9"


def write_decoy(directory: Path, name: str, version: str = DECOY_VERSION) -> Path:
    """A minimal installable wheel of `name` at `version` that contains no code: a higher version
    than ours under our name, as an index would offer it to pip."""
    stem = f"{name.replace('-', '_')}-{version}"
    files = {
        f"{stem}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{stem}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: ug-check-install\nRoot-Is-Purelib: true\n"
                                   "Tag: py3-none-any\n",
    }
    def digest(text: str) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record = [f"{path},sha256={digest(text)},{len(text.encode())}" for path, text in files.items()]
    files[f"{stem}.dist-info/RECORD"] = "\n".join(record + [f"{stem}.dist-info/RECORD,,"]) + "\n"
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel


def clean_env() -> dict[str, str]:
    """The environment without what would point python at the checkout or pick devices for it."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not k.startswith("UG_")}


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def check(work: Path) -> None:
    root = build_wheelhouse.ROOT
    version = build_wheelhouse.project_field(root / "pyproject.toml", "version")
    names = {build_wheelhouse.project_field(d / "pyproject.toml", "name") for d in build_wheelhouse.packages()}
    wheelhouse = work / "wheelhouse"
    t0 = time.perf_counter()
    build_wheelhouse.build(wheelhouse)
    t1 = time.perf_counter()
    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--clear", str(venv)])
    py = str(venv / "bin" / "python")
    env = clean_env()
    report = work / "pip-report.json"
    requirement = f"ug-core[{','.join(EXTRAS)}]=={version}"
    decoys = work / "decoys"
    for name in ["ug-core"] + [f"ug-{e}" for e in EXTRAS]:
        write_decoy(decoys, name)
    run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--find-links", str(wheelhouse),
         "--find-links", str(decoys), "--report", str(report), requirement], env=env, cwd=work)
    t2 = time.perf_counter()
    installed = {item["metadata"]["name"]: item for item in json.loads(report.read_text())["install"]}
    ours = {n: item for n, item in installed.items() if n.startswith("ug-")}
    expected = {"ug-core"} | {f"ug-{e}" for e in EXTRAS}
    problems = []
    if set(ours) != expected:
        problems.append(f"installed ug distributions {sorted(ours)}, expected {sorted(expected)}")
    for name, item in sorted(ours.items()):
        url = item["download_info"]["url"]
        path = Path(unquote(urlparse(url).path))
        if not (url.startswith("file:") and path.parent == wheelhouse):
            problems.append(f"{name} came from {url}, not from the wheelhouse {wheelhouse}")
        if item["metadata"]["version"] != version:
            problems.append(f"{name} is version {item['metadata']['version']}, not {version}")
        if name not in names:
            problems.append(f"{name} is not a package of this tree ({sorted(names)})")
    if problems:
        raise SystemExit("error: " + "\n       ".join(problems))
    # from a directory outside the checkout: python puts the current directory first on sys.path
    run([py, "-c", PROGRAM], env=env, cwd=work)
    devices = run([str(venv / "bin" / "ug"), "devices"], env=env, cwd=work, capture_output=True, text=True).stdout
    print(devices)
    # the table's rows: below the header, up to the blank line before "preferred device"
    rows = devices.split("\n\n")[0].splitlines()[1:]
    cpu = next((row for row in rows if row.split()[0] == "cpu"), "")
    if not (" ug-llvm " in cpu and " usable" in cpu and "not usable" not in cpu):
        problems.append(f"`ug devices` does not list cpu usable from ug-llvm: {cpu or 'no cpu row'}")
    # the vulkan device is usable only where a Vulkan driver is (CI: lavapipe); its plugin's row is always there
    if not any(" ug-vulkan " in row for row in rows):
        problems.append("`ug devices` has no row of the ug-vulkan plugin")
    if problems:
        raise SystemExit("error: " + "\n       ".join(problems))
    print(f"install check passed: wheelhouse {t1 - t0:.0f}s, venv + pip install {t2 - t1:.0f}s, "
          f"total {time.perf_counter() - t0:.0f}s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and leave it (default: a temporary directory)")
    args = parser.parse_args(argv)
    if args.keep:
        work = Path(args.keep).resolve()
        work.mkdir(parents=True, exist_ok=True)
        check(work)
    else:
        with tempfile.TemporaryDirectory(prefix="ug-install-check-") as tmp:
            check(Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
