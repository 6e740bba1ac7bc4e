"""`select_tools`: offer each model call only the `k` tools most relevant to the conversation."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from onion import Agent, Message, Model, ModelCall, ModelNext, ModelResponse, Tool

__all__ = ["select_tools"]

Score = Callable[[ModelCall, Tool], "float | Awaitable[float]"]

_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
PROMPT = (
    "You choose which tools an assistant may use next. Reply with the names of the {k} tools most "
    "relevant to the conversation, one name per line, most relevant first, and nothing else."
)


class select_tools:
    """Offer each model call only the `k` tools most relevant to the conversation.

    `by` ranks the tools: `None` scores each tool's name and description
    against the latest user message and the model's text since (word
    overlap, rarer words weigh more); a function `fn(call, tool) -> float`
    (sync or async; higher is more relevant); or a model (a `Model`, a model
    string, or an `Agent` with its own stack) asked to name the `k` tools.
    The selecting model's calls go through its own stack, never this
    agent's; their usage is added to the run's.

    The tools whose results the model is about to read (those its latest
    message called), and any called without a result yet, are always
    offered, on top of the `k`. Ties are broken by relevance (the word
    score, then shared parts of words: `raining` and `rainfall`), the
    agent's tool order only last. A call to a tool not offered this time
    still runs if the agent has it. Calls offering `k` tools or fewer pass untouched. Not
    usable bare: it needs `k`.
    """

    __slots__ = ("_selector", "_terms", "by", "k")

    def __init__(self, k: int | None = None, *, by: Score | Model | Agent[Any] | str | None = None) -> None:
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise TypeError(
                f"select_tools needs k, the number of tools to offer (a positive int), e.g. select_tools(5); got {k!r}"
            )
        self.k = k
        self.by = by
        self._selector: Agent[Any] | None = None
        if isinstance(by, Agent):
            self._selector = by
        elif isinstance(by, str) or (by is not None and hasattr(by, "request")):
            model = cast("Model | str", by)  # a Score has no `request`
            self._selector = Agent(model, instructions=PROMPT.format(k=k), name="select_tools")
        elif by is not None and not callable(by):
            raise TypeError(f"select_tools: by must be a scoring function, a model or an Agent, got {by!r}")
        self._terms: dict[tuple[str, str], frozenset[str]] = {}

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        tools = call.tools
        if len(tools) > self.k:
            kept = _in_use(call.messages)
            candidates = [tool for tool in tools if tool.name not in kept]
            chosen = {tool.name for tool in await self.rank(call, candidates, self.k)}
            call.tools = [tool for tool in tools if tool.name in kept or tool.name in chosen]
        response = await call_next(call)
        return response

    async def rank(self, call: ModelCall, tools: list[Tool], k: int) -> list[Tool]:
        """The `k` tools of `tools` most relevant to `call`, best first (all of them when `k` or fewer)."""
        if len(tools) <= k or k == 0:
            return tools[:k]
        if self._selector is not None:
            return await self._ask(call, tools, k)
        keys: list[tuple[float, ...]] = list(self._relevance(call, tools))
        if self.by is not None:
            score: Any = self.by
            scores = [score(call, tool) for tool in tools]
            scores = [await s if inspect.isawaitable(s) else s for s in scores]
            keys = [(float(scores[i]), *keys[i]) for i in range(len(tools))]
        order = sorted(range(len(tools)), key=lambda i: keys[i], reverse=True)
        return [tools[i] for i in order[:k]]

    async def _ask(self, call: ModelCall, tools: list[Tool], k: int) -> list[Tool]:
        assert self._selector is not None
        listing = "\n".join(
            f"- {tool.name}: {(tool.description or '').splitlines()[0] if tool.description else ''}" for tool in tools
        )
        question = (
            f"Conversation:\n{_latest_text(call.messages)}\n\nTools:\n{listing}\n\nName the {k} most relevant tools."
        )
        result = await self._selector.run(question)
        call.run.usage.add(result.usage)
        by_name = {tool.name: tool for tool in tools}
        picked: list[Tool] = []
        for name in re.findall(r"[\w.-]+", str(result.output)):
            tool = by_name.pop(name, None)
            if tool is not None and len(picked) < k:
                picked.append(tool)
        if len(picked) < k:  # the model named too few: the best of the rest by words
            rest = list(by_name.values())
            keys = self._relevance(call, rest)
            order = sorted(range(len(rest)), key=lambda i: keys[i], reverse=True)
            picked += [rest[i] for i in order[: k - len(picked)]]
        return picked

    def _relevance(self, call: ModelCall, tools: Sequence[Tool]) -> list[tuple[float, float, int]]:
        """Per tool, higher first: word overlap between the latest turn and its name and description (rarer words
        weighing more), then the share of its words' three-letter parts found in the turn, then the agent's order."""
        query = _words(_latest_text(call.messages))
        parts = _parts(query)
        described = [self._described(tool) for tool in tools]
        frequency: dict[str, int] = {}
        for terms in described:
            for term in terms & query:
                frequency[term] = frequency.get(term, 0) + 1
        count = len(tools)
        keys = []
        for index, terms in enumerate(described):
            words = sum(math.log(1 + count / frequency[term]) for term in terms & query)
            own = _parts(terms)
            keys.append((words, len(own & parts) / (len(own) or 1), -index))
        return keys

    def _described(self, tool: Tool) -> frozenset[str]:
        key = (tool.name, tool.description or "")
        terms = self._terms.get(key)
        if terms is None:
            terms = _words(f"{tool.name} {tool.description or ''}")
            if len(self._terms) < 4096:
                self._terms[key] = terms
        return terms

    def __repr__(self) -> str:
        return f"select_tools({self.k})"


def _words(text: str) -> frozenset[str]:
    return frozenset(word.lower() for word in _WORDS.findall(text) if len(word) > 2 or word.isdigit())


def _parts(words: frozenset[str]) -> set[str]:
    """The three-letter parts of `words` (`rain` -> `rai`, `ain`), so `raining` and `rainfall` share some."""
    return {word[i : i + 3] for word in words for i in range(len(word) - 2)}


def _latest_text(messages: Sequence[Message]) -> str:
    """The latest user message and the model's text after it."""
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
    return "\n".join(m.text for m in messages[start:] if m.role in ("user", "assistant") and m.text)


def _in_use(messages: Sequence[Message]) -> set[str]:
    """Names of the tools whose results the model reads next (the latest assistant message's), or with none yet."""
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    latest = next((m for m in reversed(messages) if m.role == "assistant"), None)
    names = {request.name for request in latest.tool_calls} if latest is not None else set()
    for message in messages:
        names.update(request.name for request in message.tool_calls if request.id not in answered)
    return names
