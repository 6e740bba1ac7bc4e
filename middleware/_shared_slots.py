"""`SharedSlots`: concurrency slots kept in a store, shared by every worker that uses it."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator

from onion.stores import SlotStore
from onion.tracing import waited


class SharedSlots:
    """`limit` slots of `key` in `store`, for every process using the store.

    Waiting polls the store (from `poll` seconds, doubling up to 0.25 s);
    a holder renews its slot every `lease / 3` seconds, so the slot of a
    worker that died frees itself `lease` seconds later.
    """

    __slots__ = ("key", "lease", "limit", "poll", "store", "waiting")

    def __init__(self, store: SlotStore, key: str, limit: int, *, lease: float = 30.0, poll: float = 0.01) -> None:
        self.store, self.key, self.limit, self.lease, self.poll = store, key, limit, lease, poll
        self.waiting = 0

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """Hold one slot for the block: wait for it, renew it while held, give it back after."""
        owner = uuid.uuid4().hex
        if not await self.store.take_slot(self.key, owner, self.limit, self.lease):
            await self._wait(owner)
        renewing = asyncio.create_task(self._renew(owner))
        try:
            yield
        finally:
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
            await asyncio.shield(self.store.free_slot(self.key, owner))

    async def _wait(self, owner: str) -> None:
        started, pause = time.perf_counter(), self.poll
        self.waiting += 1
        try:
            while True:
                await asyncio.sleep(pause)
                if await self.store.take_slot(self.key, owner, self.limit, self.lease):
                    break
                pause = min(pause * 2, 0.25)
        finally:
            self.waiting -= 1
        waited(time.perf_counter() - started)

    async def _renew(self, owner: str) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            await self.store.take_slot(self.key, owner, self.limit, self.lease)
