"""`MemoryStore`: every store purpose in this process's memory, for tests and single workers."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import EllipsisType

from ..errors import RunBusy
from ._buckets import MemoryRateStore
from ._load import StateLoader
from ._memory_cache import MemoryCache
from ._protocols import RunRecord, RunStatus, SessionTurn
from ._refusals import claim_refusal, run_deleted, run_lost, run_not_found, session_lost
from ._session import SessionOpener
from ._spending import MemorySpendStore


class MemoryStore(StateLoader, SessionOpener, MemoryRateStore, MemoryCache, MemorySpendStore):
    """Runs, journals, sessions, cache entries and rate counters in dicts; gone with the process.

    `clock` (seconds, default `time.time`) decides leases, TTLs and rate
    windows; tests pass a fake one. The cache keeps at most `max_entries`
    entries, dropping the least recently used. Its rate limits (a
    `MemoryRateStore`'s) and cache (a `MemoryCache`'s) hold across threads,
    each with its own loop.
    """

    _inline_writes = True  # its writes may begin outside their own task (onion._durable.journal)

    def __init__(self, *, clock: Callable[[], float] = time.time, max_entries: int = 1024) -> None:
        MemoryRateStore.__init__(self, clock)
        MemoryCache.__init__(self, max_entries, clock=clock)
        MemorySpendStore.__init__(self)
        self._runs: dict[str, RunRecord] = {}
        self._journals: dict[str, list[str]] = {}
        self._sessions: dict[str, list[str]] = {}
        self._session_locks: dict[str, tuple[str, float]] = {}
        self._session_tenants: dict[str, str | None] = {}

    # -- runs ------------------------------------------------------------------

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
        if run_id in self._runs:
            raise ValueError(f"a run {run_id!r} is already in the store")
        now = self.clock()
        record = RunRecord(run_id, agent, "running", now, now, owner, now + lease, session=session, tenant=tenant)
        self._runs[run_id] = record
        self._journals[run_id] = list(entries)

    async def claim_run(self, run_id: str, owner: str, lease: float, *, paused_only: bool = False) -> RunRecord:
        record = self._record(run_id)
        now = self.clock()
        refusal = claim_refusal(record, now, paused_only)
        if refusal is not None:
            raise RunBusy(refusal, run_id=run_id, status=record.status)
        record.status, record.owner, record.lease_expires, record.updated = "running", owner, now + lease, now
        return _copy(record)

    async def append_journal(self, run_id: str, owner: str, entries: Sequence[str], lease: float) -> None:
        record = self._held(run_id, owner)
        record.lease_expires = record.updated = self.clock()
        record.lease_expires += lease
        self._journals[run_id].extend(entries)

    async def renew_run(self, run_id: str, owner: str, lease: float) -> None:
        record = self._held(run_id, owner)
        record.lease_expires = self.clock() + lease

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
        record = self._held(run_id, owner)
        if turn is not None:
            if not self._holds_lock(turn.session_id, turn.lock):
                raise session_lost(run_id, turn.session_id)
            self._sessions.setdefault(turn.session_id, []).extend(turn.messages)
        self._journals[run_id].extend(entries)
        record.status, record.state, record.pending = status, state, pending
        record.owner = record.lease_expires = None
        record.updated = self.clock()

    async def run_record(self, run_id: str) -> RunRecord | None:
        record = self._runs.get(run_id)
        return None if record is None else _copy(record)

    async def journal(self, run_id: str) -> list[str]:
        return list(self._journals.get(run_id, ()))

    async def runs(self, *, limit: int = 100, tenant: str | EllipsisType | None = ...) -> list[RunRecord]:
        kept = self._runs.values() if tenant is ... else [r for r in self._runs.values() if r.tenant == tenant]
        ordered = sorted(kept, key=lambda r: r.updated, reverse=True)
        return [_copy(record) for record in ordered[:limit]]

    async def delete_run(self, run_id: str) -> None:
        self._runs.pop(run_id, None)
        self._journals.pop(run_id, None)

    def _record(self, run_id: str) -> RunRecord:
        record = self._runs.get(run_id)
        if record is None:
            raise run_not_found(run_id)
        return record

    def _held(self, run_id: str, owner: str) -> RunRecord:
        record = self._runs.get(run_id)
        if record is None:
            raise run_deleted(run_id)
        if record.owner != owner:
            raise run_lost(run_id, record.status)
        return record

    # -- sessions --------------------------------------------------------------

    async def session_messages(self, session_id: str) -> list[str]:
        return list(self._sessions.get(session_id, ()))

    async def session_append(self, session_id: str, messages: Sequence[str], *, lock: str | None = None) -> bool:
        if lock is not None and not self._holds_lock(session_id, lock):
            return False
        self._sessions.setdefault(session_id, []).extend(messages)
        return True

    async def session_clear(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    async def claim_session(self, session_id: str, tenant: str | None) -> str | None:
        if session_id not in self._session_tenants:
            self._session_tenants[session_id] = None if self._sessions.get(session_id) else tenant
        return self._session_tenants[session_id]

    async def lock_session(self, session_id: str, owner: str, lease: float, *, renew: bool = False) -> bool:
        now = self.clock()
        holder = self._session_locks.get(session_id)
        if renew and not self._holds_lock(session_id, owner):
            return False
        if holder is not None and holder[0] != owner and (holder[1] > now or self._running(holder[0])):
            return False
        self._session_locks[session_id] = (owner, now + lease)
        return True

    async def unlock_session(self, session_id: str, owner: str) -> None:
        holder = self._session_locks.get(session_id)
        if holder is not None and holder[0] == owner:
            del self._session_locks[session_id]

    def _running(self, holder: str) -> bool:
        """The lock's holder is a run this store has running (its worker may have died: it waits to be recovered)."""
        record = self._runs.get(holder)
        return record is not None and record.status == "running"

    def _holds_lock(self, session_id: str, owner: str) -> bool:
        """`owner` holds the session's lock: no one took it since (its lease may have lapsed)."""
        holder = self._session_locks.get(session_id)
        return holder is not None and holder[0] == owner

    async def aclose(self) -> None:
        """Nothing to close: here so code written for any store closes it alike (`async with store:` too)."""

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<MemoryStore runs={len(self._runs)} sessions={len(self._sessions)} cached={len(self._cache)}>"


def _copy(record: RunRecord) -> RunRecord:
    return RunRecord(**{name: getattr(record, name) for name in RunRecord.__slots__})
