"""MkDocs hooks for onion's site: pages still being written, and links to the examples.

- A page in the nav that is not written yet (`temporal.md`, `serve.md`) is
  generated as a short "coming" page, so the nav is complete and `--strict`
  still fails on any other missing page.
- The API reference is a page per public module (`public_modules()`), each
  rendered by mkdocstrings from the docstrings, added to the nav last.
- `../examples/NAME.py` links become pages that show the example's code
  (`examples/NAME.md`), so the site links into itself and fetches nothing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).parent
COMING = {
    "temporal.md": ("Temporal", "Running onion agents as Temporal workflows"),
    "serve.md": ("Serving", "Serving an agent over HTTP"),
}
EXAMPLE_LINK = re.compile(r"\]\(\.\./examples/(?P<name>[A-Za-z0-9_]+)\.py\)")


def public_modules() -> list[str]:
    """`onion`, its modules and packages without a leading underscore that declare `__all__`, and `middleware`."""
    found = []
    for path in sorted((ROOT / "onion").iterdir()):
        init = path / "__init__.py" if path.is_dir() else path
        if path.name.startswith("_") or init.suffix != ".py" or not init.exists():
            continue
        if "__all__" in init.read_text():
            found.append(f"onion.{path.stem}")
    return ["onion", *found, "middleware"]


def api_page(module: str) -> str:
    """The Markdown of one module's API page (the layers of `middleware` each under their own name)."""
    if module != "middleware":
        return f"# `{module}`\n\n::: {module}\n"
    tree = ast.parse((ROOT / "middleware" / "__init__.py").read_text())
    defined_in = {
        alias.asname or alias.name: f"middleware.{node.module}"
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        for alias in node.names
    }
    options = "\n    options:\n      show_root_full_path: false\n"
    entries = [f"::: {defined_in[name]}.{name}{options}" for name in sorted(defined_in)]
    return "# `middleware`\n\n::: middleware\n    options:\n      members: false\n\n" + "\n".join(entries)


def on_config(config: Any) -> Any:
    """Add the API reference to the nav."""
    config.nav.append({"API reference": [{module: f"api/{module}.md"} for module in public_modules()]})
    return config


def on_files(files: Files, config: Any) -> Files:
    """Add the pages not written yet and one page per example."""
    for name, (title, what) in COMING.items():
        if files.get_file_from_path(name) is None:
            text = f"# {title}\n\n{what}: this page is coming.\n"
            files.append(File.generated(config, name, content=text))
    for module in public_modules():
        files.append(File.generated(config, f"api/{module}.md", content=api_page(module)))
    for example in sorted((ROOT / "examples").glob("*.py")):
        code = example.read_text()
        text = f"# examples/{example.name}\n\n`python examples/{example.name}`\n\n```python\n{code}```\n"
        files.append(File.generated(config, f"examples/{example.stem}.md", content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Point `../examples/NAME.py` links at the example's page."""
    depth = page.file.src_uri.count("/")
    prefix = "../" * depth
    return EXAMPLE_LINK.sub(lambda m: f"]({prefix}examples/{m['name']}.md)", markdown)
