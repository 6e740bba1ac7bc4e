"""`limit`: at most so many model calls and tool calls per run, ending the run cleanly."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from onion import Message, ModelCall, ModelNext, ModelResponse, ToolCall, ToolNext, ToolResult, Usage
from onion.errors import OnionError

__all__ = ["LimitReached", "limit"]


class LimitReached(OnionError):
    """A run hit a `limit`. `what` names it (`"model_calls"` or `"tool_calls"`),
    `maximum` is its value; `messages` is the history at the stop (every tool
    call answered) and `usage` what the run consumed.
    """

    def __init__(self, message: str, *, what: str, maximum: int, messages: list[Message], usage: Usage) -> None:
        super().__init__(message)
        self.what = what
        self.maximum = maximum
        self.messages = messages
        self.usage = usage


class limit:
    """Bound the model calls and tool calls of each run.

    - `model_calls=N`: the model is asked at most N times; the next model
      call ends the run.
    - `tool_calls=N`: at most N tool calls run; a call beyond is answered
      with a blocked result, and the next model call ends the run.
    - `per_tool={"search": 3}`: a tool called that many times is taken off
      the tools offered to the model, and further calls to it are answered
      with a blocked result; the run goes on without it.

    Ending the run: with `on_limit="error"` (default) the model call raises
    `LimitReached`; with `on_limit="finish"` it is answered, without reaching
    the model, by a final message `final_text` with zero usage and `cached=True`
    (served without a model: a `cache` never stores it). Either way the
    history holds no unanswered tool call. Counters are per run, kept in
    `run.private` (nothing a caller passes in `state=` reaches them; they
    survive a pause and a crash); place `limit` outside `retry` to count
    steps, not attempts.
    """

    __slots__ = ("final_text", "key", "model_calls", "on_limit", "per_tool", "tool_calls")

    def __init__(
        self,
        model_calls: int | None = None,
        tool_calls: int | None = None,
        *,
        per_tool: Mapping[str, int] | None = None,
        on_limit: Literal["error", "finish"] = "error",
        final_text: str = "I stopped here: this run reached its limit of {what} ({maximum}).",
    ) -> None:
        if model_calls is None and tool_calls is None and not per_tool:
            raise TypeError(
                "limit needs at least one bound: limit(model_calls=N), limit(tool_calls=N) "
                'or limit(per_tool={"tool_name": N})'
            )
        for name, value in [("model_calls", model_calls), ("tool_calls", tool_calls), *(per_tool or {}).items()]:
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"limit: {name} must be a non-negative int, got {value!r}")
        if on_limit not in ("error", "finish"):
            raise ValueError(f'limit: on_limit must be "error" or "finish", got {on_limit!r}')
        self.model_calls = model_calls
        self.tool_calls = tool_calls
        self.per_tool = dict(per_tool or {})
        self.on_limit = on_limit
        self.final_text = final_text
        bounds = json.dumps([model_calls, tool_calls, self.per_tool], sort_keys=True, separators=(",", ":"))
        self.key = f"limit:{bounds}"
        """Where a run's counters live in `run.private`: plain JSON data (they survive a pause), one entry per
        configuration (the same in every process, so a run resumed elsewhere keeps counting)."""

    def _counts(self, private: dict[str, Any]) -> dict[str, Any]:
        counts: dict[str, Any] | None = private.get(self.key)
        if counts is None:
            spent = [name for name, n in self.per_tool.items() if n == 0]
            counts = private[self.key] = {"model": 0, "tools": 0, "per_tool": {}, "spent": spent, "over": None}
        return counts

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        counts = self._counts(call.run.private)
        if counts["over"] is None and self.model_calls is not None and counts["model"] >= self.model_calls:
            counts["over"] = ["model_calls", self.model_calls]
        if counts["over"] is not None:
            what, maximum = counts["over"]
            return self._stop(call, what, maximum)
        counts["model"] += 1
        spent = counts["spent"]
        if spent:
            call.tools = [t for t in call.tools if t.name not in spent]
        response = await call_next(call)
        return response

    def _stop(self, call: ModelCall, what: str, maximum: int) -> ModelResponse:
        run = call.run
        if self.on_limit == "finish":
            text = self.final_text.format(what=what.replace("_", " "), maximum=maximum)
            return ModelResponse(Message.assistant(text), Usage(), "limit", cached=True)
        raise LimitReached(
            f"run {run.id} reached its limit of {what} ({maximum})",
            what=what,
            maximum=maximum,
            messages=run.messages,
            usage=run.usage,
        )

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        counts = self._counts(call.run.private)
        maximum = self.per_tool.get(call.name)
        used = counts["per_tool"].get(call.name, 0)
        if maximum is not None and used >= maximum:
            return call.block(f"{call.name} may be called at most {maximum} times per run; go on without it")
        if self.tool_calls is not None and counts["tools"] >= self.tool_calls:
            counts["over"] = ["tool_calls", self.tool_calls]
            return call.block(f"this run reached its limit of {self.tool_calls} tool calls")
        counts["tools"] += 1
        if maximum is not None:
            counts["per_tool"][call.name] = used + 1
            if used + 1 >= maximum and call.name not in counts["spent"]:
                counts["spent"].append(call.name)
        result = await call_next(call)
        if call.pause_reason is not None:  # a layer inside paused it: it counts when it runs, on resume
            counts["tools"] -= 1
            if maximum is not None:
                counts["per_tool"][call.name] = used
                if call.name in counts["spent"] and used < maximum:
                    counts["spent"].remove(call.name)
        return result
