"""`cache`: serve identical model requests (and, opted in, tool calls) from a store."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from onion import ModelCall, ModelNext, ModelResponse, ToolCall, ToolNext, ToolResult, stores
from onion.stores import CacheStore

from ._cache_entries import (
    credential_hash,
    decode_response,
    encode_response,
    hashed_credentials,
    holds_sensitive,
    model_options,
    request_key,
    response_contents,
    tool_key,
)

if TYPE_CHECKING:
    from pathlib import Path


class MemoryCache(stores.MemoryCache):
    """A bounded in-memory LRU (the default): the least recently used entry goes first.

    `clock` (seconds, default `time.monotonic`) decides TTLs; tests pass a
    fake one. Safe to share across threads, each with its own event loop.
    """

    def __len__(self) -> int:
        return len(self._cache)


class SQLiteCache:
    """A SQLite file shared by every process on this machine; survives restarts.

    Queries run in a worker thread, so a lock held by another process (up
    to `busy_timeout` seconds) never blocks the event loop. Expired rows are
    deleted when read and by `purge()`. Close it with `close()` or use it
    as a context manager. `clock` (seconds since the epoch, default
    `time.time`, as every process sharing the file must agree) decides TTLs.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        table: str = "onion_cache",
        busy_timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        import sqlite3

        if not table.isidentifier():
            raise ValueError(f"SQLiteCache: table name {table!r} must be an identifier")
        self.path, self.table, self.clock = str(path), table, clock
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=busy_timeout)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, value TEXT NOT NULL, expires REAL)"
        )

    async def get(self, key: str) -> str | None:
        return await asyncio.to_thread(self._get, key)

    async def set(self, key: str, value: str, ttl: float | None) -> None:
        expires = None if ttl is None else self.clock() + ttl
        await asyncio.to_thread(
            self._execute, f"INSERT OR REPLACE INTO {self.table} VALUES (?, ?, ?)", key, value, expires
        )

    def _get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute(f"SELECT value, expires FROM {self.table} WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            if row[1] is not None and row[1] < self.clock():
                self._db.execute(f"DELETE FROM {self.table} WHERE key = ?", (key,))
                return None
            return str(row[0])

    def _execute(self, statement: str, *parameters: Any) -> int:
        with self._lock:
            return self._db.execute(statement, parameters).rowcount

    def purge(self) -> int:
        """Delete expired rows; returns how many."""
        return self._execute(f"DELETE FROM {self.table} WHERE expires < ?", self.clock())

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"<SQLiteCache {self.path!r} table={self.table}>"

    def __enter__(self) -> SQLiteCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


KeyFunction = Callable[[ModelCall | ToolCall], object]
"""`cache(key=...)`: the part of a call's key your code decides (say the user); `None` skips the cache."""

logger = logging.getLogger("onion.cache")
_UNCACHED = object()


class cache:
    """Answer a model request seen before from `store`, without calling the model.

    The key is a SHA-256 of the canonical request: messages, tools (with
    their schemas), the model and its options (`model_options`), settings,
    `output_type` (its schema, when not `str`) and `namespace`, independent
    of dict order and of the tool call ids the provider chose. Credentials
    (the model's API key, token and client headers, credential settings
    such as an `Authorization` header) count by a one-way hash
    (`credential_hash`), so calls under two API keys never share an entry
    and nothing secret reaches the store. A hit is a
    `ModelResponse` with `cached=True` and zero usage, reusing the stored
    tool call ids (an image's or document's bytes count by their SHA-256).
    Errors are never cached (nor error tool results, nor tool results holding
    images or documents). A
    store that cannot write (locked, full) is logged on `onion.cache`, once
    until it writes again, and the answer returned. An answer or tool result
    holding a secret or personal data (what `patterns.scrub_value` hides) is
    never stored, so nothing of the kind reaches the store's disk.
    `ttl` is in seconds (`None`: forever). `tools` opts tool calls in,
    `True` or names; their results are keyed by tool name and arguments.
    A tool that takes the call context (`Tool.takes_context`) is never
    cached unless `key` is given: `key(call)` (a `ModelCall` or `ToolCall`;
    `call.run.state` holds the run's state) joins every key, so entries are
    kept apart per value, and returning `None` leaves that call uncached.
    Each call counts into the run's counts (kept in `run.private`, where a
    caller's `state=` cannot set them), reported in `run.state["cache"]`
    (`{"hits": n, "misses": m}`), and into the layer's `hits` / `misses`. `store` defaults to a
    `MemoryCache`; `SQLiteCache(path)` persists across processes. A hit that asks for tools runs them again
    in the new run (their side effects too): `tool_calls=False` caches only answers without tool calls.
    """

    __slots__ = (
        "_failing",
        "_reported",
        "hits",
        "key",
        "misses",
        "namespace",
        "store",
        "tool_calls",
        "tools",
        "ttl",
        "wrap_only",
    )

    nondeterministic = "a hit depends on what else ran on this worker"
    """Why a replay of a run may decide differently with this layer: engines that replay workflow code refuse it."""

    def __init__(
        self,
        ttl: float | None = None,
        store: CacheStore | None = None,
        *,
        namespace: str = "",
        tools: bool | Collection[str] = False,
        key: KeyFunction | None = None,
        tool_calls: bool = True,
    ) -> None:
        if ttl is not None and ttl <= 0:
            raise ValueError(f"cache: ttl must be positive seconds or None, got {ttl!r}")
        if key is not None and not callable(key):
            raise TypeError(f"cache: key must be a function of the call (or None), got {key!r}")
        self.ttl, self.namespace, self.tools, self.key = ttl, namespace, tools, key
        self.tool_calls = tool_calls
        self.wrap_only = ("model", "tool") if tools else ("model",)
        self.store: CacheStore = store if store is not None else MemoryCache()
        self.hits = self.misses = 0
        self._reported: set[str] = set()
        self._failing = False

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        scope = self._scope(call)
        if scope is _UNCACHED:
            return await call_next(call)
        key = request_key(call, self.namespace, scope)
        found = await self.store.get(key)
        if found is not None:
            hit = decode_response(found)
            if self.tool_calls or not hit.message.tool_calls:  # (an entry stored before tool_calls=False)
                self._count(call, hit=True)
                return hit
        self._count(call, hit=False)
        response = await call_next(call)
        storable = self.tool_calls or not response.message.tool_calls
        if storable and not response.cached and not holds_sensitive(response_contents(response.message)):
            await self._store(key, encode_response(response, call))
        return response

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        scope = self._scope(call) if self._caches_tool(call) else _UNCACHED
        if scope is _UNCACHED:
            return await call_next(call)
        key = tool_key(call, self.namespace, scope)
        found = await self.store.get(key)
        if found is not None:
            self._count(call, hit=True)
            return ToolResult(content=json.loads(found), call_id=call.id)
        self._count(call, hit=False)
        result = await call_next(call)
        if not result.is_error and isinstance(result.content, str) and not holds_sensitive(result.content):
            await self._store(key, json.dumps(result.content))
        return result

    async def _store(self, key: str, value: str) -> None:
        """Store an entry; a store that cannot write is logged, once until it writes again, not raised."""
        try:
            await self.store.set(key, value, self.ttl)
        except Exception as error:
            if not self._failing:
                self._failing = True
                logger.warning(
                    "cache: %r cannot store entries (%s: %s); answers are returned uncached until it can",
                    self.store,
                    type(error).__name__,
                    error,
                )
        else:
            self._failing = False

    def _scope(self, call: ModelCall | ToolCall) -> object:
        """What joins the call's key: `key(call)` (`None` without a `key`); `_UNCACHED` to leave it uncached."""
        if self.key is None:
            return None
        scope = self.key(call)
        return _UNCACHED if scope is None else scope

    def _caches_tool(self, call: ToolCall) -> bool:
        """Whether `tools` opts this call in; without a `key`, a tool that takes the context never is."""
        named = not isinstance(self.tools, bool) and call.name in self.tools
        if not (self.tools is True or named):
            return False
        if self.key is None and call.tool is not None and call.tool.takes_context:
            if named and call.name not in self._reported:
                self._reported.add(call.name)
                logger.warning(
                    "cache: tool %s takes the call context, so it is not cached; "
                    "give cache(key=...) to cache it per key",
                    call.name,
                )
            return False
        return True

    def _count(self, ctx: ModelCall | ToolCall, *, hit: bool) -> None:
        run = ctx.run
        counts = run.private.get("cache")
        if counts is None:
            counts = run.private["cache"] = {"hits": 0, "misses": 0}
        if hit:
            self.hits += 1
            counts["hits"] += 1
        else:
            self.misses += 1
            counts["misses"] += 1
        run.state["cache"] = {"hits": counts["hits"], "misses": counts["misses"]}


MemoryStore = MemoryCache
"""The name `MemoryCache` had before it was told apart from `onion.stores.MemoryStore` (which keeps runs too)."""
SQLiteStore = SQLiteCache
"""The name `SQLiteCache` had before it was told apart from `onion.stores.SQLiteStore` (which keeps runs too)."""

__all__ = [
    "CacheStore",
    "KeyFunction",
    "MemoryCache",
    "MemoryStore",
    "SQLiteCache",
    "SQLiteStore",
    "cache",
    "credential_hash",
    "decode_response",
    "encode_response",
    "hashed_credentials",
    "model_options",
    "request_key",
    "tool_key",
]
