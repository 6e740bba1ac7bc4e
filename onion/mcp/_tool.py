"""`MCPTool`: one tool of an MCP server, and how its results read to the model."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import mcp.types as mcp_types

from .._calls import ToolCall, ToolResult
from .._tools import Tool

if TYPE_CHECKING:
    from .._threads import ToolThreads
    from ._server import MCPServer


class MCPTool(Tool):
    """A tool an MCP server lists, offered to the model as `name` (`prefix` + the server's `remote_name`).

    Its parameters are the server's input schema; the server validates the
    arguments. Calling it sends `tools/call` to `server` and answers with
    the server's result (see `tool_result`).
    """

    __slots__ = ("remote_name", "server")

    def __init__(self, server: MCPServer, listed: mcp_types.Tool, prefix: str) -> None:
        self.server = server
        self.remote_name = listed.name
        """The tool's name on the server."""
        self.name = prefix + listed.name
        self.description = listed.description or listed.title or ""
        self.parameters = {key: value for key, value in listed.input_schema.items() if key != "title"}
        self.idempotent = False
        self.takes_context = False
        self.is_async = True
        self.function = self._call
        self._context_parameter = None

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """The arguments as given: the server checks them against its schema and answers an error if they do not fit."""
        return dict(args)

    async def invoke(
        self, args: dict[str, Any], call: ToolCall | None = None, threads: ToolThreads | None = None
    ) -> ToolResult:
        """Call the tool on its server; raises `MCPServerError` when the server cannot answer."""
        try:
            return await self.server.call(self, args, call.run if call is not None else None)
        except asyncio.CancelledError:
            if call is not None:
                call.cancelled.set()
            raise

    async def _call(self, **args: Any) -> ToolResult:
        return await self.invoke(args)

    def __repr__(self) -> str:
        return f"<MCPTool {self.name} of {self.server.describe()}>"


def tool_result(result: mcp_types.CallToolResult) -> ToolResult:
    """The `ToolResult` a server's answer becomes.

    Text blocks are the text, in order; a result without text block reads
    as its structured content in JSON; images, audio and resources are
    described (kind, media type, size, URI) rather than dropped. `isError`
    makes it an error result. `value` is the SDK's `CallToolResult`.
    """
    parts = [_describe(block) for block in result.content]
    if result.structured_content is not None and not any(block.type == "text" for block in result.content):
        parts.insert(0, json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(parts)
    if result.is_error and not text:
        text = "The tool reported an error without a message."
    return ToolResult(text, is_error=result.is_error, value=result)


def _describe(block: mcp_types.ContentBlock) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        return f"[{block.type} {block.mime_type}, {_size(block.data)} bytes, not shown]"
    if isinstance(block, mcp_types.ResourceLink):
        kind = f" {block.mime_type}" if block.mime_type else ""
        return f"[resource link {block.name}{kind}: {block.uri}]"
    resource = block.resource
    if isinstance(resource, mcp_types.TextResourceContents):
        return f"[resource {resource.uri}]\n{resource.text}"
    kind = f" {resource.mime_type}" if resource.mime_type else ""
    return f"[resource {resource.uri}{kind}, {_size(resource.blob)} bytes, not shown]"


def _size(data: str) -> int:
    """The size of base64 `data` once decoded."""
    return len(data.strip().rstrip("=")) * 3 // 4
