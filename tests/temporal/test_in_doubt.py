"""`@tool(in_doubt="ask")` on Temporal: a call whose worker was SIGKILLed mid-call is not run again without a person.
The run pauses with the call pending as `"in_doubt"` ("may have run"), as it does outside a workflow; approving runs it
again (with the same idempotency key), rejecting tells the model, resolving records what a person checked."""

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
from temporalio.client import Client, WorkflowHandle
from workers import Workers

from onion._in_doubt import MAY_HAVE_RUN
from onion.temporal import OnionPlugin, WaitingCall, decide, pending
from onion.testing import FakeProviderServer


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


async def _waiting(handle: WorkflowHandle[Any, Any]) -> WaitingCall:
    deadline = time.monotonic() + 30
    while not (calls := await pending(handle)):
        assert time.monotonic() < deadline, "the run never paused"
        await asyncio.sleep(0.1)
    [call] = calls
    return call


async def test_a_refund_whose_worker_died_mid_call_waits_for_a_person_and_each_decision_does_what_it_says(
    workers: Workers, fake: FakeProviderServer
) -> None:
    """Three refunds start on one worker, which is SIGKILLed while all three run; on the next worker each run pauses
    with its refund "in_doubt". Approved: it runs again, with the key of its first start, and finishes once.
    Rejected: the model reads the reason, nothing runs. Resolved: the model reads what the person recorded, nothing
    runs. No model call is asked twice."""
    effects = Path(workers.env["ONION_EFFECTS"])
    client = await Client.connect(workers.address, plugins=[OnionPlugin(onion_flows.support_agent(fake.url))])
    first = workers.start()
    handles = [
        await client.start_workflow(
            onion_flows.Support.run, f"please refund {order}", id=f"w-{uuid.uuid4().hex}", task_queue=workers.queue
        )
        for order in (1, 2, 3)
    ]
    await _started(effects, 3)
    first.send_signal(signal.SIGKILL)
    first.wait()
    workers.start()

    waiting = [await _waiting(handle) for handle in handles]
    for order, call in enumerate(waiting, start=1):
        assert (call.kind, call.name, call.args, call.reason) == ("in_doubt", "refund", {"order": order}, MAY_HAVE_RUN)
    approved, rejected, resolved = handles
    await decide(approved, approve=[waiting[0].id])
    await decide(rejected, reject={waiting[1].id: "refunded by hand already"})
    await decide(resolved, resolve={waiting[2].id: "refunded order 3 (seen on the payment dashboard)"})

    assert await approved.result() == "done: refunded order 1"
    assert "refunded by hand already" in await rejected.result()
    assert await resolved.result() == "done: refunded order 3 (seen on the payment dashboard)"
    lines = _lines(effects)
    starts = [line for line in lines if line.startswith("refund start 1 ")]
    assert len(starts) == 2 and starts[0] == starts[1]  # run again on approval, with its first start's key
    assert sorted(line.rsplit(" ", 1)[0] for line in lines if " 1 " not in line) == ["refund start 2", "refund start 3"]
    assert lines.count(starts[0].replace("start", "done")) == 1
    assert len(fake.requests) == 6  # each run's two model calls, once each


async def test_an_approved_call_whose_worker_dies_again_pauses_again(
    workers: Workers, fake: FakeProviderServer
) -> None:
    """Refund 101 is killed mid-call, approved, killed mid-call again on the next worker: it pauses again, and only
    the second approval lets it finish. Three starts, all with one key, and one end: never run without a person."""
    effects = Path(workers.env["ONION_EFFECTS"])
    client = await Client.connect(workers.address, plugins=[OnionPlugin(onion_flows.support_agent(fake.url))])
    worker = workers.start()
    handle = await client.start_workflow(
        onion_flows.Support.run, "please refund 101", id=f"w-{uuid.uuid4().hex}", task_queue=workers.queue
    )
    for starts in (1, 2):
        await _started(effects, starts)
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        worker = workers.start()
        call = await _waiting(handle)
        assert (call.kind, call.args) == ("in_doubt", {"order": 101})
        await decide(handle, approve=[call.id])
    assert await handle.result() == "done: refunded order 101"
    lines = _lines(effects)
    assert len(lines) == 4 and len({line.split()[-1] for line in lines}) == 1
    assert [line.split()[1] for line in lines] == ["start", "start", "start", "done"]


async def test_a_tool_with_reconcile_asks_the_outside_world_then_a_person_when_it_cannot_tell(
    workers: Workers, fake: FakeProviderServer
) -> None:
    """Three settlements killed mid-call (`@tool(in_doubt="ask", reconcile=)`): one that had not happened runs again
    and finishes; one that had is answered by reconcile, not run again; one whose reconcile fails (the payment API
    down) pauses for a person, the failure in its reason, and the person's resolve is what the model reads."""
    effects = Path(workers.env["ONION_EFFECTS"])
    client = await Client.connect(workers.address, plugins=[OnionPlugin(onion_flows.support_agent(fake.url))])
    first = workers.start()
    again, found, down = [
        await client.start_workflow(
            onion_flows.Support.run, f"please settle {order}", id=f"w-{uuid.uuid4().hex}", task_queue=workers.queue
        )
        for order in (5, 105, 13)
    ]
    await _started(effects, 3, "settle")
    first.send_signal(signal.SIGKILL)
    first.wait()
    workers.start()
    assert await again.result() == "done: settled order 5"
    assert await found.result() == "done: order 105 was settled (found by reconcile)"
    call = await _waiting(down)
    assert call.kind == "in_doubt"
    assert call.reason == f"{MAY_HAVE_RUN}; its reconcile failed: RuntimeError: the payment API is down"
    await decide(down, resolve={call.id: "settled order 13 (checked by hand)"})
    assert await down.result() == "done: settled order 13 (checked by hand)"
    runs = sorted(line.rsplit(" ", 1)[0] for line in _lines(effects))
    assert runs == [
        "settle done 105",
        "settle done 5",
        "settle start 105",
        "settle start 13",
        "settle start 5",
        "settle start 5",
    ]


async def _started(effects: Path, count: int, tool: str = "refund") -> None:
    deadline = time.monotonic() + 30
    while len([line for line in _lines(effects) if line.startswith(f"{tool} start")]) < count:
        assert time.monotonic() < deadline, f"the refund never started {count} times: {_lines(effects)}"
        await asyncio.sleep(0.05)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
