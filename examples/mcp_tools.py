"""MCP tools: an MCP server's tools beside a local tool, through the same layers.

`python examples/mcp_tools.py` starts the small MCP server in
`notes_server.py` (written with the MCP SDK's own server API) as a
subprocess over stdio and runs an agent with it. The server's tools are offered as `notes_search` and
`notes_delete` (`prefix="notes_"`); a hook with a regex matcher sees their
calls; `deny_tools` keeps the model from deleting. A scripted model stands
in for a real one. Needs `pip install 'onion[mcp]'`.
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

from middleware import deny_tools
from onion import Agent, ToolCall, tool
from onion.mcp import MCPServer
from onion.testing import ScriptedModel, call

SERVER = Path(__file__).with_name("notes_server.py")


@tool
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


async def main() -> list[str]:
    """Run the agent once; returns what it printed."""
    lines: list[str] = []
    notes = MCPServer.stdio(sys.executable, str(SERVER), prefix="notes_", name="notes")
    model = ScriptedModel(
        [
            [call("notes_search", query="onion"), call("word_count", text="Layers all the way down.")],
            [call("notes_delete", title="shopping")],
            "Two notes mention onions; the first has 5 words. I may not delete notes.",
        ]
    )
    async with Agent(model, tools=[word_count, notes], middleware=[deny_tools("notes_delete")]) as agent:

        @agent.on("before_each_tool", re.compile(r"notes_\w+"))
        def show(call: ToolCall) -> None:
            lines.append(f"MCP call  {call.name} {call.args}")

        result = await agent.run("Which notes mention onions, and how long is the first? Then delete shopping.")
        lines.append(f"offered   {[t.name for t in model.requests[0].tools]}")
        for message in result.messages:
            if message.role == "tool":
                lines.append(f"result    {message.text!r}" + (" (error)" if message.is_error else ""))
        lines.append(f"answer    {result.output}")
    for line in lines:
        print(line)
    return lines


if __name__ == "__main__":
    asyncio.run(main())
