"""Outside content in a history: which messages are untrusted, named as a person reads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._messages import Message

PREVIEW_WORDS = 8
"""Words of an untrusted text a `UntrustedSource` keeps (`preview`)."""
PREVIEW_CHARS = 80


@dataclass(frozen=True, slots=True)
class UntrustedSource:
    """One untrusted message of a history: where it came from and how it begins.

    `tool` and `call_id` name the tool call it answers (None for another message an application marked
    untrusted); `index` is its place in the history; `preview` its first words.
    """

    index: int
    tool: str | None
    call_id: str | None
    preview: str

    def __str__(self) -> str:
        where = f"{self.tool} (call {self.call_id})" if self.tool is not None else f"message {self.index}"
        return f'{where}: "{self.preview}"'


def untrusted_sources(messages: Sequence[Message]) -> list[UntrustedSource]:
    """The untrusted messages of `messages` (`Message.untrusted`), in order."""
    found: list[UntrustedSource] = []
    names: dict[str, str] = {}
    for index, message in enumerate(messages):
        if message.role == "assistant":
            for request in message.tool_calls:
                names[request.id] = request.name
        if not message.untrusted:
            continue
        call_id = message.tool_call_id
        tool = names.get(call_id, "a tool") if call_id is not None else None
        found.append(UntrustedSource(index, tool, call_id, preview(message.text)))
    return found


def preview(text: str) -> str:
    """The first `PREVIEW_WORDS` words of `text` (at most `PREVIEW_CHARS` characters), `...` when cut."""
    words = text.split()
    shown = " ".join(words[:PREVIEW_WORDS])
    if len(shown) > PREVIEW_CHARS:
        shown = shown[: PREVIEW_CHARS - 3].rstrip()
    elif len(words) <= PREVIEW_WORDS:
        return shown
    return shown + "..."
