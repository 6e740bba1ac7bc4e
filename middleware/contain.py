"""`contain`: once untrusted content is in a run, a sensitive call that it may drive waits for a person
(or is blocked); the calls the user's own content accounts for, and read-only tools, keep working."""

from __future__ import annotations

import weakref
from typing import Literal

from onion import Message, Run, ToolCall, ToolNext, ToolResult, UntrustedSource, untrusted_sources
from onion.tracing import note

from ._decisions import decided
from ._provenance import Finding, Texts
from ._tool_matcher import Matcher, ToolMatcher

__all__ = ["contain"]

Action = Literal["pause", "block"]
ACTIONS = ("pause", "block")
KEY = "contain"
"""This layer's key in `run.private`: `{"vouched": [...]}`, the pieces a person approved in a contained call."""


class contain:
    """Contain what untrusted content may drive: `contain(sensitive=None, *, action="pause")`.

    Once the run's history holds untrusted content (`Message.untrusted`: results of `@tool(untrusted=True)`
    tools and of MCP tools), a call to a sensitive tool is contained when one of its string arguments carries
    something found only in untrusted content: an address, an id, a date, or a run of five words (see
    `docs/security.md`, "Prompt injection").
    `action="pause"` pauses the call for a person (its reason names the untrusted source: tool, call id, first
    words); `"block"` answers it with a reason the model reads. A sensitive call that carries nothing from
    untrusted content runs (the user's own requests go on), and so does a call a person approved.

    `sensitive` is a matcher as `approve` takes (a name, a glob, a list, a regex, `fn(call) -> bool`);
    `None`: every tool not marked `@tool(read_only=True)`. A call that is not sensitive always runs; when its
    arguments carry untrusted pieces, its result is marked untrusted too (what it answers may repeat them).
    Costs nothing per model call, and per tool call a look through the history for an untrusted message. Its
    state is the run's (`run.private["contain"]`); it keeps in memory only texts made from the history, by run.
    """

    __slots__ = ("_memo", "action", "name", "selects")

    def __init__(self, sensitive: Matcher = None, *, action: Action = "pause") -> None:
        if action not in ACTIONS:
            raise ValueError(f"contain: action must be 'pause' or 'block', got {action!r}")
        self.selects = None if sensitive is None else ToolMatcher(sensitive, "contain")
        self.action = action
        self.name = "contain" if sensitive is None else f"contain({self.selects!r})"
        self._memo: weakref.WeakKeyDictionary[Run, tuple[tuple[int, int, int], Texts]] = weakref.WeakKeyDictionary()

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        tool = call.tool
        messages = call.run.messages
        if tool is None or not any(message.untrusted for message in messages):
            return await call_next(call)
        selects = self.selects
        sensitive = not tool.read_only if selects is None else selects(call)
        finding = self._texts(call.run, messages).finding(call.args)
        if not sensitive:
            result = await call_next(call)
            if finding is not None:  # its answer may repeat what it was given
                result.untrusted = True
            return result
        if finding is None:
            return await self._let_through(
                call, call_next, "allowed after untrusted content: trusted content accounts for it"
            )
        if call.approved:
            vouched = call.run.private.setdefault(KEY, {"vouched": []})["vouched"]
            if finding.piece not in vouched:
                vouched.append(finding.piece)
            return await self._let_through(
                call, call_next, f"approved by a person, though it carries {finding.piece!r}"
            )
        reason = contained_reason(call, finding, untrusted_sources(messages))
        if self.action == "pause":
            text = f"contained (paused): {reason}"
            note(text)
            decided(call, text)
            return call.pause(reason)
        text = f"contained (blocked): {reason}"
        note(text)
        decided(call, text)
        blocked = call.block(f"{reason}. Ask the user to confirm it in their own words, or do without it")
        blocked.untrusted = True  # it quotes untrusted content: never trusted text a later call could lean on
        return blocked

    def _texts(self, run: Run, messages: list[Message]) -> Texts:
        """The history's texts, made again only when the history or the vouched pieces changed (a memo of what
        `run.messages` and `run.private` hold, so the calls of one batch share it)."""
        private = run.private.get(KEY)
        vouched = private["vouched"] if private else ()
        key = (len(messages), id(messages[-1]), len(vouched))
        kept = self._memo.get(run)
        if kept is not None and kept[0] == key:
            return kept[1]
        texts = Texts(messages, vouched)
        self._memo[run] = (key, texts)
        return texts

    @staticmethod
    async def _let_through(call: ToolCall, call_next: ToolNext, text: str) -> ToolResult:
        note(text)
        decided(call, text)
        result = await call_next(call)
        return result

    def __repr__(self) -> str:
        return f"<{self.name} action={self.action!r}>"


def contained_reason(call: ToolCall, finding: Finding, sources: list[UntrustedSource]) -> str:
    """Why `call` is contained: the untrusted source it follows (tool, call id, first words) and what it carries."""
    source = next((s for s in sources if s.index == finding.source), sources[0] if sources else None)
    more = len(sources) - 1
    also = f" (and {more} more untrusted result{'s' if more != 1 else ''})" if more > 0 else ""
    return (
        f"{call.name} follows untrusted content from {source}{also}; "
        f"its argument {finding.argument} carries {_short(finding.piece)}, found only there"
    )


def _short(piece: str, limit: int = 60) -> str:
    text = repr(piece)
    return text if len(text) <= limit else text[: limit - 4] + "...'"
