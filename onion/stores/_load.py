"""`store.load(run_id)`: a run kept in a store, as a `RunState`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import RunStateError
from ._refusals import run_not_found

if TYPE_CHECKING:
    from .._run_state import RunState
    from ._protocols import RunStore


class StateLoader:
    """Gives a `RunStore` its `load`; mixed into every store."""

    async def load(self: RunStore, run_id: str) -> RunState:
        """The state of `run_id`: a paused run's, to decide on and `agent.resume(state)`; a completed run's.

        Raises `RunNotFound` for an unknown id, `RunStateError` for a run
        that is running or failed (`agent.resume(run_id)` recovers those).
        """
        from .._replay import replay
        from .._run_state import RunState

        record = await self.run_record(run_id)
        if record is None:
            raise run_not_found(run_id)
        if record.status == "paused" and record.state is not None:
            return RunState.from_json(record.state)
        if record.status != "completed":
            raise RunStateError(
                f"run {run_id!r} is {record.status}, not paused or completed: "
                "recover it with agent.resume(run_id) (its lease must have expired if it is running)"
            )
        replayed = replay(run_id, await self.journal(run_id))
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
        )
