"""Stream edits: model layers rewriting or holding back the events their call streams, sent out to the consumer."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._calls import Editing as Editing
from ._calls import ModelCall
from ._calls import Observing as Observing
from ._events import ToolCallStarted
from .types import StreamEdit as StreamEdit


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
