"""Copies that make what a layer can reach through a call context that call's own."""

from __future__ import annotations

from typing import Any

from ._messages import Message, ToolRequest

MUTABLE = frozenset((dict, list, set))
"""The types copied at every depth; a mapping holding none of them copies as a plain `dict()`."""


def own_copy(mapping: dict[str, Any]) -> dict[str, Any]:
    """A copy of `mapping` whose dicts, lists and sets (the built-in types) are copies too, at every depth.

    Other values (strings, numbers, objects) are shared, not copied. A flat
    mapping, the usual case, costs one `dict()` and a type scan done in C.
    """
    if not mapping:
        return {}
    if MUTABLE.isdisjoint(map(type, mapping.values())):
        return dict(mapping)
    return {key: _nested_copy(value) for key, value in mapping.items()}


def own_message(message: Message) -> Message:
    """A copy of `message` whose tool calls, their arguments, `meta` and `content` list are copies too."""
    return Message(
        message.role,
        message.text,
        [ToolRequest(t.id, t.name, own_copy(t.args), t.raw_args) for t in message.tool_calls],
        message.tool_call_id,
        message.is_error,
        None if message.meta is None else own_copy(message.meta),
        None if message.content is None else list(message.content),
        message.untrusted,
    )


def _nested_copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _nested_copy(item) for key, item in value.items()}
    if kind is list:
        return [_nested_copy(item) for item in value]
    if kind is set:
        return set(value)
    return value
