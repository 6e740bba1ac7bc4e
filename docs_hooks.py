"""MkDocs hooks for onion's site: pages still being written, and links to the examples.

- A page in the nav that is not written yet (`temporal.md`, `serve.md`) is
  generated as a short "coming" page, so the nav is complete and `--strict`
  still fails on any other missing page.
- The API reference is a page per public module (`public_modules()`), each
  rendered by mkdocstrings from the docstrings, added to the nav last.
- `../examples/NAME.py` links become pages that show the example's code
  (`examples/NAME.md`), so the site links into itself and fetches nothing.
- A Python block's `# fragment` marker (its first line: the docs tests only
  compile such a block, tests/docs/test_blocks.py) is not shown; what it says
  the reader supplies stays, as a comment (`# fragment: agent is yours`
  shows as `# agent is yours`).
- Each built-in layer's `## name` section of `middleware-library.md` becomes
  its own page, `layers/NAME.md`, in a "Layers" nav group; on the site the
  library page keeps its overview and recommended order, and each layer's
  section there shrinks to what the layer does and a link to its page.
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
LIBRARY = "middleware-library.md"
LAYER_HEADING = re.compile(r"[a-z_]+(?: / [a-z_]+)*")
RELATIVE_LINK = re.compile(r"\]\((?P<target>[A-Za-z0-9_./-]*\.md(?:#[^)]*)?|#[^)]*)\)")
FRAGMENT_MARKER = re.compile(
    r"^(?P<fence>[ ]*```python[^\n]*\n)(?P<indent>[ ]*)# fragment(?::[ ]*(?P<note>[^\n]*))?\n", re.M
)


def without_fragment_markers(markdown: str) -> str:
    """`markdown` with each Python block's `# fragment` line dropped, or cut to the note after its colon."""

    def shown(match: re.Match[str]) -> str:
        note = match["note"]
        return match["fence"] + (f"{match['indent']}# {note}\n" if note else "")

    return FRAGMENT_MARKER.sub(shown, markdown)


def library_parts() -> list[tuple[str, str]]:
    """The library page cut at its `## ` headings: (heading, body), the text before the first with heading ""."""
    parts = re.split(r"^## ", (ROOT / "docs" / LIBRARY).read_text(), flags=re.M)
    return [("", parts[0])] + [(part.partition("\n")[0], part.partition("\n")[2]) for part in parts[1:]]


def layer_sections() -> dict[str, str]:
    """Each layer section of the library page by its page name (`allow_tools / deny_tools`: `allow_tools`)."""
    return {heading.split(" / ")[0]: body for heading, body in library_parts() if LAYER_HEADING.fullmatch(heading)}


def layer_names(heading_or_page: str) -> list[str]:
    """The layers a section covers, by its page name: `allow_tools` covers `allow_tools` and `deny_tools`."""
    for heading, _ in library_parts():
        if LAYER_HEADING.fullmatch(heading) and heading.split(" / ")[0] == heading_or_page:
            return heading.split(" / ")
    return []


def _first_paragraph(body: str) -> str:
    return body.strip().split("\n\n")[0]


def _page_link(match: re.Match[str]) -> str:
    """A link of the library page as a layer page (one folder down) writes it."""
    target = match["target"]
    return f"](../{LIBRARY}{target})" if target.startswith("#") else f"](../{target})"


def layer_page(name: str) -> str:
    """The Markdown of one layer's page: its section of the library page, links made relative to `layers/`."""
    heading = " / ".join(f"`{n}`" for n in layer_names(name))
    body = RELATIVE_LINK.sub(_page_link, layer_sections()[name])
    body = re.sub(r"^###", "##", body, flags=re.M)
    library = f"../{LIBRARY}"
    back = f"Part of [the middleware library]({library}); see its [recommended order]({library}#recommended-order)."
    return f"# {heading}\n\n{back}\n\n{body.strip()}\n"


def library_page() -> str:
    """The library page as the site shows it: each layer's section cut to its first paragraph and a link."""
    out = []
    for heading, body in library_parts():
        if not heading:
            out.append(body)
        elif LAYER_HEADING.fullmatch(heading):
            page = heading.split(" / ")[0]
            link = f"[The `{page}` page](layers/{page}.md): options, where it goes, when it fails."
            out.append(f"## {heading}\n\n{_first_paragraph(body)}\n\n{link}\n\n")
        else:
            out.append(f"## {heading}\n{body}")
    return "".join(out)


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
    """Add a page per layer under the library, and the API reference, to the nav."""
    layers = {"Layers": [{name: f"layers/{name}.md"} for name in layer_sections()]}
    for item in config.nav:
        if isinstance(item, dict) and "The library" in item:
            item["The library"].append(layers)
    config.nav.append({"API reference": [{module: f"api/{module}.md"} for module in public_modules()]})
    return config


def on_files(files: Files, config: Any) -> Files:
    """Add the pages not written yet, one page per layer and one page per example."""
    for name, (title, what) in COMING.items():
        if files.get_file_from_path(name) is None:
            text = f"# {title}\n\n{what}: this page is coming.\n"
            files.append(File.generated(config, name, content=text))
    for module in public_modules():
        files.append(File.generated(config, f"api/{module}.md", content=api_page(module)))
    for name in layer_sections():
        files.append(File.generated(config, f"layers/{name}.md", content=layer_page(name)))
    for example in sorted((ROOT / "examples").glob("*.py")):
        code = example.read_text()
        text = f"# examples/{example.name}\n\n`python examples/{example.name}`\n\n```python\n{code}```\n"
        files.append(File.generated(config, f"examples/{example.stem}.md", content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Cut the library page to its overview and links; point `../examples/NAME.py` links at the example's page;
    take the `# fragment` markers out of the Python blocks."""
    if page.file.src_uri == LIBRARY:
        markdown = library_page()
    markdown = without_fragment_markers(markdown)
    depth = page.file.src_uri.count("/")
    prefix = "../" * depth
    return EXAMPLE_LINK.sub(lambda m: f"]({prefix}examples/{m['name']}.md)", markdown)
