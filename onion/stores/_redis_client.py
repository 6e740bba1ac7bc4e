"""`RedisStore`'s link to Redis: the client it builds, and the batcher that sends a loop turn's commands at once."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

Command = tuple[Any, ...]
"""One Redis command as its words: `("GET", key)`."""


def _hiredis_pack() -> Callable[[Command], bytes] | None:
    """hiredis's packer (redis-py parses with hiredis when it is installed; the batcher packs with it too)."""
    try:
        from hiredis import pack_command
    except ImportError:  # pragma: no cover - hiredis comes with the redis extra
        return None
    return pack_command


hiredis_pack = _hiredis_pack()


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


class Batcher:
    """Sends the commands issued during one turn of an event loop to Redis in one write: one round trip.

    Each caller gets its own reply or error; a command whose caller was
    cancelled before it was sent is never sent, and none is sent twice.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.queue: list[tuple[Command, asyncio.Future[Any]]] = []
        self.sending: set[asyncio.Task[None]] = set()
        pool = getattr(client, "connection_pool", None)
        # a single-connection client, or one without a pool, goes through redis-py's own pipeline
        self.pool = None if pool is None or getattr(client, "single_connection_client", False) else pool

    def send(self, command: Command) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        if not self.queue:
            loop.call_soon(self._flush)
        future = loop.create_future()
        self.queue.append((command, future))
        return future

    def _flush(self) -> None:
        queue, self.queue = [item for item in self.queue if not item[1].done()], []
        if queue:
            task = asyncio.get_running_loop().create_task(self._round_trip(queue))
            self.sending.add(task)
            task.add_done_callback(self.sending.discard)

    async def _round_trip(self, queue: list[tuple[Command, asyncio.Future[Any]]]) -> None:
        try:
            if self.pool is None:
                replies = await self._pipeline([command for command, _ in queue])
            else:
                replies = await self._exchange(queue)
        except Exception as error:  # the connection: every command of the round trip failed with it
            replies = [error] * len(queue)
        except BaseException:  # cancelled (the loop is closing): so are the callers
            for _, future in queue:
                future.cancel()
            raise
        for (_, future), reply in zip(queue, replies, strict=True):
            if future.done():
                continue
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    async def _exchange(self, queue: list[tuple[Command, asyncio.Future[Any]]]) -> list[Any]:
        """Write every command packed in one buffer on one pooled connection, then read their replies in order."""
        from redis.exceptions import ResponseError
        from redis.exceptions import TimeoutError as RedisTimeout

        pool = self.pool
        connection = await pool.get_connection()  # type: ignore[union-attr]
        try:
            packed, replies = _pack(connection, [command for command, _ in queue])
            if packed:
                await connection.send_packed_command(packed)
            try:
                async with asyncio.timeout(connection.socket_timeout):  # one for the whole read, not one a reply
                    for n, reply in enumerate(replies):
                        if reply is None:
                            try:
                                replies[n] = await connection.read_response(timeout=math.inf)
                            except ResponseError as error:  # this command's own error (WRONGTYPE, NOSCRIPT)
                                replies[n] = error
            except TimeoutError:  # read_response was cancelled inside it: it closed the connection
                raise RedisTimeout(f"Timeout reading from {_where(connection)}") from None
            return replies
        finally:
            await pool.release(connection)  # type: ignore[union-attr]

    async def _pipeline(self, commands: list[Command]) -> list[Any]:
        pipeline = self.client.pipeline(transaction=False)
        for command in commands:
            pipeline.execute_command(*command)
        return list(await pipeline.execute(raise_on_error=False))


def _where(connection: Any) -> str:
    path = getattr(connection, "path", None)
    return str(path) if path else f"{getattr(connection, 'host', '?')}:{getattr(connection, 'port', '?')}"


def _pack(connection: Any, commands: list[Command]) -> tuple[list[bytes], list[Any]]:
    """The commands packed for the wire, and a reply slot for each: None to read, or the error that packing it
    raised (that command alone fails; it is not sent)."""
    packed: list[bytes] = []
    replies: list[Any] = []
    for command in commands:
        try:
            if hiredis_pack is not None:
                packed.append(hiredis_pack(command))
            else:
                packed.extend(connection.pack_command(*command))
        except Exception as error:
            replies.append(error)
        else:
            replies.append(None)
    return ([b"".join(packed)] if hiredis_pack is not None and packed else packed), replies


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
