"""Stores: where durable runs, their journals, sessions, cached responses and rate counters live.

One store object serves every purpose: `Agent(store=...)`, `cache(store=...)`
and `rate_limit(store=...)` all take it. `MemoryStore()` keeps everything in
this process; `SQLiteStore(path)` in a file shared by the processes of one
machine; `RedisStore(url)` on a Redis server shared by many machines
(`concurrency(store=...)` takes it too). Another store implements the
protocols in `onion.stores` (`RunStore`, `SessionStore`, `CacheStore`,
`RateStore`; `SpendStore` for shared budgets, `SlotStore` for concurrency caps, `SessionTenants` for
sessions kept apart by tenant, `EventStore` for the events `onion.serve` streamed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._exports import export, shown_in
from ._events import EventStore
from ._protocols import (
    CacheStore,
    RateStore,
    RunRecord,
    RunStatus,
    RunStore,
    SessionStore,
    SessionTenants,
    SessionTurn,
    SlotStore,
    Store,
)
from ._session import Session
from ._spending import SpendStore

if TYPE_CHECKING:
    from ._buckets import MemoryRateStore
    from ._memory import MemoryStore
    from ._memory_cache import MemoryCache
    from ._redis import RedisStore
    from ._spending import MemorySpendStore
    from ._sqlite import SQLiteStore

_LAZY = {
    "MemoryCache": "._memory_cache",
    "MemoryRateStore": "._buckets",
    "MemorySpendStore": "._spending",
    "MemoryStore": "._memory",
    "RedisStore": "._redis",
    "SQLiteStore": "._sqlite",
}
"""The stores themselves load when first named (`import onion` never loads sqlite3)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'onion.stores' has no attribute {name!r}")
    import importlib

    value = shown_in(__name__, getattr(importlib.import_module(module, __name__), name))
    globals()[name] = value
    return value


__all__ = [
    "CacheStore",
    "EventStore",
    "MemoryCache",
    "MemoryRateStore",
    "MemorySpendStore",
    "MemoryStore",
    "RateStore",
    "RedisStore",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "SQLiteStore",
    "Session",
    "SessionStore",
    "SessionTenants",
    "SessionTurn",
    "SlotStore",
    "SpendStore",
    "Store",
]

export(globals())
