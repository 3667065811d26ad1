"""README's "Layout" section names every top-level module and package of ug_core, and nothing that is gone.

A name counts when it is written in backticks as a file or a package: `tensor.py`, `kit/`. Every
module directly in ug_core/ (but `__init__.py` and `__main__.py`) and every package (a directory
with an `__init__.py`: `array_api/`, `kit/`, ..., `testing/` too: the conformance kit is installed
with ug-core and documented for backends outside the repository) must be named; every name must
exist, in ug_core/ (`kit/cstyle.py` is ug_core/kit/cstyle.py) or else in the repository
(`plugins/`, `tests/test_readme_layout.py`). When this fails, its message lists what to add and
what to remove, and which modules became packages.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def layout_section(readme: str) -> str:
    """The text of the `## Layout` section, up to the next `## ` heading."""
    found = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", readme, re.S | re.M)
    assert found, "README.md has no '## Layout' section"
    return found.group(1)


def named(section: str) -> set[str]:
    """The backticked names of files (`x.py`) and packages or directories (`x/`) in the section."""
    return {t for t in re.findall(r"`([^`\s]+)`", section) if re.fullmatch(r"[\w./-]+(\.py|/)", t)}


def top_level(package: Path) -> set[str]:
    """A package's modules (`x.py`, no dunder modules) and subpackages (`x/`), by the names README uses."""
    return ({p.name for p in package.glob("*.py") if not p.name.startswith("__")}
            | {p.name + "/" for p in package.iterdir() if (p / "__init__.py").is_file()})


def exists(name: str, package: Path, root: Path) -> bool:
    for base in (package, root):
        path = base / name.rstrip("/")
        if path.is_dir() if name.endswith("/") else path.is_file():
            return True
    return False


def layout_problems(readme: str, package: Path, root: Path) -> list[str]:
    """What the Layout section lacks or names wrongly, one line each (empty when it is true)."""
    names = named(layout_section(readme))
    missing = sorted(top_level(package) - names)
    stale = sorted(n for n in names if not exists(n, package, root))
    problems = []
    moved = {n: n[:-3] + "/" for n in stale if n.endswith(".py") and n[:-3] + "/" in missing}
    moved.update({n: n[:-1] + ".py" for n in stale if n.endswith("/") and n[:-1] + ".py" in missing})
    for old, new in sorted(moved.items()):
        problems.append(f"`{old}` is now `{new}`: rename it")
    missing = [n for n in missing if n not in moved.values()]
    stale = [n for n in stale if n not in moved]
    if missing:
        problems.append(f"not named (add each where the data flow uses it): {', '.join(f'`{n}`' for n in missing)}")
    if stale:
        problems.append(f"named but not in the tree (remove or fix): {', '.join(f'`{n}`' for n in stale)}")
    return problems


def test_readme_layout_names_the_tree():
    readme = (ROOT / "README.md").read_text()
    problems = layout_problems(readme, ROOT / "ug_core", ROOT)
    assert not problems, "README.md's Layout section and ug_core/ disagree:\n" + "\n".join(problems)


def test_layout_problems_name_what_is_missing_stale_and_moved(tmp_path):
    pkg = tmp_path / "ug_core"
    for f in ["__init__.py", "__main__.py", "tensor.py", "graph.py", "shapes.py", "kit/__init__.py",
              "kit/cstyle.py", "schedule/__init__.py", "schedule/fuse.py", "data/notes.txt"]:
        (pkg / f).parent.mkdir(parents=True, exist_ok=True)
        (pkg / f).write_text("")
    (tmp_path / "plugins").mkdir()
    readme = ("# x\n## Layout\n`tensor.py` → `graph.py` → `schedule.py` → `lower.py`; `kit/` (`kit/cstyle.py`,"
              " `kit/gone.py`), `plugins/`, `ug.jit`, `ug-llvm`\n## Next\n`shapes.py`\n")
    assert layout_problems(readme, pkg, tmp_path) == [
        "`schedule.py` is now `schedule/`: rename it",
        "not named (add each where the data flow uses it): `shapes.py`",
        "named but not in the tree (remove or fix): `kit/gone.py`, `lower.py`",
    ]
    fixed = readme.replace("`schedule.py` → `lower.py`", "`schedule/` `shapes.py`").replace(" `kit/gone.py`", "")
    assert layout_problems(fixed, pkg, tmp_path) == []
