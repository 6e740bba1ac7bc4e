"""`approve`: pause the tool calls a person must approve; the run goes on after `agent.resume`."""

from __future__ import annotations

from onion import ToolCall, ToolNext, ToolResult

from ._tool_matcher import Matcher, ToolMatcher

__all__ = ["approve"]


class approve:
    """Pause the tool calls that `matcher` selects until a person decides.

    `matcher`: a tool name, a glob (`"delete_*"`), a list of them, a compiled
    regex (matching the whole name), or `fn(call) -> bool`; `None` (bare
    `approve`) selects every call. A selected call does not run: the run
    stops before its next model call with the call in `result.pending`, while
    the batch's other calls run. Calls approved on resume (`call.approved`)
    pass, and so do calls of unknown tools (they never run; the model is told
    so). `reason` is what the person reads in `PendingCall.reason` (by default
    "<tool> needs approval").
    """

    def __init__(self, matcher: Matcher = None, *, reason: str | None = None) -> None:
        self.selects = ToolMatcher(matcher, "approve")
        self.reason = reason
        self.name = "approve" if matcher is None else f"approve({self.selects!r})"

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        if not call.approved and call.tool is not None and self.selects(call):
            return call.pause(self.reason or f"{call.name} needs approval")
        result = await call_next(call)
        return result

    def __repr__(self) -> str:
        return f"<{self.name}>"
