"""`MCPServer`: an MCP server whose tools an agent offers and calls through its tool stacks."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import sys
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlsplit, urlunsplit

import anyio
import mcp.types as mcp_types
import pydantic_core
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client._transport import Transport, TransportStreams
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared._httpx_utils import create_mcp_http_client

from .._results import ToolResult
from .._tool_sources import ToolSource
from ..errors import MCPServerError
from ._tool import MCPTool, tool_result

if TYPE_CHECKING:
    from .._run import Run
    from .._tools import Tool

MAX_RESULT_BYTES = 1_048_576
"""The default cap on one tool result of an MCP server: 1 MiB of JSON (about 250,000 tokens of text)."""


class MCPServer(ToolSource):
    """An MCP server whose tools the agent offers beside its own: `Agent(model, tools=[add, docs])`.

    Build one with `MCPServer.stdio(...)` or `MCPServer.http(...)`. It
    connects on first use (the first model call of a run), lists its tools
    (again when the server says its list changed), and stays connected
    until `agent.aclose()`. A server that dies answers the calls of that
    run with error results saying so; the next run starts it again.
    `prefix` is put before each of its tool names; `connect_timeout` bounds
    connecting and listing (tool calls are bounded by a `timeout` layer). A
    result over `max_result_bytes` (its JSON, as the server sent it) is
    answered with an error result saying so instead. Its tools' results are
    outside content (`ToolResult.untrusted`) unless `untrusted=False`, and
    only then does a tool's `readOnlyHint` make it read-only for `contain`.
    """

    def __init__(
        self,
        transport: Callable[[], Transport],
        *,
        name: str,
        prefix: str = "",
        connect_timeout: float = 30.0,
        max_result_bytes: int = MAX_RESULT_BYTES,
        untrusted: bool = True,
    ) -> None:
        if not isinstance(prefix, str):
            raise TypeError(f"MCP server {name!r}: prefix must be a str, got {prefix!r}")
        if connect_timeout <= 0:
            raise ValueError(f"MCP server {name!r}: connect_timeout must be positive seconds, got {connect_timeout!r}")
        if type(max_result_bytes) is not int or max_result_bytes <= 0:
            raise ValueError(f"MCP server {name!r}: max_result_bytes must be a positive int, got {max_result_bytes!r}")
        self.transport = transport
        """Makes a fresh SDK transport (an async context manager giving read and write streams) per connection."""
        self.name = name
        self.prefix = prefix
        self.connect_timeout = connect_timeout
        self.max_result_bytes = max_result_bytes
        self.untrusted = untrusted
        self._connection: _Connection | None = None
        self._tools: list[Tool] = []
        self._listed_on: _Connection | None = None
        self._stale = True

    @classmethod
    def stdio(
        cls,
        command: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        prefix: str = "",
        name: str | None = None,
        connect_timeout: float = 30.0,
        max_result_bytes: int = MAX_RESULT_BYTES,
        untrusted: bool = True,
    ) -> MCPServer:
        """A server run as `command *args`, spoken to over its stdin and stdout.

        The process gets `env` over the SDK's safe defaults (`PATH`, `HOME`, ...),
        not this process's whole environment; its stderr is this process's.
        """
        parameters = StdioServerParameters(
            command=command, args=list(args), env=dict(env or {}) or None, cwd=None if cwd is None else os.fspath(cwd)
        )
        return cls(
            lambda: stdio_client(parameters, errlog=_stderr()),
            name=name or _program_name(command, args),
            prefix=prefix,
            connect_timeout=connect_timeout,
            max_result_bytes=max_result_bytes,
            untrusted=untrusted,
        )

    @classmethod
    def http(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        prefix: str = "",
        name: str | None = None,
        connect_timeout: float = 30.0,
        max_result_bytes: int = MAX_RESULT_BYTES,
        untrusted: bool = True,
    ) -> MCPServer:
        """A server at `url`, spoken to over streamable HTTP, sending `headers` with every request."""
        sent = dict(headers or {})

        @contextlib.asynccontextmanager
        async def transport() -> AsyncIterator[TransportStreams]:
            async with (
                create_mcp_http_client(headers=sent) as http,
                streamable_http_client(url, http_client=http) as streams,
            ):
                yield streams

        return cls(
            transport,
            name=name or _address(url),
            prefix=prefix,
            connect_timeout=connect_timeout,
            max_result_bytes=max_result_bytes,
            untrusted=untrusted,
        )

    def describe(self) -> str:
        return f"MCP server {self.name!r}"

    def __repr__(self) -> str:
        return f"<MCPServer {self.name!r} prefix={self.prefix!r}>"

    async def list_tools(self, run: Run | None) -> list[Tool]:
        """Its tools, listed on first use and again once the server said its list changed.

        Raises `MCPServerError` if the server cannot be started or listed.
        """
        connection = await self._connect(run)
        if (self._listed_on is connection and not self._stale) or connection.ended:
            return self._tools
        self._listed_on, self._stale = connection, False
        try:
            async with asyncio.timeout(self.connect_timeout):
                listed = await _every_tool(connection.client)
        except (MCPError, TimeoutError) as error:
            self._listed_on = None
            raise MCPServerError(f"{self.describe()} could not list its tools: {_reason(error)}") from error
        self._tools = [MCPTool(self, tool, self.prefix) for tool in listed]
        return self._tools

    async def call(self, tool: MCPTool, args: dict[str, Any], run: Run | None) -> ToolResult:
        """Run `tool` with `args` on the server for `run`; `MCPServerError` when it cannot answer."""
        connection = await self._connect(run)
        if connection.ended or connection.client is None:
            raise MCPServerError(
                f"{self.describe()} is not running: it stopped earlier in this run; the next run starts it again"
            )
        try:
            result = await connection.client.call_tool(tool.remote_name, args)
        except MCPError as error:
            if error.code != mcp_types.CONNECTION_CLOSED and not connection.ended:
                raise MCPServerError(
                    f"{self.describe()} answered the call of {tool.remote_name} with error {error.code}: {error}"
                ) from None
            connection.ended = True
            raise MCPServerError(
                f"{self.describe()} stopped during the call (its connection closed: the process exited or was "
                "killed); the next run starts it again"
            ) from None
        size = len(pydantic_core.to_json(result))
        if size > self.max_result_bytes:
            return ToolResult(
                f"{self.describe()} answered {tool.remote_name} with {size:,} bytes, over its cap of "
                f"{self.max_result_bytes:,} bytes: the result was dropped (ask for less, or raise the cap with "
                "MCPServer(..., max_result_bytes=...))",
                is_error=True,
            )
        return tool_result(result)

    async def aclose(self) -> None:
        """Disconnect (a stdio server's process is stopped); the next use connects again."""
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    async def _connect(self, run: Run | None) -> _Connection:
        """The live connection, made if need be; one that died is replaced unless `run` already used it."""
        loop = asyncio.get_running_loop()
        connection = self._connection
        if connection is not None and (
            connection.loop is not loop or (connection.ended and (run is None or run not in connection.users))
        ):
            self._connection = None
            await connection.close()
        if self._connection is None:
            self._connection = _Connection(self, loop)
        connection = self._connection
        if run is not None:
            connection.users.add(run)
        if not connection.ready.is_set():
            try:
                async with asyncio.timeout(self.connect_timeout):
                    await connection.ready.wait()
            except TimeoutError:
                if self._connection is connection:
                    self._connection = None
                await connection.close()
                raise MCPServerError(f"{self.describe()} did not start within {self.connect_timeout}s") from None
        if connection.failure is not None:
            raise MCPServerError(
                f"{self.describe()} could not start: {_reason(connection.failure)}"
            ) from connection.failure
        return connection

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._stale = True


class _Connection:
    """One session with the server, held by a task of its own: the SDK's sessions are entered and left in one task.

    Requests are sent from the tasks of the runs (a cancelled run cancels its
    requests); `users` are the runs that used it, which see it dead once it
    ended rather than start it again.
    """

    def __init__(self, server: MCPServer, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.client: Client | None = None
        self.failure: Exception | None = None
        self.ended = False
        self.users: weakref.WeakSet[Run] = weakref.WeakSet()
        self.ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task = loop.create_task(
            self._hold(server), name=f"onion.mcp {server.name}", context=contextvars.Context()
        )

    async def _hold(self, server: MCPServer) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = Client(
                    _watched(server.transport(), self),
                    cache=None,
                    message_handler=server._on_message,
                    client_info=mcp_types.Implementation(name="onion", version="0.1"),
                )
                await stack.enter_async_context(client)
                with contextlib.suppress(ListenNotSupportedError, MCPError):
                    await stack.enter_async_context(client.listen(tools_list_changed=True))
                self.client = client
                self.ready.set()
                await self._stop.wait()
        except Exception as error:
            self.failure = _first(error)
        finally:
            self.ended = True
            self.ready.set()

    async def close(self) -> None:
        """Leave the session (its stdio process stopped) and wait for the holding task to end."""
        if self._task.done() or self.loop is not asyncio.get_running_loop():
            return  # a connection of an event loop that ended went with it
        if self.client is not None:
            self._stop.set()
        else:
            self._task.cancel()
        await asyncio.wait([self._task])


@contextlib.asynccontextmanager
async def _watched(transport: Transport, connection: _Connection) -> AsyncIterator[TransportStreams]:
    """`transport`, whose read stream marks `connection` ended when the server's side closes."""
    async with transport as (read, write):
        yield _EndWatcher(read, connection), write


class _EndWatcher:
    """A read stream that marks its connection ended when the stream ends (the server process died)."""

    def __init__(self, stream: Any, connection: _Connection) -> None:
        self._stream = stream
        self._connection = connection

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._connection.ended = True
            raise

    def __aiter__(self) -> _EndWatcher:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _EndWatcher:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)  # `last_context`, `close`, ...


async def _every_tool(client: Client | None) -> list[mcp_types.Tool]:
    assert client is not None
    tools: list[mcp_types.Tool] = []
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools


def _first(error: Exception) -> Exception:
    """The error inside task groups' exception groups, when there is one."""
    while isinstance(error, ExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _reason(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return "no answer in time"
    if isinstance(error, MCPError) and error.code == mcp_types.CONNECTION_CLOSED:
        return "the connection closed before it answered (a stdio server's process exited: its stderr says why)"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _stderr() -> TextIO:
    """Where a stdio server's stderr goes: this process's, when it is a real file."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__ or sys.stderr
    return sys.stderr


def _program_name(command: str, args: Sequence[str]) -> str:
    """A default server name from its command: the program and its script, never its other arguments (tokens)."""
    script = next((arg for arg in args if not arg.startswith("-")), None)
    program = os.path.basename(command)
    return (
        program
        if script is None or not script.endswith((".py", ".js", ".ts", ".mjs"))
        else f"{program} {os.path.basename(script)}"
    )


def _address(url: str) -> str:
    """A default server name from its URL: scheme, host and path, without credentials, query or fragment."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))
