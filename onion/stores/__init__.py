"""Stores: where durable runs, their journals, sessions, cached responses and rate counters live.

One store object serves every purpose: `Agent(store=...)`, `cache(store=...)`
and `rate_limit(store=...)` all take it. `MemoryStore()` keeps everything in
this process; `SQLiteStore(path)` in a file shared by the processes of one
machine; `RedisStore(url)` on a Redis server shared by many machines
(`concurrency(store=...)` takes it too). Another store implements the
protocols in `onion.stores` (`RunStore`, `SessionStore`, `CacheStore`,
`RateStore`, and `SlotStore` for concurrency caps).
"""

from __future__ import annotations

from ._buckets import MemoryRateStore
from ._memory import MemoryStore
from ._memory_cache import MemoryCache
from ._protocols import (
    CacheStore,
    RateStore,
    RunRecord,
    RunStatus,
    RunStore,
    SessionStore,
    SessionTurn,
    SlotStore,
    Store,
)
from ._redis import RedisStore
from ._session import Session
from ._sqlite import SQLiteStore

__all__ = [
    "CacheStore",
    "MemoryCache",
    "MemoryRateStore",
    "MemoryStore",
    "RateStore",
    "RedisStore",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "SQLiteStore",
    "Session",
    "SessionStore",
    "SessionTurn",
    "SlotStore",
    "Store",
]
