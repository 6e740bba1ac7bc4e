"""Which tool calls a layer applies to, compiled once: the matcher `approve` and `authorize`'s rules take."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from fnmatch import translate

from onion import ToolCall

Matcher = str | re.Pattern[str] | Iterable[str | re.Pattern[str]] | Callable[[ToolCall], bool] | None
"""A tool name, a glob (`"read_*"`), a compiled regex (matching the whole name), a list of those,
`fn(call) -> bool`, or `None` (every call)."""

_GLOB_CHARACTERS = frozenset("*?[")
_MEMO_SIZE = 1024


class ToolMatcher:
    """`matcher` compiled: `matcher(call)` says whether it selects `call`.

    A string holding `*`, `?` or `[` is a glob (case-sensitive `fnmatch`),
    any other string an exact name; a compiled regex must match the whole
    name. Those depend on the name alone (`named(name)` answers for a name,
    memoised); a function (`function`, else None) gets the whole call.
    `owner` names the layer or rule in the `TypeError` a matcher it cannot
    use raises.
    """

    __slots__ = ("_memo", "_names", "_patterns", "described", "function")

    def __init__(self, matcher: Matcher, owner: str) -> None:
        self.function: Callable[[ToolCall], bool] | None = None
        """The matcher when it is a function of the call; None when it reads only the call's name."""
        self._names: frozenset[str] = frozenset()
        self._patterns: tuple[re.Pattern[str], ...] = ()
        self._memo: dict[str, bool] = {}
        if matcher is None:
            self._patterns = (re.compile(".*", re.S),)
            self.described = "None"
            return
        if isinstance(matcher, str | re.Pattern):
            self._add(matcher, owner)
            self.described = describe(matcher)
            return
        if callable(matcher):
            if inspect.iscoroutinefunction(matcher):
                raise TypeError(
                    f"{owner}: {describe(matcher)} is async; a matcher is a plain function fn(call) -> bool"
                )
            self.function = matcher
            self.described = describe(matcher)
            return
        if not isinstance(matcher, Iterable):
            raise TypeError(
                f"{owner}: {matcher!r} is not a tool name, a list of names, a compiled regex or a function "
                "fn(call) -> bool (a name may be a glob: 'read_*')"
            )
        items = list(matcher)
        for item in items:
            if not isinstance(item, str | re.Pattern):
                raise TypeError(
                    f"{owner}: {matcher!r} must hold tool names (str), globs or compiled regexes, not {item!r}"
                )
            self._add(item, owner)
        self.described = f"[{', '.join(describe(item) for item in items)}]"

    def _add(self, item: str | re.Pattern[str], owner: str) -> None:
        if isinstance(item, re.Pattern):
            self._patterns += (item,)
        elif _GLOB_CHARACTERS.intersection(item):
            self._patterns += (re.compile(translate(item)),)
        elif not item:
            raise TypeError(f"{owner}: an empty tool name matches no tool")
        else:
            self._names |= {item}

    def named(self, name: str) -> bool:
        """Whether a call of the tool `name` is selected (a function matcher: always True, it decides per call)."""
        if self.function is not None:
            return True
        selected = self._memo.get(name)
        if selected is None:
            selected = name in self._names or any(pattern.fullmatch(name) for pattern in self._patterns)
            if len(self._memo) < _MEMO_SIZE:
                self._memo[name] = selected
        return selected

    def __call__(self, call: ToolCall) -> bool:
        function = self.function
        if function is not None:
            return bool(function(call))
        return self.named(call.name)

    def __repr__(self) -> str:
        return self.described


def describe(matcher: object) -> str:
    """How a matcher (or a rule's function) is written: `'search'`, `re.compile('db_.*')`, a function's name."""
    if isinstance(matcher, re.Pattern):
        return f"re.compile({matcher.pattern!r})"
    if callable(matcher):
        return str(getattr(matcher, "__qualname__", repr(matcher))).replace(".<locals>", "")
    return repr(matcher)
