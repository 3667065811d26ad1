#!/usr/bin/env python3
"""Set the one version of ug-core and every plugin, everywhere it is written.

    python scripts/set_version.py 0.2.0        # rewrite every spot below to 0.2.0
    python scripts/set_version.py --check      # list the spots; exit 1 if they disagree

ug-core and the plugins under plugins/ are released together at one version, and ug-core's extras
and the plugins' ug-core requirement pin each other to exactly it (docs/publishing.md), so a
version lives in several files: each pyproject.toml's [project] version and its ug-* pins, the
packages' `__version__`, and the install commands in the docs (`"ug-core[llvm,vulkan]==0.1.0"`).
tests/test_packaging.py fails when they disagree; this script changes them all at once.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# a PEP 440 release as we use them (X.Y.Z, optionally a pre/post/dev suffix)
VERSION = r"\d+(?:\.\d+)*(?:(?:a|b|rc|\.post|\.dev)\d+)*"
# [project] version = "X" (anchored at line start: `python_version = ...` elsewhere does not match)
PROJECT_VERSION = re.compile(rf'^(version\s*=\s*")({VERSION})(")', re.M)
# a pin of one of ours: ug-llvm==X, ug-core[llvm,vulkan]==X (in a pyproject or a command in the docs)
PIN = re.compile(rf"(\bug-[a-z0-9]+(?:-[a-z0-9]+)*(?:\[[a-z0-9,\- ]*\])?==)({VERSION})\b")
DUNDER = re.compile(rf'^(__version__\s*=\s*")({VERSION})(")', re.M)


def files(root: Path = ROOT) -> dict[str, list[Path]]:
    """The files holding the version, by kind."""
    plugins = sorted(p for p in (root / "plugins").glob("*") if (p / "pyproject.toml").is_file())
    docs = [root / "README.md", root / "CONTRIBUTING.md", *sorted((root / "docs").glob("*.md")),
            *(p / "README.md" for p in plugins)]
    return {
        "pyproject": [root / "pyproject.toml"] + [p / "pyproject.toml" for p in plugins],
        "module": [root / "ug_core" / "__init__.py"] + sorted(
            i for p in plugins for i in p.glob("*/__init__.py")),
        "doc": [d for d in docs if d.is_file()],
    }


def spots(root: Path = ROOT) -> list[tuple[Path, int, str, str]]:
    """Every place a version of ours is written: (file, line number, what, version)."""
    found = []
    for kind, paths in files(root).items():
        for path in paths:
            text = path.read_text()
            patterns = {"pyproject": [("version", PROJECT_VERSION), ("pin", PIN)],
                        "module": [("__version__", DUNDER)], "doc": [("pin", PIN)]}[kind]
            for what, pattern in patterns:
                for m in pattern.finditer(text):
                    line = text.count("\n", 0, m.start()) + 1
                    label = f"pin {m.group(0)}" if what == "pin" else what
                    found.append((path, line, label, m.group(2)))
    return sorted(found)


def set_version(new: str, root: Path = ROOT) -> int:
    """Rewrite every spot to `new`; returns how many were rewritten."""
    if not re.fullmatch(VERSION, new):
        raise ValueError(f"{new!r} is not a version like 1.2.3 (or 1.2.3rc1, 1.2.3.post1, 1.2.3.dev1)")
    count = 0
    for kind, paths in files(root).items():
        patterns = {"pyproject": [PROJECT_VERSION, PIN], "module": [DUNDER], "doc": [PIN]}[kind]
        for path in paths:
            text = path.read_text()
            for pattern in patterns:
                text, n = pattern.subn(lambda m: m.group(1) + new + (m.group(3) if m.re.groups >= 3 else ""),
                                       text)
                count += n
            path.write_text(text)
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", nargs="?", help="the new version (X.Y.Z)")
    parser.add_argument("--check", action="store_true", help="list the spots, exit 1 if they disagree")
    args = parser.parse_args(argv)
    if args.version:
        print(f"{set_version(args.version)} spots set to {args.version}")
    found = spots()
    versions = {v for *_, v in found}
    if args.check or not args.version:
        for path, line, what, v in found:
            print(f"{path.relative_to(ROOT)}:{line}: {what}: {v}")
        print(f"versions: {', '.join(sorted(versions))}")
    return 0 if len(versions) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
