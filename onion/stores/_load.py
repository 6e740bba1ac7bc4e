"""`store.load(run_id)`: a run kept in a store, as a `RunState`, read by the durable wing (`onion._durable.load`).

A store keeps records and never reads the journal's format: the wing hands
its reader to the stores (`use`) when it is imported, as `import onion` does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._durable.state import RunState
    from ._protocols import RunStore

    Loader = Callable[[RunStore, str], Awaitable[RunState]]

_loader: list[Loader] = []


def use(loader: Loader) -> None:
    """Read runs with `loader(store, run_id)` (the durable wing's `load_state`)."""
    _loader[:] = [loader]


class StateLoader:
    """Gives a `RunStore` its `load`; mixed into every store."""

    async def load(self: RunStore, run_id: str) -> RunState:
        """The state of `run_id`: a paused run's, to decide on and `agent.resume(state)`; a completed run's.

        Raises `RunNotFound` for an unknown id, `RunStateError` for a run
        that is running or failed (`agent.resume(run_id)` recovers those).
        """
        return await _loader[0](self, run_id)
