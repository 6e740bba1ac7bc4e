"""examples/tracing.py runs offline: a captured tree and page, then OpenTelemetry spans."""

from __future__ import annotations

import runpy
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "examples" / "tracing.py"


async def test_tracing_example_prints_the_tree_writes_the_page_and_exports_the_span_tree(tmp_path: Path) -> None:
    """The tree shows the retry and the tool call; the spans nest run > chat > request (x2), batch > tool."""
    main = runpy.run_path(str(EXAMPLE), run_name="example_tracing")["main"]
    tree, names = await main(tmp_path / "trace.html")
    assert "retried 1x after RateLimitedError, waited 0.01 s" in tree and "tool add(a=2, b=3)" in tree
    assert (tmp_path / "trace.html").read_text().startswith("<!doctype html>")
    assert names == [
        "invoke_agent adder",
        "  chat scripted",
        "    request scripted",
        "    request scripted",
        "  tool_batch",
        "    execute_tool add",
        "  chat scripted",
        "    request scripted",
    ]
