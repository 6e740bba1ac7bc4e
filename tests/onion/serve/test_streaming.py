"""SSE on a real uvicorn server: heartbeats, a client leaving (with and without a store), reconnecting."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from live_server import Served, sse_events

from onion import Message, ModelResponse, ToolRequest
from onion.testing import Delay

SSE = {"accept": "text/event-stream"}


def waits(seconds: float) -> ModelResponse:
    return ModelResponse(Message.assistant("", [ToolRequest("toolu_slow", "slow", {"seconds": seconds})]))


async def read_until(served: Served, last: str) -> list[dict[str, Any]]:
    """Stream a run and leave (close the connection) right after the first event named `last`."""
    text = ""
    async with served.client() as client, client.stream("POST", "/runs", json={"input": "go"}, headers=SSE) as stream:
        async for line in stream.aiter_lines():
            text += line + "\n"
            if line == "" and any(e["event"] == last for e in sse_events(text)):
                break
    return sse_events(text)


async def test_heartbeats_keep_the_stream_alive_while_a_tool_runs_long(serving: Callable[..., Served]) -> None:
    """A tool that takes 1 s sends nothing; the stream carries heartbeat comments (every 0.2 s here) meanwhile."""
    served = serving()
    served.fake.script([waits(1.0), "done waiting"])
    async with served.client() as client:
        answer = await client.post("/runs", json={"input": "wait"}, headers=SSE)
    between = answer.text.split("event: tool_call_started", 1)[1].split("event: tool_result", 1)[0]
    assert between.count(": heartbeat\n\n") >= 3
    assert sse_events(answer.text)[-1]["data"]["output"] == "done waiting"


async def test_a_client_that_leaves_a_journaled_run_reconnects_with_no_event_lost_or_repeated(
    serving: Callable[..., Served],
) -> None:
    """The client leaves mid-run; the run goes on; GET /runs/{id}/events with Last-Event-ID sends the rest, once."""
    served = serving()
    asked = len(served.fake.requests)
    served.fake.script([waits(0.6), "Finished after the wait, in several pieces."])
    first = await read_until(served, "tool_call_started")
    run_id = first[0]["data"]["run_id"]
    async with served.client() as client:
        rest = sse_events((await client.get(f"/runs/{run_id}/events", headers={"last-event-id": first[-1]["id"]})).text)
        replayed = sse_events((await client.get(f"/runs/{run_id}/events")).text)
    ids = [int(e["id"]) for e in first + rest]
    assert ids == list(range(1, len(ids) + 1)) and rest
    assert first + rest == replayed
    assert rest[-1]["event"] == "run_finished" and rest[-1]["data"]["output"].startswith("Finished after")
    assert "".join(e["data"]["text"] for e in rest if e["event"] == "text_delta") == rest[-1]["data"]["output"]
    assert served.effects_lines().count("slow 0.6") == 1 and len(served.fake.requests) - asked == 2


async def test_a_client_that_leaves_a_run_without_a_store_cancels_it(serving: Callable[..., Served]) -> None:
    """No store, nothing to come back to: the client's disconnect cancels the run and its model call."""
    served = serving(store=False)
    served.fake.script([Delay(10, "never sent")])
    async with served.client() as client, client.stream("POST", "/runs", json={"input": "go"}, headers=SSE) as stream:
        chunks = stream.aiter_text()  # held: an iterator left to the collector closes the stream (the client leaves)
        first = sse_events(await anext(chunks))
        for _ in range(600):  # a fresh server's first run imports its SDK first (seconds on a loaded machine)
            if served.fake.requests:
                break
            await asyncio.sleep(0.05)
    assert first[0]["event"] == "run_started" and len(served.fake.requests) == 1
    for _ in range(100):
        if served.fake.abandoned:
            break
        await asyncio.sleep(0.05)
    assert len(served.fake.abandoned) == 1
    async with served.client() as client:
        gone = await client.get(f"/runs/{first[0]['data']['run_id']}/events")
    assert gone.status_code == 404 and "no store" in gone.json()["error"]
