"""`RedisStore`: every store purpose on one Redis server, shared by every worker on every machine."""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from types import EllipsisType
from typing import Any

from ..errors import RunBusy, StoreUnavailable
from ._events import POLL, Events, up_to_end
from ._load import StateLoader
from ._protocols import RunRecord, RunStatus, SessionTurn
from ._redis_link import RedisLink, safe_url
from ._refusals import claim_refusal, run_deleted, run_lost, run_not_found, session_lost
from ._session import SessionOpener


class RedisStore(RedisLink, StateLoader, SessionOpener):
    """Runs, journals, sessions, cache entries, rate counters and concurrency slots on Redis at `url`.

    Keys start with `namespace` + ":". Every operation is one command, atomic
    on the server. When Redis fails, rate limits and slots raise
    `StoreUnavailable` (or, with `fail_open=True`, let calls through with a
    warning), the cache misses, and run, journal and session writes raise
    `StoreUnavailable`; no write is sent twice. `client` (a
    `redis.asyncio.Redis` without retries) replaces the one built per event
    loop from `url`. Close with `await store.aclose()`. docs/scaling.md says
    the rest.
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
        super().__init__(
            url,
            clock=clock,
            connect_timeout=connect_timeout,
            timeout=timeout,
            max_connections=max_connections,
            client=client,
        )
        self.namespace, self.fail_open = namespace, fail_open
        self._prefix = namespace + ":"
        self._reservations: dict[str, deque[tuple[str, int, float]]] = {}  # member, tokens, leaves the window
        self._sweep_at = 1024  # keys with reservations held
        self._reservations_lock = threading.Lock()  # the store may serve several threads, each with its own loop
        self._members_prefix, self._members = uuid.uuid4().hex + ":", itertools.count()  # reservation ids
        self._untenanted_indexed = False  # the index of runs without a tenant holds those an older onion kept

    def _key(self, kind: str, name: str) -> str:
        return f"{self._prefix}{kind}:{name}"

    def _run_keys(self, run_id: str) -> tuple[str, str, str]:
        prefix = self._prefix
        return f"{prefix}run:{run_id}", f"{prefix}journal:{run_id}", prefix + "runs"

    def _tenant_index(self, tenant: str | None) -> str:
        """The sorted set of `tenant`'s runs by last update (the scripts' `tenant_index` names the same keys)."""
        return f"{self._prefix}runs-of:{tenant}" if tenant else f"{self._prefix}runs-of-none"

    # -- runs ------------------------------------------------------------------

    async def start_run(
        self,
        run_id: str,
        *,
        agent: str,
        owner: str,
        lease: float,
        entries: Sequence[str],
        session: str | None = None,
        tenant: str | None = None,
    ) -> None:
        keys = self._run_keys(run_id)
        args = (self._now(), run_id, agent, owner, lease, session or "", tenant or "", *entries)
        if await self._script("START_RUN", f"starting run {run_id!r}", 3, *keys, *args) == "exists":
            raise ValueError(f"a run {run_id!r} is already in the store")

    async def claim_run(self, run_id: str, owner: str, lease: float, *, paused_only: bool = False) -> RunRecord:
        keys = (self._key("run", run_id), self._prefix + "runs")
        args = (self._now(), run_id, owner, lease, "1" if paused_only else "0")
        verdict, now, *fields = await self._script("CLAIM_RUN", f"claiming run {run_id!r}", 2, *keys, *args)
        if verdict == "missing":
            raise run_not_found(run_id)
        record = _record(run_id, fields)
        if verdict == "busy":
            refusal = claim_refusal(record, float(now), paused_only) or f"run {run_id!r} is busy"
            raise RunBusy(refusal, run_id=run_id, status=record.status)
        return record

    async def append_journal(self, run_id: str, owner: str, entries: Sequence[str], lease: float) -> None:
        doing = f"appending to run {run_id!r}'s journal"
        args = (self._now(), run_id, owner, "append", lease, "", "", 0, *entries)
        self._check_held(run_id, await self._script("HOLD_RUN", doing, 3, *self._run_keys(run_id), *args))

    async def renew_run(self, run_id: str, owner: str, lease: float) -> None:
        doing = f"renewing run {run_id!r}'s lease"
        args = (self._now(), run_id, owner, "renew", lease, "", "", 0)
        self._check_held(run_id, await self._script("HOLD_RUN", doing, 3, *self._run_keys(run_id), *args))

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
            args = (self._now(), run_id, owner, "release", 0, status, state or "", pending, *entries)
            self._check_held(run_id, await self._script("HOLD_RUN", doing, 3, *self._run_keys(run_id), *args))
            return
        session, lock = self._key("session", turn.session_id), self._key("session-lock", turn.session_id)
        args = (self._now(), run_id, owner, status, state or "", pending, turn.lock, len(entries))
        keys = (*self._run_keys(run_id), session, lock)
        outcome = await self._script("RELEASE_WITH_TURN", doing, 5, *keys, *args, *entries, *turn.messages)
        if outcome == "session-lost":
            raise session_lost(run_id, turn.session_id)
        self._check_held(run_id, outcome)

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

    async def runs(self, *, limit: int = 100, tenant: str | EllipsisType | None = ...) -> list[RunRecord]:
        index = self._prefix + "runs"
        if tenant is None and not self._untenanted_indexed:
            keys = (index, self._tenant_index(None), self._tenant_index(None) + ":indexed")
            await self._script("INDEX_UNTENANTED", "indexing the runs without a tenant", 3, *keys, self._key("run", ""))
            self._untenanted_indexed = True
        if tenant is not ...:
            index = self._tenant_index(tenant)
        ids = await self._command("listing runs", "ZREVRANGE", index, 0, limit - 1)
        reads = [self._command("listing runs", "HGETALL", self._key("run", run_id)) for run_id in ids]
        rows = await asyncio.gather(*reads)  # sent together: one round trip
        return [_record(run_id, fields) for run_id, fields in zip(ids, rows, strict=True) if fields]

    async def delete_run(self, run_id: str) -> None:
        await self._script("DELETE_RUN", f"deleting run {run_id!r}", 3, *self._run_keys(run_id), run_id)

    # -- sessions --------------------------------------------------------------

    async def session_messages(self, session_id: str) -> list[str]:
        doing = f"reading session {session_id!r}"
        return list(await self._command(doing, "LRANGE", self._key("session", session_id), 0, -1))

    async def session_append(self, session_id: str, messages: Sequence[str], *, lock: str | None = None) -> bool:
        keys = (self._key("session", session_id), self._key("session-lock", session_id))
        doing = f"appending to session {session_id!r}"
        return bool(await self._script("SESSION_APPEND", doing, 2, *keys, lock or "", *messages))

    async def session_clear(self, session_id: str) -> None:
        await self._command(f"clearing session {session_id!r}", "DEL", self._key("session", session_id))

    async def claim_session(self, session_id: str, tenant: str | None) -> str | None:
        keys = (self._key("session-tenant", session_id), self._key("session", session_id))
        doing = f"recording session {session_id!r}'s tenant"
        kept: str = await self._script("CLAIM_SESSION", doing, 2, *keys, tenant or "")
        return kept or None

    async def lock_session(self, session_id: str, owner: str, lease: float, *, renew: bool = False) -> bool:
        lock, doing = self._key("session-lock", session_id), f"locking session {session_id!r}"
        args = (self._now(), owner, lease, "1" if renew else "0", self._key("run", ""))
        return bool(await self._script("LOCK", doing, 1, lock, *args))

    async def unlock_session(self, session_id: str, owner: str) -> None:
        await self._script("UNLOCK", f"unlocking {session_id!r}", 1, self._key("session-lock", session_id), owner)

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

    def _rate_keys(self, key: str) -> tuple[str, str]:
        return f"{self._prefix}rate-log:{key}", f"{self._prefix}rate:{key}"

    async def acquire(self, key: str, tokens: int, *, rpm: float | None, tpm: float | None, window: float) -> float:
        """Reserve one request and `tokens` within the last `window` seconds (0), or the seconds to wait.

        The limits hold over every rolling window: the server keeps a log of
        the requests admitted within it.
        """
        if tpm and tokens > tpm:
            raise ValueError(f"rate store: {tokens} tokens can never fit in tpm={tpm}")
        member = f"{self._members_prefix}{next(self._members)}"
        args = (self._now(), member, tokens, max(1, int(rpm)) if rpm else 0, tpm or 0, window)
        doing = f"reserving under rate limit {key!r}"
        try:
            wait, now = await self._script("ACQUIRE", doing, 2, *self._rate_keys(key), *args)
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
        args = (self._now(), found[0], used, "1" if refund_request else "0")
        try:
            await self._script("RECONCILE", f"correcting rate limit {key!r}", 2, *self._rate_keys(key), *args)
        except StoreUnavailable as error:
            self._warn_once("rate_limit", error, "corrections are lost")

    async def pause(self, key: str, seconds: float) -> None:
        """Make every worker wait `seconds` before `key`'s next call (logged, never raised)."""
        try:
            await self._script("PAUSE", f"pausing {key!r}", 2, *self._rate_keys(key), self._now(), seconds)
        except StoreUnavailable as error:
            self._warn_once("rate_limit", error, "provider pauses are not shared")

    # -- spending --------------------------------------------------------------

    async def spend(
        self, key: str, cost: float, tokens: int, *, now: float, window: float | None = None, ttl: float | None = None
    ) -> tuple[float, int]:
        """`SpendStore.spend`: one script. `StoreUnavailable` when Redis fails (a budget never lets calls through
        uncounted), whatever `fail_open` says."""
        keys = self._key("spend", key), self._key("spend-log", key)
        args = (now, repr(float(cost)), int(tokens), window or 0, ttl or 0)
        spent, used = await self._script("SPEND", f"counting the spending of {key!r}", 2, *keys, *args)
        return max(float(spent), 0.0), max(round(float(used)), 0)

    # -- concurrency slots -----------------------------------------------------

    async def take_slot(self, key: str, owner: str, limit: int, lease: float) -> bool:
        """Take (or renew) one of `limit` slots of `key` for `owner` until `lease` seconds from now."""
        doing = f"taking a {key!r} slot"
        try:
            return bool(
                await self._script("TAKE_SLOT", doing, 1, self._key("slots", key), self._now(), owner, limit, lease)
            )
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

    # -- streamed events (EventStore) ------------------------------------------

    async def add_events(self, run_id: str, events: Sequence[tuple[int, str]], *, ended: bool, keep: float) -> bool:
        words = [word for number, text in events for word in (number, text)]
        args = (max(1, round(keep * 1000)), "1" if ended else "0", *words)
        doing = f"keeping run {run_id!r}'s events"
        return bool(await self._script("ADD_EVENTS", doing, 1, self._key("events", run_id), *args) == "ok")

    async def read_events(self, run_id: str, after: int, *, limit: int = 500) -> tuple[Events, bool | None]:
        key, doing = self._key("events", run_id), f"reading run {run_id!r}'s events"
        found, entries = await asyncio.gather(  # sent together: one round trip
            self._command(doing, "EXISTS", key),
            self._command(doing, "XRANGE", key, f"{after}-1", "+", "COUNT", limit + 1),
        )
        if not found:
            return [], None
        kept = ((int(at.partition("-")[0]), text if name == "e" else None) for at, (name, text) in entries)
        return up_to_end(kept, limit)

    async def wait_events(self, run_id: str, after: int, timeout: float) -> None:
        """Return once the run's stream holds an entry after event `after` (an event or its stream's end mark), or
        `timeout` seconds later: one blocking read per event loop, on a connection of its own, for every run
        followed (`XREAD BLOCK`)."""
        watcher = self._watcher(self._prefix)
        if watcher is None:
            await asyncio.sleep(min(timeout, POLL))
        else:
            await watcher.wait(self._key("events", run_id), f"{after}-0", timeout)

    async def last_event(self, run_id: str) -> tuple[int, bool]:
        doing = f"reading run {run_id!r}'s last event"
        top = await self._command(doing, "XREVRANGE", self._key("events", run_id), "+", "-", "COUNT", 1)
        if not top:
            return 0, True
        number, _, mark = top[0][0].partition("-")
        return int(number), mark == "1"

    # -- upkeep ----------------------------------------------------------------

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
        tenant=fields.get("tenant") or None,
    )
