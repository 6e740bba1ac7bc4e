"""`EventStore`: the events a server streamed for each run, kept where every server process on the store reads them.

A run's events are numbered from 1, on across its streams (the stream that
paused, then its resume's). Each stream ends with an end mark after its last
event, so a reader knows when a stream is over. `SQLiteStore` keeps them in a
table (the processes of one machine), `RedisStore` in a Redis stream per run
(every machine); `MemoryStore` has none: its server process is the only one.

A follower waits for a run's next event with `wait_for_events`: on
`RedisStore` Redis says when it comes (`wait_events`, one blocking read per
process for every run followed); a store without `wait_events` is read
again every `POLL` seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

Events = list[tuple[int, str]]
"""`(number, text)` of each event, in order."""
POLL = 0.05
"""Seconds between reads of a store that cannot say when a run's next event comes."""


@runtime_checkable
class EventStore(Protocol):
    """Runs' streamed events, shared by every server process using the store (`onion.serve` keeps them here)."""

    async def add_events(self, run_id: str, events: Sequence[tuple[int, str]], *, ended: bool, keep: float) -> bool:
        """Append `events` (each numbered above the last one kept) and, if `ended`, the end mark of this stream
        after the last of them; the run's events are forgotten `keep` seconds later (unless more come).
        False, with the rest left unwritten, when a number is not above the last one kept (another process
        streams the run)."""
        ...

    async def read_events(self, run_id: str, after: int, *, limit: int = 500) -> tuple[Events, bool | None]:
        """The run's events numbered above `after` up to the end of their stream (at most `limit`), and whether
        that stream ended after them: True, False (it goes on), or None when the store keeps no event of
        the run (never streamed here, or forgotten). A stream that ended right after event `after` is passed
        over when another stream follows it (a resume's)."""
        ...

    async def last_event(self, run_id: str) -> tuple[int, bool]:
        """The number of the run's last event kept and whether its stream has ended (0 and True: none kept)."""
        ...


async def wait_for_events(store: EventStore, run_id: str, after: int, timeout: float) -> None:
    """Return once the store may hold something of the run's after event `after` (an event, its stream's end,
    the run's first event when `after` is 0), or `timeout` seconds later: the store's `wait_events(run_id, after,
    timeout)` if it has one, else `POLL` seconds (at most `timeout`). Read the store to know what came."""
    wait: Any = getattr(store, "wait_events", None)
    if wait is None:
        await asyncio.sleep(max(0.0, min(timeout, POLL)))
    else:
        await wait(run_id, after, max(0.0, timeout))


def up_to_end(kept: Iterable[tuple[int, str | None]], limit: int) -> tuple[Events, bool]:
    """`read_events`' answer from what the store keeps after `after`, in order: `(number, text)`, or `(number,
    None)` for the end mark after event `number` (`limit` + 1 of them: the first may be the mark at `after`)."""
    events: Events = []
    ended = False
    for number, text in kept:
        if len(events) == limit:
            return events, text is None
        if text is not None:
            events.append((number, text))
            ended = False
        elif events:
            return events, True
        else:  # the stream of the reader's last event ended; another may follow
            ended = True
    return events, ended
