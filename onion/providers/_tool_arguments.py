"""Tool-call arguments between onion's dicts and the providers' JSON strings."""

from __future__ import annotations

import json
from typing import Any

from .._messages import ToolRequest


def tool_request(id: str, name: str, arguments: Any) -> ToolRequest:
    """A `ToolRequest` for arguments given as a dict or a JSON string.

    Arguments that are not a JSON object (broken JSON, a list, a number) give
    `args={}` and keep the text in `raw_args`; the agent then answers the
    call with an error result the model can act on.
    """
    if isinstance(arguments, dict):
        return ToolRequest(id=id, name=name, args=dict(arguments))
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return ToolRequest(id=id, name=name, args={})
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    try:
        parsed = json.loads(text)
    except ValueError:
        return ToolRequest(id=id, name=name, args={}, raw_args=text)
    if isinstance(parsed, dict):
        return ToolRequest(id=id, name=name, args=parsed)
    return ToolRequest(id=id, name=name, args={}, raw_args=text)


def arguments_json(request: ToolRequest) -> str:
    """The arguments as a JSON string, or the raw text the model sent when it was not JSON."""
    if request.raw_args is not None and not request.args:
        return request.raw_args
    return json.dumps(request.args, ensure_ascii=False)


def tool_result_text(text: str, is_error: bool) -> str:
    """A tool result's text for APIs without an error flag (OpenAI): errors are marked in the text."""
    return f"Error: {text}" if is_error else text
