"""`RedisLink`: how `RedisStore` reaches Redis (a client per event loop, commands and scripts, failures)."""

from __future__ import annotations

import asyncio
import functools
import logging
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import StoreUnavailable
from . import _redis_scripts as scripts
from ._events import POLL
from ._redis_batcher import Batcher, redis_errors
from ._redis_watch import Watcher

logger = logging.getLogger("onion.stores")

READS = frozenset({"GET", "HGETALL", "LRANGE", "ZREVRANGE", "EXISTS", "XRANGE", "XREVRANGE"})
"""The commands that change nothing: their failure says nothing may have happened."""


class RedisLink:
    """Sends `RedisStore`'s commands and scripts to Redis at `url`; a Redis error becomes `StoreUnavailable`."""

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], float] | None,
        connect_timeout: float,
        timeout: float,
        max_connections: int,
        client: Any,
    ) -> None:
        self.url, self.clock = url, clock
        self.connect_timeout, self.timeout, self.max_connections = connect_timeout, timeout, max_connections
        self._given = client
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Batcher] = weakref.WeakKeyDictionary()
        self._batcher: Batcher | None = None  # the last one used: most stores serve one loop
        self._watchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Watcher] = weakref.WeakKeyDictionary()
        self._scripts: dict[str, str] = {}
        self._failing: set[str] = set()

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

    def _watcher(self, prefix: str) -> Watcher | None:
        """This loop's watcher of event streams (`None` with a `client` given: its connections are the caller's)."""
        if self._given is not None:
            return None
        loop = asyncio.get_running_loop()
        watcher = self._watchers.get(loop)
        if watcher is None:
            block = min(5.0, self.timeout / 2)  # a read that blocks must end before its socket's timeout
            watching = functools.partial(
                connect, self.url, max_connections=1, timeout=self.timeout, connect_timeout=self.connect_timeout
            )
            watcher = self._watchers[loop] = Watcher(watching, self._send, prefix, block=block, poll=POLL)
        return watcher

    def _now(self) -> float:
        """The time the scripts take: the store's clock, or -1 for the Redis server's."""
        return -1.0 if self.clock is None else self.clock()

    def _send(self, *command: Any) -> asyncio.Future[Any]:
        """Send one command, in the same round trip as the others sent in this turn of the event loop."""
        loop = asyncio.get_running_loop()
        batcher = self._batcher
        if batcher is None or batcher.loop() is not loop:
            batcher = self._batchers.get(loop)
            if batcher is None:
                batcher = self._batchers[loop] = Batcher(self._client(), loop)
            self._batcher = batcher
        return batcher.send(loop, command)

    async def _script(self, name: str, doing: str, keys: int, *words: Any) -> Any:
        """Run script `name` on `keys` keys then its arguments (`words`), loading it once per server."""
        sha = self._scripts.get(name)
        try:
            if sha is not None:
                try:
                    return await self._send("EVALSHA", sha, keys, *words)
                except redis_errors()[1]:  # the server restarted and forgot it
                    pass
            sha = self._scripts[name] = await self._send("SCRIPT", "LOAD", getattr(scripts, name))
            return await self._send("EVALSHA", sha, keys, *words)
        except redis_errors()[0] as error:
            raise self._unavailable(doing, error, write=True) from error

    async def _command(self, doing: str, *command: Any) -> Any:
        try:
            return await self._send(*command)
        except redis_errors()[0] as error:
            raise self._unavailable(doing, error, write=command[0] not in READS) from error

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

    async def aclose(self) -> None:
        """Close this store's connections (in every event loop still running)."""
        here = asyncio.get_running_loop()
        clients = [(None, self._given)] if self._given is not None else list(self._clients.items())
        watchers = list(self._watchers.values())
        self._watchers.clear()
        for watcher in watchers:
            await watcher.aclose()
        self._clients.clear()
        self._batchers.clear()
        self._batcher = None
        for loop, client in clients:
            if client is not None:  # this loop's own pool is closed too; a given client's is yours
                await client.aclose(close_connection_pool=True if loop is here else None)


def connect(url: str, *, max_connections: int, timeout: float, connect_timeout: float) -> Any:
    """A `redis.asyncio.Redis` on `url` that never sends a command twice (a write whose reply was lost may have
    happened)."""
    from redis.asyncio import BlockingConnectionPool, Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=timeout,
        decode_responses=True,
        socket_connect_timeout=connect_timeout,
        socket_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        **_pool_checks_connections(),
    )
    return Redis(connection_pool=pool)


def _pool_checks_connections() -> dict[str, Any]:
    """Keep the pool's check that a pooled connection is still open: after a Redis restart each command then gets a
    fresh connection instead of failing on a closed one. redis-py 7+ skips that check while maintenance
    notifications (a Redis Enterprise feature) are on; older versions have neither."""
    try:
        from redis.maint_notifications import MaintNotificationsConfig
    except ImportError:
        return {}
    return {"maint_notifications_config": MaintNotificationsConfig(enabled=False)}


def safe_url(url: str) -> str:
    """`url` with its passwords (user:password@, ?password=, ?ssl_password=) shown as ***."""
    scheme, found, rest = url.partition("://")
    if found and "@" in rest:  # whatever stands before the last '@' (a password may hold '#', '?' or '/')
        credentials, _, host = rest.rpartition("@")
        user, colon, _ = credentials.partition(":")
        url = f"{scheme}://{user + ':' if user and colon else ''}***@{host}"
    parts = urlsplit(url)
    query = "&".join(_hidden(pair) for pair in parts.query.split("&"))
    return (
        f"{parts.scheme}://{parts.netloc}{parts.path}"
        + (f"?{query}" if parts.query else "")
        + (f"#{parts.fragment}" if parts.fragment else "")
    )


def _hidden(pair: str) -> str:
    name, equals, _ = pair.partition("=")
    return f"{name}=***" if equals and "password" in unquote(name).lower() else pair
