"""A deploy that changes an agent's stack while a run waits for a person: in place it breaks the waiting workflow's
replay; behind `workflow.patched`, with the new stack on an agent of its own, the waiting run goes on."""

from __future__ import annotations

import asyncio
import uuid

import clock_flows
from conftest import AGENTS
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Replayer, Worker

from onion.temporal import OnionPlugin, decide, pending


async def test_a_run_waiting_across_a_deploy_that_adds_timeout_goes_on_behind_workflow_patched(client: Client) -> None:
    """The first deploy pauses a run; the stack with `timeout` added in place does not replay its history (a
    timer where the history has none); behind `workflow.patched` it does, the run is decided and answers on the
    old stack, and a new run takes the new one."""
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[clock_flows.VersionedBefore]):
        handle = await client.start_workflow(
            "Versioned", "weather in Accra", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        while not (calls := await pending(handle)):
            await asyncio.sleep(0.05)
    waiting = await handle.fetch_history()
    broken = await Replayer(workflows=[clock_flows.VersionedBroken], plugins=[OnionPlugin(*AGENTS)]).replay_workflow(
        waiting, raise_on_replay_failure=False
    )
    assert broken.replay_failure is not None and "Nondeterminism" in str(broken.replay_failure)
    kept = await Replayer(workflows=[clock_flows.VersionedAfter], plugins=[OnionPlugin(*AGENTS)]).replay_workflow(
        waiting, raise_on_replay_failure=False
    )
    assert kept.replay_failure is None
    async with Worker(client, task_queue=queue, workflows=[clock_flows.VersionedAfter]):
        await decide(handle, approve=[calls[0].id])
        assert await handle.result() == "Answer: 18°C and sunny in Accra"
        fresh = await client.start_workflow(
            "Versioned", "weather in Lome", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        while not (new_calls := await pending(fresh)):
            await asyncio.sleep(0.05)
        await decide(fresh, approve=[new_calls[0].id])
        assert await fresh.result() == "Answer: 18°C and sunny in Lome"
    old = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in (await handle.fetch_history()).events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    new = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in (await fresh.fetch_history()).events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert set(old) == {"versioned.model", "versioned.tool.get_weather"}
    assert set(new) == {"versioned-v2.model", "versioned-v2.tool.get_weather"}
