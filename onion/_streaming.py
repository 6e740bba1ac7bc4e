"""The events of one `agent.stream`, as its consumer reads them."""

from __future__ import annotations

import asyncio

from ._events import Event, ModelCallFinished, StreamReset, TextDelta


class EventQueue:
    """Events on their way to the consumer; `put` is the run's `emit` (after every layer's wrapper).

    It keeps what a model call's text showed the consumer, and when the
    call finishes with a different answer (a partial stream replaced by a
    fallback or an `on_error` recovery, a layer that changed the text), it
    sends `StreamReset` and the answer as one `TextDelta` before
    `ModelCallFinished`: the text shown always ends up being the text the
    run returns. `None` marks the end.
    """

    __slots__ = ("_queue", "_shown")

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._shown: list[str] = []

    def put(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self._shown.append(event.text)
        elif isinstance(event, ModelCallFinished):
            shown, self._shown = "".join(self._shown), []
            answer = event.response.text
            if shown != answer:
                if shown:
                    self._queue.put_nowait(StreamReset())
                if answer:
                    self._queue.put_nowait(TextDelta(answer))
        elif isinstance(event, StreamReset):
            self._shown.clear()
        self._queue.put_nowait(event)

    def end(self) -> None:
        """No more events: the run ended."""
        self._queue.put_nowait(None)

    async def get(self) -> Event | None:
        """The next event, or `None` after the last."""
        return await self._queue.get()
