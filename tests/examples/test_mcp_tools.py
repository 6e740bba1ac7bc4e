"""examples/mcp_tools.py: an MCP server over stdio beside a local tool, through the same layers."""

from __future__ import annotations

import runpy
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "examples" / "mcp_tools.py"


async def test_the_mcp_example_runs_its_server_and_blocks_the_delete() -> None:
    lines = await runpy.run_path(str(EXAMPLE), run_name="example_mcp_tools")["main"]()
    assert lines == [
        "MCP call  notes_search {'query': 'onion'}",
        "offered   ['word_count', 'notes_search']",
        "result    'onions\\nshopping'",
        "result    '5'",
        "result    'Tool call notes_delete was blocked: notes_delete is denied by policy' (error)",
        "answer    Two notes mention onions; the first has 5 words. I may not delete notes.",
    ]
