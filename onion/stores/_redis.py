"""`RedisStore`: every store purpose on one Redis server, shared by every worker on every machine."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import RunBusy, StoreUnavailable
from . import _redis_scripts as scripts
from ._load import StateLoader
from ._protocols import RunRecord, RunStatus, SessionTurn
from ._redis_client import Batcher, connect, safe_url
from ._refusals import claim_refusal, run_deleted, run_lost, run_not_found, session_lost
from ._session import SessionOpener

logger = logging.getLogger("onion.stores")


class RedisStore(StateLoader, SessionOpener):
    """Runs, journals, sessions, cache entries, rate counters and concurrency slots on Redis at `url`.

    Keys start with `namespace` + ":" (tenants with different namespaces
    never see each other's entries). Every operation is one command, atomic
    on the server (a Lua script where it reads and writes); the commands
    that concurrent calls send during one turn of the event loop share one
    round trip (a pipeline). Times
    (leases, rate windows) come from the Redis server's clock, shared by
    every machine, unless `clock` is given (tests pass a fake one).

    When Redis cannot be reached: rate limits and concurrency slots raise
    `StoreUnavailable` (closed, the default) or let calls through with a
    warning (`fail_open=True`); the cache misses (a warning, once until it
    works again); run, journal and session writes raise `StoreUnavailable`
    (each write is one script: it happened whole or not at all; none is
    sent twice, since one whose reply was lost may have happened). The
    client reconnects by itself once Redis is back. Each event loop uses at most
    `max_connections` connections (more concurrent calls wait for one, up
    to `timeout` seconds). `client` (a
    `redis.asyncio.Redis` built with `retry=Retry(NoBackoff(), 0)`, as
    `Redis(host=...)` retries by default) replaces the one built from
    `url`; each event loop otherwise gets its own. Close with `await store.aclose()`.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        namespace: str = "onion",
        clock: Callable[[], float] | None = None,
        fail_open: bool = False,
        connect_timeout: float = 2.0,
        timeout: float = 10.0,
        max_connections: int = 64,
        client: Any = None,
    ) -> None:
        if not namespace or ":" in namespace or not namespace.isprintable():
            raise ValueError(f"RedisStore: namespace must be a non-empty printable name without ':', got {namespace!r}")
        self.url, self.namespace, self.clock, self.fail_open = url, namespace, clock, fail_open
        self.connect_timeout, self.timeout, self.max_connections = connect_timeout, timeout, max_connections
        self._prefix = namespace + ":"
        self._given = client
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Batcher] = weakref.WeakKeyDictionary()
        self._scripts: dict[str, str] = {}
        self._reservations: dict[str, deque[tuple[str, int, float]]] = {}  # member, tokens, leaves the window
        self._sweep_at = 1024  # keys with reservations held
        self._reservations_lock = threading.Lock()  # the store may serve several threads, each with its own loop
        self._failing: set[str] = set()

    # -- plumbing --------------------------------------------------------------

    def _client(self) -> Any:
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = connect(
                self.url,
                max_connections=self.max_connections,
                timeout=self.timeout,
                connect_timeout=self.connect_timeout,
            )
        return client

    def _now(self) -> float:
        return -1.0 if self.clock is None else self.clock()

    def _send(self, *command: Any) -> asyncio.Future[Any]:
        """Send one command, in the same round trip as the others sent in this turn of the event loop."""
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            batcher = self._batchers[loop] = Batcher(self._client())
        return batcher.send(command)

    async def _script(self, name: str, keys: Sequence[str], args: Sequence[Any], doing: str) -> Any:
        """Run script `name`, loading it once per server; Redis errors become `StoreUnavailable`."""
        from redis.exceptions import NoScriptError, RedisError

        source: str = getattr(scripts, name)
        sha = self._scripts.get(name)
        try:
            if sha is not None:
                try:
                    return await self._send("EVALSHA", sha, len(keys), *keys, *args)
                except NoScriptError:  # the server restarted and forgot it
                    pass
            self._scripts[name] = await self._send("SCRIPT", "LOAD", source)
            return await self._send("EVALSHA", self._scripts[name], len(keys), *keys, *args)
        except RedisError as error:
            raise self._unavailable(doing, error, write=True) from error

    async def _command(self, doing: str, *command: Any) -> Any:
        from redis.exceptions import RedisError

        try:
            return await self._send(*command)
        except RedisError as error:
            raise self._unavailable(doing, error, write=command[0] not in _READS) from error

    def _unavailable(self, doing: str, error: Exception, *, write: bool = False) -> StoreUnavailable:
        outcome = "it happened whole or not at all (with its reply lost, it may have happened); " if write else ""
        return StoreUnavailable(
            f"Redis at {safe_url(self.url)} failed while {doing} ({type(error).__name__}: {error}); "
            f"{outcome}check that Redis is running and reachable"
        )

    def _warn_once(self, purpose: str, error: StoreUnavailable, then: str) -> None:
        if purpose not in self._failing:
            self._failing.add(purpose)
            logger.warning("%s: %s; %s until it works again", purpose, error, then)

    def _works(self, purpose: str) -> None:
        if purpose in self._failing:
            self._failing.discard(purpose)
            logger.warning("%s: Redis at %s works again", purpose, safe_url(self.url))

    def _key(self, kind: str, name: str) -> str:
        return f"{self._prefix}{kind}:{name}"

    def _run_keys(self, run_id: str) -> list[str]:
        return [self._key("run", run_id), self._key("journal", run_id), self._prefix + "runs"]

    # -- runs ------------------------------------------------------------------

    async def start_run(
        self, run_id: str, *, agent: str, owner: str, lease: float, entries: Sequence[str], session: str | None = None
    ) -> None:
        args = [self._now(), run_id, agent, owner, lease, session or "", *entries]
        if await self._script("START_RUN", self._run_keys(run_id), args, f"starting run {run_id!r}") == "exists":
            raise ValueError(f"a run {run_id!r} is already in the store")

    async def claim_run(self, run_id: str, owner: str, lease: float, *, paused_only: bool = False) -> RunRecord:
        keys = [self._key("run", run_id), self._prefix + "runs"]
        args = [self._now(), run_id, owner, lease, "1" if paused_only else "0"]
        verdict, now, *fields = await self._script("CLAIM_RUN", keys, args, f"claiming run {run_id!r}")
        if verdict == "missing":
            raise run_not_found(run_id)
        record = _record(run_id, fields)
        if verdict == "busy":
            refusal = claim_refusal(record, float(now), paused_only) or f"run {run_id!r} is busy"
            raise RunBusy(refusal, run_id=run_id, status=record.status)
        return record

    async def append_journal(self, run_id: str, owner: str, entries: Sequence[str], lease: float) -> None:
        await self._hold(run_id, owner, "append", lease, "", "", 0, entries, f"appending to run {run_id!r}'s journal")

    async def renew_run(self, run_id: str, owner: str, lease: float) -> None:
        await self._hold(run_id, owner, "renew", lease, "", "", 0, (), f"renewing run {run_id!r}'s lease")

    async def release_run(
        self,
        run_id: str,
        owner: str,
        status: RunStatus,
        *,
        state: str | None = None,
        pending: int = 0,
        entries: Sequence[str] = (),
        turn: SessionTurn | None = None,
    ) -> None:
        doing = f"ending run {run_id!r} as {status}"
        if turn is None:
            await self._hold(run_id, owner, "release", 0, status, state or "", pending, entries, doing)
            return
        keys = [
            *self._run_keys(run_id),
            self._key("session", turn.session_id),
            self._key("session-lock", turn.session_id),
        ]
        args = [
            self._now(),
            run_id,
            owner,
            status,
            state or "",
            pending,
            turn.lock,
            len(entries),
            *entries,
            *turn.messages,
        ]
        outcome = await self._script("RELEASE_WITH_TURN", keys, args, doing)
        if outcome == "session-lost":
            raise session_lost(run_id, turn.session_id)
        self._check_held(run_id, outcome)

    async def _hold(
        self,
        run_id: str,
        owner: str,
        op: str,
        lease: float,
        status: str,
        state: str,
        pending: int,
        entries: Sequence[str],
        doing: str,
    ) -> None:
        args = [self._now(), run_id, owner, op, lease, status, state, pending, *entries]
        self._check_held(run_id, await self._script("HOLD_RUN", self._run_keys(run_id), args, doing))

    def _check_held(self, run_id: str, outcome: str) -> None:
        if outcome == "missing":
            raise run_deleted(run_id)
        if outcome != "ok":
            raise run_lost(run_id, outcome)

    async def run_record(self, run_id: str) -> RunRecord | None:
        fields = await self._command(f"reading run {run_id!r}", "HGETALL", self._key("run", run_id))
        return _record(run_id, fields) if fields else None

    async def journal(self, run_id: str) -> list[str]:
        entries = await self._command(
            f"reading run {run_id!r}'s journal", "LRANGE", self._key("journal", run_id), 0, -1
        )
        return list(entries)

    async def runs(self, *, limit: int = 100) -> list[RunRecord]:
        ids = await self._command("listing runs", "ZREVRANGE", self._prefix + "runs", 0, limit - 1)
        reads = [self._command("listing runs", "HGETALL", self._key("run", run_id)) for run_id in ids]
        rows = await asyncio.gather(*reads)  # sent together: one round trip
        return [_record(run_id, fields) for run_id, fields in zip(ids, rows, strict=True) if fields]

    async def delete_run(self, run_id: str) -> None:
        run, journal, index = self._run_keys(run_id)
        pipe = self._client().pipeline(transaction=True)
        pipe.delete(run, journal)
        pipe.zrem(index, run_id)
        from redis.exceptions import RedisError

        try:
            await pipe.execute()
        except RedisError as error:
            raise self._unavailable(f"deleting run {run_id!r}", error, write=True) from error

    # -- sessions --------------------------------------------------------------

    async def session_messages(self, session_id: str) -> list[str]:
        doing = f"reading session {session_id!r}"
        return list(await self._command(doing, "LRANGE", self._key("session", session_id), 0, -1))

    async def session_append(self, session_id: str, messages: Sequence[str], *, lock: str | None = None) -> bool:
        keys = [self._key("session", session_id), self._key("session-lock", session_id)]
        doing = f"appending to session {session_id!r}"
        return bool(await self._script("SESSION_APPEND", keys, [lock or "", *messages], doing))

    async def session_clear(self, session_id: str) -> None:
        await self._command(f"clearing session {session_id!r}", "DEL", self._key("session", session_id))

    async def lock_session(self, session_id: str, owner: str, lease: float, *, renew: bool = False) -> bool:
        keys = [self._key("session-lock", session_id)]
        args = [self._now(), owner, lease, "1" if renew else "0", self._key("run", "")]
        return bool(await self._script("LOCK", keys, args, f"locking session {session_id!r}"))

    async def unlock_session(self, session_id: str, owner: str) -> None:
        await self._script("UNLOCK", [self._key("session-lock", session_id)], [owner], f"unlocking {session_id!r}")

    # -- cache -----------------------------------------------------------------

    async def get(self, key: str) -> str | None:
        """The cached value, or None; None too when Redis cannot be reached (a warning, once)."""
        try:
            value = await self._command("reading the cache", "GET", self._key("cache", key))
        except StoreUnavailable as error:
            self._warn_once("cache", error, "every lookup is a miss")
            return None
        self._works("cache")
        return None if value is None else str(value)

    async def set(self, key: str, value: str, ttl: float | None) -> None:
        expiry = () if ttl is None else ("PX", max(1, round(ttl * 1000)))
        await self._command("storing a cache entry", "SET", self._key("cache", key), value, *expiry)

    # -- rate limits -----------------------------------------------------------

    def _rate_keys(self, key: str) -> list[str]:
        return [self._key("rate-log", key), self._key("rate", key)]

    async def acquire(self, key: str, tokens: int, *, rpm: float | None, tpm: float | None, window: float) -> float:
        """Reserve one request and `tokens` within the last `window` seconds (0), or the seconds to wait.

        The limits hold over every rolling window: the server keeps a log of
        the requests admitted within it.
        """
        if tpm and tokens > tpm:
            raise ValueError(f"rate store: {tokens} tokens can never fit in tpm={tpm}")
        member = uuid.uuid4().hex
        args = [self._now(), member, tokens, max(1, int(rpm)) if rpm else 0, tpm or 0, window]
        try:
            wait, now = await self._script("ACQUIRE", self._rate_keys(key), args, f"reserving under rate limit {key!r}")
        except StoreUnavailable as error:
            if not self.fail_open:
                raise
            self._warn_once("rate_limit", error, "calls go unlimited (fail_open=True)")
            return 0.0
        self._works("rate_limit")
        if float(wait) > 0:
            return float(wait)
        with self._reservations_lock:
            if key not in self._reservations and len(self._reservations) >= self._sweep_at:
                self._sweep(float(now))
            reservations = self._reservations.setdefault(key, deque())
            _drop_expired(reservations, float(now))
            reservations.append((f"{member}:{tokens}", tokens, float(now) + window))
        return 0.0

    def _sweep(self, now: float) -> None:
        """Forget the reservations that have left their window, and the keys left with none: amortised, as the
        next sweep waits until twice as many keys are held."""
        for key, reservations in list(self._reservations.items()):
            if not _drop_expired(reservations, now):
                del self._reservations[key]
        self._sweep_at = max(1024, 2 * len(self._reservations))

    async def reconcile(self, key: str, reserved: int, used: int, *, refund_request: bool = False) -> None:
        """Correct this process's oldest open reservation of `reserved` tokens for `key` (logged, never raised)."""
        with self._reservations_lock:
            reservations = self._reservations.get(key, deque())
            found = next((entry for entry in reservations if entry[1] == reserved), None)
            if found is None:
                return
            reservations.remove(found)
            if not reservations:
                del self._reservations[key]
        args = [self._now(), found[0], used, "1" if refund_request else "0"]
        try:
            await self._script("RECONCILE", self._rate_keys(key), args, f"correcting rate limit {key!r}")
        except StoreUnavailable as error:
            self._warn_once("rate_limit", error, "corrections are lost")

    async def pause(self, key: str, seconds: float) -> None:
        """Make every worker wait `seconds` before `key`'s next call (logged, never raised)."""
        try:
            await self._script("PAUSE", self._rate_keys(key), [self._now(), seconds], f"pausing {key!r}")
        except StoreUnavailable as error:
            self._warn_once("rate_limit", error, "provider pauses are not shared")

    # -- concurrency slots -----------------------------------------------------

    async def take_slot(self, key: str, owner: str, limit: int, lease: float) -> bool:
        """Take (or renew) one of `limit` slots of `key` for `owner` until `lease` seconds from now."""
        args = [self._now(), owner, limit, lease]
        try:
            return bool(await self._script("TAKE_SLOT", [self._key("slots", key)], args, f"taking a {key!r} slot"))
        except StoreUnavailable as error:
            if not self.fail_open:
                raise
            self._warn_once("concurrency", error, "calls go uncapped (fail_open=True)")
            return True

    async def free_slot(self, key: str, owner: str) -> None:
        """Give back `owner`'s slot of `key`."""
        try:
            await self._command(f"freeing a {key!r} slot", "ZREM", self._key("slots", key), owner)
        except StoreUnavailable as error:
            self._warn_once("concurrency", error, "slots free themselves when their lease lapses")

    # -- upkeep ----------------------------------------------------------------

    async def aclose(self) -> None:
        """Close this store's connections (in every event loop still running)."""
        clients = [self._given] if self._given is not None else list(self._clients.values())
        self._clients.clear()
        self._batchers.clear()
        for client in clients:
            if client is not None:
                await client.aclose()

    async def __aenter__(self) -> RedisStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<RedisStore {safe_url(self.url)} namespace={self.namespace!r}>"


def _drop_expired(reservations: deque[tuple[str, int, float]], now: float) -> bool:
    """Drop the reservations that have left their window (oldest first); whether any are left."""
    while reservations and reservations[0][2] <= now:
        reservations.popleft()
    return bool(reservations)


_READS = frozenset({"GET", "HGETALL", "LRANGE", "ZREVRANGE"})


def _record(run_id: str, fields: Any) -> RunRecord:
    """A run's record from its hash (a flat field/value list or a dict)."""
    if isinstance(fields, list):
        fields = dict(zip(fields[::2], fields[1::2], strict=True))
    lease = fields.get("lease_expires")
    return RunRecord(
        run_id=run_id,
        agent=fields["agent"],
        status=fields["status"],
        created=float(fields["created"]),
        updated=float(fields["updated"]),
        owner=fields.get("owner"),
        lease_expires=None if lease is None else float(lease),
        state=fields.get("state") or None,
        session=fields.get("session") or None,
        pending=int(fields.get("pending", 0)),
    )
