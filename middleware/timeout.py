"""`timeout`: bound model calls (and, configured, tool calls or the whole run) in time."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from onion import (
    ModelCall,
    ModelNext,
    ModelResponse,
    OnionError,
    Run,
    RunNext,
    RunResult,
    ToolCall,
    ToolNext,
    ToolResult,
)
from onion.errors import ModelTimeoutError

C = TypeVar("C")
R = TypeVar("R")


class TimeoutExceeded(OnionError, TimeoutError):
    """A call took longer than its `timeout` allowed.

    `kind` is the kind of call (`"model"`, `"tool"`, `"run"`), `name` the
    model or tool, `seconds` the limit.
    """

    def __init__(
        self, message: str, *, kind: str = "", name: str = "", seconds: float = 0.0, left_running: bool = False
    ) -> None:
        super().__init__(message)
        self.kind, self.name, self.seconds = kind, name, seconds
        self.left_running = left_running
        """A sync tool's thread was left running: the tool may still complete, so this is not retryable."""
        if left_running:
            self.retryable = False


class ModelCallTimeout(TimeoutExceeded, ModelTimeoutError):
    """A model call timed out: also a retryable `onion.errors.ModelTimeoutError`,

    so `retry` and `fallback` treat it like the provider's own timeouts.
    """


class timeout:
    """Cancel a call that runs longer than its limit and raise `TimeoutExceeded`.

    `seconds` bounds each model call (`None`: model calls are not bounded);
    model calls raise `ModelCallTimeout` (a retryable `ModelTimeoutError`).
    `tools` bounds every tool call and `per_tool` maps tool names to their
    own limit (`None` there: unbounded); `run` bounds the whole run. A tool
    timeout travels up the tool stack and, if nothing catches it, the model
    reads it as an error result. A sync tool's thread cannot be stopped: it
    is left running, the error says the tool may still complete, and it is
    not retryable (`left_running`), so no second attempt overlaps the first. Inside `retry` the limit applies to each
    attempt; outside, to all attempts together. Cancellation from outside
    propagates unchanged.
    """

    __slots__ = ("per_tool", "run", "seconds", "tools", "wrap_only")

    def __init__(
        self,
        seconds: float | None = 60,
        *,
        tools: float | None = None,
        per_tool: Mapping[str, float | None] | None = None,
        run: float | None = None,
    ) -> None:
        for label, value in (("seconds", seconds), ("tools", tools), ("run", run), *(per_tool or {}).items()):
            if value is not None and value <= 0:
                raise ValueError(f"timeout: {label} must be a positive number of seconds or None, got {value!r}")
        self.seconds, self.tools, self.run = seconds, tools, run
        self.per_tool = dict(per_tool or {})
        wraps = {"run": run is not None, "model": seconds is not None, "tool": bool(tools or self.per_tool)}
        self.wrap_only = tuple(kind for kind, used in wraps.items() if used)

    async def wrap_run(self, run: Run, call_next: RunNext) -> RunResult:
        if self.run is None:
            return await call_next(run)
        return await _bounded(run, call_next, self.run, TimeoutExceeded, "run", run.agent.name)

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        if self.seconds is None:
            return await call_next(call)
        name = str(getattr(call.model, "name", call.model))
        return await _bounded(call, call_next, self.seconds, ModelCallTimeout, "model", name)

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        seconds = self.per_tool.get(call.name, self.tools)
        if seconds is None:
            return await call_next(call)
        return await _bounded(call, call_next, seconds, TimeoutExceeded, "tool", call.name)


async def _bounded(
    ctx: C, call_next: Callable[[C], Awaitable[R]], seconds: float, error: type[TimeoutExceeded], kind: str, name: str
) -> R:
    scope = asyncio.timeout(seconds)
    try:
        async with scope:
            return await call_next(ctx)
    except TimeoutError as raised:
        if not scope.expired() or isinstance(raised, TimeoutExceeded):
            raise
        message = f"{kind} {name} timed out after {seconds}s"
        left = isinstance(ctx, ToolCall) and ctx.left_running
        if left:
            message += "; its thread was left running and it may still complete (it will not be started again)"
        raise error(message, kind=kind, name=name, seconds=seconds, left_running=left) from None
