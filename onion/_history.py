"""The message-order rule: every tool call answered by its result, right after it."""

from __future__ import annotations

from collections.abc import Sequence

from ._messages import Message
from .errors import MessageOrderError


def check_history(messages: Sequence[Message]) -> None:
    """Raise `MessageOrderError` naming the first message that breaks the order.

    After an assistant message with tool calls, the next messages must be
    one tool result per call, in call order; a tool result anywhere else is
    out of place.
    """
    expected: list[str] = []
    for index, message in enumerate(messages):
        if message.role == "tool":
            if not expected:
                raise MessageOrderError(
                    f"message {index} is a tool result for {message.tool_call_id!r} that does not follow its "
                    "tool call (results must come right after the assistant message that asked for them)",
                    index=index,
                )
            wanted = expected.pop(0)
            if message.tool_call_id != wanted:
                raise MessageOrderError(
                    f"message {index} answers tool call {message.tool_call_id!r} where the result for "
                    f"{wanted!r} was expected (results must follow their calls, in order)",
                    index=index,
                )
            continue
        if expected:
            raise MessageOrderError(
                f"message {index} ({message.role}) comes before tool call(s) {', '.join(expected)} were "
                "answered; use run.inject() to add messages at a safe point",
                index=index,
            )
        if message.role == "assistant" and message.tool_calls:
            expected = [call.id for call in message.tool_calls]
    if expected:
        raise MessageOrderError(
            f"the history ends with unanswered tool call(s) {', '.join(expected)}", index=len(messages) - 1
        )
