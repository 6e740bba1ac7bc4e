"""The events of one `agent.stream`, as its consumer reads them."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from ._events import Event, ModelCallFinished, PartialOutput, RunFinished, RunPaused, StreamReset, TextDelta
from ._output import OutputSchema, output_schema
from ._run import RunResult

_NOTHING: Any = object()


class _Handoff:
    """Events from the run to its one consumer: `asyncio.Queue`'s `put_nowait` and `get`, without its getters'
    and putters' bookkeeping (one consumer, no bound)."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[Event | None] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Event | None) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> Event | None:
        items = self._items
        while not items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        return items.popleft()


class EventQueue:
    """Events on their way to the consumer; `put` is the run's `emit` (after every layer's wrapper).

    When a call finishes with an answer other than the text it showed, it sends `StreamReset` and the answer
    as one `TextDelta` first, so the text shown is the text the run returns. `None` marks the end.
    """

    __slots__ = ("_partial", "_queue", "_sent", "_shown")

    def __init__(self, output_type: Any = str) -> None:
        self._queue = _Handoff()
        self._shown: list[str] = []
        self._partial: OutputSchema | None = None if output_type is str else output_schema(output_type)
        self._sent: Any = _NOTHING

    def put(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self._shown.append(event.text)
            if self._partial is not None:
                self._queue.put_nowait(event)
                self._send_partial()
                return
        elif isinstance(event, ModelCallFinished):
            self._sent = _NOTHING
            shown, self._shown = "".join(self._shown), []
            answer = event.response.text
            if shown != answer:
                if shown:
                    self._queue.put_nowait(StreamReset())
                if answer:
                    self._queue.put_nowait(TextDelta(answer))
        elif isinstance(event, StreamReset):
            self._shown.clear()
            self._sent = _NOTHING
        self._queue.put_nowait(event)

    def _send_partial(self) -> None:
        """`PartialOutput` when the text so far validates as a value other than the last one sent."""
        assert self._partial is not None
        try:
            value = self._partial.validate_partial("".join(self._shown))
        except ValueError:
            return
        if value != self._sent:
            self._sent = value
            self._queue.put_nowait(PartialOutput(value))

    def end(self) -> None:
        """No more events: the run ended."""
        self._queue.put_nowait(None)

    async def get(self) -> Event | None:
        """The next event, or `None` after the last."""
        return await self._queue.get()


async def streamed(
    produce: Callable[[Callable[[Event], None]], Awaitable[RunResult[Any]]], output_type: Any = str
) -> AsyncGenerator[Event]:
    """The events of the run `produce(emit)` runs, as they happen; then `RunFinished` (or `RunPaused`).

    `output_type`: the run's (other than `str`: `PartialOutput` events too). Leaving early cancels the run.
    """
    queue = EventQueue(output_type)

    async def produced() -> RunResult[Any]:
        try:
            return await produce(queue.put)
        finally:
            queue.end()

    task = asyncio.ensure_future(produced())
    try:
        while (event := await queue.get()) is not None:
            yield event
        result = await task
        yield RunPaused(result, result.to_state()) if result.paused else RunFinished(result)
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        elif not task.cancelled():
            task.exception()  # the consumer left after the run failed: retrieved, so asyncio logs nothing
