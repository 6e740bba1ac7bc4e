"""MCP servers as tools: `Agent(model, tools=[add, MCPServer.stdio("python", "docs_server.py")])`.

Needs the MCP SDK: `pip install 'onion[mcp]'`. See docs/mcp.md.
"""

from __future__ import annotations

from .._exports import export

try:
    import mcp as _sdk  # noqa: F401
except ImportError as error:  # pragma: no cover - the SDK is a dev dependency
    raise ImportError("onion.mcp needs the MCP SDK: pip install 'onion[mcp]'") from error

from ._server import MCPServer
from ._tool import MCPTool, tool_result

__all__ = ["MCPServer", "MCPTool", "tool_result"]

export(globals())
