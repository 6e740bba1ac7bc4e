"""`MemoryCache`: cached entries in this process's memory, the most recently used first to stay."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable


class MemoryCache:
    """A bounded LRU of text values, each until its TTL: the least recently used entry goes first.

    `clock` (seconds, default `time.monotonic`) decides TTLs; tests pass a
    fake one. One cache may serve several threads, each with its own event
    loop: every read and write of the entries holds one lock.
    """

    def __init__(self, max_entries: int = 1024, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.clock = clock
        self._cache: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._cache_lock = threading.Lock()

    async def get(self, key: str) -> str | None:
        now = self.clock()
        with self._cache_lock:
            entry = self._cache.get(key)
            if entry is None:
                return None
            if entry[1] < now:
                del self._cache[key]
                return None
            self._cache.move_to_end(key)
            return entry[0]

    async def set(self, key: str, value: str, ttl: float | None) -> None:
        expires = float("inf") if ttl is None else self.clock() + ttl
        with self._cache_lock:
            self._cache[key] = (value, expires)
            self._cache.move_to_end(key)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
