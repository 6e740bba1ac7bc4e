"""Workers killed mid-run: another worker finishes the run from Temporal's history, repeating nothing finished."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import onion_flows
import pytest
from forker import Forker
from temporalio.client import Client
from workers import Workers

from onion.temporal import OnionPlugin
from onion.testing import Delay, FakeProviderServer, RecordedRequest, ServerItem


@pytest.fixture
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(respond=onion_flows.support_answers) as server:
        yield server


@pytest.fixture
def workers(
    temporal_address: str, fake: FakeProviderServer, tmp_path: Path, temporal_forker: Forker
) -> Iterator[Workers]:
    started = Workers(temporal_address, fake.url, tmp_path / "effects.txt", forker=temporal_forker)
    yield started
    started.stop_all()


def _wait_for(path: Path, line: str) -> None:
    deadline = time.monotonic() + 30
    while not (path.exists() and line in path.read_text().splitlines()):
        assert time.monotonic() < deadline, f"{line!r} never appeared in {path}"
        time.sleep(0.05)


async def _killed_mid_tool(workers: Workers, fake: FakeProviderServer, tool: str) -> tuple[str, list[str]]:
    """Starts `<tool> 7` on a worker, SIGKILLs it while the tool runs, starts another; the answer and side effects."""
    effects = Path(workers.env["ONION_EFFECTS"])
    client = await Client.connect(workers.address, plugins=[OnionPlugin(onion_flows.support_agent(fake.url))])
    first = workers.start()
    handle = await client.start_workflow(
        onion_flows.Support.run, f"please {tool} 7", id=f"w-{uuid.uuid4().hex}", task_queue=workers.queue
    )
    _wait_for(effects, f"{tool} start")
    first.send_signal(signal.SIGKILL)
    first.wait()
    workers.start()
    answer = await handle.result()
    return answer, effects.read_text().splitlines()


def _tool_results(fake: FakeProviderServer) -> list[str]:
    return _tool_results_of(fake.requests[-1].body)


async def test_a_non_idempotent_tool_whose_worker_died_is_not_run_again_and_the_model_reads_it_was_interrupted(
    workers: Workers, fake: FakeProviderServer
) -> None:
    """charge ran once (never finished); the model's two answers were each requested once; it read 'interrupted'."""
    answer, effects = await _killed_mid_tool(workers, fake, "charge")
    assert effects == ["charge start"]
    assert len(fake.requests) == 2
    assert "was interrupted" in _tool_results(fake)[0]
    assert answer.startswith("done: Tool charge was interrupted")


async def test_an_idempotent_tool_whose_worker_died_runs_again_on_another_worker(
    workers: Workers, fake: FakeProviderServer
) -> None:
    """resend started twice and finished once; the model response asking for it was not requested again."""
    answer, effects = await _killed_mid_tool(workers, fake, "resend")
    assert effects == ["resend start", "resend start", "resend done"]
    assert len(fake.requests) == 2
    assert answer == "done: receipt of order 7 sent"


async def test_a_worker_killed_during_a_model_call_asks_again_only_the_call_in_flight(
    workers: Workers, fake: FakeProviderServer
) -> None:
    """The second model call hangs at the server; its worker is SIGKILLed, another finishes the run: the server saw
    the first call once and the second twice (the same request), nothing else."""
    answered_slowly: list[int] = []

    def slow_second_answer(request: RecordedRequest) -> ServerItem:
        item = onion_flows.support_answers(request)
        if len(fake.requests) == 2 and not answered_slowly:
            answered_slowly.append(1)
            return Delay(60, then=item)
        return item

    fake.respond = slow_second_answer
    client = await Client.connect(workers.address, plugins=[OnionPlugin(onion_flows.support_agent(fake.url))])
    first = workers.start()
    handle = await client.start_workflow(
        onion_flows.Support.run, "please lookup 7", id=f"w-{uuid.uuid4().hex}", task_queue=workers.queue
    )
    deadline = time.monotonic() + 30
    while len(fake.requests) < 2:
        assert time.monotonic() < deadline, "the second model call never reached the server"
        await asyncio.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    workers.start()
    assert await handle.result() == "done: order 7 shipped"
    bodies = [request.body for request in fake.requests]
    assert len(bodies) == 3
    assert bodies[1] == bodies[2]
    assert [_tool_results_of(body) for body in bodies] == [[], ["order 7 shipped"], ["order 7 shipped"]]


def _tool_results_of(body: dict[str, Any]) -> list[str]:
    return [
        onion_flows._text(b["content"])
        for m in body["messages"]
        if not isinstance(m["content"], str)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
