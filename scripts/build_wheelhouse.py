#!/usr/bin/env python3
"""Build the wheelhouse: a wheel of ug-core and of every plugin under plugins/, in one directory.

    python scripts/build_wheelhouse.py [DIR]          # DIR defaults to ./wheelhouse
    pip install --find-links DIR "ug-core[llvm,vulkan]==VERSION"

All the wheels carry one version (the root pyproject.toml's; tests/test_packaging.py keeps every
pyproject and pin equal to it), and ug-core's extras pin each plugin to exactly that version, so
the install above takes ug-core and its plugins from DIR as one set (numpy, pluggy, llvmlite...
come from the package index). docs/publishing.md says why the pins matter and how releases go.

The wheels are built from a temporary copy of the files git would commit (tracked and untracked,
not ignored), not from the checkout itself: setuptools reuses a package's `build/` directory, and
a module moved or deleted since an earlier build would otherwise still ship from there.
`--no-build-isolation` builds with this Python's setuptools instead of fetching setuptools into
an isolated build environment (for a machine without the index).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def packages(root: Path = ROOT) -> list[Path]:
    """The directories that build a distribution: the repository root (ug-core), then each plugin."""
    return [root] + sorted(p.parent for p in (root / "plugins").glob("*/pyproject.toml"))


def project_field(pyproject: Path, field: str) -> str:
    """`[project]`'s `name` or `version` (a plain string field), read without a TOML parser
    (tomllib is Python 3.11+, and this script must run on 3.10)."""
    text = pyproject.read_text()
    project = re.search(r"^\[project\]\n(.*?)(?=^\[|\Z)", text, re.S | re.M)
    found = project and re.search(rf'^{field}\s*=\s*"([^"]+)"', project.group(1), re.M)
    if not found:
        raise SystemExit(f"error: {pyproject} has no [project] {field} = \"...\"")
    return found.group(1)


def wheel_prefix(name: str, version: str) -> str:
    """The start of a wheel's file name (PEP 427: the name with runs of -_. as one _)."""
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-"


def source_files(root: Path) -> list[Path]:
    """The files git would commit (tracked, and untracked but not ignored), relative to root; without
    git (a source tree that is not a checkout), every file but build outputs and caches."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=root, capture_output=True, check=True).stdout
        # --cached still lists a tracked file deleted in the working tree
        return [Path(f) for f in out.decode().split("\0") if f and (root / f).is_file()]
    except (OSError, subprocess.CalledProcessError):
        skip = {"build", "dist", "__pycache__", ".git", ".tox", ".venv", "wheelhouse"}
        return [p.relative_to(root) for p in root.rglob("*")
                if p.is_file() and not skip.intersection(p.relative_to(root).parts)
                and not any(part.endswith(".egg-info") for part in p.relative_to(root).parts)]


def build(out: Path, build_isolation: bool = True) -> list[Path]:
    """Build every package's wheel into `out` (replacing ug wheels already there); returns them."""
    dirs = packages()
    names = [project_field(d / "pyproject.toml", "name") for d in dirs]
    versions = {project_field(d / "pyproject.toml", "version") for d in dirs}
    if len(versions) != 1:
        raise SystemExit(f"error: the packages' versions differ ({sorted(versions)}); "
                         "python scripts/set_version.py X.Y.Z sets them all")
    version = versions.pop()
    out.mkdir(parents=True, exist_ok=True)
    # an older build of the same version would be overwritten anyway; an other version's wheel left
    # here would sit beside the new ones and confuse whoever reads the directory
    for name in names:
        for stale in out.glob(f"{re.sub(r'[-_.]+', '_', name).lower()}-*.whl"):
            stale.unlink()
    with tempfile.TemporaryDirectory(prefix="ug-wheelhouse-") as tmp:
        copy = Path(tmp) / "src"
        for rel in source_files(ROOT):
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, copy / rel)
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q",
               "--wheel-dir", str(out)]
        if not build_isolation:
            cmd.append("--no-build-isolation")
        cmd += [str(copy / d.relative_to(ROOT)) for d in dirs]
        subprocess.run(cmd, check=True)
    wheels = []
    for name in names:
        found = sorted(out.glob(wheel_prefix(name, version) + "*.whl"))
        if len(found) != 1:
            raise SystemExit(f"error: expected one wheel of {name} {version} in {out}, found {found}")
        wheels += found
    return wheels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", nargs="?", default=str(ROOT / "wheelhouse"), help="where the wheels go")
    parser.add_argument("--no-build-isolation", action="store_true",
                        help="build with this Python's setuptools (no index needed)")
    args = parser.parse_args(argv)
    out = Path(args.dir).resolve()
    wheels = build(out, build_isolation=not args.no_build_isolation)
    version = project_field(ROOT / "pyproject.toml", "version")
    print(f"{len(wheels)} wheels in {out}:")
    for w in wheels:
        print(f"  {w.name}")
    print(f'install: pip install --find-links {out} "ug-core[llvm,vulkan]=={version}"')
    return 0


if __name__ == "__main__":
    sys.exit(main())
