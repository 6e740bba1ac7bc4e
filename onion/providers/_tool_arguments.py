"""Tool-call arguments between onion's dicts and the providers' JSON strings."""

from __future__ import annotations

import json
from typing import Any

from .._messages import ToolRequest

_JSON = json.JSONEncoder(ensure_ascii=False)
"""`json.dumps(value, ensure_ascii=False)` without building an encoder per call."""

MAX_DEPTH = 100
"""Arguments nested deeper than this many levels are refused (as if not JSON): past it lies `RecursionError`."""


def tool_request(id: str, name: str, arguments: Any) -> ToolRequest:
    """A `ToolRequest` for arguments given as a dict or a JSON string.

    Arguments that are not a JSON object (broken JSON, a list, a number) or
    that nest deeper than `MAX_DEPTH` levels give `args={}` and keep the text
    in `raw_args`; the agent then answers the call with an error result the
    model can act on.
    """
    if isinstance(arguments, dict):
        if _depth_exceeds(arguments, MAX_DEPTH):
            return ToolRequest(id=id, name=name, args={}, raw_args=f"<arguments nested over {MAX_DEPTH} levels deep>")
        return ToolRequest(id=id, name=name, args=dict(arguments))
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return ToolRequest(id=id, name=name, args={})
    text = arguments if isinstance(arguments, str) else _dumps(arguments)
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return ToolRequest(id=id, name=name, args={}, raw_args=text)
    if isinstance(parsed, dict) and not (_may_nest_deeper(text, MAX_DEPTH) and _depth_exceeds(parsed, MAX_DEPTH)):
        return ToolRequest(id=id, name=name, args=parsed)
    return ToolRequest(id=id, name=name, args={}, raw_args=text)


def _dumps(arguments: Any) -> str:
    try:
        return json.dumps(arguments)
    except (TypeError, ValueError, RecursionError):
        return repr(arguments)


def _may_nest_deeper(text: str, limit: int) -> bool:
    """Cheap first check: fewer brackets than `limit` cannot nest deeper than it."""
    return text.count("[") + text.count("{") > limit


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether `value` nests dicts and lists deeper than `limit` levels (walked without recursion)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def arguments_json(request: ToolRequest) -> str:
    """The arguments as a JSON string, or the raw text the model sent when it was not JSON."""
    if request.raw_args is not None and not request.args:
        return request.raw_args
    return _JSON.encode(request.args)


def tool_result_text(text: str, is_error: bool) -> str:
    """A tool result's text for APIs without an error flag (OpenAI): errors are marked in the text."""
    return f"Error: {text}" if is_error else text
