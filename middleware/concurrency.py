"""`concurrency`: cap how many tool calls (and, configured, model calls) run at once."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from onion import Handler, ModelCall, ModelResponse, ToolCall, ToolResult

__all__ = ["concurrency"]


class _Semaphores:
    """The semaphores of one event loop."""

    __slots__ = ("models", "per_tool", "tools")

    def __init__(self, tools: int | None, per_tool: Mapping[str, int], models: int | None) -> None:
        self.tools = None if tools is None else asyncio.Semaphore(tools)
        self.per_tool = {name: asyncio.Semaphore(n) for name, n in per_tool.items()}
        self.models = None if models is None else asyncio.Semaphore(models)


class concurrency:
    """At most `limit` tool calls in flight at once, across every run sharing this layer.

    `per_tool={"browser": 1}` adds a cap per tool name (a call waits for its
    tool's slot first, then for a global one, so it never holds a global slot
    while queued behind its own tool); `limit=None` leaves only the per-tool
    caps. `models=N` also caps concurrent model calls. Waiting is FIFO and
    cancellation-safe: a cancelled call gives back its slot, or never takes
    one. Slots are shared within one event loop; a layer used from a new loop
    (each `run_sync` starts one) starts over with fresh semaphores.
    """

    __slots__ = ("_loop", "_semaphores", "limit", "models", "per_tool", "wrap_only")

    def __init__(
        self, limit: int | None = 8, *, per_tool: Mapping[str, int] | None = None, models: int | None = None
    ) -> None:
        for name, value in [("limit", limit), ("models", models), *(per_tool or {}).items()]:
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"concurrency: {name} must be an int of at least 1 (or None), got {value!r}")
        self.limit = limit
        self.per_tool = dict(per_tool or {})
        self.models = models
        self.wrap_only = ("model", "tool") if models is not None else ("tool",)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphores = _Semaphores(limit, self.per_tool, models)

    def _current(self) -> _Semaphores:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._semaphores = _Semaphores(self.limit, self.per_tool, self.models)
        return self._semaphores

    async def wrap_tool(self, call: ToolCall, call_next: Handler) -> ToolResult:
        semaphores = self._current()
        own = semaphores.per_tool.get(call.name)
        if own is not None:
            async with own:
                return await _within(semaphores.tools, call, call_next)  # type: ignore[no-any-return]
        return await _within(semaphores.tools, call, call_next)  # type: ignore[no-any-return]

    async def wrap_model(self, call: ModelCall, call_next: Handler) -> ModelResponse:
        return await _within(self._current().models, call, call_next)  # type: ignore[no-any-return]


async def _within(semaphore: asyncio.Semaphore | None, ctx: Any, call_next: Handler) -> Any:
    """`call_next(ctx)`, holding `semaphore` if there is one."""
    if semaphore is None:
        return await call_next(ctx)
    async with semaphore:
        return await call_next(ctx)
