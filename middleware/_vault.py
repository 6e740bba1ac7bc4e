"""Where `pseudonymize` keeps the real values behind placeholders between runs, each store's apart."""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
import weakref
from collections import OrderedDict
from typing import Any, Literal, Protocol
from urllib.parse import parse_qs, urlsplit

from onion.stores import RedisStore, SQLiteStore


class Vault(Protocol):
    """Where `pseudonymize` keeps the real values behind a run's (or a session's) placeholders between runs.

    Keys are `run:<scope>:<run id>` (a paused run) and
    `session:<scope>:<session id>` (`vault_key`), `<scope>` naming the store
    the run or session is kept in; values map each placeholder to its real
    value. Whatever holds them holds personal data: encrypt it, or keep it
    in memory (`MemoryVault`).
    """

    async def get(self, key: str) -> dict[str, str] | None: ...

    async def set(self, key: str, values: dict[str, str]) -> None: ...

    async def delete(self, key: str) -> None: ...


class MemoryVault:
    """A `Vault` in this process's memory: the `max_entries` most recently used mappings.

    Gone when the process ends: a run paused here resumes with its real
    values only in this process. One vault may serve several threads, each
    with its own event loop: every read and write holds one lock.
    """

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._lock = threading.Lock()

    async def get(self, key: str) -> dict[str, str] | None:
        with self._lock:
            values = self._entries.get(key)
            if values is None:
                return None
            self._entries.move_to_end(key)
            return dict(values)

    async def set(self, key: str, values: dict[str, str]) -> None:
        with self._lock:
            self._entries[key] = dict(values)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    async def delete(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)


PROCESS_VAULT = MemoryVault()
"""The vault of every `pseudonymize` given none: one per process, so agents built per request share it."""


def vault_key(kind: Literal["run", "session"], id: str, store: object | None) -> str:
    """Where a vault keeps the values of run (or session) `id` of `store` (None: an agent without a store).

    `<kind>:<scope>:<id>`, the scope 16 hex digits naming the store: an
    `SQLiteStore` by its file, a `RedisStore` by its server, database and
    namespace (so every process using it finds the same entries), any other
    store by the object (this process only). Stores, or namespaces, never
    share an entry.
    """
    return f"{kind}:{_scope(store)}:{id}"


def _hashed(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]


_NO_STORE = _hashed("no store")
_scopes: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_scopes_lock = threading.Lock()


def _scope(store: object | None) -> str:
    """The scope of `store` in vault keys (`vault_key`), worked out once per store object."""
    if store is None:
        return _NO_STORE
    try:
        with _scopes_lock:
            scope = _scopes.get(store)
            if scope is None:
                scope = _scopes[store] = _scope_of(store)
            return scope
    except TypeError:  # a store that cannot be weakly referenced: a new scope each time, never another's
        return _scope_of(store)


def _scope_of(store: object) -> str:
    if isinstance(store, SQLiteStore) and store.path != ":memory:":
        return _hashed(f"sqlite {os.path.realpath(store.path)}")
    if isinstance(store, RedisStore) and store._given is not None:  # a client of the user's: its server and db
        kwargs = getattr(getattr(store._given, "connection_pool", None), "connection_kwargs", None)
        if not kwargs:  # a client onion cannot read the server of: this store object's own scope
            return _hashed(f"object {type(store).__qualname__} {uuid.uuid4().hex}")
        server = kwargs.get("path") or f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
        return _hashed(f"redis {server} {kwargs.get('db', 0)} {store.namespace}")
    if isinstance(store, RedisStore):
        url = urlsplit(store.url)
        query = parse_qs(url.query)
        if url.scheme == "unix":
            server, db = url.path, query.get("db", ["0"])[0]
        else:
            server, db = f"{url.hostname}:{url.port or 6379}", query.get("db", [url.path.strip("/") or "0"])[0]
        return _hashed(f"redis {server} {db} {store.namespace}")
    return _hashed(f"object {type(store).__qualname__} {uuid.uuid4().hex}")
