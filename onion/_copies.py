"""Copies that make what a layer can reach through a call context that call's own."""

from __future__ import annotations

from typing import Any, TypeVar

from ._messages import Message, ToolRequest

_MUTABLE = (dict, list, set)
T = TypeVar("T")


def own_copy(mapping: dict[str, Any]) -> dict[str, Any]:
    """A copy of `mapping` whose dicts, lists and sets are copies too, at every depth.

    Other values (strings, numbers, objects) are shared, not copied. A flat
    mapping costs one `dict()` and a type check per value.
    """
    copied = dict(mapping)
    for key, value in copied.items():
        if isinstance(value, _MUTABLE):
            copied[key] = _nested_copy(value)
    return copied


def own_message(message: Message) -> Message:
    """A copy of `message` whose tool calls, their arguments and `meta` are copies too."""
    return Message(
        message.role,
        message.text,
        [ToolRequest(t.id, t.name, own_copy(t.args), t.raw_args) for t in message.tool_calls],
        message.tool_call_id,
        message.is_error,
        None if message.meta is None else own_copy(message.meta),
    )


def _nested_copy(value: T) -> T:
    if isinstance(value, dict):
        return {key: _nested_copy(item) for key, item in value.items()}  # type: ignore[return-value]
    if isinstance(value, list):
        return [_nested_copy(item) for item in value]  # type: ignore[return-value]
    if isinstance(value, set):
        return set(value)  # type: ignore[return-value]
    return value
