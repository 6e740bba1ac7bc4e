"""`pseudonymize`: personal data reaches the model as stable placeholders, and comes back real."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from onion import (
    Handler,
    Message,
    ModelCall,
    ModelResponse,
    Run,
    RunResult,
    StreamReset,
    TextDelta,
    ToolRequest,
)

from .patterns import CARD_NUMBER, EMAIL, IBAN, PHONE, iban_valid, luhn_valid, phone_valid

__all__ = ["Pseudonyms", "RestoredStream", "pseudonymize"]

Rule = tuple[str, re.Pattern[str], Callable[[str], bool] | None]

BUILTIN: tuple[Rule, ...] = (
    ("IBAN", IBAN, iban_valid),
    ("EMAIL", EMAIL, None),
    ("CARD", CARD_NUMBER, luhn_valid),
    ("PHONE", PHONE, phone_valid),
)
"""The built-in kinds, in the order they are applied: IBANs, e-mail addresses, card numbers, phone numbers."""

PLACEHOLDER = re.compile(r"<[A-Z][A-Z0-9_]*_[0-9]+>")
_OPEN_PLACEHOLDER = re.compile(r"<[A-Z0-9_]{0,64}\Z")
"""The start of a placeholder the next delta may complete, at the end of the text."""

_LABEL = re.compile(r"[A-Z][A-Z0-9_]*\Z")
_KEY = "pseudonymize"
"""Where a paused run keeps its placeholders (`run.private`)."""


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

    def restore_value(self, value: Any) -> Any:
        """`value` (JSON-like data) with the placeholders in its strings restored."""
        if isinstance(value, str):
            return self.restore(value)
        if isinstance(value, dict):
            return {key: self.restore_value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.restore_value(item) for item in value]
        return value


class pseudonymize:
    """Replace personal data with stable placeholders before the model, and put the real values back after.

    Each value found (built in: IBANs passing their checksum, e-mail
    addresses, card numbers passing the Luhn check, phone numbers; then each
    of `patterns`, a regex whose matches become `<PII_n>`, and each of
    `labelled`, `LABEL=regex`, whose matches become `<LABEL_n>`) gets one
    placeholder for the whole run (`<EMAIL_1>` every time the same address
    comes up), so the model can still tell values apart and refer to them.
    Your own patterns are applied first.

    Model calls send copies of the messages with the values replaced;
    `run.messages` keeps the real ones. The model's answer comes back with
    its placeholders restored (text and tool-call arguments), so tools get
    the real values, the history and `result.output` hold them, and a
    streamed run's `TextDelta`s show them (a placeholder split across deltas
    is held until whole). Placeholders the run never made are left as they
    are. The mapping lives in the layer while the run goes, and in the
    `RunState` of a paused run (`run.private`), never in `run.state`; a
    `log`, `cache` or trace inside this layer sees only placeholders. Each
    message is scanned once per run (remembered by the layer); one edited in
    place gets a fresh pass when its `text` or `tool_calls` is reassigned.
    """

    __slots__ = ("_memos", "_runs", "rules")

    def __init__(
        self, *patterns: str | re.Pattern[str], builtin: bool = True, **labelled: str | re.Pattern[str]
    ) -> None:
        rules: list[Rule] = []
        for label, pattern in [*(("PII", p) for p in patterns), *labelled.items()]:
            if not isinstance(pattern, str | re.Pattern):
                raise TypeError(f"pseudonymize: {pattern!r} is not a regex (a str or a compiled pattern)")
            if not _LABEL.match(label):
                raise ValueError(
                    f"pseudonymize: label {label!r} must be upper case letters, digits and _ (EMPLOYEE_ID=...)"
                )
            rules.append((label, re.compile(pattern), None))
        if builtin:
            rules.extend(BUILTIN)
        if not rules:
            raise TypeError("pseudonymize(builtin=False) needs at least one pattern")
        self.rules: tuple[Rule, ...] = tuple(rules)
        self._runs: dict[Run, Pseudonyms] = {}
        """The placeholders of each running run; kept out of `run.state`."""
        self._memos: dict[Run, dict[int, tuple[Message, str, list[ToolRequest], Message]]] = {}
        """Per running run, what each message sent so far became (the mapping only grows, so it stays right)."""

    def text(self, text: str, pseudonyms: Pseudonyms) -> str:
        """`text` with every value found replaced by its placeholder."""
        for label, pattern, valid in self.rules:

            def swap(match: re.Match[str], label: str = label, valid: Callable[[str], bool] | None = valid) -> str:
                value = match.group()
                return value if valid is not None and not valid(value) else pseudonyms.placeholder(label, value)

            text = pattern.sub(swap, text)
        return text

    def _value(self, value: Any, pseudonyms: Pseudonyms) -> Any:
        if isinstance(value, str):
            return self.text(value, pseudonyms)
        if isinstance(value, dict):
            return {key: self._value(item, pseudonyms) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self._value(item, pseudonyms) for item in value]
        return value

    def message(self, message: Message, pseudonyms: Pseudonyms) -> Message:
        """`message` with its values replaced: itself when nothing matched, otherwise a new `Message`."""
        text = self.text(message.text, pseudonyms) if message.text else message.text
        calls = [
            ToolRequest(
                id=call.id,
                name=call.name,
                args=self._value(call.args, pseudonyms),
                raw_args=None if call.raw_args is None else self.text(call.raw_args, pseudonyms),
            )
            for call in message.tool_calls
        ]
        content = message.content
        if content is not None:  # text parts replaced, images and documents kept
            content = [self.text(part, pseudonyms) if isinstance(part, str) else part for part in content]
            if content != message.content:
                text = "\n".join(part for part in content if isinstance(part, str))
        if (
            content == message.content
            and text == message.text
            and all(
                (new.args, new.raw_args) == (old.args, old.raw_args)
                for new, old in zip(calls, message.tool_calls, strict=True)
            )
        ):
            return message
        return replace(message, text=text, tool_calls=calls, content=content)

    async def wrap_run(self, run: Run, call_next: Handler) -> RunResult:
        """Keeps the run's placeholders for its model calls (from its `RunState` when it resumes)."""
        if run in self._runs:  # the same layer twice in a stack
            result: RunResult = await call_next(run)
            return result
        self._runs[run] = Pseudonyms(run.private.pop(_KEY, None))
        self._memos[run] = {}
        try:
            result = await call_next(run)
        finally:
            pseudonyms = self._runs.pop(run)
            del self._memos[run]
        if result.paused and pseudonyms.values:
            run.private[_KEY] = pseudonyms.values
        return result

    async def wrap_model(self, call: ModelCall, call_next: Handler) -> ModelResponse:
        """Sends the messages with placeholders; restores the real values in the answer and its streamed text."""
        pseudonyms = self._runs.get(call.run)
        if pseudonyms is None:
            raise RuntimeError("pseudonymize is a run and model layer: add it with agent.use(...), not to one chain")
        memo = self._memos[call.run]
        messages = call.messages
        for index, message in enumerate(messages):
            seen = memo.get(id(message))
            if (
                seen is None
                or seen[0] is not message
                or seen[1] is not message.text
                or seen[2] is not message.tool_calls
            ):
                seen = memo[id(message)] = (
                    message,
                    message.text,
                    message.tool_calls,
                    self.message(message, pseudonyms),
                )
            messages[index] = seen[3]
        if call.run.emit is not None:
            with call.edit_stream(RestoredStream(pseudonyms)):
                response: ModelResponse = await call_next(call)
        else:
            response = await call_next(call)
        return _restored(response, pseudonyms)


def _restored(response: ModelResponse, pseudonyms: Pseudonyms) -> ModelResponse:
    """`response` with the run's placeholders in its text and tool-call arguments replaced by the real values."""
    message = response.message
    text = pseudonyms.restore(message.text)
    calls = [
        ToolRequest(
            id=call.id,
            name=call.name,
            args=pseudonyms.restore_value(call.args),
            raw_args=None if call.raw_args is None else pseudonyms.restore(call.raw_args),
        )
        for call in message.tool_calls
    ]
    if text == message.text and all(
        (new.args, new.raw_args) == (old.args, old.raw_args) for new, old in zip(calls, message.tool_calls, strict=True)
    ):
        return response
    return ModelResponse(
        replace(message, text=text, tool_calls=calls),
        response.usage,
        response.stop_reason,
        model=response.model,
        cached=response.cached,
        raw=response.raw,
    )


class RestoredStream:
    """A stream edit (`ModelCall.edit_stream`): placeholders in `TextDelta`s restored to the real values.

    Holds back only a trailing `<...` that the next delta may complete into
    a placeholder (at most 65 characters); a `StreamReset` drops it.
    """

    __slots__ = ("held", "pseudonyms")

    def __init__(self, pseudonyms: Pseudonyms) -> None:
        self.pseudonyms = pseudonyms
        self.held = ""

    def __call__(self, event: Any) -> list[Any]:
        if isinstance(event, TextDelta):
            text = self.held + event.text
            found = _OPEN_PLACEHOLDER.search(text, max(0, len(text) - 66))
            cut = len(text) if found is None else found.start()
            self.held = text[cut:]
            head = self.pseudonyms.restore(text[:cut])
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
        return [TextDelta(self.pseudonyms.restore(held))]
