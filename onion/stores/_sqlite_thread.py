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
Work = Callable[[Any], Any]
"""A write's work takes the connection's cursor (`sqlite3.Cursor`), a read's the connection."""

_WRITE, _READ, _STOP = 0, 1, 2
_Item = tuple[int, Work | None, asyncio.Future[Any] | None]
_BUSY = 5  # SQLITE_BUSY: another connection holds the write lock
HERE_AT_MOST = 8
"""The most writes a loop commits itself in one transaction; more are committed by the thread, beside the loop."""


class SQLiteThread:
    """Runs work on `db` in a thread of its own, or on the caller's loop when that cannot wait.

    Each caller's future is settled on its own event loop; the thread
    starts with the first query it is given. `name` names the store in
    errors; `checkpoints`, if given, hears of every commit. How writes are
    grouped and where they run: `docs/durable.md` (Stores).
    """

    def __init__(self, db: sqlite3.Connection, name: str, checkpoints: Checkpoints | None = None) -> None:
        self.name = name
        self.checkpoints = checkpoints
        self._db = db
        self._cursor = db.cursor()
        """The one cursor writes run on (no cursor made per statement)."""
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._lock = threading.Lock()
        """Guards `_closed`, `_thread`, `_queued` and `_soon`."""
        self._using = threading.Lock()
        """Held by whoever uses the connection: the thread, or a loop writing on it."""
        self._closed = False
        self._thread: threading.Thread | None = None
        self._queued = 0
        """Queries given to the thread and not finished."""
        self._soon: dict[asyncio.AbstractEventLoop, list[tuple[Work, asyncio.Future[Any]]]] = {}
        """Each loop's writes waiting for its next pass (`write_soon`)."""
        self._patience = int(db.execute("PRAGMA busy_timeout").fetchone()[0])
        self._waits = True
        """The connection's busy timeout is `_patience` (False: 0, while a loop writes)."""

    def write(self, work: Callable[[sqlite3.Cursor], T]) -> asyncio.Future[T]:
        """A future of `work(cursor)`'s value, run in the thread in one transaction with the writes queued meanwhile,
        each in a savepoint; `StoreUnavailable` when that transaction cannot begin or commit (none of it happened)."""
        return self._submit(_WRITE, work)

    def write_soon(self, work: Callable[[sqlite3.Cursor], T]) -> asyncio.Future[T]:
        """`write(work)`, committed on this loop (with the writes it asks for in this pass) when the connection and the
        write lock are free; `work` must be short: it may run on the loop."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        with self._lock:
            if self._closed:
                raise StoreUnavailable(f"{self.name} is closed: open a new one")
            if self._queued:  # the thread is at work: join its next transaction, after this loop's waiting writes
                for earlier, waiting_done in self._soon.pop(loop, ()):
                    self._give((_WRITE, earlier, waiting_done))
                self._give((_WRITE, work, done))
                return done
            waiting = self._soon.get(loop)
            if waiting is not None:
                waiting.append((work, done))
                return done
            self._soon[loop] = [(work, done)]
        if _alone(loop):  # no other write can join it
            self._write_here(loop)
        else:
            loop.call_soon(self._write_here, loop)
        return done

    def read(self, work: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """A future of `work(connection)`'s value, run in the thread outside a transaction, after this loop's writes."""
        return self._submit(_READ, work)

    def _submit(self, kind: int, work: Work) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        with self._lock:
            if self._closed:
                raise StoreUnavailable(f"{self.name} is closed: open a new one")
            for earlier, waiting in self._soon.pop(loop, ()):  # this loop's writes go first
                self._give((_WRITE, earlier, waiting))
            self._give((kind, work, done))
        return done

    def _give(self, item: _Item) -> None:
        """Queue `item` for the thread, starting it if need be. Called holding `_lock`."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=f"onion {self.name}", daemon=True)
            self._thread.start()
        self._queued += item[0] != _STOP
        self._queue.put(item)

    def _write_here(self, loop: asyncio.AbstractEventLoop) -> None:
        """Commit the writes `loop` asked for in its last pass, on it, if the connection and the write lock are
        free; else give them to the thread."""
        with self._lock:
            waiting = self._soon.pop(loop, None)
            if not waiting:
                return
            if self._queued or len(waiting) > HERE_AT_MOST or not self._using.acquire(blocking=False):
                for work, done in waiting:
                    self._give((_WRITE, work, done))
                return
        try:
            self._wait(False)
            outcomes = self._commit([work for work, _ in waiting], here=True)
        except BaseException as error:  # interrupted mid-commit: no transaction left open, no caller left waiting
            if self._db.in_transaction:
                self._cursor.execute("ROLLBACK")
            _settle([(done, False, error) for _, done in waiting])
            raise
        finally:
            self._using.release()
        if outcomes is None:  # another connection is writing: wait for it in the thread
            with self._lock:
                if self._closed:
                    closed = StoreUnavailable(f"{self.name} was closed: nothing was written")
                    _settle([(done, False, closed) for _, done in waiting])
                    return
                for work, done in waiting:
                    self._give((_WRITE, work, done))
            return
        _settle([(done, ok, value) for (_, done), (ok, value) in zip(waiting, outcomes, strict=True)])

    def _wait(self, waits: bool) -> None:
        """Set the connection's busy timeout: the store's (`waits`), or 0. Called holding `_using`."""
        if waits != self._waits:
            self._cursor.execute(f"PRAGMA busy_timeout={self._patience if waits else 0}")
            self._waits = waits

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
            for waiting in self._soon.values():  # writes a loop has not reached yet: the thread does them
                for work, done in waiting:
                    self._give((_WRITE, work, done))
            self._soon.clear()
            thread = self._thread
            if thread is None:
                with self._using:
                    self._end()
                return None
            self._queue.put((_STOP, None, stopped))
        return thread

    def _end(self) -> None:
        """Stop the checkpoints, close the connection. Called holding `_using`."""
        if self.checkpoints is not None:
            self.checkpoints.stop()
        self._db.close()

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
            with self._using:
                try:
                    self._wait(True)
                    outcomes = self._run(work)
                except BaseException as error:  # a bug here must not leave callers waiting forever
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                    outcomes = [(False, error)] * len(work)
            with self._lock:
                self._queued -= len(work)
            _settle_all(work, outcomes)
            stopping = [item for item in batch if item[0] == _STOP]
            if stopping:
                with self._using:
                    self._end()
                _settle_all(stopping, [(True, None)] * len(stopping))
                return

    def _run(self, batch: list[_Item]) -> list[tuple[bool, Any]]:
        outcomes: list[tuple[bool, Any]] = [(True, None)] * len(batch)
        writes = [i for i, (kind, _, _) in enumerate(batch) if kind == _WRITE]
        if writes:
            committed = self._commit([batch[i][1] for i in writes], here=False)
            assert committed is not None
            for i, outcome in zip(writes, committed, strict=True):
                outcomes[i] = outcome
        for i, (kind, work, _) in enumerate(batch):
            if kind == _READ:
                assert work is not None
                try:
                    outcomes[i] = (True, work(self._db))
                except BaseException as error:
                    outcomes[i] = (False, self._mapped("could not read", error))
        return outcomes

    def _commit(self, works: list[Work | None], *, here: bool) -> list[tuple[bool, Any]] | None:
        """`works` in one transaction: their outcomes; None when `here` (on a loop) and another connection holds
        the write lock.

        They run one after the other; when one of several raises, the
        transaction is rolled back and they run again, each in a savepoint of
        its own, so that only the one that raised is undone (a work may
        therefore run twice: it only reads and writes the database).
        """
        try:
            return self._transaction(works, here=here, apart=False)
        except _Apart:
            return self._transaction(works, here=here, apart=True)

    def _transaction(self, works: list[Work | None], *, here: bool, apart: bool) -> list[tuple[bool, Any]] | None:
        """`_commit`'s one try: each work in a savepoint when `apart`; `_Apart` (rolled back) when one of several
        raises without."""
        db, cursor = self._db, self._cursor
        try:
            cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            if here and getattr(error, "sqlite_errorcode", 0) & 0xFF == _BUSY:
                return None
            return [(False, self._unavailable("could not start writing", error)) for _ in works]
        outcomes: list[tuple[bool, Any]] = []
        for work in works:
            assert work is not None
            if apart:
                cursor.execute("SAVEPOINT write")
            try:
                outcomes.append((True, work(cursor)))
            except BaseException as error:
                if not db.in_transaction:  # SQLite rolled the whole transaction back (a full disk, I/O)
                    return [(False, self._unavailable("the write was rolled back", error)) for _ in works]
                cursor.execute("ROLLBACK TO write" if apart else "ROLLBACK")
                if not apart and len(works) > 1:
                    raise _Apart from None
                outcomes.append((False, self._mapped("could not write", error)))
                if not apart:
                    return outcomes
            if apart:
                cursor.execute("RELEASE write")
        try:
            cursor.execute("COMMIT")
        except sqlite3.Error as error:
            if db.in_transaction:
                cursor.execute("ROLLBACK")
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


class _Apart(Exception):
    """One of the works written together raised: write them again, each in a savepoint."""


def _alone(loop: asyncio.AbstractEventLoop) -> bool:
    """Nothing else is ready to run on `loop` until it next waits (asyncio's loop; False for other loops): a write
    asked for now has no other to be committed with, so it is committed at once."""
    return not getattr(loop, "_ready", True)


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
