"""`POST /ag-ui`: the AG-UI protocol, its models from the `ag-ui-protocol` package.

A `RunAgentInput` in; AG-UI events out as SSE: `RUN_STARTED`, text as
start / content / end, tool calls as start / args / end and their results,
a `STATE_SNAPSHOT` of `run.state`, then `RUN_FINISHED` (or `RUN_ERROR`). A
run that pauses finishes with the interrupt outcome, one interrupt per
pending call (its id `<run_id>/<call_id>`); an input with `resume` entries
decides them through the same path as `POST /runs/{run_id}/decisions` and
streams the resumed run's events the same way.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from ag_ui import core
from ag_ui.encoder import EventEncoder
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
from ._runs import decided, error_json, resumed


def parse(data: dict[str, Any]) -> core.RunAgentInput:
    """The body as a `RunAgentInput`, else a 422 naming the first field that does not fit."""
    try:
        return core.RunAgentInput.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise Problem(422, f"not an AG-UI RunAgentInput: field {where!r}: {first['msg']}") from None


async def events(agent: Agent[Any], given: core.RunAgentInput, principal: Principal | None) -> AsyncIterator[bytes]:
    """The AG-UI events of the run `given` asks for (or of the resume its `resume` entries decide), for
    `principal`."""
    encode = EventEncoder().encode
    thread, run = given.thread_id, given.run_id
    yield encode(core.RunStartedEvent(thread_id=thread, run_id=run)).encode()
    try:
        if given.resume:
            run_id, decided_here = decisions(given.resume)
            state = await decided(agent, run_id, decided_here, principal)
            source = resumed(agent, state, principal)
        else:
            source = started(agent, given, principal)
        async for event in translated(source, given):
            yield encode(event).encode()
    except Problem as problem:
        yield encode(core.RunErrorEvent(message=problem.message, code=str(problem.status))).encode()
    except Exception as error:
        failed = error_json(error)
        yield encode(core.RunErrorEvent(message=failed["message"], code=failed["error"])).encode()


def started(agent: Agent[Any], given: core.RunAgentInput, principal: Principal | None) -> AsyncIterator[Event]:
    """The events of the run `given` asks for (its thread the session when the agent has a store)."""
    session = given.thread_id if agent.store is not None else None
    history = messages(given.messages)
    if not history:
        raise Problem(422, "field 'messages' is empty: send the conversation, its last message the user's")
    input: Any = history[-1:] if session is not None else history
    state = given.state if isinstance(given.state, dict) else None
    return agent.stream(input, state=state, session=session, principal=principal)


async def translated(source: AsyncIterator[Event], given: core.RunAgentInput) -> AsyncIterator[core.BaseEvent]:
    """onion's events of a streamed run (or resume) as AG-UI events, text messages opened and closed around the
    deltas."""
    text: str | None = None
    async for event in source:
        if isinstance(event, TextDelta) and event.text:
            if text is None:
                text = new_id()
                yield core.TextMessageStartEvent(message_id=text, role="assistant")
            yield core.TextMessageContentEvent(message_id=text, delta=event.text)
        elif isinstance(event, StreamReset | ModelCallFinished | ToolCallStarted | RunFinished) and text is not None:
            yield core.TextMessageEndEvent(message_id=text)
            text = None
        if isinstance(event, ToolCallStarted):
            yield core.ToolCallStartEvent(tool_call_id=event.id, tool_call_name=event.name)
            yield core.ToolCallArgsEvent(tool_call_id=event.id, delta=json.dumps(event.args))
            yield core.ToolCallEndEvent(tool_call_id=event.id)
        elif isinstance(event, ToolResultEvent):
            content = event.result.text
            yield core.ToolCallResultEvent(
                message_id=new_id(), tool_call_id=event.call_id, content=content, role="tool"
            )
        elif isinstance(event, RunFinished):
            for finished in finish(given, event.result):
                yield finished


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


def arguments(text: str) -> dict[str, Any]:
    try:
        parsed = json.loads(text or "{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def new_id() -> str:
    return f"msg-{uuid.uuid4().hex}"
