"""A small MCP server for the tests, written with the SDK's own server API.

`python mcp_server.py` serves it over stdio; `build()` makes one to serve
over streamable HTTP in the test process.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path
from typing import Any

import anyio
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
)

PNG_B64 = "iVBORw0KGgo="
"""The PNG signature, base64: the image the `picture` and `attachments` tools return."""
PDF_B64 = "JVBERi0xLjcgZmFrZQ=="
"""`%PDF-1.7 fake`, base64."""


def build() -> MCPServer:
    """A fresh server: a few document tools, and tools that fail in every way a server can."""
    before = (list(logging.root.handlers), logging.root.level)
    server = MCPServer("docs", log_level="WARNING")
    logging.root.handlers[:], logging.root.level = before  # MCPServer configures logging; keep the tests' own
    cancelled: dict[str, anyio.Event] = {}

    @server.tool()
    def search(query: str) -> str:
        """Search the documents."""
        return f"3 pages about {query}"

    @server.tool(name="notes.search")
    def notes_search(query: str) -> str:
        """Search the notes (a dotted name, as MCP allows and the model APIs refuse)."""
        return f"2 notes about {query}"

    @server.tool()
    def read_page(page: int) -> dict[str, Any]:
        """Read one page."""
        return {"page": page, "title": f"Page {page}"}

    @server.tool()
    def delete_page(page: int) -> str:
        """Delete one page."""
        return f"deleted page {page}"

    @server.tool()
    def quota() -> CallToolResult:
        """Answers with an error result (isError)."""
        return CallToolResult(content=[TextContent(type="text", text="quota exceeded: try tomorrow")], is_error=True)

    @server.tool()
    def broken() -> str:
        """Raises inside the tool."""
        raise RuntimeError("the index is corrupt")

    @server.tool()
    def refuse() -> str:
        """Answers the request with a protocol error."""
        raise MCPError(code=-32001, message="not allowed for this client")

    @server.tool()
    def picture() -> CallToolResult:
        """A caption and an image."""
        image = ImageContent(type="image", data=PNG_B64, mime_type="image/png")
        return CallToolResult(content=[TextContent(type="text", text="a red dot"), image])

    @server.tool()
    def attachments() -> CallToolResult:
        """A recording, an SVG drawing, a chart, a PDF, a binary dump and a note, as MCP content blocks."""

        def blob(uri: str, data: str, mime_type: str) -> EmbeddedResource:
            return EmbeddedResource(
                type="resource", resource=BlobResourceContents(uri=uri, blob=data, mime_type=mime_type)
            )

        note = TextResourceContents(uri="file:///note.txt", text="remember the milk")
        return CallToolResult(
            content=[
                AudioContent(type="audio", data="UklGRgAAAAA=", mime_type="audio/wav"),
                ImageContent(type="image", data="PHN2Zy8+", mime_type="image/svg+xml"),
                blob("file:///chart.png", PNG_B64, "image/png"),
                blob("file:///report.pdf", PDF_B64, "application/pdf"),
                blob("file:///dump.bin", "AAAA", "application/octet-stream"),
                EmbeddedResource(type="resource", resource=note),
            ]
        )

    @server.tool()
    async def hang(token: str, marker: str = "") -> str:
        """Never answers; notes its cancellation under `token`."""
        event = cancelled.setdefault(token, anyio.Event())
        if marker:
            Path(marker).touch()
        try:
            await anyio.sleep_forever()
        finally:
            event.set()
        return "never"

    @server.tool()
    async def was_cancelled(token: str) -> bool:
        """Whether the call of `hang` with `token` was cancelled (waits up to 20 s for it)."""
        event = cancelled.setdefault(token, anyio.Event())
        with anyio.move_on_after(20):
            await event.wait()
        return event.is_set()

    @server.tool()
    def crash() -> str:
        """Kills this server's process mid-call."""
        os.kill(os.getpid(), signal.SIGKILL)
        return "unreachable"

    @server.tool()
    def header(name: str, ctx: Context) -> str:
        """The value of an HTTP header of this request ("" over stdio)."""
        return (ctx.headers or {}).get(name, "")

    @server.tool()
    def pid() -> int:
        """This server's process id."""
        return os.getpid()

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Adds the tool `extra` and tells clients the list changed."""

        def extra() -> str:
            """A tool that appeared later."""
            return "extra ran"

        server.add_tool(extra)
        await ctx.notify_tools_changed()
        return "grown"

    @server.tool()
    def big(size: int) -> CallToolResult:
        """A text result of `size` characters."""
        return CallToolResult(content=[TextContent(type="text", text="x" * size)])

    return server


if __name__ == "__main__":
    build().run()
