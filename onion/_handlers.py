"""The types of `call_next`, one per kind of call, so that `return await call_next(ctx)` type-checks.

`Handler`, the `call_next` of a layer that wraps several kinds, is the bottom floor's (`onion.types`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ._calls import ModelCall, ToolBatch, ToolCall
from ._results import ModelResponse, ToolResult
from ._run import Run, RunResult
from .types import Handler as Handler

RunNext = Callable[[Run], Awaitable[RunResult]]
"""`call_next` of a run layer: `async def mw(ctx: Run, call_next: RunNext) -> RunResult`."""

ModelNext = Callable[[ModelCall], Awaitable[ModelResponse]]
"""`call_next` of a model layer: `async def mw(ctx: ModelCall, call_next: ModelNext) -> ModelResponse`."""

ToolsNext = Callable[[ToolBatch], Awaitable[list[ToolResult]]]
"""`call_next` of a tools layer: `async def mw(ctx: ToolBatch, call_next: ToolsNext) -> list[ToolResult]`."""

ToolNext = Callable[[ToolCall], Awaitable[ToolResult]]
"""`call_next` of a tool layer: `async def mw(ctx: ToolCall, call_next: ToolNext) -> ToolResult`."""
