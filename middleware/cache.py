"""`cache`: serve identical model requests (and, opted in, tool calls) from a store."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from onion import (
    Handler,
    Message,
    ModelCall,
    ModelResponse,
    Tool,
    ToolCall,
    ToolRequest,
    ToolResult,
    Usage,
    output_schema,
)

from .patterns import SECRET_NAME, SECRETS, scrub, scrub_value

if TYPE_CHECKING:
    from pathlib import Path


class CacheStore(Protocol):
    """Where cached entries live: text values under text keys, each with an optional TTL."""

    async def get(self, key: str) -> str | None: ...

    async def set(self, key: str, value: str, ttl: float | None) -> None: ...


class MemoryStore:
    """A bounded in-memory LRU (the default): the least recently used entry goes first.

    `clock` (seconds, default `time.monotonic`) decides TTLs; tests pass a fake one.
    """

    def __init__(self, max_entries: int = 1024, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.clock = clock
        self._entries: OrderedDict[str, tuple[str, float]] = OrderedDict()

    async def get(self, key: str) -> str | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] < self.clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[0]

    async def set(self, key: str, value: str, ttl: float | None) -> None:
        self._entries[key] = (value, float("inf") if ttl is None else self.clock() + ttl)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class SQLiteStore:
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
            raise ValueError(f"SQLiteStore: table name {table!r} must be an identifier")
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
        return f"<SQLiteStore {self.path!r} table={self.table}>"

    def __enter__(self) -> SQLiteStore:
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
    `output_type` (its schema, when not `str`) and `namespace`, with
    credentials scrubbed, independent of dict order and of the tool call
    ids the provider chose. A hit is a
    `ModelResponse` with `cached=True` and zero usage, reusing the stored
    tool call ids. Errors are never cached (nor error tool results). A
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
    Each call counts into `run.state["cache"]` (`{"hits": n, "misses": m}`)
    and into the layer's `hits` / `misses`. `store` defaults to a
    `MemoryStore`; `SQLiteStore(path)` persists across processes.
    """

    __slots__ = ("_failing", "_reported", "hits", "key", "misses", "namespace", "store", "tools", "ttl", "wrap_only")

    def __init__(
        self,
        ttl: float | None = None,
        store: CacheStore | None = None,
        *,
        namespace: str = "",
        tools: bool | Collection[str] = False,
        key: KeyFunction | None = None,
    ) -> None:
        if ttl is not None and ttl <= 0:
            raise ValueError(f"cache: ttl must be positive seconds or None, got {ttl!r}")
        if key is not None and not callable(key):
            raise TypeError(f"cache: key must be a function of the call (or None), got {key!r}")
        self.ttl, self.namespace, self.tools, self.key = ttl, namespace, tools, key
        self.wrap_only = ("model", "tool") if tools else ("model",)
        self.store: CacheStore = store if store is not None else MemoryStore()
        self.hits = self.misses = 0
        self._reported: set[str] = set()
        self._failing = False

    async def wrap_model(self, call: ModelCall, call_next: Handler) -> ModelResponse:
        scope = self._scope(call)
        if scope is _UNCACHED:
            return await call_next(call)  # type: ignore[no-any-return]
        key = request_key(call, self.namespace, scope)
        found = await self.store.get(key)
        if found is not None:
            self._count(call, hit=True)
            return decode_response(found)
        self._count(call, hit=False)
        response: ModelResponse = await call_next(call)
        if not response.cached and not _holds_sensitive(_contents(response.message)):
            await self._store(key, encode_response(response, call))
        return response

    async def wrap_tool(self, call: ToolCall, call_next: Handler) -> ToolResult:
        scope = self._scope(call) if self._caches_tool(call) else _UNCACHED
        if scope is _UNCACHED:
            return await call_next(call)  # type: ignore[no-any-return]
        key = _digest({"ns": self.namespace, "scope": scope, "tool": call.name, "args": call.args})
        found = await self.store.get(key)
        if found is not None:
            self._count(call, hit=True)
            return ToolResult(content=json.loads(found), call_id=call.id)
        self._count(call, hit=False)
        result: ToolResult = await call_next(call)
        if not result.is_error and not _holds_sensitive(result.content):
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
        counts = ctx.run.state.get("cache")
        if counts is None:
            counts = ctx.run.state["cache"] = {"hits": 0, "misses": 0}
        if hit:
            self.hits += 1
            counts["hits"] += 1
        else:
            self.misses += 1
            counts["misses"] += 1


def request_key(call: ModelCall, namespace: str = "", scope: object = None) -> str:
    """The cache key of a model request: stable across processes and dict orderings.

    `scope` is what `cache(key=...)` returned for the call (`None` without one).

    A tool list's part is serialized once per distinct list of `Tool`
    objects (see `_tools_part`); messages and settings on every call.
    """
    ids: dict[str, str] = {}
    messages = []
    for m in call.messages:
        calls = [[_local(ids, c.id), c.name, c.args, c.raw_args] for c in m.tool_calls] if m.tool_calls else []
        messages.append((m.role, m.text, calls, _local(ids, m.tool_call_id), m.is_error, m.meta))
    settings = scrub_value(call.settings, SECRETS) if call.settings else None
    head = (4, namespace, scope, model_options(call.model), settings, messages)
    digest = hashlib.sha256(_utf8(_canonical(head)))
    digest.update(_tools_part(call.tools))
    if call.output_type is not str:
        digest.update(_utf8(output_schema(call.output_type).key))
    return digest.hexdigest()


_PLAIN = (str, int, float, bool, type(None))


def model_options(model: Any) -> dict[str, Any]:
    """What of `model` decides its answers: its class, its public plain-valued attributes, its `base_url`.

    Plain values are str, int, float, bool and None (`AnthropicModel.max_tokens`,
    `OpenAIChatModel.system_role`); clients, lists and private attributes are
    left out, and credentials are scrubbed (`scrub_value` with `SECRETS`: a
    value named like one, `api_key`, `password`, or shaped like one).
    """
    options = {
        name: value
        for name, value in getattr(model, "__dict__", {}).items()
        if isinstance(value, _PLAIN) and not name.startswith("_")
    }
    options.setdefault("name", str(getattr(model, "name", model)))
    base_url = getattr(model, "base_url", None)
    if base_url is not None:
        options["base_url"] = str(base_url)
    options["class"] = f"{type(model).__module__}.{type(model).__qualname__}"
    return scrub_value(options, SECRETS)  # type: ignore[no-any-return]


def _contents(message: Message) -> list[Any]:
    """What of a response is stored: its text, tool calls' arguments (parsed and raw) and provider extras."""
    return [message.text, message.meta, [[c.args, c.raw_args] for c in message.tool_calls]]


def _holds_sensitive(value: Any) -> bool:
    """True when `value` (text or JSON-like data) holds what `patterns.scrub_value` would hide.

    That is a secret or personal data (`patterns.BUILTIN`: keys, bearer
    credentials, private keys, e-mail addresses, card numbers) in any
    string, or a value under a name like `password`.
    """
    if isinstance(value, str):
        return scrub(value) != value
    if isinstance(value, dict):
        return any(
            (isinstance(name, str) and bool(item) and SECRET_NAME.search(name) is not None)
            or _holds_sensitive(name)
            or _holds_sensitive(item)
            for name, item in value.items()
        )
    if isinstance(value, list | tuple):
        return any(_holds_sensitive(item) for item in value)
    return False


def _local(ids: dict[str, str], call_id: str | None) -> str | None:
    """A tool call id replaced by its order of appearance, so provider-chosen ids don't matter."""
    return None if call_id is None else ids.setdefault(call_id, f"#{len(ids)}")


_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr).encode
"""JSON with sorted keys, unknown values as their `repr`: the key's one serialization."""

_TOOLS_PARTS: dict[tuple[Tool, ...], bytes] = {}
_TOOLS_PARTS_MAX = 256


def _tools_part(tools: Sequence[Tool]) -> bytes:
    """The canonical bytes of a tool list (names, descriptions, schemas), memoized per list of tools.

    Keyed by the `Tool` objects themselves (identity), held strongly while
    memoized so an id is never reused; the memo is emptied past 256 lists.
    A tool's name, description and schema are read when its list is first
    seen: change a `Tool` in place after using it and the key won't notice.
    """
    key = tuple(tools)
    part = _TOOLS_PARTS.get(key)
    if part is None:
        part = _utf8(_canonical([[t.name, t.description, t.parameters] for t in tools]))
        if len(_TOOLS_PARTS) >= _TOOLS_PARTS_MAX:
            _TOOLS_PARTS.clear()
        _TOOLS_PARTS[key] = part
    return part


def _digest(value: Any) -> str:
    return hashlib.sha256(_utf8(_canonical(value))).hexdigest()


def _utf8(text: str) -> bytes:
    """`text` as UTF-8, a lone surrogate (an undecodable file name) as its own bytes: keys never raise nor collide."""
    return text.encode("utf-8", "surrogatepass")


def encode_response(response: ModelResponse, call: ModelCall) -> str:
    """A response as ASCII JSON text (so any store holds it, lone surrogates included): text, tool calls
    with ids and args, stop reason, model, meta."""
    message = response.message
    return json.dumps(
        {
            "text": message.text,
            "tool_calls": [[c.id, c.name, c.args, c.raw_args] for c in message.tool_calls],
            "meta": message.meta,
            "stop_reason": response.stop_reason,
            "model": response.model or str(getattr(call.model, "name", "")) or None,
        },
        default=repr,
    )


def decode_response(text: str) -> ModelResponse:
    """The cached `ModelResponse` stored as `text`: `cached=True`, zero usage."""
    data = json.loads(text)
    calls = [ToolRequest(id=i, name=n, args=a, raw_args=r) for i, n, a, r in data["tool_calls"]]
    message = Message.assistant(data["text"], calls)
    message.meta = data["meta"]
    return ModelResponse(message, Usage(), data["stop_reason"], model=data["model"], cached=True)
