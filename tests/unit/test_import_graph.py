"""The import graph of src/profilectl, read from the source with ast (every import statement, at
module level or inside a function, but not those under `if TYPE_CHECKING:`, which never run, nor a
package's lazy `__getattr__`):
no circle anywhere, each layer (model < formats < analysis < read < report) imports only those below
it, and loading (run dir, job dir, bare files, cache) never reaches up into rendering."""

from __future__ import annotations

import ast
from pathlib import Path

from support import REPO

SOURCE = REPO / "src"
# Rendering: what turns a Summary into text. Loading must not import any of it.
RENDERING = ("profilectl.report.render", "profilectl.report.renderers", "profilectl.report.html",
             "profilectl.report.export", "profilectl.report.sections", "profilectl.read.listing")
LOADING = ("profilectl.read.load", "profilectl.read.cache", "profilectl.read.summary",
           "profilectl.model.document", "profilectl.jobs", "profilectl.runstate")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imported(tree: ast.AST, known: set[str], package: str) -> set[str]:
    """The profilectl modules a module imports (a name imported from a package that is a module
    of its own counts as that module)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            return  # PEP 562 lazy attributes (profilectl.open): they load when asked for, not on import
        if _type_checking(node):
            for child in getattr(node, "orelse", []):
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("profilectl"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base.startswith("profilectl"):
                for alias in node.names:
                    candidate = f"{base}.{alias.name}"
                    found.add(candidate if candidate in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)
    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in SOURCE.joinpath("profilectl").rglob("*.py")}
    known = set(files)
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        graph[name] = {m for m in imported(ast.parse(path.read_text()), known, package) if m in known and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for child in graph.get(todo.pop(), ()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def test_the_cycle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_imports_inside_functions():
    graph = import_graph()
    assert "profilectl.read.load" in graph["profilectl.commands"]  # imported inside commands.report()
    assert "profilectl.report.renderers.terminal" in graph["profilectl.report.render"]


def test_no_import_circle_anywhere():
    assert cycles(import_graph()) == []


# docs/architecture.md: each layer imports only the layers below it.
LAYERS = ("profilectl.model", "profilectl.formats", "profilectl.analysis", "profilectl.read", "profilectl.report")


def _layer(module: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if module == layer or module.startswith(layer + ".")), None)


def test_layers_import_only_downward():
    graph = import_graph()
    upward = sorted((module, imported) for module, deps in graph.items() for imported in deps
                    if _layer(module) is not None and _layer(imported) is not None
                    and _layer(imported) > _layer(module))  # type: ignore[operator]
    assert upward == []


def test_the_model_imports_nothing_of_profilectl_but_itself():
    graph = import_graph()
    outside = sorted({d for m, deps in graph.items() if m.startswith("profilectl.model") for d in deps
                      if not d.startswith("profilectl.model")})
    assert outside == []


def test_loading_never_imports_rendering():
    graph = import_graph()
    for loader in LOADING:
        above = {m for m in reachable(graph, loader) if m.startswith(RENDERING)}
        assert not above, (loader, sorted(above))


def test_the_wheel_ships_every_package_of_the_source_tree():
    """pyproject.toml lists its packages by name: a package added to src/ and not there is missing from
    the installed tool (the wheel of the layers commit had no read/ or model/: `report` failed)."""
    import tomllib
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    src = REPO / "src"
    packages = {".".join(init.parent.relative_to(src).parts) for init in src.rglob("__init__.py")}
    assert packages - listed == set()
