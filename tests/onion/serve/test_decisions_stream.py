"""Decisions on a real uvicorn server: a resume streamed as SSE and over AG-UI, and paused model calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ag_ui import core
from live_server import Served, sse_events
from test_ag_ui import ag_ui, run_input, texts

from onion import Message, ModelResponse, ToolRequest

SSE = {"accept": "text/event-stream"}


def asks(*calls: tuple[str, str, dict[str, object]]) -> ModelResponse:
    return ModelResponse(Message.assistant("", [ToolRequest(*call) for call in calls]))


async def paused(served: Served, question: str, *script: Any) -> dict[str, Any]:
    served.fake.script(list(script))
    async with served.client() as client:
        answer = await client.post("/runs", json={"input": question})
    assert answer.status_code == 200 and answer.json()["status"] == "paused", answer.text
    return dict(answer.json())


async def test_a_decision_over_sse_streams_the_approved_tools_events_and_ends_with_the_json_answer(
    serving: Callable[..., Served],
) -> None:
    """The resume streams as `POST /runs` SSE does (ids, run_started, the tool's events, text); its last event is
    the JSON answer of the same decision; the stream replays from GET /runs/{id}/events; deciding again: 409."""
    served = serving()
    text = "Deleted both files, as you approved."
    one = await paused(served, "tidy", asks(("toolu_s1", "delete", {"path": "sse.txt"})))
    two = await paused(served, "tidy", asks(("toolu_s1", "delete", {"path": "json.txt"})))
    served.fake.script([text, text])
    async with served.client() as client:
        streamed = await client.post(f"/runs/{one['run_id']}/decisions", json={"approve": ["toolu_s1"]}, headers=SSE)
        plain = (await client.post(f"/runs/{two['run_id']}/decisions", json={"approve": ["toolu_s1"]})).json()
        replayed = sse_events((await client.get(f"/runs/{one['run_id']}/events")).text)
        again = await client.post(f"/runs/{one['run_id']}/decisions", json={"approve": ["toolu_s1"]}, headers=SSE)
    assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
    events = sse_events(streamed.text)
    names = [e["event"] for e in events]
    assert [int(e["id"]) for e in events] == list(range(1, len(events) + 1))
    assert events[0] == {"id": "1", "event": "run_started", "data": {"run_id": one["run_id"]}}
    result = next(e["data"] for e in events if e["event"] == "tool_result")
    assert result == {"call_id": "toolu_s1", "name": "delete", "content": "deleted sse.txt", "is_error": False}
    assert names.index("tool_result") < names.index("text_delta") < names.index("model_call_finished")
    deltas = [e["data"]["text"] for e in events if e["event"] == "text_delta"]
    assert len(deltas) > 1 and "".join(deltas) == text
    assert names[-1] == "run_finished" and names.count("run_finished") == 1
    assert {**events[-1]["data"], "run_id": plain["run_id"]} == plain and plain["output"] == text
    assert replayed == events
    assert again.status_code == 409 and "nothing waits for a decision" in again.json()["error"]
    assert served.effects_lines().count("delete sse.txt") == 1


async def test_an_ag_ui_resume_streams_the_resumed_runs_text_and_tool_events(serving: Callable[..., Served]) -> None:
    """Approving the interrupt streams the resumed run: the approved call's result, the next tool call, its result,
    then the text, all in a valid AG-UI order; RUN_FINISHED answers the input's thread and run."""
    served = serving()
    asked = asks(("toolu_a1", "delete", {"path": "agui.txt"}))
    served.fake.script([asked, asks(("toolu_a2", "lookup", {"city": "Rome"})), "Deleted, and Rome is sunny."])
    interrupted = await ag_ui(served, run_input("tidy"))
    interrupt = interrupted[-1].outcome.interrupts[0]
    assert interrupt.metadata["kind"] == "tool"
    entry = {"interruptId": interrupt.id, "status": "resolved"}
    given = run_input(None, resume=[entry])
    events = await ag_ui(served, given)
    kinds = [e.type for e in events]
    results = [e for e in events if e.type == core.EventType.TOOL_CALL_RESULT]
    assert [r.content for r in results] == ["deleted agui.txt", "sunny in Rome"]
    start = next(e for e in events if e.type == core.EventType.TOOL_CALL_START)
    assert (start.tool_call_id, start.tool_call_name) == ("toolu_a2", "lookup")
    assert kinds.index(core.EventType.TOOL_CALL_START) < kinds.index(core.EventType.TEXT_MESSAGE_START)
    assert texts(events) == "Deleted, and Rome is sunny."
    assert len([k for k in kinds if k == core.EventType.TEXT_MESSAGE_CONTENT]) > 1
    assert events[-1].type == core.EventType.RUN_FINISHED and events[-1].outcome.type == "success"
    assert (events[-1].thread_id, events[-1].run_id) == (given["threadId"], given["runId"])
    assert served.effects_lines().count("delete agui.txt") == 1


async def test_a_paused_model_call_shows_its_kind_offers_no_edit_and_can_be_approved(
    serving: Callable[..., Served],
) -> None:
    """A model layer's pause: `kind` "model" in the pending calls and on the page (no edit offered, an edit
    refused with 409); approving it over SSE streams the model's answer."""
    served = serving()
    before = len(served.fake.requests)
    run = await paused(served, "a costly question", "An answer worth the price.")
    (pending,) = run["pending"]
    assert pending["kind"] == "model" and pending["args"] == {} and pending["reason"] == "this model call costs money"
    assert len(served.fake.requests) == before  # nothing sent while it waits
    call_id, run_id = pending["id"], run["run_id"]
    async with served.client() as client:
        shown = (await client.get(f"/runs/{run_id}")).json()
        listed = (await client.get("/runs", params={"status": "paused"})).json()["runs"]
        page = (await client.get("/")).text
        edit = await client.post(f"/runs/{run_id}/decisions", json={"edit": {call_id: {"x": 1}}})
        approved = await client.post(f"/runs/{run_id}/decisions", json={"approve": [call_id]}, headers=SSE)
    assert shown["pending"] == [pending] and next(r for r in listed if r["run_id"] == run_id)["pending"] == [pending]
    form = page.split(f"id='run-{run_id}'", 1)[1].split("</form>", 1)[0]
    assert f"id='kind-{run_id}-{call_id}'>model call<" in form and f"edit-{run_id}-{call_id}" not in form
    assert "textarea" not in form
    assert edit.status_code == 409 and "no arguments to edit" in edit.json()["error"]
    events = sse_events(approved.text)
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "run_finished"
    assert "".join(e["data"]["text"] for e in events if e["event"] == "text_delta") == "An answer worth the price."
    assert events[-1]["data"]["output"] == "An answer worth the price." and events[-1]["data"]["pending"] == []
    assert len(served.fake.requests) == before + 1
