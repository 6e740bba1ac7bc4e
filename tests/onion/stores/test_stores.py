"""Every store keeps runs, journals, sessions, cache entries and rate counters to the same contract."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from middleware import cache, rate_limit
from middleware.cache import MemoryStore as CacheMemoryStore
from middleware.rate_limit import RateLimitExceeded
from onion import Agent
from onion.errors import LeaseLost, RunBusy, RunNotFound, StoreUnavailable
from onion.stores import (
    CacheStore,
    MemoryStore,
    RateStore,
    RedisStore,
    RunStore,
    SessionStore,
    SessionTurn,
    SQLiteStore,
    Store,
)
from onion.testing import ScriptedModel


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    clock = Clock()
    if request.param == "memory":
        yield MemoryStore(clock=clock)
    elif request.param == "sqlite":
        async with SQLiteStore(tmp_path / "onion.db", clock=clock) as sqlite:
            yield sqlite
    else:
        namespace = f"t{uuid.uuid4().hex[:12]}"
        async with RedisStore(request.getfixturevalue("redis_url"), namespace=namespace, clock=clock) as redis:
            yield redis


def advance(store: Store, seconds: float) -> None:
    clock = store.clock  # type: ignore[attr-defined]
    clock.now += seconds


async def test_one_store_object_implements_every_protocol(store: Store) -> None:
    """MemoryStore, SQLiteStore and RedisStore each serve runs, sessions, the cache and rate limits."""
    for protocol in (RunStore, SessionStore, CacheStore, RateStore):
        assert isinstance(store, protocol)


async def test_the_journal_keeps_entries_in_order_and_release_records_the_outcome(store: Store) -> None:
    """Entries come back in append order; release sets status, state and pending, and drops the owner."""
    await store.start_run("r1", agent="a", owner="w1", lease=30, entries=["e1"], session="s")
    await store.append_journal("r1", "w1", ["e2", "e3"], lease=30)
    await store.release_run("r1", "w1", "paused", state='{"x": 1}', pending=2, entries=["e4"])
    assert await store.journal("r1") == ["e1", "e2", "e3", "e4"]
    record = await store.run_record("r1")
    assert record is not None
    assert (record.status, record.state, record.pending, record.owner, record.session) == (
        "paused",
        '{"x": 1}',
        2,
        None,
        "s",
    )
    assert [r.run_id for r in await store.runs()] == ["r1"]
    await store.delete_run("r1")
    assert await store.run_record("r1") is None and await store.journal("r1") == []


async def test_a_paused_run_is_claimed_by_exactly_one_worker(store: Store) -> None:
    """Of two claims on one paused run, the first wins; the second gets RunBusy naming the run."""
    await store.start_run("r1", agent="a", owner="w0", lease=30, entries=[])
    await store.release_run("r1", "w0", "paused", state="{}", pending=1)
    record = await store.claim_run("r1", "w1", lease=30)
    assert record.owner == "w1" and record.status == "running"
    with pytest.raises(RunBusy, match="r1") as busy:
        await store.claim_run("r1", "w2", lease=30)
    assert busy.value.status == "running"


async def test_a_completed_run_cannot_be_claimed(store: Store) -> None:
    """Claiming a run that completed raises RunBusy saying it has completed."""
    await store.start_run("r1", agent="a", owner="w0", lease=30, entries=[])
    await store.release_run("r1", "w0", "completed")
    with pytest.raises(RunBusy, match="completed"):
        await store.claim_run("r1", "w1", lease=30)


async def test_an_unknown_run_is_not_found(store: Store) -> None:
    """Claiming a run the store never saw raises RunNotFound naming it."""
    with pytest.raises(RunNotFound, match="nope"):
        await store.claim_run("nope", "w1", lease=30)


async def test_a_run_deleted_while_held_says_so_to_its_worker(store: Store) -> None:
    """Every store answers a held run's writes after its deletion with one RunNotFound: deleted while running."""
    await store.start_run("r1", agent="a", owner="w1", lease=30, entries=[])
    await store.delete_run("r1")
    for write in (
        store.append_journal("r1", "w1", ["late"], lease=30),
        store.renew_run("r1", "w1", lease=30),
        store.release_run("r1", "w1", "completed"),
    ):
        with pytest.raises(RunNotFound, match="'r1' in the store \\(deleted while running"):
            await write


async def test_every_store_opens_sessions_on_itself(store: Store) -> None:
    """`store.session(id)` is a Session over that store and that id."""
    session = store.session("s1")
    assert (session.store, session.session_id) == (store, "s1")


async def test_an_expired_lease_lets_another_worker_take_over_and_fences_the_old_one(store: Store) -> None:
    """A running run whose lease lapsed is claimable; the old owner's writes then raise RunBusy."""
    await store.start_run("r1", agent="a", owner="w1", lease=10, entries=[])
    with pytest.raises(RunBusy, match="held by another worker"):
        await store.claim_run("r1", "w2", lease=10)
    advance(store, 5)
    await store.renew_run("r1", "w1", lease=10)
    advance(store, 9)
    with pytest.raises(RunBusy):
        await store.claim_run("r1", "w2", lease=10)
    advance(store, 2)
    await store.claim_run("r1", "w2", lease=10)
    for write in (
        store.append_journal("r1", "w1", ["late"], lease=10),
        store.renew_run("r1", "w1", lease=10),
        store.release_run("r1", "w1", "completed"),
    ):
        with pytest.raises(LeaseLost, match="lost run"):
            await write
    assert await store.journal("r1") == []


async def test_starting_a_run_twice_is_refused(store: Store) -> None:
    """A run id is used once."""
    await store.start_run("r1", agent="a", owner="w1", lease=10, entries=[])
    with pytest.raises(ValueError, match="already"):
        await store.start_run("r1", agent="a", owner="w2", lease=10, entries=[])


async def test_sessions_append_read_and_clear(store: Store) -> None:
    """Messages come back in order across appends; clear empties one session only."""
    await store.session_append("s", ["m1", "m2"])
    await store.session_append("s", ["m3"])
    await store.session_append("t", ["x"])
    assert await store.session_messages("s") == ["m1", "m2", "m3"]
    await store.session_clear("s")
    assert await store.session_messages("s") == [] and await store.session_messages("t") == ["x"]


async def test_a_session_lock_has_one_holder_until_released_or_expired(store: Store) -> None:
    """The lock refuses a second owner, passes on after unlock, and after its lease lapses."""
    assert await store.lock_session("s", "a", lease=10)
    assert not await store.lock_session("s", "b", lease=10)
    await store.unlock_session("s", "b")
    assert not await store.lock_session("s", "b", lease=10)
    await store.unlock_session("s", "a")
    assert await store.lock_session("s", "b", lease=10)
    advance(store, 11)
    assert await store.lock_session("s", "a", lease=10)


async def test_a_completed_runs_session_turn_is_written_with_its_completion_or_not_at_all(store: Store) -> None:
    """release_run with a turn completes the run and appends the turn in one write; with the session's lock lost
    (or the run's lease), it raises LeaseLost and writes neither."""
    assert await store.lock_session("s", "lock-1", lease=10)
    await store.start_run("r1", agent="a", owner="w1", lease=30, entries=["start"], session="s")
    await store.release_run("r1", "w1", "completed", entries=["answer"], turn=SessionTurn("s", ["m1", "m2"], "lock-1"))
    assert await store.session_messages("s") == ["m1", "m2"]
    assert await store.journal("r1") == ["start", "answer"]
    assert (await store.run_record("r1")).status == "completed"  # type: ignore[union-attr]

    await store.start_run("r2", agent="a", owner="w1", lease=30, entries=["start"], session="s")
    advance(store, 11)
    assert await store.lock_session("s", "lock-2", lease=10)  # lock-1 lapsed; another run took the lock
    with pytest.raises(LeaseLost, match="session 's'") as lost:
        await store.release_run("r2", "w1", "completed", entries=["late"], turn=SessionTurn("s", ["m3"], "lock-1"))
    assert lost.value.session == "s" and lost.value.run_id == "r2"
    assert await store.session_messages("s") == ["m1", "m2"]
    assert await store.journal("r2") == ["start"]
    record = await store.run_record("r2")
    assert record is not None and (record.status, record.owner) == ("running", "w1")

    advance(store, 31)
    await store.claim_run("r2", "w2", lease=30)
    with pytest.raises(LeaseLost, match="lost run") as lost:
        await store.release_run("r2", "w1", "completed", turn=SessionTurn("s", ["m3"], "lock-2"))
    assert lost.value.session is None
    assert await store.session_messages("s") == ["m1", "m2"]


async def test_a_session_append_fenced_by_a_lock_token_is_refused_once_another_holder_took_the_lock(
    store: Store,
) -> None:
    """append(lock=token) writes only while the token holds the lock; renewing never takes a lost lock back."""
    assert await store.lock_session("s", "a", lease=10)
    assert await store.session_append("s", ["m1"], lock="a")
    advance(store, 11)
    assert await store.lock_session("s", "a", lease=10, renew=True)  # lapsed, but no one took it
    advance(store, 11)
    assert await store.lock_session("s", "b", lease=10)
    assert not await store.session_append("s", ["late"], lock="a")
    assert not await store.lock_session("s", "a", lease=10, renew=True)
    await store.unlock_session("s", "b")
    assert not await store.lock_session("s", "a", lease=10, renew=True)  # free now, yet not taken back
    assert not await store.session_append("s", ["late"], lock="a")
    assert await store.session_append("s", ["m2"])
    assert await store.session_messages("s") == ["m1", "m2"]


async def test_cache_entries_expire_with_the_store_clock(store: Store) -> None:
    """A cached value is served until its TTL passes; None TTL keeps it."""
    if isinstance(store, RedisStore):
        pytest.skip("Redis expires cache keys on its own clock: test_redis_store.py checks their TTL")
    await store.set("k", "v", 5)
    await store.set("forever", "f", None)
    assert await store.get("k") == "v"
    advance(store, 6)
    assert await store.get("k") is None and await store.get("forever") == "f"


async def test_cache_layer_accepts_a_store(store: Store) -> None:
    """`cache(store=...)` serves a repeated request from the store, with no second model call."""
    model = ScriptedModel(["hello", "never"])
    agent = Agent(model).use(cache(store=store))
    assert (await agent.run("hi")).output == "hello"
    assert (await agent.run("hi")).output == "hello"
    assert len(model.requests) == 1


async def test_rate_limit_layer_accepts_a_store_and_shares_its_counters(store: Store) -> None:
    """Two layers on one store share one budget: the second's call over rpm is refused."""
    agent = Agent(ScriptedModel(["a", "b"])).use(rate_limit(rpm=1, wait=False, store=store))
    other = Agent(ScriptedModel(["c"])).use(rate_limit(rpm=1, wait=False, store=store))
    other.model.name = agent.model.name = "m"  # type: ignore[attr-defined]
    await agent.run("hi")
    with pytest.raises(RateLimitExceeded) as refused:
        await other.run("hi")
    assert refused.value.retry_after == pytest.approx(60)
    advance(store, 60)
    assert (await other.run("hi")).output == "c"


async def test_rate_store_pause_and_refund(store: Store) -> None:
    """`pause` delays a key; a refunded request and tokens can be taken again."""
    assert await store.acquire("k", 10, rpm=1, tpm=10, window=60) == 0
    await store.reconcile("k", 10, 0, refund_request=True)
    assert await store.acquire("k", 10, rpm=1, tpm=10, window=60) == 0
    await store.reconcile("k", 10, 0, refund_request=True)
    await store.pause("k", 7)
    assert await store.acquire("k", 1, rpm=None, tpm=None, window=60) == pytest.approx(7)


def test_memory_store_rate_limits_hold_across_threads_each_running_its_own_event_loop() -> None:
    """Two threads, each with its own loop, reserve at once from one MemoryStore under rpm=2: a third call waits.

    The rpm the threads pass hands over between them inside `acquire`, after
    the bucket was read: the first thread there waits (at most 1 s) for the
    second to get there too, and the second waits for the first to finish.
    Without a lock around the bucket, the second writes back what it read and
    the first reservation is lost.
    """
    store = MemoryStore(clock=lambda: 100.0)
    arrivals: list[int] = []
    arriving = threading.Lock()
    second_in, first_done = threading.Event(), threading.Event()

    class HandOver(float):
        def __rmul__(self, other: float) -> float:
            with arriving:
                arrivals.append(threading.get_ident())
                order = len(arrivals)
            if order == 1:
                second_in.wait(1.0)  # never set while the first holds a lock the second waits for
            elif order == 2:
                second_in.set()
                assert first_done.wait(10)
            return float(other) * float(self)

    waits: list[float] = []

    def reserve() -> None:
        waits.append(asyncio.run(store.acquire("k", 0, rpm=HandOver(2), tpm=None, window=60)))
        if arrivals[0] == threading.get_ident():
            first_done.set()

    threads = [threading.Thread(target=reserve) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert waits == [0.0, 0.0]
    assert asyncio.run(store.acquire("k", 0, rpm=2, tpm=None, window=60)) == pytest.approx(30.0)


@pytest.mark.parametrize("kind", [MemoryStore, CacheMemoryStore])
def test_a_memory_cache_read_in_one_thread_and_evicted_in_another_never_raises(kind: Any) -> None:
    """A read in one thread and an eviction in another (each thread its own loop) never raise.

    The reader's clock lets a writer in another thread go first, right after
    the reader looked its entry up: the writer's `set` evicts that entry (one
    entry at most). Without a lock around the read, the reader then touches
    a key that is gone (KeyError).
    """
    writer_done, armed = threading.Event(), threading.Event()
    writer = threading.Thread(target=lambda: (asyncio.run(store.set("b", "2", None)), writer_done.set()))

    def clock() -> float:
        if armed.is_set() and threading.current_thread() is not writer:
            armed.clear()
            writer.start()
            writer_done.wait(1.0)  # never set while the reader holds a lock the writer waits for
        return 100.0

    store = kind(clock=clock, max_entries=1)
    asyncio.run(store.set("a", "1", None))
    armed.set()
    assert asyncio.run(store.get("a")) in ("1", None)
    writer.join()
    assert asyncio.run(store.get("b")) == "2"


HOLD_LOCK = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
db.execute("INSERT INTO onion_cache VALUES ('held', 'x', NULL)")
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""


async def test_sqlite_store_never_blocks_the_loop_while_another_process_holds_the_write_lock(tmp_path: Path) -> None:
    """A write waiting on another process's lock runs in a thread: the loop keeps ticking meanwhile."""
    path = tmp_path / "locked.db"
    async with SQLiteStore(path, busy_timeout=20) as store:
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout is not None and holder.stdin is not None
            assert await asyncio.to_thread(holder.stdout.readline) == "locked\n"
            writing = asyncio.create_task(store.session_append("s", ["m"]))
            ticks = 0
            while ticks < 20:
                await asyncio.sleep(0.005)
                ticks += 1
            assert not writing.done()
            holder.stdin.write("go\n")
            holder.stdin.flush()
            await writing
        finally:
            holder.stdin.close()  # type: ignore[union-attr]
            await asyncio.to_thread(holder.wait)
        assert await store.session_messages("s") == ["m"] and await store.get("held") == "x"


async def test_sqlite_store_is_shared_by_two_connections(tmp_path: Path) -> None:
    """Two SQLiteStore objects on one file see each other's runs; a claim is atomic across them."""
    async with SQLiteStore(tmp_path / "x.db") as first, SQLiteStore(tmp_path / "x.db") as second:
        await first.start_run("r", agent="a", owner="w0", lease=30, entries=["e"])
        await first.release_run("r", "w0", "paused", state="{}")
        claims = await asyncio.gather(
            first.claim_run("r", "w1", lease=30), second.claim_run("r", "w2", lease=30), return_exceptions=True
        )
        assert sorted(type(c).__name__ for c in claims) == ["RunBusy", "RunRecord"]
        assert await second.journal("r") == ["e"]


@pytest.mark.parametrize("content", [b"name,amount\nalice,5\n" * 300, b"SQLite format 3\x00" + b"\xff" * 4000])
def test_a_file_that_is_not_an_intact_sqlite_database_is_refused_at_open_naming_it(
    tmp_path: Path, content: bytes
) -> None:
    """Opening a CSV file, or an SQLite file whose header is damaged, raises StoreUnavailable naming the file and
    saying what to do (not a raw sqlite3.DatabaseError); the file is left as it was."""
    path = tmp_path / "onion.db"
    path.write_bytes(content)
    with pytest.raises(StoreUnavailable, match=rf"SQLiteStore\('{path}'\): .*not an intact SQLite database"):
        SQLiteStore(path)
    assert path.read_bytes() == content


async def test_a_store_whose_file_is_damaged_raises_store_unavailable_naming_it_on_reads_and_writes(
    tmp_path: Path,
) -> None:
    """Pages of the file overwritten while no store had it open: every later read and write (runs, journals,
    sessions, an agent's run) raises StoreUnavailable naming the file, instead of "database disk image is
    malformed" as a raw sqlite3.DatabaseError."""
    path = tmp_path / "onion.db"
    async with SQLiteStore(path) as store:
        for i in range(100):
            await store.start_run(f"r{i}", agent="a", owner="w", lease=30, entries=["x" * 500], session="s")
            await store.session_append("s", ["m" * 500])
    with path.open("r+b") as file:
        file.seek(2 * 4096)
        file.write(bytes(range(256)) * ((path.stat().st_size - 3 * 4096) // 256))
    async with SQLiteStore(path) as store:
        operations = [
            store.run_record("r5"),
            store.journal("r90"),
            store.runs(),
            store.session_messages("s"),
            store.start_run("new", agent="a", owner="w", lease=30, entries=["y"]),
            store.session_append("s", ["m"]),
            Agent(ScriptedModel(["hi"]), store=store).run("hi", session="s"),
        ]
        for outcome in await asyncio.gather(*operations, return_exceptions=True):
            assert isinstance(outcome, StoreUnavailable), repr(outcome)
            assert f"SQLiteStore('{path}')" in str(outcome) and "not an intact SQLite database" in str(outcome)
