"""The events of one `agent.stream`, as its consumer reads them."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic

from ._events import Event, ModelCallFinished, PartialOutput, RunFinished, RunPaused, StreamReset, T, TextDelta
from ._output import OutputSchema, output_schema
from ._run import RunResult

if TYPE_CHECKING:
    from typing import Self

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


class EventStream(Generic[T]):
    """The events of one run as they happen, `RunFinished` (or `RunPaused`) last: what `agent.stream` returns.

    Read once, by one `async for` (or `anext`). Leaving it cancels the run: a `break` out of the loop (the
    stream kept in a variable or not), `await stream.aclose()`, or the end of `async with agent.stream(...) as
    events:`; the run is started by the first read, so a stream never read never runs.
    """

    __slots__ = ("_closed", "_produce", "_queue", "_task")

    def __init__(
        self, produce: Callable[[Callable[[Event], None]], Awaitable[RunResult[Any]]], output_type: Any
    ) -> None:
        self._produce = produce
        self._queue = EventQueue(output_type)
        self._task: asyncio.Future[RunResult[Any]] | None = None
        self._closed = False

    async def __anext__(self) -> Event[T]:
        if self._closed:
            raise StopAsyncIteration
        if self._task is None:
            self._task = asyncio.ensure_future(self._produced())
        try:
            event = await self._queue.get()
            if event is not None:
                return event
            result = await self._task
        except BaseException:
            await self.aclose()
            raise
        self._closed = True
        return RunPaused(result, result.to_state()) if result.paused else RunFinished(result)

    async def _produced(self) -> RunResult[Any]:
        try:
            return await self._produce(self._queue.put)
        finally:
            self._queue.end()

    def __aiter__(self) -> AsyncIterator[Event[T]]:
        return self._reading()

    async def _reading(self) -> AsyncGenerator[Event[T]]:
        """The events for one `async for`: when the loop is left, this generator is closed (at once, or when
        collected) and closes the stream."""
        try:
            while True:
                try:
                    event = await self.__anext__()
                except StopAsyncIteration:
                    return
                yield event
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """End the stream: cancel the run if it is still going and wait for it (idempotent)."""
        self._closed = True
        task = self._task
        if task is None:
            return
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        elif not task.cancelled():
            task.exception()  # the consumer left after the run failed: retrieved, so asyncio logs nothing

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
