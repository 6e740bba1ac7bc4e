"""`SQLiteStore`: every store purpose in one SQLite file, shared by the processes of one machine."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from types import EllipsisType
from typing import Any, TypeVar

from ..errors import RunBusy, StoreUnavailable
from . import _sqlite_events as stored_events
from ._buckets import Bucket
from ._events import Events
from ._load import StateLoader
from ._protocols import RunRecord, RunStatus, SessionTurn
from ._refusals import claim_refusal, run_not_found, session_lost
from ._session import SessionOpener
from ._spending import SQLITE_TABLE, sqlite_spend
from ._sqlite_checkpoints import Checkpoints
from ._sqlite_rows import _RUN_COLUMNS, _append, _append_to_session, _connect, _hold, _record, _running
from ._sqlite_thread import SQLiteThread, damaged

T = TypeVar("T")


class SQLiteStore(StateLoader, SessionOpener):
    """Runs, journals, sessions, cache entries and rate counters in the SQLite file at `path`.

    WAL mode, `synchronous=NORMAL`: a commit survives the process being
    killed. No query waits for another process's lock on the event loop
    (`busy_timeout` seconds at most, in the store's thread). `clock` (seconds
    since the epoch, shared by every process) decides leases and TTLs. Close
    it with `aclose()` / `close()`, or use it as a context manager; one
    store may serve several event loops and threads. `docs/durable.md` says
    how writes are grouped and what a power loss can lose.
    """

    _inline_writes = True  # its writes may begin outside their own task (onion._durable.journal)

    def __init__(self, path: str | Path, *, busy_timeout: float = 10.0, clock: Callable[[], float] = time.time) -> None:
        self.path = str(path)
        self.clock = clock
        name = f"SQLiteStore({self.path!r})"
        try:
            self._db = _connect(self.path, busy_timeout)
        except sqlite3.Error as error:
            raise StoreUnavailable(
                f"{name}: cannot open it ({type(error).__name__}: {error}){damaged(error)}"
            ) from error
        self._thread = SQLiteThread(self._db, name, Checkpoints(self.path, name))
        weakref.finalize(self, self._thread.stop_soon)

    # -- plumbing --------------------------------------------------------------

    def _write(self, work: Callable[[sqlite3.Cursor], T]) -> asyncio.Future[T]:
        """`work(db)` in a write transaction, in the store's thread, with the writes queued meanwhile."""
        return self._thread.write(work)

    def _change(self, work: Callable[[sqlite3.Cursor], T]) -> asyncio.Future[T]:
        """`work(db)` (a few statements) in a write transaction: on this loop when nothing waits, else as `_write`."""
        return self._thread.write_soon(work)

    async def _execute(self, statement: str, *parameters: Any) -> None:
        """One statement in its own write transaction."""
        await self._thread.write_soon(lambda db: db.execute(statement, parameters))

    def _read(self, statement: str, *parameters: Any) -> asyncio.Future[list[Any]]:
        return self._thread.read(lambda db: db.execute(statement, parameters).fetchall())

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
        now = self.clock()

        def start(db: sqlite3.Cursor) -> None:
            try:
                db.execute(
                    f"INSERT INTO onion_runs ({_RUN_COLUMNS}) VALUES (?, ?, 'running', ?, ?, ?, ?, NULL, ?, 0, ?)",
                    (run_id, agent, now, now, owner, now + lease, session, tenant),
                )
            except sqlite3.IntegrityError:
                raise ValueError(f"a run {run_id!r} is already in the store") from None
            _append(db, run_id, entries)

        await self._change(start)

    async def claim_run(self, run_id: str, owner: str, lease: float, *, paused_only: bool = False) -> RunRecord:
        now = self.clock()

        def claim(db: sqlite3.Cursor) -> RunRecord:
            record = _record(db, run_id)
            if record is None:
                raise run_not_found(run_id)
            refusal = claim_refusal(record, now, paused_only)
            if refusal is not None:
                raise RunBusy(refusal, run_id=run_id, status=record.status)
            db.execute(
                "UPDATE onion_runs SET status = 'running', owner = ?, lease_expires = ?, updated = ? WHERE run_id = ?",
                (owner, now + lease, now, run_id),
            )
            record.status, record.owner, record.lease_expires, record.updated = "running", owner, now + lease, now
            return record

        return await self._change(claim)

    async def append_journal(self, run_id: str, owner: str, entries: Sequence[str], lease: float) -> None:
        now = self.clock()

        def append(db: sqlite3.Cursor) -> None:
            _hold(db, run_id, owner, "lease_expires = ?, updated = ?", (now + lease, now))
            _append(db, run_id, entries)

        await self._change(append)

    async def renew_run(self, run_id: str, owner: str, lease: float) -> None:
        expires = self.clock() + lease
        await self._change(lambda db: _hold(db, run_id, owner, "lease_expires = ?", (expires,)))

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
        now = self.clock()

        def release(db: sqlite3.Cursor) -> None:
            _hold(
                db,
                run_id,
                owner,
                "status = ?, state = ?, pending = ?, owner = NULL, lease_expires = NULL, updated = ?",
                (status, state, pending, now),
            )
            if turn is not None and not _append_to_session(db, turn.session_id, turn.messages, turn.lock):
                raise session_lost(run_id, turn.session_id)
            _append(db, run_id, entries)

        await self._change(release)

    async def run_record(self, run_id: str) -> RunRecord | None:
        rows = await self._read(f"SELECT {_RUN_COLUMNS} FROM onion_runs WHERE run_id = ?", run_id)
        return RunRecord(*rows[0]) if rows else None

    async def journal(self, run_id: str) -> list[str]:
        rows = await self._read("SELECT entry FROM onion_journal WHERE run_id = ? ORDER BY seq", run_id)
        return [row[0] for row in rows]

    async def runs(self, *, limit: int = 100, tenant: str | EllipsisType | None = ...) -> list[RunRecord]:
        select = f"SELECT {_RUN_COLUMNS} FROM onion_runs"
        if tenant is ...:
            rows = await self._read(f"{select} ORDER BY updated DESC LIMIT ?", limit)
        elif tenant is None:
            rows = await self._read(f"{select} WHERE tenant IS NULL ORDER BY updated DESC LIMIT ?", limit)
        else:
            rows = await self._read(f"{select} WHERE tenant = ? ORDER BY updated DESC LIMIT ?", tenant, limit)
        return [RunRecord(*row) for row in rows]

    async def delete_run(self, run_id: str) -> None:
        def delete(db: sqlite3.Cursor) -> None:
            db.execute("DELETE FROM onion_journal WHERE run_id = ?", (run_id,))
            db.execute("DELETE FROM onion_runs WHERE run_id = ?", (run_id,))

        await self._change(delete)

    # -- sessions --------------------------------------------------------------

    async def session_messages(self, session_id: str) -> list[str]:
        rows = await self._read("SELECT message FROM onion_sessions WHERE session_id = ? ORDER BY seq", session_id)
        return [row[0] for row in rows]

    async def session_append(self, session_id: str, messages: Sequence[str], *, lock: str | None = None) -> bool:
        return await self._change(lambda db: _append_to_session(db, session_id, messages, lock))

    async def session_clear(self, session_id: str) -> None:
        await self._execute("DELETE FROM onion_sessions WHERE session_id = ?", session_id)

    async def claim_session(self, session_id: str, tenant: str | None) -> str | None:
        def claim(db: sqlite3.Cursor) -> str | None:
            row = db.execute("SELECT tenant FROM onion_session_tenants WHERE session_id = ?", (session_id,)).fetchone()
            if row is not None:
                kept: str | None = row[0]
                return kept
            used = db.execute("SELECT 1 FROM onion_sessions WHERE session_id = ? LIMIT 1", (session_id,)).fetchone()
            kept = None if used else tenant
            db.execute("INSERT INTO onion_session_tenants VALUES (?, ?)", (session_id, kept))
            return kept

        return await self._change(claim)

    async def lock_session(self, session_id: str, owner: str, lease: float, *, renew: bool = False) -> bool:
        now = self.clock()

        def lock(db: sqlite3.Cursor) -> bool:
            row = db.execute(
                "SELECT owner, expires FROM onion_session_locks WHERE session_id = ?", (session_id,)
            ).fetchone()
            if renew and (row is None or row[0] != owner):
                return False
            if row is not None and row[0] != owner and (row[1] > now or _running(db, row[0])):
                return False
            db.execute("INSERT OR REPLACE INTO onion_session_locks VALUES (?, ?, ?)", (session_id, owner, now + lease))
            return True

        return await self._change(lock)

    async def unlock_session(self, session_id: str, owner: str) -> None:
        await self._execute("DELETE FROM onion_session_locks WHERE session_id = ? AND owner = ?", session_id, owner)

    # -- cache -----------------------------------------------------------------

    async def get(self, key: str) -> str | None:
        rows = await self._read("SELECT value, expires FROM onion_cache WHERE key = ?", key)
        if not rows:
            return None
        value, expires = rows[0]
        if expires is not None and expires < self.clock():
            return None
        return str(value)

    async def set(self, key: str, value: str, ttl: float | None) -> None:
        expires = None if ttl is None else self.clock() + ttl
        await self._execute("INSERT OR REPLACE INTO onion_cache VALUES (?, ?, ?)", key, value, expires)

    # -- rate limits -----------------------------------------------------------

    async def acquire(self, key: str, tokens: int, *, rpm: float | None, tpm: float | None, window: float) -> float:
        return await self._update_bucket(key, lambda bucket, now: bucket.take(now, tokens, rpm, tpm, window))

    async def reconcile(self, key: str, reserved: int, used: int, *, refund_request: bool = False) -> None:
        await self._update_bucket(key, lambda bucket, now: bucket.give_back(reserved, used, refund_request))

    async def pause(self, key: str, seconds: float) -> None:
        await self._update_bucket(key, lambda bucket, now: bucket.pause(now, seconds))

    async def _update_bucket(self, key: str, change: Callable[[Bucket, float], T]) -> T:
        now = self.clock()

        def update(db: sqlite3.Cursor) -> T:
            row = db.execute(
                "SELECT requests, tokens, updated, paused_until FROM onion_rates WHERE key = ?", (key,)
            ).fetchone()
            bucket = Bucket(updated=now) if row is None else Bucket(*(_inf(row[0]), _inf(row[1]), row[2], row[3]))
            result = change(bucket, now)
            db.execute(
                "INSERT OR REPLACE INTO onion_rates VALUES (?, ?, ?, ?, ?)",
                (key, _finite(bucket.requests), _finite(bucket.tokens), bucket.updated, bucket.paused_until),
            )
            return result

        return await self._change(update)

    # -- spending --------------------------------------------------------------

    _spending_ready = False

    async def spend(
        self, key: str, cost: float, tokens: int, *, now: float, window: float | None = None, ttl: float | None = None
    ) -> tuple[float, int]:
        """`SpendStore.spend`: one write transaction (the first also makes the table, in a file that has none)."""

        def spend(db: sqlite3.Cursor) -> tuple[float, int]:
            if not ready:
                for statement in SQLITE_TABLE.split(";")[:-1]:
                    db.execute(statement)
            return sqlite_spend(db, key, cost, tokens, now, window, ttl)

        ready = self._spending_ready
        totals = await self._change(spend)
        self._spending_ready = True
        return totals

    # -- streamed events (EventStore) ------------------------------------------

    async def add_events(self, run_id: str, events: Sequence[tuple[int, str]], *, ended: bool, keep: float) -> bool:
        now = self.clock()
        return await self._change(lambda db: stored_events.add(db, run_id, events, ended, now, keep))

    async def read_events(self, run_id: str, after: int, *, limit: int = 500) -> tuple[Events, bool | None]:
        now = self.clock()
        return await self._thread.read(lambda db: stored_events.read(db, run_id, after, limit, now))

    async def last_event(self, run_id: str) -> tuple[int, bool]:
        now = self.clock()
        return await self._thread.read(lambda db: stored_events.last(db, run_id, now))

    # -- upkeep ----------------------------------------------------------------

    async def purge(self, *, older_than: float | None = None) -> int:
        """Delete expired cache entries and, with `older_than` (seconds), ended runs not updated since.

        Completed and failed runs go with their journals; paused and running
        runs stay. Returns how many rows went.
        """
        now = self.clock()

        def purge(db: sqlite3.Cursor) -> int:
            count = db.execute("DELETE FROM onion_cache WHERE expires < ?", (now,)).rowcount
            count += db.execute("DELETE FROM onion_session_locks WHERE expires < ?", (now,)).rowcount
            if older_than is not None:
                ended = "status IN ('completed', 'failed') AND updated < ?"
                count += db.execute(
                    f"DELETE FROM onion_journal WHERE run_id IN (SELECT run_id FROM onion_runs WHERE {ended})",
                    (now - older_than,),
                ).rowcount
                count += db.execute(f"DELETE FROM onion_runs WHERE {ended}", (now - older_than,)).rowcount
            return count

        return await self._write(purge)

    async def aclose(self) -> None:
        """Finish the queued queries, close the file and end the store's thread."""
        await self._thread.astop()

    def close(self) -> None:
        """`aclose()`, waiting in this thread."""
        self._thread.stop()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> SQLiteStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<SQLiteStore {self.path}>"


def _inf(value: float | None) -> float:
    return float("inf") if value is None else value


def _finite(value: float) -> float | None:
    return None if value == float("inf") else value
