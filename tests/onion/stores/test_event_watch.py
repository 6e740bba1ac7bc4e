"""A follower on another process waits for a run's next event on Redis: Redis says when it comes (`XREAD BLOCK`,
one connection per process for every run followed), instead of the follower reading the store again and again."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio

from onion.stores import RedisStore, SQLiteStore
from onion.stores._events import wait_for_events

WAITS = 30.0
"""Each wait's timeout: a wait that returns before it was woken by what the test added."""


@pytest.fixture
async def stores(redis_server: Any) -> AsyncIterator[tuple[RedisStore, RedisStore, Any]]:
    """Two stores on one Redis of the test's own (a writer and a follower, as two server processes), and a plain
    client to ask Redis what it was sent."""
    namespace = f"t{uuid.uuid4().hex[:8]}"
    writer, follower = (
        RedisStore(redis_server.url, namespace=namespace),
        RedisStore(redis_server.url, namespace=namespace),
    )
    plain = redis.asyncio.Redis.from_url(redis_server.url, decode_responses=True)
    yield writer, follower, plain
    await writer.aclose()
    await follower.aclose()
    await plain.aclose()


async def calls(plain: Any, command: str) -> int:
    return int((await plain.info("commandstats")).get(f"cmdstat_{command}", {}).get("calls", 0))


async def blocked_reads(plain: Any) -> int:
    return sum(1 for client in await plain.client_list() if client.get("cmd") == "xread")


async def test_a_waiting_follower_is_woken_by_the_next_event_and_reads_nothing_meanwhile(stores: Any) -> None:
    writer, follower, plain = stores
    await writer.add_events("run-1", [(1, "one")], ended=False, keep=60)
    reads = await calls(plain, "xrange")
    waiting = asyncio.create_task(follower.wait_events("run-1", 1, WAITS))
    await asyncio.sleep(0.5)
    assert not waiting.done()  # event 1 is not news
    assert await calls(plain, "xrange") == reads and await calls(plain, "xread") <= 2  # no polling while it waits
    await writer.add_events("run-1", [(2, "two")], ended=False, keep=60)
    await asyncio.wait_for(waiting, WAITS / 2)
    assert await follower.read_events("run-1", 1) == ([(2, "two")], False)


async def test_the_end_of_a_stream_wakes_its_follower_too(stores: Any) -> None:
    writer, follower, _ = stores
    await writer.add_events("run-1", [(1, "one")], ended=False, keep=60)
    waiting = asyncio.create_task(follower.wait_events("run-1", 1, WAITS))
    await asyncio.sleep(0.2)
    await writer.add_events("run-1", [], ended=True, keep=60)
    await asyncio.wait_for(waiting, WAITS / 2)
    assert await follower.read_events("run-1", 1) == ([], True)


async def test_thirty_runs_followed_at_once_share_one_blocked_connection_and_each_is_woken(stores: Any) -> None:
    """Followers come one by one while the read blocks (each wakes it to be named); a run that has not streamed
    yet is waited on too; each is woken by its own run's event only."""
    writer, follower, plain = stores
    waits = []
    for n in range(30):
        waits.append(asyncio.create_task(follower.wait_events(f"run-{n}", 0, WAITS)))
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)
    assert await blocked_reads(plain) == 1 and not any(wait.done() for wait in waits)
    for n in range(0, 30, 2):
        await writer.add_events(f"run-{n}", [(1, "first")], ended=False, keep=60)
    await asyncio.wait_for(asyncio.gather(*waits[::2]), WAITS / 2)
    await asyncio.sleep(0.3)
    assert not any(wait.done() for wait in waits[1::2])
    for wait in waits[1::2]:
        wait.cancel()
    await asyncio.gather(*waits[1::2], return_exceptions=True)
    await asyncio.sleep(0.1)
    assert follower._watchers and not next(iter(follower._watchers.values()))._waiting  # nothing left behind
    await follower.aclose()
    await asyncio.sleep(0.1)
    assert await blocked_reads(plain) == 0  # closing the store ends its blocked read


async def test_a_follower_of_a_redis_that_is_down_is_not_kept_waiting() -> None:
    """The blocked read fails: the waiter returns at once, to hear from its own read what failed."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    store = RedisStore(f"redis://127.0.0.1:{port}/0", connect_timeout=0.5)
    await asyncio.wait_for(store.wait_events("run-1", 0, WAITS), WAITS / 2)
    await asyncio.wait_for(store.wait_events("run-1", 0, WAITS), WAITS / 2)  # resting: a short wait, no new try
    await store.aclose()


async def test_a_store_that_cannot_tell_is_read_again_after_a_short_wait(tmp_path: Any) -> None:
    """SQLite has no `wait_events`: `wait_for_events` waits `POLL` seconds (never past the timeout)."""
    async with SQLiteStore(tmp_path / "onion.db") as store:
        await asyncio.wait_for(wait_for_events(store, "run-1", 0, WAITS), WAITS / 2)


async def test_a_follower_behind_another_on_the_same_run_is_woken_by_events_already_kept(stores: Any) -> None:
    """The running read names the run after event 5 (one follower is there); a second follower waiting after
    event 3, with 4 and 5 kept, wakes it to read from 3: it returns at once, not at its timeout."""
    writer, follower, _ = stores
    await writer.add_events("run-1", [(n, f"e{n}") for n in range(1, 6)], ended=False, keep=60)
    ahead = asyncio.create_task(follower.wait_events("run-1", 5, WAITS))
    await asyncio.sleep(0.3)
    await asyncio.wait_for(follower.wait_events("run-1", 3, WAITS), WAITS / 2)
    assert not ahead.done()
    ahead.cancel()
    await asyncio.gather(ahead, return_exceptions=True)


async def test_a_cancelled_follower_is_cancelled_even_when_woken_in_the_same_turn(stores: Any) -> None:
    """Its client left as its event came: the wait ends cancelled (the follower must not go on streaming)."""
    _, follower, _ = stores
    waiting = asyncio.create_task(follower.wait_events("run-1", 0, WAITS))
    await asyncio.sleep(0.3)
    watcher = next(iter(follower._watchers.values()))
    (future,) = next(iter(watcher._waiting.values()))
    future.set_result(None)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_each_watch_closes_its_connection_when_it_ends(redis_server: Any) -> None:
    """A watch ends once nobody waits (after its blocked read, at most half the store's timeout): its connection
    is closed with it, never left open until the garbage collector finds it."""
    plain = redis.asyncio.Redis.from_url(redis_server.url, decode_responses=True)
    follower = RedisStore(redis_server.url, namespace=f"t{uuid.uuid4().hex[:8]}", timeout=0.4)
    before = len(await plain.client_list())
    for _ in range(4):
        await follower.wait_events("run-1", 0, 0.05)
        await asyncio.sleep(0.5)  # the watch's read (0.2 s) ends, and the watch with it
    assert len(await plain.client_list()) <= before + 1  # the store's own pooled connection at most
    await follower.aclose()
    await plain.aclose()


def test_a_store_watched_from_two_threads_closes_from_either() -> None:
    """Each thread's loop has its own watch; closing the store from one ends the other's there, never raising."""
    import threading

    from onion.testing import RedisServer

    with RedisServer() as server:
        store = RedisStore(server.url, namespace=f"t{uuid.uuid4().hex[:8]}")
        started = threading.Event()

        def other() -> None:
            async def wait() -> None:
                waiting = asyncio.create_task(store.wait_events("run-2", 0, WAITS))
                await asyncio.sleep(0.2)
                started.set()
                await waiting

            asyncio.run(wait())

        thread = threading.Thread(target=other)
        thread.start()
        started.wait(10)

        async def here() -> None:
            await asyncio.wait_for(store.wait_events("run-1", 0, 0.1), 5)
            await store.aclose()

        asyncio.run(here())
        thread.join(10)
        assert not thread.is_alive()
