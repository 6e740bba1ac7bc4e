"""The documentation site builds with `mkdocs build --strict`, offline, with an API page for every public name."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).parents[2]
_spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs_hooks.py")
assert _spec and _spec.loader
docs_hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(docs_hooks)
API_MODULES: list[str] = docs_hooks.public_modules()
FETCHING_TAG = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=\"(?:https?:)?//", re.I)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built from this checkout into a temporary folder with `--strict`."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(out)},
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr}"
    return out


def _entry_ids(module: ModuleType, name: str) -> set[str]:
    """The anchors an API page may give `module.name`: its public path, or its defining module's."""
    value = getattr(module, name)
    ids = {f"{module.__name__}.{name}"}
    if isinstance(value, ModuleType):
        ids.add(value.__name__)
    elif getattr(value, "__module__", None):
        ids.add(f"{value.__module__}.{name}")
    return ids


def test_every_public_name_has_an_entry_on_its_modules_api_page(site: Path) -> None:
    """Each name in the `__all__` of `onion`, `onion.*` and `middleware` is rendered on an API reference page."""
    pages = {name: (site / "api" / f"{name}.html").read_text() for name in API_MODULES}
    every_id = set(re.findall(r'id="([^"]+)"', "\n".join(pages.values())))
    missing = [
        f"{module_name}.{name}"
        for module_name in API_MODULES
        for name in importlib.import_module(module_name).__all__
        if not _entry_ids(importlib.import_module(module_name), name) & every_id
    ]
    assert not missing, f"public names with no API entry: {missing}"


def test_every_public_module_gets_an_api_page_in_the_nav(site: Path) -> None:
    """`onion`, each public module of onion declaring `__all__`, and `middleware` have a built API page."""
    assert {"onion", "onion.errors", "onion.hooks", "onion.stores", "onion.testing", "middleware"} <= set(API_MODULES)
    assert all(not part.startswith("_") for name in API_MODULES for part in name.split("."))
    index = (site / "index.html").read_text()
    for name in API_MODULES:
        assert (site / "api" / f"{name}.html").exists() and f'href="api/{name}.html"' in index, name


def test_the_built_site_fetches_nothing_from_another_host(site: Path) -> None:
    """No page loads a script, stylesheet, font or image from outside the site (Google Fonts are off)."""
    fetching = [
        f"{page.relative_to(site)}: {match}"
        for page in site.rglob("*.html")
        for match in FETCHING_TAG.findall(page.read_text())
    ]
    assert not fetching, fetching
    assert "fonts.googleapis" not in (site / "index.html").read_text()


def test_the_search_index_holds_every_page_and_the_api_names(site: Path) -> None:
    """The search index, built locally, has the guide pages and the API reference entries."""
    index = json.loads((site / "search" / "search_index.json").read_text())
    locations = {doc["location"].split("#")[0] for doc in index["docs"]}
    assert {"index.html", "middleware.html", "testing.html", "api/onion.html"} <= locations
    assert any(doc["location"] == "api/onion.html#onion.Agent" for doc in index["docs"])


def searched(index: dict[str, Any], query: str) -> set[str]:
    """The pages a search for `query` finds: the query and each section split into words as the site's search
    splits them (its `separator`, tags taken out), a page found where one section has every word of the query."""
    separator = re.compile(index["config"]["separator"])

    def words(text: str) -> set[str]:
        return {word.lower() for word in separator.split(re.sub(r"<[^>]+>", " ", text)) if word}

    wanted = words(query)
    return {doc["location"].split("#")[0] for doc in index["docs"] if wanted <= words(f"{doc['title']} {doc['text']}")}


def test_a_name_written_as_code_in_prose_is_found_by_search(site: Path) -> None:
    """Searching `resume_stream` finds the pages that name it in prose (`agent.resume_stream(state)`, as code),
    not only its API entry: words split at `.`, `(`, `/` too (and `PartialOutput` at its capitals)."""
    index = json.loads((site / "search" / "search_index.json").read_text())
    assert {"durable.html", "middleware.html", "serve.html", "api/onion.html"} <= searched(index, "resume_stream")
    assert "output.html" in searched(index, "PartialOutput")


def test_the_site_shows_no_fragment_marker_but_keeps_what_the_reader_supplies() -> None:
    """A block's `# fragment: agent is yours` shows as `# agent is yours`; a bare `# fragment` line goes; the
    Markdown keeps both (the docs suite reads them)."""
    markdown = (
        "Text.\n\n```python\n# fragment: `agent` is yours\nagent.run()\n```\n\n"
        "- item\n\n  ```python\n  # fragment\n  x = 1\n  ```\n\n```python\nprint('# fragment')\n```\n"
    )
    shown = docs_hooks.without_fragment_markers(markdown)
    assert "# fragment" not in shown.replace("print('# fragment')", "")
    assert "```python\n# `agent` is yours\nagent.run()\n```" in shown
    assert "  ```python\n  x = 1\n  ```" in shown


def test_no_built_page_shows_a_fragment_marker(site: Path) -> None:
    """Every page of the site, the layer pages made from the library's sections included."""
    shown = [page.relative_to(site) for page in site.rglob("*.html") if "# fragment" in page.read_text()]
    assert shown == []


def test_a_page_not_written_yet_is_in_the_nav_as_coming(site: Path) -> None:
    """Temporal and Serving are in the nav: their page, or a generated one saying it is coming."""
    for name in ("temporal", "serve"):
        page = (site / f"{name}.html").read_text()
        assert (ROOT / "docs" / f"{name}.md").exists() or "this page is coming" in page


def test_each_layer_has_a_page_in_the_layers_nav_group_linked_from_the_library(site: Path) -> None:
    """`layers/NAME.html` is built for every layer section, listed under "Layers" and linked from the library page."""
    library = (site / "middleware-library.html").read_text()
    index = (site / "index.html").read_text()
    assert "Layers" in index
    for name in docs_hooks.layer_sections():
        page = (site / "layers" / f"{name}.html").read_text()
        assert "Where it goes." in page and "When it fails." in page, name
        assert f'href="layers/{name}.html"' in library and f'href="layers/{name}.html"' in index, name
