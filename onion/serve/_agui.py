"""`POST /ag-ui`: the AG-UI protocol, its models from the `ag-ui-protocol` package.

A `RunAgentInput` in; AG-UI events out as SSE: `RUN_STARTED`, text as
start / content / end, tool calls as start / args / end and their results,
a `STATE_SNAPSHOT` of `run.state`, then `RUN_FINISHED` (or `RUN_ERROR`). A
run that pauses finishes with the interrupt outcome, one interrupt per
pending call (its id `<run_id>/<call_id>`); an input with `resume` entries
decides them through the same path as `POST /runs/{run_id}/decisions` and
streams the resumed run's events the same way.

The run goes on in a task of its own, its events in a channel as a streamed
`POST /runs` keeps them (`_channel.py`): heartbeats, a journaled run that
outlives its client, `GET /runs/{run_id}/events` to follow it. Text that a
`StreamReset` withdraws is taken back with a `MESSAGES_SNAPSHOT`.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ag_ui import core
from pydantic import ValidationError

from onion import (
    Agent,
    Decisions,
    Event,
    Message,
    ModelCallFinished,
    Principal,
    RunFinished,
    RunResult,
    StreamReset,
    TextDelta,
    ToolCallStarted,
    ToolResultEvent,
)

from ._bodies import Problem, jsonable
from ._channel import Channel, Channels, current
from ._runs import decided, error_json, resumed


def parse(data: dict[str, Any]) -> core.RunAgentInput:
    """The body as a `RunAgentInput`, else a 422 naming the first field that does not fit."""
    try:
        return core.RunAgentInput.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise Problem(422, f"not an AG-UI RunAgentInput: field {where!r}: {first['msg']}") from None


class Stream(Channel):
    """The channel of one AG-UI run: AG-UI events only. The server naming it (`Channels.bind`, before the run's
    first event) sends `RUN_STARTED`, onion's run id in its `metadata.run_id` (for `GET /runs/{run_id}/events`)."""

    def __init__(self, given: core.RunAgentInput) -> None:
        super().__init__()
        self.given = given

    def put(self, name: str, data: Any) -> None:
        if name == "run_started":
            begun = core.RunStartedEvent(thread_id=self.given.thread_id, run_id=self.given.run_id, metadata=data)
            name, data = begun.type.value, wire(begun)
        super().put(name, data)

    def send(self, event: core.BaseEvent) -> None:
        self.put(event.type.value, wire(event))

    def failed(self, message: str, code: str) -> None:
        """`RUN_ERROR` (after a `RUN_STARTED` without a run id when the run never began: a resume refused)."""
        if self.run_id is None:
            self.send(core.RunStartedEvent(thread_id=self.given.thread_id, run_id=self.given.run_id))
        self.send(core.RunErrorEvent(message=message, code=code))


def start(agent: Agent[Any], channels: Channels, given: core.RunAgentInput, principal: Principal | None) -> Stream:
    """Run what `given` asks for (or the resume its `resume` entries decide), for `principal`, in a task of its
    own, its AG-UI events into a new channel named after onion's run id (the run goes on when the client leaves,
    as a streamed `POST /runs` does)."""
    channel = Stream(given)

    async def pump() -> None:
        translation = Translation(given)
        try:
            if given.resume:
                run_id, decided_here = decisions(given.resume)
                state = await decided(agent, run_id, decided_here, principal)
                await channels.continue_from_store(channel, run_id)  # ids on from the run's, whoever streamed it
                source = resumed(agent, state, principal)
            else:
                current.set((channels, channel))  # the server's run layer names the channel
                run_id, source = None, started(agent, given, principal)
            async for event in source:
                if run_id is not None:
                    channels.bind(channel, run_id)  # a resume: named at its first event, once it claimed the run
                for translated in translation.of(event):
                    channel.send(translated)
        except Problem as problem:
            channel.failed(problem.message, str(problem.status))
        except Exception as error:
            failed = error_json(error)
            channel.failed(failed["message"], failed["error"])
        finally:
            channels.ended(channel)

    channel.task = channels.keep_running(asyncio.create_task(pump()))
    return channel


def started(agent: Agent[Any], given: core.RunAgentInput, principal: Principal | None) -> AsyncIterator[Event]:
    """The events of the run `given` asks for (its thread the session when the agent has a store)."""
    session = given.thread_id if agent.store is not None else None
    history = messages(given.messages)
    if not history:
        raise Problem(422, "field 'messages' is empty: send the conversation, its last message the user's")
    input: Any = history[-1:] if session is not None else history
    state = given.state if isinstance(given.state, dict) else None
    return agent.stream(input, state=state, session=session, principal=principal)


class Translation:
    """onion's events of one run as AG-UI events, text messages opened and closed around the deltas; and the
    messages the client holds meanwhile (its own, then this run's), for the `MESSAGES_SNAPSHOT` that takes back
    the text of a model call a `StreamReset` withdraws."""

    def __init__(self, given: core.RunAgentInput) -> None:
        self.given = given
        self.messages: list[Any] = list(given.messages)
        self.text: core.AssistantMessage | None = None
        """The text message open."""
        self.this_call: set[str] = set()
        """The ids of the text messages of the model call under way: what a `StreamReset` withdraws."""

    def of(self, event: Event) -> Iterator[core.BaseEvent]:
        """The AG-UI events of one onion event."""
        if isinstance(event, TextDelta) and event.text:
            if self.text is None:
                self.text = core.AssistantMessage(id=new_id(), content="")
                self.messages.append(self.text)
                self.this_call.add(self.text.id)
                yield core.TextMessageStartEvent(message_id=self.text.id, role="assistant")
            self.text.content = f"{self.text.content}{event.text}"
            yield core.TextMessageContentEvent(message_id=self.text.id, delta=event.text)
        elif (
            isinstance(event, StreamReset | ModelCallFinished | ToolCallStarted | RunFinished) and self.text is not None
        ):
            yield core.TextMessageEndEvent(message_id=self.text.id)
            self.text = None
        if isinstance(event, StreamReset) and self.this_call:
            self.messages = [m for m in self.messages if m.id not in self.this_call]
            self.this_call = set()
            yield core.MessagesSnapshotEvent(messages=self.messages)
        elif isinstance(event, ModelCallFinished):
            self.this_call = set()
        elif isinstance(event, ToolCallStarted):
            args = json.dumps(event.args)
            called = core.ToolCall(
                id=event.id, type="function", function=core.FunctionCall(name=event.name, arguments=args)
            )
            self.messages.append(core.AssistantMessage(id=event.id, tool_calls=[called]))
            yield core.ToolCallStartEvent(tool_call_id=event.id, tool_call_name=event.name)
            yield core.ToolCallArgsEvent(tool_call_id=event.id, delta=args)
            yield core.ToolCallEndEvent(tool_call_id=event.id)
        elif isinstance(event, ToolResultEvent):
            result = core.ToolMessage(id=new_id(), tool_call_id=event.call_id, content=event.result.text)
            self.messages.append(result)
            yield core.ToolCallResultEvent(
                message_id=result.id, tool_call_id=event.call_id, content=result.content, role="tool"
            )
        elif isinstance(event, RunFinished):
            yield from finish(self.given, event.result)


def finish(given: core.RunAgentInput, result: RunResult[Any]) -> list[core.BaseEvent]:
    """`STATE_SNAPSHOT` (when the run has state) and `RUN_FINISHED`, with the interrupt outcome when paused."""
    thread, run = given.thread_id, given.run_id
    done: list[core.BaseEvent] = []
    if result.state:
        done.append(core.StateSnapshotEvent(snapshot=result.state))
    if result.paused:
        interrupts = [
            core.Interrupt(
                id=f"{result.run_id}/{call.id}",
                reason="approval",
                message=call.reason,
                tool_call_id=call.id,
                metadata={"run_id": result.run_id, "kind": call.kind, "name": call.name, "args": call.args},
            )
            for call in result.pending
        ]
        outcome: Any = core.RunFinishedInterruptOutcome(interrupts=interrupts)
        done.append(core.RunFinishedEvent(thread_id=thread, run_id=run, outcome=outcome))
    else:
        outcome = core.RunFinishedSuccessOutcome()
        done.append(
            core.RunFinishedEvent(thread_id=thread, run_id=run, result=jsonable(result.output), outcome=outcome)
        )
    return done


def decisions(entries: list[core.ResumeEntry]) -> tuple[str, Decisions]:
    """The run the entries answer and their decisions: resolved approves (with `payload.args`: edits), cancelled
    rejects (`payload.reason`)."""
    runs = {entry.interrupt_id.partition("/")[0] for entry in entries}
    if len(runs) != 1 or not all("/" in entry.interrupt_id for entry in entries):
        raise Problem(422, "field 'resume': give the interrupts of one run, each id '<run_id>/<call_id>' as sent")
    approve: list[str] = []
    reject: dict[str, str] = {}
    edit: dict[str, dict[str, Any]] = {}
    for entry in entries:
        call_id = entry.interrupt_id.partition("/")[2]
        payload = entry.payload if isinstance(entry.payload, dict) else {}
        if entry.status == "cancelled":
            reject[call_id] = str(payload.get("reason") or "cancelled by the user")
        elif isinstance(payload.get("args"), dict):
            edit[call_id] = payload["args"]
        else:
            approve.append(call_id)
    return runs.pop(), Decisions(approve, reject, edit)


def messages(given: list[Any]) -> list[Message]:
    """The client's history as onion's messages, as far as a client may write it: user messages and the
    assistant's text. A client's `system` / `developer` messages, assistant tool calls and tool results are
    dropped (the client could forge them: instructions, or results of calls this server never made), as are
    non-text parts (a file URL the server would fetch)."""
    converted = []
    for message in given:
        content = message.content if isinstance(getattr(message, "content", None), str) else text_of(message)
        if message.role == "user":
            converted.append(Message.user(content))
        elif message.role == "assistant" and content:
            converted.append(Message.assistant(content))
    return converted


def text_of(message: Any) -> str:
    parts = getattr(message, "content", None) or []
    return (
        "".join(getattr(part, "text", "") for part in parts if not isinstance(part, str))
        if isinstance(parts, list)
        else ""
    )


def wire(event: core.BaseEvent) -> dict[str, Any]:
    """An AG-UI event as its JSON object (camelCase, unset fields left out), as `ag_ui.encoder` writes it."""
    return event.model_dump(mode="json", by_alias=True)


def new_id() -> str:
    return f"msg-{uuid.uuid4().hex}"
