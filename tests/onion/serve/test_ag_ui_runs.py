"""AG-UI runs as solid as `/runs` on a real uvicorn server: their own task, heartbeats, a client that leaves and
follows again at `/runs/{run_id}/events`, a resume's ids, and text a retried (or replaced) model call withdraws."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx2
from ag_ui import core
from live_server import Served, sse_events
from test_ag_ui import EVENTS, assert_valid_order, run_input, texts

from onion import Agent, Message, ModelCall, ModelNext, ModelResponse, ToolRequest, tool
from onion.serve import serve
from onion.testing import Delay, ScriptedModel, StreamError


def waits(seconds: float, text: str = "") -> ModelResponse:
    return ModelResponse(Message.assistant(text, [ToolRequest("toolu_slow", "slow", {"seconds": seconds})]))


async def read_until(served: Served, given: dict[str, Any], last: str) -> list[dict[str, Any]]:
    """POST /ag-ui and leave (close the connection) right after the first event of type `last`."""
    text = ""
    async with served.client() as client, client.stream("POST", "/ag-ui", json=given) as stream:
        async for line in stream.aiter_lines():
            text += line + "\n"
            if line == "" and any(e["data"]["type"] == last for e in sse_events(text)):
                break
    return sse_events(text)


def parsed(events: list[dict[str, Any]]) -> list[Any]:
    return [EVENTS.validate_python(e["data"]) for e in events]


async def test_an_ag_ui_client_that_leaves_a_journaled_run_follows_it_at_runs_events(
    serving: Callable[..., Served],
) -> None:
    """The client leaves mid-tool; the run goes on; RUN_STARTED names onion's run id (`metadata.run_id`), and
    GET /runs/{run_id}/events with Last-Event-ID sends the rest of the AG-UI events, none lost or repeated."""
    served = serving()
    asked = len(served.fake.requests)
    served.fake.script([waits(0.6, "Let me wait."), "Finished after the wait, in several pieces."])
    first = await read_until(served, run_input("wait"), "TOOL_CALL_END")
    assert first[0]["data"]["type"] == "RUN_STARTED" and first[0]["data"]["runId"] == "ui-run-1"
    run_id = first[0]["data"]["metadata"]["run_id"]
    async with served.client() as client:
        rest = sse_events((await client.get(f"/runs/{run_id}/events", headers={"last-event-id": first[-1]["id"]})).text)
        replayed = sse_events((await client.get(f"/runs/{run_id}/events")).text)
        shown = (await client.get(f"/runs/{run_id}")).json()
    ids = [int(e["id"]) for e in first + rest]
    assert ids == list(range(1, len(ids) + 1)) and rest
    assert first + rest == replayed
    events = parsed(first + rest)
    assert_valid_order(events)
    assert events[-1].type == core.EventType.RUN_FINISHED and events[-1].result.startswith("Finished after")
    assert texts(events) == "Let me wait.Finished after the wait, in several pieces."
    assert shown["status"] == "completed"
    assert served.effects_lines().count("slow 0.6") == 1 and len(served.fake.requests) - asked == 2


async def test_heartbeats_keep_an_ag_ui_stream_alive_while_a_tool_runs_long(serving: Callable[..., Served]) -> None:
    """A tool that takes 1 s sends nothing; the AG-UI stream carries SSE comments (every 0.2 s here) meanwhile."""
    served = serving()
    served.fake.script([waits(1.0), "done waiting"])
    async with served.client() as client:
        answer = await client.post("/ag-ui", json=run_input("wait"))
    between = answer.text.split('"TOOL_CALL_END"', 1)[1].split('"TOOL_CALL_RESULT"', 1)[0]
    assert between.count(": heartbeat\n\n") >= 3
    events = parsed(sse_events(answer.text))
    assert_valid_order(events)
    assert events[-1].result == "done waiting"


async def test_an_ag_ui_client_that_leaves_a_run_without_a_store_cancels_it(serving: Callable[..., Served]) -> None:
    """No store, nothing to come back to: the client's disconnect cancels the run and its model call."""
    served = serving(store=False)
    served.fake.script([Delay(10, "never sent")])
    async with served.client() as client, client.stream("POST", "/ag-ui", json=run_input("go")) as stream:
        chunks = stream.aiter_text()  # held: an iterator left to the collector closes the stream (the client leaves)
        first = sse_events(await anext(chunks))
        for _ in range(600):  # a fresh server's first run imports its SDK first (seconds on a loaded machine)
            if served.fake.requests:
                break
            await asyncio.sleep(0.05)
    assert first[0]["data"]["type"] == "RUN_STARTED" and len(served.fake.requests) == 1
    for _ in range(100):
        if served.fake.abandoned:
            break
        await asyncio.sleep(0.05)
    assert len(served.fake.abandoned) == 1


async def test_text_a_retried_model_call_withdraws_leaves_the_clients_messages(serving: Callable[..., Served]) -> None:
    """The model's stream fails after some text and the call is retried: the withdrawn text's message is closed,
    then a MESSAGES_SNAPSHOT without it (the client's messages as they stand), then the answer as a new message."""
    served = serving()
    served.fake.script([StreamError(partial_text="A draft the model withdraws."), "The real answer."])
    events = parsed(sse_events((await post(served, run_input("a flaky question"))).text))
    assert_valid_order(events)
    kinds = [e.type for e in events]
    snapshot = events[kinds.index(core.EventType.MESSAGES_SNAPSHOT)]
    withdrawn = events[kinds.index(core.EventType.TEXT_MESSAGE_START)].message_id
    assert [(m.id, m.role, m.content) for m in snapshot.messages] == [("m1", "user", "a flaky question")]
    after = events[kinds.index(core.EventType.MESSAGES_SNAPSHOT) :]
    assert texts(after) == "The real answer." and withdrawn not in {getattr(e, "message_id", None) for e in after}
    assert events[-1].result == "The real answer." and kinds.count(core.EventType.MESSAGES_SNAPSHOT) == 1


async def post(served: Served, given: dict[str, Any]) -> Any:
    async with served.client() as client:
        answer = await client.post("/ag-ui", json=given)
    assert answer.status_code == 200, answer.text
    return answer


async def test_an_ag_ui_resume_goes_on_from_the_paused_streams_last_id(serving: Callable[..., Served]) -> None:
    """The resume's ids go on from the paused AG-UI stream's last one, so GET /runs/{run_id}/events with that id
    sends the resume's events; the resume's RUN_STARTED names the same run."""
    served = serving()
    asked = ModelResponse(Message.assistant("", [ToolRequest("toolu_r", "delete", {"path": "ids.txt"})]))
    served.fake.script([asked, "Deleted ids.txt."])
    paused = sse_events((await post(served, run_input("tidy"))).text)
    run_id = paused[0]["data"]["metadata"]["run_id"]
    [interrupt] = paused[-1]["data"]["outcome"]["interrupts"]
    resume = [{"interruptId": interrupt["id"], "status": "resolved"}]
    resumed = sse_events((await post(served, run_input(None, resume=resume))).text)
    async with served.client() as client:
        following = await client.get(f"/runs/{run_id}/events", headers={"last-event-id": paused[-1]["id"]})
    ids = [int(e["id"]) for e in paused + resumed]
    assert ids == list(range(1, len(ids) + 1))
    assert resumed[0]["data"]["type"] == "RUN_STARTED" and resumed[0]["data"]["metadata"]["run_id"] == run_id
    assert sse_events(following.text) == resumed and resumed[-1]["data"]["result"] == "Deleted ids.txt."


@tool
def look(city: str) -> str:
    """Look a city up."""
    return f"{city} is fine"


async def replaced(call: ModelCall, call_next: ModelNext) -> ModelResponse:
    """A model layer that answers its own text instead of the one the model streamed (tool calls kept)."""
    answer = await call_next(call)
    return ModelResponse(Message.assistant("Replaced text.", answer.tool_calls)) if answer.tool_calls else answer


async def test_a_replaced_answer_takes_back_the_streamed_text_and_keeps_its_tool_call() -> None:
    """In process: a layer replaces a streamed answer that also called a tool; the snapshot leaves out the streamed
    draft (closed when the tool call came) but keeps the tool call, and the replacement comes as a new message."""
    asked = ModelResponse(Message.assistant("A draft to replace.", [ToolRequest("t1", "look", {"city": "Oslo"})]))
    app = serve(Agent(ScriptedModel([asked, "Oslo is fine."]), tools=[look]).use(replaced))
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        answer = await http.post("/ag-ui", json=run_input("weather?"))
    events = parsed(sse_events(answer.text))
    assert_valid_order(events)
    kinds = [e.type for e in events]
    snapshot = events[kinds.index(core.EventType.MESSAGES_SNAPSHOT)]
    assert [(m.role, m.id) for m in snapshot.messages] == [("user", "m1"), ("assistant", "t1")]
    assert kinds.index(core.EventType.TOOL_CALL_END) < kinds.index(core.EventType.MESSAGES_SNAPSHOT)
    after = events[kinds.index(core.EventType.MESSAGES_SNAPSHOT) :]
    assert texts(events[: len(events) - len(after)]) == "A draft to replace."
    assert texts(after) == "Replaced text.Oslo is fine." and events[-1].result == "Oslo is fine."
