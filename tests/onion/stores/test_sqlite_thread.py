"""`SQLiteStore`'s own thread: writes grouped into transactions, errors to the right caller, a clean stop."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import threading
from pathlib import Path

import pytest

from onion.errors import StoreUnavailable
from onion.stores import SQLiteStore
from onion.stores._sqlite_checkpoints import Checkpoints


def store_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("onion SQLiteStore(")]


def commits(store: SQLiteStore) -> list[str]:
    """Every `COMMIT` the store's connection runs from now on (its trace, as SQLite reports it)."""
    committed: list[str] = []
    store._db.set_trace_callback(lambda sql: committed.append(sql) if sql == "COMMIT" else None)
    return committed


async def held(store: SQLiteStore) -> tuple[asyncio.Future[None], threading.Event]:
    """A write that keeps the store's thread busy until the returned event is set (and has started)."""
    entered, release = threading.Event(), threading.Event()

    def wait(db: sqlite3.Connection) -> None:
        entered.set()
        release.wait()

    busy = store._write(wait)
    await asyncio.to_thread(entered.wait)
    return busy, release


async def test_writes_queued_during_a_transaction_commit_together_and_a_failing_one_fails_alone(
    tmp_path: Path,
) -> None:
    """Three writes queued while another is written go in one transaction; the one that raises is rolled back
    and only its caller sees the error."""
    async with SQLiteStore(tmp_path / "x.db") as store:
        busy, release = await held(store)
        committed = commits(store)

        def refuse(db: sqlite3.Connection) -> None:
            db.execute("INSERT INTO onion_cache VALUES ('refused', 'x', NULL)")
            raise ValueError("refused write")

        writes = [
            asyncio.ensure_future(store.set("a", "1", None)),
            asyncio.ensure_future(store._write(refuse)),
            asyncio.ensure_future(store.set("b", "2", None)),
        ]
        await asyncio.sleep(0)  # each is queued behind the busy write
        release.set()
        await busy
        outcomes = await asyncio.gather(*writes, return_exceptions=True)
        assert outcomes[0] is None and outcomes[2] is None
        assert isinstance(outcomes[1], ValueError) and str(outcomes[1]) == "refused write"
        assert committed == ["COMMIT", "COMMIT"]  # the busy write's, then the three's
        assert [await store.get(key) for key in ("a", "refused", "b")] == ["1", None, "2"]


async def test_a_transaction_that_cannot_start_fails_its_writes_with_store_unavailable_and_not_later_ones(
    tmp_path: Path,
) -> None:
    """Another connection holds the write lock past busy_timeout: the writes queued then raise StoreUnavailable
    naming the file and SQLite's reason; a write after the lock is gone succeeds."""
    path = tmp_path / "x.db"
    async with SQLiteStore(path, busy_timeout=0.01) as store:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        outcomes = await asyncio.gather(
            store.set("a", "1", None), store.session_append("s", ["m"]), return_exceptions=True
        )
        other.execute("ROLLBACK")
        other.close()
        assert [type(o) for o in outcomes] == [StoreUnavailable, StoreUnavailable]
        assert "x.db" in str(outcomes[0]) and "database is locked" in str(outcomes[0])
        assert "nothing was written" in str(outcomes[0])
        await store.set("c", "3", None)
        assert await store.get("a") is None and await store.get("c") == "3"
        assert await store.session_messages("s") == []


async def test_aclose_finishes_queued_writes_then_ends_the_thread_and_refuses_new_work(tmp_path: Path) -> None:
    """Writes queued before aclose() land; afterwards the thread is gone and a query raises StoreUnavailable."""
    before = store_threads()
    store = SQLiteStore(tmp_path / "x.db")
    assert store_threads() == before  # started by the first query, not by opening
    writes = [asyncio.ensure_future(store.set(f"k{i}", str(i), None)) for i in range(20)]
    await asyncio.sleep(0)
    await store.aclose()
    await asyncio.gather(*writes)
    assert store_threads() == before
    with pytest.raises(StoreUnavailable, match="is closed"):
        await store.get("k1")
    await store.aclose()  # again: nothing to do
    async with SQLiteStore(tmp_path / "x.db") as again:
        assert [await again.get(f"k{i}") for i in (0, 19)] == ["0", "19"]


async def test_close_in_a_thread_and_a_forgotten_store_both_end_the_stores_thread(tmp_path: Path) -> None:
    """close() waits for the thread to end; a store dropped without closing ends its thread once collected."""
    before = store_threads()
    closed = SQLiteStore(tmp_path / "a.db")
    await closed.set("k", "v", None)
    closed.close()
    assert store_threads() == before
    forgotten = SQLiteStore(tmp_path / "b.db")
    await forgotten.set("k", "v", None)
    assert await forgotten.get("k") == "v"  # a read starts the thread (a write may commit on the loop)
    (thread,) = [t for t in store_threads() if t not in before]
    del forgotten
    gc.collect()
    await asyncio.to_thread(thread.join, 10)
    assert not thread.is_alive()


def test_one_store_serves_two_event_loops_in_two_threads_at_once(tmp_path: Path) -> None:
    """Coroutines of two loops in two threads write through one store together; each gets its own results."""
    store = SQLiteStore(tmp_path / "x.db")
    results: dict[str, list[str | None]] = {}

    def worker(name: str) -> None:
        async def main() -> None:
            await asyncio.gather(*(store.set(f"{name}{i}", f"{name}-{i}", None) for i in range(50)))
            results[name] = list(await asyncio.gather(*(store.get(f"{name}{i}") for i in range(50))))

        asyncio.run(main())

    threads = [threading.Thread(target=worker, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    assert results == {name: [f"{name}-{i}" for i in range(50)] for name in ("a", "b")}


async def test_a_caller_cancelled_while_its_write_waits_leaves_the_write_and_the_others(tmp_path: Path) -> None:
    """Cancelling one waiting caller does not cancel its write nor fail the writes queued with it."""
    async with SQLiteStore(tmp_path / "x.db") as store:
        busy, release = await held(store)
        cancelled = asyncio.ensure_future(store.set("a", "1", None))
        kept = asyncio.ensure_future(store.set("b", "2", None))
        await asyncio.sleep(0)
        cancelled.cancel()
        release.set()
        await busy
        await kept
        assert cancelled.cancelled()
        assert [await store.get(key) for key in ("a", "b")] == ["1", "2"]


@pytest.mark.parametrize("problem", ["full", "read-only"])
async def test_a_full_or_read_only_file_is_store_unavailable_and_the_store_works_once_it_is_not(
    tmp_path: Path, problem: str
) -> None:
    """A journal write that SQLite refuses (no page left, or query_only) raises StoreUnavailable naming the
    reason; nothing of it is kept, and writes succeed again once the limit is lifted."""
    async with SQLiteStore(tmp_path / "x.db") as store:
        await store.start_run("r", agent="a", owner="w", lease=30, entries=["start"])

        def limit(db: sqlite3.Connection) -> None:
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            db.execute(f"PRAGMA max_page_count = {pages}" if problem == "full" else "PRAGMA query_only = ON")

        await store._thread.read(limit)
        with pytest.raises(StoreUnavailable, match="full" if problem == "full" else "readonly"):
            await store.append_journal("r", "w", ["x" * 20_000], lease=30)
        await store._thread.read(
            lambda db: db.execute(
                "PRAGMA max_page_count = 1073741823" if problem == "full" else "PRAGMA query_only = OFF"
            )
        )
        assert await store.journal("r") == ["start"]
        await store.append_journal("r", "w", ["next"], lease=30)
        assert await store.journal("r") == ["start", "next"]


async def test_checkpoints_run_in_a_thread_of_their_own_and_end_with_the_store(tmp_path: Path) -> None:
    """Every `every` commits another thread (on its own connection) copies the WAL into the database file, so
    no commit waits for the disk; the committing connection checkpoints only past a large backstop."""
    path = tmp_path / "x.db"
    before = store_threads()
    store = SQLiteStore(path)
    checkpoints = Checkpoints(str(path), store._thread.name, every=5)
    store._thread.checkpoints = checkpoints
    assert await store._thread.read(lambda db: db.execute("PRAGMA wal_autocheckpoint").fetchone()[0]) == 10_000
    for i in range(5):
        await store.set(f"k{i}", "x" * 50_000, None)
    for _ in range(1000):  # the checkpoint thread was woken by the 5th commit
        if checkpoints.runs:
            break
        await asyncio.sleep(0.01)
    assert checkpoints.runs == 1
    assert path.stat().st_size > 250_000  # the five values are in the database file, not only in the WAL
    assert [t.name for t in store_threads() if t not in before] == [
        f"onion SQLiteStore({str(path)!r})",
        f"onion SQLiteStore({str(path)!r}) checkpoints",
    ]
    await store.aclose()
    assert store_threads() == before


async def test_a_lone_write_commits_on_the_loop_and_is_in_the_file_when_it_returns(tmp_path: Path) -> None:
    """With nothing else queued and the write lock free, a write commits on the caller's loop: no thread starts,
    and another connection reads it as soon as the call returns."""
    before = store_threads()
    path = tmp_path / "x.db"
    async with SQLiteStore(path) as store:
        await store.set("k", "v", None)
        assert store_threads() == before
        other = sqlite3.connect(path)
        assert other.execute("SELECT value FROM onion_cache WHERE key = 'k'").fetchone() == ("v",)
        other.close()


async def test_writes_asked_for_in_one_pass_commit_on_the_loop_in_one_transaction_a_failing_one_alone(
    tmp_path: Path,
) -> None:
    """Writes asked for while the loop runs other callbacks are committed together at its next pass; one that
    raises is rolled back alone and only its caller sees the error."""
    async with SQLiteStore(tmp_path / "x.db") as store:
        committed = commits(store)

        def refuse(db: sqlite3.Cursor) -> None:
            db.execute("INSERT INTO onion_cache VALUES ('refused', 'x', NULL)")
            raise ValueError("refused write")

        async def refused() -> None:
            await store._change(refuse)

        outcomes = await asyncio.gather(
            store.set("a", "1", None), refused(), store.set("b", "2", None), return_exceptions=True
        )
        assert outcomes[0] is None and outcomes[2] is None
        assert isinstance(outcomes[1], ValueError) and str(outcomes[1]) == "refused write"
        assert committed == ["COMMIT"]
        assert [await store.get(key) for key in ("a", "refused", "b")] == ["1", None, "2"]


async def test_a_write_that_finds_the_lock_taken_waits_for_it_in_the_thread_not_on_the_loop(tmp_path: Path) -> None:
    """Another connection holds the write lock: the write does not wait on the loop (busy_timeout 0 there) but in
    the store's thread, and lands once the lock is let go; the loop kept running meanwhile."""
    path = tmp_path / "x.db"
    async with SQLiteStore(path, busy_timeout=30) as store:
        await store.set("first", "1", None)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        writing = asyncio.ensure_future(store.set("k", "v", None))
        for _ in range(5):
            await asyncio.sleep(0.01)
        assert not writing.done()
        assert len(store_threads()) >= 1
        other.execute("ROLLBACK")
        other.close()
        await writing
        assert await store.get("k") == "v"


async def test_writes_committed_together_after_one_raised_land_once_each(tmp_path: Path) -> None:
    """When one of several writes raises, the others are written again in savepoints after a rollback: each of
    them lands exactly once (no session message twice), the refused one not at all."""
    async with SQLiteStore(tmp_path / "x.db") as store:

        def refuse(db: sqlite3.Cursor) -> None:
            db.execute("INSERT INTO onion_sessions VALUES ('s', 99, 'refused')")
            raise ValueError("refused write")

        async def refused() -> None:
            await store._change(refuse)

        outcomes = await asyncio.gather(
            store.session_append("s", ["m1"]), refused(), store.session_append("s", ["m2"]), return_exceptions=True
        )
        assert outcomes[0] is True and outcomes[2] is True and isinstance(outcomes[1], ValueError)
        assert await store.session_messages("s") == ["m1", "m2"]


async def test_one_loops_writes_commit_in_order_while_another_loop_keeps_the_thread_busy(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    order: list[str] = []
    other_started, other_release = threading.Event(), threading.Event()

    def other_loop() -> None:
        async def main() -> None:
            await store._write(lambda db: (other_started.set(), other_release.wait(), order.append("other")))

        asyncio.run(main())

    asyncio.get_running_loop().call_soon(lambda: None)  # other work is ready: the first write waits for the next pass
    first = store._change(lambda db: order.append("first"))
    thread = threading.Thread(target=other_loop)
    thread.start()
    other_started.wait(5)  # blocking this loop: its first write is still waiting for the next pass
    second = store._change(lambda db: order.append("second"))
    other_release.set()
    await asyncio.gather(first, second)
    thread.join()
    store.close()
    assert order == ["other", "first", "second"]
