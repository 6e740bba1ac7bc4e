"""`MCPTool`: one tool of an MCP server, and how its results read to the model."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from typing import TYPE_CHECKING, Any, Protocol

import mcp.types as mcp_types

from .._calls import ToolCall
from .._content import IMAGE_TYPES, Document, Image, Part
from .._results import ToolResult
from .._tools import TOOL_NAME, Tool, safe_name

if TYPE_CHECKING:
    from .._run import Run
    from .._threads import ToolThreads


class ToolServer(Protocol):
    """What an MCP tool asks of its server (`onion.mcp.MCPServer` is one)."""

    untrusted: bool
    """Whether its tools' results are outside content."""

    async def call(self, tool: MCPTool, args: dict[str, Any], run: Run | None) -> ToolResult: ...

    def describe(self) -> str: ...


class MCPTool(Tool):
    """A tool an MCP server lists, offered to the model as `name`: `offered_name(prefix + remote_name)`.

    Its parameters are the server's input schema; the server validates the
    arguments. Calling it sends `tools/call` to `server` and answers with
    the server's result (see `tool_result`).
    """

    __slots__ = ("remote_name", "server")

    def __init__(self, server: ToolServer, listed: mcp_types.Tool, prefix: str) -> None:
        self.server = server
        self.remote_name = listed.name
        """The tool's name on the server."""
        self.name = offered_name(prefix + listed.name)
        self.description = listed.description or listed.title or ""
        self.parameters = {key: value for key, value in listed.input_schema.items() if key != "title"}
        self.idempotent = False
        self.in_doubt, self.reconcile = None, None
        self.untrusted = server.untrusted
        hints = listed.annotations
        self.read_only = not self.untrusted and hints is not None and hints.read_only_hint is True
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


def offered_name(name: str) -> str:
    """`name` as the model APIs take it (`^[a-zA-Z0-9_-]{1,64}$`), the same in every process.

    A name that fits is kept. Otherwise each other character becomes `_`,
    and a name still over 64 characters keeps its first 57 and `_` with 6 hex
    digits of its SHA-256, so two long names sharing a beginning stay apart.
    """
    if TOOL_NAME.fullmatch(name):
        return name
    if len(name) <= 64:
        return safe_name(name)
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{safe_name(name)[:57]}_{digest[:6]}"


def tool_result(result: mcp_types.CallToolResult) -> ToolResult:
    """The `ToolResult` a server's answer becomes.

    Text blocks are text, in order; a result without text block reads as its
    structured content in JSON. Images (PNG, JPEG, GIF, WebP) become
    `onion.Image` parts and PDFs `onion.Document` parts, so the model sees
    them; an embedded resource is named by its URI, then its text or part.
    What no model here takes (audio, other media types, undecodable data)
    is a text placeholder naming its type and size, never dropped silently.
    `isError` makes it an error result. `value` is the SDK's `CallToolResult`.
    """
    parts: list[Part] = [part for block in result.content for part in _parts(block)]
    if result.structured_content is not None and not any(block.type == "text" for block in result.content):
        parts.insert(0, json.dumps(result.structured_content, ensure_ascii=False, default=str))
    content = _joined(parts)
    if result.is_error and not content:
        content = "The tool reported an error without a message."
    return ToolResult(content, is_error=result.is_error, value=result)


def _parts(block: mcp_types.ContentBlock) -> list[Part]:
    if isinstance(block, mcp_types.TextContent):
        return [block.text]
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        return [_media(block.type, block.data, block.mime_type, f"{block.type} {block.mime_type}")]
    if isinstance(block, mcp_types.ResourceLink):
        kind = f" {block.mime_type}" if block.mime_type else ""
        return [f"[resource link {block.name}{kind}: {block.uri}]"]
    resource = block.resource
    if isinstance(resource, mcp_types.TextResourceContents):
        return [f"[resource {resource.uri}]", resource.text]
    mime_type = resource.mime_type or ""
    part = _media("resource", resource.blob, mime_type, f"resource {resource.uri} {mime_type}".rstrip())
    return [part] if isinstance(part, str) else [f"[resource {resource.uri}]", part]


def _media(kind: str, data: str, mime_type: str, label: str) -> Part:
    """An `Image` or `Document` for base64 `data` of `mime_type`, or a placeholder `[label, ...]` saying why not."""
    try:
        raw = base64.b64decode("".join(data.split()), validate=True)
    except ValueError:
        return f"[{label}, not shown: its data is not valid base64]"
    if kind != "audio" and mime_type in IMAGE_TYPES:
        return Image(data=raw, media_type=mime_type)
    if kind == "resource" and mime_type == "application/pdf":
        return Document(data=raw)
    if kind == "audio":
        why = "onion cannot pass audio to a model"
    elif kind == "image":
        why = f"a model takes {', '.join(IMAGE_TYPES[:-1])} or {IMAGE_TYPES[-1]}"
    else:
        why = "a model takes images and PDF documents only"
    return f"[{label}, {len(raw)} bytes, not shown: {why}]"


def _joined(parts: list[Part]) -> str | list[Part]:
    """Text alone when every part is text; otherwise the parts, each run of text joined by line breaks."""
    if all(isinstance(part, str) for part in parts):
        return "\n".join(part for part in parts if isinstance(part, str))
    joined: list[Part] = []
    for part in parts:
        if isinstance(part, str) and joined and isinstance(joined[-1], str):
            joined[-1] = f"{joined[-1]}\n{part}"
        else:
            joined.append(part)
    return joined
