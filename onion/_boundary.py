"""What may stand in at the innermost points of the model and tool chains: a cassette (`onion.testing.cassette`).

`BOUNDARY` is read once per model call, after every model layer, and once
per tool call, right before the tool runs; `None` (the default) leaves the
model and the tools as they are. A boundary with an async
`paused(agent, result)` (`onion.temporal` inside a workflow) is handed a run
that `agent.run` paused, and returns the run gone on to its end: the
decisions are waited for in place.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._calls import ModelCall, ToolCall
    from ._model import Model
    from ._run import RunResult


class Boundary(Protocol):
    """Records or replays what crosses the model boundary (and, if it chooses, the tool boundary)."""

    def model(self, call: ModelCall) -> Model:
        """The model to ask for `call`: `call.model` itself, or a stand-in that records or replays its answers."""
        ...

    async def tool(self, call: ToolCall, invoke: Callable[[], Awaitable[Any]]) -> Any:
        """What the tool of `call` returns: `await invoke()` (the tool run), or a recorded `ToolResult`."""
        ...


BOUNDARY: ContextVar[Boundary | None] = ContextVar("onion.boundary", default=None)
"""The boundary in force in this context (set by `onion.testing.cassette`), else None."""


def engine_keeps_history() -> bool:
    """True inside a durable engine's run (`onion.temporal`'s workflow, whose boundary has `paused`): the engine
    waits for a pause's decisions in place and replays what went on from its own history."""
    return getattr(BOUNDARY.get(), "paused", None) is not None


def admitted(agent: Any, session: Any) -> None:
    """Raises what the boundary in force refuses of a run of `agent` (on `session`) before it starts: a durable
    engine that keeps the run's history (`onion.temporal`) refuses an agent's store and a session (its `admit`)."""
    admit = getattr(BOUNDARY.get(), "admit", None)
    if admit is not None:
        admit(agent, session)


def watched(run: Any) -> bool:
    """Gives `run` the emit of the boundary in force when it keeps runs' events (`onion.temporal`: the workflow's
    event log, which callers follow); True then, and `agent.run` hands it the run's result paused or not."""
    events_of = getattr(BOUNDARY.get(), "events_of", None)
    if events_of is None:
        return False
    run.emit = events_of(run.id)
    return True


async def decided_in_place(agent: Any, result: RunResult[Any]) -> RunResult[Any]:
    """The run `result` (paused, or watched: `watched`) as the boundary in force finishes it: a durable engine
    (`onion.temporal`) waits for a pause's decisions in place (its `paused(agent, result)`); without one, `result`
    itself."""
    wait = getattr(BOUNDARY.get(), "paused", None)
    if wait is None:
        return result
    resumed: RunResult[Any] = await wait(agent, result)
    return resumed
