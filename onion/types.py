"""The bottom floor: the kinds of calls, `Handler`, and the protocols through which low modules name high ones.

Every module of onion imports only from modules on lower floors (`TYPE_CHECKING`
imports included; `tests/onion/test_layering.py` checks it). This module
imports nothing of onion: what a context holds of the layers above it (its
agent, its journal, a tool) it names here, by what it uses of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

Kind = Literal["run", "model", "tools", "tool"]
"""The four kinds of call a layer wraps: a whole run, a model call, a tool batch, one tool call."""

KINDS: tuple[Kind, ...] = ("run", "model", "tools", "tool")

Handler = Callable[[Any], Awaitable[Any]]
"""`call_next` for a layer that wraps several kinds: takes the context, returns an awaitable of the result.

The typed `call_next` of each kind (`onion.RunNext`, `ModelNext`, `ToolsNext`,
`ToolNext`) names the contexts, so it sits with them (`onion._handlers`).
"""


StateKey = bytes | str | Sequence[bytes | str] | None
"""An agent's `state_key`: one key, or keys being rolled (`[new, old]`: the first signs, each is believed); None:
`ONION_STATE_KEY`, else no key."""


class StreamEdit(Protocol):
    """Takes each event a model call streams and returns the events to send on in its place.

    Return `[event]` to pass it on, a rewritten event, several, or none to
    hold it back. An `end()` method, when present, is called once the
    model's stream ended and returns what is still held. A `StreamReset`
    (a retry starts the stream again) passes through edits too: drop what
    is held and pass it on.
    """

    def __call__(self, event: Any, /) -> Iterable[Any]: ...


class AgentLike(Protocol):
    """What a run holds of its agent (`onion.Agent` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def store(self) -> Any: ...

    @property
    def stack(self) -> Any: ...

    @property
    def model(self) -> Any: ...

    @property
    def state_key(self) -> StateKey: ...

    @property
    def state_ttl(self) -> float | None: ...

    @property
    def lease(self) -> float: ...


class JournalLike(Protocol):
    """What the loop tells a journaled run's journal (`onion._durable.journal.Journal` is one)."""

    async def begin_now(self, run: Any) -> None: ...

    def model(self, run: Any, response: Any) -> None: ...

    async def started(self, call: Any) -> None: ...

    async def finished(self, call: Any, result: Any) -> None: ...


class Tracer(Protocol):
    """What is on when tracing is (`onion.tracing` sets it): builds a chain with its wrappers."""

    def compose(self, stack: Any, kind: Kind, terminal: Handler, checked: bool) -> Handler: ...


Settings = Mapping[str, Any]
"""A model call's settings (`temperature`, `max_tokens`, provider options)."""

__all__ = ["KINDS", "AgentLike", "Handler", "JournalLike", "Kind", "Settings", "StreamEdit", "Tracer"]
