"""Tool-call arguments between onion's dicts and the providers' JSON strings."""

from __future__ import annotations

import json
import re
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
    if json_nests_deeper(text, MAX_DEPTH):
        return ToolRequest(id=id, name=name, args={}, raw_args=text)
    try:
        parsed = json.loads(text)
    except ValueError:
        return ToolRequest(id=id, name=name, args={}, raw_args=text)
    if isinstance(parsed, dict):
        return ToolRequest(id=id, name=name, args=parsed)
    return ToolRequest(id=id, name=name, args={}, raw_args=text)


def _dumps(arguments: Any) -> str:
    try:
        return json.dumps(arguments)
    except (TypeError, ValueError, RecursionError):
        return repr(arguments)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def json_nests_deeper(text: str | bytes, limit: int) -> bool:
    """Whether JSON `text` opens more than `limit` brackets at once, read without parsing it.

    Checked before `json.loads`, never after: 50,000 brackets overflow the
    stack in the parser, and whatever the garbage collector finalises down
    there overflows too, as an unraisable error. Brackets inside strings do
    not count; fewer brackets than `limit` need no reading at all.
    """
    if isinstance(text, bytes):
        if text.count(b"[") + text.count(b"{") <= limit:
            return False
        text = text.decode("utf-8", "replace")
    elif text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for char in _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)):
        depth += 1 if char in "[{" else -1
        if depth > limit:
            return True
    return False


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
