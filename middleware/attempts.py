"""Failed attempts that a layer tried again, told to the layers outside it.

`retry` calls `retried(ctx, error)` before each new attempt; `log` collects
those of the call it wraps (`watch`) and reports them with the call, so a log
outside `retry` says what failed before the answer it records.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any

_watching: ContextVar[list[tuple[Any, BaseException]] | None] = ContextVar("onion_failed_attempts", default=None)


def retried(ctx: Any, error: BaseException) -> None:
    """Tell the layers outside that an attempt of `ctx` failed with `error` and another follows."""
    failures = _watching.get()
    if failures is not None:
        failures.append((ctx, error))


def watch() -> tuple[list[tuple[Any, BaseException]], Token[list[tuple[Any, BaseException]] | None]]:
    """Start collecting what `retried` reports inside; pass the token to `unwatch` when the call ends.

    Tasks started inside share the list (they copy the context), so failures
    in a tool batch's calls are collected too; filter them by `ctx`.
    """
    failures: list[tuple[Any, BaseException]] = []
    return failures, _watching.set(failures)


def unwatch(token: Token[list[tuple[Any, BaseException]] | None]) -> None:
    """Stop collecting (the collector outside, if any, collects again)."""
    _watching.reset(token)


__all__ = ["retried", "unwatch", "watch"]
