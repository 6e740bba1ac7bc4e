"""The events a server keeps for reconnects, in process: the byte cap on them, and two apps on one SQLite file."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2

from onion import Agent, tool
from onion.serve import serve
from onion.stores import MemoryStore, SQLiteStore
from onion.testing import ScriptedModel, call

SSE = {"accept": "text/event-stream"}


@tool
async def wait() -> str:
    """Wait a little."""
    await asyncio.sleep(0.6)
    return "waited"


class SlowToShare(SQLiteStore):
    """A store each copy of events reaches 0.3 s late (a busy store between two server processes)."""

    async def add_events(self, run_id: str, events: Sequence[tuple[int, str]], *, ended: bool, keep: float) -> bool:
        await asyncio.sleep(0.3)
        return await super().add_events(run_id, events, ended=ended, keep=keep)


@asynccontextmanager
async def client(app: Any) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        yield http


def run_id_of(stream: str) -> str:
    found = re.search(r'"run_id": "([^"]+)"', stream)
    assert found is not None, stream
    return found[1]


async def test_ended_runs_events_over_keep_events_bytes_are_forgotten_oldest_ended_first() -> None:
    """With room for one ended run's events, the second run's end forgets the first's (its replay answers 204, as
    for a run with nothing left to send); the second's still replays whole."""
    agent = Agent(ScriptedModel(["the first answer", "the second answer"]), store=MemoryStore())
    app = serve(agent, keep_events_bytes=1000)
    async with client(app) as http:
        first = (await http.post("/runs", json={"input": "one"}, headers=SSE)).text
        assert 500 < len(first.encode()) <= 1000
        kept = await http.get(f"/runs/{run_id_of(first)}/events")
        second = (await http.post("/runs", json={"input": "two"}, headers=SSE)).text
        forgotten = await http.get(f"/runs/{run_id_of(first)}/events")
        replayed = await http.get(f"/runs/{run_id_of(second)}/events")
    assert kept.text == first and forgotten.status_code == 204 and replayed.text == second


async def test_a_run_streamed_by_one_app_is_sent_by_another_on_the_same_sqlite_file(tmp_path: Path) -> None:
    """Two apps on one SQLite file (two server processes, in one here): the one that did not run it replays the
    run's events, whole or after a Last-Event-ID, byte for byte as the one that ran it sent them."""
    path = tmp_path / "onion.db"
    one = serve(Agent(ScriptedModel(["an answer in a few words"]), store=SQLiteStore(path)))
    other = serve(Agent(ScriptedModel([]), store=SQLiteStore(path)))
    async with client(one) as http, client(other) as elsewhere:
        streamed = (await http.post("/runs", json={"input": "hi"}, headers=SSE)).text
        run_id = run_id_of(streamed)
        whole = await elsewhere.get(f"/runs/{run_id}/events")
        after_two = await elsewhere.get(f"/runs/{run_id}/events", headers={"last-event-id": "2"})
        last = re.findall(r"^id: (\d+)$", streamed, re.M)[-1]
        done = await elsewhere.get(f"/runs/{run_id}/events", headers={"last-event-id": last})
    assert whole.text == streamed and done.status_code == 204
    assert after_two.text == streamed[streamed.index("id: 3\n") :]


async def test_a_follower_on_another_process_as_a_run_starts_waits_for_its_first_events_to_reach_the_store(
    tmp_path: Path,
) -> None:
    """Asked for a running run's events before the first copy reached the store, another process waits for it
    (it answered 409 as if the run had not been streamed) and then sends every event as the process running it."""
    path = tmp_path / "onion.db"
    one = serve(Agent(ScriptedModel([[call("wait")], "done"]), tools=[wait], store=SlowToShare(path)))
    other = serve(Agent(ScriptedModel([]), store=SQLiteStore(path)))
    reader = SQLiteStore(path)
    async with client(one) as http, client(other) as elsewhere:
        streaming = asyncio.create_task(http.post("/runs", json={"input": "go"}, headers=SSE))
        while not (running := await reader.runs()):
            await asyncio.sleep(0.01)
        followed = await elsewhere.get(f"/runs/{running[0].run_id}/events")
        streamed = (await streaming).text
    assert running[0].status == "running" and followed.status_code == 200
    assert followed.text == streamed and '"output": "done"' in streamed


async def test_a_last_event_id_past_the_end_of_an_ended_run_answers_204_from_another_process(tmp_path: Path) -> None:
    """An id from the future (stale, or wrong) on a run whose stream ended: 204, nothing to send, never a stream
    of heartbeats until the events expire."""
    path = tmp_path / "onion.db"
    one = serve(Agent(ScriptedModel(["an answer"]), store=SQLiteStore(path)))
    other = serve(Agent(ScriptedModel([]), store=SQLiteStore(path)), heartbeat=0.1)
    async with client(one) as http, client(other) as elsewhere:
        run_id = run_id_of((await http.post("/runs", json={"input": "hi"}, headers=SSE)).text)
        beyond = await asyncio.wait_for(elsewhere.get(f"/runs/{run_id}/events", headers={"last-event-id": "999"}), 10)
    assert beyond.status_code == 204


async def test_a_stream_whose_process_died_ends_once_the_run_stopped_running(tmp_path: Path) -> None:
    """The store holds events of a stream that never ended (its server was killed), and the run was then
    recovered and finished without a server: a follower gets what there is, heartbeats, and the end of the
    response at the second heartbeat that finds the run stopped, instead of heartbeats for a day."""
    path = tmp_path / "onion.db"
    async with SQLiteStore(path) as store:
        run_id = (await Agent(ScriptedModel(["finished elsewhere"]), store=store).run("hi")).run_id
        await store.add_events(run_id, [(1, "id: 1\nevent: run_started\ndata: {}\n\n")], ended=False, keep=60)
    other = serve(Agent(ScriptedModel([]), store=SQLiteStore(path)), heartbeat=0.1)
    async with client(other) as elsewhere:
        followed = await asyncio.wait_for(elsewhere.get(f"/runs/{run_id}/events"), 10)
    assert followed.status_code == 200 and followed.text.startswith("id: 1\nevent: run_started")
    assert 1 <= followed.text.count(": heartbeat") <= 3
