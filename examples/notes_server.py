"""A small MCP server, written with the MCP SDK's own server API: two tools over a few notes.

`examples/mcp_tools.py` runs it as `python notes_server.py` and speaks to
it over stdin and stdout. It needs only the SDK (`pip install mcp`).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

NOTES = {"onions": "Layers all the way down.", "shopping": "Onions, bread, tea."}

server = MCPServer("notes", log_level="WARNING")


@server.tool()
def search(query: str) -> list[str]:
    """Titles of the notes that mention `query`."""
    return [title for title, text in NOTES.items() if query.lower() in (title + text).lower()]


@server.tool()
def delete(title: str) -> str:
    """Delete a note."""
    NOTES.pop(title, None)
    return f"deleted {title}"


if __name__ == "__main__":
    server.run()  # over stdio
