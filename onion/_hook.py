"""The base of the hook middleware (`Hook`) and what a hook may answer (`Block`, `Modify`, `Pause`).

`onion.hooks` holds the nine hooks and re-exports these.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Literal

from .errors import HookFailed

logger = logging.getLogger("onion.hooks")
_NO_MATCHER = "{event} takes no matcher; only before_each_tool, after_each_tool and on_error do"
Matcher = str | Iterable[str] | re.Pattern[str] | None
Errors = Literal["raise", "log"]


class Block:
    """Returned by a `before_tools` / `before_each_tool` hook: answer with `reason` instead of running."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class Modify:
    """Returned by a `before_each_tool` hook: run the tool with `args` instead (they replace the old ones)."""

    __slots__ = ("args",)

    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args


class Pause:
    """Returned by a `before_tools` / `before_each_tool` hook: pause the call(s) for a person's approval.

    The run stops before its next model call with the calls pending; calls
    approved on resume (`call.approved`) run without asking the hook's answer again.
    """

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class Hook:
    """Base of the hook middleware: calls `function`, sync or async, under the error policy."""

    event: ClassVar[str]
    arguments: ClassVar[tuple[str, ...]]
    """What the event passes to the function, positionally."""
    takes_matcher: ClassVar[bool] = False
    """Whether the hook takes a tool-name matcher (only the per-tool hooks do)."""

    def __init__(self, function: Callable[..., Any], matcher: Matcher = None, errors: Errors = "raise") -> None:
        if errors not in ("raise", "log"):
            raise ValueError(f"errors must be 'raise' or 'log', not {errors!r}")
        if matcher is not None and not self.takes_matcher:
            raise TypeError(_NO_MATCHER.format(event=self.event))
        self._check_signature(function)
        self.function = function
        self.errors = errors
        self.name = f"{self.event}({getattr(function, '__qualname__', function)})".replace(".<locals>", "")
        self.matcher = matcher
        self._matches = _matcher(matcher)

    def _check_signature(self, function: Callable[..., Any]) -> None:
        """Raise `TypeError` now if `function` cannot take the event's arguments (not at run time)."""
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            return  # no signature to read (some builtins): the call itself will tell
        try:
            signature.bind(*self.arguments)
        except TypeError:
            name = getattr(function, "__qualname__", repr(function)).replace(".<locals>", "")
            count = len(self.arguments)
            raise TypeError(
                f"{self.event} calls fn({', '.join(self.arguments)}); {name}{signature} cannot be called "
                f"with {count} positional argument{'s' if count > 1 else ''}"
            ) from None

    async def call(self, *args: Any) -> Any:
        """The function's answer; under `errors="log"`, its exception is logged and `None` returned."""
        try:
            result = self.function(*args)
            if inspect.isawaitable(result):
                result = await result
            return result
        except Exception:
            if self.errors == "raise":
                raise
            logger.exception("hook %s failed; the run goes on (errors='log')", self.name)
            return None

    async def call_in_tool(self, *args: Any) -> Any:
        """`call` inside a tool stack: an exception travels as `HookFailed`, never taken for the tool's."""
        try:
            return await self.call(*args)
        except Exception as error:
            raise HookFailed(self.name, error) from error

    def __repr__(self) -> str:
        return f"<hook {self.name}>"


def _matcher(matcher: Matcher) -> Callable[[str], bool]:
    if matcher is None:
        return lambda name: True
    if isinstance(matcher, str):
        return lambda name: name == matcher
    if isinstance(matcher, re.Pattern):
        return lambda name: matcher.fullmatch(name) is not None
    names = frozenset(matcher)
    return names.__contains__
