"""The message-order rule: every tool call answered by its result, right after it."""

from __future__ import annotations

from collections.abc import Sequence

from ._messages import Message, ToolRequest
from .errors import MessageOrderError


def check_history(messages: Sequence[Message]) -> None:
    """Raise `MessageOrderError` naming the first message that breaks the order.

    After an assistant message with tool calls, the next messages must be
    one tool result per call, in call order; a tool result anywhere else is
    out of place.
    """
    calls: list[ToolRequest] = []
    answered = asked = 0  # asked: len(calls)
    for message in messages:  # the check of every model call: no index kept, no message built
        role = message.role
        if role == "tool":
            if answered == asked or message.tool_call_id != calls[answered].id:
                break
            answered += 1
        elif answered != asked:
            break
        elif role == "assistant":
            calls = message.tool_calls
            answered, asked = 0, len(calls)
    else:
        if answered == asked:
            return
    _raise_first_break(messages)


def _raise_first_break(messages: Sequence[Message]) -> None:
    """Raise `MessageOrderError` naming the first message of `messages` that breaks the order."""
    calls: list[ToolRequest] = []
    answered = asked = 0
    for index, message in enumerate(messages):
        role = message.role
        if role == "tool":
            if answered == asked:
                raise MessageOrderError(
                    f"message {index} is a tool result for {message.tool_call_id!r} that does not follow its "
                    "tool call (results must come right after the assistant message that asked for them)",
                    index=index,
                )
            wanted = calls[answered].id
            if message.tool_call_id != wanted:
                raise MessageOrderError(
                    f"message {index} answers tool call {message.tool_call_id!r} where the result for "
                    f"{wanted!r} was expected (results must follow their calls, in order)",
                    index=index,
                )
            answered += 1
        elif answered != asked:
            raise MessageOrderError(
                f"message {index} ({role}) comes before tool call(s) {_ids(calls[answered:])} were "
                "answered; use run.inject() to add messages at a safe point",
                index=index,
            )
        elif role == "assistant":
            calls = message.tool_calls
            answered, asked = 0, len(calls)
    if answered != asked:
        raise MessageOrderError(
            f"the history ends with unanswered tool call(s) {_ids(calls[answered:])}", index=len(messages) - 1
        )


def _ids(calls: list[ToolRequest]) -> str:
    return ", ".join(call.id for call in calls)
