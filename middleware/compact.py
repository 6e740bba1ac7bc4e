"""`compact`: keep what each model call sends under a token budget."""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from typing import Any

from onion import Agent, Message, Model, ModelCall, ModelNext, ModelResponse, Run, Tool

from ._tokens import estimate_tokens

__all__ = ["CLEARED", "compact", "estimate_tokens"]

CLEARED = "[cleared to save context]"
"""The text that replaces a cleared tool result."""
SUMMARY_PROMPT = (
    "You compress conversations. Summarise the conversation you are given for the assistant who will "
    "continue it: the user's goals and requests, decisions made, facts and tool results still needed, "
    "and what remains to do. Be concise; write only the summary."
)
_json = json.JSONEncoder(default=str).encode


class _Memo:
    """What `compact` keeps per run in memory: stable stub messages, and the provider's last count."""

    __slots__ = ("sent", "stubs", "summary", "tokens")

    def __init__(self) -> None:
        self.stubs: dict[str, Message] = {}
        self.summary: Message | None = None
        self.sent: list[Message] = []
        self.tokens = 0


class compact:
    """Keep the history each model call sends under `max_tokens` (default 100,000).

    When a request would go over, `compact` brings it down to 3/4 of the
    budget (so it compacts rarely and the prefix stays stable for prompt
    caches): first it clears the oldest tool results (the call stays, its
    result becomes `CLEARED`); if that is not enough, it replaces the
    oldest turns with one user message holding a summary written by
    `summarize` (a `Model`, a model string, or an `Agent` with its own
    stack: the summary calls never go through this agent's stack; their
    usage is added to the run's), or, without `summarize`, a note that they
    were removed. The leading system messages and the latest `keep_last`
    turns (a user message, or an assistant message with its tool results)
    are never touched, and a cut never falls between a tool call and its
    result.

    `run.messages` keeps the whole history; what was cleared and summarised
    is kept in `run.state["compact"]` (JSON), so a paused run resumes with
    the same compacted view. A summary of turns that held outside content
    is itself marked untrusted (`Message.untrusted`), as are cleared stubs. Tokens: the provider's input count of the
    previous request plus an estimate of the messages added since, when
    the history is unchanged up to there; otherwise `estimate_tokens`,
    scaled up by how far the provider's last count was above it.
    """

    __slots__ = ("_memos", "_summarizer", "keep_last", "max_tokens")

    def __init__(
        self,
        max_tokens: int | None = None,
        *,
        keep_last: int = 3,
        summarize: Model | Agent[Any] | str | None = None,
    ) -> None:
        max_tokens = 100_000 if max_tokens is None else max_tokens
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise ValueError(f"compact: max_tokens must be a positive int, got {max_tokens!r}")
        if not isinstance(keep_last, int) or isinstance(keep_last, bool) or keep_last < 1:
            raise ValueError(f"compact: keep_last must be at least 1 (the latest turn always stays), got {keep_last!r}")
        self.max_tokens = max_tokens
        self.keep_last = keep_last
        self._summarizer: Agent[Any] | None = None
        if isinstance(summarize, Agent):
            self._summarizer = summarize
        elif summarize is not None:
            self._summarizer = Agent(summarize, instructions=SUMMARY_PROMPT, name="compact")
        self._memos: weakref.WeakKeyDictionary[Run, _Memo] = weakref.WeakKeyDictionary()

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        run = call.run
        memo = self._memos.get(run)
        if memo is None:
            memo = self._memos[run] = _Memo()
        state = run.state.setdefault("compact", {"cleared": [], "summary": None, "covers": 0})
        view = self._view(call.messages, state, memo)
        ratio = _ratio(memo, call.tools)
        if self._count(view, call.tools, memo, ratio) > self.max_tokens:
            await self._compact(call, state, memo, ratio)
            view = self._view(call.messages, state, memo)
        call.messages = view
        response = await call_next(call)
        memo.sent, memo.tokens = view, response.usage.input_tokens
        return response

    def _view(self, messages: list[Message], state: dict[str, Any], memo: _Memo) -> list[Message]:
        """`messages` as compacted so far: the summary in place of the turns it covers, cleared results stubbed."""
        start = _system_end(messages)
        covers = min(state["covers"], len(messages) - start)
        view = messages[:start]
        if covers:
            text, untrusted = state["summary"] or "", state.get("untrusted", False)
            if memo.summary is None or memo.summary.text != text or memo.summary.untrusted != untrusted:
                memo.summary = Message.user(text)
                memo.summary.untrusted = untrusted  # a summary of outside content is outside content
            view.append(memo.summary)
        cleared = set(state["cleared"])
        for message in messages[start + covers :]:
            if message.role == "tool" and message.tool_call_id in cleared:
                stub = memo.stubs.get(message.tool_call_id or "")
                if stub is None:
                    stub = memo.stubs[message.tool_call_id or ""] = Message.tool(
                        message.tool_call_id or "", CLEARED, message.is_error, untrusted=message.untrusted
                    )
                message = stub
            view.append(message)
        return view

    def _count(self, view: list[Message], tools: Sequence[Tool], memo: _Memo, ratio: float) -> float:
        """The provider's count of the last request plus an estimate of what was added, when it still applies.

        Otherwise the estimate, scaled by how the provider's last count compared with it.
        """
        sent = memo.sent
        if memo.tokens and len(view) >= len(sent) and all(a is b for a, b in zip(view, sent, strict=False)):
            return memo.tokens + estimate_tokens(view[len(sent) :]) * ratio
        return estimate_tokens(view, tools) * ratio

    async def _compact(self, call: ModelCall, state: dict[str, Any], memo: _Memo, ratio: float) -> None:
        """Clear old tool results, then summarise old turns, until the request fits 3/4 of the budget."""
        messages, tools = call.messages, call.tools
        target = self.max_tokens * 3 // 4 / ratio  # in estimated tokens
        start = _system_end(messages)
        turns = [i for i in range(start, len(messages)) if messages[i].role != "tool"]
        tail = turns[-self.keep_last] if len(turns) >= self.keep_last else start
        cleared = set(state["cleared"])
        for index in range(start + state["covers"], tail):
            message = messages[index]
            if message.role == "tool" and message.tool_call_id not in cleared and message.text != CLEARED:
                cleared.add(message.tool_call_id)
                state["cleared"].append(message.tool_call_id)
                if estimate_tokens(self._view(messages, state, memo), tools) <= target:
                    return
        if estimate_tokens(self._view(messages, state, memo), tools) <= target:
            return
        allowance = max(self.max_tokens // 10, 16)
        cut = next(
            (
                i
                for i in turns
                if start + state["covers"] < i <= tail
                and estimate_tokens([*messages[:start], *messages[i:]], tools) + allowance <= target
            ),
            tail,
        )
        if cut <= start + state["covers"]:
            return
        older = messages[start + state["covers"] : cut]
        if any(message.untrusted for message in older):
            state["untrusted"] = True
        state["summary"] = (await self._summary(call.run, state["summary"], older))[: allowance * 4]
        state["covers"] = cut - start

    async def _summary(self, run: Run, previous: str | None, older: list[Message]) -> str:
        """A summary of `previous` (the summary so far) and `older`, or a note that they were removed."""
        if self._summarizer is None:
            return f"[{len(older)} earlier messages were removed to save context.]" + (
                f"\n{previous}" if previous else ""
            )
        summary = previous or ""
        chunk = self.max_tokens * 2
        transcript = "\n".join(_line(message) for message in older)
        for offset in range(0, len(transcript), chunk):
            part = transcript[offset : offset + chunk]
            given = f"Summary so far:\n{summary}\n\nConversation:\n{part}" if summary else f"Conversation:\n{part}"
            result = await self._summarizer.run(given)
            run.usage.add(result.usage)
            summary = str(result.output)
        return f"[Summary of the earlier conversation]\n{summary}"

    def __repr__(self) -> str:
        return f"compact({self.max_tokens})"


def _ratio(memo: _Memo, tools: Sequence[Tool]) -> float:
    """Provider tokens per estimated token on the last request (1 until the provider reported a count)."""
    if not memo.tokens or not memo.sent:
        return 1.0
    return max(memo.tokens / max(estimate_tokens(memo.sent, tools), 1), 1.0)


def _system_end(messages: Sequence[Message]) -> int:
    index = 0
    while index < len(messages) and messages[index].role == "system":
        index += 1
    return index


def _line(message: Message) -> str:
    calls = "".join(f" [calls {request.name}({_json(request.args)})]" for request in message.tool_calls)
    return f"{message.role}: {message.text}{calls}"
