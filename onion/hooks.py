"""The hook vocabulary users know (`before_llm`, `after_each_tool`, ...) as ordinary middleware.

Each hook is a decorator on a sync or async function, bare (`@before_llm`)
or with arguments (`@before_each_tool("send_email")`, `@after_llm(errors="log")`).
By default an exception in a hook propagates (a guard); `errors="log"` makes
the hook an observer whose failure is logged while the run goes on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, cast, overload

from ._calls import ModelCall, ToolBatch, ToolCall
from ._exports import export
from ._hook import _NO_MATCHER, Block, Errors, Hook, Matcher, Modify, Pause
from ._results import ModelResponse, ToolResult
from ._run import Run, RunResult
from ._stack import Handler, Stack

__all__ = [
    "EVENTS",
    "AfterEachTool",
    "AfterLLM",
    "AfterTools",
    "AfterUserInput",
    "BeforeEachTool",
    "BeforeLLM",
    "BeforeTools",
    "Block",
    "Hook",
    "Modify",
    "OnComplete",
    "OnError",
    "Pause",
    "after_each_tool",
    "after_llm",
    "after_tools",
    "after_user_input",
    "before_each_tool",
    "before_llm",
    "before_tools",
    "from_dict",
    "hook",
    "on_complete",
    "on_error",
]


class AfterUserInput(Hook):
    """`fn(run)` once, before the first model call of the run (edit `run.messages`)."""

    event = "after_user_input"
    arguments = ("run",)

    async def wrap_run(self, run: Run, call_next: Handler) -> RunResult:
        if run.steps == 0:
            await self.call(run)
        result: RunResult = await call_next(run)
        return result


class BeforeLLM(Hook):
    """`fn(call)` before each model call; returning a `ModelResponse` skips the model."""

    event = "before_llm"
    arguments = ("call",)

    async def wrap_model(self, call: ModelCall, call_next: Handler) -> ModelResponse:
        replacement = await self.call(call)
        if isinstance(replacement, ModelResponse):
            return replacement
        response: ModelResponse = await call_next(call)
        return response


class AfterLLM(Hook):
    """`fn(call, response)` after each model call; returning a `ModelResponse` replaces it."""

    event = "after_llm"
    arguments = ("call", "response")

    async def wrap_model(self, call: ModelCall, call_next: Handler) -> ModelResponse:
        response: ModelResponse = await call_next(call)
        replacement = await self.call(call, response)
        return replacement if isinstance(replacement, ModelResponse) else response


class BeforeTools(Hook):
    """`fn(batch)` before a batch; `Block(reason)` answers every call with the reason, `Pause(reason)` pauses them.

    A paused batch's calls that were approved on resume run as usual.
    """

    event = "before_tools"
    arguments = ("batch",)

    async def wrap_tools(self, batch: ToolBatch, call_next: Handler) -> list[ToolResult]:
        decision = await self.call(batch)
        if isinstance(decision, Block):
            return [call.block(decision.reason) for call in batch.calls]
        if isinstance(decision, Pause) and not all(call.approved for call in batch.calls):
            return await _pause_unapproved(batch, decision.reason, call_next)
        results: list[ToolResult] = await call_next(batch)
        return results


async def _pause_unapproved(batch: ToolBatch, reason: str, call_next: Handler) -> list[ToolResult]:
    """Pause the batch's calls that are not approved; the approved ones run, as a batch of their own."""
    calls = batch.calls
    approved = [call for call in calls if call.approved]
    ran: list[ToolResult] = []
    if approved:
        batch.calls = approved
        try:
            ran = await call_next(batch)
        finally:
            batch.calls = calls
    if len(ran) != len(approved):
        return ran  # the agent names the tools layers that returned the wrong number of results
    results = iter(ran)
    return [next(results) if call.approved else call.pause(reason) for call in calls]


class AfterTools(Hook):
    """`fn(batch, results)` after a batch: the safe place to `run.inject(...)`."""

    event = "after_tools"
    arguments = ("batch", "results")

    async def wrap_tools(self, batch: ToolBatch, call_next: Handler) -> list[ToolResult]:
        results: list[ToolResult] = await call_next(batch)
        await self.call(batch, results)
        return results


class BeforeEachTool(Hook):
    """`fn(call)` before each matching tool call; may return `Block(reason)`, `Modify(args)` or `Pause(reason)`.

    `Pause` lets a call approved on resume (`call.approved`) through.
    """

    event = "before_each_tool"
    arguments = ("call",)
    takes_matcher = True

    async def wrap_tool(self, call: ToolCall, call_next: Handler) -> ToolResult:
        if self._matches(call.name):
            decision = await self.call_in_tool(call)
            if isinstance(decision, Block):
                return call.block(decision.reason)
            if isinstance(decision, Pause) and not call.approved:
                return call.pause(decision.reason)
            if isinstance(decision, Modify):
                call.args = dict(decision.args)
        result: ToolResult = await call_next(call)
        return result


class AfterEachTool(Hook):
    """`fn(call, result)` after each matching tool call; returning a `ToolResult` replaces it."""

    event = "after_each_tool"
    arguments = ("call", "result")
    takes_matcher = True

    async def wrap_tool(self, call: ToolCall, call_next: Handler) -> ToolResult:
        result: ToolResult = await call_next(call)
        if self._matches(call.name):
            replacement = await self.call_in_tool(call, result)
            if isinstance(replacement, ToolResult):
                return replacement
        return result


class OnError(Hook):
    """`fn(call, error)` when a model or (matching) tool call raised.

    Returning `None` re-raises; a `ToolResult` or `ModelResponse` recovers.
    With a matcher it sees the matching tool calls only, never a model call.
    Cancellation and onion's control-flow signals never reach it.
    """

    event = "on_error"
    arguments = ("call", "error")
    takes_matcher = True

    async def wrap_model(self, call: ModelCall, call_next: Handler) -> ModelResponse:
        try:
            response: ModelResponse = await call_next(call)
            return response
        except Exception as error:
            if self.matcher is not None:
                raise
            recovery = await self.call(call, error)
            if isinstance(recovery, ModelResponse):
                return recovery
            raise

    async def wrap_tool(self, call: ToolCall, call_next: Handler) -> ToolResult:
        try:
            result: ToolResult = await call_next(call)
            return result
        except Exception as error:
            if not self._matches(call.name):
                raise
            recovery = await self.call_in_tool(call, error)
            if isinstance(recovery, ToolResult):
                return recovery
            raise


class OnComplete(Hook):
    """`fn(run, result)` when the run ends with a result."""

    event = "on_complete"
    arguments = ("run", "result")

    async def wrap_run(self, run: Run, call_next: Handler) -> RunResult:
        result: RunResult = await call_next(run)
        await self.call(run, result)
        return result


_HOOKS: dict[str, type[Hook]] = {
    cls.event: cls
    for cls in (
        AfterUserInput,
        BeforeLLM,
        AfterLLM,
        BeforeTools,
        AfterTools,
        BeforeEachTool,
        AfterEachTool,
        OnError,
        OnComplete,
    )
}
EVENTS = tuple(_HOOKS)
"""The nine event names."""


Decorated = Callable[[Callable[..., Any]], Hook]


class HookDecorator(Protocol):
    """`@hook` bare on a function, or `@hook(matcher, errors=...)` returning the decorator."""

    @overload
    def __call__(self, function: Callable[..., Any], /) -> Hook: ...
    @overload
    def __call__(self, matcher: Matcher = None, /, *, errors: Errors = "raise") -> Decorated: ...


def _decorator(cls: type[Hook]) -> HookDecorator:
    def decorate(target: Any = None, /, *, errors: Errors = "raise") -> Hook | Decorated:
        if callable(target) and not isinstance(target, re.Pattern):
            return cls(target, None, errors)
        if target is not None and not cls.takes_matcher:
            raise TypeError(_NO_MATCHER.format(event=cls.event))
        return lambda function: cls(function, target, errors)

    decorate.__name__ = decorate.__qualname__ = cls.event
    decorate.__doc__ = cls.__doc__
    return cast(HookDecorator, decorate)


after_user_input = _decorator(AfterUserInput)
before_llm = _decorator(BeforeLLM)
after_llm = _decorator(AfterLLM)
before_tools = _decorator(BeforeTools)
after_tools = _decorator(AfterTools)
before_each_tool = _decorator(BeforeEachTool)
after_each_tool = _decorator(AfterEachTool)
on_error = _decorator(OnError)
on_complete = _decorator(OnComplete)


def hook(event: str, function: Callable[..., Any], matcher: Matcher = None, *, errors: Errors = "raise") -> Hook:
    """The hook middleware for `event` calling `function`."""
    if event not in _HOOKS:
        raise ValueError(f"unknown hook event {event!r}; the events are: {', '.join(EVENTS)}")
    return _HOOKS[event](function, matcher, errors)


def from_dict(
    hooks: Mapping[str, Callable[..., Any] | Iterable[Callable[..., Any]]], *, errors: Errors = "raise"
) -> Stack:
    """A `Stack` from `{"after_llm": [f], "before_each_tool": [g], ...}` (connectonion's style)."""
    stack = Stack(name="hooks")
    for event, functions in hooks.items():
        for function in [functions] if callable(functions) else functions:
            stack.use(hook(event, function, errors=errors))
    return stack


export(globals())
