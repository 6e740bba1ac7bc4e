"""A run's events as this server sent them: kept per run so a client that lost its stream can pick it up again.

Each event gets the run's next sequence number (`id:` in the SSE stream);
`follow(after)` yields the events after that number, then each new one as
it comes, then ends when the run has ended. While nothing comes it yields a
heartbeat comment every `heartbeat` seconds, so proxies keep the stream open.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

from onion import Run, RunNext, RunResult

HEARTBEAT = b": heartbeat\n\n"


def sse(number: int, name: str, data: Any) -> bytes:
    """One SSE event: `id:`, `event:` and `data:` (JSON on one line)."""
    return f"id: {number}\nevent: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


class Channel:
    """The events of one run, in order, and whether it has ended."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.first = 0
        """The id before this channel's first event: a resume's events go on from the paused stream's last id."""
        self.events: list[bytes] = []
        self.ended = False
        self.task: asyncio.Task[None] | None = None
        """What runs the run and fills the channel."""
        self._changed = asyncio.Event()

    def put(self, name: str, data: Any) -> None:
        self.events.append(sse(self.first + len(self.events) + 1, name, data))
        self._wake()

    def end(self) -> None:
        self.ended = True
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

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
    """The channels of the runs this server ran, by run id; an ended one is forgotten `keep` seconds later."""

    def __init__(self, keep: float = 600.0) -> None:
        self.keep = keep
        self._by_run: dict[str, Channel] = {}
        self._running: set[asyncio.Task[None]] = set()

    def keep_running(self, task: asyncio.Task[None]) -> asyncio.Task[None]:
        """Hold `task` until it ends (the event loop keeps only weak references to tasks)."""
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    def get(self, run_id: str) -> Channel | None:
        return self._by_run.get(run_id)

    def bind(self, channel: Channel, run_id: str) -> None:
        """Name `channel` after its run, once (a sub-run of the same agent is not the run)."""
        if channel.run_id is None:
            channel.run_id = run_id
            before = self._by_run.get(run_id)
            if before is not None and not channel.events:  # a resume: its ids go on from the paused stream's
                channel.first = before.last
            self._by_run[run_id] = channel
            channel.put("run_started", {"run_id": run_id})

    def ended(self, channel: Channel) -> None:
        channel.end()
        if channel.run_id is not None:
            run_id = channel.run_id
            asyncio.get_running_loop().call_later(self.keep, self._forget, run_id, channel)

    def _forget(self, run_id: str, channel: Channel) -> None:
        if self._by_run.get(run_id) is channel:  # a resume of the run may have a channel of its own since
            del self._by_run[run_id]


current: ContextVar[tuple[Channels, Channel] | None] = ContextVar("onion_serve_channel", default=None)


async def name_the_channel(ctx: Run, call_next: RunNext) -> RunResult[Any]:
    """A run layer that tells the server the id of the run it streams, before the run's first event."""
    streamed = current.get()
    if streamed is not None:
        channels, channel = streamed
        channels.bind(channel, ctx.id)
    return await call_next(ctx)
