"""`Watcher`: one connection per event loop that waits on every followed run's event stream at once.

A server process following a run another process streams asks Redis to
tell it of the run's next event (`XREAD BLOCK` on the run's stream, one call
for every stream followed) instead of reading the stream again every few
milliseconds: an event reaches the follower one round trip after it was
kept, and an idle follower sends nothing. A blocking read holds its
connection, so it has one of its own, outside the store's pool. A follower
the running read does not name yet wakes it (an entry on this watcher's
wake stream): the read starts again naming every stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

WAKE_KEEP = 60_000
"""Milliseconds a wake stream outlives its last wake: a process that died leaves nothing for long."""
RESTING = 1.0
"""Seconds a watcher whose read failed leaves its followers to wait on their own (`poll`) before it tries again."""


def _id(entry_id: str) -> tuple[int, int]:
    milliseconds, _, sequence = entry_id.partition("-")
    return int(milliseconds), int(sequence or 0)


class Watcher:
    """Wakes each `wait`er once its stream holds an entry after the id it gave (or its timeout passes)."""

    def __init__(
        self, connect: Callable[[], Any], send: Callable[..., Any], prefix: str, *, block: float, poll: float
    ) -> None:
        self._connect, self._send, self._poll = connect, send, poll
        self._wake_key = f"{prefix}wake:{uuid.uuid4().hex}"
        self._woken = "0-0"
        self._block = max(1, round(block * 1000))
        self._waiting: dict[str, dict[asyncio.Future[None], str]] = {}
        self._named: dict[str, str] = {}
        """The streams the running read names, each with the id it reads after."""
        self._task: asyncio.Task[None] | None = None
        self._failed_at = -RESTING

    async def wait(self, key: str, after: str, timeout: float) -> None:
        """Return once stream `key` holds an entry with an id above `after`, or `timeout` seconds later; at once
        when Redis fails (the caller's next read says how)."""
        loop = asyncio.get_running_loop()
        if loop.time() - self._failed_at < RESTING:
            await asyncio.sleep(min(timeout, self._poll))
            return
        future: asyncio.Future[None] = loop.create_future()
        self._waiting.setdefault(key, {})[future] = after
        try:
            if self._task is None or self._task.done():  # done: cancelled before it began
                self._task = loop.create_task(self._watch())
            elif key not in self._named or _id(after) < _id(self._named[key]):  # not named, or named past `after`
                with contextlib.suppress(Exception):  # not woken: the waiter's timeout still ends its wait
                    await asyncio.gather(
                        self._send("XADD", self._wake_key, "MAXLEN", "1", "*", "w", "1"),
                        self._send("PEXPIRE", self._wake_key, WAKE_KEEP),
                    )
            await asyncio.wait((future,), timeout=timeout)  # not wait_for: in 3.11 it may swallow a cancellation
        finally:
            waiters = self._waiting.get(key, {})
            waiters.pop(future, None)
            if not waiters:
                self._waiting.pop(key, None)

    async def _watch(self) -> None:
        client = self._connect()
        try:
            while self._waiting:
                streams = {}
                for key, waiters in self._waiting.items():
                    afters = [after for future, after in waiters.items() if not future.done()]
                    if afters:
                        streams[key] = min(afters, key=_id)
                self._named = dict(streams)
                streams[self._wake_key] = self._woken
                reply = await client.xread(streams, count=1, block=self._block)
                for key, entries in reply.items() if isinstance(reply, dict) else reply or ():
                    if key == self._wake_key:
                        self._woken = entries[-1][0]
                        continue
                    kept = _id(entries[-1][0])
                    for future, after in self._waiting.get(key, {}).items():
                        if kept > _id(after) and not future.done():
                            future.set_result(None)
        except Exception:  # every waiter reads now, and hears from its own read what failed
            self._failed_at = asyncio.get_running_loop().time()
        finally:
            self._task, self._named = None, {}  # at once: a wait from now on starts a new watch
            self._woken = "0-0"  # a Redis met again may count ids from behind the last one seen
            for waiters in self._waiting.values():
                for future in waiters:
                    if not future.done():
                        future.set_result(None)
            with contextlib.suppress(Exception):
                await client.aclose(close_connection_pool=True)  # the pool is this watch's own

    async def aclose(self) -> None:
        """End the watch (its waiters return); a watch on another thread's loop is told to end there."""
        task = self._task
        if task is None:
            return
        if task.get_loop() is not asyncio.get_running_loop():
            with contextlib.suppress(RuntimeError):  # that loop closed meanwhile: its watch ended with it
                task.get_loop().call_soon_threadsafe(task.cancel)
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        for waiters in self._waiting.values():  # a watch cancelled before it began woke nobody
            for future in waiters:
                if not future.done():
                    future.set_result(None)
