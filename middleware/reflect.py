"""`reflect`: after each tool batch, ask the model to reflect before it goes on (ReAct)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from onion import Message, ToolBatch, ToolResult, ToolsNext

__all__ = ["DEFAULT_PROMPT", "reflect"]

DEFAULT_PROMPT = (
    "Before you continue, reflect on the tool results above: what did you learn, "
    "is anything missing or wrong, and what is the best next step?"
)

Prompt = str | Callable[[ToolBatch, list[ToolResult]], str | None]


class reflect:
    """Inject a reflection prompt (a user message) after each tool batch.

    `prompt` is the text (default `DEFAULT_PROMPT`) or a function of the batch
    and its results returning the text, or `None` to skip this batch.
    `when="errors"` reflects only after a batch with an error result.

    The message is queued with `run.inject` once the whole batch has
    returned, so it lands right after the batch's results and before the
    next model call: one reflection per batch, never between a tool call and
    its result. Usable bare.
    """

    __slots__ = ("prompt", "when")

    def __init__(self, prompt: Prompt | None = None, *, when: Literal["always", "errors"] = "always") -> None:
        if when not in ("always", "errors"):
            raise ValueError(f'reflect: when must be "always" or "errors", got {when!r}')
        if prompt is not None and not isinstance(prompt, str) and not callable(prompt):
            raise TypeError(f"reflect: prompt must be a str or a callable (batch, results) -> str, not {prompt!r}")
        self.prompt: Prompt = DEFAULT_PROMPT if prompt is None else prompt
        self.when = when

    async def wrap_tools(self, batch: ToolBatch, call_next: ToolsNext) -> list[ToolResult]:
        results = await call_next(batch)
        if self.when == "errors" and not any(result.is_error for result in results):
            return results
        prompt = self.prompt if isinstance(self.prompt, str) else self.prompt(batch, results)
        if prompt:
            batch.run.inject(Message.user(prompt))
        return results
