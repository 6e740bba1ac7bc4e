"""`load_state(store, run_id)`: a run kept in a store, as a `RunState` (what `store.load(run_id)` answers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import RunNotFound, RunStateError
from .replay import replay
from .state import RunState

if TYPE_CHECKING:
    from ..stores import RunStore


async def load_state(store: RunStore, run_id: str) -> RunState:
    """The state of `run_id`: a paused run's, to decide on and `agent.resume(state)`; a completed run's.

    Raises `RunNotFound` for an unknown id, `RunStateError` for a run that
    is running or failed (`agent.resume(run_id)` recovers those).
    """
    record = await store.run_record(run_id)
    if record is None:
        raise RunNotFound(f"no run {run_id!r} in the store (never journaled here, or deleted)")
    if record.status == "paused" and record.state is not None:
        return RunState.from_json(record.state)
    if record.status != "completed":
        raise RunStateError(
            f"run {run_id!r} is {record.status}, not paused or completed: "
            "recover it with agent.resume(run_id) (its lease must have expired if it is running)"
        )
    replayed = replay(run_id, await store.journal(run_id))
    last = replayed.messages[-1] if replayed.messages else None
    return RunState(
        run_id=run_id,
        agent=replayed.agent,
        status="completed",
        messages=replayed.messages,
        steps=replayed.steps,
        usage=replayed.usage,
        state=replayed.state,
        output=last.text if last is not None and last.role == "assistant" else "",
        principal=replayed.principal,
        decisions=replayed.decisions,
    )
