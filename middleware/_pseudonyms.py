"""The placeholders of a `pseudonymize`d run, and what shows its consumer the real values again."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from onion import (
    Message,
    ModelCallFinished,
    ModelResponse,
    Run,
    StreamReset,
    TextDelta,
    ToolCallStarted,
    ToolRequest,
    ToolResultEvent,
    output_schema,
)

PLACEHOLDER = re.compile(r"<[A-Z][A-Z0-9_]*_[0-9]+>")
_OPEN_PLACEHOLDER = re.compile(r"<[A-Z0-9_]{0,64}\Z")
"""The start of a placeholder the next delta may complete, at the end of the text."""


class Pseudonyms:
    """The placeholders of one run: each real value and its `<LABEL_n>`, numbered per label in order of first sight."""

    __slots__ = ("counts", "placeholders", "values")

    def __init__(self, values: dict[str, str] | None = None) -> None:
        self.values: dict[str, str] = dict(values or {})
        """Each placeholder's real value."""
        self.placeholders = {value: placeholder for placeholder, value in self.values.items()}
        self.counts: dict[str, int] = {}
        for placeholder in self.values:
            label = placeholder[1:].rpartition("_")[0]
            self.counts[label] = self.counts.get(label, 0) + 1

    def skip(self, placeholders: set[str]) -> None:
        """Number new values after `placeholders` (made by a run whose values are not known here)."""
        for placeholder in placeholders:
            label, _, number = placeholder[1:-1].rpartition("_")
            self.counts[label] = max(self.counts.get(label, 0), int(number))

    def placeholder(self, label: str, value: str) -> str:
        """`value`'s placeholder, a new one (`<LABEL_n>`, the next `n` of that label) the first time."""
        known = self.placeholders.get(value)
        if known is None:
            count = self.counts[label] = self.counts.get(label, 0) + 1
            known = self.placeholders[value] = f"<{label}_{count}>"
            self.values[known] = value
        return known

    def restore(self, text: str) -> str:
        """`text` with every placeholder of this run replaced by its real value (others left as they are)."""
        if "<" not in text or not self.values:
            return text
        return PLACEHOLDER.sub(lambda match: self.values.get(match.group(), match.group()), text)

    def restore_json(self, text: str) -> str:
        """`text` (JSON) with every placeholder of this run replaced by its real value escaped as in a JSON string."""
        if "<" not in text or not self.values:
            return text
        return PLACEHOLDER.sub(lambda match: _in_json(self.values.get(match.group(), match.group())), text)

    def restore_value(self, value: Any) -> Any:
        """`value` (JSON-like data) with the placeholders in its strings restored."""
        if isinstance(value, str):
            return self.restore(value)
        if isinstance(value, dict):
            return {key: self.restore_value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.restore_value(item) for item in value]
        return value


def _in_json(value: str) -> str:
    """`value` as the inside of a JSON string: quotes, backslashes and control characters escaped."""
    return json.dumps(value, ensure_ascii=False)[1:-1]


def with_message(response: ModelResponse, message: Message) -> ModelResponse:
    """`response` with `message` in place of its own (itself when that is the same)."""
    if message is response.message:
        return response
    return response.replace(message=message)


class RestoredEvents:
    """A streamed run's `emit` that shows its consumer the real values: in text, tool calls, results, responses.

    Text deltas arrive restored already (`RestoredStream`, holding back a
    split placeholder); whole ones (a model that does not stream, a cache
    hit) are restored here. `json_text`: the model answers in JSON (a typed
    run), so values restored into its text are escaped as JSON.
    """

    __slots__ = ("emit", "pseudonyms", "restore_text")

    def __init__(self, emit: Callable[[Any], None], pseudonyms: Pseudonyms, *, json_text: bool = False) -> None:
        self.emit = emit
        self.pseudonyms = pseudonyms
        self.restore_text = pseudonyms.restore_json if json_text else pseudonyms.restore

    def __call__(self, event: Any) -> None:
        restore = self.pseudonyms.restore
        if isinstance(event, TextDelta):
            event = TextDelta(self.restore_text(event.text))
        elif isinstance(event, ModelCallFinished):
            response = _restored(event.response, self.pseudonyms, self.restore_text)
            event = ModelCallFinished(response, event.usage, event.cached)
        elif isinstance(event, ToolCallStarted):
            event = ToolCallStarted(event.id, event.name, self.pseudonyms.restore_value(event.args))
        elif isinstance(event, ToolResultEvent):
            result = event.result
            content = restore(result.content) if isinstance(result.content, str) else result.content
            if isinstance(content, list):
                content = [restore(part) if isinstance(part, str) else part for part in content]
            restored = result.replace(content=content)
            event = ToolResultEvent(event.call_id, event.name, restored)
        self.emit(event)


def _restored(response: ModelResponse, pseudonyms: Pseudonyms, restore_text: Callable[[str], str]) -> ModelResponse:
    """`response` with the run's placeholders in its text (`restore_text`) and tool-call arguments replaced by the
    real values."""
    message = response.message
    calls = [
        ToolRequest(
            id=call.id,
            name=call.name,
            args=pseudonyms.restore_value(call.args),
            raw_args=None if call.raw_args is None else pseudonyms.restore(call.raw_args),
        )
        for call in message.tool_calls
    ]
    return with_message(response, replace(message, text=restore_text(message.text), tool_calls=calls))


def placeholders_in(message: Message) -> set[str]:
    """The placeholders `message` holds, in its text, text parts and tool-call arguments."""
    found = set(PLACEHOLDER.findall(message.text)) if "<" in message.text else set()
    for call in message.tool_calls:
        found.update(PLACEHOLDER.findall(repr(call.args)))
    return found


def restored_output(run: Run, output: Any, pseudonyms: Pseudonyms) -> Any:
    """The final answer with the real values: its text restored, a typed one validated again from its JSON (the
    values restored into it escaped as JSON)."""
    if isinstance(output, str):
        return pseudonyms.restore(output)
    text = run.messages[-1].text if run.messages else ""
    restored = pseudonyms.restore_json(text)
    return output if restored == text else output_schema(run.output_type).validate(restored)


class RestoredStream:
    """A stream edit (`ModelCall.edit_stream`): placeholders in `TextDelta`s restored to the real values.

    Holds back only a trailing `<...` that the next delta may complete into
    a placeholder (at most 65 characters); a `StreamReset` drops it.
    `json_text`: the deltas are JSON (a typed run), the values restored into
    them escaped as JSON.
    """

    __slots__ = ("held", "pseudonyms", "restore")

    def __init__(self, pseudonyms: Pseudonyms, *, json_text: bool = False) -> None:
        self.pseudonyms = pseudonyms
        self.restore = pseudonyms.restore_json if json_text else pseudonyms.restore
        self.held = ""

    def __call__(self, event: Any) -> list[Any]:
        if isinstance(event, TextDelta):
            text = self.held + event.text
            found = _OPEN_PLACEHOLDER.search(text, max(0, len(text) - 66))
            cut = len(text) if found is None else found.start()
            self.held = text[cut:]
            head = self.restore(text[:cut])
            return [TextDelta(head)] if head else []
        if isinstance(event, StreamReset):
            self.held = ""
            return [event]
        return [*self.end(), event]

    def end(self) -> list[Any]:
        """What is held, restored."""
        if not self.held:
            return []
        held, self.held = self.held, ""
        return [TextDelta(self.restore(held))]
