"""Two uvicorn processes on one store (a load balancer's workers): a run's events from either of them."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from live_server import TOKEN, Served, free_port, sse_events, start, stop
from test_ag_ui import run_input

from onion import Message, ModelResponse, ToolRequest
from onion.testing import Delay, FakeProviderServer

pytestmark = pytest.mark.slow  # two server processes, in real time

SSE = {"accept": "text/event-stream"}


@pytest.fixture(params=["redis", "sqlite"])
def workers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Served, Served]]:
    """Two servers of `workers_agent:app` on one fake provider and one store: a real Redis, or one SQLite file."""
    folder = tmp_path_factory.mktemp("workers")
    env = {"EFFECTS": str(folder / "effects"), "ONION_TEST_TOKEN": TOKEN}
    if request.param == "redis":
        env |= {"ONION_TEST_REDIS": request.getfixturevalue("redis_url"), "ONION_TEST_NAMESPACE": uuid.uuid4().hex}
    else:
        env |= {"ONION_TEST_SHARED_DB": str(folder / "onion.db")}
    with FakeProviderServer() as fake:
        env["FAKE_URL"] = fake.url
        both = []
        for _ in range(2):
            port = free_port()
            command = [sys.executable, "-m", "uvicorn", "workers_agent:app", "--port", str(port)]
            process = start([*command, "--log-level", "warning"], env, port)
            both.append(Served(f"http://127.0.0.1:{port}", fake, folder / "effects", process))
        try:
            yield both[0], both[1]
        finally:
            for served in both:
                stop(served.process)


def asks(name: str, **args: Any) -> ModelResponse:
    return ModelResponse(Message.assistant("", [ToolRequest(f"toolu_{name}", name, args)]))


async def streamed_until(served: Served, path: str, body: dict[str, Any], last: str) -> list[dict[str, Any]]:
    """POST `body` to `path` as SSE and leave right after the first event named `last`."""
    text = ""
    async with served.client() as client, client.stream("POST", path, json=body, headers=SSE) as stream:
        async for line in stream.aiter_lines():
            text += line + "\n"
            if line == "" and any(e["event"] == last for e in sse_events(text)):
                break
    return sse_events(text)


async def test_a_stream_started_on_one_worker_goes_on_from_the_other_with_no_event_lost_or_repeated(
    workers: tuple[Served, Served],
) -> None:
    """The client leaves worker A mid-run; worker B, asked with Last-Event-ID while the run still runs on A, sends
    the rest as A streams it (once each, in order), and replays the whole stream as A does."""
    a, b = workers
    a.fake.script([asks("slow", seconds=1.0), "Finished after the wait, in several pieces."])
    first = await streamed_until(a, "/runs", {"input": "go"}, "tool_call_started")
    run_id = first[0]["data"]["run_id"]
    async with b.client() as client:
        assert (await client.get(f"/runs/{run_id}")).json()["status"] == "running"
        rest = sse_events((await client.get(f"/runs/{run_id}/events", headers={"last-event-id": first[-1]["id"]})).text)
        from_b = sse_events((await client.get(f"/runs/{run_id}/events")).text)
        done = await client.get(f"/runs/{run_id}/events", headers={"last-event-id": rest[-1]["id"]})
    async with a.client() as client:
        from_a = sse_events((await client.get(f"/runs/{run_id}/events")).text)
    ids = [int(e["id"]) for e in first + rest]
    assert ids == list(range(1, len(ids) + 1)) and "tool_result" in [e["event"] for e in rest]
    assert rest[-1]["event"] == "run_finished" and rest[-1]["data"]["output"].startswith("Finished after")
    assert "".join(e["data"]["text"] for e in rest if e["event"] == "text_delta") == rest[-1]["data"]["output"]
    assert first + rest == from_a == from_b and done.status_code == 204
    assert a.effects_lines().count("slow 1.0") == 1


async def test_a_run_paused_on_one_worker_and_decided_on_the_other_is_followed_on_the_first(
    workers: tuple[Served, Served],
) -> None:
    """A run pauses on worker A; it is decided on B (SSE); a follower on A with the paused stream's Last-Event-ID
    gets the resume's events as B sends them, ids going on from the paused stream's, once each; then 204."""
    a, b = workers
    a.fake.script([asks("delete", path="old.txt"), Delay(1.0, "Deleted old.txt, as approved.")])
    paused = await streamed_until(a, "/runs", {"input": "tidy"}, "run_paused")
    run_id, last = paused[0]["data"]["run_id"], paused[-1]["id"]
    async with b.client() as decider, a.client() as follower:
        decision = {"approve": ["toolu_delete"]}
        async with decider.stream("POST", f"/runs/{run_id}/decisions", json=decision, headers=SSE) as resume:
            chunks = resume.aiter_text()
            text = await anext(chunks)  # the resume's first event: on B, so in the store
            following = asyncio.create_task(follower.get(f"/runs/{run_id}/events", headers={"last-event-id": last}))
            text += "".join([chunk async for chunk in chunks])
        followed = await following
        done = await follower.get(f"/runs/{run_id}/events", headers={"last-event-id": sse_events(text)[-1]["id"]})
    from_b = sse_events(text)
    assert int(from_b[0]["id"]) == int(last) + 1 and from_b[0]["event"] == "run_started"
    assert [int(e["id"]) for e in from_b] == list(range(int(last) + 1, int(last) + 1 + len(from_b)))
    assert sse_events(followed.text) == from_b and from_b[-1]["event"] == "run_finished"
    assert from_b[-1]["data"]["output"] == "Deleted old.txt, as approved." and done.status_code == 204
    assert a.effects_lines().count("delete old.txt") == 1


async def test_an_ag_ui_run_paused_on_one_worker_and_resumed_over_ag_ui_on_the_other_keeps_one_numbering(
    workers: tuple[Served, Served],
) -> None:
    """An AG-UI run pauses on A; its resume over AG-UI on B numbers its events on from A's; A sends them to a client
    reconnecting with the paused stream's Last-Event-ID, as B sent them."""
    a, b = workers
    a.fake.script([asks("delete", path="ui.txt"), "Deleted ui.txt."])
    async with a.client() as client:
        paused = sse_events((await client.post("/ag-ui", json=run_input("tidy"))).text)
    interrupt = paused[-1]["data"]["outcome"]["interrupts"][0]
    resume = run_input(None, resume=[{"interruptId": interrupt["id"], "status": "resolved"}])
    async with b.client() as client:
        resumed = sse_events((await client.post("/ag-ui", json=resume)).text)
    async with a.client() as client:
        run_id, last = interrupt["metadata"]["run_id"], paused[-1]["id"]
        followed = sse_events((await client.get(f"/runs/{run_id}/events", headers={"last-event-id": last})).text)
    assert [int(e["id"]) for e in resumed] == list(range(int(last) + 1, int(last) + 1 + len(resumed)))
    assert resumed[-1]["data"]["type"] == "RUN_FINISHED" and followed == resumed
    assert a.effects_lines().count("delete ui.txt") == 1
