"""What a store must do for each purpose: runs and their journal, sessions, the model cache, rate limits.

Every method is a coroutine and one round trip to the store (a Redis
script, a SQLite transaction). Payloads are JSON text that onion encodes
and decodes; a store only keeps it. `MemoryStore` and `SQLiteStore`
implement all four protocols, so one object serves every purpose.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import EllipsisType
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from ._session import SessionStore as SessionStore
from ._session import SessionTenants as SessionTenants
from ._session import SessionTurn as SessionTurn

if TYPE_CHECKING:
    from .._durable.state import RunState

RunStatus = Literal["running", "paused", "completed", "failed"]


@dataclass(slots=True)
class RunRecord:
    """What a store keeps about one run besides its journal.

    `state` is the `RunState` JSON saved when the run paused (or ended);
    `owner` the worker holding the run and `lease_expires` (seconds since
    the epoch, the store's clock) when its hold lapses; `pending` how many
    tool calls wait for a decision; `tenant` the tenant the run belongs to
    (its principal's, `None` for a run without one, or kept before stores
    knew tenants).
    """

    run_id: str
    agent: str
    status: RunStatus
    created: float
    updated: float
    owner: str | None = None
    lease_expires: float | None = None
    state: str | None = None
    session: str | None = None
    pending: int = 0
    tenant: str | None = None


@runtime_checkable
class RunStore(Protocol):
    """Runs, their journal, and who holds them.

    A worker holds a run under an `owner` token until `lease` seconds from
    now; writes by an owner that lost its hold raise `LeaseLost` (a `RunBusy`), so a worker
    taken over can never write again.
    """

    async def start_run(
        self,
        run_id: str,
        *,
        agent: str,
        owner: str,
        lease: float,
        entries: Sequence[str],
        session: str | None = None,
        tenant: str | None = None,
    ) -> None:
        """Create `run_id` as running, held by `owner`, with its first journal entries.

        `tenant`: the run belongs to that tenant (`RunRecord.tenant`, `runs(tenant=...)`). The journal passes it
        only for a run whose principal has a tenant.
        """
        ...

    async def claim_run(self, run_id: str, owner: str, lease: float, *, paused_only: bool = False) -> RunRecord:
        """Take a paused or failed run, or a running one whose lease expired, for `owner`.

        Atomic: of two workers claiming one run, one gets the record, the
        other `RunBusy` (also when the run completed). `paused_only`: only
        a paused run (resuming a `RunState` that another worker may have
        resumed already). An unknown run raises `RunNotFound`.
        """
        ...

    async def append_journal(self, run_id: str, owner: str, entries: Sequence[str], lease: float) -> None:
        """Append entries in order and extend the lease; `LeaseLost` if `owner` lost the run."""
        ...

    async def renew_run(self, run_id: str, owner: str, lease: float) -> None:
        """Extend `owner`'s lease to `lease` seconds from now; `LeaseLost` if it lost the run."""
        ...

    async def release_run(
        self,
        run_id: str,
        owner: str,
        status: RunStatus,
        *,
        state: str | None = None,
        pending: int = 0,
        entries: Sequence[str] = (),
        turn: SessionTurn | None = None,
    ) -> None:
        """Append `entries`, set `status` and `state`, and let go of the run; `LeaseLost` if `owner` lost it.

        `turn`: append it to its session in the same transaction, so a run
        is never completed without its turn nor its turn kept without the
        run completed. `LeaseLost` naming the session, and nothing written,
        when `turn.lock` no longer holds the session's lock.
        """
        ...

    async def run_record(self, run_id: str) -> RunRecord | None:
        """The run's record, or None."""
        ...

    async def journal(self, run_id: str) -> list[str]:
        """The run's journal entries, oldest first."""
        ...

    async def runs(self, *, limit: int = 100, tenant: str | EllipsisType | None = ...) -> list[RunRecord]:
        """The most recently updated runs first.

        `tenant="acme"`: only that tenant's runs; `tenant=None`: only runs without a tenant; not given (`...`):
        every run. The store filters (an index per tenant), so listing one tenant reads none of another's.
        """
        ...

    async def delete_run(self, run_id: str) -> None:
        """Forget the run and its journal."""
        ...

    async def load(self, run_id: str) -> RunState:
        """The run as a `RunState` (paused or completed); `StateLoader` implements it from the methods above."""
        ...


@runtime_checkable
class CacheStore(Protocol):
    """Cached entries: text values under text keys, each with an optional TTL in seconds."""

    async def get(self, key: str) -> str | None: ...

    async def set(self, key: str, value: str, ttl: float | None) -> None: ...


@runtime_checkable
class RateStore(Protocol):
    """The counters of `middleware.rate_limit`, shared by every worker using the store.

    `acquire` either reserves one request and `tokens` tokens for `key` and
    returns 0, or reserves nothing and returns the seconds to wait before
    trying again; `tokens` is never more than `tpm` (the layer caps a larger
    estimate). `reconcile` corrects a reservation once the real usage is
    known: `reserved` is what `acquire` reserved (`refund_request`: the call
    never reached the model, e.g. a cache hit). `pause` makes `key` wait
    until `seconds` from now (the provider's rate-limit signal). One store
    may serve several threads and event loops at once.
    """

    async def acquire(self, key: str, tokens: int, *, rpm: float | None, tpm: float | None, window: float) -> float: ...

    async def reconcile(self, key: str, reserved: int, used: int, *, refund_request: bool = False) -> None: ...

    async def pause(self, key: str, seconds: float) -> None: ...


class Store(RunStore, SessionStore, CacheStore, RateStore, Protocol):
    """A store for every purpose, as `Agent(store=...)` takes."""


@runtime_checkable
class SlotStore(Protocol):
    """Concurrency slots shared by every worker: `concurrency(store=...)` takes a store with them.

    A slot is held under an `owner` token until `lease` seconds from now;
    taking it again renews it; a slot whose holder died frees itself when
    its lease lapses.
    """

    async def take_slot(self, key: str, owner: str, limit: int, lease: float) -> bool:
        """Take (or renew) one of `limit` slots of `key` for `owner`; False when all are held."""
        ...

    async def free_slot(self, key: str, owner: str) -> None:
        """Give back `owner`'s slot of `key`."""
        ...
