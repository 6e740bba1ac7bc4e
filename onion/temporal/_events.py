"""A workflow's runs as they happen: each run's events in one numbered log, which a caller follows with a query.

The log is workflow state: a worker that replays the workflow builds the same
log again (the same events, the same numbers), so a caller that lost its
connection asks for what came after the last number it saw, from any worker,
and misses nothing and sees nothing twice. Queries leave no trace in the
workflow's history.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from temporalio import workflow
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle

from .._events import ModelCallFinished, TextDelta, ToolCallStarted, ToolResultEvent
from .._run import RunResult

EVENTS = "onion.events"


class EventLog:
    """The events of a workflow's runs, numbered from 1 (`seq`), each `{"seq", "run_id", "type", "data"}`."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        workflow.set_query_handler(EVENTS, self.after)

    def after(self, seq: int = 0) -> list[dict[str, Any]]:
        """The events after number `seq` (all of them for 0)."""
        return self.events[max(seq, 0) :]

    def events_of(self, run_id: str) -> Callable[[Any], None]:
        """The emit of run `run_id`: its onion events go into the log (those a caller cannot use, left out)."""

        def emit(event: Any) -> None:
            data = _data(event)
            if data is not None:
                self.add(run_id, *data)

        return emit

    def add(self, run_id: str, kind: str, data: dict[str, Any]) -> None:
        self.events.append({"seq": len(self.events) + 1, "run_id": run_id, "type": kind, "data": data})

    def paused(self, result: RunResult[Any]) -> None:
        pending = [call.to_dict() for call in result.pending]
        self.add(result.run_id, "run_paused", {"pending": pending})

    def finished(self, result: RunResult[Any]) -> None:
        output = result.output
        if not isinstance(output, str | int | float | bool | type(None) | list | dict):
            from pydantic import TypeAdapter

            output = TypeAdapter(type(output)).dump_python(output, mode="json")
        self.add(result.run_id, "run_finished", {"output": output, "usage": result.usage.to_dict()})


def _data(event: Any) -> tuple[str, dict[str, Any]] | None:
    """An onion event as the log keeps it: its type (as onion.serve names it) and fields, or None."""
    if isinstance(event, TextDelta):
        return "text_delta", {"text": event.text}
    if isinstance(event, ToolCallStarted):
        return "tool_call_started", {"id": event.id, "name": event.name, "args": event.args}
    if isinstance(event, ToolResultEvent):
        result = event.result
        data = {"call_id": event.call_id, "name": event.name, "content": result.text, "is_error": result.is_error}
        return "tool_result", data
    if isinstance(event, ModelCallFinished):
        return "model_call_finished", {"text": event.response.message.text, "usage": event.usage.to_dict()}
    return None


async def events(handle: WorkflowHandle[Any, Any], after: int = 0) -> list[dict[str, Any]]:
    """The workflow's events after number `after` (a query): `{"seq", "run_id", "type", "data"}` each."""
    found: list[dict[str, Any]] = await handle.query(EVENTS, after)
    return found


async def follow(handle: WorkflowHandle[Any, Any], after: int = 0, every: float = 0.1) -> AsyncIterator[dict[str, Any]]:
    """The workflow's events after number `after` as they happen, until the workflow closed and none is left.

    Asks every `every` seconds while nothing new came. To pick up after a disconnect, pass the `seq` of the
    last event seen.
    """
    while True:
        found = await events(handle, after)
        for event in found:
            after = event["seq"]
            yield event
        if found:
            continue
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            if not (found := await events(handle, after)):
                return
            for event in found:
                after = event["seq"]
                yield event
            continue
        await asyncio.sleep(every)
