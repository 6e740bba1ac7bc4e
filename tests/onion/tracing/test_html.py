"""`trace.to_html(path)`: one self-contained page, opened in headless Chromium and clicked through DevTools."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from middleware import cache, log, retry
from onion import Agent, ToolCall, ToolRequest, tool, tracing
from onion.errors import RateLimitedError
from onion.hooks import Block, before_each_tool
from onion.testing import ScriptedModel

ROWS = """[...document.querySelectorAll('.row')].map(row => ({
  id: row.id, of: row.dataset.of || null, kind: row.dataset.kind,
  text: row.querySelector('.label').textContent, shown: row.offsetParent !== null,
}))"""


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def wipe(path: str) -> str:
    """Delete everything under a path."""
    raise AssertionError("blocked before it runs")


@before_each_tool("wipe")
def no_wipes(call: ToolCall) -> Block:
    return Block("not today")


async def no_sleep(seconds: float) -> None:
    """No real backoff in tests."""


def traced_page(directory: Path) -> Path:
    """The page of one run: a retried model call, a batch of two tools (one blocked), a final answer."""
    script: list[Any] = [
        RateLimitedError("429", retry_after=0.1),
        [ToolRequest("c1", "add", {"a": 1, "b": 2}), ToolRequest("c2", "wipe", {"path": "/"})],
        "3",
    ]
    agent = Agent(ScriptedModel(script), tools=[add, wipe], middleware=[log, retry(sleep=no_sleep), cache, no_wipes])
    with tracing.capture() as trace:
        asyncio.run(agent.run("1+2, then wipe /"))
    return trace.to_html(directory / "trace.html")


def test_the_page_needs_no_network(tmp_path: Path) -> None:
    """No external URL anywhere in the page: no script, style, font or image is fetched."""
    text = traced_page(tmp_path).read_text()
    assert not re.search(r"(?:src|href)\s*=|https?://|@import|url\(", text)


def test_the_page_shows_every_call_and_a_click_on_a_call_shows_its_layers(page: Any, tmp_path: Path) -> None:
    """In Chromium: no console error; a row per call and per layer pass; layers hidden until their call is clicked."""
    page.open(traced_page(tmp_path).as_uri())
    rows = page.evaluate(ROWS)
    calls = [(row["kind"], row["text"].split(" · ")[0].lstrip("▸ ")) for row in rows if row["kind"] != "layer"]
    assert calls == [
        ("run", "run agent"),
        ("model", "model call 1"),
        ("request", "request 1"),
        ("request", "request 2"),
        ("tools", "tools [add, wipe]"),
        ("tool", "tool add(a=1, b=2)"),
        ("tool", "tool wipe(path='/')"),
        ("model", "model call 2"),
        ("request", "request 1"),
    ]
    layers = {}
    for row in rows:
        if row["kind"] == "layer":
            caller = next(r for r in rows if r["id"] == row["of"])
            layers.setdefault(caller["text"].split(" · ")[0].lstrip("▸ "), []).append(row["text"].split(" · ")[0])
    assert layers == {
        "run agent": ["log"],
        "model call 1": ["log", "retry", "cache", "cache"],
        "tools [add, wipe]": ["log"],
        "tool add(a=1, b=2)": ["log", "before_each_tool(no_wipes)"],
        "tool wipe(path='/')": ["log", "before_each_tool(no_wipes)"],
        "model call 2": ["log", "retry", "cache"],
    }
    assert all(row["shown"] for row in rows if row["kind"] != "layer")
    assert not any(row["shown"] for row in rows if row["kind"] == "layer")

    page.click('.call[data-kind="model"] .label')
    rows = page.evaluate(ROWS)
    first_model = next(row["id"] for row in rows if row["kind"] == "model")
    shown = [row["text"] for row in rows if row["kind"] == "layer" and row["shown"]]
    assert [text.split(" · ")[0] for text in shown] == ["log", "retry", "cache", "cache"]
    assert all(row["of"] == first_model for row in rows if row["kind"] == "layer" and row["shown"])
    assert "retried 1x after RateLimitedError, waited 0.1 s" in shown[1]
    assert page.evaluate(f"document.getElementById('{first_model}').getAttribute('aria-expanded')") == "true"

    page.click('.call[data-kind="model"] .label')
    assert not any(row["shown"] for row in page.evaluate(ROWS) if row["kind"] == "layer")
    page.click("#expand-all")
    assert all(row["shown"] for row in page.evaluate(ROWS))
    assert page.errors() == []
