"""`approve`: pause the tool calls a person must approve; the run goes on after `agent.resume`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from onion import ToolCall, ToolNext, ToolResult

__all__ = ["approve"]

Matcher = str | Iterable[str] | re.Pattern[str] | Callable[[ToolCall], bool] | None


class approve:
    """Pause the tool calls that `matcher` selects until a person decides.

    `matcher`: a tool name, a list of names, a compiled regex (matching the
    whole name), or `fn(call) -> bool`; `None` (bare `approve`) selects every
    call. A selected call does not run: the run stops before its next model
    call with the call in `result.pending`, while the batch's other calls
    run. Calls approved on resume (`call.approved`) pass, and so do calls of
    unknown tools (they never run; the model is told so). `reason` is what the
    person reads in `PendingCall.reason` (by default "<tool> needs approval").
    """

    def __init__(self, matcher: Matcher = None, *, reason: str | None = None) -> None:
        if not isinstance(matcher, str | re.Pattern) and not callable(matcher) and isinstance(matcher, Iterable):
            matcher = list(matcher)
        self.selects = _selector(matcher)
        self.reason = reason
        self.name = "approve" if matcher is None else f"approve({_describe(matcher)})"

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        if not call.approved and call.tool is not None and self.selects(call):
            return call.pause(self.reason or f"{call.name} needs approval")
        result = await call_next(call)
        return result

    def __repr__(self) -> str:
        return f"<{self.name}>"


def _selector(matcher: Matcher) -> Callable[[ToolCall], bool]:
    if matcher is None:
        return lambda call: True
    if isinstance(matcher, str):
        return lambda call: call.name == matcher
    if isinstance(matcher, re.Pattern):
        return lambda call: matcher.fullmatch(call.name) is not None
    if callable(matcher):
        return lambda call: bool(matcher(call))
    if isinstance(matcher, Iterable):
        names = frozenset(matcher)
        if not all(isinstance(name, str) for name in names):
            raise TypeError(f"approve: {matcher!r} must hold tool names (str)")
        return lambda call: call.name in names
    raise TypeError(
        f"approve: {matcher!r} is not a tool name, a list of names, a compiled regex or a function fn(call) -> bool"
    )


def _describe(matcher: Matcher) -> str:
    if isinstance(matcher, str):
        return repr(matcher)
    if isinstance(matcher, re.Pattern):
        return f"re.compile({matcher.pattern!r})"
    if callable(matcher):
        return getattr(matcher, "__qualname__", repr(matcher))
    return repr(sorted(matcher)) if matcher is not None else ""
