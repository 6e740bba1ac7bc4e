"""Policy decisions a layer made on a call, told to the layers outside it; and pauses a layer asked itself.

`authorize` calls `decided(call, text)` for every tool call it decides; `log`
collects those of the call it wraps (`watch`) and puts them on that call's
record, so a log outside `authorize` says which rule decided.

`ask(call, key, reason)` pauses a call and notes, in `run.private[key]`,
that this layer asked; `approved_here(call, key)` is true only for a call a
person approved after such a pause. A person who approved a call another
layer paused never saw this layer's reason: `authorize`'s `Ask` and
`contain` then ask again, each once, with their own reasons.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any

from onion import ToolCall, ToolResult

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


def ask(call: ToolCall, key: str, reason: str) -> ToolResult:
    """Pause `call` for a person with `reason`, noting that the layer keeping `run.private[key]` asked."""
    call.run.private.setdefault(key, {}).setdefault("asked", []).append(call.idempotency_key)
    return call.pause(reason)


def approved_here(call: ToolCall, key: str) -> bool:
    """Whether a person approved `call` after the layer keeping `run.private[key]` paused it (`ask`)."""
    if not call.approved:
        return False
    kept = call.run.private.get(key)
    return kept is not None and call.idempotency_key in kept.get("asked", ())
