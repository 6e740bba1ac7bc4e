"""A run's events as this server sent them: kept per run so a client that lost its stream can pick it up again.

Each event gets the run's next sequence number (`id:` in the SSE stream);
`follow(after)` yields the events after that number, then each new one as
it comes, then ends when the run has ended. While nothing comes it yields a
heartbeat comment every `heartbeat` seconds, so proxies keep the stream open.

With a store that keeps events (`onion.stores.EventStore`: SQLite, Redis),
each channel is copied there as it fills, so any server process on the store
can send a run's events (`follow_stored`); the process streaming the run
still sends its own followers what it holds.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

from onion import Run, RunNext, RunResult
from onion.scrub import scrub
from onion.stores import EventStore
from onion.stores._events import POLL, wait_for_events

HEARTBEAT = b": heartbeat\n\n"
RUNNING_KEEP = 86400.0
"""Seconds the store keeps a running run's events after the last (`keep` once its stream ended): a silent tool
may run longer than `keep`, and a stream whose process died goes in a day."""
STORE_WAIT = 2.0
"""The most seconds to wait for what another process is copying into the store: the end of the stream before a
resume, a running run's first events."""
logger = logging.getLogger("onion.serve")


def sse(number: int, name: str, data: Any) -> bytes:
    """One SSE event: `id:`, `event:` and `data:` (JSON on one line)."""
    return f"id: {number}\nevent: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


class Publisher:
    """Copies one channel's events into the store, in order, as many per round trip as came meanwhile."""

    def __init__(self, store: EventStore, run_id: str, keep: float, before: Publisher | None) -> None:
        self.store, self.run_id, self.keep = store, run_id, keep
        self.waiting: list[tuple[int, str]] = []
        self.ending = False
        self.task: asyncio.Task[None] | None = None
        self.stored = 0
        """The number of the last event in the store."""
        self._progress = asyncio.Event()
        self._before = before
        """The run's previous stream's publisher in this process: its end goes into the store first."""
        self._failed = False

    def add(self, number: int, event: bytes) -> None:
        self.waiting.append((number, event.decode()))
        self._go()

    def end(self) -> None:
        self.ending = True
        self._go()

    def _go(self) -> None:
        if self.task is None and not self._failed:
            self.task = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        try:
            before, self._before = self._before, None
            if before is not None and before.task is not None:
                await asyncio.shield(before.task)
            while self.waiting or self.ending:
                events, self.waiting = self.waiting, []
                ending, self.ending = self.ending, False
                keep = self.keep if ending else max(self.keep, RUNNING_KEEP)
                if not await self.store.add_events(self.run_id, events, ended=ending, keep=keep):
                    raise RuntimeError("the store holds later events of it (another process streams it too)")
                self.stored = events[-1][0] if events else self.stored
                progress, self._progress = self._progress, asyncio.Event()
                progress.set()
        except Exception as error:
            self._failed = True
            message = scrub(f"{type(error).__name__}: {error}")
            logger.warning("run %s: its events are no longer copied to the store: %s", self.run_id, message)
        finally:
            self.task = None
            self._progress.set()

    async def stored_up_to(self, number: int) -> None:
        """Wait until event `number` is in the store (or copying stopped)."""
        while self.stored < number and self.task is not None:
            await self._progress.wait()


class Channel:
    """The events of one run, in order, and whether it has ended."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.first = 0
        """The id before this channel's first event: a resume's events go on from the paused stream's last id."""
        self.events: list[bytes] = []
        self.size = 0
        """The bytes of `events`."""
        self.ended = False
        self.task: asyncio.Task[None] | None = None
        """What runs the run and fills the channel."""
        self.publisher: Publisher | None = None
        """What copies the events into the store, when it keeps them."""
        self._changed = asyncio.Event()

    def put(self, name: str, data: Any) -> None:
        event = sse(self.first + len(self.events) + 1, name, data)
        self.events.append(event)
        self.size += len(event)
        if self.publisher is not None:
            self.publisher.add(self.first + len(self.events), event)
        self._wake()

    def end(self) -> None:
        self.ended = True
        if self.publisher is not None:
            self.publisher.end()
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def in_store(self, number: int) -> None:
        """Wait until event `number` is in the store, so any server process can send it (at once without one)."""
        if self.publisher is not None:
            await self.publisher.stored_up_to(number)

    @property
    def last(self) -> int:
        """The id of the latest event."""
        return self.first + len(self.events)

    async def follow(self, after: int = 0, heartbeat: float = 15.0) -> AsyncIterator[bytes]:
        """The events numbered above `after`, then the rest as they come; heartbeats in between."""
        sent = max(0, after - self.first)
        while True:
            changed = self._changed
            while sent < len(self.events):
                sent += 1
                yield self.events[sent - 1]
            if self.ended:
                return
            try:
                await asyncio.wait_for(changed.wait(), heartbeat)
            except TimeoutError:
                yield HEARTBEAT


class Channels:
    """The channels of the runs this server ran, by run id.

    An ended one is forgotten `keep` seconds later, or sooner, oldest ended first, while the ended ones hold over
    `keep_bytes` of events. `store`: where every channel is copied too (kept `keep` seconds after its last event),
    for the other server processes on it.
    """

    def __init__(self, keep: float = 600.0, keep_bytes: int = 64 * 2**20, store: EventStore | None = None) -> None:
        self.keep, self.keep_bytes, self.store = keep, keep_bytes, store
        self._by_run: dict[str, Channel] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._ended: dict[Channel, None] = {}
        """The ended channels still kept, oldest ended first."""
        self._ended_bytes = 0

    def keep_running(self, task: asyncio.Task[None]) -> asyncio.Task[None]:
        """Hold `task` until it ends (the event loop keeps only weak references to tasks)."""
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    def get(self, run_id: str) -> Channel | None:
        return self._by_run.get(run_id)

    async def continue_from_store(self, channel: Channel, run_id: str) -> None:
        """Number `channel`, a resume of `run_id` not yet bound, on from the run's last event in the store, once the
        stream before it has ended there (`STORE_WAIT` seconds at most; another process may have streamed it).
        Without a store, `bind` numbers it on from this process's channel of the run."""
        if self.store is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STORE_WAIT
        last, ended = await self.store.last_event(run_id)
        while not ended and loop.time() < deadline:
            await wait_for_events(self.store, run_id, last, deadline - loop.time())
            last, ended = await self.store.last_event(run_id)
        channel.first = max(channel.first, last)

    def bind(self, channel: Channel, run_id: str) -> None:
        """Name `channel` after its run, once (a sub-run of the same agent is not the run)."""
        if channel.run_id is None:
            channel.run_id = run_id
            before = self._by_run.get(run_id)
            if before is not None and not channel.events:  # a resume: its ids go on from the paused stream's
                channel.first = max(channel.first, before.last)
            self._by_run[run_id] = channel
            if self.store is not None:
                earlier = None if before is None else before.publisher
                channel.publisher = Publisher(self.store, run_id, self.keep, earlier)
            channel.put("run_started", {"run_id": run_id})

    def ended(self, channel: Channel) -> None:
        channel.end()
        if channel.run_id is not None:
            self._ended[channel] = None
            self._ended_bytes += channel.size
            asyncio.get_running_loop().call_later(self.keep, self._forget, channel)
            while self._ended_bytes > self.keep_bytes:
                self._forget(next(iter(self._ended)))

    def _forget(self, channel: Channel) -> None:
        if channel in self._ended:
            del self._ended[channel]
            self._ended_bytes -= channel.size
        if channel.run_id is not None and self._by_run.get(channel.run_id) is channel:
            del self._by_run[channel.run_id]  # a resume of the run may have a channel of its own since


async def read_stored(
    store: EventStore, run_id: str, after: int, *, running: bool
) -> tuple[list[tuple[int, str]], bool | None]:
    """`store.read_events(run_id, after, limit=1)`; for a `running` run of which the store keeps nothing yet, read
    again for `STORE_WAIT` seconds at most (its first events may be on their way from the process streaming it)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STORE_WAIT
    events, ended = await store.read_events(run_id, after, limit=1)
    while ended is None and running and loop.time() < deadline:
        await wait_for_events(store, run_id, after, deadline - loop.time())
        events, ended = await store.read_events(run_id, after, limit=1)
    return events, ended


async def follow_stored(store: EventStore, run_id: str, after: int, heartbeat: float) -> AsyncIterator[bytes]:
    """The run's events in the store numbered above `after` to the end of their stream, read as they come (the
    store says when: `wait_for_events`); heartbeats in between. While nothing comes, each heartbeat asks whether
    anything still can (`nothing_more`): a stream whose process died is never ended in the store, and a run
    recovered without a server sends no event; such a stream ends at the second heartbeat that finds the run
    stopped (the first may come before the last events were copied over)."""
    loop = asyncio.get_running_loop()
    quiet, stopped = loop.time(), False
    while True:
        events, ended = await store.read_events(run_id, after)
        for number, text in events:
            yield text.encode()
            after = number
        if ended is not False:  # ended, or forgotten meanwhile
            return
        now = loop.time()
        if events:
            quiet, stopped = now, False
            continue
        if now - quiet >= heartbeat:
            quiet = now
            over = await nothing_more(store, run_id, after)
            if over == "ended" or (over == "stopped" and stopped):
                return
            stopped = over == "stopped"
            yield HEARTBEAT
        await wait_for_events(store, run_id, after, max(quiet + heartbeat - now, POLL))  # heartbeat=0: no spin


async def nothing_more(store: EventStore, run_id: str, after: int) -> str | None:
    """`"ended"` when the run's last stream in the store ended at or before event `after` (an id from the future
    included); `"stopped"` when the run is not running (completed, failed, paused, deleted); else None."""
    last, ended = await store.last_event(run_id)
    if ended and after >= last:
        return "ended"
    record = getattr(store, "run_record", None)
    if record is None:
        return None
    found = await record(run_id)
    return "stopped" if found is None or found.status != "running" else None


current: ContextVar[tuple[Channels, Channel] | None] = ContextVar("onion_serve_channel", default=None)


async def name_the_channel(ctx: Run, call_next: RunNext) -> RunResult[Any]:
    """A run layer that tells the server the id of the run it streams, before the run's first event."""
    streamed = current.get()
    if streamed is not None:
        channels, channel = streamed
        channels.bind(channel, ctx.id)
    return await call_next(ctx)
