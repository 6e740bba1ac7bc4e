"""`python -m bench.shape`: the shape of onion's code, as issue notes report it (not a timing).

- modules at `onion/`'s top level, and modules over 400 lines;
- import circles: strongly connected sets of modules over every import, function-local and TYPE_CHECKING ones
  included;
- the rooms a stored resume enters: the onion modules whose functions run while `agent.resume(state)` goes on
  with a paused run loaded from SQLite (a `sys.setprofile` trace; `onion.testing` not counted).
"""

from __future__ import annotations

import ast
import asyncio
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def modules() -> dict[str, Path]:
    found = {}
    for path in (ROOT / "onion").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in names:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
    return targets


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while (popped := stack.pop()) != node:
                component.append(popped)
            found.append(sorted([*component, node]))

    sys.setrecursionlimit(10_000)
    for node in graph:
        if node not in index:
            visit(node)
    return [component for component in found if len(component) > 1]


async def rooms() -> list[str]:
    from middleware import approve
    from onion import Agent, tool
    from onion.stores import SQLiteStore
    from onion.testing import ScriptedModel, call

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    store = SQLiteStore(str(Path(tempfile.mkdtemp()) / "onion.db"))
    model = ScriptedModel([[call("delete_file", path="a.txt")], "Deleted a.txt."])
    agent = Agent(model, tools=[delete_file], store=store).use(approve("delete_file"))
    state = await store.load((await agent.run("tidy up")).run_id)
    state.approve(state.pending[0].id)
    entered: list[str] = []

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        name = frame.f_globals.get("__name__", "")
        counted = name.startswith("onion") and not name.startswith("onion.testing")
        if event == "call" and counted and name not in entered:
            entered.append(name)

    sys.setprofile(profile)
    try:
        await agent.resume(state)
    finally:
        sys.setprofile(None)
    await store.aclose()
    return entered


def main() -> None:
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    top = [name for name, path in known.items() if path.parent == ROOT / "onion"]  # __init__.py counted
    long = {name: n for name, path in known.items() if (n := len(path.read_text().splitlines())) > 400}
    print(f"modules at onion/'s top level: {len(top)}")
    print(f"modules over 400 lines: {len(long)} {long or ''}")
    found = circles(graph)
    print(f"import circles: {len(found)}")
    for component in found:
        print("  " + " <-> ".join(component))
    entered = asyncio.run(rooms())
    stores = [name for name in entered if name.startswith("onion.stores")]
    print(f"rooms a stored resume enters: {len(entered)} ({len(entered) - len(stores)} without the stores')")
    print("  " + ", ".join(entered))


if __name__ == "__main__":
    main()
