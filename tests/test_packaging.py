"""Packaging: ug-core and the plugins carry one version, and every requirement between them pins it.

ug-core's extras name the plugins (`pip install "ug-core[llvm]"`), and the plugins require ug-core;
an unpinned one installs whatever an index offers under that name, at the highest version, and
none of the names is ours on the public index yet (docs/publishing.md). So every requirement of
one ug-* distribution on another is `==` the version they are all built at, and that version is
the same in every pyproject.toml, `__version__` and install command of the docs
(scripts/set_version.py writes them all). scripts/check_install.py runs the install itself.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10: the test extra installs tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import build_wheelhouse  # noqa: E402
import set_version  # noqa: E402

FIX = "python scripts/set_version.py X.Y.Z sets every one of them"


def pyprojects(root: Path = ROOT) -> dict[Path, dict]:
    return {p: tomllib.loads(p.read_text()) for p in set_version.files(root)["pyproject"]}


def requirements(project: dict) -> list[tuple[str, str]]:
    """(where, requirement) for every requirement of a [project]: its dependencies and each extra."""
    found = [("dependencies", r) for r in project.get("dependencies", [])]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        found += [(f"extra {extra!r}", r) for r in reqs]
    return found


def version_problems(root: Path) -> list[str]:
    """What disagrees with the root pyproject's version, one line each (empty when all agree)."""
    version = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    ours = {data["project"]["name"] for data in pyprojects(root).values()}
    problems = []
    for path, data in pyprojects(root).items():
        where = path.relative_to(root)
        if data["project"]["version"] != version:
            problems.append(f"{where}: version = {data['project']['version']!r}, not {version!r}")
        for section, req in requirements(data["project"]):
            name = re.match(r"[A-Za-z0-9._-]+", req)
            if name and name.group(0).lower().replace("_", "-") in ours:
                if not re.fullmatch(rf"{re.escape(name.group(0))}(\[[^\]]*\])?=={re.escape(version)}", req):
                    problems.append(f"{where} ({section}): {req!r} is not pinned to =={version}")
    # what the script rewrites beyond the pyprojects: __version__ and the docs' install commands
    for path, line, what, found in set_version.spots(root):
        if found != version:
            problems.append(f"{path.relative_to(root)}:{line}: {what} is {found}, not {version}")
    return problems


def test_every_version_and_pin_agrees():
    problems = version_problems(ROOT)
    assert not problems, "ug-core and the plugins must carry one version (" + FIX + "):\n" + "\n".join(problems)


def test_each_plugin_is_an_extra_of_ug_core():
    """`pip install "ug-core[NAME]"` installs the plugin ug-NAME: every plugin under plugins/ has its
    extra (pinned, checked above), and no extra names a ug-* distribution this tree does not build."""
    data = pyprojects()
    plugins = {d["project"]["name"] for p, d in data.items() if p.parent.parent.name == "plugins"}
    extras = data[ROOT / "pyproject.toml"]["project"]["optional-dependencies"]
    named = {re.match(r"ug-[a-z0-9-]+", r).group(0) for reqs in extras.values() for r in reqs
             if r.startswith("ug-")}
    assert named == plugins, (f"plugins without an extra: {sorted(plugins - named)}; "
                              f"extras naming no plugin of this tree: {sorted(named - plugins)}")
    for plugin in plugins:
        short = plugin.removeprefix("ug-")
        assert extras.get(short, [""])[0].startswith(plugin + "=="), (
            f"the extra for {plugin} is [{short}]: `pip install \"ug-core[{short}]\"`")


def test_the_wheelhouse_script_reads_names_and_versions_as_toml_does():
    # build_wheelhouse reads [project] name/version with a regex (it runs on 3.10, without tomllib)
    for path, data in pyprojects().items():
        for field in ("name", "version"):
            assert build_wheelhouse.project_field(path, field) == data["project"][field], (path, field)
    assert [d / "pyproject.toml" for d in build_wheelhouse.packages()] == set_version.files()["pyproject"]


def test_set_version_rewrites_every_spot(tmp_path):
    """On a copy of the tree: a version set by the script passes the check above, and a version
    bumped in one pyproject alone fails it, naming that file and each pin left behind."""
    files = [f for kind in set_version.files().values() for f in kind]
    for f in files:
        (tmp_path / f.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, tmp_path / f.relative_to(ROOT))
    assert set_version.set_version("2.10.0rc1", tmp_path) == len(set_version.spots(ROOT))
    assert version_problems(tmp_path) == []
    assert {v for *_, v in set_version.spots(tmp_path)} == {"2.10.0rc1"}
    llvm = tmp_path / "plugins" / "ug-llvm" / "pyproject.toml"
    llvm.write_text(llvm.read_text().replace('version = "2.10.0rc1"', 'version = "2.10.1"'))
    (tmp_path / "pyproject.toml").write_text((tmp_path / "pyproject.toml").read_text().replace(
        '"ug-c==2.10.0rc1"', '"ug-c"'))
    problems = version_problems(tmp_path)
    assert any(p.startswith("plugins/ug-llvm/pyproject.toml: version = '2.10.1'") for p in problems), problems
    assert any("'ug-c' is not pinned to ==2.10.0rc1" in p for p in problems), problems
    with pytest.raises(ValueError, match="not a version"):
        set_version.set_version("v1", tmp_path)
