"""Messages as the JSON text a store keeps."""

from __future__ import annotations

import json
from typing import Any

from .._messages import Message, ToolRequest


def encode_message(message: Message) -> str:
    """`message` as JSON text: every field, provider metadata included."""
    return json.dumps(message_to_dict(message), separators=(",", ":"))


def decode_message(text: str) -> Message:
    """The message `encode_message` wrote as `text`."""
    return message_from_dict(json.loads(text))


def message_to_dict(message: Message) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.role, "text": message.text}
    if message.tool_calls:
        data["tool_calls"] = [[c.id, c.name, c.args, c.raw_args] for c in message.tool_calls]
    if message.tool_call_id is not None:
        data["tool_call_id"] = message.tool_call_id
    if message.is_error:
        data["is_error"] = True
    if message.meta is not None:
        data["meta"] = message.meta
    return data


def message_from_dict(data: dict[str, Any]) -> Message:
    calls = [ToolRequest(i, n, a, r) for i, n, a, r in data.get("tool_calls", ())]
    return Message(
        data["role"], data["text"], calls, data.get("tool_call_id"), data.get("is_error", False), data.get("meta")
    )
