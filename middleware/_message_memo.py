"""`MessageMemo`: what a layer rewrote each message of one run to, so it rewrites each message once."""

from __future__ import annotations

from collections.abc import Callable

from onion import Message, Part, ToolRequest

_Entry = tuple[Message, str, list[ToolRequest], list[Part] | None, Message]
"""A message, the parts an edit in place would reassign (text, tool calls, content), and its rewrite."""


class MessageMemo:
    """A layer's rewrites of one run's messages (`redact`, `pseudonymize`), each computed once.

    Keyed by the message object, which the memo holds (so its id is never
    reused meanwhile); a message edited in place (its `text`, `tool_calls`
    or `content` reassigned) is rewritten again. A rewrite is final: met
    later (a rewritten message back in the history), it is kept as it is.
    """

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[int, _Entry] = {}

    def rewrite(self, messages: list[Message], rewrite: Callable[[Message], Message]) -> None:
        """Replace each of `messages`, in place, by `rewrite(message)`, remembered from earlier calls."""
        memo = self._seen
        for index, message in enumerate(messages):
            seen = memo.get(id(message))
            if (
                seen is None
                or seen[0] is not message
                or seen[1] is not message.text
                or seen[2] is not message.tool_calls
                or seen[3] is not message.content
            ):
                rewritten = rewrite(message)
                seen = memo[id(message)] = _entry(message, rewritten)
                if rewritten is not message:
                    memo[id(rewritten)] = _entry(rewritten, rewritten)
            if seen[4] is not message:
                messages[index] = seen[4]


def _entry(message: Message, rewritten: Message) -> _Entry:
    """What the memo keeps for `message` rewritten as `rewritten`."""
    return (message, message.text, message.tool_calls, message.content, rewritten)
