"""The batcher: the commands a store's callers issue during one turn of an event loop, sent in one write."""

from __future__ import annotations

import asyncio
import functools
import math
import weakref
from collections.abc import Callable
from typing import Any

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


@functools.cache
def redis_errors() -> tuple[type[Exception], type[Exception]]:
    """redis-py's base error and its NOSCRIPT error, imported once a store first fails."""
    from redis.exceptions import NoScriptError, RedisError

    return RedisError, NoScriptError


class Batcher:
    """Sends the commands issued during one turn of an event loop to Redis in one write: one round trip.

    Each caller gets its own reply or error; a command whose caller was
    cancelled before it was sent is never sent, and none is sent twice.
    """

    def __init__(self, client: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.loop = weakref.ref(loop)
        pool = getattr(client, "connection_pool", None)
        # a single-connection client, or one without a pool, goes through redis-py's own pipeline
        self.pool = None if pool is None or getattr(client, "single_connection_client", False) else pool
        self.pack = hiredis_pack if self.pool is not None else None  # packed as sent: bytes, nothing for the GC
        self.commands: list[Any] = []  # this turn's: packed, or their words (packed once a connection is taken)
        self.futures: list[asyncio.Future[Any]] = []
        self.sending: set[asyncio.Task[None]] = set()

    def send(self, loop: asyncio.AbstractEventLoop, command: Command) -> asyncio.Future[Any]:
        """Queue `command` for this turn's round trip (`loop`: the running loop, this batcher's); one that cannot
        be encoded raises here."""
        packed = command if self.pack is None else self.pack(command)
        if not self.futures:
            loop.call_soon(self._flush)
        future = loop.create_future()
        self.commands.append(packed)
        self.futures.append(future)
        return future

    def _flush(self) -> None:
        commands, futures, self.commands, self.futures = self.commands, self.futures, [], []
        if any(future.done() for future in futures):  # cancelled before they were sent: never sent
            kept = [n for n, future in enumerate(futures) if not future.done()]
            commands, futures = [commands[n] for n in kept], [futures[n] for n in kept]
        if futures:
            task = asyncio.get_running_loop().create_task(self._round_trip(commands, futures))
            self.sending.add(task)
            task.add_done_callback(self.sending.discard)

    async def _round_trip(self, commands: list[Any], futures: list[asyncio.Future[Any]]) -> None:
        try:
            if self.pool is None:
                for future, reply in zip(futures, await self._pipeline(commands), strict=True):
                    _settle(future, reply)
            else:
                await self._exchange(commands, futures)
        except Exception as error:  # the connection: every command still waiting failed with it
            for future in futures:
                _settle(future, error)
        except BaseException:  # cancelled (the loop is closing): so are the callers
            for future in futures:
                future.cancel()
            raise

    async def _exchange(self, commands: list[Any], futures: list[asyncio.Future[Any]]) -> None:
        """Write the commands in one buffer on one pooled connection, then settle each caller as its reply is read
        (those run while later replies are still on their way)."""
        from redis.exceptions import ResponseError
        from redis.exceptions import TimeoutError as RedisTimeout

        pool = self.pool
        connection = await pool.get_connection()  # type: ignore[union-attr]
        try:
            unsent: list[Any] = []  # per command: None, or the error that kept it from being sent
            if self.pack is not None:
                await connection.send_packed_command(b"".join(commands))
            else:
                packed, unsent = _pack(connection, commands)
                if packed:
                    await connection.send_packed_command(packed)
            try:
                async with asyncio.timeout(connection.socket_timeout):  # one for the whole read, not one a reply
                    for n, future in enumerate(futures):
                        reply = unsent[n] if unsent else None
                        if reply is None:
                            try:
                                reply = await connection.read_response(timeout=math.inf)
                            except ResponseError as error:  # this command's own error (WRONGTYPE, NOSCRIPT)
                                reply = error
                        _settle(future, reply)
            except TimeoutError:  # read_response was cancelled inside it: it closed the connection
                raise RedisTimeout(f"Timeout reading from {_where(connection)}") from None
        finally:
            await pool.release(connection)  # type: ignore[union-attr]

    async def _pipeline(self, commands: list[Command]) -> list[Any]:
        pipeline = self.client.pipeline(transaction=False)
        for command in commands:
            pipeline.execute_command(*command)
        return list(await pipeline.execute(raise_on_error=False))


def _settle(future: asyncio.Future[Any], reply: Any) -> None:
    """Give a caller still waiting its reply, or its error."""
    if future.done():
        return
    if isinstance(reply, Exception):
        future.set_exception(reply)
    else:
        future.set_result(reply)


def _where(connection: Any) -> str:
    path = getattr(connection, "path", None)
    return str(path) if path else f"{getattr(connection, 'host', '?')}:{getattr(connection, 'port', '?')}"


def _pack(connection: Any, commands: list[Command]) -> tuple[list[bytes], list[Any]]:
    """The commands packed by redis-py for the wire, and for each None (sent) or the error packing it raised (that
    command alone fails; it is not sent)."""
    packed: list[bytes] = []
    unsent: list[Any] = []
    for command in commands:
        try:
            packed.extend(connection.pack_command(*command))
        except Exception as error:
            unsent.append(error)
        else:
            unsent.append(None)
    return packed, unsent
