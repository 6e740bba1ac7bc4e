"""Each built-in layer's section of docs/middleware-library.md (its page on the site) states its real signature."""

from __future__ import annotations

import ast
import asyncio
import inspect
import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest

import middleware

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


@pytest.mark.parametrize("name", middleware.__all__)
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
