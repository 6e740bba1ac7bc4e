"""Stream edits: model layers rewriting or holding back the events their call streams."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from ._events import ToolCallStarted

if TYPE_CHECKING:
    from ._calls import ModelCall


class StreamEdit(Protocol):
    """Takes each event a model call streams and returns the events to send on in its place.

    Return `[event]` to pass it on, a rewritten event, several, or none to
    hold it back. An `end()` method, when present, is called once the
    model's stream ended and returns what is still held. A `StreamReset`
    (a retry starts the stream again) passes through edits too: drop what
    is held and pass it on.
    """

    def __call__(self, event: Any, /) -> Iterable[Any]: ...


class Editing:
    """An edit registered on one call; `with` removes it when this layer's pass ends."""

    __slots__ = ("call", "edit")

    def __init__(self, call: ModelCall, edit: StreamEdit) -> None:
        self.call = call
        self.edit = edit

    def __enter__(self) -> StreamEdit:
        return self.edit

    def __exit__(self, *exc_info: object) -> None:
        edits = self.call._edits
        if edits is not None:
            for index in range(len(edits) - 1, -1, -1):
                if edits[index] is self.edit:
                    del edits[index]
                    break


class Observing:
    """An observer as an edit: it sees each event as the layers inside it left it, and passes it on."""

    __slots__ = ("observer",)

    def __init__(self, observer: Callable[[Any], None]) -> None:
        self.observer = observer

    def __call__(self, event: Any) -> tuple[Any]:
        self.observer(event)
        return (event,)


def send_out(call: ModelCall, events: Iterable[Any], level: int) -> None:
    """Send `events` out through the edits registered before position `level`, outermost last, to the consumer.

    The consumer (`run.emit`) gets no `ToolCallStarted`: onion sends those with their arguments once the
    response is whole.
    """
    if level == 0:
        emit = call.run.emit
        if emit is not None:
            for event in events:
                if not isinstance(event, ToolCallStarted):
                    emit(event)
        return
    edit = call._edits[level - 1]  # type: ignore[index]
    for event in events:
        send_out(call, edit(event), level - 1)


def end_stream(call: ModelCall) -> None:
    """The model's stream for `call` ended: each edit, innermost first, sends on what it still holds."""
    edits = call._edits
    for level in range(len(edits or ()), 0, -1):
        end = getattr(edits[level - 1], "end", None)  # type: ignore[index]
        if end is not None:
            send_out(call, end(), level - 1)
