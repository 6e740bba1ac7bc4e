"""Each built-in layer's section of docs/middleware-library.md (its page on the site) states its real signature,
what it does, where it goes in the order and when it fails; every layer of `middleware.__all__` has a page."""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import inspect
import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest

import middleware

ROOT = Path(__file__).parents[2]
_spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs_hooks.py")
assert _spec and _spec.loader
docs_hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(docs_hooks)
PARTS = ("**Where it goes.**", "**When it fails.**")

LIBRARY = Path(__file__).parents[2] / "docs" / "middleware-library.md"
KINDS = {
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
    inspect.Parameter.KEYWORD_ONLY: "keyword",
    inspect.Parameter.VAR_POSITIONAL: "*args",
    inspect.Parameter.VAR_KEYWORD: "**kwargs",
}
ANY = object()


def sections() -> dict[str, str]:
    """The text under each `## ` heading of the library page, by each layer name the heading names."""
    found: dict[str, str] = {}
    for part in re.split(r"^## ", LIBRARY.read_text(), flags=re.M)[1:]:
        heading, _, body = part.partition("\n")
        for name in re.findall(r"[a-z_]+", heading):
            found[name] = body
    return found


def _named(value: Any) -> Any:
    """A default as the test compares it: a function or class by its name, anything else as it is."""
    return value.__name__ if callable(value) and hasattr(value, "__name__") else value


def _default(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and node.value is Ellipsis:
        return ANY
    try:
        return _named(eval(ast.unparse(node), {"logging": logging, "asyncio": asyncio, "time": time}))
    except NameError:
        return ast.unparse(node)  # a library function named bare on the page: `key=model_key`


def documented(name: str, text: str) -> list[tuple[str, str, Any]] | None:
    """The parameters of the first `` `name(...)` `` the text shows: (name, kind, default or ANY)."""
    match = re.search(rf"`{name}\((?P<params>[^`]*)\)`", text)
    if match is None:
        return None
    function = ast.parse(f"def {name}({match['params']}): pass").body[0]
    assert isinstance(function, ast.FunctionDef)
    args = function.args
    params: list[tuple[str, str, Any]] = []
    plain = [*args.posonlyargs, *args.args]
    defaults = [inspect.Parameter.empty] * (len(plain) - len(args.defaults)) + list(args.defaults)
    params += [
        (a.arg, "positional", d if d is inspect.Parameter.empty else _default(d))
        for a, d in zip(plain, defaults, strict=True)
    ]
    if args.vararg:
        params.append((args.vararg.arg, "*args", inspect.Parameter.empty))
    params += [
        (a.arg, "keyword", inspect.Parameter.empty if d is None else _default(d))
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    if args.kwarg:
        params.append((args.kwarg.arg, "**kwargs", inspect.Parameter.empty))
    return params


def actual(layer: Any) -> list[tuple[str, str, Any]]:
    """The parameters of the layer's constructor: (name, kind, default), functions by their name."""
    return [
        (p.name, KINDS[p.kind], p.default if p.default is inspect.Parameter.empty else _named(p.default))
        for p in inspect.signature(layer).parameters.values()
    ]


LAYERS = [name for name in middleware.__all__ if name.islower()]
"""The layers of `middleware.__all__` (lower-case names); the rules `authorize` takes (`Allow`, `Deny`, `Ask`) are
shown in its section."""


@pytest.mark.parametrize("name", LAYERS)
def test_each_layers_page_shows_its_signature_with_every_option_and_default(name: str) -> None:
    """The layer's section shows `name(...)` with each parameter, its kind and its default as the code has them."""
    text = sections().get(name)
    assert text is not None, f"docs/middleware-library.md has no section for {name}"
    shown = documented(name, text)
    assert shown is not None, f"the {name} section shows no `{name}(...)` signature"
    code = actual(getattr(middleware, name))
    assert [p[:2] for p in shown] == [p[:2] for p in code], f"{name}: page {shown} != code {code}"
    # `...` on the page stands for a long default; a parameter the page shows as required may default to None in
    # the code (the layer then says it needs the value when it is made)
    wrong = [
        (s, c)
        for s, c in zip(shown, code, strict=True)
        if s[2] is not ANY and s[2] != c[2] and not (s[2] is inspect.Parameter.empty and c[2] is None)
    ]
    assert not wrong, f"{name}: defaults differ (page, code): {wrong}"


def test_the_signature_reader_sees_a_missing_option_and_a_wrong_default() -> None:
    """A page that leaves out a parameter or shows another default does not match the code."""
    shown = documented("concurrency", "`concurrency(limit=4, *, per_tool=None)`")
    assert shown == [("limit", "positional", 4), ("per_tool", "keyword", None)]
    assert shown != actual(middleware.concurrency)


def missing_parts(name: str, text: str) -> list[str]:
    """What a layer section lacks of: what it does, its options with defaults, where it goes, when it fails."""
    missing = []
    first = text.strip().split("\n\n")[0]
    said = re.sub(r"`[^`]*`", "", first)
    if documented(name, first) is None or len(re.findall(r"[a-z]{3,}", said)) < 3:
        missing.append("what it does (a first paragraph with the signature and a sentence)")
    if documented(name, text) is None:
        missing.append("its options with defaults (`name(...)`)")
    missing += [part for part in PARTS if part not in text]
    return missing


@pytest.mark.parametrize("page", list(docs_hooks.layer_sections()))
def test_each_layer_section_says_what_it_does_its_options_where_it_goes_and_when_it_fails(page: str) -> None:
    """A layer's section (its page) has all four parts; the signature's match with the code is tested above."""
    text = docs_hooks.layer_sections()[page]
    missing = [(name, part) for name in docs_hooks.layer_names(page) for part in missing_parts(name, text)]
    assert not missing, f"the {page} section of docs/middleware-library.md lacks {missing}"


def test_a_section_missing_a_part_is_seen() -> None:
    """The part reader fails a section without where it goes, when it fails, or a sentence saying what it does."""
    whole = "`limit(n=1)` bounds what one run may do.\n\n**Where it goes.** Outside.\n\n**When it fails.** Raises.\n"
    assert missing_parts("limit", whole) == []
    assert missing_parts("limit", whole.replace("**Where it goes.**", "")) == ["**Where it goes.**"]
    assert missing_parts("limit", whole.replace("**When it fails.**", "")) == ["**When it fails.**"]
    assert len(missing_parts("limit", whole.replace(" bounds what one run may do.", ""))) == 1
    assert len(missing_parts("limit", "Bounds what one run may do, in a sentence.\n")) == 4


def _layers() -> list[str]:
    """The built-ins of `middleware.__all__` that are layers (classes made with their options)."""
    return [name for name in LAYERS if inspect.isclass(getattr(middleware, name))]


def test_every_built_in_layer_has_a_page_in_the_site() -> None:
    """Each layer of `middleware.__all__` is covered by a generated `layers/NAME.md` page that shows its section."""
    covered = {name: page for page in docs_hooks.layer_sections() for name in docs_hooks.layer_names(page)}
    assert len(_layers()) >= 20
    missing = [name for name in _layers() if name not in covered]
    assert not missing, f"layers with no page (a `## name` section of docs/middleware-library.md): {missing}"
    for name in _layers():
        page = docs_hooks.layer_page(covered[name])
        assert f"`{name}(" in page and all(part in page for part in PARTS), name


def test_the_library_page_keeps_its_overview_and_order_and_links_each_layer_page() -> None:
    """On the site the library page keeps the overview and recommended order, and links every layer's page."""
    page = docs_hooks.library_page()
    assert page.startswith("# The middleware library") and "## Recommended order" in page
    assert "## Sub-agents" in page
    for layer in docs_hooks.layer_sections():
        assert f"(layers/{layer}.md)" in page, layer
    assert "**When it fails.**" not in page  # the detail is on the layer pages
