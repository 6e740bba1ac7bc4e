"""`redact`: hide secrets and personal data from the model."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

from onion import (
    Message,
    ModelCall,
    ModelNext,
    ModelResponse,
    Part,
    Run,
    RunNext,
    RunResult,
    StreamReset,
    TextDelta,
    ToolCall,
    ToolNext,
    ToolResult,
)
from onion.scrub import rewrite_message, rewrite_strings

from ._message_memo import MessageMemo
from .patterns import BUILTIN, luhn_valid, open_match_start, scrub

__all__ = ["RedactedStream", "luhn_valid", "redact"]

Rule = Callable[[str], str]


class redact:
    """Replace what matches `patterns` in everything sent to the model.

    Each pattern is a regex (a string or a compiled pattern; every match
    becomes `replacement`) or a callable `str -> str`. Unless
    `builtin=False`, the one built-in set `log` uses too
    (`middleware.patterns.BUILTIN`: API keys in the well-known vendor
    formats, bearer credentials, `password: ...` style assignments, PEM
    private keys, e-mail addresses and card numbers passing the Luhn check,
    so ordinary numbers survive) is applied first. Tool-call arguments under
    a secret-looking key (`{"api_key": ...}`) are replaced whole.

    Applied to: the run's `input` as the layers inside see it (restored when
    the run ends), the texts and tool-call arguments of every message a model
    call sends (new `Message` objects in the call's own copy; `run.messages`
    is left as it is), tool results as they come back (`tool_results=True`,
    so the history holds them redacted; `ToolResult.value` keeps the raw
    value for local code), and, with `responses=True`, the model's answer
    (its text and tool-call arguments, so tools receive the redacted values).
    Each message is redacted once per run and remembered (in the layer, never
    in `run.state`, so nothing of it reaches `RunResult.state`); one edited in
    place gets a fresh pass when its `text` or `tool_calls` is reassigned.
    """

    __slots__ = ("_memos", "builtin", "replacement", "responses", "rules", "tool_results")

    covers_sub_agents = True
    """A sub-agent called from this layer's agent (`agent.as_tool()`) runs through this layer too, without `inherit`."""

    def __init__(
        self,
        *patterns: str | re.Pattern[str] | Rule,
        builtin: bool = True,
        replacement: str = "[REDACTED]",
        responses: bool = False,
        tool_results: bool = True,
    ) -> None:
        self.replacement = replacement
        self.responses = responses
        self.tool_results = tool_results
        self.rules: list[Rule] = []
        self.builtin = builtin
        if builtin:
            self.rules.append(partial(scrub, patterns=BUILTIN, replacement=replacement))
        for pattern in patterns:
            if isinstance(pattern, str | re.Pattern):
                self.rules.append(partial(re.compile(pattern).sub, replacement))
            elif callable(pattern):
                self.rules.append(pattern)
            else:
                raise TypeError(f"redact: {pattern!r} is not a regex (str or compiled) or a callable str -> str")
        if not self.rules:
            raise TypeError("redact(builtin=False) needs at least one pattern or callable to apply")
        self._memos: dict[Run, MessageMemo] = {}
        """Per running run, what each message sent so far was redacted to; kept out of `run.state`."""

    def text(self, text: str) -> str:
        """`text` with every rule applied."""
        for rule in self.rules:
            text = rule(text)
        return text

    def _content(self, content: str | list[Part]) -> str | list[Part]:
        """Text, or each text part of a list, redacted; images and documents pass untouched."""
        if isinstance(content, str):
            return self.text(content)
        return [self.text(part) if isinstance(part, str) else part for part in content]

    def message(self, message: Message) -> Message:
        """`message` redacted: itself when nothing matched, otherwise a new `Message` (`onion.scrub.rewrite_message`).

        A message with parts has each text part redacted; its images and documents are kept as they are.
        """
        secret = self.replacement if self.builtin else None
        return rewrite_message(message, self.text, lambda args: rewrite_strings(args, self.text, secret))

    async def wrap_run(self, run: Run, call_next: RunNext) -> RunResult:
        """Layers inside see the run's `input` redacted (a `log` there records it so); restored after."""
        original = run.input
        if isinstance(original, str):
            run.input = self.text(original)
        elif isinstance(original, Message):
            run.input = self.message(original)
        elif isinstance(original, list | tuple):
            run.input = [self.message(m) if isinstance(m, Message) else m for m in original]
        owns_memo = run not in self._memos  # the same layer twice in a stack shares one memo
        if owns_memo:
            self._memos[run] = MessageMemo()
        try:
            result = await call_next(run)
        finally:
            run.input = original
            if owns_memo:
                del self._memos[run]
        return result

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        """The call's messages redacted; with `responses=True`, its answer and streamed `TextDelta`s too."""
        if self.responses and call.run.emit is not None:
            with call.edit_stream(RedactedStream(self.text)):
                return await self._model(call, call_next)
        return await self._model(call, call_next)

    async def _model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        memo = self._memos.get(call.run)
        (MessageMemo() if memo is None else memo).rewrite(call.messages, self.message)
        response = await call_next(call)
        if self.responses:
            redacted = self.message(response.message)
            if redacted is not response.message:
                response = response.replace(message=redacted)
        return response

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        result = await call_next(call)
        if self.tool_results and result.content:
            content = self._content(result.content)
            if content != result.content:
                return result.replace(content=content)
        return result


class RedactedStream:
    """A stream edit (`ModelCall.edit_stream`): the text of every `TextDelta` redacted.

    Text is held back only from where a built-in pattern may still be
    matching at its end (`patterns.open_match_start`: the last word, a card
    number's digits, a secret's name and value, an unfinished PEM block), or
    further back where redacting the two parts apart would differ from
    redacting them together (with your own patterns too), and goes out,
    redacted, with the delta that completes it, before the next event of
    any other kind, or when the stream ends (`end`). A `StreamReset` drops
    what is held. At most `MAX_HELD` characters are held: past that, text
    goes out up to the last line break or space. Your own patterns cannot
    say what they still need, so one that spans a space may be missed when a
    delta ends inside it.
    """

    MAX_HELD = 16_384

    __slots__ = ("held", "redact")

    def __init__(self, redact: Rule) -> None:
        self.redact = redact
        self.held = ""

    def __call__(self, event: Any) -> list[Any]:
        if isinstance(event, TextDelta):
            text = self.held + event.text
            cut, head = self._cut(text)
            self.held = text[cut:]
            return [TextDelta(head)] if head else []
        if isinstance(event, StreamReset):
            self.held = ""
            return [event]
        return [*self.end(), event]

    def _cut(self, text: str) -> tuple[int, str]:
        """Where to split `text`, and its head redacted: redacting head and tail apart must equal the whole."""
        cut = open_match_start(text)
        if len(text) - cut > self.MAX_HELD:
            cut = max(text.rfind("\n"), text.rfind(" ")) + 1 or len(text) - self.MAX_HELD
            return cut, self.redact(text[:cut])
        whole = None
        while cut:
            head = self.redact(text[:cut])
            whole = whole if whole is not None else self.redact(text)
            if whole.startswith(head) and whole[len(head) :] == self.redact(text[cut:]):
                return cut, head
            cut = _word_start(text, cut - 1)
        return 0, ""

    def end(self) -> list[Any]:
        """What is held, redacted."""
        if not self.held:
            return []
        held, self.held = self.held, ""
        return [TextDelta(self.redact(held))]


def _word_start(text: str, end: int) -> int:
    """The start of the word that holds `text[end - 1]` (after a space, tab or line break)."""
    return max(text.rfind(" ", 0, end), text.rfind("\n", 0, end), text.rfind("\t", 0, end)) + 1
