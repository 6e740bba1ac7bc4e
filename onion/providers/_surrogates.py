"""Whether a model call's text holds a lone surrogate, read where the text comes from (onion's rule: `onion._text`)."""

from __future__ import annotations

from typing import Any

from .._calls import ModelCall
from .._text import has_surrogate

_CLEAN_SCHEMAS: dict[int, Any] = {}
"""Tool schemas found clean, by `id` (each kept alive, so that no other object takes its id)."""


def call_has_surrogate(call: ModelCall, model_name: str) -> bool:
    """True when a string that a request for `call` would carry holds a surrogate.

    Reads the messages, the tools, the settings and the model's name, not the
    request body built from them. A tool's schema found clean is not read
    again while its tool keeps that same dict (edit a schema by replacing it).
    """
    if not model_name.isascii() and has_surrogate(model_name):
        return True
    for message in call.messages:
        if not message.text.isascii() and has_surrogate(message.text):
            return True
        for request in message.tool_calls:
            if not (request.id.isascii() and request.name.isascii()) and has_surrogate([request.id, request.name]):
                return True
            if (request.args and _args_have_surrogate(request.args)) or (
                request.raw_args is not None and has_surrogate(request.raw_args)
            ):
                return True
        if (
            message.tool_call_id is not None
            and not message.tool_call_id.isascii()
            and has_surrogate(message.tool_call_id)
        ):
            return True
        if message.content is not None and has_surrogate(
            [part if isinstance(part, str) else [part.url, part.media_type] for part in message.content]
        ):
            return True
        if message.meta and has_surrogate(message.meta):
            return True
    for tool in call.tools:
        if not (tool.name.isascii() and (tool.description or "").isascii()) and has_surrogate(
            [tool.name, tool.description]
        ):
            return True
        schema = tool.parameters
        if _CLEAN_SCHEMAS.get(id(schema)) is not schema:
            if has_surrogate(schema):
                return True
            if len(_CLEAN_SCHEMAS) >= 1024:
                _CLEAN_SCHEMAS.clear()
            _CLEAN_SCHEMAS[id(schema)] = schema
    return bool(call.settings) and has_surrogate(call.settings)


def _args_have_surrogate(args: dict[str, Any]) -> bool:
    """`has_surrogate(args)`, most often answered by one `repr` (which writes each surrogate as `\\udXXXX`)."""
    try:
        if "\\ud" not in repr(args):
            return False
    except Exception:  # a repr that fails (or nests too deep): the walk answers
        pass
    return has_surrogate(args)
