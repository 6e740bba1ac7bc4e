"""`EventStore` (SQLite, Redis): a served run's events, numbered across its streams, each stream ended by a mark."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from onion.stores import EventStore, MemoryStore, RedisStore, SQLiteStore


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    if request.param == "sqlite":
        async with SQLiteStore(tmp_path / "onion.db", clock=Clock()) as sqlite:
            yield sqlite
    else:
        namespace = f"t{uuid.uuid4().hex[:12]}"
        async with RedisStore(request.getfixturevalue("redis_url"), namespace=namespace) as redis:
            yield redis


async def test_the_shared_stores_keep_events_and_the_memory_store_does_not(store: Any) -> None:
    """SQLite and Redis are `EventStore`s; `MemoryStore` is not (its server process is the only one)."""
    assert isinstance(store, EventStore) and not isinstance(MemoryStore(), EventStore)


async def test_events_are_read_after_a_number_up_to_the_end_of_their_stream(store: Any) -> None:
    """A reader gets the events after its last one, in order, and whether their stream ended; unknown: None."""
    assert await store.read_events("r", 0) == ([], None) and await store.last_event("r") == (0, True)
    assert await store.add_events("r", [(1, "one"), (2, "two")], ended=False, keep=60)
    assert await store.read_events("r", 0) == ([(1, "one"), (2, "two")], False)
    assert await store.read_events("r", 1) == ([(2, "two")], False) and await store.last_event("r") == (2, False)
    assert await store.add_events("r", [(3, "three")], ended=True, keep=60)
    assert await store.read_events("r", 1) == ([(2, "two"), (3, "three")], True)
    assert await store.read_events("r", 3) == ([], True) and await store.last_event("r") == (3, True)
    assert await store.read_events("r", 1, limit=1) == ([(2, "two")], False)


async def test_a_resume_stream_follows_the_ended_one_and_a_reader_of_either_gets_its_own_stream(store: Any) -> None:
    """After a stream ended at 2, a resume's events go on at 3: a reader after 1 gets 2 and the end; a reader after 2
    (the paused stream's last id) gets the resume's events."""
    await store.add_events("r", [(1, "a"), (2, "paused")], ended=True, keep=60)
    await store.add_events("r", [(3, "resumed")], ended=False, keep=60)
    assert await store.read_events("r", 1) == ([(2, "paused")], True)
    assert await store.read_events("r", 2) == ([(3, "resumed")], False)
    await store.add_events("r", [], ended=True, keep=60)
    assert await store.read_events("r", 2) == ([(3, "resumed")], True) and await store.last_event("r") == (3, True)
    assert await store.read_events("r", 3) == ([], True)


async def test_events_numbered_at_or_below_the_last_kept_are_refused(store: Any) -> None:
    """A second process writing the same numbers (or ending a stream twice) is told so, and nothing is written."""
    await store.add_events("r", [(1, "a"), (2, "b")], ended=False, keep=60)
    assert not await store.add_events("r", [(2, "other")], ended=False, keep=60)
    assert await store.add_events("r", [], ended=True, keep=60)
    assert not await store.add_events("r", [], ended=True, keep=60)
    assert await store.read_events("r", 0) == ([(1, "a"), (2, "b")], True)


async def test_a_runs_events_go_keep_seconds_after_the_last_was_added(store: Any) -> None:
    """Retention counts from the last addition: after it, the store keeps none of the run's events (None)."""
    await store.add_events("r", [(1, "a")], ended=False, keep=0.3)
    await store.add_events("other", [(1, "b")], ended=False, keep=60)
    if isinstance(store, SQLiteStore):
        store.clock.now += 0.5  # type: ignore[attr-defined]
    else:
        await asyncio.sleep(0.5)
    assert await store.read_events("r", 0) == ([], None) and await store.last_event("r") == (0, True)
    assert await store.read_events("other", 0) == ([(1, "b")], False)
