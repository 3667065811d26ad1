"""ug_core's import graph: no cycles, and the frontend's layers import downwards only.

Every module of ug_core (ug_core/testing included) is read with `ast`, and every import in it
counts: at module level, inside functions and classes, under `if TYPE_CHECKING:`, in all the forms
(`import a.b`, `from . import b`, `from .a import b`, `from ..a import b`). An import of a submodule
(`from . import scans`, `from .array_api import scatter`) is an edge to that submodule; an import
of a name from a module is an edge to the module. A package's own `__init__` is not counted as
imported by its submodules (Python runs it first, but it is above them: it imports them).

The frontend's layers, lowest first (a module imports its own layer and those below):
  core       everything not named below: dtypes, ops, view, graph, device, runtime, schedule,
             lower, kit, ...
  tensor     shapes, tensor, tensor_arith, tensor_reduce, tensor_index, tensor_io, custom
  namespace  array_api/ (array_api/methods.py binds the Tensor's methods)
  library    autodiff/, jit/, random/, einsum, nn/, and the fft and linalg namespaces
  top        the package's __init__, api, cli, demo, __main__, testing/
A lower layer that needs an upper one when it runs gets it registered (_complex.register_math,
faults.register_core_cache, device.register_host_fft) instead of importing it."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import ug_core
from ug_core.tensor import Tensor

ROOT = Path(ug_core.__file__).parent

TENSOR_LAYER = {"ug_core.shapes", "ug_core.tensor", "ug_core.tensor_arith", "ug_core.tensor_reduce",
                "ug_core.tensor_index", "ug_core.tensor_io", "ug_core.custom"}
LIBRARY_LAYER = {"ug_core.autodiff", "ug_core.jit", "ug_core.random", "ug_core.einsum",
                 "ug_core.fft", "ug_core.linalg"}
TOP_LAYER = {"ug_core", "ug_core.api", "ug_core.cli", "ug_core.demo", "ug_core.__main__", "ug_core.dask", "ug_core.cubed"}
LAYER_NAMES = ["core", "tensor", "namespace", "library", "top"]


def layer(module: str) -> int:
    if module in TOP_LAYER or module.startswith("ug_core.testing"):
        return 4
    if any(module == m or module.startswith(m + ".") for m in LIBRARY_LAYER | {"ug_core.nn"}):
        return 3   # (a library package's modules too: ug_core.random.threefry)
    if module == "ug_core.array_api" or module.startswith("ug_core.array_api."):
        return 2
    if module in TENSOR_LAYER:
        return 1
    return 0


# --- the walk ----------------------------------------------------------------------------------


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package at `root`: its dotted name -> its file."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """The modules of `known` that module `name` (the file `path`) imports, with the line of each
    import: every import statement in the file, wherever it is."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    edges = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # `from m import x`: the submodule m.x where there is one, else the module m
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                       for alias in node.names]
        for target in targets:
            while target not in known and "." in target:   # (a name imported from a module)
                target = target.rpartition(".")[0]
            if target in known and target != name:
                edges.append((target, node.lineno))
    return edges


def graph(root: Path, package: str) -> tuple[dict[str, Path], dict[str, dict[str, int]]]:
    """(modules, module -> {imported module: line of the first such import})."""
    known = modules(root, package)
    edges: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        edges[name] = {}
        for target, line in imports(name, path, known):
            edges[name].setdefault(target, line)
    return known, edges


def cycles(edges: dict[str, dict[str, int]]) -> list[tuple[set[str], list[str]]]:
    """Per strongly connected component of more than one module (Tarjan's algorithm, iterative):
    its modules, and one cycle through them (a shortest way round from its first module, which
    is repeated at the end)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(set(component))
    found = []
    for component in components:   # a shortest way back to its first module, within it
        first = min(component)
        paths = {first: [first]}
        frontier = [first]
        while frontier and first not in [t for n in frontier for t in edges[n]]:
            following = []
            for n in frontier:
                for t in edges[n]:
                    if t in component and t not in paths:
                        paths[t] = paths[n] + [t]
                        following.append(t)
            frontier = following
        last = next(n for n in frontier if first in edges[n])
        found.append((component, paths[last] + [first]))
    return found


def describe(found: tuple[set[str], list[str]], known: dict[str, Path], edges: dict[str, dict[str, int]]) -> str:
    component, cycle = found
    steps = [f"  {a} -> {b}   ({known[a].relative_to(known[a].parents[len(a.split('.')) - 1]).as_posix()}:"
             f"{edges[a][b]})" for a, b in zip(cycle, cycle[1:])]
    return (f"{len(component)} modules in a cycle ({', '.join(sorted(component))}); one way round:\n"
            + "\n".join(steps))


# --- ug_core -----------------------------------------------------------------------------------


def test_ug_core_has_no_import_cycle():
    known, edges = graph(ROOT, "ug_core")
    assert len(known) > 100 and "ug_core.array_api.methods" in known   # (the walk found the package)
    found = cycles(edges)
    assert not found, "import cycles in ug_core:\n" + "\n".join(describe(c, known, edges) for c in found)


def test_frontend_layers_import_downwards():
    known, edges = graph(ROOT, "ug_core")
    upward = [f"  {a} ({LAYER_NAMES[layer(a)]}) imports {b} ({LAYER_NAMES[layer(b)]}) at line {line}"
              for a, targets in edges.items() for b, line in targets.items() if layer(b) > layer(a)]
    assert not upward, "imports of an upper layer:\n" + "\n".join(upward)


def test_tensor_imports_none_of_its_method_modules():
    """tensor.py is the bottom of the frontend: the modules that build its methods import it."""
    known, edges = graph(ROOT, "ug_core")
    assert set(edges["ug_core.tensor"]) <= {m for m in known if layer(m) == 0} | {"ug_core.shapes"}


# --- the walk itself, on a package made here ---------------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_walk_finds_a_cycle_through_a_function_level_import(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "from . import a\n",
        "a.py": "from .sub.b import f\n",
        "sub/__init__.py": "",
        "sub/b.py": "def f():\n    from .. import a   # deferred\n    return a\n",
        "c.py": "import pkg.a\n",
    })
    known, edges = graph(root, "pkg")
    assert set(known) == {"pkg", "pkg.a", "pkg.sub", "pkg.sub.b", "pkg.c"}
    assert edges["pkg.sub.b"] == {"pkg.a": 2} and edges["pkg.c"] == {"pkg.a": 1}
    assert cycles(edges) == [({"pkg.a", "pkg.sub.b"}, ["pkg.a", "pkg.sub.b", "pkg.a"])]
    assert "pkg.sub.b -> pkg.a   (pkg/sub/b.py:2)" in describe(cycles(edges)[0], known, edges)


def test_walk_resolves_every_import_form(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "x.py": "",
        "y.py": "Y = 1\n",
        "sub/__init__.py": "from .. import x\nfrom ..y import Y\n",
        "sub/z.py": "import pkg.y as y\nfrom . import w\nfrom pkg.sub import V\nclass K:\n    from .w import W\n",
        "sub/w.py": "W = 2\n",
    })
    _, edges = graph(root, "pkg")
    assert edges["pkg.sub"] == {"pkg.x": 1, "pkg.y": 2}
    assert edges["pkg.sub.z"] == {"pkg.y": 1, "pkg.sub.w": 2, "pkg.sub": 3}
    assert cycles(edges) == []


# --- the Tensor's bound methods ----------------------------------------------------------------


def _declared_methods() -> dict[str, ast.AST]:
    """The methods tensor.py declares in Tensor's `if TYPE_CHECKING:` block (bound elsewhere)."""
    tree = ast.parse((ROOT / "tensor.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    block = next(n for n in cls.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    declared: dict[str, ast.AST] = {}
    for node in block.body:
        if isinstance(node, ast.FunctionDef):
            declared[node.name] = node
        elif isinstance(node, ast.Assign):   # aliases: `prod = mean = sum`
            source = declared[ast.unparse(node.value)]
            declared.update({ast.unparse(t): source for t in node.targets})
    return declared


def test_every_declared_tensor_method_is_bound_with_its_signature():
    declared = _declared_methods()
    assert len(declared) > 100
    for name, node in declared.items():
        assert name in vars(Tensor), f"Tensor.{name} is declared in tensor.py but bound nowhere"
        bound = vars(Tensor)[name]
        assert isinstance(node, ast.FunctionDef)
        is_property = any(ast.unparse(d) == "property" for d in node.decorator_list)
        assert isinstance(bound, property) == is_property, name
        fn = bound.fget if is_property else bound
        names = [p.name for p in inspect.signature(fn).parameters.values()]
        args = node.args
        expected = [a.arg for a in args.posonlyargs + args.args] + ([args.vararg.arg] if args.vararg else []) + \
            [a.arg for a in args.kwonlyargs] + ([args.kwarg.arg] if args.kwarg else [])
        assert names[1:] == expected[1:], f"Tensor.{name}: bound {names}, declared {expected}"
