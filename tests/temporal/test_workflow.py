"""An onion agent inside a Temporal workflow: the loop in workflow code, model and tool calls as activities."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from datetime import timedelta
from typing import Any

import onion_flows
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.worker import Replayer, Worker

from onion.temporal import OnionPlugin, decide, pending
from onion.testing import FakeProviderServer


def _activities(history) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


def _without_ids(body: dict[str, Any]) -> str:
    """A request body as JSON, tool call ids left out (the fake server numbers them afresh)."""
    return re.sub(r'"(id|tool_use_id)": "call_\d+"', "", json.dumps(body, sort_keys=True))


async def test_an_agent_with_a_tool_completes_inside_a_workflow_as_it_does_outside(client: Client) -> None:
    """The workflow's answer and history equal a plain run's; each model call and tool call is one activity."""
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[onion_flows.AskWeather]):
        handle = await client.start_workflow(
            onion_flows.AskWeather.run, "weather in Paris", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        done = await handle.result()
        history = await handle.fetch_history()
    outside = await onion_flows.weather.run("weather in Paris")
    assert done["output"] == outside.output == "Answer: 18°C and sunny in Paris"
    assert [m["role"] for m in done["messages"]] == [m.role for m in outside.messages]
    assert _activities(history) == ["weather.model", "weather.tool.get_weather", "weather.model"]


async def test_the_real_anthropic_sdk_answers_inside_an_activity_as_it_does_outside(temporal_address: str) -> None:
    """Through the fake provider server, the workflow and a plain run of the same agent give the same answer."""
    with FakeProviderServer(respond=onion_flows.support_answers) as fake:
        agent = onion_flows.support_agent(fake.url)
        client = await Client.connect(temporal_address, plugins=[OnionPlugin(agent)])
        queue = f"q-{uuid.uuid4().hex}"
        async with Worker(client, task_queue=queue, workflows=[onion_flows.Support]):
            inside = await client.execute_workflow(
                onion_flows.Support.run, "status of lookup 7", id=f"w-{uuid.uuid4().hex}", task_queue=queue
            )
        outside = await agent.run("status of lookup 7")
        assert inside == outside.output == "done: order 7 shipped"
        assert [_without_ids(r.body) for r in fake.requests[:2]] == [_without_ids(r.body) for r in fake.requests[2:]]


async def test_a_completed_workflow_replays_without_non_determinism(client: Client) -> None:
    """Temporal's Replayer, with the plugin and the default sandbox, replays the history of a finished run."""
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[onion_flows.AskWeather]):
        handle = await client.start_workflow(
            onion_flows.AskWeather.run, "weather in Oslo", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        await handle.result()
    history = await handle.fetch_history()
    replayer = Replayer(workflows=[onion_flows.AskWeather], plugins=[OnionPlugin(*onion_flows.AGENTS)])
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None


@pytest.mark.parametrize("approved", [False, True], ids=["straight", "paused"])
async def test_a_runs_own_output_type_works_inside_a_workflow(client: Client, approved: bool) -> None:
    """`agent.run(..., output_type=Forecast)` of an agent whose output_type is str: the model activity asks for a
    Forecast and the run answers one, also when the run paused for a person and resumed in the workflow."""
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[onion_flows.Forecasting]):
        handle = await client.start_workflow(
            onion_flows.Forecasting.run,
            args=["weather in Bern", approved],
            id=f"w-{uuid.uuid4().hex}",
            task_queue=queue,
            execution_timeout=timedelta(seconds=30),
        )
        if approved:
            for _ in range(200):
                if calls := await pending(handle):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the run never paused")
            await decide(handle, approve=[calls[0].id])
        assert await handle.result() == {"city": "Bern", "celsius": 18}


@pytest.mark.parametrize("session", [None, "s-1"], ids=["store", "session"])
async def test_an_agent_with_a_store_or_a_session_is_refused_at_once_naming_it(
    client: Client, session: str | None
) -> None:
    """Inside a workflow Temporal's history is the run's journal: an agent's store, or a run on a session, is
    refused when the run starts (it hung before), naming what to change; nothing is asked of the model."""
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[onion_flows.Kept]):
        handle = await client.start_workflow(
            onion_flows.Kept.run,
            args=["weather in Riga", session],
            id=f"w-{uuid.uuid4().hex}",
            task_queue=queue,
            execution_timeout=timedelta(seconds=20),
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    cause = failed.value.cause
    assert getattr(cause, "type", None) == "NotDeterministic", cause
    assert ("MemoryStore" if session is None else "session 's-1'") in str(cause)
    assert _activities(await handle.fetch_history()) == []
