"""The durable wing: runs that outlive a process. The agent enters it here, and only here.

- `state`: `RunState` and `PendingCall`, a paused (or finished) run as data;
- `trust`: what resuming a `RunState` checks (its signature, its fit with the agent, its batch);
- `decisions`: `Decisions` and `decide`, the one way a paused run's calls are decided (the server, the CLI and
  Temporal call it);
- `entries`, `journal`, `replay`: a run's steps written to its store as they happen, and read back; `chain`: each
  entry chained to the one before it (and signed), so one altered, removed or inserted shows (`onion.audit`);
- `runs`: journaled runs, and runs going on from a store (`resume_paused`, `recover`);
- `sessions`: runs on a session, and the one path of every resume (`resume_run`);
- `load`: a run kept in a store, as a `RunState` (`store.load(run_id)` is this).

The stores sit a floor below and never read the journal's format: `store.load` is `load.load_state`,
handed to them when this package is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..stores import _load
from .load import load_state

if TYPE_CHECKING:
    from .decisions import Decisions, decide
    from .runs import journaled, recover
    from .sessions import resume_run, run_in_session, session_of

_load.use(load_state)

_DOOR = {
    "Decisions": "decisions",
    "decide": "decisions",
    "journaled": "runs",
    "recover": "runs",
    "resume_run": "sessions",
    "run_in_session": "sessions",
    "session_of": "sessions",
}
"""What the agent takes from the wing, by module: loaded when first asked for (the run and the loop, which the
wing's runs drive, import the wing's data below them first)."""


def __getattr__(name: str) -> Any:
    module = _DOOR.get(name)
    if module is None:
        raise AttributeError(f"module 'onion._durable' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["Decisions", "decide", "journaled", "load_state", "recover", "resume_run", "run_in_session", "session_of"]
