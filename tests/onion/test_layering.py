"""The dependency rule: every module of onion and middleware imports only from modules on lower floors.

Read from the source (no import runs): a module's imports at its top level
and under `if TYPE_CHECKING:` are its edges, and the edges must form no
circle. Imports inside a function run when it is called (how `import onion`
stays light: stores, tracing and providers load when used) and may point up,
except that only the apps (`onion.__main__`, the demo, the CLI) import
`middleware` at all, and middleware imports only public onion names.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("onion", "middleware")
APPS = ("onion.__main__", "onion._demo")
"""Programs built on both packages (and their modules): they may import middleware. `onion.serve` and the
`runs` CLI are not among them: they scrub with `onion.scrub` and decide through the core."""


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, str]]:
    """`(module imported, where)` for each import in `path`: where is "top" (module level or `TYPE_CHECKING`)
    or "deferred" (inside a function)."""
    tree = ast.parse(path.read_text())
    deferred: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            deferred.update(id(inner) for inner in ast.walk(node) if inner is not node)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        where = "deferred" if id(node) in deferred else "top"
        if isinstance(node, ast.Import):
            found.extend((alias.name, where) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            submodules = [f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in known]
            if node.module is not None or len(submodules) < len(node.names):
                found.append((target, where))
            found.extend((module, where) for module in submodules)
    return [(module, where) for module, where in found if module.split(".")[0] in PACKAGES and module != name]


def graph() -> dict[str, list[tuple[str, str]]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in edges:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
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
                    found.append(sorted(component))
    return found


def test_no_module_imports_one_above_it_type_checking_imports_included() -> None:
    """The top-level and TYPE_CHECKING imports of onion and middleware form floors: no circle of any size."""
    edges = {name: {module for module, where in found if where == "top"} for name, found in graph().items()}
    assert circles(edges) == []


def test_only_the_apps_import_middleware() -> None:
    """The core (and its subpackages) never import middleware, not even inside a function."""
    offenders = sorted(
        f"{name} imports {module}"
        for name, found in graph().items()
        if name.startswith("onion") and not any(name == app or name.startswith(f"{app}.") for app in APPS)
        for module, _ in found
        if module.split(".")[0] == "middleware"
    )
    assert offenders == []


def test_middleware_imports_only_public_onion_names() -> None:
    """middleware names onion's public modules only (`onion`, `onion.stores`, `onion.errors`, ...)."""
    offenders = sorted(
        f"{name} imports {module}"
        for name, found in graph().items()
        if name.startswith("middleware")
        for module, _ in found
        if module.startswith("onion") and any(part.startswith("_") for part in module.split("."))
    )
    assert offenders == []


def test_onion_evals_imports_only_public_names_of_onion_testing() -> None:
    """onion.evals is built on onion.testing as a user would build on it: its public names, no private module."""
    offenders = sorted(
        f"{name} imports {module}"
        for name, found in graph().items()
        if name.startswith("onion.evals")
        for module, _ in found
        if module.startswith("onion.testing.")
    )
    assert offenders == []


def test_the_stores_never_read_the_journal() -> None:
    """A store keeps records: no module of onion.stores imports the durable wing (not even inside a function),
    but for the `RunState` type its `load` answers, named for the type checker only."""
    offenders = sorted(
        f"{name} imports {module} ({where})"
        for name, found in graph().items()
        if name.startswith("onion.stores")
        for module, where in found
        if module.startswith("onion._durable") and not (module == "onion._durable.state" and where == "top")
    )
    assert offenders == []


def test_the_layering_checks_see_a_store_reading_the_journal(tmp_path: Path) -> None:
    """The import reader finds a deferred import of the journal in a store module (the check is not vacuous)."""
    path = tmp_path / "_store.py"
    path.write_text("def load():\n    from .._durable.replay import replay\n")
    known = {"onion._durable.replay": path}
    assert imports("onion.stores._store", path, known) == [("onion._durable.replay", "deferred")]


def test_the_rule_catches_a_circle() -> None:
    """A circle held only by a TYPE_CHECKING import is found (the check is not vacuous)."""
    edges = {"onion._a": {"onion._b"}, "onion._b": {"onion._c"}, "onion._c": {"onion._a"}, "onion._d": set()}
    assert circles(edges) == [["onion._a", "onion._b", "onion._c"]]
