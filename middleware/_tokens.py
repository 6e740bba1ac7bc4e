"""`estimate_tokens`: a rough token count of messages and tools before a provider counts them."""

from __future__ import annotations

import json
from collections.abc import Sequence

from onion import Message, Tool

_json = json.JSONEncoder(default=str).encode

_TOOLS_CHARS: dict[tuple[Tool, ...], int] = {}
_TOOLS_CHARS_MAX = 256


def estimate_tokens(messages: Sequence[Message], tools: Sequence[Tool] = ()) -> int:
    """A rough token count: characters / 4.

    The characters are the messages' text, their tool calls' names and
    arguments (as JSON), and the tools' names, descriptions and schemas
    (as JSON).
    """
    chars = _tools_chars(tools) if tools else 0
    args = []
    for message in messages:
        chars += len(message.text)
        for request in message.tool_calls:
            chars += len(request.name)
            args.append(request.args)
    if args:  # one encoding for all: "[" + ", ".join(each) + "]"
        chars += len(_json(args)) - 2 * len(args)
    return chars // 4


def _tools_chars(tools: Sequence[Tool]) -> int:
    """The length of a tool list's names, descriptions and schemas, memoized per list of tools.

    Keyed by the `Tool` objects (identity, held while memoized); emptied
    past 256 lists. A `Tool` changed in place after use keeps its old size.
    """
    key = tuple(tools)
    chars = _TOOLS_CHARS.get(key)
    if chars is None:
        chars = sum(len(t.name) + len(t.description or "") + len(_json(t.parameters)) for t in tools)
        if len(_TOOLS_CHARS) >= _TOOLS_CHARS_MAX:
            _TOOLS_CHARS.clear()
        _TOOLS_CHARS[key] = chars
    return chars
