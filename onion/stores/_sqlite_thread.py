"""`SQLiteThread`: the one thread that owns a store's SQLite connection and runs its queries, writes grouped."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import StoreUnavailable
from ._sqlite_checkpoints import Checkpoints

T = TypeVar("T")
Work = Callable[[sqlite3.Connection], Any]

_WRITE, _READ, _STOP = 0, 1, 2
_Item = tuple[int, Work | None, asyncio.Future[Any] | None]


class SQLiteThread:
    """Runs work on `db` in a thread of its own, so no query blocks an event loop.

    `write(work)` runs `work(db)` in a `BEGIN IMMEDIATE` transaction. The
    writes queued while a transaction is written are committed together in
    the next one, each in a savepoint of its own: a write that raises is
    rolled back alone and its exception goes to its caller only. A
    transaction that cannot begin or commit (the lock held past the busy
    timeout, a full disk) fails every write in it with `StoreUnavailable`,
    and none of them happened. `read(work)` runs `work(db)` outside a
    transaction, after the writes queued before it. Each caller's future is
    settled on the caller's own event loop, so one store serves coroutines of
    several loops and threads. The thread starts with the first query;
    `stop()` / `astop()` finish what is queued, close the connection and end
    it. `name` names the store in errors. `checkpoints`, if given, hears of
    every commit (and is stopped before the connection closes).
    """

    def __init__(self, db: sqlite3.Connection, name: str, checkpoints: Checkpoints | None = None) -> None:
        self.name = name
        self.checkpoints = checkpoints
        self._db = db
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._thread: threading.Thread | None = None

    def write(self, work: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """A future of `work(db)`'s value, run in a write transaction (see the class)."""
        return self._submit(_WRITE, work)

    def read(self, work: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """A future of `work(db)`'s value, run outside a transaction."""
        return self._submit(_READ, work)

    def _submit(self, kind: int, work: Work) -> asyncio.Future[Any]:
        done = asyncio.get_running_loop().create_future()
        with self._lock:
            if self._closed:
                raise StoreUnavailable(f"{self.name} is closed: open a new one")
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=f"onion {self.name}", daemon=True)
                self._thread.start()
            self._queue.put((kind, work, done))
        return done

    def stop(self) -> None:
        """Finish the queued work, close the connection, end the thread; wait for it. Idempotent."""
        thread = self._close(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def stop_soon(self) -> None:
        """Refuse new work and end the thread once the queued work is done, without waiting."""
        self._close(None)

    async def astop(self) -> None:
        """`stop()` without blocking the loop while the queued work finishes."""
        stopped = asyncio.get_running_loop().create_future()
        thread = self._close(stopped)
        if thread is not None:
            await asyncio.shield(stopped)
            thread.join()  # it settled `stopped` as its last step

    def _close(self, stopped: asyncio.Future[Any] | None) -> threading.Thread | None:
        """Refuse new work; the thread to wait for (None when it never started or already stopped)."""
        with self._lock:
            if self._closed:
                return None
            self._closed = True
            thread = self._thread
            if thread is None:
                self._db.close()
                return None
            self._queue.put((_STOP, None, stopped))
        return thread

    def _serve(self) -> None:
        """The thread: take everything queued, write it in one transaction, read, settle; until stopped."""
        while True:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            work = [item for item in batch if item[0] != _STOP]
            try:
                outcomes = self._run(work)
            except BaseException as error:  # a bug here must not leave callers waiting forever
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                outcomes = [(False, error)] * len(work)
            _settle_all(work, outcomes)
            stopping = [item for item in batch if item[0] == _STOP]
            if stopping:
                if self.checkpoints is not None:
                    self.checkpoints.stop()
                self._db.close()
                _settle_all(stopping, [(True, None)] * len(stopping))
                return

    def _run(self, batch: list[_Item]) -> list[tuple[bool, Any]]:
        outcomes: list[tuple[bool, Any]] = [(True, None)] * len(batch)
        writes = [i for i, (kind, _, _) in enumerate(batch) if kind == _WRITE]
        if writes:
            for i, outcome in zip(writes, self._commit([batch[i][1] for i in writes]), strict=True):
                outcomes[i] = outcome
        for i, (kind, work, _) in enumerate(batch):
            if kind == _READ:
                assert work is not None
                try:
                    outcomes[i] = (True, work(self._db))
                except BaseException as error:
                    outcomes[i] = (False, self._mapped("could not read", error))
        return outcomes

    def _commit(self, works: list[Work | None]) -> list[tuple[bool, Any]]:
        """Each of `works` in its own savepoint of one transaction (a lone one needs none): their outcomes."""
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            return [(False, self._unavailable("could not start writing", error)) for _ in works]
        alone = len(works) == 1
        outcomes: list[tuple[bool, Any]] = []
        for work in works:
            assert work is not None
            if not alone:
                db.execute("SAVEPOINT write")
            try:
                outcomes.append((True, work(db)))
            except BaseException as error:
                if not db.in_transaction:  # SQLite rolled the whole transaction back (a full disk, I/O)
                    return [(False, self._unavailable("the write was rolled back", error)) for _ in works]
                db.execute("ROLLBACK" if alone else "ROLLBACK TO write")
                outcomes.append((False, self._mapped("could not write", error)))
                if alone:
                    return outcomes
            if not alone:
                db.execute("RELEASE write")
        try:
            db.execute("COMMIT")
        except sqlite3.Error as error:
            if db.in_transaction:
                db.execute("ROLLBACK")
            return [(False, self._unavailable("could not commit", error)) for _ in works]
        if self.checkpoints is not None:
            self.checkpoints.committed()
        return outcomes

    def _mapped(self, doing: str, error: BaseException) -> BaseException:
        """SQLite failing to do the work (locked, full, read-only, a damaged file) is `StoreUnavailable`; other errors
        as raised."""
        if isinstance(error, sqlite3.OperationalError) or damaged(error):
            return self._unavailable(doing, error)
        return error

    def _unavailable(self, doing: str, error: BaseException) -> StoreUnavailable:
        unavailable = StoreUnavailable(
            f"{self.name}: {doing} ({type(error).__name__}: {error}); nothing was written{damaged(error)}"
        )
        unavailable.__cause__ = error
        return unavailable


def damaged(error: BaseException) -> str:
    """What to do when `error` says the file is damaged or no SQLite database at all; "" for any other error."""
    name = getattr(error, "sqlite_errorname", None) or ""
    if not name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return ""
    return "; the file is not an intact SQLite database: restore it from a backup, or move it away to start afresh"


def _settle_all(batch: list[_Item], outcomes: list[tuple[bool, Any]]) -> None:
    """Settle each future on its loop: one wake-up per loop for the whole batch."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
    for (_, _, done), (ok, value) in zip(batch, outcomes, strict=True):
        if done is not None:
            by_loop.setdefault(done.get_loop(), []).append((done, ok, value))
    for loop, settled in by_loop.items():
        with contextlib.suppress(RuntimeError):  # that loop is closed: no one is waiting any more
            loop.call_soon_threadsafe(_settle, settled)


def _settle(settled: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for done, ok, value in settled:
        if done.done():  # its awaiter was cancelled; the work happened anyway
            continue
        if ok:
            done.set_result(value)
        else:
            done.set_exception(value)
