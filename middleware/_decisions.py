"""Policy decisions a layer made on a call, told to the layers outside it.

`authorize` calls `decided(call, text)` for every tool call it decides; `log`
collects those of the call it wraps (`watch`) and puts them on that call's
record, so a log outside `authorize` says which rule decided.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any

Told = list[tuple[Any, str]]

_watching: ContextVar[Told | None] = ContextVar("onion_policy_decisions", default=None)


def decided(ctx: Any, text: str) -> None:
    """Tell the layers outside that a policy decided `ctx` as `text` says."""
    told = _watching.get()
    if told is not None:
        told.append((ctx, text))


def watch() -> tuple[Told, Token[Told | None]]:
    """Start collecting what `decided` reports inside; pass the token to `unwatch` when the call ends.

    Tasks started inside share the list (they copy the context): filter it by `ctx`.
    """
    told: Told = []
    return told, _watching.set(told)


def unwatch(token: Token[Told | None]) -> None:
    """Stop collecting (the collector outside, if any, collects again)."""
    _watching.reset(token)
