"""`allow_tools` / `deny_tools`: which tools the model is offered and may call."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import ClassVar

from onion import ModelCall, ModelNext, ModelResponse, ToolCall, ToolNext, ToolResult

__all__ = ["allow_tools", "deny_tools"]

_GLOB_CHARACTERS = frozenset("*?[")
_MEMO_SIZE = 1024


class _ToolFilter:
    """Match tool names against exact names, glob patterns and compiled regexes.

    A string containing `*`, `?` or `[` is a glob (`fnmatch`, case-sensitive);
    any other string is an exact name; a compiled regex must match the whole
    name (`fullmatch`). Decisions are memoised per tool name.
    """

    __slots__ = ("_memo", "globs", "names", "reason", "regexes")
    matching_permits: ClassVar[bool]
    refusal_text: ClassVar[str]

    def __init__(self, *names_or_patterns: str | re.Pattern[str], reason: str | None = None) -> None:
        kind = type(self).__name__
        if not names_or_patterns:
            raise TypeError(
                f"{kind} needs at least one tool name, glob pattern or compiled regex, "
                f"e.g. {kind}('search', 'read_*', re.compile(r'db_\\w+'))"
            )
        self.names: frozenset[str] = frozenset()
        self.globs: tuple[str, ...] = ()
        self.regexes: tuple[re.Pattern[str], ...] = ()
        for item in names_or_patterns:
            if isinstance(item, re.Pattern):
                self.regexes += (item,)
            elif not isinstance(item, str):
                raise TypeError(f"{kind}: {item!r} is not a tool name, glob pattern or compiled regex")
            elif _GLOB_CHARACTERS.intersection(item):
                self.globs += (item,)
            else:
                self.names |= {item}
        self.reason = reason
        self._memo: dict[str, bool] = {}

    def permits(self, name: str) -> bool:
        """True when a tool called `name` may be offered and called."""
        permitted = self._memo.get(name)
        if permitted is None:
            matched = (
                name in self.names
                or any(fnmatchcase(name, glob) for glob in self.globs)
                or any(regex.fullmatch(name) for regex in self.regexes)
            )
            permitted = matched == self.matching_permits
            if len(self._memo) < _MEMO_SIZE:
                self._memo[name] = permitted
        return permitted

    def refusal(self, name: str) -> str:
        return self.refusal_text.format(name=name)

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        tools = call.tools
        permits = self.permits
        if not all(permits(tool.name) for tool in tools):
            call.tools = [tool for tool in tools if permits(tool.name)]
        response = await call_next(call)
        return response

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        if not self.permits(call.name):
            return call.block(self.reason or self.refusal(call.name))
        result = await call_next(call)
        return result

    def __repr__(self) -> str:
        patterns = [*map(repr, sorted(self.names)), *map(repr, self.globs), *(repr(r) for r in self.regexes)]
        return f"{type(self).__name__}({', '.join(patterns)})"


class allow_tools(_ToolFilter):
    """Only the tools matching one of `names_or_patterns` are offered to the model and may run.

    Any other tool is removed from `ModelCall.tools`, and a call to it (the
    model may still name it) is answered with a blocked result giving
    `reason` (default: it is not allowed). Not usable bare.
    """

    __slots__ = ()
    matching_permits = True
    refusal_text = "{name} is not among the tools allowed here"


class deny_tools(_ToolFilter):
    """The tools matching one of `names_or_patterns` are hidden from the model and never run.

    They are removed from `ModelCall.tools`, and a call to one is answered
    with a blocked result giving `reason` (default: it is denied). Not
    usable bare.
    """

    __slots__ = ()
    matching_permits = False
    refusal_text = "{name} is denied by policy"
