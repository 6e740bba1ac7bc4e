"""Approvals inside a workflow: a paused call waits durably; `pending` lists it and `decide` settles it once."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import onion_flows
import pytest
from conftest import AGENTS, WAITING
from forker import Forker
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.worker import Worker

from onion.temporal import OnionPlugin, decide, pending


@pytest.fixture
async def paused(client: Client) -> AsyncIterator[WorkflowHandle[Any, Any]]:
    """A Pay workflow on an in-process worker, waiting on its one pending call."""
    onion_flows.PAID.clear()
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[onion_flows.Pay]):
        handle = await client.start_workflow(
            onion_flows.Pay.run, "pay order 7", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        while not await pending(handle):
            await asyncio.sleep(0.05)
        yield handle


async def test_pending_lists_the_paused_call_and_an_approval_runs_it_once(paused: WorkflowHandle[Any, Any]) -> None:
    """The call waits with its name, arguments and reason; approved, it runs once and the run completes."""
    [call] = await pending(paused)
    assert (call.name, call.args) == ("pay", {"order": 7, "amount": 30})
    assert onion_flows.PAID == []
    await decide(paused, approve=[call.id])
    assert await paused.result() == "Answer: paid 30 for order 7"
    assert onion_flows.PAID == [{"order": 7, "amount": 30}]
    assert await pending(paused) == []


async def test_a_second_decision_for_the_same_call_is_refused_naming_it(paused: WorkflowHandle[Any, Any]) -> None:
    """Deciding an already decided call raises naming its id; the tool still ran once."""
    [call] = await pending(paused)
    await decide(paused, approve=[call.id])
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await decide(paused, reject={call.id: "changed my mind"})
    assert call.id in str(refused.value.cause)
    await paused.result()
    assert onion_flows.PAID == [{"order": 7, "amount": 30}]


async def test_a_rejection_reaches_the_model_and_the_tool_never_runs(paused: WorkflowHandle[Any, Any]) -> None:
    """The model reads the rejection's reason as the call's result."""
    [call] = await pending(paused)
    await decide(paused, reject={call.id: "over the limit"})
    assert "over the limit" in await paused.result()
    assert onion_flows.PAID == []


async def test_an_edit_runs_the_tool_with_the_edited_arguments(paused: WorkflowHandle[Any, Any]) -> None:
    """The tool gets the arguments the decision gave, not the model's."""
    [call] = await pending(paused)
    await decide(paused, edit={call.id: {"order": 7, "amount": 25}})
    assert await paused.result() == "Answer: paid 25 for order 7"
    assert onion_flows.PAID == [{"order": 7, "amount": 25}]


async def test_a_decision_for_a_call_that_is_not_pending_is_refused(paused: WorkflowHandle[Any, Any]) -> None:
    """An unknown call id is refused by the update's validator, naming it; nothing is decided."""
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await decide(paused, approve=["call_nope"])
    assert "call_nope" in str(refused.value.cause)
    assert len(await pending(paused)) == 1
    await paused.terminate()


DECIDER = Path(__file__).parent / "decide_process.py"


async def _decide_elsewhere(
    forker: Forker, address: str, handle: WorkflowHandle[Any, Any], decision: dict[str, Any]
) -> str:
    """Runs decide_process.py for `decision` on `handle`'s workflow (server at `address`): what it printed."""
    arguments = [address, handle.id, json.dumps(decision)]
    done = await asyncio.to_thread(forker.run, DECIDER, *arguments, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("decision", "answer", "paid"),
    [
        ("approve", "Answer: paid 30 for order 7", [{"order": 7, "amount": 30}]),
        ("edit", "Answer: paid 25 for order 7", [{"order": 7, "amount": 25}]),
        ("reject", "over the limit", []),
    ],
)
async def test_a_decision_from_another_process_settles_the_call(
    paused: WorkflowHandle[Any, Any],
    temporal_address: str,
    decision: str,
    answer: str,
    paid: list[dict[str, Any]],
    temporal_forker: Forker,
) -> None:
    """A client in its own process approves, edits or rejects the pending call; the tool ran once (or never)."""
    [call] = await pending(paused)
    chosen = {
        "approve": {"approve": [call.id]},
        "edit": {"edit": {call.id: {"order": 7, "amount": 25}}},
        "reject": {"reject": {call.id: "over the limit"}},
    }[decision]
    assert await _decide_elsewhere(temporal_forker, temporal_address, paused, chosen) == f"decided {call.id}"
    assert answer in await paused.result()
    assert paid == onion_flows.PAID


async def test_a_second_decision_from_another_process_is_refused_and_the_tool_ran_once(
    client: Client, temporal_address: str, temporal_forker: Forker
) -> None:
    """Two processes decide the same call while the run still waits (on a second call): the first is taken, the
    second refused naming the call id; the approved payment ran once."""
    onion_flows.PAID.clear()
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[onion_flows.PayTwo]):
        handle = await client.start_workflow(
            onion_flows.PayTwo.run, "pay orders 7 and 8", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        while len(calls := await pending(handle)) < 2:
            await asyncio.sleep(0.05)
        first, other = calls
        assert (
            await _decide_elsewhere(temporal_forker, temporal_address, handle, {"approve": [first.id]})
            == f"decided {first.id}"
        )
        second = await _decide_elsewhere(
            temporal_forker, temporal_address, handle, {"reject": {first.id: "changed my mind"}}
        )
        assert second.startswith("refused:") and first.id in second
        assert [call.id for call in await pending(handle)] == [other.id]
        await decide(handle, reject={other.id: "not this one"})
        assert (await handle.result()).startswith("paid 30 for order 7")
    assert onion_flows.PAID == [{"order": 7, "amount": 30}]


async def test_an_edit_that_does_not_fit_the_tools_schema_is_refused_by_the_validator(
    paused: WorkflowHandle[Any, Any],
) -> None:
    """A typo in an edit (a string for an int, an argument the tool lacks) is refused when the update arrives,
    naming the call and the field; nothing is decided, and a good decision afterwards runs the tool once."""
    [call] = await pending(paused)
    for bad, field in (({"order": "seven", "amount": 25}, "order"), ({"order": 7, "amout": 25}, "amout")):
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await decide(paused, edit={call.id: bad})
        assert call.id in str(refused.value.cause) and field in str(refused.value.cause)
    assert [c.id for c in await pending(paused)] == [call.id]
    await decide(paused, edit={call.id: {"order": 7, "amount": 25}})
    assert await paused.result() == "Answer: paid 25 for order 7"
    assert onion_flows.PAID == [{"order": 7, "amount": 25}]


async def test_two_runs_in_one_workflow_that_both_pause_are_each_listed_with_their_run_and_decided(
    client: Client,
) -> None:
    """`asyncio.gather` of two runs of one agent: `pending` lists both calls, each with its run's id; approving one
    and rejecting the other lets both runs go on; the payment ran once."""
    onion_flows.PAID.clear()
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[onion_flows.PayBoth]):
        handle = await client.start_workflow(
            onion_flows.PayBoth.run, "pay order 7", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        for _ in range(200):
            if len(calls := await pending(handle)) == 2:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"pending never listed both calls: {await pending(handle)}")
        first, second = calls
        assert first.run_id and second.run_id and first.run_id != second.run_id
        await decide(handle, approve=[first.id])
        assert [call.id for call in await pending(handle)] == [second.id]
        await decide(handle, reject={second.id: "once is enough"})
        answers = await handle.result()
        assert await pending(handle) == []
    assert "Answer: paid 30 for order 7" in answers and any("once is enough" in answer for answer in answers)
    assert onion_flows.PAID == [{"order": 7, "amount": 30}]


async def _listed(client: Client, query: str, workflow_id: str, present: bool) -> None:
    """Waits until `workflow list --query` lists `workflow_id` (or no longer does): visibility lags a little."""
    for _ in range(100):
        if (workflow_id in [w.id async for w in client.list_workflows(query)]) == present:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{query!r} {'never listed' if present else 'still lists'} {workflow_id}")


async def test_a_workflow_waiting_for_a_person_is_found_by_its_search_attribute(temporal_address: str) -> None:
    """With `waiting_attribute`, a paused run's workflow says so (`OnionWaiting = true`) until it is decided; an
    operator lists what waits with `temporal workflow list --query 'OnionWaiting = true'`."""
    onion_flows.PAID.clear()
    client = await Client.connect(temporal_address, plugins=[OnionPlugin(*AGENTS, waiting_attribute=WAITING)])
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[onion_flows.Pay]):
        handle = await client.start_workflow(
            onion_flows.Pay.run, "pay order 7", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        while not (calls := await pending(handle)):
            await asyncio.sleep(0.05)
        await _listed(client, f"{WAITING} = true", handle.id, present=True)
        await decide(handle, approve=[calls[0].id])
        await handle.result()
        await _listed(client, f"{WAITING} = true", handle.id, present=False)
        await _listed(client, f"{WAITING} = false", handle.id, present=True)
