"""AG-UI on a real uvicorn server: every event validates against the `ag-ui-protocol` models, in a valid order."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from ag_ui import core
from live_server import Served, sse_events
from pydantic import TypeAdapter

from onion import Message, ModelResponse, ToolRequest

EVENTS: TypeAdapter[Any] = TypeAdapter(core.Event)


def run_input(text: str | None, **fields: Any) -> dict[str, Any]:
    messages = [] if text is None else [{"id": "m1", "role": "user", "content": text}]
    given = {"threadId": f"thread-{uuid.uuid4().hex[:8]}", "runId": "ui-run-1", "messages": messages}
    given.update({"state": {}, "tools": [], "context": [], "forwardedProps": {}, **fields})
    return given


async def ag_ui(served: Served, given: dict[str, Any]) -> list[Any]:
    """POST /ag-ui; each event parsed by the protocol's models (a mismatch fails the test), its order checked."""
    async with served.client() as client:
        answer = await client.post("/ag-ui", json=given)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    events = [EVENTS.validate_python(e["data"]) for e in sse_events(answer.text)]
    resumed = {entry["interruptId"].partition("/")[2] for entry in given.get("resume", [])}
    assert_valid_order(events, resumed)
    return events


def assert_valid_order(events: list[Any], resumed: set[str] | frozenset[str] = frozenset()) -> None:
    """Run started first, finished (or errored) last; text and tool calls opened, filled and closed in turn (a
    call the input resumes was opened and closed in the run that paused: only its result comes)."""
    kinds = [e.type for e in events]
    assert kinds[0] == core.EventType.RUN_STARTED and kinds.count(core.EventType.RUN_STARTED) == 1
    assert kinds[-1] in (core.EventType.RUN_FINISHED, core.EventType.RUN_ERROR)
    text: str | None = None
    calls: dict[str, str] = dict.fromkeys(resumed, "ended")
    for event in events[1:-1]:
        if event.type == core.EventType.TEXT_MESSAGE_START:
            assert text is None
            text = event.message_id
        elif event.type == core.EventType.TEXT_MESSAGE_CONTENT:
            assert event.message_id == text and event.delta
        elif event.type == core.EventType.TEXT_MESSAGE_END:
            assert event.message_id == text
            text = None
        elif event.type == core.EventType.TOOL_CALL_START:
            assert text is None and event.tool_call_id not in calls
            calls[event.tool_call_id] = "started"
        elif event.type == core.EventType.TOOL_CALL_ARGS:
            assert calls[event.tool_call_id] == "started"
        elif event.type == core.EventType.TOOL_CALL_END:
            assert calls[event.tool_call_id] == "started"
            calls[event.tool_call_id] = "ended"
        elif event.type == core.EventType.TOOL_CALL_RESULT:
            assert calls[event.tool_call_id] == "ended"
    assert text is None


def texts(events: list[Any]) -> str:
    return "".join(e.delta for e in events if e.type == core.EventType.TEXT_MESSAGE_CONTENT)


async def test_a_text_answer_streams_as_one_text_message(serving: Callable[..., Served]) -> None:
    """A plain answer: RUN_STARTED, TEXT_MESSAGE_START / CONTENT... / END, RUN_FINISHED with the output."""
    served = serving()
    served.fake.script(["Bonjour from the agent."])
    events = await ag_ui(served, run_input("hello"))
    assert texts(events) == "Bonjour from the agent."
    assert events[-1].type == core.EventType.RUN_FINISHED and events[-1].result == "Bonjour from the agent."
    assert events[-1].run_id == "ui-run-1" and events[-1].outcome.type == "success"


async def test_a_tool_run_sends_the_call_its_arguments_and_its_result(serving: Callable[..., Served]) -> None:
    """A tool call: TOOL_CALL_START, ARGS (its JSON), END, then TOOL_CALL_RESULT; the state as a snapshot."""
    served = serving()
    asked = ModelResponse(Message.assistant("", [ToolRequest("toolu_l", "lookup", {"city": "Oslo"})]))
    served.fake.script([asked, "Sunny in Oslo."])
    events = await ag_ui(served, run_input("weather?", state={"unit": "C"}))
    by_type = {e.type: e for e in events}
    assert by_type[core.EventType.TOOL_CALL_START].tool_call_name == "lookup"
    assert by_type[core.EventType.TOOL_CALL_ARGS].delta == '{"city": "Oslo"}'
    assert by_type[core.EventType.TOOL_CALL_RESULT].content == "sunny in Oslo"
    assert by_type[core.EventType.STATE_SNAPSHOT].snapshot == {"unit": "C"}
    assert texts(events) == "Sunny in Oslo." and "lookup Oslo" in served.effects_lines()


async def test_a_failing_run_ends_with_run_error_and_a_bad_input_answers_422(serving: Callable[..., Served]) -> None:
    """The model answers 400: the stream ends with RUN_ERROR naming it; a body that is not RunAgentInput: 422."""
    served = serving()
    assert served.fake.remaining == 0  # the request past the script's end gets a 400
    events = await ag_ui(served, run_input("no script left"))
    assert events[-1].type == core.EventType.RUN_ERROR and events[-1].message
    async with served.client() as client:
        bad = await client.post("/ag-ui", json={"messages": []})
    assert bad.status_code == 422 and "field 'threadId'" in bad.json()["error"]


async def test_a_pause_is_an_interrupt_and_resume_entries_decide_it_once(serving: Callable[..., Served]) -> None:
    """A pause finishes with the interrupt outcome; resume entries edit the call; resuming again: RUN_ERROR 409."""
    served = serving()
    asked = ModelResponse(Message.assistant("", [ToolRequest("toolu_g", "delete", {"path": "ui.txt"})]))
    served.fake.script([asked, "Deleted the edited file."])
    paused = await ag_ui(served, run_input("tidy"))
    outcome = paused[-1].outcome
    assert outcome.type == "interrupt" and len(outcome.interrupts) == 1
    interrupt = outcome.interrupts[0]
    assert interrupt.tool_call_id == "toolu_g" and interrupt.message == "deleting needs a person"
    entry = {"interruptId": interrupt.id, "status": "resolved", "payload": {"args": {"path": "ui.edited"}}}
    resumed = await ag_ui(served, run_input(None, resume=[entry]))
    assert texts(resumed) == "Deleted the edited file." and resumed[-1].outcome.type == "success"
    again = await ag_ui(served, run_input(None, resume=[entry]))
    assert again[-1].type == core.EventType.RUN_ERROR and again[-1].code == "409"
    assert served.effects_lines().count("delete ui.edited") == 1 and "delete ui.txt" not in served.effects_lines()
