"""Cancelling a workflow stops its run as `CancelledError` stops a run outside: the tool's activity is cancelled,
nothing more is called, the workflow ends cancelled and waits for no decision."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import cancel_flows
import onion_flows
import pytest
from conftest import AGENTS
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError
from temporalio.worker import Replayer, Worker

from onion.temporal import OnionPlugin, pending


async def _until(condition: Any) -> None:
    for _ in range(400):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("never came to pass")


async def _cancelled(handle: WorkflowHandle[Any, Any]) -> None:
    """Waits for `handle`'s workflow to end, and checks that it ended cancelled."""
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    assert isinstance(failed.value.cause, CancelledError)


async def test_cancelling_a_workflow_during_a_tool_call_cancels_the_tool_and_ends_the_run(
    temporal_address: str,
) -> None:
    """The tool's activity sees the cancellation (its heartbeat), the model is not asked again, the workflow ends
    cancelled; a second cancel changes nothing; the history replays."""
    cancel_flows.SEEN.clear()
    client = await Client.connect(temporal_address, plugins=[OnionPlugin(*AGENTS, options=onion_flows.FAST)])
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[cancel_flows.Courier]):
        handle = await client.start_workflow(
            cancel_flows.Courier.run, "send order 7", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        await _until(lambda: "send started" in cancel_flows.SEEN)
        await handle.cancel()
        await _cancelled(handle)
        await handle.cancel()
        await _cancelled(handle)
        assert await pending(handle) == []
    assert cancel_flows.SEEN == ["model", "send started", "send cancelled"]
    history = await handle.fetch_history()
    assert history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED
    replayer = Replayer(workflows=[cancel_flows.Courier], plugins=[OnionPlugin(*AGENTS)])
    assert (await replayer.replay_workflow(history, raise_on_replay_failure=False)).replay_failure is None


async def test_cancelling_a_workflow_that_waits_for_a_decision_ends_it_with_nothing_pending(client: Client) -> None:
    """A paused run's workflow cancelled: it ends cancelled, `pending` answers [], the payment never ran."""
    onion_flows.PAID.clear()
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[onion_flows.Pay]):
        handle = await client.start_workflow(
            onion_flows.Pay.run, "pay order 7", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        while not await pending(handle):
            await asyncio.sleep(0.05)
        await handle.cancel()
        await _cancelled(handle)
        assert await pending(handle) == []
    assert onion_flows.PAID == []
    history = await handle.fetch_history()
    replayer = Replayer(workflows=[onion_flows.Pay], plugins=[OnionPlugin(*AGENTS)])
    assert (await replayer.replay_workflow(history, raise_on_replay_failure=False)).replay_failure is None
